#!/usr/bin/env python3
"""sass_check: assert what a kernel's machine code holds, from cuobjdump -sass.

    sass_check.py --cuobjdump PATH --kernel NAME [--kernel NAME ...]
                  [--require-in-loop OPCODE ...] [--require OPCODE ...] [--forbid OPCODE ...]
                  [--no-stack] CUBIN [CUBIN ...]

For every CUBIN and every --kernel (the function's symbol; extern "C"
kernels keep their name), reads the function's SASS and fails when
  - an opcode of --require-in-loop (e.g. HGMMA) is not inside a loop: no
    instruction with that opcode lies between a backward branch's target
    and the branch (a loop body), so tensor-core work that only runs once
    (or not at all) does not count;
  - an opcode of --require (e.g. UTMALDG for a kernel that copies one box
    per block) is nowhere in the function;
  - an opcode of --forbid (e.g. LDL, STL: local memory, i.e. spills or a
    stack array) appears anywhere in the function;
  - with --no-stack, cuobjdump -res-usage gives the function a stack frame
    or local memory (STACK or LOCAL not 0: what nvcc -Xptxas -v calls
    "bytes stack frame");
  - the function is not in the cubin.
Opcodes match the first dot-separated part of the mnemonic (HGMMA matches
HGMMA.64x128x16.F32.BF16). Prints one line per check, then
"sass_check: N checks, M failed"; exit 1 if any failed, 2 if cuobjdump
could not read a cubin.
"""
import argparse
import re
import subprocess
import sys

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
# "        /*0150*/                   @!P0 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;"
_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(?:@!?U?P[0-7T]\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\s*(.*?);")


def parse_functions(sass):
    """{function name: [(address, opcode, full mnemonic, operands)]} from cuobjdump -sass text."""
    funcs = {}
    current = None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            continue
        if current is None:
            continue
        m = _INSN.match(line)
        if m:
            current.append((int(m.group(1), 16), m.group(2), m.group(2) + m.group(3), m.group(4)))
    return funcs


_RES = re.compile(r"^\s*Function\s+([^\s:]+)\s*:\s*$")


def parse_res_usage(text):
    """{function: {"REG": n, "STACK": n, "LOCAL": n, ...}} from cuobjdump -res-usage."""
    out = {}
    current = None
    for line in text.splitlines():
        m = _RES.match(line)
        if m:
            current = m.group(1)
            continue
        if current is not None and "REG:" in line:
            out[current] = {k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line)}
            current = None
    return out


def check_res(name, res):
    """[(ok, message)]: no stack frame, no local memory."""
    if res is None:
        return [(False, "%s: not in cuobjdump -res-usage" % name)]
    bad = [(k, res.get(k, 0)) for k in ("STACK", "LOCAL") if res.get(k, 0) != 0]
    if bad:
        return [(False, "%s: %s (registers %d)" % (name, ", ".join("%s %d bytes" % kv for kv in bad), res.get("REG", 0)))]
    return [(True, "%s: %d registers, no stack frame, no local memory" % (name, res.get("REG", 0)))]


def loops(insns):
    """[(start, end)] address ranges of loop bodies: a branch whose target is at or before it."""
    out = []
    for addr, op, _, operands in insns:
        if op not in ("BRA", "JMP", "BRX"):
            continue
        m = re.search(r"0x([0-9a-fA-F]+)", operands)
        if m is None:
            continue
        target = int(m.group(1), 16)
        if target <= addr:
            out.append((target, addr))
    return out


def check_function(name, insns, require_in_loop, forbid, require=()):
    """[(ok, message)] for one function."""
    results = []
    for op in require:
        hits = [m for _, o, m, _ in insns if o == op]
        if hits:
            results.append((True, "%s: %d %s (%s)" % (name, len(hits), op, ", ".join(sorted(set(hits))))))
        else:
            results.append((False, "%s: no %s at all" % (name, op)))
    bodies = loops(insns)
    for op in require_in_loop:
        hits = [a for a, o, _, _ in insns if o == op]
        in_loop = [a for a in hits if any(s <= a <= e for s, e in bodies)]
        if in_loop:
            results.append((True, "%s: %d %s, %d of them inside loops (%d loops)" % (name, len(hits), op, len(in_loop), len(bodies))))
        elif hits:
            results.append((False, "%s: %d %s, none inside a loop (%d loops): the inner loop runs without them" % (name, len(hits), op, len(bodies))))
        else:
            mnems = sorted({m for _, o, m, _ in insns if o.endswith("MMA") or "GMMA" in o})
            results.append((False, "%s: no %s at all (matrix instructions: %s)" % (name, op, ", ".join(mnems) or "none")))
    for op in forbid:
        hits = [(a, m) for a, o, m, _ in insns if o == op]
        if hits:
            where = ", ".join("%s at 0x%04x" % (m, a) for a, m in hits[:5])
            results.append((False, "%s: %d %s (%s%s): local memory, i.e. spills or a stack array" % (name, len(hits), op, where, ", ..." if len(hits) > 5 else "")))
        else:
            results.append((True, "%s: no %s" % (name, op)))
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuobjdump", required=True)
    ap.add_argument("--kernel", action="append", required=True)
    ap.add_argument("--require-in-loop", action="append", default=[])
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("--forbid", action="append", default=[])
    ap.add_argument("--no-stack", action="store_true")
    ap.add_argument("cubins", nargs="+")
    args = ap.parse_args(argv)
    total = failed = 0
    for cubin in args.cubins:
        r = subprocess.run([args.cuobjdump, "-sass", cubin], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            sys.stdout.write(r.stdout)
            print("sass_check: %s -sass %s exited %d" % (args.cuobjdump, cubin, r.returncode))
            return 2
        funcs = parse_functions(r.stdout)
        res = {}
        if args.no_stack:
            rr = subprocess.run([args.cuobjdump, "-res-usage", cubin], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if rr.returncode != 0:
                sys.stdout.write(rr.stdout)
                print("sass_check: %s -res-usage %s exited %d" % (args.cuobjdump, cubin, rr.returncode))
                return 2
            res = parse_res_usage(rr.stdout)
        for k in args.kernel:
            if k not in funcs:
                results = [(False, "%s: not in %s (functions: %s)" % (k, cubin, ", ".join(sorted(funcs)) or "none"))]
            else:
                results = check_function(k, funcs[k], args.require_in_loop, args.forbid, args.require)
                if args.no_stack:
                    results += check_res(k, res.get(k))
            for ok, msg in results:
                total += 1
                failed += 0 if ok else 1
                print("%s  %s [%s]" % ("ok  " if ok else "FAIL", msg, cubin.rsplit("/", 1)[-1]))
    print("sass_check: %d checks, %d failed" % (total, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
