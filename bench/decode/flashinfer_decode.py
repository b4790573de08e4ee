#!/usr/bin/env python3
"""FlashInfer's paged GQA decode (BatchDecodeWithPagedKVCacheWrapper) at
decode_bench's shapes, as a same-run baseline (bench/decode/run.sh runs it
after decode_bench and torch_sdpa.py, on the same GPU; issue 45):

    python3 bench/decode/flashinfer_decode.py [--json FILE] [--runs N] [--fi DIR] [--site DIR]
        [--only 32x4096_bf16,...] [--no-grid] [--no-graph] [--no-tensor-cores]

FlashInfer comes from DIR (default .fi/ of the repository, made on the
development machine by bench/mla_decode/flashinfer_prep.sh: one trimmed
flashinfer-python wheel holding the MLA modules and this wrapper's prebuilt
decode modules for sm_90a, and apache-tvm-ffi for Python 3.12), installed
offline into --site (default /tmp/klaunch-flashinfer-site, shared with
bench/mla_decode/flashinfer_mla.py), which goes first on sys.path;
FlashInfer's JIT workspace is FLASHINFER_WORKSPACE_BASE (default
/tmp/klaunch-flashinfer-ws). Without DIR it imports whatever flashinfer the
Python has.

Shapes: decode_bench's (32 query heads, 8 KV heads: GQA group 4; head dim
128; pages of 16 positions, NHD: K and V each [pages, 16, 8, 128], the
layout of klaunch's contract; bf16 q and out; every sequence the same
length): 32 x 4096 and 1 x 32768 (its targets' rows), and unless
--no-grid its fixed-cost sweep's grid, 32 x 256..2048 and 1 x 2048..16384;
each over a bf16 cache (random in [-1, 1)) and an fp8 e4m3 cache (codes of
magnitude 1/8 to 2, decode_bench's kl_inputs::fp8_code; k_scale = v_scale
= 1). The page table is shuffled (a random permutation of the cache's
pages, as decode_bench's; one table a shape, since plan() binds it: the
caches rotate under it). sm_scale 1/sqrt(128).
Variants:
  cuda_cores    the wrapper's defaults (use_tensor_cores=False, backend
                "auto"): on sm_90 FlashInfer's CUDA-core decode kernel
                (module batch_decode_with_kv_cache_*), FlashInfer's own
                choice for these arguments.
  tensor_cores  use_tensor_cores=True ("auto" resolves to fa2's paged
                prefill kernels for a bf16 query; FA3 takes an fp8 cache
                only with an fp8 query); --no-tensor-cores skips it.
A variant whose module the wheel does not hold prebuilt is skipped (its
"error" says so) unless --jit lets FlashInfer compile it on this machine.
Each variant is planned once a shape (host-side plan time "plan_ms", not in
the times), its first output checked against a PyTorch float32 reference of
the whole batch (relative norm < 2e-2; a miss makes the row an error and the
exit code 5: a wrong baseline is no baseline), then run() is timed as
torch_sdpa.py times SDPA (bench/common/torch_timing.py: CUDA events around
each call, median of N, default 40, after 5 warm-up calls), rotating over
cache sets (at least 3 and at least 600 MB read, decode_bench's rotation)
so no call finds its cache in L2: "us" (eager: Python's per-call cost is in
it where it exceeds the kernel's time) and "us_graph" (replays of a CUDA
graph of one run() a set: the kernels' own time). A variant's "best_us" is
the lesser; a shape's "best" is its fastest variant; "kv_gbps" counts K + V
bytes once (decode_bench's kv_bytes), "tokens_per_s" sequences x length a
second. Top level, like torch_sdpa.py's JSON: "best", "best_us",
"best_kv_gbps" of 32 x 4096 bf16, and "fp8_over_bf16_tokens_per_s" at 32 x
4096 (FlashInfer's fp8 over its bf16, best variants).
Prints JSON (and writes FILE). Exit codes: 0 timed (rows that failed say
why in "error"); 3 FlashInfer cannot be imported (the reason printed and in
"error"); 4 no PyTorch or no CUDA device; 5 an output check failed; 1 any
other failure.
"""
import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import torch_timing  # noqa: E402  (bench/common; stdlib only at import)

