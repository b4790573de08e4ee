#!/usr/bin/env bash
# tests/bazel_rules/new_family_check.sh -- a new kernel family added by
# following README.md's "Adding a kernel" literally, on a clean clone of this
# checkout's HEAD, then the same family in a workspace of its own (issue 14;
# .ci/run runs it). The family is tests/bazel_rules/new_family/: rms_norm,
# its spec, its kernel, its emulated test, laid out as the README says.
#
#  1. README steps 1-2 (spec, kernel): //:generate refuses the spec, naming
#     it, and writes nothing;
#  2. step 3 (the kernels/BUILD line), 4 (generate, commit), 5 (the test):
#     ./bazelw test //... passes with 0 failed, and ran
#     //specs:rms_norm_freshness_test, //kernels:rms_norm_layout_test,
#     //kernels:rms_norm_cuobjdump_test and //tests/rms_norm:rms_norm_emulated_test;
#  3. the spec edited, not regenerated: the freshness tests fail, naming the
#     stale header;
#  4. a parameter of the wrong type: nvcc names kernels/rms_norm/<file>.cu and
#     its line, and the spec's file:line:col (not the unity file);
#  5. x and w (both const bf16*) swapped in a hand-written list: refused;
#  6. the family in a copy of examples/external_workspace: its spec, its
#     kernel and one kl_fatbin line give it layout and cuobjdump tests, which
#     pass.
#
# The default target architectures, so that with a disk cache the clone
# builds only what the new family changes: KL_DISK_CACHE=DIR passes
# --disk_cache=DIR to every Bazel command here (.ci/run gives the one its
# main run uses). Prints "new_family_check: ok" last; exits 1 at the first
# step that fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
fixture=$here/new_family

work=$(mktemp -d)
cleanup() {
  for d in "$work/myproj" "$work/klaunch"; do
    # --expunge: the output bases of throwaway directories go too.
    [ -d "$d" ] && (cd "$d" && "$work/klaunch/bazelw" clean --expunge) >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
log=$work/log
fail() {
  echo "new_family_check: FAILED: $*" >&2
  [ -f "$log" ] && tail -n 40 "$log" >&2
  exit 1
}
step() { echo "new_family_check: $* ($(date -u +%T))"; }
# bz COMMAND ARGS...: ./bazelw of the clone (or of klaunch for the workspace).
bz() {
  local cmd=$1
  shift
  "$work/klaunch/bazelw" "$cmd" ${KL_DISK_CACHE:+--disk_cache="$KL_DISK_CACHE"} "$@"
}

git clone -q "$repo" "$work/klaunch"
cd "$work/klaunch"
git config user.email new-family-check@localhost
git config user.name new_family_check
cp "$fixture/specs/rms_norm.yaml" specs/
mkdir kernels/rms_norm
cp "$fixture/kernels/rms_norm/rms_norm_bf16.cu" kernels/rms_norm/

step "1. spec and kernel without the kernels/BUILD line: //:generate refuses the spec"
if bz run //:generate >"$log" 2>&1; then fail "//:generate accepted specs/rms_norm.yaml without kernels"; fi
grep -q '^specs/rms_norm.yaml: error: no kernels are built for family rms_norm' "$log" || fail "no error naming specs/rms_norm.yaml"
[ ! -e generated/klaunch/rms_norm.h ] || fail "generated/klaunch/rms_norm.h was written"

step "2. the kernels/BUILD line, //:generate, commit, the test: ./bazelw test //... passes"
sed -i 's|^_FAMILIES = {$|_FAMILIES = {\n    "rms_norm": ["d1024"],|' kernels/BUILD
grep -q '^    "rms_norm": \["d1024"\],$' kernels/BUILD || fail "could not add the kernels/BUILD line"
[ "$(git diff --numstat -- kernels/BUILD)" = "$(printf '1\t0\tkernels/BUILD')" ] || fail "the kernels/BUILD change is not one line"
bz run //:generate >"$log" 2>&1 || fail "//:generate"
[ -f generated/klaunch/rms_norm.h ] && [ -f generated/klaunch/rms_norm.cuh ] || fail "no generated/klaunch/rms_norm.h or .cuh"
grep -q '^rms_norm  *d1024 ' "$log" || fail "//:generate's table has no rms_norm fatbin"
mkdir tests/rms_norm
cp "$fixture/tests/rms_norm/BUILD" "$fixture/tests/rms_norm/rms_norm_emulated_test.cc" tests/rms_norm/
git add -A && git commit -qm "rms_norm, as README.md says" || fail "git commit"
[ "$(git diff --name-only HEAD~1 -- '*BUILD' | sort | tr '\n' ' ')" = "kernels/BUILD tests/rms_norm/BUILD " ] ||
  fail "BUILD files other than kernels/BUILD (one line) and tests/rms_norm/BUILD changed"
bz test //... >"$log" 2>&1 || fail "./bazelw test //... with the new family"
tail -n 1 "$log" | grep -q ' 0 failed' || fail "./bazelw test //... with the new family"
for t in //specs:rms_norm_freshness_test //kernels:rms_norm_layout_test //kernels:rms_norm_cuobjdump_test \
  //tests/rms_norm:rms_norm_emulated_test //tests/docs:kernel_headers_test //tests/emu:coverage_test; do
  grep -q "^$t .*PASSED" "$log" || fail "$t did not run and pass"
done
tail -n 1 "$log"

step "3. the spec edited without //:generate: the freshness tests fail"
cp specs/rms_norm.yaml "$work/spec"
sed -i 's|^doc: Root-mean-square|doc: The root-mean-square|' specs/rms_norm.yaml
tests="//specs:rms_norm_freshness_test //tests/codegen:freshness_test"
# shellcheck disable=SC2086
if bz test $tests >"$log" 2>&1; then fail "the freshness tests passed on a stale header"; fi
grep -q 'FAILED //specs:rms_norm_freshness_test' "$log" || fail "rms_norm_freshness_test did not fail"
grep -q 'generated/klaunch/rms_norm.h is stale' "$log" || fail "no message naming the stale header"
grep -q 'FAILED //tests/codegen:freshness_test' "$log" || fail "tests/codegen:freshness_test did not fail"
cp "$work/spec" specs/rms_norm.yaml

step "4. a parameter of the wrong type: the message names the kernel's file and line"
cat >kernels/rms_norm/rms_norm_bf16.cu <<'CU'
#include "klaunch/rms_norm.cuh"

extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16 *x, const __nv_bfloat16 *w, __nv_bfloat16 *y,
                                         uint64_t n, float eps) {
    if (threadIdx.x < n) y[threadIdx.x] = __float2bfloat16_rn(__bfloat162float(x[threadIdx.x]) * eps);
}
CU
if bz build //kernels:rms_norm >"$log" 2>&1; then fail "a u64 n compiled against the spec's u32"; fi
grep -q 'parameter 4 (n): the definition.s type is not uint32_t (spec type u32) \[specs/rms_norm.yaml:19:9\]' "$log" ||
  fail "no message naming parameter n and specs/rms_norm.yaml:19:9"
