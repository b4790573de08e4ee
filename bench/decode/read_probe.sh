#!/usr/bin/env bash
# bench/decode/read_probe.sh [OUT] -- builds bench/decode/read_probe.cu (a
# pure read of decode's 512 MiB with the _tma kernels' copy-engine ring and
# no attention: the ceiling decode's "fraction of copy" is read against;
# docs/PERFORMANCE.md) for sm_90a with nvcc, into OUT (default
# .gpu/bench/decode/read_probe). Run it on the GPU machine: it prints one
# line a variant. Bench-only: never part of the library or its tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-.gpu/bench/decode/read_probe}
mkdir -p "$(dirname "$out")"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a bench/decode/read_probe.cu -lcuda -o "$out"
echo "read_probe.sh: $out"
