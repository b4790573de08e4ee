#!/usr/bin/env bash
# bench/mla/run.sh [MLA_BENCH_ARGS...] -- on the GPU machine, from the
# repository root, after tools/gpu/stage.sh has staged .gpu/ (it builds
# //bench/mla:mla_bench, tagged gpu, into .gpu/bench/mla/mla_bench):
#
#   bash bench/mla/run.sh            (e.g. bash bench/mla/run.sh --runs 50)
#
# Runs mla_bench (the MLA prefill kernels and cuMemcpyDtoD) and
# bench/mla/torch_baselines.py (matmul, bmm, SDPA, copy in PyTorch), then
# prints one table of each measure, its target and the ratio
# (bench/mla/table.py). Output, JSON and the table go to $OUT/mla/ when $OUT
# is set, else .gpu/results/mla/. Exits 1 when mla_bench failed (no GPU, a
# refused launch, a kernel disagreeing with the seed's); missed targets are
# reported, not failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bin=.gpu/bench/mla/mla_bench
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; stage it first (bash tools/gpu/stage.sh, on the development machine)" >&2
  exit 1
fi
dir=${OUT:+$OUT/mla}
dir=${dir:-.gpu/results/mla}
mkdir -p "$dir"

status=0
echo "==================== mla_bench"
"$bin" --json "$dir/mla_bench.json" "$@" 2>&1 | tee "$dir/mla_bench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "==================== torch_baselines.py"
python3 bench/mla/torch_baselines.py --json "$dir/torch_baselines.json" >"$dir/torch_baselines.txt" 2>&1
rc=$?
tail -n 60 "$dir/torch_baselines.txt"
[ "$rc" = 0 ] || echo "run.sh: torch_baselines.py exited $rc (see $dir/torch_baselines.txt)"

echo "==================== MLA prefill: targets"
if [ -s "$dir/mla_bench.json" ]; then
  torch_json=()
  [ -s "$dir/torch_baselines.json" ] && torch_json=(--torch "$dir/torch_baselines.json")
  python3 bench/mla/table.py "$dir/mla_bench.json" "${torch_json[@]}" | tee "$dir/table.md"
fi
exit "$status"
