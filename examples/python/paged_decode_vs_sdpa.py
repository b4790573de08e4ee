#!/usr/bin/env python3
"""Paged decode from PyTorch: klaunch's GQA decode kernel against torch SDPA.

    python3 examples/python/paged_decode_vs_sdpa.py [--seqs 32] [--len 4096] [--heads 32] [--kv-heads 8]
                                                    [--launcher paged_decode_attn_bf16_gqa_mma] [--runs 20]

Needs a CUDA GPU (sm_80 or newer), PyTorch with CUDA, and klaunch's Python
launchers, either staged (`bash tools/gpu/stage.sh`, or only them:
`bash tools/gpu/stage_python.sh`; this script finds .gpu/python) or
installed (`pip install ./python`, with the fatbins embedded or found in
$KLAUNCH_FATBIN_DIR, e.g. bazel-bin/kernels; docs/PYTHON.md).

It builds one bf16 KV cache twice: paged (blocks of 16 positions, each
sequence's blocks scattered over a shuffled pool, a block table per
sequence), for klaunch, and contiguous [seqs, kv_heads, len, head_dim], for
F.scaled_dot_product_attention. Then it runs both on the same queries,
compares the outputs, times them (CUDA events, median of --runs), replays
the klaunch launch from a CUDA graph, and shows what a refused launch says.
The variant (gqa4_d128 or gqa8_d128) follows from heads / kv_heads.
Exit status: 0 the outputs match, 1 they do not, 2 something it needs is
missing.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAGED = os.path.join(HERE, "..", "..", ".gpu", "python")


def need(what):
    print("paged_decode_vs_sdpa: %s" % what, file=sys.stderr)
    sys.exit(2)


try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    need("PyTorch is not importable (%s)" % e)
try:
    import klaunch
    import klaunch_paged_decode as pd
except ImportError:
    sys.path.insert(0, os.path.abspath(STAGED))
    try:
        import klaunch
        import klaunch_paged_decode as pd
    except ImportError as e:
        need("klaunch's Python launchers are not importable (%s): run bash tools/gpu/stage_python.sh, or "
             "pip install ./python" % e)


def median_us(fn, runs):
    for _ in range(3):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for a, b in zip(starts, stops):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    us = sorted(1000.0 * a.elapsed_time(b) for a, b in zip(starts, stops))
    return us[len(us) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, default=32)
    ap.add_argument("--len", type=int, default=4096, help="positions per sequence")
    ap.add_argument("--heads", type=int, default=32, help="query heads")
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--launcher", default="paged_decode_attn_bf16_gqa_mma",
                    help="a paged_decode launcher with paged_decode_attn_bf16's arguments")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        need("torch.cuda.is_available() is False")

    seqs, length, nq, nkv, hd, bs = args.seqs, args.len, args.heads, args.kv_heads, 128, args.block_size
    dev = torch.device("cuda")
    print("%s, torch %s; %d sequences x %d positions, %d query heads, %d KV heads, head dim %d, bf16" % (
        torch.cuda.get_device_name(0), torch.__version__, seqs, length, nq, nkv, hd))
    g = torch.Generator(device=dev).manual_seed(0)
    q = (torch.rand(seqs, nq, hd, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
    k = (torch.rand(seqs, nkv, length, hd, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
    v = (torch.rand(seqs, nkv, length, hd, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)

    # The paged cache: block b of sequence s holds positions [b*bs, (b+1)*bs)
    # as [bs, nkv, hd], at pool row tables[s, b].
    blocks = (length + bs - 1) // bs
    pad = blocks * bs - length

    def paged(x):
        x = F.pad(x, (0, 0, 0, pad)).view(seqs, nkv, blocks, bs, hd).permute(0, 2, 3, 1, 4)
        pool = torch.empty(seqs * blocks, bs, nkv, hd, dtype=x.dtype, device=dev)
        pool[perm] = x.reshape(seqs * blocks, bs, nkv, hd)
        return pool

    perm = torch.randperm(seqs * blocks, device=dev, generator=g)
    k_cache, v_cache = paged(k), paged(v)
    tables = perm.view(seqs, blocks).to(torch.int32)
    lens = torch.full((seqs,), length, dtype=torch.int32, device=dev)
    out = torch.empty_like(q)
    scale = hd ** -0.5
    launch = getattr(pd, args.launcher)

    def klaunch_decode():
        launch(q, k_cache, v_cache, out, tables, lens, blocks, seqs, nq, nkv, hd, bs, scale, nq * hd, 0)

    def sdpa():
        try:
            return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, scale=scale, enable_gqa=True)
        except TypeError:  # a torch without enable_gqa: each KV head's query heads as rows
            return F.scaled_dot_product_attention(q.view(seqs, nkv, nq // nkv, hd), k, v, scale=scale)

    klaunch_decode()
    ref = sdpa().reshape(seqs, nq, hd)
    torch.cuda.synchronize()
    variant = next((v for v, c in pd.VARIANTS.items() if nq == nkv * c["DECODE_GQA_PACK_WIDTH"]), "any")
    err = (out.float() - ref.float()).abs().max().item()
    rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    print("klaunch %s (variant %s) vs SDPA: max |diff| %.3g, relative L2 %.3g" % (
        args.launcher, variant, err, rel))

    kv_bytes = 2 * seqs * nkv * length * hd * 2
    t_k = median_us(klaunch_decode, args.runs)
    t_s = median_us(sdpa, args.runs)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        klaunch_decode()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        klaunch_decode()
    t_g = median_us(graph.replay, args.runs)
    print("klaunch %8.1f us  %6.0f GB/s of K+V" % (t_k, kv_bytes / t_k / 1e3))
    print("graph   %8.1f us  (the same launch replayed from a CUDA graph)" % t_g)
    print("SDPA    %8.1f us  %6.0f GB/s  (klaunch / SDPA time: %.2f)" % (t_s, kv_bytes / t_s / 1e3, t_k / t_s))

    # The host cost of a Python launch: the checks of both sides, no kernel
    # wait (the stream is busy with the first ones).
    n = 200
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        launch(q, k_cache, v_cache, out, tables, lens, blocks, seqs, nq, nkv, hd, bs, scale, nq * hd, 0,
               check_only=True)
    host = (time.perf_counter() - t0) / n * 1e6
    print("host    %8.1f us per Python launch call (check_only: every check, no launch)" % host)

    try:
        launch(q.float(), k_cache, v_cache, out, tables, lens, blocks, seqs, nq, nkv, hd, bs, scale, nq * hd, 0)
    except klaunch.Error as e:
        print("refused: %s" % e)
    try:
        launch(q, k_cache, v_cache, out, tables, lens, blocks, seqs, nq, nkv, hd, bs, scale, nq * hd - 1, 0)
    except klaunch.Error as e:
        print("refused: %s" % e)

    ok = rel < 1e-2 and err < 5e-2
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
