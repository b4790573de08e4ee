#!/usr/bin/env bash
# bench/decode/gpu_run.sh -- the decode family's whole GPU run in one call
# (issue 11), from a folder staged by bench/decode/gpu_stage.sh (binaries,
# scripts). On the GPU machine:
#
#   bash DIR/gpu_run.sh            (DIR: the staged folder; output to $OUT)
#
# In order of what matters if the time limit cuts it short:
#   1. the decode GPU tests (paged_decode_test, paged_decode_split_test:
#      every kernel of the family against the float64 references);
#   2. decode_bench + torch_sdpa.py + table.py (copy, SDPA, bf16/fp8
#      tokens/s at 32 x 4096, the 1 x 32768 split sweep, the rule's pick);
#   3. compute-sanitizer memcheck and racecheck on the changed kernels at
#      small shapes (gtest filters of the tests above);
#   4. ncu --clock-control none on the persistent _mma kernels at 32 x
#      4096 (the first launch: the 132-block grid), if time is left.
# Each part's output goes to $OUT/decode/<part>.txt; $OUT/decode.tgz
# bundles them. Missed targets are reported, not failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$here/results}
dir=$out/decode
mkdir -p "$dir"
summary=$dir/summary.txt
: >"$summary"

part() { # part NAME SECONDS COMMAND...
  local name=$1 secs=$2
  shift 2
  local start=$(date +%s)
  echo "==================== $name" | tee -a "$summary"
  timeout "$secs" "$@" >"$dir/$name.txt" 2>&1
  local rc=$?
  tail -n 30 "$dir/$name.txt" >>"$summary"
  echo "[$name: exit $rc, $(($(date +%s) - start)) s]" | tee -a "$summary"
}

nvidia-smi >"$dir/nvidia-smi.txt" 2>&1
head -n 15 "$dir/nvidia-smi.txt" >>"$summary"
part test_paged_decode 130 "$here/paged_decode_test"
part test_paged_decode_split 110 "$here/paged_decode_split_test"
part bench 200 bash -c "'$here/decode_bench' --json '$dir/decode_bench.json' &&
  python3 '$here/torch_sdpa.py' --json '$dir/torch_sdpa.json' > '$dir/torch_sdpa_out.txt' 2>&1;
  python3 '$here/table.py' '$dir/decode_bench.json' --torch '$dir/torch_sdpa.json'"
# Small shapes on both paths of every _mma kernel: off-alignment (general
# path), interleaved fp8 and large scores at block size 16 (fast path).
small='*GqaOffAlignmentCache*:*Fp8GqaInterleavedAndOffAlignmentCache*:*LargeScores*'
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
part memcheck 45 "$cs" --tool memcheck --error-exitcode 9 "$here/paged_decode_test" --gtest_filter="$small"
part memcheck_split 45 "$cs" --tool memcheck --error-exitcode 9 "$here/paged_decode_split_test" --gtest_filter="$small"
part racecheck 45 "$cs" --tool racecheck --error-exitcode 9 "$here/paged_decode_test" --gtest_filter="$small"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for k in bf16 fp8; do
  part "ncu_$k" 50 "$ncu" --clock-control none -k "paged_decode_persist_${k}_gqa_mma" -c 1 --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    "$here/decode_bench" --runs 3 --only-gqa
done
tar czf "$out/decode.tgz" -C "$out" decode
echo "bundled $(du -sh "$out/decode.tgz" | cut -f1)"
