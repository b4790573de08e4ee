#!/usr/bin/env bash
# examples/external_workspace/check.sh [BAZEL_TEST_ARGS...] -- builds and tests
# this workspace, which uses the klaunch checkout two levels up as
# @klaunch (local_repository), with klaunch's ./bazelw. Its output ends with
# the line "N passed, N failed, N skipped"; the exit status is Bazel's.
# The GPU test skips without a GPU.
#
# First, a regression check of .bazelignore: a convenience link left behind
# by another output base (bazel-<this folder> pointing at a tree with BUILD
# files) must not be read as a package of this workspace by //.... Then that
# each family's layout and cuobjdump tests exist with no BUILD line of ours.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

link=bazel-$(basename "$PWD")
grep -qx "$link" .bazelignore || {
  echo "check.sh: .bazelignore does not list $link (rename its line after the folder)" >&2
  exit 1
}
stale=$(mktemp -d)
saved=$(readlink "$link" 2>/dev/null || true)
restore() {
  rm -f "$link"
  [ -z "$saved" ] || ln -s "$saved" "$link"
  rm -rf "$stale"
}
trap restore EXIT
mkdir "$stale/pkg"
echo 'this is not a BUILD file (' >"$stale/pkg/BUILD"
rm -f "$link"
ln -s "$stale" "$link"
if ! ../../bazelw query //... >/dev/null 2>"$stale/query.err"; then
  cat "$stale/query.err" >&2
  echo "check.sh: //... read the stale $link link; is it in .bazelignore?" >&2
  exit 1
fi
restore
trap - EXIT

# The argument-order checks come with kl_fatbin: every family of specs/ has
# its layout and cuobjdump tests in //..., and no BUILD file here names them.
if grep -rnE --include=BUILD '^[^#]*_(layout|cuobjdump)_test' . ; then
  echo "check.sh: a BUILD file of this workspace names a check kl_fatbin should make by itself" >&2
  exit 1
fi
tests=$(../../bazelw query 'tests(//...)' 2>/dev/null)
for spec in specs/*.yaml; do
  family=$(basename "$spec" .yaml)
  for t in layout cuobjdump; do
    grep -qx "//kernels:${family}_${t}_test" <<<"$tests" || {
      echo "check.sh: //... has no //kernels:${family}_${t}_test" >&2
      exit 1
    }
  done
done

exec ../../bazelw test //... "$@"
