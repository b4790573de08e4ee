#!/usr/bin/env bash
# bench/decode/ab.sh [OUT] -- the gqa4_d128 paged_decode kernels for sm_90a
# with PAGED_DECODE_BULK_HEAD_ROWS defined (default OUT:
# .gpu/bench/decode/ab.cubin): the copy-engine consumers' earlier step (S with
# heads as the mma's rows, kernels/paged_decode/paged_decode_mma.cuh) in
# place of paged_decode_mma_pos.cuh's, for `decode_bench --ab OUT` on the
# H200, a same-run A/B of the two steps. The same unity file and flags as
# //kernels:paged_decode's sm_90a compile, plus the define (as trace.sh);
# never part of the library or its fatbins.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-.gpu/bench/decode/ab.cubin}
./bazelw build //kernels:paged_decode >/dev/null
bin=$(./bazelw info bazel-bin 2>/dev/null)
hash=$(head -n 1 "$bin/kernels/paged_decode.source_hash")
mkdir -p "$(dirname "$out")"
/usr/local/cuda/bin/nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -I"$bin" \
  -I"$bin/specs/_virtual_includes/paged_decode_cuh" -DKL_SOURCE_HASH="\"$hash\"" -DPAGED_DECODE_BULK_HEAD_ROWS \
  "$bin/kernels/paged_decode_gqa4_d128.cu" -o "$out"
echo "ab.sh: $out"
