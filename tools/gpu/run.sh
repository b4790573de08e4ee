#!/usr/bin/env bash
# bash .gpu/run.sh [FILTER] -- on the GPU machine, from the repository root:
# runs what tools/gpu/stage.sh staged, each in its runfiles directory as
# `bazel test` would (TEST_SRCDIR, XML_OUTPUT_FILE set), and prints a summary.
# FILTER, if given, keeps the labels that contain it.
# Output and GoogleTest XML go to $OUT/gpu/<package.name>/{test.log,test.xml}
# (one level: the device runner returns shallow trees only) when $OUT is set,
# else to .gpu/results/; each binary's output is also shown.
# Each binary may run KL_GPU_TIMEOUT seconds (default 600).
# Exits 1 when a binary failed.
set -uo pipefail

stage=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=${OUT:+$OUT/gpu}
results=${results:-$stage/results}
timeout_s=${KL_GPU_TIMEOUT:-600}
filter=${1:-}

rm -rf "$results"
mkdir -p "$results"
ok=0
bad=0
rows=()
while IFS=$'\t' read -r label path kind; do
  [ -n "$label" ] || continue
  case "$label" in *"$filter"*) ;; *) continue ;; esac
  # KL_GPU_KIND=test runs the tests only (benchmarks have run scripts of their own).
  [ -z "${KL_GPU_KIND:-}" ] || [ "$kind" = "$KL_GPU_KIND" ] || continue
  dir="$results/${path//\//.}"
  mkdir -p "$dir"
  runfiles="$stage/$path.runfiles"
  cwd="$runfiles/klaunch"
  [ -d "$cwd" ] || cwd="$stage"
  echo "==================== $label"
  start=$(date +%s)
  (
    cd "$cwd" &&
      TEST_SRCDIR="$runfiles" RUNFILES_DIR="$runfiles" TEST_WORKSPACE=klaunch \
        TEST_TMPDIR="$(mktemp -d)" XML_OUTPUT_FILE="$dir/test.xml" \
        timeout "$timeout_s" "$stage/$path"
  ) 2>&1 | tee "$dir/test.log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - start))
  if [ "$kind" = test ] && [ ! -s "$dir/test.xml" ]; then
    # As Bazel does for a test that writes no XML: one case for the binary.
    if [ "$rc" = 0 ]; then body=""; else body="<failure message=\"exited with code $rc\"/>"; fi
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="%s"><testcase name="%s">%s</testcase></testsuite></testsuites>\n' \
      "$path" "$path" "$body" >"$dir/test.xml"
  fi
  if [ "$rc" = 0 ]; then
    ok=$((ok + 1))
    rows+=("PASS  $label (${secs}s)")
  else
    bad=$((bad + 1))
    why="exit $rc"
    [ "$rc" = 124 ] && why="timed out after ${timeout_s}s"
    rows+=("FAIL  $label ($why, ${secs}s; log: $dir/test.log)")
  fi
done <"$stage/targets.tsv"

echo "==================== summary"
printf '%s\n' "${rows[@]}"
echo "binaries: $ok ok, $bad failed"
if command -v python3 >/dev/null 2>&1; then
  python3 "$stage/test_summary.py" --testlogs "$results" >"$results/summary.txt" || true
  cat "$results/summary.txt"
fi
[ "$bad" = 0 ]
