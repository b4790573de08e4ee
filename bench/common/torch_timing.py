"""How the PyTorch and FlashInfer baseline scripts under bench/ time a call
(bench/mla/torch_baselines.py, bench/mla_decode/{torch_baselines,
flashinfer_mla}.py, bench/decode/torch_sdpa.py), so their figures and
klaunch's C++ benches (bench_driver.h) are taken the same way:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import torch_timing
    us = torch_timing.median_us(torch, lambda i: dst.copy_(src[i % n]), runs=20, warmup=3)

CUDA events around each call, every call on the current stream, one
synchronisation at the end; the median of `runs` after `warmup` calls. fn
gets the call's index, so inputs can rotate over sets_for() copies and each
call finds a cold L2 (50-60 MB on an H100/H200; 600 MB of sets is ten
times that). Imports nothing at module level: the scripts import it before
they know whether PyTorch is there.
"""

COLD_BYTES = 600e6


def median(values):
    """The median of a non-empty sequence (the mean of the middle two for
    an even count)."""
    v = sorted(values)
    if not v:
        raise ValueError("median of no values")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])


def median_us(torch, fn, runs, warmup=3):
    """Median microseconds of fn(i) between CUDA events, after warmup calls."""
    if runs < 1:
        raise ValueError("runs must be at least 1, not %r" % (runs,))
    for i in range(warmup):
        fn(i)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        starts[i].record()
        fn(warmup + i)
        stops[i].record()
    torch.cuda.synchronize()
    return median(1000.0 * a.elapsed_time(b) for a, b in zip(starts, stops))


def sets_for(nbytes, cold_bytes=COLD_BYTES):
    """How many copies of an input of nbytes to rotate over so that together
    they pass cold_bytes (at least 2)."""
    n = 2
    while n * nbytes < cold_bytes:
        n += 1
    return n


def copy_rate(torch, dev, runs, nbytes=1 << 30, gen=None, warmup=3):
    """Device-to-device copy of nbytes: {"us", "gbps" (read + write bytes),
    "bytes"}."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_(0, 256, generator=gen)
    dst = torch.empty_like(src)
    us = median_us(torch, lambda i: dst.copy_(src), runs, warmup)
    return {"us": us, "gbps": 2 * nbytes / (us * 1e3), "bytes": 2 * nbytes}


def matmul_rate(torch, dev, rand, runs, n=8192, warmup=3):
    """bf16 n x n x n torch.matmul (cuBLAS), inputs rotating over cold sets:
    {"us", "tflops", "shape"}, the card's practical tensor-core rate."""
    nsets = sets_for(2 * n * n * 2)
    a = [rand(n, n) for _ in range(nsets)]
    b = [rand(n, n) for _ in range(nsets)]
    c = torch.empty(n, n, dtype=torch.bfloat16, device=dev)
    us = median_us(torch, lambda i: torch.matmul(a[i % nsets], b[i % nsets], out=c), runs, warmup)
    return {"us": us, "tflops": 2.0 * n ** 3 / (us * 1e6), "shape": [n, n, n]}
