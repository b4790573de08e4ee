"""What python/check.sh runs with the venv's Python after pip install
./python, from a folder outside the checkout: every family imports from
the venv, a launch on the recording backend packs its arguments as the
kernel reads them, and refusals (a tensor short of its extent, a wrong
dtype, a precondition) carry their status and message.

    venv/bin/python python/pip_smoke_test.py VENV
"""

import ctypes
import struct
import sys

import klaunch
import klaunch_mla_prefill as mla
import klaunch_paged_decode as pd


# Elements of each stand-in tensor: more than any launch below declares it
# may touch (the launchers check a tensor's span against its extent).
N = 1 << 20


class Array:
    """__cuda_array_interface__ (i32, f32: types it can say)."""

    def __init__(self, address, typestr="<i4", n=N):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (address, False), "version": 2}


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new = ctypes.pythonapi.PyCapsule_New
_new.restype, _new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Bf16:
    """A bf16 tensor of n elements on cuda:0 through (legacy) DLPack."""

    def __init__(self, address, n=N):
        self.shape = (ctypes.c_int64 * 1)(n)
        self.m = _Managed(_DLTensor(address, 2, 0, 1, 4, 16, 1, self.shape, None, 0), None, None)

    def __dlpack__(self, stream=None):
        return _new(ctypes.addressof(self.m), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 0)


def main():
    venv = sys.argv[1]
    for m in (klaunch, mla, pd):
        assert m.__file__.startswith(venv), "%s comes from %s, not the venv" % (m.__name__, m.__file__)
    mod = pd.load_record("gqa8_d128")
    pd.paged_decode_attn_bf16(Bf16(0x1000), Bf16(0x2000), Bf16(0x3000), Bf16(0x4000), Array(0x5000), Array(0x6000),
                              4, 3, 32, 8, 128, 16, 0.5, 4096, 0, module=mod, stream=9)
    (r,) = mod.records()
    want = struct.pack("<6Q5IfII", 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 4, 32, 8, 128, 16, 0.5, 4096, 0)
    assert (r.grid, r.block, r.stream, r.args) == ((32, 3, 1), (256, 1, 1), 9, want), r
    try:
        pd.paged_decode_attn_bf16(Bf16(0x1000, 12287), Bf16(0x2000), Bf16(0x3000), Bf16(0x4000), Array(0x5000),
                                  Array(0x6000), 4, 3, 32, 8, 128, 16, 0.5, 4096, 0, module=mod)
        raise SystemExit("a q one element short was not refused")
    except klaunch.ExtentError as e:
        assert "parameter q needs 12288 elements" in str(e), e
    try:
        pd.paged_decode_attn_bf16(Array(0x1000, "<f4"), Bf16(0x2000), Bf16(0x3000), Bf16(0x4000), Array(0x5000),
                                  Array(0x6000), 4, 3, 32, 8, 128, 16, 0.5, 4096, 0, module=mod)
        raise SystemExit("a float32 q was not refused")
    except klaunch.DtypeError as e:
        assert str(e).startswith("KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter q (const bf16*)"), e
    try:
        pd.paged_decode_attn_bf16(Bf16(0x1000), Bf16(0x2000), Bf16(0x3000), Bf16(0x4000), Array(0x5000),
                                  Array(0x6000), 4, 3, 30, 8, 128, 16, 0.5, 4096, 0, module=mod)
        raise SystemExit("30 query heads over 8 KV heads were not refused")
    except klaunch.PreconditionError as e:
        print("refused: %s" % e)
    m = mla.load_record("mistral_small_4")
    mla.mla_q_rope_extract_batched(Bf16(0x1000), Bf16(0x2000), 7, 16, 192, 128, 64, 3072, module=m)
    assert m.records()[0].grid == (28, 1, 1)
    print("pip install ./python: %d + %d launchers, imported from %s" % (len(pd.LAUNCHERS), len(mla.LAUNCHERS), venv))


if __name__ == "__main__":
    main()
