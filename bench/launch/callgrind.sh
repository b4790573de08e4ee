#!/usr/bin/env bash
# bench/launch/callgrind.sh [N] -- instructions per launch of
# paged_decode_attn_fp8 on the CPU, counted by callgrind: no GPU, and the
# same figure on any x86-64 machine with the same compiler.
#
# Builds //bench/launch:launch_driver (-O2; the generated launcher inlined)
# and runs each of its modes under `valgrind --tool=callgrind` with N and 2N
# launches (default N 20000); instructions per launch are
# (Ir(2N) - Ir(N)) / N, so start-up and exit cancel. "net" subtracts the
# loop's own instructions (mode baseline). Prints a Markdown table and the
# date, commit and machine, as docs/PERFORMANCE.md records them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

n=${1:-20000}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "callgrind.sh: needs valgrind (Debian: apt-get install valgrind)" >&2
  exit 1
fi
./bazelw build -- //bench/launch:launch_driver >&2
bin=bazel-bin/bench/launch/launch_driver
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Total instructions (Ir) of one run.
instructions() {
  if ! valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" "$1" "$2" >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "callgrind.sh: $bin $1 $2 failed" >&2
    exit 1
  fi
  awk '$1 == "summary:" || $1 == "totals:" { print $2; exit }' "$tmp/out"
}

per_launch() {
  local one two
  one=$(instructions "$1" "$n")
  two=$(instructions "$1" $((2 * n)))
  awk -v a="$one" -v b="$two" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }'
}

declare -A what=(
  [baseline]="the loop alone (barrier, batch bookkeeping)"
  [check]="kl_paged_decode_attn_fp8_check: the checks"
  [wrapper_noop]="kl_paged_decode_attn_fp8 + no-op backend: checks, packing, indirect call"
  [record]="recording backend's launch alone (a packed kl_launch)"
  [wrapper_record]="kl_paged_decode_attn_fp8 + recording backend"
)
modes=(baseline check wrapper_noop record wrapper_record)
declare -A ir
for m in "${modes[@]}"; do
  ir[$m]=$(per_launch "$m")
done

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
cc_version=$(${CC:-gcc} --version 2>/dev/null | head -n 1 || true)
commit=unknown
if head=$(git rev-parse --short HEAD 2>/dev/null); then
  commit=$head
  # Only what the driver is built from counts.
  git diff --quiet HEAD -- include generated specs codegen bench/launch || commit="$commit (with uncommitted changes)"
fi
echo "date: $(date -u +%Y-%m-%d), commit: $commit"
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; compiler: ${cc_version:-unknown}; $(valgrind --version)"
echo "N = $n and $((2 * n)) launches per mode; instructions per launch = (Ir(2N) - Ir(N)) / N"
echo
echo "| mode | instructions per launch | net of the loop |"
echo "|---|---:|---:|"
for m in "${modes[@]}"; do
  net=$(awk -v a="${ir[$m]}" -v b="${ir[baseline]}" 'BEGIN { printf "%.1f", a - b }')
  [ "$m" = baseline ] && net="-"
  echo "| ${what[$m]} | ${ir[$m]} | $net |"
done
