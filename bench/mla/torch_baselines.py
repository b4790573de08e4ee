#!/usr/bin/env python3
"""PyTorch reference points for mla_bench (bench/mla/run.sh runs both):

    python3 bench/mla/torch_baselines.py [--json FILE] [--runs N] [--sdpa-heads H] [--only NAME,...]

  matmul      bf16 8192 x 8192 x 8192 (torch.matmul, cuBLAS): TFLOP/s, the
              device's practical tensor-core rate
  bmm         torch.bmm at the grouped GEMM shapes of mla_bench: g 128
              batches of [4096, 128] @ [128, 512] (bmm_absorb) and
              [4096, 512] @ [512, 128] (bmm_absorb_t); B is stored [g, n, k]
              and passed transposed, as grouped_gemm_mma reads it;
              bmm_absorb_mgn: bmm_absorb with A and C in the kernel
              contract's layout ([m, g, k], [m, g, n]), as transposed views
  sdpa        F.scaled_dot_product_attention at the absorbed MLA shape:
              q [1, H, 4096, 576], one latent KV head expanded to H heads
              (k [1, H, 4096, 576] as an expand() view, v its first 512
              columns), causal, scale 1/sqrt(192); H = 16 by default (the
              math backend materialises H x 4096 x 4096 scores). Each SDPA
              backend that accepts the shape is timed; the best is reported.
  copy        device-to-device copy of 1 GiB (read + write bytes)

--only runs just the named measures (copy, matmul, bmm_absorb,
bmm_absorb_t, sdpa), e.g. for a profiler that must see one kind of kernel
(bench/mla/ncu_gemm.sh).

Times: CUDA events around each call, median of N (default 20) after
warm-up; inputs rotate over enough sets that each call finds a cold L2.
FLOPs: causal attention counts half of dense, H * S (S + 1) / 2 * 2 *
(576 + 512); GEMMs 2 m n k per batch. Prints JSON (and writes FILE). Exits
0 without PyTorch or a GPU, saying so in the JSON.
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
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sdpa-heads", type=int, default=16)
    ap.add_argument("--only", default="", help="comma-separated measures to run (default: all)")
    args = ap.parse_args()

    result = {"ok": False}
    try:
        import torch
        import torch.nn.functional as F
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

    def median_us(fn, runs=args.runs, warmup=3):
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
            result[name] = {"error": "%s: %s" % (type(e).__name__, e)}
        torch.cuda.empty_cache()

    # Copy bandwidth, read + write bytes.
    attempt("copy", lambda: torch_timing.copy_rate(torch, dev, args.runs, gen=gen))
    # Dense matmul: the practical tensor-core rate.
    attempt("matmul", lambda: torch_timing.matmul_rate(torch, dev, rand, args.runs))

    # Batched GEMMs at the grouped GEMM shapes. contract_layout: A [m, g, k]
    # and C [m, g, n] as the kernel contract has them (a group's rows 256 B /
    # 1 KiB apart, not contiguous), passed to torch.bmm as transposed views,
    # which cuBLAS takes as strided batches; else [g, m, k] and [g, m, n].
    def bmm(m, g, k, n, contract_layout=False):
        def run():
            nsets = sets_for((m * k + n * k) * g * 2)
            a = [rand(m, g, k).transpose(0, 1) if contract_layout else rand(g, m, k) for _ in range(nsets)]
            b = [rand(g, n, k) for _ in range(nsets)]  # [g, n, k], used transposed
            c = torch.empty(m, g, n, dtype=torch.bfloat16, device=dev).transpose(0, 1) if contract_layout else \
                torch.empty(g, m, n, dtype=torch.bfloat16, device=dev)
            us = median_us(lambda i: torch.bmm(a[i % nsets], b[i % nsets].transpose(1, 2), out=c))
            return {"us": us, "tflops": 2.0 * m * g * k * n / (us * 1e6), "shape": {"m": m, "g": g, "k": k, "n": n}}

        return run

    attempt("bmm_absorb", bmm(4096, 128, 128, 512))
    attempt("bmm_absorb_t", bmm(4096, 128, 512, 128))
    attempt("bmm_absorb_mgn", bmm(4096, 128, 128, 512, contract_layout=True))

    # SDPA at the absorbed shape, one latent KV head expanded to H heads.
    def sdpa():
        h, s, dqk, dv = args.sdpa_heads, 4096, 576, 512
        scale = 192 ** -0.5
        flops = h * s * (s + 1) / 2 * 2 * (dqk + dv)
        nsets = sets_for((h * s * dqk + s * dqk) * 2)
        qs = [rand(1, h, s, dqk) for _ in range(nsets)]
        kvs = [rand(1, 1, s, dqk) for _ in range(nsets)]

        def call(i):
            kv = kvs[i % nsets]
            k = kv.expand(1, h, s, dqk)
            v = kv[..., :dv].expand(1, h, s, dv)
            return F.scaled_dot_product_attention(qs[i % nsets], k, v, is_causal=True, scale=scale)

        backends = {"default": None}
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            backends.update({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                             "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH})
        except Exception:
            sdpa_kernel = None
        out = {"shape": {"heads": h, "seq": s, "d_qk": dqk, "d_v": dv, "causal": True}, "backends": {}}
        for name, be in backends.items():
            try:
                if be is None:
                    us = median_us(call, runs=max(3, args.runs // 4), warmup=1)
                else:
                    with sdpa_kernel(be):
                        us = median_us(call, runs=max(3, args.runs // 4), warmup=1)
                out["backends"][name] = {"us": us, "tflops": flops / (us * 1e6)}
            except Exception as e:
                out["backends"][name] = {"error": "%s: %s" % (type(e).__name__, str(e)[:300])}
            torch.cuda.empty_cache()
        timed = {k: v for k, v in out["backends"].items() if "us" in v}
        if timed:
            best = min(timed, key=lambda k: timed[k]["us"])
            out.update({"best": best, "us": timed[best]["us"], "tflops": timed[best]["tflops"]})
        return out

    attempt("sdpa", sdpa)

    result["ok"] = all("error" not in result.get(k, {"error": 1}) for k in ("copy", "matmul", "bmm_absorb"))
    return finish(result, args)


def finish(result, args):
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
