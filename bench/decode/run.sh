#!/usr/bin/env bash
# bench/decode/run.sh [DECODE_BENCH_ARGS...] -- on the GPU machine, from the
# repository root, after (on the development machine)
#   bash tools/gpu/stage.sh                 (builds //bench/decode:decode_bench,
#                                            tagged gpu, into .gpu/bench/decode/)
#   bash bench/decode/flashinfer_prep.sh    (FlashInfer's trimmed wheel with
#                                            prebuilt decode modules, and tvm-ffi,
#                                            into .fi/; the MLA benchmark's too)
# and a device run that carries .gpu and .fi:
#
#   bash bench/decode/run.sh
#
# Runs .gpu/bench/decode/decode_bench (klaunch's paged decode kernels
# against cuMemcpyDtoD bandwidth), bench/decode/torch_sdpa.py (PyTorch
# SDPA decode over a contiguous cache at the same shape) and
# bench/decode/flashinfer_decode.py (FlashInfer's
# BatchDecodeWithPagedKVCacheWrapper over shuffled page tables at
# decode_bench's shapes, installed from .fi/; without .fi, or where it cannot
# import, it says why and this script carries on), then prints one table of
# each measure, its target and the ratio (bench/decode/table.py).
# Output, JSON and the table go to $OUT/decode/ when $OUT is set, else
# .gpu/results/decode/. Exits 1 when decode_bench failed (no GPU, a refused
# launch, split-KV output differing from the seed kernel's); missed targets
# are reported, not failed. DECODE_SKIP="torch flashinfer" leaves those
# parts out; DECODE_FI_ARGS passes arguments to flashinfer_decode.py (e.g.
# "--no-grid").
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
skip() { case " ${DECODE_SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }

status=0
echo "==================== decode_bench"
"$bin" --json "$dir/decode_bench.json" "$@" 2>&1 | tee "$dir/decode_bench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if ! skip torch; then
  echo "==================== torch_sdpa.py"
  python3 bench/decode/torch_sdpa.py --json "$dir/torch_sdpa.json" >"$dir/torch_sdpa.txt" 2>&1
  rc=$?
  tail -n 40 "$dir/torch_sdpa.txt"
  [ "$rc" = 0 ] || echo "run.sh: torch_sdpa.py exited $rc (see $dir/torch_sdpa.txt)"
fi

if ! skip flashinfer; then
  echo "==================== flashinfer_decode.py"
  # shellcheck disable=SC2086  # DECODE_FI_ARGS: words on purpose
  PYTHONUNBUFFERED=1 python3 bench/decode/flashinfer_decode.py --json "$dir/flashinfer_decode.json" \
    ${DECODE_FI_ARGS:-} >"$dir/flashinfer_decode.txt" 2>"$dir/flashinfer_decode.err"
  rc=$?
  cat "$dir/flashinfer_decode.err"
  case "$rc" in
    0) ;;
    3) echo "run.sh: FlashInfer could not be imported, no FlashInfer rows (flashinfer_decode.py exited 3;" \
         "is .fi carried? see $dir/flashinfer_decode.err)" ;;
    4) echo "run.sh: flashinfer_decode.py found no PyTorch or no CUDA device (exit 4)" ;;
    5) echo "run.sh: FlashInfer's output differed from the PyTorch reference at some shape: those rows are" \
         "left out (flashinfer_decode.py exited 5; see $dir/flashinfer_decode.txt)" ;;
    *) echo "run.sh: flashinfer_decode.py exited $rc (see $dir/flashinfer_decode.txt, .err)" ;;
  esac
fi

echo "==================== paged decode: targets"
if [ -s "$dir/decode_bench.json" ]; then
  extra=()
  [ -s "$dir/torch_sdpa.json" ] && ! skip torch && extra+=(--torch "$dir/torch_sdpa.json")
  [ -s "$dir/flashinfer_decode.json" ] && ! skip flashinfer && extra+=(--flashinfer "$dir/flashinfer_decode.json")
  python3 bench/decode/table.py "$dir/decode_bench.json" "${extra[@]}" | tee "$dir/table.md"
fi
exit "$status"
