#!/usr/bin/env bash
# bench/mla_decode/flashinfer_prep.sh -- on the development machine (no GPU
# needed; PyPI and the CUDA toolkit at /usr/local/cuda), from anywhere:
#
#   bash bench/mla_decode/flashinfer_prep.sh
#
# Prepares FlashInfer's BatchMLAPagedAttentionWrapper for
# bench/mla_decode/flashinfer_mla.py and its BatchDecodeWithPagedKVCacheWrapper
# for bench/decode/flashinfer_decode.py (one trimmed wheel serves both:
# bench/decode/flashinfer_prep.sh runs this script) on the GPU machine, which has Python
# 3.12, torch 2.11+cu130 and nvcc 13.0 but no network: everything it needs
# travels in .fi/ (ignored through .git/info/exclude; name it in the device
# run's carry, beside .gpu). flashinfer-python's wheel is ~100 MB (716 MB
# unpacked: every kernel family's sources, CUTLASS, CCCL, cubins), too big
# for the 64 MiB a device call carries, so this script:
#   1. downloads flashinfer-python $FI_VERSION and apache-tvm-ffi
#      $TVM_FFI_VERSION (its JIT modules are tvm-ffi modules, not torch
#      extensions) for this machine's Python and for the GPU's (cp312), into
#      $KL_FI_CACHE (default ~/.cache/klaunch/flashinfer; never in the repo);
#   2. makes a build venv there: torch $TORCH_VERSION from PyPI (import only:
#      flashinfer's JIT code needs torch; no GPU is used), flashinfer and
#      tvm-ffi without their other dependencies, and the few small packages
#      `import flashinfer` needs (the GPU machine has them all);
#   3. compiles the MLA wrapper's FA3 (sm_90a) and FA2 modules for bf16, D
#      512 + 64, and the decode wrapper's default (CUDA-core) module for
#      bf16 q and out, head dim 128, over each $FI_DECODE cache type (bf16,
#      e4m3), with $FI_DECODE_TC=1 its tensor-core (FA2 paged prefill)
#      modules too, with /usr/local/cuda's nvcc for sm_90a
#      (FLASHINFER_CUDA_ARCH_LIST=9.0a, FlashInfer's workspace in
#      $KL_FI_CACHE/ws);
#   4. writes .fi/flashinfer_python-$FI_VERSION-py3-none-any.whl, a trimmed
#      wheel (flashinfer_trim.py trim: the modules the MLA and decode paths
#      can import, their JIT sources, the headers of a JIT fallback, and the
#      prebuilt modules as data/aot/<name>/<name>.so, where FlashInfer looks
#      first), copies the cp312 apache-tvm-ffi wheel beside it, and
#      .fi/trim.json (what was kept);
#   5. checks here that the trimmed wheel imports and finds and loads every
#      prebuilt module (flashinfer_trim.py verify), and prints .fi's size.
# Environment: KL_FI_CACHE, FI_VERSION, TVM_FFI_VERSION, TORCH_VERSION,
# FI_BACKENDS (default fa3,fa2), FI_DECODE (default bf16,e4m3; '' for none),
# FI_DECODE_TC (default 1; 0 leaves the tensor-core decode modules out),
# KL_FI_NO_JIT_SOURCES=1 (leave the fallback
# headers out: ~6 MB less), MAX_JOBS (ninja's jobs, default 2).
# Exits non-zero when a step fails; rerunning reuses the downloads, the
# venv and the builds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
here=bench/mla_decode

FI_VERSION=${FI_VERSION:-0.7.4}
TVM_FFI_VERSION=${TVM_FFI_VERSION:-0.1.15.post2}
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
FI_BACKENDS=${FI_BACKENDS:-fa3,fa2}
FI_DECODE=${FI_DECODE-bf16,e4m3}
FI_DECODE_TC=${FI_DECODE_TC:-1}
decode=(--decode "$FI_DECODE")
[ "$FI_DECODE_TC" = 1 ] && decode+=(--decode-tc)
cache=${KL_FI_CACHE:-$HOME/.cache/klaunch/flashinfer}
out=.fi
py=${PYTHON:-python3}
say() { echo "flashinfer_prep: $*" >&2; }

