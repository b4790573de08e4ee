#!/usr/bin/env bash
# bench/mla/hopper_gpu_run.sh -- one GPU call for the sm_90a MLA kernels (issue 12),
# run on the GPU machine from a staged folder that holds:
#   mla_fast_test   //tests/mla_attention:mla_fast_test (static, fatbins embedded)
#   mla_bench       //bench/mla:mla_bench of this tree
#   mla_bench_base  the same bench built on the tree before the change (optional:
#                   the same-run comparison of old and new kernels)
#   torch_baselines.py, table.py   from bench/mla
# Usage: bash hopper_gpu_run.sh STAGED_DIR [tests|bench|sanitize|all]...
# Writes logs to $OUT (or STAGED_DIR/results) and prints a short summary last.
set -uo pipefail
dir=$1
shift
out=$PWD/$dir/results  # bundled into $OUT/hopper_results.tgz at the end ($OUT takes 8 files at most)
mkdir -p "$out"
cd "$dir"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
has() { for s in "${steps[@]}"; do [ "$s" = "$1" ] || [ "$s" = all ] && return 0; done; return 1; }
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
if has tests; then
  ./mla_fast_test >"$out/mla_fast_test.txt" 2>&1
  summary+=("mla_fast_test rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/mla_fast_test.txt" | tr '\n' ' ')")
  grep -E '^\[  FAILED  \]' "$out/mla_fast_test.txt" | head -20
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool ./mla_fast_test --gtest_filter="${SAN_FILTER:-*_wgmma}" >"$out/sanitizer_$tool.txt" 2>&1
    summary+=("$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$out/sanitizer_$tool.txt" | tail -2 | tr '\n' ' ')")
  done
fi
if has bench; then
  only=${BENCH_ONLY:-attn_wgmma,gemm_wgmma}
  ./mla_bench --only "$only" --runs "${RUNS:-20}" --json "$out/mla_bench.json" >"$out/mla_bench.txt" 2>&1
  summary+=("mla_bench rc $?")
  if [ -x ./mla_bench_base ]; then
    ./mla_bench_base --only "$only" --runs "${RUNS:-20}" --json "$out/mla_bench_base.json" >"$out/mla_bench_base.txt" 2>&1
    summary+=("mla_bench_base rc $?")
  fi
  if [ "${TORCH:-1}" = 1 ]; then
    python3 torch_baselines.py --json "$out/torch_baselines.json" --sdpa-heads "${SDPA_HEADS:-16}" >"$out/torch_baselines.txt" 2>&1
    summary+=("torch rc $?")
  fi
fi
for s in "${summary[@]}"; do echo "$s"; done
for f in mla_bench mla_bench_base; do
  [ -s "$out/$f.txt" ] && { echo "== $f"; grep -E 'copy|wgmma|check' "$out/$f.txt"; }
done
[ -s "$out/torch_baselines.json" ] && { echo "== torch"; python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print({k: round(v.get('tflops') or v.get('gbps') or 0, 1) for k, v in d.items() if isinstance(v, dict)})" "$out/torch_baselines.json"; }
[ -n "${OUT:-}" ] && tar -C "$out" -czf "$OUT/hopper_results.tgz" .
exit 0
