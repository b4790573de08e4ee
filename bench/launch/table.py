#!/usr/bin/env python3
"""Prints the launch-cost table of bench/launch/run.sh.

    python3 bench/launch/table.py LAUNCH_COST_JSON [ALTERNATIVES_JSON]

Reads launch_cost's --json output and (optionally) alternatives.py's, and
prints one Markdown table of host time per launch (median, p99) with each
row's median as a multiple of raw cuLaunchKernel's, then the differences
the targets are about: (b)-(a) <= 100 ns, the wrapper alone <= 20 ns.
"""

import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main(argv):
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    klaunch = load(argv[0])
    alternatives = load(argv[1]) if len(argv) == 2 else None
    rows = {r["key"]: r for r in klaunch["results"]}
    raw = rows.get("raw")

    print("Device: %s; %d launches per row, synchronised every %d (not timed)." % (
        klaunch["device"], klaunch["launches"], klaunch["batch"]))
    print()
    print("| launch | median ns | p99 ns | median / raw cuLaunchKernel |")
    print("|---|---:|---:|---:|")

    def row(name, r):
        ratio = "%.2f" % (r["median_ns"] / raw["median_ns"]) if raw else "-"
        print("| %s | %.0f | %.0f | %s |" % (name, r["median_ns"], r["p99_ns"], ratio))

    for r in klaunch["results"]:
        row(r["name"], r)
    if alternatives is not None:
        for r in alternatives["results"]:
            row(r["name"], r)
        for key, why in sorted(alternatives.get("errors", {}).items()):
            print("| %s | not run: %s | | |" % (key, why.replace("|", "/")))
    print()
    if raw and "wrapper_cuda" in rows:
        d = rows["wrapper_cuda"]["median_ns"] - raw["median_ns"]
        print("- (b) - (a), klaunch's cost over raw cuLaunchKernel at the median: %.1f ns (target <= 100 ns: %s)" % (
            d, "met" if d <= 100 else "MISSED"))
    for key, what in (("wrapper_noop", "wrapper alone, no-op backend"),
                      ("wrapper_record", "wrapper + recording backend"),
                      ("check", "checks alone (kl_X_check)")):
        if key in rows:
            m = rows[key]["median_ns"]
            target = " (target <= 20 ns: %s)" % ("met" if m <= 20 else "MISSED") if key != "check" else ""
            print("- %s: %.1f ns at the median%s" % (what, m, target))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
