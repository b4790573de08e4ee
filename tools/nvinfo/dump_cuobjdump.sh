#!/usr/bin/env bash
# tools/nvinfo/dump_cuobjdump.sh OUT_FILE CUBIN... -- `cuobjdump -elf` of each
# cubin, reduced to what the parameter-layout cross-check reads, in ONE file
# (the GPU runner returns few files):
#
#   ==== <cubin basename> sha256:<hex of the cubin> <cuobjdump's release line>
#   64-bit ELF: type=ET_EXEC, ABI=8, sm=90, toolkit=13.0, flags=...   (cuobjdump's)
#   .nv.info.<kernel>                                                 (cuobjdump's)
#   	<0x2>
#   	Attribute:	EIATTR_KPARAM_INFO
#   	Format:	EIFMT_SVAL
#   	Value:	Index : 0x0	Ordinal : 0xd	Offset  : 0x4c	Size    : 0x4
#   		Pointee's logAlignment : 0x0	Space : 0x0	cbank : 0x1f	Parameter Space : CBANK
#   	...
#
# Every line after a ==== header is cuobjdump's own; only the records other
# than EIATTR_KPARAM_INFO and EIATTR_CBANK_PARAM_SIZE, the sections other
# than .nv.info.<kernel>, and blank lines are left out (the full output holds
# the SASS: megabytes a cubin). tests/arg_order/cuobjdump_test.py reads the
# file from tests/arg_order/testdata/cuobjdump/.
#
# cuobjdump is looked for in $CUOBJDUMP, PATH, $CUDA_PATH/bin,
# /usr/local/cuda/bin. Exits 1, saying so, when there is none or a cubin
# fails; the file then holds what was dumped.
set -uo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 OUT_FILE CUBIN..." >&2
  exit 2
fi
out=$1
shift

tool=${CUOBJDUMP:-}
if [ -z "$tool" ]; then
  tool=$(command -v cuobjdump 2>/dev/null || true)
fi
for dir in "${CUDA_PATH:-}/bin" /usr/local/cuda/bin; do
  if [ -z "$tool" ] && [ -x "$dir/cuobjdump" ]; then tool=$dir/cuobjdump; fi
done
if [ -z "$tool" ]; then
  echo "dump_cuobjdump: no cuobjdump (\$CUOBJDUMP, PATH, \$CUDA_PATH/bin, /usr/local/cuda/bin); nothing dumped" >&2
  exit 1
fi
release=$("$tool" --version 2>/dev/null | grep -i 'release' | tail -n 1)

mkdir -p "$(dirname "$out")"
: >"$out"
bad=0
n=0
for cubin in "$@"; do
  if [ ! -f "$cubin" ]; then
    echo "dump_cuobjdump: no such cubin: $cubin" >&2
    bad=1
    continue
  fi
  hash=$(sha256sum "$cubin" | cut -d' ' -f1)
  echo "==== $(basename "$cubin") sha256:$hash $release" >>"$out"
  # Sections start at a line in column 0; a record at a tab and "<0x".
  if ! "$tool" -elf "$cubin" | awk '
      function flush() {
        if (rec ~ /\tAttribute:\tEIATTR_(KPARAM_INFO|CBANK_PARAM_SIZE)\n/) printf "%s", rec
        rec = ""
      }
      /^$/ { next }
      /^[^ \t]/ {
        flush()
        keep = ($0 ~ /^\.nv\.info\./)
        if (keep || $0 ~ /^64-bit ELF/) print
        next
      }
      keep && /^\t<0x/ { flush(); rec = $0 "\n"; next }
      keep { rec = rec $0 "\n" }
      END { flush() }
    ' >>"$out"; then
    echo "dump_cuobjdump: $tool -elf $cubin failed" >&2
    bad=1
  fi
  n=$((n + 1))
done
echo "dump_cuobjdump: $n cubins by $tool ($release) -> $out ($(wc -c <"$out") bytes)"
exit $bad
