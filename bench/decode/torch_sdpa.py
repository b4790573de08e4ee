#!/usr/bin/env python3
"""PyTorch SDPA decode over a contiguous KV cache, the comparison point for
decode_bench's GQA shape: 32 sequences x 4096 positions, 32 query heads,
8 KV heads, head dim 128, bf16 (512 MiB of K + V).

    python3 bench/decode/torch_sdpa.py [--json FILE] [--runs N]

Variants (each timed when this PyTorch has it):
  enable_gqa   F.scaled_dot_product_attention(q [32, 32, 1, 128],
               k, v [32, 8, 4096, 128], enable_gqa=True)   (PyTorch >= 2.5)
  grouped      the same attention with each KV head's 4 query heads as 4
               query rows: q viewed as [32, 8, 4, 128] (no mask in decode,
               so the result is identical and K, V are read once)
  expanded     k, v expanded to 32 heads first (repeat_interleave; the copy
               is inside the timed region, as a caller without GQA pays it)
Times: CUDA events around each call, median of N (default 40) after 5
warm-up calls, KV sets rotated (3 sets, 805 MB) so L2 is cold. Bandwidth
counts K + V bytes once (32 * 4096 * 8 * 128 * 2 bytes * 2). Also measures
torch's device-to-device copy (512 MiB, read + write bytes) as decode_bench
measures cuMemcpyDtoD. Prints the numbers as JSON (and writes them to FILE).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import torch_timing  # noqa: E402  (bench/common; stdlib only at import)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()

    result = {"ok": False}
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # no PyTorch: say so in the JSON, exit 0
        result["error"] = "PyTorch is not importable: %s" % e
        return finish(result, args)
    if not torch.cuda.is_available():
        result["error"] = "torch.cuda.is_available() is False"
        return finish(result, args)

    dev = torch.device("cuda")
    result["torch"] = torch.__version__
    result["device"] = torch.cuda.get_device_name(0)
    seqs, nq, nkv, pos, hd = 32, 32, 8, 4096, 128
    group = nq // nkv
    kv_bytes = seqs * nkv * pos * hd * 2 * 2
    result["kv_bytes"] = kv_bytes
    nsets = 3

    def median_us(fn, runs=args.runs, warmup=5):
        return torch_timing.median_us(torch, fn, runs, warmup)

    # Copy bandwidth, read + write bytes.
    result["copy_gbps"] = torch_timing.copy_rate(torch, dev, args.runs, nbytes=512 << 20, warmup=5)["gbps"]

    gen = torch.Generator(device=dev).manual_seed(0)
    q = (torch.rand(seqs, nq, 1, hd, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16)
    ks = [(torch.rand(seqs, nkv, pos, hd, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16) for _ in range(nsets)]
    vs = [(torch.rand(seqs, nkv, pos, hd, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16) for _ in range(nsets)]
    scale = hd ** -0.5
    variants = {}
    outputs = {}

    def run_variant(name, fn):
        try:
            with torch.no_grad():
                outputs[name] = fn(0).reshape(seqs, nq, hd).float()
                us = median_us(fn)
            variants[name] = {"us": us, "kv_gbps": kv_bytes / (us * 1e3)}
        except Exception as e:  # a variant this PyTorch lacks
            variants[name] = {"error": "%s: %s" % (type(e).__name__, e)}

    run_variant("enable_gqa", lambda i: F.scaled_dot_product_attention(
        q, ks[i % nsets], vs[i % nsets], scale=scale, enable_gqa=True))
    qg = q.view(seqs, nkv, group, hd)
    run_variant("grouped", lambda i: F.scaled_dot_product_attention(
        qg, ks[i % nsets], vs[i % nsets], scale=scale))
    run_variant("expanded", lambda i: F.scaled_dot_product_attention(
        q, ks[i % nsets].repeat_interleave(group, dim=1), vs[i % nsets].repeat_interleave(group, dim=1), scale=scale))

    # The variants compute the same attention.
    names = list(outputs)
    for other in names[1:]:
        d = (outputs[other] - outputs[names[0]]).norm() / outputs[names[0]].norm()
        variants[other]["rel_diff_to_" + names[0]] = float(d)
    timed = {k: v for k, v in variants.items() if "us" in v}
    if timed:
        best = min(timed, key=lambda k: timed[k]["us"])
        result["best"] = best
        result["best_us"] = timed[best]["us"]
        result["best_kv_gbps"] = timed[best]["kv_gbps"]
        result["best_fraction_of_copy"] = timed[best]["kv_gbps"] / result["copy_gbps"]
        result["ok"] = True
    result["variants"] = variants
    return finish(result, args)


def finish(result, args):
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
