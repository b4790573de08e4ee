#!/usr/bin/env python3
"""Prints decode_bench's (and torch_sdpa.py's, flashinfer_decode.py's)
numbers as one Markdown table: each measure, its target and the ratio
measure / target (>= 1 meets it; for "flat" the ratio is target / measure).

    python3 bench/decode/table.py decode_bench.json [--torch torch_sdpa.json]
        [--flashinfer flashinfer_decode.json]

The FlashInfer rows (issue 45): at each shape both ran, klaunch's tokens/s
over FlashInfer's (FlashInfer's time / klaunch's: the best of its variants,
eager or CUDA graph replay) for the launcher the chooser's rule takes on
sm_90a (the `_tma` persistent rows at the rule's grid; the `_mma` persistent or the
dispatch rows where a run has no `_tma` ones), target >= 1.0 at 32 x 4096
bf16; and over the fixed-cost sweep's grid (32 x 256..4096, 1 x
2048..32768, the `_tma` persistent launcher at the rule's grid), one row a
batch and cache type.
"""
import argparse
import json
import re

# flashinfer_decode.py's shape -> decode_bench's keys for the same problem,
# the launcher the chooser's rule takes on sm_90a first.
FI_MAIN = (
    ("32x4096_bf16", "bf16 32 x 4096", ("gqa_bf16_mma_tma", "gqa_bf16_mma", "gqa_bf16"), 1.0),
    ("32x4096_fp8", "fp8 32 x 4096", ("gqa_fp8_mma_tma", "gqa_fp8_mma", "gqa_fp8"), None),
    ("1x32768_bf16", "bf16 1 x 32768", ("long_seq_mma_tma", "long_seq_mma", "long_seq"), None),
    ("1x32768_fp8", "fp8 1 x 32768", ("long_seq_fp8_mma_tma", "long_seq_fp8_mma", "long_seq_fp8"), None),
)


# decode_bench's shapes with a chooser's pick (keys <key>_chooser_*).
CHOOSER_SHAPES = (("gqa_bf16", "bf16 32 x 4096"), ("gqa_fp8", "fp8 32 x 4096"), ("long_seq", "bf16 1 x 32768"),
                  ("long_seq_fp8", "fp8 1 x 32768"))


def chooser_pick(b, key):
    """The pick as text: its alternative, its tunable, where it came from."""
    if b[key + "_chooser_alt"] == "none":
        return "none applies"
    tun = ""
    if b.get(key + "_chooser_num_splits"):
        tun = " (%d splits)" % b[key + "_chooser_num_splits"]
    elif b.get(key + "_chooser_num_ctas"):
        tun = " (%d blocks)" % b[key + "_chooser_num_ctas"]
    return "%s%s, from the %s" % (b[key + "_chooser_alt"], tun, b[key + "_chooser_source"])


def klaunch_us(b, keys):
    """(time, label) of the first of keys' rows the run has: the `_tma` or
    `_mma` persistent launcher at the rule's grid, else the dispatch."""
    for k in keys:
        if k + "_persist_rule_us" in b:
            return b[k + "_persist_rule_us"], ("tma persistent" if k.endswith("_tma") else "persistent _mma")
        if k + "_dispatch_us" in b:
            return b[k + "_dispatch_us"], "dispatch"
    return None, None


