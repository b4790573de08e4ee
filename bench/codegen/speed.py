#!/usr/bin/env python3
"""Generator speed: time and peak memory of one run over a spec of N launchers.

    python3 bench/codegen/speed.py [--launchers N] [--loader c|python|both]
                                   [--before COMMIT] [--repeat R]
    python3 bench/codegen/speed.py --phases [--launchers N]
    python3 bench/codegen/speed.py --profile TOP [--launchers N]

Writes a synthetic spec (N launchers shaped like the decode ones: pointers,
sizes, a 2-D grid, preconditions reading parameters and constants, two
variants) into a scratch folder, runs the generator on it as a program
(python3 codegen/main.py --include-dir ... --docs ...) and prints the wall
time, the CPU time (user + system) and the peak resident memory of that
process, the best of R runs (--repeat; CPU time is the figure to compare
on a shared machine, wall time includes waiting for a core).

The baselines, measured in the same invocation on the same spec:
- --loader both (the default): this generator with PyYAML's pure-Python
  parser (KLAUNCH_CODEGEN_YAML=python) beside libyaml's;
- --before COMMIT: that commit's generator (its codegen/ and include/,
  unpacked with git archive), e.g. --before 0c9d934, the generator issue 15
  measured; the ratios of CPU time and peak memory are printed.

--phases runs this checkout's generator in-process and prints the CPU
seconds of each phase (YAML composition, validation and checks, the
cross-family name checks, the launcher views, each output's rendering);
--profile TOP prints cProfile's TOP functions by own time for a whole run.
Figures: docs/PERFORMANCE.md, "Generator (codegen)".
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

LAUNCHER = """  - name: attn_%(i)d
    doc: >-
      Launcher %(i)d of the speed benchmark: one block per (sequence, head),
      the shape of the paged decode launchers.
    params:
      - q: const bf16*
      - k_cache: const bf16*
      - v_cache: const bf16*
      - out: bf16*
      - block_tables: const i32*
      - seq_lens: const i32*
      - max_blocks_per_seq: u32
      - num_seqs: u32
      - num_q_heads: u32
      - num_kv_heads: u32
      - head_dim: u32
      - {name: scale, type: f32, doc: softmax scale}
    grid: {x: num_seqs, y: num_q_heads}
    block: {x: 128}
    shared_bytes: head_dim * 4 + 256
    preconditions:
      - check: head_dim == HEAD_DIM
        message: load the variant compiled for this head_dim
      - check: num_kv_heads >= 1 and num_q_heads %% num_kv_heads == 0
        message: query heads are a whole multiple of KV heads
