#!/usr/bin/env python3
"""FlashInfer's MLA decode (BatchMLAPagedAttentionWrapper) at mla_decode_bench's
shapes, as a same-run baseline (bench/mla_decode/run.sh runs it after the C++
bench, on the same GPU):

    python3 bench/mla_decode/flashinfer_mla.py [--json FILE] [--runs N] [--fi DIR]
        [--backends fa3,fa2] [--only mem,varlen,compute,long] [--quick]

FlashInfer comes from DIR (default .fi/ of the repository, made on the
development machine by bench/mla_decode/flashinfer_prep.sh: a trimmed
flashinfer-python wheel whose FA3 (sm_90a) and FA2 MLA modules are prebuilt,
and apache-tvm-ffi for Python 3.12): its wheels are installed with pip,
offline and without dependencies, into a temporary folder (--site, default
/tmp/klaunch-flashinfer-site) that goes first on sys.path; FlashInfer's JIT
workspace is FLASHINFER_WORKSPACE_BASE (default /tmp/klaunch-flashinfer-ws).
Without DIR it imports whatever flashinfer the Python has.

Shapes (bf16 q, KV and out; D = 512 + 64; pages of 64; causal among a
sequence's s_q tokens, as mla_decode_bench's launchers; the lengths from the
same generator as mla_decode_bench.cc's, so the same lengths):
  mem      h_q 16, s_q 1, batch 128, every length 4096
  varlen   h_q 16, s_q 1, batch 128, pairs (x, 8192 - x) shuffled (mean 4096)
  compute  h_q 128, s_q 2, batch 128, lengths uniform in [4096, 32768]
  long     h_q 16, s_q 1, batch 1, length 32768
For each backend that plans (fa3 on sm_90, fa2 everywhere from sm_80), the
wrapper is planned once (CSR metadata: qo_indptr, kv_indptr, a shuffled
kv_indices, kv_len_arr; the host-side plan is timed apart, "plan_ms", and is
not in "us": FlashInfer plans once a step for all layers, where klaunch's
schedule kernel is inside its step time), its output is checked once against
a PyTorch reference of the first sequences (float32 softmax; relative norm <
2e-2, else the row is an error), then run() is timed: CUDA events around
each call, median of N (default 20) after warm-up, rotating over enough
q/cache sets (at least 2, at least 600 MB) that no call finds its cache in
L2 ("us"); and as replays of a CUDA graph of one run() a set ("us_graph",
where capture works: Python's per-call cost is out of it). Bytes, FLOPs and
tokens are mla_decode_bench's (KV + q + out; 2 s_q h_q sum(lengths)
(576 + 512); sum of lengths). Prints JSON (and writes FILE); exits 0 when
FlashInfer cannot run, with the reason in "error" (top level or per row).
"""
import argparse
import glob
import itertools
import json
import os
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import torch_timing  # noqa: E402  (bench/common; stdlib only at import)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
D, DV, KPE, PAGE = 576, 512, 64, 64


def lcg(seed):
    """The lengths' generator of mla_decode_bench.cc and torch_baselines.py:
    x = x * 1664525 + 1013904223 mod 2^32, yielding x >> 8."""
    x = seed
    while True:
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        yield x >> 8


