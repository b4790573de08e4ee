#!/usr/bin/env python3
"""PyTorch reference points for mla_decode_bench (bench/mla_decode/run.sh runs both):

    python3 bench/mla_decode/torch_baselines.py [--json FILE] [--runs N] [--only NAME,...] [--quick]

  copy        device-to-device copy of 1 GiB (dst.copy_(src)); bytes = read + write
  matmul      bf16 8192 x 8192 x 8192 (torch.matmul, cuBLAS): TFLOP/s, the
              device's practical tensor-core rate (the compute target's
              baseline)
  ref_mem, ref_compute
              the decode step written plainly in PyTorch at mla_decode_bench's
              mem shape (h_q 16, s_q 1, batch 128, every length 4096) and
              compute shape (h_q 128, s_q 2, batch 128, lengths uniform in
              [4096, 32768] from the same generator as mla_decode_bench's, so
              the same lengths), D 576 = kv_lora 512 + rope 64, bf16, pages of 64,
              each batch's block table a shuffle of its cache's pages:
                K = cache[block_table].reshape(batch, pages * 64, 576)  (the gather)
                S = (q [batch, s_q * h_q, 576] @ K^T) * scale, in fp32
                S masked: position p visible to token i of a sequence of
                  length L when p < L - s_q + 1 + i (causal among the s_q
                  tokens), and p < L (ragged lengths pad to the longest)
                O = softmax(S, fp32).to(bf16) @ V, V = K's first 512 columns
              timed with the gather ("us") and on a K gathered beforehand
              ("us_no_gather"). Ragged lengths are padded to the batch's
              longest and masked, so the compute shape does the padding's
              work too; bytes, FLOPs and tokens count the real lengths only,
              as mla_decode_bench counts them: bytes = KV (sum of lengths x
              1152) + q + out, FLOPs = 2 s_q h_q sum(lengths) (576 + 512)

Times: CUDA events around each call, median of N (default 10; reference
rows at most 10) after warm-up; inputs rotate over enough sets (at least 2,
at least 600 MB) that each call finds a cold L2. Each row's GB/s is also
given as a ratio to this script's own copy ("copy_ratio"). --quick: batch 32
(a smoke run). Prints JSON (and writes FILE). Exits 0 without PyTorch or a
GPU, saying so in the JSON ("error").
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import torch_timing  # noqa: E402  (bench/common; stdlib only at import)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated measures to run (copy, matmul, ref_mem, ref_compute)")
    ap.add_argument("--quick", action="store_true", help="batch 32: a smoke run")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    result = {"ok": False, "program": "torch_baselines.py (mla_decode)"}
    try:
        import torch
    except Exception as e:
        result["error"] = "PyTorch is not importable: %s" % e
        return finish(result, args)
    if not torch.cuda.is_available():
        result["error"] = "torch.cuda.is_available() is False"
        return finish(result, args)

    dev = torch.device("cuda")
    result["torch"] = torch.__version__
    result["device"] = torch.cuda.get_device_name(0)
    gen = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape):
        return (torch.rand(*shape, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16)

    def median_us(fn, runs=args.runs, warmup=2):
        return torch_timing.median_us(torch, fn, runs, warmup)

    sets_for = torch_timing.sets_for

    only = set(w for w in args.only.split(",") if w)

    def attempt(name, fn):
        if only and name not in only:
            return
        try:
            with torch.no_grad():
                result[name] = fn()
        except Exception as e:
            result[name] = {"error": "%s: %s" % (type(e).__name__, str(e)[:500])}
        torch.cuda.empty_cache()

    attempt("copy", lambda: torch_timing.copy_rate(torch, dev, max(args.runs, 20), gen=gen, warmup=2))
    copy_gbps = result.get("copy", {}).get("gbps")
    attempt("matmul", lambda: torch_timing.matmul_rate(torch, dev, rand, max(args.runs, 20), warmup=2))

    batch = 32 if args.quick else 128
    D, DV, PAGE = 576, 512, 64

    def reference(s_q, h_q, lengths, seed):
        def run():
            R = s_q * h_q
            scale = 1.0 / D ** 0.5
            rng = random.Random(seed)
            pages_of = [(l + PAGE - 1) // PAGE for l in lengths]
            mbps, num_blocks = max(pages_of), sum(pages_of)
            lmax = max(lengths)
            lens = torch.tensor(lengths, dtype=torch.int64, device=dev)
            tokens = sum(lengths)
            kv_bytes = tokens * D * 2
            io_bytes = kv_bytes + 2 * batch * R * D + 2 * batch * R * DV
            flops = 2.0 * s_q * h_q * tokens * (D + DV)
            nsets = sets_for(num_blocks * PAGE * D * 2 + batch * R * D * 2)
            caches, tables, qs = [], [], []
            for _ in range(nsets):
                perm = list(range(num_blocks))
                rng.shuffle(perm)
                table = torch.zeros(batch, mbps, dtype=torch.int64)  # entries past a sequence's pages: page 0, masked
                nxt = 0
                for b, n in enumerate(pages_of):
                    table[b, :n] = torch.tensor(perm[nxt:nxt + n])
                    nxt += n
                tables.append(table.to(dev))
                caches.append(rand(num_blocks, PAGE, D))
                qs.append(rand(batch, R, D))
            # Visible: p < L - s_q + 1 + i for row r = i * h_q + h (and so p < L).
            pos = torch.arange(mbps * PAGE, device=dev)[:lmax]
            tok = torch.arange(R, device=dev) // h_q
            limit = lens[:, None] - s_q + 1 + tok[None, :]  # [batch, R]
            hidden = pos[None, None, :] >= limit[:, :, None]  # [batch, R, lmax]

            def gather(i):
                return caches[i][tables[i]].reshape(batch, mbps * PAGE, D)[:, :lmax]

            def attend(q, k):
                s = torch.matmul(q, k.transpose(1, 2)).float() * scale
                s.masked_fill_(hidden, float("-inf"))
                p = torch.softmax(s, dim=-1).to(torch.bfloat16)
                return torch.matmul(p, k[..., :DV])

            def step(i):
                return attend(qs[i % nsets], gather(i % nsets))

            runs = min(args.runs, 10)
            us = median_us(step, runs=runs, warmup=1)
            gathered = [gather(i) for i in range(nsets)]
            us_ng = median_us(lambda i: attend(qs[i % nsets], gathered[i % nsets]), runs=runs, warmup=1)
            out = {"us": us, "us_no_gather": us_ng, "bytes": io_bytes, "kv_bytes": kv_bytes,
                   "flops": flops, "tokens": tokens, "gbps": io_bytes / (us * 1e3),
                   "gbps_no_gather": io_bytes / (us_ng * 1e3), "tflops": flops / (us * 1e6),
                   "tflops_no_gather": flops / (us_ng * 1e6), "tokens_per_s": tokens / (us * 1e-6),
                   "tokens_per_s_no_gather": tokens / (us_ng * 1e-6), "input_sets": nsets,
                   "shape": {"batch": batch, "s_q": s_q, "h_q": h_q, "head_dim": D, "page_size": PAGE,
                             "max_len": lmax, "mean_len": tokens / batch}}
            if copy_gbps:
                out["copy_ratio"] = out["gbps"] / copy_gbps
                out["copy_ratio_no_gather"] = out["gbps_no_gather"] / copy_gbps
            return out

        return run

    mem_lengths = [4096] * batch
    compute_lengths = compute_shape_lengths(batch)
    attempt("ref_mem", reference(1, 16, mem_lengths, 1))
    attempt("ref_compute", reference(2, 128, compute_lengths, 2))

    result["ok"] = all("error" not in result.get(k, {"error": 1}) for k in ("copy", "matmul"))
    return finish(result, args)


def lcg(seed):
    """The lengths' generator, the same in mla_decode_bench.cc and flashinfer_mla.py:
    x = x * 1664525 + 1013904223 mod 2^32, yielding x >> 8."""
    x = seed
    while True:
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        yield x >> 8


def compute_shape_lengths(batch):
    """The compute shape's lengths: 4096 + next % 28673 (4096 .. 32768), seed 45."""
    g = lcg(45)
    return [4096 + next(g) % 28673 for _ in range(batch)]


def finish(result, args):
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
