#!/usr/bin/env bash
# ncu (clock control none) on one launch of each named kernel row: bash ncu_run.sh DIR ROW:KERNEL...
set -uo pipefail
dir=$1; shift
cd "$dir"
mkdir -p /tmp/prof
for spec in "$@"; do
  row=${spec%%:*}; kern=${spec##*:}
  timeout 150 ncu --clock-control none -k "regex:^${kern}\$" -c 1 --launch-skip 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    ./mla_bench --only "$row" --runs 3 > /tmp/prof/ncu_$row.txt 2>&1
  echo "== $row rc $?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|One or More|Active Warps|Eligible Warps" /tmp/prof/ncu_$row.txt | head -30
done
tar -C /tmp/prof -czf ${OUT:-/tmp}/ncu.tgz .
