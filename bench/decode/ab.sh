#!/usr/bin/env bash
# bench/decode/ab.sh [OUT [DEFINE...]] -- the gqa4_d128 paged_decode kernels
# for sm_90a with the bench-only defines DEFINE (default OUT:
# .gpu/bench/decode/ab.cubin; default DEFINE: PAGED_DECODE_BULK_FP8_BOX_SLOTS=32,
# the fp8 box ring before it held 48 slots, kernels/paged_decode/paged_decode_bulk.cuh),
# for `decode_bench --ab OUT` on the H200: a same-run A/B of this build's
# `_tma` persistent kernels against the variant's. The same unity file and
# flags as //kernels:paged_decode's sm_90a compile, plus the defines (as
# trace.sh); never part of the library or its fatbins.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-.gpu/bench/decode/ab.cubin}
shift || true
defines=("$@")
[ ${#defines[@]} -gt 0 ] || defines=(PAGED_DECODE_BULK_FP8_BOX_SLOTS=32)
./bazelw build //kernels:paged_decode >/dev/null
bin=$(./bazelw info bazel-bin 2>/dev/null)
hash=$(head -n 1 "$bin/kernels/paged_decode.source_hash")
mkdir -p "$(dirname "$out")"
/usr/local/cuda/bin/nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -I"$bin" \
  -I"$bin/specs/_virtual_includes/paged_decode_cuh" -DKL_SOURCE_HASH="\"$hash\"" "${defines[@]/#/-D}" \
  "$bin/kernels/paged_decode_gqa4_d128.cu" -o "$out"
echo "ab.sh: $out (${defines[*]})"
