#!/usr/bin/env python3
"""Host time per launch through CuPy and Triton, beside bench/launch/launch_cost.

    python3 bench/launch/alternatives.py [--launches N] [--batch B] [--json FILE]

Each framework launches a kernel with paged_decode_attn_fp8's parameter
list (the same 17 kernel arguments in the same order, with num_seqs as the
grid's y extent, as klaunch's 18-parameter launcher has it) and a trivial
body, grid (1, 1), 256 threads, on the framework's current stream:

  cupy_rawkernel  cupy.RawKernel called with an argument tuple built once
                  (NumPy scalars of the kernel's exact types)
  triton_jit      a @triton.jit kernel called as kernel[grid](...) with
                  Python ints and floats, num_warps=8

Every launch is timed on its own with time.perf_counter_ns(), and the median
cost of an empty timed region is subtracted. After every B launches
(default 256) the device is synchronised outside the timed region, so the
launch queue never fills; N (default 100000) launches are timed after two
batches of warm-up. Prints one JSON object (also written to FILE): each
framework's median, p99, mean and min in ns, or the error that kept it from
running. Exit status 1 when neither framework ran.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

# triton_stub.py sits beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The kernel for CuPy: paged_decode_attn_fp8's parameters (bf16 as unsigned
# short, fp8 as unsigned char: only their size matters for a launch). The
# body reads every argument and never stores, as sliding_window is 0.
CUDA_SOURCE = r"""
extern "C" __global__ void paged_decode_attn_fp8_stub(
    const unsigned short *q, const unsigned char *k_cache, const unsigned char *v_cache,
    unsigned short *output, const int *block_tables, const int *seq_lens,
    unsigned int max_blocks_per_seq, unsigned int num_q_heads, unsigned int num_kv_heads,
    unsigned int head_dim, unsigned int block_size, float inv_sqrt_d, float k_scale, float v_scale,
    unsigned int q_stride, unsigned long long cache_stride, unsigned int sliding_window) {
    if (sliding_window == 0xffffffffu && threadIdx.x == 0)
        output[0] = (unsigned short)(q[0] + k_cache[0] + v_cache[0] + block_tables[0] + seq_lens[0] +
            max_blocks_per_seq + num_q_heads + num_kv_heads + head_dim + block_size + q_stride +
            (unsigned int)cache_stride + (unsigned int)(inv_sqrt_d + k_scale + v_scale));
}
"""

# The shape of launch_cost's launches: one sequence, one query head.
NUM_SEQS = 1
NUM_Q_HEADS = 1


def timer_overhead_ns(samples=100000):
    pc = time.perf_counter_ns
    ns = []
    for _ in range(samples):
        t0 = pc()
        t1 = pc()
        ns.append(t1 - t0)
    return statistics.median(ns)


def measure(call, args, kwargs, sync, launches, batch, overhead):
    """Times `call(*args, **kwargs)` launches one at a time; see the module docstring."""
    pc = time.perf_counter_ns
    for _ in range(2 * batch):  # warm-up: compilation caches, the driver's first launches
        call(*args, **kwargs)
    sync()
    samples = []
    done = 0
    while done < launches:
        n = min(batch, launches - done)
        for _ in range(n):
            t0 = pc()
            call(*args, **kwargs)
            t1 = pc()
            samples.append(t1 - t0 - overhead)
        sync()
        done += n
    samples.sort()
    return {
        "median_ns": round(samples[len(samples) // 2], 1),
        "p99_ns": round(samples[(len(samples) * 99) // 100], 1),
        "mean_ns": round(sum(samples) / len(samples), 1),
        "min_ns": round(samples[0], 1),
    }


def bench_cupy(launches, batch, overhead):
    import cupy as cp
    import numpy as np

    kernel = cp.RawKernel(CUDA_SOURCE, "paged_decode_attn_fp8_stub")
    q = cp.zeros(128, dtype=cp.uint16)
    k_cache = cp.zeros(2048, dtype=cp.uint8)
    v_cache = cp.zeros(2048, dtype=cp.uint8)
    output = cp.zeros(128, dtype=cp.uint16)
    block_tables = cp.zeros(1, dtype=cp.int32)
    seq_lens = cp.ones(1, dtype=cp.int32)
    kargs = (q, k_cache, v_cache, output, block_tables, seq_lens,
             np.uint32(1), np.uint32(NUM_Q_HEADS), np.uint32(1), np.uint32(128), np.uint32(16),
             np.float32(0.08838834764), np.float32(1.0), np.float32(1.0),
             np.uint32(128), np.uint64(2048), np.uint32(0))
    stream = cp.cuda.get_current_stream()
    result = measure(kernel, ((NUM_Q_HEADS, NUM_SEQS), (256,), kargs), {}, stream.synchronize, launches, batch,
                     overhead)
    if int(output.sum()) != 0:
        raise RuntimeError("the CuPy stub kernel wrote its output; it must not")
    result["name"] = "CuPy RawKernel (cupy %s)" % cp.__version__
    return result


def bench_triton(launches, batch, overhead):
    import torch
    import triton

    from triton_stub import paged_decode_attn_fp8_stub

    dev = torch.device("cuda")
    q = torch.zeros(128, dtype=torch.bfloat16, device=dev)
    k_cache = torch.zeros(2048, dtype=torch.uint8, device=dev)
    v_cache = torch.zeros(2048, dtype=torch.uint8, device=dev)
    output = torch.zeros(128, dtype=torch.bfloat16, device=dev)
    block_tables = torch.zeros(1, dtype=torch.int32, device=dev)
    seq_lens = torch.ones(1, dtype=torch.int32, device=dev)
    grid = (NUM_Q_HEADS, NUM_SEQS)
    targs = (q, k_cache, v_cache, output, block_tables, seq_lens,
             1, NUM_Q_HEADS, 1, 128, 16, 0.08838834764, 1.0, 1.0, 128, 2048, 0)

    def launch(*args, **kwargs):
        paged_decode_attn_fp8_stub[grid](*args, **kwargs)

    # kernel[grid](...) is what a caller writes; timing it through this one
    # extra Python call adds tens of ns to a figure of microseconds.
    result = measure(launch, targs, {"num_warps": 8}, torch.cuda.synchronize, launches, batch, overhead)
    if float(output.float().abs().sum()) != 0.0:
        raise RuntimeError("the Triton stub kernel wrote its output; it must not")
    result["name"] = "Triton JIT kernel[grid](...) (triton %s, torch %s)" % (triton.__version__, torch.__version__)
    return result


def device_name():
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 (any failure: try CuPy)
        pass
    try:
        import cupy as cp

        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if args.launches <= 0 or args.batch <= 0:
        ap.error("--launches and --batch must be positive")

    overhead = timer_overhead_ns()
    report = {
        "benchmark": "launch_cost_alternatives",
        "kernel": "paged_decode_attn_fp8 parameter list, trivial body",
        "device": device_name(),
        "python": platform.python_version(),
        "launches": args.launches,
        "batch": args.batch,
        "timer": "time.perf_counter_ns",
        "timer_overhead_ns": overhead,
        "results": [],
        "errors": {},
    }
    for key, bench in (("cupy_rawkernel", bench_cupy), ("triton_jit", bench_triton)):
        try:
            result = bench(args.launches, args.batch, overhead)
        except Exception as e:  # noqa: BLE001 (a missing or broken framework is reported, not fatal)
            report["errors"][key] = "%s: %s" % (type(e).__name__, e)
            traceback.print_exc(file=sys.stderr)
            continue
        result["key"] = key
        report["results"].append(result)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0 if report["results"] else 1


if __name__ == "__main__":
    sys.exit(main())