NQ, NKV, HD, PAGE = 32, 8, 128, 16  # decode_bench.cc's kNq, kNkv, kHd, kBs
MAIN = [(32, 4096), (1, 32768)]
GRID = [(32, 256), (32, 512), (32, 1024), (32, 2048), (1, 2048), (1, 4096), (1, 8192), (1, 16384)]
KVS = ("bf16", "fp8")
EXIT_NO_FLASHINFER, EXIT_NO_GPU, EXIT_CHECK = 3, 4, 5
CHECK_TOL = 2e-2


class NoFlashInfer(Exception):
    pass


class NoGpu(Exception):
    pass


def shape_name(seqs, length, kv):
    return "%dx%d_%s" % (seqs, length, kv)


def shapes(grid):
    return [(s, n, kv) for (s, n) in MAIN + (GRID if grid else []) for kv in KVS]


def install(fi_dir, site):
    """bench/mla_decode/flashinfer_mla.py's install (the same site and stamp)."""
    sys.path.insert(0, os.path.join(REPO, "bench", "mla_decode"))
    from flashinfer_mla import install as mla_install

    return mla_install(fi_dir, site)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--fi", default=os.path.join(REPO, ".fi"), help="folder of the carried wheels")
    ap.add_argument("--site", default="/tmp/klaunch-flashinfer-site")
    ap.add_argument("--only", default="", help="comma-separated shapes, e.g. 32x4096_bf16,1x32768_fp8")
    ap.add_argument("--no-grid", action="store_true", help="only 32 x 4096 and 1 x 32768")
    ap.add_argument("--no-graph", action="store_true", help="skip the CUDA graph timing")
    ap.add_argument("--no-tensor-cores", action="store_true", help="skip the use_tensor_cores=True variant")
    ap.add_argument("--jit", action="store_true",
                    help="let FlashInfer compile a variant's module that is not prebuilt (minutes of nvcc)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    result = {"ok": False, "program": "flashinfer_decode.py", "runs": args.runs}
    code = 0
    try:
        code = run(args, result)
    except NoFlashInfer as e:
        result["error"] = "FlashInfer is not importable: %s" % e
        result["traceback"] = traceback.format_exc()[-4000:]
        print("flashinfer_decode.py: %s" % result["error"], file=sys.stderr)
        code = EXIT_NO_FLASHINFER
    except NoGpu as e:
        result["error"] = str(e)
        print("flashinfer_decode.py: %s" % e, file=sys.stderr)
        code = EXIT_NO_GPU
    except Exception as e:
        result["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        result["traceback"] = traceback.format_exc()[-4000:]
        print("flashinfer_decode.py: %s" % result["error"], file=sys.stderr)
        code = 1
    finish(result, args)
    return code


def run(args, result):
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/klaunch-flashinfer-ws")
    os.environ.setdefault("FLASHINFER_LOGGING_LEVEL", "warning")
    os.makedirs(os.environ["FLASHINFER_WORKSPACE_BASE"], exist_ok=True)
    try:
        import torch
    except Exception as e:
        raise NoGpu("PyTorch is not importable: %s" % e)
    if not torch.cuda.is_available():
        raise NoGpu("torch.cuda.is_available() is False")
    dev = torch.device("cuda")
    result["torch"] = torch.__version__
    result["device"] = torch.cuda.get_device_name(0)
    result["cc"] = "%d.%d" % torch.cuda.get_device_capability(0)
    try:
        if os.path.isdir(args.fi):
            os.makedirs(args.site, exist_ok=True)
            result["wheels"] = install(args.fi, args.site)
            sys.path.insert(0, args.site)
            result["site"] = args.site
        import flashinfer
        from flashinfer import BatchDecodeWithPagedKVCacheWrapper
    except Exception as e:
        raise NoFlashInfer("%s: %s" % (type(e).__name__, str(e)[:2000]))
    result["flashinfer"] = flashinfer.__version__
    result["flashinfer_from"] = os.path.dirname(flashinfer.__file__)
    result["prebuilt"] = args.prebuilt = prebuilt(torch)

    variants = {"cuda_cores": False}
    if not args.no_tensor_cores:
        variants["tensor_cores"] = True
    only = set(w for w in args.only.split(",") if w)
    result["shapes"] = {}
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device=dev)  # shared float workspace
    check_failed = False
    for seqs, length, kv in shapes(not args.no_grid):
        name = shape_name(seqs, length, kv)
        if only and name not in only:
            continue
        row = result["shapes"][name] = {}
        try:
            with torch.no_grad():
                check_failed |= one_shape(torch, dev, seqs, length, kv, row, args, variants, ws,
                                          BatchDecodeWithPagedKVCacheWrapper)
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        print("flashinfer_decode.py: %s: %s" % (name, summary(row)), file=sys.stderr, flush=True)

    head = result["shapes"].get(shape_name(32, 4096, "bf16"), {})
    if "best_us" in head:
        result["best"] = head["best"]
        result["best_us"] = head["best_us"]
        result["best_kv_gbps"] = head["best_kv_gbps"]
        fp8 = result["shapes"].get(shape_name(32, 4096, "fp8"), {})
        if "best_us" in fp8:
            result["fp8_over_bf16_tokens_per_s"] = head["best_us"] / fp8["best_us"]
    result["ok"] = any("best_us" in r for r in result["shapes"].values())
    if check_failed:
        return EXIT_CHECK
    return 0


def prebuilt(torch):
    """Whether each module the variants load is found prebuilt (is_aot)."""
    out = {}
    try:
        from flashinfer.jit.attention.modules import gen_batch_decode_module, _gen_batch_prefill_primary_module

        for kv in KVS:
            args = (torch.bfloat16, kv_dtype(torch, kv), torch.bfloat16, torch.int32, HD, HD, 0, False, False)
            out["cuda_cores_" + kv] = bool(gen_batch_decode_module(*args).is_aot)
            out["tensor_cores_" + kv] = bool(_gen_batch_prefill_primary_module("fa2", *args, False, False).is_aot)
    except Exception as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    return out


def kv_dtype(torch, kv):
    return torch.bfloat16 if kv == "bf16" else torch.float8_e4m3fn


def summary(row):
    if "error" in row:
        return "error: " + row["error"][:200]
    parts = []
    for v, r in sorted(row.get("variants", {}).items()):
        parts.append("%s %s" % (v, ("%.1f us" % r["best_us"]) if "best_us" in r else "error: " + r.get("error", "?")))
    return ", ".join(parts)


def rand_bf16(torch, gen, dev, *shape):
    return (torch.rand(*shape, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16)


def rand_fp8(torch, gen, dev, *shape):
    """kl_inputs::fp8_code of random words: sign, exponent field 4..8, any
    mantissa (magnitude 1/8 to 2, never NaN), as torch.float8_e4m3fn."""
    r = torch.randint(0, 1 << 31, shape, device=dev, generator=gen, dtype=torch.int64)
    code = ((r & 1) << 7) | ((4 + (r >> 1) % 5) << 3) | ((r >> 8) & 7)
    return code.to(torch.uint8).view(torch.float8_e4m3fn)


def one_shape(torch, dev, seqs, length, kv, row, args, variants, ws, Wrapper):
    """Times each variant at one shape into row; True when an output check failed."""
    pages_per_seq = (length + PAGE - 1) // PAGE
    num_pages = seqs * pages_per_seq
    elem = 1 if kv == "fp8" else 2
    kv_bytes = seqs * length * NKV * HD * elem * 2
    nsets = max(3, torch_timing.sets_for(kv_bytes))
    row.update({"seqs": seqs, "len": length, "kv": kv, "kv_bytes": kv_bytes, "tokens": seqs * length,
                "input_sets": nsets, "page_size": PAGE, "num_qo_heads": NQ, "num_kv_heads": NKV, "head_dim": HD,
                "block_tables": "shuffled"})
    gen = torch.Generator(device=dev).manual_seed(seqs * 100003 + length + (7 if kv == "fp8" else 0))
    rand = rand_fp8 if kv == "fp8" else rand_bf16
    ks = [rand(torch, gen, dev, num_pages, PAGE, NKV, HD) for _ in range(nsets)]
    vs = [rand(torch, gen, dev, num_pages, PAGE, NKV, HD) for _ in range(nsets)]
    q = rand_bf16(torch, gen, dev, seqs, NQ, HD)
    out = torch.empty(seqs, NQ, HD, dtype=torch.bfloat16, device=dev)
    g = torch.Generator().manual_seed(11)
    indices = torch.randperm(num_pages, generator=g).to(torch.int32)  # shuffled page table
    indptr = torch.arange(0, num_pages + 1, pages_per_seq, dtype=torch.int32)
    last = torch.full((seqs,), length - (pages_per_seq - 1) * PAGE, dtype=torch.int32)
    scale = HD ** -0.5
    ref = reference(torch, dev, q, ks[0], vs[0], indices, seqs, pages_per_seq, length, scale)

    failed = False
    row["variants"] = {}
    for vname, tc in variants.items():
        rv = row["variants"][vname] = {"use_tensor_cores": tc}
        aot = args.prebuilt.get("%s_%s" % (vname, kv))
        rv["prebuilt"] = aot
        if aot is False and not args.jit:
            rv["error"] = "module not prebuilt in the carried wheel (flashinfer_prep.sh%s; --jit compiles it here)" % (
                " with FI_DECODE_TC=1" if tc else "")
            continue
        try:
            wrapper = Wrapper(ws, "NHD", use_tensor_cores=tc)
            t0 = time.perf_counter()
            wrapper.plan(indptr.to(dev), indices.to(dev), last.to(dev), NQ, NKV, HD, PAGE,
                         pos_encoding_mode="NONE", q_data_type=torch.bfloat16, kv_data_type=kv_dtype(torch, kv),
                         sm_scale=scale)
            torch.cuda.synchronize()
            rv["plan_ms"] = 1000.0 * (time.perf_counter() - t0)
            rv["resolved_backend"] = str(getattr(wrapper, "resolved_backend", "?"))

            scales = {"k_scale": 1.0, "v_scale": 1.0} if kv == "fp8" else {}

            def call(i):
                wrapper.run(q, (ks[i % nsets], vs[i % nsets]), out=out, **scales)

            call(0)
            torch.cuda.synchronize()
            rel = float((out.float() - ref).norm() / ref.norm())
            rv["check_rel_diff"] = rel
            if not rel < CHECK_TOL:
                failed = True
                raise RuntimeError("output differs from the PyTorch reference: relative norm %.3e (>= %g)"
                                   % (rel, CHECK_TOL))
            rv["us"] = torch_timing.median_us(torch, call, args.runs, warmup=5)
            times = [rv["us"]]
            if not args.no_graph:
                try:
                    rv["us_graph"] = graph_us(torch, call, nsets, args.runs)
                    times.append(rv["us_graph"])
                except Exception as e:
                    rv["graph_error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
            rv["best_us"] = min(times)
            rv["kv_gbps"] = kv_bytes / (rv["best_us"] * 1e3)
            rv["tokens_per_s"] = seqs * length / (rv["best_us"] * 1e-6)
        except Exception as e:
            rv["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        torch.cuda.synchronize()
    timed = {k: v for k, v in row["variants"].items() if "best_us" in v}
    if timed:
        best = min(timed, key=lambda k: timed[k]["best_us"])
        row["best"] = best
        row["best_us"] = timed[best]["best_us"]
        row["best_kv_gbps"] = timed[best]["kv_gbps"]
        row["best_tokens_per_s"] = timed[best]["tokens_per_s"]
    return failed


def reference(torch, dev, q, k_cache, v_cache, indices, seqs, pages_per_seq, length, scale):
    """The whole batch's output in float32: each sequence's pages gathered
    through the table, query head h reading KV head h // group."""
    idx = indices.to(dev).long().view(seqs, pages_per_seq)

    def gather(cache):  # through uint8 / int16 views: advanced indexing of fp8 tensors is not everywhere
        raw = cache.view(torch.uint8 if cache.element_size() == 1 else torch.int16)[idx].view(cache.dtype)
        return raw.float().reshape(seqs, pages_per_seq * PAGE, NKV, HD)[:, :length].permute(0, 2, 1, 3)

    k, v = gather(k_cache), gather(v_cache)
    qg = q.float().view(seqs, NKV, NQ // NKV, HD)
    s = torch.einsum("bhgd,bhnd->bhgn", qg, k) * scale
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhgn,bhnd->bhgd", p, v).reshape(seqs, NQ, HD)


def graph_us(torch, call, nsets, runs):
    """run() captured once a set in a CUDA graph; the median replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(2):
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for i in range(nsets):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call(i)
        graphs.append(g)
    return torch_timing.median_us(torch, lambda i: graphs[i % nsets].replay(), runs, warmup=5)


def finish(result, args):
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
