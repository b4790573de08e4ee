#!/usr/bin/env bash
# bench/decode/trace.sh [OUT] -- the gqa4_d128 paged_decode kernels for sm_90a
# with PAGED_DECODE_TRACE defined (default OUT: .gpu/bench/decode/trace.cubin),
# for `decode_bench --trace OUT` on the H200: the persistent copy-engine
# kernels stamp each block's phases (kernels/paged_decode/paged_decode_bulk.cuh,
# PAGED_DECODE__STAMP). The same unity file and flags as //kernels:paged_decode's
# sm_90a compile, plus the define; never part of the library or its fatbins.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-.gpu/bench/decode/trace.cubin}
./bazelw build //kernels:paged_decode >/dev/null
bin=$(./bazelw info bazel-bin 2>/dev/null)
hash=$(head -n 1 "$bin/kernels/paged_decode.source_hash")
mkdir -p "$(dirname "$out")"
/usr/local/cuda/bin/nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -I"$bin" \
  -I"$bin/specs/_virtual_includes/paged_decode_cuh" -DKL_SOURCE_HASH="\"$hash\"" -DPAGED_DECODE_TRACE \
  "$bin/kernels/paged_decode_gqa4_d128.cu" -o "$out"
echo "trace.sh: $out"