def shapes(batch, long_len):
    g = lcg(7)
    varlen = []
    for _ in range(batch // 2):
        v = 1 + next(g) % 8191
        varlen += [v, 8192 - v]
    for i in range(len(varlen) - 1, 0, -1):
        j = next(g) % (i + 1)
        varlen[i], varlen[j] = varlen[j], varlen[i]
    g = lcg(45)
    compute = [4096 + next(g) % 28673 for _ in range(batch)]
    return {
        "mem": (1, 16, [4096] * batch),
        "varlen": (1, 16, varlen),
        "compute": (2, 128, compute),
        "long": (1, 16, [long_len]),
    }


def install(fi_dir, site):
    """pip-installs fi_dir's wheels for this Python into site (offline, no dependencies)."""
    tag = "cp%d%d" % sys.version_info[:2]
    wheels = [w for w in sorted(glob.glob(os.path.join(fi_dir, "*.whl")))
              if "-py3-none-any" in w or "-%s-" % tag in os.path.basename(w)]
    if not wheels:
        raise RuntimeError("no wheels for %s in %s (run bench/mla_decode/flashinfer_prep.sh on the development "
                           "machine and carry .fi)" % (tag, fi_dir))
    stamp = os.path.join(site, ".klaunch-installed")
    want = "\n".join(os.path.basename(w) + " %d" % os.path.getsize(w) for w in wheels)
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", site] + wheels, check=True)
        with open(stamp, "w") as f:
            f.write(want)
    return [os.path.basename(w) for w in wheels]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--fi", default=os.path.join(REPO, ".fi"), help="folder of the carried wheels")
    ap.add_argument("--site", default="/tmp/klaunch-flashinfer-site")
    ap.add_argument("--backends", default="fa3,fa2")
    ap.add_argument("--only", default="", help="comma-separated shapes (mem, varlen, compute, long)")
    ap.add_argument("--quick", action="store_true", help="batch 32, long 8192: a smoke run")
    ap.add_argument("--no-graph", action="store_true", help="skip the CUDA graph timing")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    result = {"ok": False, "program": "flashinfer_mla.py", "runs": args.runs, "quick": args.quick}
    try:
        run(args, result)
    except Exception as e:  # anything FlashInfer or the GPU refuses: said in the JSON, exit 0
        result["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        result["traceback"] = traceback.format_exc()[-4000:]
    return finish(result, args)


def run(args, result):
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/klaunch-flashinfer-ws")
    os.environ.setdefault("FLASHINFER_LOGGING_LEVEL", "warning")
    os.makedirs(os.environ["FLASHINFER_WORKSPACE_BASE"], exist_ok=True)
    if os.path.isdir(args.fi):
        os.makedirs(args.site, exist_ok=True)
        result["wheels"] = install(args.fi, args.site)
        sys.path.insert(0, args.site)
        result["site"] = args.site
    try:
        import torch
    except Exception as e:
        raise RuntimeError("PyTorch is not importable: %s" % e)
    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    dev = torch.device("cuda")
    result["torch"] = torch.__version__
    result["device"] = torch.cuda.get_device_name(0)
    result["cc"] = "%d.%d" % torch.cuda.get_device_capability(0)
    import flashinfer
    from flashinfer.mla import BatchMLAPagedAttentionWrapper, MLAPlanMetadata

    result["flashinfer"] = flashinfer.__version__
    result["flashinfer_from"] = os.path.dirname(flashinfer.__file__)
    try:
        from flashinfer.jit.attention.modules import gen_batch_mla_module

        result["prebuilt"] = {}
        for b in args.backends.split(","):
            spec = gen_batch_mla_module(b, torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, DV, KPE, False)
            result["prebuilt"][b] = bool(spec.is_aot)
    except Exception as e:
        result["prebuilt"] = {"error": "%s: %s" % (type(e).__name__, e)}

    gen = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape):
        return (torch.rand(*shape, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16)

    def median_us(fn, runs, warmup=3):
        return torch_timing.median_us(torch, fn, runs, warmup)

    sets_for = torch_timing.sets_for

    only = set(w for w in args.only.split(",") if w)
    batch = 32 if args.quick else 128
    scale = 1.0 / D ** 0.5
    result["shapes"] = {}
    for name, (s_q, h_q, lengths) in shapes(batch, 8192 if args.quick else 32768).items():
        if only and name not in only:
            continue
        row = result["shapes"][name] = {}
        try:
            with torch.no_grad():
                one_shape(name, s_q, h_q, lengths, row, args, torch, dev, rand, median_us, sets_for, scale,
                          BatchMLAPagedAttentionWrapper, MLAPlanMetadata)
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        torch.cuda.empty_cache()
    result["ok"] = any("us" in r.get(b, {}) for r in result["shapes"].values() for b in r if isinstance(r[b], dict))


def one_shape(name, s_q, h_q, lengths, row, args, torch, dev, rand, median_us, sets_for, scale, Wrapper, Metadata):
    b = len(lengths)
    R = s_q * h_q
    pages_of = [(l + PAGE - 1) // PAGE for l in lengths]
    num_pages = sum(pages_of)
    tokens = sum(lengths)
    kv_bytes = tokens * D * 2
    io_bytes = kv_bytes + 2 * b * R * D + 2 * b * R * DV
    flops = 2.0 * s_q * h_q * tokens * (D + DV)
    nsets = sets_for(num_pages * PAGE * D * 2 + b * R * D * 2)
    row.update({"batch": b, "s_q": s_q, "h_q": h_q, "tokens": tokens, "bytes": io_bytes, "kv_bytes": kv_bytes,
                "flops": flops, "input_sets": nsets, "mean_len": tokens / b, "max_len": max(lengths)})
    g = torch.Generator().manual_seed(1234)
    kv_indices = torch.randperm(num_pages, generator=g).to(torch.int32)
    kv_indptr = torch.tensor([0] + list(itertools.accumulate(pages_of)), dtype=torch.int32)
    qo_indptr = torch.arange(0, (b + 1) * s_q, s_q, dtype=torch.int32)
    kv_len = torch.tensor(lengths, dtype=torch.int32)
    caches = [rand(num_pages, PAGE, D) for _ in range(nsets)]
    qs = [rand(b * s_q, h_q, D) for _ in range(nsets)]
    out = torch.empty(b * s_q, h_q, DV, dtype=torch.bfloat16, device=dev)

    def reference(q, cache, seqs):
        """out rows of the first `seqs` sequences, float32 softmax."""
        rows = []
        for i in range(seqs):
            pages = kv_indices[kv_indptr[i]:kv_indptr[i + 1]].to(dev).long()
            k = cache[pages].reshape(-1, D)[:lengths[i]].float()
            qi = q[i * s_q:(i + 1) * s_q].reshape(R, D).float()
            s = (qi @ k.T) * scale
            tok = torch.arange(R, device=dev) // h_q
            hidden = torch.arange(lengths[i], device=dev)[None, :] >= (lengths[i] - s_q + 1 + tok)[:, None]
            s.masked_fill_(hidden, float("-inf"))
            p = torch.softmax(s, dim=-1)
            rows.append((p @ k[:, :DV]).reshape(s_q, h_q, DV))
        return torch.cat(rows)

    for backend in args.backends.split(","):
        rb = row[backend] = {}
        try:
            ws = torch.empty(128 << 20, dtype=torch.int8, device=dev)
            wrapper = Wrapper(ws, backend=backend)
            meta = Metadata.csr(qo_indptr.to(dev), kv_indptr.to(dev), kv_indices.to(dev), kv_len.to(dev))
            plan_kw = dict(metadata=meta, num_heads=h_q, head_dim_ckv=DV, head_dim_kpe=KPE, page_size=PAGE,
                           causal=True, sm_scale=scale, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
            t0 = time.perf_counter()
            wrapper.plan(**plan_kw)
            torch.cuda.synchronize()
            rb["plan_ms"] = 1000.0 * (time.perf_counter() - t0)
            rb["planned_backend"] = str(getattr(wrapper, "_planned_backend_name", backend))
            wrapper.run(query=qs[0], kv_cache=caches[0], out=out)
            torch.cuda.synchronize()
            seqs = min(b, 4)
            ref = reference(qs[0], caches[0], seqs)
            got = out[:seqs * s_q].float()
            rel = float((got - ref).norm() / ref.norm())
            rb["check_rel_diff"] = rel
            if not rel < 2e-2:
                raise RuntimeError("output differs from the PyTorch reference: relative norm %.3e" % rel)
            us = median_us(lambda i: wrapper.run(query=qs[i % nsets], kv_cache=caches[i % nsets], out=out), args.runs)
            rb.update(rates(us, io_bytes, flops, tokens))
            if not args.no_graph:
                try:
                    rb["us_graph"] = graph_us(torch, wrapper, qs, caches, out, nsets, median_us, args.runs)
                except Exception as e:
                    rb["graph_error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        except Exception as e:
            rb["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        torch.cuda.synchronize()


def graph_us(torch, wrapper, qs, caches, out, nsets, median_us, runs):
    """run() captured once a set in a CUDA graph; the median replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(2):
            wrapper.run(query=qs[i % nsets], kv_cache=caches[i % nsets], out=out)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for i in range(nsets):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            wrapper.run(query=qs[i], kv_cache=caches[i], out=out)
        graphs.append(g)
    return median_us(lambda i: graphs[i % nsets].replay(), runs)


def rates(us, io_bytes, flops, tokens):
    return {"us": us, "gbps": io_bytes / (us * 1e3), "tflops": flops / (us * 1e6), "tokens_per_s": tokens / (us * 1e-6)}


def finish(result, args):
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
