#!/usr/bin/env python3
"""row_scale from Python, as klaunch_add_family(row_scale ... PYTHON) builds
it (klaunch_row_scale.py and libklaunch_row_scale.so, the fatbin embedded):

    python3 python_row_scale.py --dry-run   the launch on the recording backend, and refused ones; no GPU
    python3 python_row_scale.py             GPU 0 through PyTorch, checked against torch; exit 2 without them

Run with the build's python/ folder and klaunch's runtime package on
PYTHONPATH (CMakeLists.txt's tests set both).
"""

import struct
import sys

import klaunch
import klaunch_row_scale as rs


class F32:
    """float32 device memory as __cuda_array_interface__: rows of `stride` elements."""

    def __init__(self, address, rows, cols, stride=None, inner=1):
        strides = None if stride is None else (stride * 4, inner * 4)
        self.__cuda_array_interface__ = {"shape": (rows, cols) if cols else (rows,), "typestr": "<f4",
                                         "data": (address, False), "strides": strides if cols else None, "version": 3}


def dry_run():
    mod = rs.load_record("plain")
    x, y, scale = F32(0x10000, 3, 1000, 1004), F32(0x20000, 3, 1000, 1004), F32(0x30000, 3, 0)
    rs.row_scale_f32(x, y, scale, 1000, 1004, 3, module=mod, stream=7)
    (r,) = mod.records()
    assert r.grid == (4, 3, 1) and r.block == (256, 1, 1) and r.stream == 7, r
    assert r.args == struct.pack("<3Q2I", 0x10000, 0x20000, 0x30000, 1000, 1004), r.args
    print("launch: %s grid %s block %s, %d argument bytes" % (r.launcher, r.grid, r.block, len(r.args)))
    for bad in (dict(n=1004, stride=1003), dict(x=F32(0x10000, 3, 1000, 1004, inner=2)), dict(scale=None)):
        args = dict(x=x, y=y, scale=scale, n=1000, stride=1004, rows=3)
        args.update(bad)
        try:
            rs.row_scale_f32(**args, module=mod)
            raise SystemExit("python_row_scale: %s was not refused" % bad)
        except klaunch.Error as e:
            print("refused: %s" % e)
    print("python dry run ok")
    return 0


def gpu():
    try:
        import torch
    except ImportError:
        print("python_row_scale: no PyTorch: skipped")
        return 2
    if not torch.cuda.is_available():
        print("python_row_scale: no GPU: skipped")
        return 2
    x = torch.randn(3, 1004, device="cuda")
    y = torch.zeros_like(x)
    scale = torch.rand(3, device="cuda")
    rs.row_scale_f32(x, y, scale, 1000, 1004, 3)
    torch.cuda.synchronize()
    ok = torch.equal(y[:, :1000], x[:, :1000] * scale[:, None]) and not y[:, 1000:].any()
    print("python gpu run %s" % ("ok" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(dry_run() if sys.argv[1:] == ["--dry-run"] else gpu())
