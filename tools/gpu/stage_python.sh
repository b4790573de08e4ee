#!/usr/bin/env bash
# tools/gpu/stage_python.sh [BAZEL_BUILD_ARGS...] -- stage the Python
# launchers for a GPU machine that has Python and PyTorch but no Bazel.
# tools/gpu/stage.sh runs it last; alone, it stages only these (about 20 MB:
# a quick GPU run carries .gpu/python and .gpu/tests/python only).
#
# Builds //kernels:<family>_python for every family (the module and its
# library, the fatbins embedded) and writes:
#   .gpu/python/klaunch/              the runtime package, with
#                                     include/klaunch/klaunch.h (its exceptions)
#   .gpu/python/klaunch_<family>.py   the generated modules
#   .gpu/python/libklaunch_<family>.so
#   .gpu/python/junit_unittest.py     the tests' runner
#   .gpu/tests/python/gpu_test        tests/python/gpu_test.py with
#                                     PYTHONPATH=.gpu/python, a line in
#                                     .gpu/targets.tsv (so .gpu/run.sh runs it)
# Then, on the GPU machine, from the repository root:
#   bash .gpu/run.sh python                                   the GPU test
#   PYTHONPATH=.gpu/python python3 examples/python/paged_decode_vs_sdpa.py
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

stage=.gpu
mapfile -t families < <(./bazelw query --output=label 'kind(py_library, attr(name, "_python$", //kernels:*))' 2>/dev/null)
if [ ${#families[@]} -eq 0 ]; then
  echo "stage_python: no //kernels:<family>_python targets" >&2
  exit 1
fi
./bazelw build "$@" "${families[@]}"

rm -rf "$stage/python" "$stage/tests/python"
mkdir -p "$stage/python/klaunch/include/klaunch" "$stage/tests/python"
cp python/klaunch/*.py "$stage/python/klaunch/"
cp include/klaunch/klaunch.h "$stage/python/klaunch/include/klaunch/"
for label in "${families[@]}"; do
  family=${label##*:}
  family=${family%_python}
  cp -L "bazel-bin/kernels/python/klaunch_$family.py" "bazel-bin/kernels/python/libklaunch_$family.so" "$stage/python/"
done
cp tools/junit_unittest.py "$stage/python/"
cp tests/python/gpu_test.py "$stage/tests/python/gpu_test.py"
cat >"$stage/tests/python/gpu_test" <<'EOF'
#!/usr/bin/env bash
# tests/python/gpu_test.py with the staged Python launchers (tools/gpu/stage_python.sh).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHONPATH="$here/../../python${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$here/gpu_test.py" "$@"
EOF
chmod +x "$stage/tests/python/gpu_test"
touch "$stage/targets.tsv"
grep -v '^//tests/python:gpu_test' "$stage/targets.tsv" >"$stage/targets.tsv.new" || true
printf '//tests/python:gpu_test\ttests/python/gpu_test\ttest\n' >>"$stage/targets.tsv.new"
mv "$stage/targets.tsv.new" "$stage/targets.tsv"
[ -f "$stage/run.sh" ] || cp tools/gpu/run.sh "$stage/run.sh"
[ -f "$stage/test_summary.py" ] || cp tools/test_summary.py "$stage/test_summary.py"
echo "staged the Python launchers of ${#families[@]} families in $stage/python ($(du -sh "$stage/python" | cut -f1))"
