#!/usr/bin/env bash
# tools/gpu/stage.sh [BAZEL_BUILD_ARGS...] -- stage the GPU tests and benchmarks
# for a machine that has a GPU but no Bazel, GoogleTest or Debian packages.
#
# Builds every cc_test and cc_binary under tests/, bench/ and tools/tune/ tagged "gpu"
# (GoogleTest and the project's libraries linked statically; libc and
# libstdc++ stay shared, the GPU machine's are newer; libcuda is dlopen'ed at
# run time) and copies into .gpu/:
#   .gpu/<package>/<name>            the binary
#   .gpu/<package>/<name>.runfiles/  its runfiles, symlinks resolved (the
#                                    fatbins and data it loads)
#   .gpu/kernels/*.fatbin            every fatbin, for hand runs
#   .gpu/cubins/*.cubin              every cubin of every kl_fatbin under kernels/,
#                                    tests/ and bench/ (each variant, each sm_),
#                                    for hand runs of cuobjdump and nvdisasm
#   .gpu/targets.tsv                 label, path, kind (test or binary)
#   .gpu/run.sh, .gpu/test_summary.py
#   .gpu/python/, .gpu/tests/python/ the Python launchers and their GPU test
#                                    (tools/gpu/stage_python.sh)
# Then, on the GPU machine, from the repository root: bash .gpu/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bazelw=./bazelw
stage=.gpu

# Only directories that hold packages can be query patterns.
patterns=()
for dir in tests bench tools/tune; do
  if [ -n "$(find "$dir" \( -name BUILD -o -name BUILD.bazel \) -print -quit 2>/dev/null)" ]; then
    patterns+=("//$dir/...")
  fi
done
if [ ${#patterns[@]} -eq 0 ]; then
  echo "stage: no packages under tests/, bench/ or tools/tune/" >&2
  exit 1
fi
universe=$(printf ' + %s' "${patterns[@]}")
universe=${universe# + }
# The tag exactly (attr matches the string "[tag1, tag2]").
query="kind('cc_(test|binary) rule', attr(tags, '[\[ ]gpu[,\]]', $universe))"
mapfile -t targets < <("$bazelw" query --output=label "$query" 2>/dev/null)
if [ ${#targets[@]} -eq 0 ]; then
  echo "stage: no cc_test or cc_binary tagged gpu in ${patterns[*]}" >&2
  exit 1
fi
mapfile -t kinds < <("$bazelw" query --output=label_kind "set(${targets[*]})" 2>/dev/null)

# Every kl_fatbin's manifest (family, variant, fatbin, targets) names its
# cubins; they are built with it.
mapfile -t manifests < <("$bazelw" query --output=label \
  "attr(output_group, '^manifest\$', kind(filegroup, //kernels/... + $universe))" 2>/dev/null)
cubin_groups=("${manifests[@]/%_manifest/_cubins}")

# Static: the GPU machine has neither GoogleTest nor Bazel's _solib tree.
"$bazelw" build --dynamic_mode=off "$@" "${targets[@]}" //kernels:all "${manifests[@]}" "${cubin_groups[@]}"

rm -rf "$stage"
mkdir -p "$stage/kernels"
: >"$stage/targets.tsv"
for line in "${kinds[@]}"; do
  # "cc_test rule //tests/paged_decode:paged_decode_test"
  label=${line##* }
  kind=binary
  case "$line" in cc_test*) kind=test ;; esac
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  mkdir -p "$stage/$pkg"
  cp -L "bazel-bin/$pkg/$name" "$stage/$pkg/$name"
  if [ -d "bazel-bin/$pkg/$name.runfiles" ]; then
    cp -rL "bazel-bin/$pkg/$name.runfiles" "$stage/$pkg/$name.runfiles"
  fi
  printf '%s\t%s\t%s\n' "$label" "$pkg/$name" "$kind" >>"$stage/targets.tsv"
done
cp -L bazel-bin/kernels/*.fatbin "$stage/kernels/" 2>/dev/null || true
mkdir -p "$stage/cubins"
for label in "${manifests[@]}"; do
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  while IFS=$'\t' read -r _family _variant fatbin archs; do
    for arch in ${archs//,/ }; do
      case "$arch" in sm_*) cp -L "bazel-bin/${fatbin%.fatbin}.$arch.cubin" "$stage/cubins/" ;; esac
    done
  done <"bazel-bin/$pkg/${name%_manifest}.fatbins.tsv"
done
cp tools/gpu/run.sh "$stage/run.sh"
cp tools/test_summary.py "$stage/test_summary.py"
bash tools/gpu/stage_python.sh "$@"

echo "staged $(wc -l <"$stage/targets.tsv") binaries and $(find "$stage/cubins" -name '*.cubin' | wc -l) cubins in $stage/ ($(du -sh "$stage" | cut -f1)):"
cut -f1,3 "$stage/targets.tsv" | sed 's/^/  /'
echo "on the GPU machine, from the repository root: bash $stage/run.sh"