"""


def write_spec(path, n):
    with open(path, "w") as f:
        f.write("family: speed\ndoc: The generator speed benchmark's family.\n")
        f.write("variants:\n  d128: {constants: {HEAD_DIM: 128}}\n  d256: {constants: {HEAD_DIM: 256}}\n")
        f.write("launchers:\n")
        for i in range(n):
            f.write(LAUNCHER % {"i": i})


def main():
    if sys.argv[1:2] == ["--measure"]:
        return measure(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launchers", type=int, default=10000)
    p.add_argument("--loader", choices=("c", "python", "both"), default="both")
    p.add_argument("--generator", default=os.path.join(ROOT, "codegen", "main.py"),
                   help="the generator's main.py (another checkout's, for a before/after figure)")
    p.add_argument("--before", metavar="COMMIT", help="also run COMMIT's generator on the same spec (git archive)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each; the best is printed")
    p.add_argument("--phases", action="store_true", help="CPU seconds per phase, in-process")
    p.add_argument("--profile", type=int, metavar="TOP", help="cProfile's TOP functions by own time, in-process")
    args = p.parse_args()
    if args.phases or args.profile:
        return in_process(args.launchers, args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "speed.yaml")
        write_spec(spec, args.launchers)
        print("spec: %d launchers, %.1f MB; %s" % (args.launchers, os.path.getsize(spec) / 1e6, machine()))
        runs = []
        if args.before:
            old = os.path.join(tmp, "before")
            os.makedirs(old)
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.before, "codegen", "include"],
                                     stdout=subprocess.PIPE, check=True).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
            runs.append(("before " + args.before, os.path.join(old, "codegen", "main.py"), "c"))
        loaders = ("python", "c") if args.loader == "both" and not args.before else (
            ("c",) if args.loader == "both" else (args.loader,))
        for loader in loaders:
            runs.append(("this, %s parser" % ("libyaml" if loader == "c" else "PyYAML's Python"), args.generator, loader))
        got = {}
        for label, generator, loader in runs:
            best = None
            for _ in range(args.repeat):
                r = run(spec, tmp, loader, generator)
                if r is None:
                    return 1
                best = r if best is None or r[1] < best[1] else best
            wall, cpu, rss_kb = best
            got[label] = best
            print("%-28s wall %6.2f s  cpu %6.2f s  peak RSS %5d MB" % (label, wall, cpu, rss_kb // 1024))
        if len(got) == 2:
            (la, a), (lb, b) = got.items()
            print("%s over %s: cpu %.2fx less, peak RSS %.2fx less" % (lb, la, a[1] / b[1], a[2] / b[2]))
    return 0


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "%s, %d cores, load %.1f, Python %s" % (cpu, os.cpu_count() or 0, load, sys.version.split()[0])


def run(spec, tmp, loader, generator):
    """(wall s, cpu s, peak RSS kB) of one generator run, or None if it failed."""
    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ)
    env.pop("BUILD_WORKSPACE_DIRECTORY", None)
    env.pop("KLAUNCH_CODEGEN_YAML", None)
    if loader == "python":
        env["KLAUNCH_CODEGEN_YAML"] = "python"
    cmd = [sys.executable, os.path.abspath(generator), "--include-dir", os.path.join(out, "inc"),
           "--docs", os.path.join(out, "L.md"), os.path.basename(spec)]
    # Through a fresh child of ours, so that its RUSAGE_CHILDREN is this
    # one run's alone (ru_maxrss of children is the largest one so far).
    probe = subprocess.run([sys.executable, __file__, "--measure"] + cmd, cwd=os.path.dirname(spec), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if probe.returncode != 0:
        sys.stderr.write(probe.stderr)
        return None
    wall, cpu, rss_kb = (float(x) for x in probe.stdout.split())
    return wall, cpu, rss_kb


def measure(cmd):
    """--measure CMD...: runs CMD, prints its wall s, cpu s and peak RSS kB."""
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stderr=subprocess.PIPE, universal_newlines=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return proc.returncode
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("%.3f %.3f %d" % (wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss))
    return 0


def in_process(launchers, top):
    """--phases / --profile: this checkout's generator, imported."""
    sys.path.insert(0, os.path.join(ROOT, "codegen"))
    from klaunch_codegen import cli, collisions, diag, emit, names, yamlpos
    from klaunch_codegen.spec import cross_check, load_spec

    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "speed.yaml")
        write_spec(spec, launchers)
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            if top:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.runcall(cli.main, ["--include-dir", "inc", "--docs", "L.md", "speed.yaml"])
                pstats.Stats(prof).sort_stats("tottime").print_stats(top)
                return 0
            clock = time.process_time
            phases = []

            def phase(name, fn):
                t = clock()
                r = fn()
                phases.append((name, clock() - t))
                return r

            with open("speed.yaml", encoding="utf-8") as f:
                text = f.read()
            phase("YAML composition (libyaml events)" if yamlpos._c_parser_wanted() else "YAML composition (Python parser)",
                  lambda: yamlpos.Source("speed.yaml", text).compose())
            d = diag.Diagnostics()
            s = phase("the same + validation and launch checks", lambda: load_spec("speed.yaml", d))
            assert s is not None and not d, [str(x) for x in d.items]
            phase("cross-family and name checks", lambda: (cross_check([s], d), names.check_run([s], d)))
            phase("launcher views", lambda: emit._views(s))
            h = phase("render klaunch/speed.h", lambda: emit.render_header(s))
            cuh = phase("render klaunch/speed.cuh", lambda: emit.render_cuh(s))
            fatbins = [(s, e.name, e.pos, e.origin, e.what) for e in names.emitted(s) if e.space == "c"]
            phase("what the headers declare (collisions)",
                  lambda: collisions.check_outputs([s], [(s, h, cuh)], names.runtime().identifiers, fatbins, d))
            phase("render the launcher reference", lambda: emit.render_docs([s]))
        finally:
            os.chdir(cwd)
    print("%d launchers; %s" % (launchers, machine()))
    for name, secs in phases:
        print("  %-42s %6.2f s cpu" % (name, secs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
