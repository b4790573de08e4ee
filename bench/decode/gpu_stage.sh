#!/usr/bin/env bash
# bench/decode/gpu_stage.sh DEST -- builds what bench/decode/gpu_run.sh runs
# (the decode GPU tests and decode_bench, statically linked, fatbins
# embedded) and copies them with the scripts into DEST (e.g.
# /work/main/.gpu-decode for the device runner's carry). Development
# machine; then on the GPU machine: bash DEST/gpu_run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dest=${1:?usage: bench/decode/gpu_stage.sh DEST}
targets=(//tests/paged_decode:paged_decode_test //tests/paged_decode:paged_decode_split_test
  //bench/decode:decode_bench)
./bazelw build --dynamic_mode=off "${targets[@]}"
rm -rf "$dest"
mkdir -p "$dest"
for t in "${targets[@]}"; do
  pkg=${t#//}
  pkg=${pkg%%:*}
  cp -L "bazel-bin/$pkg/${t##*:}" "$dest/"
done
cp bench/decode/gpu_run.sh bench/decode/torch_sdpa.py bench/decode/table.py "$dest/"
du -sh "$dest"
