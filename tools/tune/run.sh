#!/usr/bin/env bash
# tools/tune/run.sh [PART] [TUNE_ARGS...] -- on the GPU machine, from the
# repository root, after tools/gpu/stage.sh has staged .gpu/ (it builds
# //tools/tune:tune, tagged gpu):
#
#   bash tools/tune/run.sh              the targets' grids: paged decode
#                                       (bf16, fp8) and MLA prefill (absorbed
#                                       attention, grouped GEMM), < 10 min
#   bash tools/tune/run.sh mla_decode   MLA decode (bf16, fp8), a call of its own
#   bash tools/tune/run.sh all          every operation in one run (no part limits)
#   bash tools/tune/run.sh table        a table for this card and its regret: two
#                                       runs of all (table_a, table_b) merged by
#                                       builtin --merge into table.choices, then a
#                                       third (table_judge) given it by --table,
#                                       whose "--table" lines are the regret of a
#                                       table measured in earlier runs: what the
#                                       table does compiled in. < 10 min on an H100
#
# Runs .gpu/tools/tune/tune on the default grid (tools/tune/ops.h) for each
# part, each under a time limit (KL_TUNE_PAGED_S, KL_TUNE_PREFILL_S,
# KL_TUNE_MLA_DECODE_S seconds); the table is rewritten after every shape,
# so a part cut short keeps the shapes it did. Writes to $OUT/tune/ (else
# .gpu/results/tune/): <part>.choices (the table, klaunch-choices 1),
# <part>.txt (per shape: the best and the rule's pick; per operation and
# policy: the regrets of the rule, the compiled-in table and the new one),
# <part>.progress (stderr). //tools/tune:builtin compiles tables in.
# Extra arguments go to every part's tune (e.g. --quick, --runs 16).
# Exits 1 when a part failed (no GPU, a refused launch); the time limit
# ending a part is reported, not failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bin=.gpu/tools/tune/tune
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; stage it first (bash tools/gpu/stage.sh, on the development machine)" >&2
  exit 1
fi
dir=${OUT:+$OUT/tune}
dir=${dir:-.gpu/results/tune}
mkdir -p "$dir"

which=${1:-targets}
case "$which" in
  targets | mla_decode | all | table) shift || true ;;
  -*) which=targets ;;
  *) echo "run.sh: unknown part '$which' (targets, mla_decode, all or table)" >&2; exit 2 ;;
esac

status=0
part() { # part NAME SECONDS OPERATIONS
  local name=$1 secs=$2 ops=$3
  shift 3
  echo "==================== tune $name ($ops; at most $secs s)"
  local args=(--out "$dir/$name.choices")
  [ "$ops" = all ] || args+=(--only "$ops")
  timeout "$secs" "$bin" "${args[@]}" "${extra[@]}" >"$dir/$name.txt" 2>"$dir/$name.progress"
  local rc=$?
  if [ "$rc" = 124 ]; then
    echo "run.sh: tune $name hit its $secs s limit; $dir/$name.choices holds the shapes done"
  elif [ "$rc" != 0 ]; then
    echo "run.sh: tune $name exited $rc:"
    tail -n 5 "$dir/$name.progress"
    status=1
  fi
  # The regrets (or, cut short, the last shapes' lines).
  if grep -q '^tune: regret' "$dir/$name.txt"; then
    sed -n '/^tune: regret/,/^   new table/p' "$dir/$name.txt"
  else
    tail -n 12 "$dir/$name.txt"
  fi
}
extra=("$@")
case "$which" in
  targets)
    part paged "${KL_TUNE_PAGED_S:-380}" paged_decode_gqa_bf16,paged_decode_gqa_fp8
    part prefill "${KL_TUNE_PREFILL_S:-180}" mla_absorbed_attention,grouped_gemm
    ;;
  mla_decode)
    part mla_decode "${KL_TUNE_MLA_DECODE_S:-560}" mla_decode_attn_bf16,mla_decode_attn_fp8
    ;;
  all)
    part all "${KL_TUNE_ALL_S:-3600}" all
    ;;
  table)
    merge=.gpu/tools/tune/builtin
    if [ ! -x "$merge" ]; then
      echo "run.sh: $merge is missing; stage it first (bash tools/gpu/stage.sh)" >&2
      exit 1
    fi
    part table_a "${KL_TUNE_ALL_S:-3600}" all
    part table_b "${KL_TUNE_ALL_S:-3600}" all
    name=$(sed -n 's/^device [^ ]* .* name //p' "$dir/table_a.choices" | head -n 1)
    echo "==================== merge table_a table_b -> $dir/table.choices"
    if ! "$merge" --merge "$dir/table.choices" "$dir/table_a.choices" "$dir/table_b.choices" \
      --note "${name//_/ }, $(date -u +%F): bash tools/tune/run.sh table (table_a, table_b)"; then
      echo "run.sh: the merge failed" >&2
      exit 1
    fi
    extra+=(--table "$dir/table.choices")
    part table_judge "${KL_TUNE_ALL_S:-3600}" all
    ;;
esac
exit $status
