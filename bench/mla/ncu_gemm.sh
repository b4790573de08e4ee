#!/usr/bin/env bash
# bench/mla/ncu_gemm.sh -- on the GPU machine, from the repository root,
# after tools/gpu/stage.sh: ncu (--clock-control none) on one launch of
# grouped_gemm_tma at both mla_bench GEMM shapes (gemm_tma: k 128 / n 512;
# gemm_tma_t: k 512 / n 128) and of torch.bmm's kernel at the same shapes
# (bench/mla/torch_baselines.py --only), with DRAM read and write bytes
# counted apart: what the GEMM targets of issue 20 are measured against.
# Reports go to $OUT/ncu_gemm/ (else .gpu/results/ncu_gemm/); prints the
# lines that compare them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dir=${OUT:+$OUT/ncu_gemm}
dir=${dir:-.gpu/results/ncu_gemm}
mkdir -p "$dir"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
args=(--clock-control none -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis
  --section WarpStateStats --section SchedulerStats --section LaunchStats
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sector_hit_rate.pct,smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct)
keys='Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|dram__bytes|lts__t_sectors|lts__t_sector_hit|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Block Size|Grid Size|Registers Per'
for row in gemm_tma gemm_tma_t; do
  # Launch 1 is mla_bench's check, 2-3 its warm-up: the 4th is a timed one.
  timeout 120 "$ncu" "${args[@]}" -k 'regex:^grouped_gemm_tma$' --launch-skip 3 \
    .gpu/bench/mla/mla_bench --only "$row" --runs 3 >"$dir/$row.txt" 2>&1
  echo "== $row (exit $?)"
  grep -E "$keys" "$dir/$row.txt"
done
for row in bmm_absorb bmm_absorb_t; do
  # Warm-up 3 calls, then the timed ones: the 5th GEMM launch of the process.
  timeout 120 "$ncu" "${args[@]}" -k 'regex:gemm|nvjet|xmma|cutlass' --launch-skip 4 \
    python3 bench/mla/torch_baselines.py --only "$row" --runs 3 >"$dir/$row.txt" 2>&1
  echo "== torch $row (exit $?)"
  grep -E "^  [a-zA-Z_0-9]+.*\(" "$dir/$row.txt" | head -2
  grep -E "$keys" "$dir/$row.txt"
done
