#!/usr/bin/env python3
"""sass_count.py CUBIN_OR_SASS [KERNEL...] -- instructions per cache byte of
the decode kernels' main loops, read from their SASS (cuobjdump -sass).

For each kernel, every loop (a backward branch and the code it jumps back
over) is listed with its static instruction count, the cache bytes its
loads read per thread (LDG width: .128 16 bytes, .64 8, .U16 2, .U8 1; the
4-byte loads are block-table entries, counted apart), the
tensor-core (HMMA) and conversion (F2FP, the packed fp8 cvt is
F2FP.F16.E4M3.UNPACK_B) counts, and the ratio instructions / byte per
thread. The copy-engine kernels (*_bulk) read their cache tiles from a
shared-memory ring: their consumer loop is listed as a "ring loop" (bytes
of LDS.128 per thread, HMMA, F2FP) and their producer warp's loop as a
"producer loop" (UBLKCP: cp.async.bulk, one cache row a lane; UTMALDG:
cp.async.bulk.tensor, a box of 16 rows; SYNCS: the mbarrier waits and
arrivals). Code behind a forward branch inside the loop (a rarely taken
rescale, say) is counted as if it ran, so the ratio is an upper bound.

The memory limit to compare with, for an H200 (132 SMs, ~1.98 GHz, ~4.3
TB/s copy): 4.3e12 / 132 / 1.98e9 = 16.5 bytes per cycle per SM; an SM
issues at most 4 warp instructions (128 thread instructions) a cycle, so
a kernel that issues more than 128 / 16.5 = 7.8 thread instructions per
cache byte cannot keep up with memory however well it hides latency.

Without arguments beyond the file, every kernel whose name starts with
paged_decode is listed. Needs cuobjdump on PATH for a cubin (PyPI's
nvidia-cuda-cuobjdump).
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r'^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')
FUNC = re.compile(r'Function : (\S+)')


def sass_text(path):
    if path.endswith('.sass') or path.endswith('.txt'):
        return open(path).read()
    return subprocess.run(['cuobjdump', '-sass', path], check=True, capture_output=True, text=True).stdout


def functions(text):
    funcs, name = {}, None
    for line in text.splitlines():
        m = FUNC.search(line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = LINE.match(line)
        if m and name:
            funcs[name].append((int(m.group(1), 16), m.group(2)))
    return funcs


def load_bytes(op):
    """Bytes a global load reads per thread; 4-byte loads are block-table
    entries in these kernels (the caches are read 1, 2, 8 or 16 bytes at a
    time) and are counted apart."""
    if not op.startswith('LDG'):
        return 0
    for suffix, n in (('.128', 16), ('.64', 8), ('.U16', 2), ('.S16', 2), ('.U8', 1), ('.S8', 1)):
        if suffix in op:
            return n
    return 0


def shared_bytes(op):
    """Bytes a shared-memory load reads per thread (LDS.128 16, .64 8): in
    the copy-engine kernels (*_bulk) the cache tile comes from the ring."""
    if not op.startswith('LDS'):
        return 0
    for suffix, n in (('.128', 16), ('.64', 8)):
        if suffix in op:
            return n
    return 0


def table_loads(op):
    return 1 if op.startswith('LDG') and not any(x in op for x in ('.128', '.64', '.U16', '.S16', '.U8', '.S8')) else 0


def opcode(text):
    t = re.sub(r'^@!?U?P\w+\s+', '', text)
    return t.split()[0]


def backward_ranges(ins):
    """(start, end) of every backward branch's range (BRA.DIV excluded)."""
    out = []
    for addr, text in ins:
        m = re.search(r'\bBRA\s+(?:`\()?(0x[0-9a-f]+)', text)
        if m and 'BRA.DIV' not in text:
            target = int(m.group(1), 16)
            if target <= addr:
                out.append((target, addr))
    return out


def minimal(ranges):
    """The ranges that hold no other of the ranges."""
    return [r for r in ranges if not any(o != r and r[0] <= o[0] and o[1] <= r[1] for o in ranges)]


def loops(ins):
    """(start, end) of every innermost loop: a backward branch's range that
    holds no other backward branch's range (the jumps back from a warp's
    divergence handlers span whole loops and are not loops themselves)."""
    return minimal(backward_ranges(ins))


