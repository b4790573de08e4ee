#!/usr/bin/env python3
"""Prints mla_decode_bench's numbers against their targets as one Markdown
table: a row per target and launcher, with the figure, the same-run baseline
it is held to, the target and the ratio to the target (>= 1 meets it), then
report rows: the ratios to the PyTorch reference and to FlashInfer.

    python3 bench/mla_decode/table.py mla_decode_bench.json [--torch torch_baselines.json]
                                      [--flashinfer flashinfer_mla.json]

(bench/mla_decode/run.sh runs it on the JSON of one run.) Targets, each for
every attention launcher the run has (bf16_mma, fp8_mma, bf16_tma, fp8_tma),
at D 576 and D 320:
  mem bf16          GB/s (KV + q + out) >= 0.95 x cuMemcpyDtoD's, same run
  varlen            KV tokens/s >= 0.95 x the mem row's (loses <= 5%)
  compute bf16      TFLOP/s >= 0.8 x torch.matmul bf16 8192^3 (torch_baselines.py)
  fp8 mem           KV tokens/s >= 1.6 x the bf16 launcher's of the same kind
  long bf16         GB/s >= 0.85 x copy
  short             <= 10 us a step, as CUDA graph replays and back to back
  schedule+combine  <= 2 us at batch 128 (the mem shape), the sum of the two medians
Report rows (no target): the torch reference's step (with and without the
gather) and FlashInfer's BatchMLAPagedAttentionWrapper (its fastest backend,
eager or CUDA graph replay) against the bf16 launchers, as klaunch's
speedup (their time over klaunch's, > 1: klaunch is faster).
"""
import argparse
import json

VARIANTS = (576, 320)
BF16 = ("bf16_mma", "bf16_tma")
FP8 = {"fp8_mma": "bf16_mma", "fp8_tma": "bf16_tma"}
LAUNCHERS = ("bf16_mma", "bf16_tma", "fp8_mma", "fp8_tma")