# .fi/ stays out of git (the wheels are never committed).
exclude=$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.fi/' "$exclude" 2>/dev/null || echo '/.fi/' >>"$exclude"

mkdir -p "$cache/dl" "$cache/so" "$out"
local_tag=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
fetch() { # fetch PYTHON_VERSION REQUIREMENT
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$1" --implementation cp \
    "${platforms[@]}" -d "$cache/dl" "$2"
}
say "1. downloading flashinfer-python $FI_VERSION, apache-tvm-ffi $TVM_FFI_VERSION (cp312 and cp${local_tag/./})"
fetch 3.12 "flashinfer-python==$FI_VERSION"
fetch 3.12 "apache-tvm-ffi==$TVM_FFI_VERSION"
fetch "$local_tag" "apache-tvm-ffi==$TVM_FFI_VERSION"
fi_whl=$cache/dl/flashinfer_python-$FI_VERSION-py3-none-any.whl
tvm312=$(ls "$cache"/dl/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp312-*.whl)
tvm_local=$(ls "$cache"/dl/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp"${local_tag/./}"-*.whl)
say "   Requires-Dist of flashinfer-python (installed without them; see flashinfer_mla.py):"
unzip -p "$fi_whl" '*/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' | sed 's/^/     /' >&2

venv=$cache/venv
stamp=$venv/.klaunch-$FI_VERSION-$TVM_FFI_VERSION-$TORCH_VERSION
if [ ! -e "$stamp" ]; then
  say "2. the build venv ($venv): torch $TORCH_VERSION from PyPI (a few GB, once)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q "torch==$TORCH_VERSION" numpy einops ninja jinja2 filelock requests tabulate tqdm \
    packaging click nvidia-ml-py cuda-bindings typing-extensions
  "$venv/bin/pip" install -q --no-deps "$fi_whl" "$tvm_local"
  touch "$stamp"
else
  say "2. the build venv is there ($venv)"
fi

say "3. compiling the MLA modules ($FI_BACKENDS) and the decode modules (${FI_DECODE:-none}, tensor cores: $FI_DECODE_TC) for sm_90a with $(/usr/local/cuda/bin/nvcc --version | tail -1)"
export PATH=$venv/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} FLASHINFER_CUDA_ARCH_LIST=9.0a
export FLASHINFER_WORKSPACE_BASE=$cache/ws MAX_JOBS=${MAX_JOBS:-2} FLASHINFER_LOGGING_LEVEL=warning
rm -f "$cache"/so/*.so
"$venv/bin/python" "$here/flashinfer_trim.py" build --out-dir "$cache/so" --backends "$FI_BACKENDS" "${decode[@]}"
"$venv/bin/python" "$here/flashinfer_trim.py" modules --out "$cache/modules.txt"

say "4. trimming the wheel into $out/"
rm -f "$out"/*.whl
jit=()
[ "${KL_FI_NO_JIT_SOURCES:-0}" = 1 ] && jit=(--no-jit-sources)
"$py" "$here/flashinfer_trim.py" trim --wheel "$fi_whl" --modules "$cache/modules.txt" --aot "$cache/so" \
  --out "$out/$(basename "$fi_whl")" --summary "$out/trim.json" "${jit[@]}"
cp "$tvm312" "$out/"

say "5. checking the trimmed wheel here (import, prebuilt modules found and loaded)"
"$venv/bin/python" "$here/flashinfer_trim.py" verify --wheels "$out" --backends "$FI_BACKENDS" "${decode[@]}" \
  --extra-wheel "$tvm_local"

total=$(du -cb "$out"/* | tail -1 | cut -f1)
ls -l "$out" >&2
say "$out/ holds $total bytes ($((total / 1048576)) MiB) to carry (with .gpu/, under the 64 MiB a device call takes)"
say "on the GPU machine: bash $here/run.sh, bash bench/decode/run.sh (each installs $out/*.whl into a temporary folder)"
