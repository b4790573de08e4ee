#!/usr/bin/env bash
# bench/launch/run.sh [LAUNCH_COST_ARGS...] -- on the GPU machine, from the
# repository root, after tools/gpu/stage.sh has staged .gpu/ (it builds
# //bench/launch:launch_cost, tagged gpu):
#
#   bash bench/launch/run.sh
#
# Runs .gpu/bench/launch/launch_cost (klaunch: raw cuLaunchKernel, the
# wrapper with the CUDA, recording and no-op backends, the checks alone) and
# bench/launch/alternatives.py (CuPy RawKernel, Triton), then prints one
# table of host time per launch with each median as a multiple of raw
# cuLaunchKernel's (bench/launch/table.py). Output, JSON and the table go to
# $OUT/launch/ when $OUT is set, else .gpu/results/launch/.
# Exits 1 when launch_cost failed (a failed launch or wrong kernel output);
# a framework alternatives.py could not run is reported in the table.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bin=.gpu/bench/launch/launch_cost
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; stage it first (bash tools/gpu/stage.sh, on the development machine)" >&2
  exit 1
fi
dir=${OUT:+$OUT/launch}
dir=${dir:-.gpu/results/launch}
mkdir -p "$dir"

status=0
echo "==================== launch_cost"
"$bin" --json "$dir/launch_cost.json" "$@" 2>&1 | tee "$dir/launch_cost.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "==================== alternatives.py"
# The JSON goes to its file; the console gets the frameworks' messages.
python3 bench/launch/alternatives.py --json "$dir/alternatives.json" >/dev/null 2>"$dir/alternatives.log"
alt=$?
tail -n 20 "$dir/alternatives.log"
[ "$alt" = 0 ] || echo "run.sh: alternatives.py exited $alt (see $dir/alternatives.log)"

echo "==================== host time per launch"
if [ -s "$dir/launch_cost.json" ]; then
  alt_json=()
  [ -s "$dir/alternatives.json" ] && alt_json=("$dir/alternatives.json")
  python3 bench/launch/table.py "$dir/launch_cost.json" "${alt_json[@]}" | tee "$dir/table.md"
fi
exit "$status"
