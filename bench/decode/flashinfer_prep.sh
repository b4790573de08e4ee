#!/usr/bin/env bash
# bench/decode/flashinfer_prep.sh -- on the development machine (no GPU
# needed), from anywhere:
#
#   bash bench/decode/flashinfer_prep.sh
#
# FlashInfer for bench/decode/flashinfer_decode.py: the one trimmed wheel in
# .fi/ that also serves bench/mla_decode/flashinfer_mla.py (both benchmarks
# run in the same device call, whose carry is 64 MiB in all), made by
# bench/mla_decode/flashinfer_prep.sh: it compiles the MLA modules and
# BatchDecodeWithPagedKVCacheWrapper's decode modules (bf16 q and out, head
# dim 128, bf16 and fp8 e4m3 caches; the default CUDA-core kernel and the
# tensor-core path) for sm_90a, trims the wheel and checks here that it
# imports and loads them. Its environment settings apply (FI_DECODE,
# FI_DECODE_TC, ...; see that script).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../mla_decode/flashinfer_prep.sh" "$@"