grep -q 'at line 3 of kernels/rms_norm/rms_norm_bf16.cu' "$log" || fail "no message naming kernels/rms_norm/rms_norm_bf16.cu:3"

step "5. x and w swapped (both const bf16*): refused"
sed -i 's|const __nv_bfloat16 \*x, const __nv_bfloat16 \*w|const __nv_bfloat16 *w, const __nv_bfloat16 *x|; s|uint64_t n|uint32_t n|' \
  kernels/rms_norm/rms_norm_bf16.cu
if bz build //kernels:rms_norm >"$log" 2>&1; then fail "a same-type swap compiled"; fi
grep -q 'kernels/rms_norm/rms_norm_bf16.cu(3): error: static assertion failed with "klaunch: kernel rms_norm_bf16, parameter 1 is named w; the spec.s parameter 1 is x (const bf16\*) \[specs/rms_norm.yaml:16:16\]' "$log" ||
  fail "no message naming the swap at kernels/rms_norm/rms_norm_bf16.cu(3)"
git checkout -q -- kernels/rms_norm/rms_norm_bf16.cu

step "6. the family in a workspace of its own: spec, kernel, one kl_fatbin line"
ws=$work/myproj
cp -r "$repo/examples/external_workspace" "$ws"
rm -f "$ws"/bazel-*
sed -i 's|^bazel-external_workspace$|bazel-myproj|' "$ws/.bazelignore"
sed -i "s|path = \"../..\",|path = \"$work/klaunch\",|" "$ws/WORKSPACE"
cp "$fixture/specs/rms_norm.yaml" "$ws/specs/"
mkdir "$ws/kernels/rms_norm"
cp "$fixture/kernels/rms_norm/rms_norm_bf16.cu" "$ws/kernels/rms_norm/"
printf '\nkl_fatbin(name = "rms_norm", variants = ["d1024"])\n' >>"$ws/kernels/BUILD"
(cd "$ws" && bz test //...) >"$log" 2>&1 || fail "the workspace's tests"
tail -n 1 "$log" | grep -q ' 0 failed' || fail "the workspace's tests"
for t in //kernels:rms_norm_layout_test //kernels:rms_norm_cuobjdump_test //kernels:saxpy_bf16_layout_test; do
  grep -q "^$t .*PASSED" "$log" || fail "$t did not run and pass in the workspace"
done
tail -n 1 "$log"

echo "new_family_check: ok"
