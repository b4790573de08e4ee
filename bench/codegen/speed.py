#!/usr/bin/env python3
"""Generator speed: time and peak memory of one run over a spec of N launchers.

    python3 bench/codegen/speed.py [--launchers N] [--loader c|python|both]

Writes a synthetic spec (N launchers shaped like the decode ones: pointers,
sizes, a 2-D grid, preconditions reading parameters and constants, two
variants) into a scratch folder, runs the generator on it as a program
(python3 codegen/main.py --include-dir ... --docs ...) and prints the wall
time, the CPU time and the peak resident memory of that process. The
baseline is the same generator with PyYAML's pure-Python parser
(KLAUNCH_CODEGEN_YAML=python), run in the same invocation: --loader both
(the default) prints both and the ratio of their CPU times. CPU time is
the figure to compare on a shared machine; wall time includes waiting.
"""

import argparse
import os
import resource
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
    args = p.parse_args()
    loaders = ("python", "c") if args.loader == "both" else (args.loader,)
    cpu = {}
    for loader in loaders:
        cpu[loader] = run(args.launchers, loader, args.generator)
        if cpu[loader] is None:
            return 1
    if len(cpu) == 2:
        print("cpu time, libyaml over pure-Python parser: %.2f" % (cpu["c"] / cpu["python"]))
    return 0


def run(launchers, loader, generator):
    """CPU seconds of one generator run (None if it failed); prints a line."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "speed.yaml")
        write_spec(spec, launchers)
        env = dict(os.environ)
        env.pop("BUILD_WORKSPACE_DIRECTORY", None)
        env.pop("KLAUNCH_CODEGEN_YAML", None)
        if loader == "python":
            env["KLAUNCH_CODEGEN_YAML"] = "python"
        cmd = [sys.executable, os.path.abspath(generator), "--include-dir", os.path.join(tmp, "inc"),
               "--docs", os.path.join(tmp, "L.md"), "speed.yaml"]
        # Through a fresh child of ours, so that its RUSAGE_CHILDREN is this
        # one run's alone (ru_maxrss of children is the largest one so far).
        probe = subprocess.run([sys.executable, __file__, "--measure"] + cmd, cwd=tmp, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if probe.returncode != 0:
            sys.stderr.write(probe.stderr)
            return None
        wall, cpu, rss_kb = (float(x) for x in probe.stdout.split())
        print("launchers %d  spec %.1f MB  parser %-6s  wall %.2f s  cpu %.2f s  peak RSS %d MB"
              % (launchers, os.path.getsize(spec) / 1e6, loader, wall, cpu, rss_kb // 1024))
        return cpu


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


if __name__ == "__main__":
    sys.exit(main())