def copy_loops(ins):
    """The producer loops of the copy-engine kernels: the smallest backward
    ranges that hold a bulk or tensor copy (UBLKCP, UTMALDG). Not innermost
    loops: a producer warp's skip of another producer's tile is a shorter
    backward branch to the same loop head."""
    def copies(lo, hi):
        return any(lo <= a <= hi and opcode(t).startswith(('UBLKCP', 'UTMALDG')) for a, t in ins)
    return sorted(minimal([r for r in set(backward_ranges(ins)) if copies(*r)]))


def summary(ins, lo, hi):
    body = [(a, t) for a, t in ins if lo <= a <= hi]
    hist = collections.Counter(opcode(t) for _, t in body)
    nbytes = sum(load_bytes(opcode(t)) for _, t in body)
    return {
        'instructions': len(body),
        'table_loads': sum(table_loads(opcode(t)) for _, t in body),
        'load_bytes': nbytes,
        'hmma': sum(v for k, v in hist.items() if k.startswith('HMMA')),
        'f2fp': sum(v for k, v in hist.items() if k.startswith('F2FP')),
        'fp8_packed_cvt': sum(v for k, v in hist.items() if k.startswith('F2FP') and 'E4M3' in k),
        'ffma': hist.get('FFMA', 0),
        'local': sum(v for k, v in hist.items() if k.startswith(('LDL', 'STL'))),
        'ring_bytes': sum(shared_bytes(opcode(t)) for _, t in body),
        'bulk_copies': sum(v for k, v in hist.items() if k.startswith('UBLKCP')),
        'tensor_copies': sum(v for k, v in hist.items() if k.startswith('UTMALDG')),
        'mbarrier_ops': sum(v for k, v in hist.items() if k.startswith('SYNCS')),
        'hist': hist,
    }


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    funcs = functions(sass_text(argv[1]))
    names = argv[2:] or sorted(n for n in funcs if n.startswith('paged_decode'))
    for name in names:
        ins = funcs.get(name)
        if ins is None:
            print(f'{name}: not in {argv[1]}')
            continue
        whole = summary(ins, 0, 1 << 40)
        print(f'{name}: {whole["instructions"]} instructions, {whole["hmma"]} HMMA, '
              f'{whole["fp8_packed_cvt"]} packed fp8 cvt, {whole["local"]} LDL/STL')
        for lo, hi in copy_loops(ins):
            s = summary(ins, lo, hi)
            print(f'  producer loop {lo:#x}-{hi:#x}: {s["instructions"]} instructions, {s["bulk_copies"]} '
                  f'cp.async.bulk (UBLKCP, one cache row a lane), {s["tensor_copies"]} cp.async.bulk.tensor '
                  f'(UTMALDG, a box of 16 rows), {s["mbarrier_ops"]} mbarrier ops')
        for lo, hi in loops(ins):
            s = summary(ins, lo, hi)
            if s['bulk_copies'] > 0 or s['tensor_copies'] > 0:
                continue  # listed above
            if s['ring_bytes'] >= 16 and s['hmma'] > 0:
                print(f'  ring loop {lo:#x}-{hi:#x}: {s["instructions"]} instructions, {s["ring_bytes"]} bytes of '
                      f'cache read from the shared-memory ring per thread, '
                      f'{s["instructions"] / s["ring_bytes"]:.2f} instructions/byte; '
                      f'FFMA {s["ffma"]}, HMMA {s["hmma"]}, F2FP {s["f2fp"]} (packed fp8 {s["fp8_packed_cvt"]}), '
                      f'{s["mbarrier_ops"]} mbarrier ops')
                continue
            if s['load_bytes'] < 16:
                continue  # table walks, merges: not a cache loop
            print(f'  loop {lo:#x}-{hi:#x}: {s["instructions"]} instructions, {s["load_bytes"]} bytes loaded '
                  f'of cache per thread (+{s["table_loads"]} 4-byte table loads), '
                  f'{s["instructions"] / s["load_bytes"]:.2f} instructions/byte; '
                  f'FFMA {s["ffma"]}, HMMA {s["hmma"]}, F2FP {s["f2fp"]} (packed fp8 {s["fp8_packed_cvt"]})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
