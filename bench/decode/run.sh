#!/usr/bin/env bash
# bench/decode/run.sh [DECODE_BENCH_ARGS...] -- on the GPU machine, from the
# repository root, after tools/gpu/stage.sh has staged .gpu/ (it builds
# //bench/decode:decode_bench, tagged gpu):
#
#   bash bench/decode/run.sh
#
# Runs .gpu/bench/decode/decode_bench (klaunch's paged decode kernels
# against cuMemcpyDtoD bandwidth) and bench/decode/torch_sdpa.py (PyTorch
# SDPA decode over a contiguous cache at the same shape), then prints one
# table of each measure, its target and the ratio (bench/decode/table.py).
# Output, JSON and the table go to $OUT/decode/ when $OUT is set, else
# .gpu/results/decode/. Exits 1 when decode_bench failed (no GPU, a refused
# launch, split-KV output differing from the seed kernel's); missed targets
# are reported, not failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bin=.gpu/bench/decode/decode_bench
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; stage it first (bash tools/gpu/stage.sh, on the development machine)" >&2
  exit 1
fi
dir=${OUT:+$OUT/decode}
dir=${dir:-.gpu/results/decode}
mkdir -p "$dir"

status=0
echo "==================== decode_bench"
"$bin" --json "$dir/decode_bench.json" "$@" 2>&1 | tee "$dir/decode_bench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "==================== torch_sdpa.py"
python3 bench/decode/torch_sdpa.py --json "$dir/torch_sdpa.json" >"$dir/torch_sdpa.txt" 2>&1
rc=$?
tail -n 40 "$dir/torch_sdpa.txt"
[ "$rc" = 0 ] || echo "run.sh: torch_sdpa.py exited $rc (see $dir/torch_sdpa.txt)"

echo "==================== paged decode: targets"
if [ -s "$dir/decode_bench.json" ]; then
  torch_json=()
  [ -s "$dir/torch_sdpa.json" ] && torch_json=(--torch "$dir/torch_sdpa.json")
  python3 bench/decode/table.py "$dir/decode_bench.json" "${torch_json[@]}" | tee "$dir/table.md"
fi
exit "$status"
