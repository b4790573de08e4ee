#!/usr/bin/env python3
"""Prints mla_bench's and torch_baselines.py's numbers as one Markdown table:
each measure, its target and the ratio (>= 1 meets the target).

    python3 bench/mla/table.py mla_bench.json [--torch torch_baselines.json]

Targets (issue 4; the wgmma rows: issue 13; the tma rows: issue 20): absorbed attention >= 0.65 of the dense bf16 matmul rate
and >= 20x PyTorch SDPA at the absorbed shape; tiled grouped GEMM >= 0.7 of
torch.bmm at the same shape; data movement >= 0.8 of the copy bandwidth
measured in the same run (cuMemcpyDtoD); for rope extract/writeback and
q_final and cache assembly it is the wide launchers' target (their
seed-grid rows are kept).
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--torch")
    args = ap.parse_args()
    b = json.load(open(args.bench))["results"]
    t = json.load(open(args.torch)) if args.torch else {}

    def tv(*path):
        """A number from the torch JSON, or None (missing, or an error there)."""
        d = t
        for p in path:
            if not isinstance(d, dict) or p not in d:
                return None
            d = d[p]
        return d if isinstance(d, (int, float)) else None

    rows = []

    def row(name, value, fmt, target=None, reference=None):
        """value and, when a target is given, ratio = value / (target * reference or target)."""
        if value is None:
            rows.append((name, "n/a", "", "n/a"))
            return
        if target is None:
            rows.append((name, fmt.format(value), "(report)", ""))
            return
        if reference is None and isinstance(target, tuple):
            rows.append((name, fmt.format(value), target[1], "n/a (no reference)"))
            return
        goal = target[0] * reference if isinstance(target, tuple) else target
        ratio = value / goal
        text = target[1] if isinstance(target, tuple) else ">= " + fmt.format(target)
        rows.append((name, fmt.format(value), text, "%.3f (%s)" % (ratio, "meets" if ratio >= 1.0 else "MISSES")))

    def r(name, key):
        return b[name][key] if name in b else None

    matmul = tv("matmul", "tflops")
    sdpa = tv("sdpa", "tflops")
    bmm = tv("bmm_absorb", "tflops")
    bmm_t = tv("bmm_absorb_t", "tflops")
    copy = r("copy", "gbps")

    row("torch matmul bf16 8192^3 (TFLOP/s)", matmul, "{:.1f}")
    if "sdpa" in t:
        row("torch SDPA absorbed, %s backend, H %s (TFLOP/s)" % (t["sdpa"].get("best", "none"),
            t["sdpa"].get("shape", {}).get("heads", "?")), sdpa, "{:.2f}")
    row("copy cuMemcpyDtoD (GB/s, read + write)", copy, "{:.0f}")
    row("torch copy (GB/s, read + write)", tv("copy", "gbps"), "{:.0f}")
    a576 = r("attn_mma_576", "tflops")
    row("attention mma D 576, 128 heads, 4096, causal (TFLOP/s) vs matmul", a576, "{:.1f}", (0.65, ">= 0.65 x matmul"), matmul)
    row("attention mma D 576 vs torch SDPA", a576, "{:.1f}", (20.0, ">= 20 x SDPA"), sdpa)
    row("attention mma D 320, 128 heads, 4096, causal (TFLOP/s) vs matmul", r("attn_mma_320", "tflops"), "{:.1f}",
        (0.65, ">= 0.65 x matmul"), matmul)
    row("attention seed D 576, small shape (TFLOP/s)", r("attn_seed_576", "tflops"), "{:.2f}")
    row("attention mma D 576 at the seed's shape (TFLOP/s)", r("attn_mma_576_small", "tflops"), "{:.1f}")
    small, seed = r("attn_mma_576_small", "us"), r("attn_seed_576", "us")
    if small and seed:
        row("  seed time / mma time at that shape (the seed's V is 576 wide)", seed / small, "{:.1f}")
    row("grouped GEMM mma m 4096 g 128 k 128 n 512 (TFLOP/s) vs bmm", r("gemm_mma", "tflops"), "{:.1f}",
        (0.7, ">= 0.7 x bmm"), bmm)
    row("grouped GEMM mma m 4096 g 128 k 512 n 128 (TFLOP/s) vs bmm", r("gemm_mma_t", "tflops"), "{:.1f}",
        (0.7, ">= 0.7 x bmm"), bmm_t)
    row("grouped GEMM seed m 4096 g 128 k 128 n 512 (TFLOP/s)", r("gemm_seed", "tflops"), "{:.2f}")
    # The sm_90a (wgmma) launchers (issue 13): attention >= 0.65 of the matmul
    # rate; grouped GEMM >= 1.0 x torch.bmm at both shapes and, at k 128 (bound
    # by its 537 MB output), bytes / time >= 0.85 of copy.
    row("attention wgmma D 576, 128 heads, 4096, causal (TFLOP/s) vs matmul", r("attn_wgmma_576", "tflops"), "{:.1f}",
        (0.65, ">= 0.65 x matmul"), matmul)
    row("attention wgmma D 320, 128 heads, 4096, causal (TFLOP/s) vs matmul", r("attn_wgmma_320", "tflops"), "{:.1f}",
        (0.65, ">= 0.65 x matmul"), matmul)
    row("grouped GEMM wgmma k 128 n 512 (TFLOP/s) vs bmm", r("gemm_wgmma", "tflops"), "{:.1f}", (1.0, ">= 1.0 x bmm"), bmm)
    row("grouped GEMM wgmma k 512 n 128 (TFLOP/s) vs bmm", r("gemm_wgmma_t", "tflops"), "{:.1f}", (1.0, ">= 1.0 x bmm"),
        bmm_t)
    row("grouped GEMM wgmma k 128 n 512 (GB/s, A + B + C once) vs copy", r("gemm_wgmma", "gbps"), "{:.0f}",
        (0.85, ">= 0.85 x copy"), copy)
    row("grouped GEMM wgmma k 512 n 128 (GB/s) vs copy", r("gemm_wgmma_t", "gbps"), "{:.0f}")
    # The copy-engine launchers (issue 20): attention D 576 >= 0.65 of the
    # matmul rate (goal 0.8), D 320 >= 0.75; grouped GEMM >= 1.0 x torch.bmm
    # at both shapes and, at k 128, >= 0.85 of copy.
    row("attention tma D 576, 128 heads, 4096, causal (TFLOP/s) vs matmul", r("attn_tma_576", "tflops"), "{:.1f}",
        (0.65, ">= 0.65 x matmul"), matmul)
    row("attention tma D 576 vs matmul, the goal", r("attn_tma_576", "tflops"), "{:.1f}", (0.8, ">= 0.8 x matmul"),
        matmul)
    row("attention tma D 320, 128 heads, 4096, causal (TFLOP/s) vs matmul", r("attn_tma_320", "tflops"), "{:.1f}",
        (0.75, ">= 0.75 x matmul"), matmul)
    row("grouped GEMM tma k 128 n 512 (TFLOP/s) vs bmm", r("gemm_tma", "tflops"), "{:.1f}", (1.0, ">= 1.0 x bmm"), bmm)
    row("grouped GEMM tma k 128 n 512 (GB/s, A + B + C once) vs copy", r("gemm_tma", "gbps"), "{:.0f}",
        (0.85, ">= 0.85 x copy"), copy)
    row("grouped GEMM tma k 512 n 128 (TFLOP/s) vs bmm", r("gemm_tma_t", "tflops"), "{:.1f}", (1.0, ">= 1.0 x bmm"),
        bmm_t)
    row("grouped GEMM tma k 512 n 128 (GB/s) vs copy", r("gemm_tma_t", "gbps"), "{:.0f}")
    # What bounds k 128 (reports, no target): the write-only rate, torch.bmm
    # doing the same job in the contract's layout (A [m, g, k], C [m, g, n]),
    # and this kernel in bmm's layout ([g, m, .]); docs/PERFORMANCE.md.
    row("fill cuMemsetD32 (GB/s, write only)", r("fill", "gbps"), "{:.0f}")
    bmm_mgn = tv("bmm_absorb_mgn", "tflops")
    row("torch bmm k 128 n 512 in the contract's layout (TFLOP/s)", bmm_mgn, "{:.1f}")
    if bmm_mgn and r("gemm_tma", "tflops"):
        row("  grouped GEMM tma k 128 / torch bmm, both in the contract's layout", r("gemm_tma", "tflops") / bmm_mgn,
            "{:.3f}")
    row("grouped GEMM tma k 128 n 512 in bmm's layout (TFLOP/s)", r("gemm_tma_gmn", "tflops"), "{:.1f}")
    # The rows above run kl_grouped_gemm_tma_ctas's grid; these one block an SM.
    row("grouped GEMM tma k 128 n 512, one block an SM (TFLOP/s) vs bmm", r("gemm_tma_sms", "tflops"), "{:.1f}",
        (1.0, ">= 1.0 x bmm"), bmm)
    row("grouped GEMM tma k 512 n 128, one block an SM (TFLOP/s) vs bmm", r("gemm_tma_t_sms", "tflops"), "{:.1f}",
        (1.0, ">= 1.0 x bmm"), bmm_t)
    # The seed-grid launchers (the seed's grid: one block per 256 elements)
    # stay as rows; for rope extract/writeback, q_final and cache assembly
    # the target is the wide launchers' (one block per 2048 elements, or per
    # 8 tokens for the cache, docs/MLA_PREFILL.md).
    for name in ("dm_q_rope_extract", "dm_q_rope_writeback", "dm_kv_assemble", "dm_cache_assemble",
                 "dm_q_final_assemble"):
        wide = name in ("dm_q_rope_extract", "dm_q_rope_writeback", "dm_cache_assemble", "dm_q_final_assemble")
        label = "%s%s (GB/s) vs copy" % (name[3:], " (seed grid)" if wide else "")
        row(label, r(name, "gbps"), "{:.0f}", (0.8, ">= 0.8 x copy"), copy)
    for name in ("dm_q_rope_extract_wide", "dm_q_rope_extract_tma", "dm_q_rope_writeback_wide", "dm_cache_assemble_wide",
                 "dm_q_final_assemble_wide"):
        row("%s (GB/s) vs copy" % name[3:], r(name, "gbps"), "{:.0f}", (0.8, ">= 0.8 x copy"), copy)

    head = ("measure", "value", "target", "ratio to target")
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(4)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for x in rows:
        print(line(x))


if __name__ == "__main__":
    main()
