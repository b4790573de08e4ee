#!/usr/bin/env bash
# tools/gpu/sanitize.sh -- compute-sanitizer memcheck and racecheck over the
# GPU tests of the copy-engine kernels (tensor maps, bulk copies, mbarriers),
# on the GPU machine after tools/gpu/stage.sh, from the repository root.
# Each line below is a staged test binary, a tool and a GoogleTest filter
# that keeps its cases small enough for that tool (each run at most 60 s). Logs go
# to $OUT/sanitize/ (else .gpu/results/sanitize/); prints one line per run
# with its ERROR or RACECHECK SUMMARY. Exits 1 when any run reported an
# error or a hazard, or failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dir=${OUT:+$OUT/sanitize}
dir=${dir:-.gpu/results/sanitize}
mkdir -p "$dir"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# binary, tool, filter
runs=(
  ".gpu/tests/mla_prefill/mla_tma_test memcheck *Copies*"
  ".gpu/tests/mla_prefill/mla_tma_test racecheck *Copies*"
  ".gpu/tests/mla_prefill/mla_copy_engine_test memcheck *"
  ".gpu/tests/mla_prefill/mla_copy_engine_test racecheck *OneKey*:*Identity*"
  ".gpu/tests/paged_decode/paged_decode_test memcheck *GqaOffAlignmentCache*:*Fp8GqaInterleavedAndOffAlignmentCache*:*LargeScores*"
  ".gpu/tests/paged_decode/paged_decode_test racecheck *Fp8GqaInterleavedAndOffAlignmentCache*:*LargeScores*"
  ".gpu/tests/mla_decode/mla_decode_test memcheck *RaggedLengths*:*Graph*deepseek*:*TwoTokens*tma*"
  ".gpu/tests/mla_decode/mla_decode_test racecheck *RaggedLengths*deepseek*:*TwoTokens*mistral*tma*"
)
status=0
for r in "${runs[@]}"; do
  read -r bin tool filter <<<"$r"
  if [ ! -x "$bin" ]; then
    echo "sanitize: $bin is not staged; skipped"
    continue
  fi
  log="$dir/$(basename "$bin").$tool.log"
  timeout 60 "$cs" --tool "$tool" --error-exitcode 99 "$bin" --gtest_filter="$filter" >"$log" 2>&1
  rc=$?
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)
  tests=$(grep -E '^\[  (PASSED|FAILED)  \]' "$log" | tr '\n' ' ')
  echo "sanitize: $(basename "$bin") [$filter] $tool: exit $rc; $summary; $tests"
  [ "$rc" = 0 ] || status=1
done
exit $status
