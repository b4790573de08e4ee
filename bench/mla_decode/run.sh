#!/usr/bin/env bash
# bench/mla_decode/run.sh [MLA_DECODE_BENCH_ARGS...] -- on the GPU machine,
# from the repository root, after (on the development machine)
#   bash tools/gpu/stage.sh                     (builds //bench/mla_decode:mla_decode_bench,
#                                                tagged gpu, into .gpu/bench/mla_decode/)
#   bash bench/mla_decode/flashinfer_prep.sh    (FlashInfer's trimmed wheel, prebuilt
#                                                MLA modules and tvm-ffi into .fi/)
# and a device run that carries .gpu and .fi:
#
#   bash bench/mla_decode/run.sh            (e.g. bash bench/mla_decode/run.sh --runs 50)
#
# Runs mla_decode_bench (whole MLA decode steps of every attention launcher
# the GPU loads, and cuMemcpyDtoD), bench/mla_decode/torch_baselines.py
# (copy, matmul, the step written in PyTorch), bench/mla_decode/flashinfer_mla.py
# (FlashInfer's BatchMLAPagedAttentionWrapper at the same shapes; it says why
# in its JSON when it cannot run, e.g. without .fi), then prints one table
# of each target, its figure, the same-run baseline and the ratio
# (bench/mla_decode/table.py). Output, JSON and the table go to
# $OUT/mla_decode/ when $OUT is set, else .gpu/results/mla_decode/. Exits 1
# when mla_decode_bench failed (no GPU, a refused launch, a launcher
# disagreeing with bf16_mma's output); missed targets are reported, not
# failed. MLA_DECODE_SKIP="torch flashinfer" leaves those parts out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bin=.gpu/bench/mla_decode/mla_decode_bench
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; stage it first (bash tools/gpu/stage.sh, on the development machine)" >&2
  exit 1
fi
dir=${OUT:+$OUT/mla_decode}
dir=${dir:-.gpu/results/mla_decode}
mkdir -p "$dir"
skip() { case " ${MLA_DECODE_SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }
quick=()
for a in "$@"; do [ "$a" = --quick ] && quick=(--quick); done

status=0
echo "==================== mla_decode_bench"
"$bin" --json "$dir/mla_decode_bench.json" "$@" 2>&1 | tee "$dir/mla_decode_bench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if ! skip torch; then
  echo "==================== torch_baselines.py"
  python3 bench/mla_decode/torch_baselines.py --json "$dir/torch_baselines.json" "${quick[@]}" \
    >"$dir/torch_baselines.txt" 2>&1
  rc=$?
  tail -n 30 "$dir/torch_baselines.txt"
  [ "$rc" = 0 ] || echo "run.sh: torch_baselines.py exited $rc (see $dir/torch_baselines.txt)"
fi

if ! skip flashinfer; then
  echo "==================== flashinfer_mla.py"
  PYTHONUNBUFFERED=1 python3 bench/mla_decode/flashinfer_mla.py --json "$dir/flashinfer_mla.json" "${quick[@]}" \
    >"$dir/flashinfer_mla.txt" 2>&1
  rc=$?
  tail -n 40 "$dir/flashinfer_mla.txt"
  [ "$rc" = 0 ] || echo "run.sh: flashinfer_mla.py exited $rc (see $dir/flashinfer_mla.txt)"
fi

echo "==================== MLA decode: targets"
if [ -s "$dir/mla_decode_bench.json" ]; then
  extra=()
  [ -s "$dir/torch_baselines.json" ] && extra+=(--torch "$dir/torch_baselines.json")
  [ -s "$dir/flashinfer_mla.json" ] && extra+=(--flashinfer "$dir/flashinfer_mla.json")
  python3 bench/mla_decode/table.py "$dir/mla_decode_bench.json" "${extra[@]}" | tee "$dir/table.md"
fi
exit "$status"
