#!/usr/bin/env bash
# bench/mla/ab.sh [OUT [DEFINE...]] -- grouped_gemm_tma alone for sm_90a with
# the bench-only defines DEFINE (default OUT: .gpu/bench/mla/ab.cubin;
# default DEFINE: GROUPED_GEMM_TMA_NO_HELD, every shape on the 6-stage ring
# as before the held paths; kernels/mla_prefill/grouped_gemm_tma.cu), for
# `mla_bench --ab OUT` on the H200: a same-run A/B of this build's kernel
# against the variant's. The flags of //kernels:mla_prefill's sm_90a
# compile (variant deepseek_v4_flash) plus the defines (as
# bench/decode/ab.sh); never part of the library or its fatbins.
# GROUPED_GEMM_TMA_TRACE makes a trace build: mla_bench --ab then also
# prints the blocks' ends (the per-SM spread of a persistent grid);
# GROUPED_GEMM_TMA_ROTATE=R beside it gives block b run b + R (is a late
# block's lateness its SM's or its run's?).
# GROUPED_GEMM_TMA_NO_PACE leaves the held paths' pacing out (the A/B of
# the pacing: B / A > 1 is what it gains).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-.gpu/bench/mla/ab.cubin}
shift || true
defines=("$@")
[ ${#defines[@]} -gt 0 ] || defines=(GROUPED_GEMM_TMA_NO_HELD)
./bazelw build //kernels:mla_prefill >/dev/null
bin=$(./bazelw info bazel-bin 2>/dev/null)
hash=$(head -n 1 "$bin/kernels/mla_prefill.source_hash")
mkdir -p "$(dirname "$out")"
unity=$(mktemp --suffix=.cu)
trap 'rm -f "$unity"' EXIT
printf '#define KL_VARIANT_deepseek_v4_flash 1\n#include "klaunch/mla_prefill.cuh"\n#include "kernels/mla_prefill/grouped_gemm_tma.cu"\n' >"$unity"
/usr/local/cuda/bin/nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I. -I"$bin" \
  -I"$bin/specs/_virtual_includes/mla_prefill_cuh" -DKL_SOURCE_HASH="\"$hash\"" "${defines[@]/#/-D}" \
  "$unity" -o "$out"
echo "ab.sh: $out (${defines[*]})"