def fixed_grid(b, seqs, kv):
    """{length: us} of the fixed-cost sweep's `_tma` persistent rows at the
    rule's grid (keys fixed_<seqs>_<kv>_ctas<N>_len<L>_us; the sweep also
    times one block an SM: the rule's N is the other where there are two)."""
    pat = re.compile(r"^fixed_%d_%s_ctas(\d+)_len(\d+)_us$" % (seqs, kv))
    by_ctas = {}
    for k, v in b.items():
        m = pat.match(k)
        if m:
            by_ctas.setdefault(int(m.group(1)), {})[int(m.group(2))] = v
    if not by_ctas:
        return None, {}
    ctas = sorted(by_ctas)
    rule = [n for n in ctas if n != b.get("sm_count")] or ctas
    return rule[0], by_ctas[rule[0]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--torch")
    ap.add_argument("--flashinfer")
    args = ap.parse_args()
    b = json.load(open(args.bench))
    t = json.load(open(args.torch)) if args.torch else None
    fi = json.load(open(args.flashinfer)) if args.flashinfer else None

    rows = []  # (measure, value, target text, ratio or None)

    def row(name, value, fmt, target=None, higher_is_better=True):
        if value is None:
            rows.append((name, "n/a", "" if target is None else fmt.format(target), "n/a"))
            return
        if target is None:
            rows.append((name, fmt.format(value), "(report)", ""))
            return
        ratio = value / target if higher_is_better else target / value
        sign = ">=" if higher_is_better else "<="
        verdict = "meets" if ratio >= 1.0 else "MISSES"
        rows.append((name, fmt.format(value), sign + " " + fmt.format(target), "%.3f (%s)" % (ratio, verdict)))

    copy = b["copy_gbps"]
    row("copy bandwidth, cuMemcpyDtoD (GB/s, read + write)", copy, "{:.0f}")
    row("GQA bf16 32 x 4096: dispatch (%d split(s)), fraction of copy" % b["gqa_bf16_rule_splits"],
        b["gqa_bf16_dispatch_fraction_of_copy"], "{:.3f}", 0.85)
    row("GQA bf16 32 x 4096: seed grid, fraction of copy", b["gqa_bf16_seed_fraction_of_copy"], "{:.3f}")
    best = min((v, k) for k, v in b.items() if k.startswith("gqa_bf16_split") and k.endswith("_us"))
    row("GQA bf16 32 x 4096: best split count (%s), fraction of copy" % best[1][len("gqa_bf16_split"):-3],
        b["gqa_bf16_kv_bytes"] / (best[0] * 1e3) / copy, "{:.3f}")
    row("GQA fp8 32 x 4096: tokens/s over bf16 (dispatch)", b["fp8_over_bf16_tokens_per_s"], "{:.3f}", 1.6)
    row("GQA fp8 32 x 4096: dispatch, fraction of copy (fp8 bytes)", b["gqa_fp8_dispatch_fraction_of_copy"], "{:.3f}")
    # A partial run (decode_bench --only-gqa) has no 1 x 32768, window or PDL rows.
    if "long_seq_rule_splits" in b:
        row("1 x 32768 split-KV (%d splits), fraction of copy" % b["long_seq_rule_splits"],
            b["long_seq_dispatch_fraction_of_copy"], "{:.3f}", 0.7)
        row("1 x 32768 seed grid (8 blocks), fraction of copy", b["long_seq_seed_fraction_of_copy"], "{:.3f}")
    if "long_seq_sweep_best_splits" in b:
        row("1 x 32768 split-KV, best split count (%d), fraction of copy" % b["long_seq_sweep_best_splits"],
            b["long_seq_sweep_best_fraction_of_copy"], "{:.3f}", 0.7)
        sweep = sorted((int(k[len("long_seq_sweep_split"):-len("_fraction_of_copy")]), v) for k, v in b.items()
                       if k.startswith("long_seq_sweep_split") and k.endswith("_fraction_of_copy"))
        rows.append(("1 x 32768 split-KV sweep: fraction of copy by split count (rule: %d)"
                     % b["long_seq_sweep_rule_splits"], ", ".join("%d: %.3f" % kv for kv in sweep), "(report)", ""))
    # The tensor-core launchers (issue 10's targets).
    if "gqa_bf16_mma_dispatch_us" in b:
        row("_mma GQA bf16 32 x 4096: dispatch (%d split(s)), fraction of copy" % b["gqa_bf16_mma_rule_splits"],
            b["gqa_bf16_mma_dispatch_fraction_of_copy"], "{:.3f}", 0.9)
        row("_mma GQA bf16 32 x 4096: over the scalar kernel (time ratio)", b["mma_bf16_over_scalar_bf16"], "{:.3f}")
        row("_mma GQA fp8 32 x 4096: tokens/s over _mma bf16", b["mma_fp8_over_bf16_tokens_per_s"], "{:.3f}", 1.6)
        row("_mma GQA fp8 32 x 4096: tokens/s over scalar bf16", b["mma_fp8_over_scalar_bf16_tokens_per_s"], "{:.3f}")
        row("_mma GQA fp8 32 x 4096: dispatch, fraction of copy (fp8 bytes)",
            b["gqa_fp8_mma_dispatch_fraction_of_copy"], "{:.3f}")
    if "long_seq_mma_dispatch_us" in b:
        row("_mma 1 x 32768 split-KV (%d splits%s), fraction of copy"
            % (b["long_seq_mma_rule_splits"], ", PDL combine" if b.get("mma_split_combine_pdl") else ""),
            b["long_seq_mma_dispatch_fraction_of_copy"], "{:.3f}", 0.8)
        row("_mma 1 x 32768 best split count (%d), fraction of copy" % b["long_seq_mma_sweep_best_splits"],
            b["long_seq_mma_sweep_best_fraction_of_copy"], "{:.3f}", 0.8)
        row("_mma 1 x 32768: the rule's count over the sweep's best (within 5%)",
            b["long_seq_mma_sweep_rule_fraction_of_copy"] / b["long_seq_mma_sweep_best_fraction_of_copy"], "{:.3f}",
            0.95)
        sweep = sorted((int(k[len("long_seq_mma_sweep_split"):-len("_fraction_of_copy")]), v) for k, v in b.items()
                       if k.startswith("long_seq_mma_sweep_split") and k.endswith("_fraction_of_copy"))
        rows.append(("_mma 1 x 32768 sweep: fraction of copy by split count (rule: %d)"
                     % b["long_seq_mma_sweep_rule_splits"], ", ".join("%d: %.3f" % kv for kv in sweep), "(report)", ""))
    # The persistent launchers (issue 10's long-sequence schedule), rule's grid.
    for key, label, target in (("gqa_bf16_mma", "bf16 32 x 4096", 0.9), ("gqa_fp8_mma", "fp8 32 x 4096", None),
                               ("long_seq_mma", "bf16 1 x 32768", 0.8), ("long_seq_fp8_mma", "fp8 1 x 32768", None)):
        if key + "_persist_rule_us" not in b:
            continue
        row("persistent %s (%d blocks), fraction of copy" % (label, b[key + "_persist_rule_ctas"]),
            b[key + "_persist_rule_fraction_of_copy"], "{:.3f}", target)
        row("persistent %s: best grid (%d blocks), fraction of copy" % (label, b[key + "_persist_best_ctas"]),
            b[key + "_persist_best_fraction_of_copy"], "{:.3f}")
        row("persistent %s: the rule's grid over the best (within 5%%)" % label, b[key + "_persist_rule_over_best"],
            "{:.3f}", 0.95)
        row("persistent %s: speed-up over the _mma dispatch (same run)" % label,
            b[key + "_persist_speedup_over_mma_dispatch"], "{:.3f}")
    if "persist_fp8_over_bf16_tokens_per_s" in b:
        row("persistent fp8 32 x 4096: tokens/s over persistent bf16", b["persist_fp8_over_bf16_tokens_per_s"],
            "{:.3f}", 1.6)
    # The copy-engine launchers (issue 21's targets on the _tma rows: the
    # chooser's rule's choice for these shapes), where they loaded.
    if b.get("bulk_supported"):
        for kind in ("tma", "bulk"):
            for key, label, target in (("gqa_bf16_mma", "bf16 32 x 4096", 0.98),
                                       ("gqa_fp8_mma", "fp8 32 x 4096", None),
                                       ("long_seq_mma", "bf16 1 x 32768", 0.85),
                                       ("long_seq_fp8_mma", "fp8 1 x 32768", None)):
                k = key + "_" + kind
                if k + "_persist_rule_us" not in b:
                    continue
                # (not `t`: that is torch_sdpa.py's result, read below)
                goal = target if kind == "tma" else None
                row("%s persistent %s (%d blocks), fraction of copy" % (kind, label, b[k + "_persist_rule_ctas"]),
                    b[k + "_persist_rule_fraction_of_copy"], "{:.3f}", goal)
                row("%s persistent %s: best grid (%d blocks), fraction of copy" % (kind, label,
                                                                                 b[k + "_persist_best_ctas"]),
                    b[k + "_persist_best_fraction_of_copy"], "{:.3f}")
                row("%s persistent %s: the rule's grid over the best (within 5%%)" % (kind, label),
                    b[k + "_persist_rule_over_best"], "{:.3f}", 0.95)
                row("%s persistent %s: speed-up over the _mma dispatch (same run)" % (kind, label),
                    b[k + "_speedup_over_mma_dispatch"], "{:.3f}")
                row("%s seed grid %s, fraction of copy" % (kind, label), b[k + "_seed_fraction_of_copy"], "{:.3f}")
                row("%s persistent %s, 8 back to back (PDL), a launch: fraction of copy" % (kind, label),
                    b[k + "_b2b_fraction_of_copy"], "{:.3f}", goal)
                if k + "_scalar_q_over_vector_q" in b:
                    row("%s persistent %s: time with Q rows off 16 bytes (scalar Q loads) over aligned" % (kind, label),
                        b[k + "_scalar_q_over_vector_q"], "{:.3f}")
                if kind == "tma":
                    row("persistent _mma %s, 8 back to back, a launch: fraction of copy" % label,
                        b[key + "_persist_b2b_fraction_of_copy"], "{:.3f}")
        if "tma_fp8_over_bf16_tokens_per_s" in b:
            row("tma persistent fp8 32 x 4096: tokens/s over tma persistent bf16",
                b["tma_fp8_over_bf16_tokens_per_s"], "{:.3f}", 1.8)
    elif "bulk_supported" in b:
        rows.append(("copy-engine (bulk, tma) launchers", "n/a", "", "need sm_90a"))
    # What kl_paged_decode_gqa_{bf16,fp8}_choose picks (no table, eager) and
    # the time the run measured for that launch (n/a: its tunables not swept).
    for key, label in CHOOSER_SHAPES:
        if key + "_chooser_alt" not in b:
            continue
        row("chooser's pick %s: %s, fraction of copy" % (label, chooser_pick(b, key)),
            b.get(key + "_chooser_fraction_of_copy"), "{:.3f}")
    if "gqa_bf16_chooser_us" in b and "gqa_fp8_chooser_us" in b:
        row("chooser's pick fp8 32 x 4096: tokens/s over the chooser's bf16 pick",
            b["gqa_bf16_chooser_us"] / b["gqa_fp8_chooser_us"], "{:.3f}")
    if "window_max_over_min" in b:
        for n in (8192, 16384, 32768):
            row("window 4096 over %d: time (us)" % n, b["window4096_len%d_dispatch_us" % n], "{:.1f}")
        row("window 4096: max / min time over 8192..32768 (flat)", b["window_max_over_min"], "{:.3f}", 1.1,
            higher_is_better=False)
    if b.get("pdl_supported"):
        for key, label in (("long_seq", "1 x 32768"), ("short_seq", "1 x 2048"), ("gqa_bf16", "32 x 4096")):
            if "pdl_%s_gain" % key not in b:
                continue
            n = b["pdl_%s_splits" % key]
            row("PDL %s (%d splits): partial + combine, plain (us)" % (label, n), b["pdl_%s_plain_us" % key], "{:.1f}")
            row("PDL %s (%d splits): partial + PDL combine (us)" % (label, n), b["pdl_%s_pdl_us" % key], "{:.1f}")
            row("PDL %s: gain, plain / PDL time%s" % (label, "" if b.get("pdl_%s_bitwise_equal" % key) else
                                                     " (OUTPUT DIFFERS)"), b["pdl_%s_gain" % key], "{:.3f}")
    elif "pdl_supported" in b:
        rows.append(("PDL (programmatic dependent launch)", "n/a", "", "needs sm_90+"))
    if t is not None:
        if t.get("ok"):
            row("torch SDPA (%s) 32 x 4096 bf16: K+V GB/s" % t["best"], t["best_kv_gbps"], "{:.0f}")
            row("torch SDPA: fraction of torch's own copy bandwidth", t["best_fraction_of_copy"], "{:.3f}")
            kl = b["gqa_bf16_kv_bytes"] / (b["gqa_bf16_dispatch_us"] * 1e3)
            row("klaunch dispatch over torch SDPA (K+V bytes/s)", kl / t["best_kv_gbps"], "{:.3f}", 1.0)
            if "gqa_bf16_mma_dispatch_us" in b:
                kl = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_dispatch_us"] * 1e3)
                row("_mma dispatch over torch SDPA (K+V bytes/s)", kl / t["best_kv_gbps"], "{:.3f}", 1.0)
            if "gqa_bf16_mma_persist_rule_us" in b:
                kl = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_persist_rule_us"] * 1e3)
                row("persistent bf16 over torch SDPA (K+V bytes/s)", kl / t["best_kv_gbps"], "{:.3f}", 1.0)
                kl = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_persist_best_us"] * 1e3)
                row("persistent bf16, best grid, over torch SDPA", kl / t["best_kv_gbps"], "{:.3f}", 1.0)
            for kind in ("tma", "bulk"):
                k = "gqa_bf16_mma_" + kind
                if k + "_persist_rule_us" not in b:
                    continue
                kl = b["gqa_bf16_mma_kv_bytes"] / (b[k + "_persist_rule_us"] * 1e3)
                row("%s persistent bf16 over torch SDPA (K+V bytes/s)" % kind,
                    kl / t["best_kv_gbps"], "{:.3f}", 1.0 if kind == "tma" else None)
                kl = b["gqa_bf16_mma_kv_bytes"] / (b[k + "_seed_us"] * 1e3)
                row("%s seed grid bf16 over torch SDPA" % kind, kl / t["best_kv_gbps"], "{:.3f}")
            if "gqa_bf16_chooser_us" in b:
                kl = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_chooser_us"] * 1e3)
                row("chooser's pick bf16 32 x 4096 over torch SDPA (K+V bytes/s)", kl / t["best_kv_gbps"], "{:.3f}",
                    1.0)
        else:
            rows.append(("torch SDPA", "n/a", "", t.get("error", "failed")))
    if fi is not None:
        flashinfer_rows(b, fi, row, rows)

    head = ("measure", "value", "target", "ratio to target")
    width = [max(len(str(r[i])) for r in rows + [head]) for i in range(4)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, width)) + " |"
    print("device: %s (%s SMs), block tables %s" % (b.get("device", "?"), b.get("sm_count", "?"),
                                                     b.get("block_tables", "shuffled")))
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in width) + "|")
    for r in rows:
        print(line(r))


