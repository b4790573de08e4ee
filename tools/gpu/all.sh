#!/usr/bin/env bash
# tools/gpu/all.sh -- every GPU check and benchmark in one run, for a lease
# of GPU time that allows few runs. On the development machine:
#
#   bash tools/gpu/stage.sh && bash examples/external_workspace/stage_gpu.sh
#
# then on the GPU machine, from the repository root (device `run` with
# carry [".gpu"]):
#
#   bash tools/gpu/all.sh
#
# Order is by what matters most if the time limit cuts the run short: the
# tests, then each benchmark's run.sh. Everything lands in $OUT/all/ and is
# bundled as $OUT/results.tgz (the device runner returns few files);
# $OUT/summary.txt holds each part's closing lines.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUT:-.gpu/results-all}
work=$out/all
rm -rf "$work"
mkdir -p "$work"
summary=$out/summary.txt
: >"$summary"

part() { # part NAME SECONDS COMMAND...
  local name=$1 secs=$2
  shift 2
  echo "==================== $name" | tee -a "$summary"
  local start=$(date +%s)
  OUT=$work timeout "$secs" "$@" >"$work/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$work/$name.log" >>"$summary"
  echo "[$name: exit $rc, $(($(date +%s) - start)) s]" | tee -a "$summary"
  tail -n 5 "$work/$name.log"
}

nvidia-smi >"$work/nvidia-smi.txt" 2>&1
head -n 12 "$work/nvidia-smi.txt" >>"$summary"
# KL_GPU_SKIP="bench_launch ..." leaves parts out (a device call is limited
# to 600 s in all).
skip() { case " ${KL_GPU_SKIP:-} " in *" $1 "*) echo "[$1: skipped]" | tee -a "$summary"; return 0 ;; esac; return 1; }
skip tests || part tests 250 env KL_GPU_KIND=test KL_GPU_TIMEOUT=150 bash .gpu/run.sh
# Seconds each benchmark may take.
# bench_decode: decode_bench, torch SDPA, then FlashInfer's decode wrapper at
# 20 shapes (bench/decode/flashinfer_decode.py, from .fi/: carry it too).
skip bench_decode || part bench_decode 150 bash bench/decode/run.sh
skip bench_mla || part bench_mla 120 bash bench/mla/run.sh
skip bench_mla_decode || part bench_mla_decode 150 bash bench/mla_decode/run.sh
# The copy-engine kernels under compute-sanitizer (memcheck, racecheck).
skip sanitize || part sanitize 180 bash tools/gpu/sanitize.sh
skip bench_launch || part bench_launch 60 bash bench/launch/run.sh
# The tuner (issue 45): the targets' grids, its tables in $work/tune/. It
# takes a device call of its own (about 9 minutes): KL_GPU_SKIP the parts
# above, or run bash tools/tune/run.sh directly.
skip tune || part tune 590 bash tools/tune/run.sh
tar czf "$out/results.tgz" -C "$work" .
echo "bundled $(du -sh "$out/results.tgz" | cut -f1) in results.tgz"