def load(path):
    if not path:
        return {}
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--torch")
    ap.add_argument("--flashinfer")
    args = ap.parse_args()
    bench = load(args.bench)
    b = bench.get("results", {})
    t = load(args.torch)
    fi = load(args.flashinfer)

    def num(d, *path):
        """A number at path in d, or None (missing, an error there, not a number)."""
        for p in path:
            if not isinstance(d, dict) or p not in d:
                return None
            d = d[p]
        return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None

    rows = []

    def target(measure, value, fmt, goal_text, goal, baseline_text="", higher=True):
        """goal: the number value is held to (None: no baseline in this run)."""
        if value is None:
            return
        if goal is None:
            rows.append((measure, fmt.format(value), baseline_text or "n/a", goal_text, "n/a (no baseline)"))
            return
        ratio = value / goal if higher else goal / value
        rows.append((measure, fmt.format(value), baseline_text, goal_text,
                     "%.3f (%s)" % (ratio, "meets" if ratio >= 1.0 else "MISSES")))

    def report(measure, value, fmt, baseline_text="", ratio_text=""):
        if value is None:
            return
        rows.append((measure, fmt.format(value), baseline_text, "(report)", ratio_text))

    def r(name, key):
        return num(b, name, key)

    copy = r("copy", "gbps")
    matmul = num(t, "matmul", "tflops")
    report("copy cuMemcpyDtoD 1 GiB (GB/s, read + write)", copy, "{:.0f}")
    report("torch copy 1 GiB (GB/s, read + write)", num(t, "copy", "gbps"), "{:.0f}")
    report("torch matmul bf16 8192^3 (TFLOP/s)", matmul, "{:.1f}")
    copy_text = "copy %.0f GB/s" % copy if copy else ""
    matmul_text = "matmul %.1f TFLOP/s" % matmul if matmul else ""

    for D in VARIANTS:
        for L in BF16:
            name = "mem_%s_%d" % (L, D)
            target("mem bf16 D %d, %s (GB/s) vs copy" % (D, L), r(name, "gbps"), "{:.0f}", ">= 0.95 x copy",
                   0.95 * copy if copy else None, copy_text)
    for D in VARIANTS:
        for L in LAUNCHERS:
            mem = r("mem_%s_%d" % (L, D), "tokens_per_s")
            target("varlen D %d, %s (Mtok/s) vs mem" % (D, L), mtok(r("varlen_%s_%d" % (L, D), "tokens_per_s")),
                   "{:.1f}", ">= 0.95 x mem (loses <= 5%)", 0.95 * mtok(mem) if mem else None,
                   "mem %.1f Mtok/s" % mtok(mem) if mem else "")
    for D in VARIANTS:
        for L in BF16:
            target("compute bf16 D %d, %s (TFLOP/s) vs torch matmul" % (D, L), r("compute_%s_%d" % (L, D), "tflops"),
                   "{:.1f}", ">= 0.8 x matmul", 0.8 * matmul if matmul else None, matmul_text)
        for L in FP8:
            report("compute fp8 D %d, %s (TFLOP/s)" % (D, L), r("compute_%s_%d" % (L, D), "tflops"), "{:.1f}",
                   matmul_text, ratio_to(r("compute_%s_%d" % (L, D), "tflops"), matmul, "x matmul"))
    for D in VARIANTS:
        for L8, L16 in FP8.items():
            bf = r("mem_%s_%d" % (L16, D), "tokens_per_s")
            target("fp8 mem D %d, %s (Mtok/s) vs %s" % (D, L8, L16), mtok(r("mem_%s_%d" % (L8, D), "tokens_per_s")),
                   "{:.1f}", ">= 1.6 x bf16", 1.6 * mtok(bf) if bf else None,
                   "%s %.1f Mtok/s" % (L16, mtok(bf)) if bf else "")
    for D in VARIANTS:
        for L in BF16:
            target("long bf16 D %d, %s, 1 x 32768 (GB/s) vs copy" % (D, L), r("long_%s_%d" % (L, D), "gbps"),
                   "{:.0f}", ">= 0.85 x copy", 0.85 * copy if copy else None, copy_text)
    for D in VARIANTS:
        for L in LAUNCHERS:
            for how, text in (("graph", "CUDA graph replay"), ("b2b", "back to back")):
                target("short D %d, %s, h_q 128 x 1024, %s (us a step)" % (D, L, text),
                       r("short_%s_%d_%s" % (L, D, how), "us"), "{:.2f}", "<= 10 us", 10.0, "", higher=False)
            report("short D %d, %s, one step between events (us)" % (D, L), r("short_%s_%d_step" % (L, D), "us"),
                   "{:.2f}")
    for D in VARIANTS:
        for L in BF16:
            suffix = "%s_%d" % (L, D)
            s, c = r("sched_" + suffix, "us"), r("combine_" + suffix, "us")
            parts = "schedule %.2f + combine %.2f us" % (s, c) if s is not None and c is not None else ""
            target("schedule + combine, batch 128, D %d, %s's parts (us)" % (D, L), r("sched_combine_" + suffix, "us"),
                   "{:.2f}", "<= 2 us", 2.0, parts, higher=False)
            report("schedule then combine together, D %d, %s (us)" % (D, L), r("sched_combine_pair_" + suffix, "us"),
                   "{:.2f}")

    # ---- report: the torch reference and FlashInfer, against the bf16 launchers (D 576)
    if t.get("error"):
        rows.append(("torch_baselines.py", "n/a", "", "(report)", "error: %s" % str(t["error"])[:120]))
    for shape, key in (("mem", "ref_mem"), ("compute", "ref_compute")):
        if isinstance(t.get(key), dict) and "error" in t[key]:
            rows.append(("torch reference %s" % shape, "n/a", "", "(report)", "error: %s" % t[key]["error"][:120]))
            continue
        for gather, suffix in (("with the gather", ""), ("K gathered beforehand", "_no_gather")):
            ref = num(t, key, "tokens_per_s" + suffix)
            for L in BF16:
                mine = r("%s_%s_576" % (shape, L), "tokens_per_s")
                if mine is None or ref is None:
                    continue
                report("%s D 576, %s vs torch reference, %s (Mtok/s)" % (shape, L, gather), mtok(mine), "{:.1f}",
                       "torch %.1f Mtok/s" % mtok(ref), "%.2f x torch" % (mine / ref))
    if fi.get("error"):
        rows.append(("FlashInfer BatchMLAPagedAttentionWrapper", "n/a", "", "(report)",
                     "error: %s" % str(fi["error"])[:160]))
    for shape, srow in sorted(fi.get("shapes", {}).items(), key=lambda kv: SHAPE_ORDER.get(kv[0], 9)):
        best = fastest(srow)
        if best is None:
            errs = "; ".join("%s: %s" % (k, v.get("error", v.get("graph_error", "")))[:100]
                             for k, v in srow.items() if isinstance(v, dict))
            rows.append(("FlashInfer %s" % shape, "n/a", "", "(report)", "error: %s" % (srow.get("error") or errs)))
            continue
        fi_us, how = best
        for L in BF16:
            mine = r("%s_%s_576" % (shape, L), "us")
            if mine is None:
                continue
            report("%s D 576, %s vs FlashInfer (us a step)" % (shape, L), mine, "{:.1f}",
                   "FlashInfer %s %.1f us" % (how, fi_us), "%.2f x FlashInfer" % (fi_us / mine))

    print_table(rows)
    if bench.get("quick"):
        print("\n(--quick run: smaller batches, not the targets' shapes)")
    for n in bench.get("notes", []):
        print("note: %s" % n)


SHAPE_ORDER = {"mem": 0, "varlen": 1, "compute": 2, "long": 3}


def mtok(x):
    return None if x is None else x * 1e-6


def ratio_to(value, base, unit):
    return "%.3f %s" % (value / base, unit) if value is not None and base else ""


def fastest(srow):
    """FlashInfer's fastest time of a shape: (us, 'fa3 graph'), or None."""
    best = None
    for backend, v in srow.items():
        if not isinstance(v, dict):
            continue
        for key, how in (("us", "eager"), ("us_graph", "graph")):
            us = v.get(key)
            if isinstance(us, (int, float)) and us > 0 and (best is None or us < best[0]):
                best = (us, "%s %s" % (backend, how))
    return best


def print_table(rows):
    head = ("measure", "value", "same-run baseline", "target", "ratio to target")
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(5)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for x in rows:
        print(line(x))


if __name__ == "__main__":
    main()