def flashinfer_rows(b, fi, row, rows):
    if not fi.get("ok"):
        rows.append(("FlashInfer decode", "n/a", "", fi.get("error", "failed")[:160]))
        return
    shapes = fi.get("shapes", {})
    tables = b.get("block_tables", "shuffled")
    note = "" if tables == "shuffled" else " (klaunch's tables %s, FlashInfer's shuffled)" % tables
    for name, label, keys, target in FI_MAIN:
        r = shapes.get(name)
        if r is None:
            continue
        if "best_us" not in r:
            errs = [v.get("error", "") for v in r.get("variants", {}).values()]
            rows.append(("FlashInfer decode %s" % label, "n/a", "", (r.get("error") or "; ".join(errs))[:160]))
            continue
        row("FlashInfer decode %s (%s, %s): K+V GB/s" % (label, r["best"], best_timing(r)), r["best_kv_gbps"],
            "{:.0f}")
        kl, what = klaunch_us(b, keys)
        if kl is None:
            continue
        row("klaunch %s over FlashInfer, %s%s: tokens/s" % (what, label, note), r["best_us"] / kl, "{:.3f}", target)
        if "cuda_cores" in r.get("variants", {}) and "best_us" in r["variants"]["cuda_cores"] and r["best"] != "cuda_cores":
            row("klaunch %s over FlashInfer's default (cuda_cores), %s: tokens/s" % (what, label),
                r["variants"]["cuda_cores"]["best_us"] / kl, "{:.3f}")
    if "fp8_over_bf16_tokens_per_s" in fi:
        row("FlashInfer decode fp8 32 x 4096: tokens/s over its bf16", fi["fp8_over_bf16_tokens_per_s"], "{:.3f}")
    for seqs in (32, 1):
        for kv in ("bf16", "fp8"):
            ctas, kl = fixed_grid(b, seqs, kv)
            cells = []
            for length in sorted(kl):
                r = shapes.get("%dx%d_%s" % (seqs, length, kv), {})
                if "best_us" in r:
                    cells.append("%d: %.3f" % (length, r["best_us"] / kl[length]))
            if cells:
                rows.append(("klaunch tma persistent (%d blocks) over FlashInfer, %s %d x L%s: tokens/s by L"
                             % (ctas, kv, seqs, note), ", ".join(cells), "(report)", ""))


def best_timing(r):
    v = r["variants"][r["best"]]
    return "graph replay" if v.get("us_graph") == v["best_us"] and "us_graph" in v else "eager"


if __name__ == "__main__":
    main()
