"""What the Python launcher tests share: tensors without a framework
(__cuda_array_interface__ objects and DLPack capsules built here), argument
sets for every launcher of every family, and the families themselves.

No GPU, torch or NumPy: the addresses are never read; the launches go to
klaunch's recording backend (load_record), which keeps each launch's
parameter buffer.
"""

import copy
import ctypes
import os
import random
import struct
import sys

import junit_unittest

import klaunch
from klaunch import _expr
import klaunch_mla_decode
import klaunch_mla_prefill
import klaunch_paged_decode

FAMILIES = (klaunch_paged_decode, klaunch_mla_prefill, klaunch_mla_decode)

# Spec element -> (__cuda_array_interface__ typestr or None, DLPack (code, bits), bytes)
ELEMENTS = {
    "bf16": (None, (4, 16), 2),
    "f16": ("<f2", (2, 16), 2),
    "fp8_e4m3": (None, (10, 8), 1),
    "f32": ("<f4", (2, 32), 4),
    "i32": ("<i4", (0, 32), 4),
    "u32": ("<u4", (1, 32), 4),
    "u8": ("|u1", (1, 8), 1),
    "void": ("|u1", (1, 8), 1),
}


class CudaArray:
    """An object with __cuda_array_interface__ (version 3 by default) and,
    when `device` is given, __dlpack_device__ (kDLCUDA, device)."""

    def __init__(self, address, shape, typestr, strides=None, readonly=False, device=0, version=3, stream=None,
                 mask=None):
        cai = {"shape": tuple(shape), "typestr": typestr, "data": (address, readonly), "version": version,
               "strides": strides}
        if version >= 3:
            cai["stream"] = stream
        if mask is not None:
            cai["mask"] = mask
        self.__cuda_array_interface__ = cai
        if device is not None:
            self.__dlpack_device__ = lambda: (2, device)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_VERSIONED = b"dltensor_versioned"
_LEGACY = b"dltensor"


class DLPackArray:
    """An object with __dlpack__ and __dlpack_device__, its capsule built
    here: DLManagedTensorVersioned (DLPack 1.x, `major`) when `versioned`,
    else the legacy DLManagedTensor from a __dlpack__ without max_version.
    `streams` keeps the stream each export was asked for."""

    def __init__(self, address, shape, code, bits, device_type=2, device_id=0, strides=None, versioned=True,
                 flags=0, lanes=1, byte_offset=0, major=1):
        self.address, self.shape, self.strides = address, tuple(shape), strides
        self.code, self.bits, self.lanes = code, bits, lanes
        self.device_type, self.device_id = device_type, device_id
        self.versioned, self.flags, self.byte_offset, self.major = versioned, flags, byte_offset, major
        self.streams = []
        self._keep = []
        if not versioned:
            self.__dlpack__ = self._legacy

    def _tensor(self):
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(n, 1))(*self.strides) if self.strides is not None else None
        t = _DLTensor(self.address, _DLDevice(self.device_type, self.device_id), n,
                      _DLDataType(self.code, self.bits, self.lanes), shape,
                      ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None,
                      self.byte_offset)
        self._keep += [shape, strides]
        return t

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        self.streams.append(stream)
        m = _DLManagedTensorVersioned(self.major, 0, None, None, self.flags, self._tensor())
        self._keep.append(m)
        return _capsule_new(ctypes.addressof(m), _VERSIONED, None)

    def _legacy(self, stream=None):
        self.streams.append(stream)
        m = _DLManagedTensor(self._tensor(), None, None)
        self._keep.append(m)
        return _capsule_new(ctypes.addressof(m), _LEGACY, None)

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)


def tensor(element, address, n=None, kind=None, device=0, shape=None):
    """A 1-D tensor of `n` elements at `address` (or of `shape`; neither:
    HUGE, which every declared extent fits, so a test of another check is
    not refused for its size): __cuda_array_interface__ where it has the
    element type (or kind='cai'), DLPack otherwise (or kind='dlpack')."""
    typestr, (code, bits), _ = ELEMENTS[element]
    shape = shape or ((n,) if n is not None else HUGE)
    if kind == "cai" or (kind is None and typestr is not None):
        return CudaArray(address, shape, typestr, device=device)
    return DLPackArray(address, shape, code, bits, device_id=device)


# A tensor no extent exceeds (2^64 elements; nothing is read): for tests of
# what C checks, past Python's extent check.
HUGE = (1 << 32, 1 << 32)


def f32(x):
    """x rounded to the nearest float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# Scalars launches are built of: small and round sizes, the variants'
# constants, odd sizes (1, 3, 7, 19, 733) and the edges of each width.
_POOL = [0, 1, 2, 3, 4, 7, 8, 16, 19, 32, 64, 128, 256, 320, 576, 733, 1024, 4096, 65536]


def scalar(kind, rng, good=True):
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "f32":
        return rng.choice([0.5, 0.088388, -1.25, 1.0, 3.0e38, f32(0.1), 1e-7])
    if kind == "i32":
        return rng.choice([0, 1, 5, -5, 2**31 - 1, -2**31]) if not good else rng.choice([0, 1, 5, 64])
    top = {"u32": 2**32 - 1, "u64": 2**64 - 1}[kind]
    if not good:
        return rng.choice(_POOL + [top, top // 3])
    v = rng.choice(_POOL)
    if kind == "u64" and rng.random() < 0.3:
        v *= rng.choice([1, 1 << 20, 4096 * 4096])
    return v


_ESIZE = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "u32": 4}  # a tensor map's bytes per element; u8 and fp8 1


class MapSpec:
    """What a tensor-map argument is encoded from (materialize() encodes it
    on the launch's module): a tensor, its extents and strides (elements)."""

    def __init__(self, address, element, rank, rng, good=True):
        self.address = address
        self.tensor = tensor(element, address, kind="dlpack")
        pool = [1, 3, 7, 8, 16, 19, 64, 128, 733] if good else [0, 1, 5, 2**32, 2**32 + 1, 64]
        self.extents = tuple(rng.choice(pool) for _ in range(rank))
        step = rng.choice([8, 8, 64, 3]) if not good else rng.choice([8, 64, 512])
        self.strides = tuple(step * (i + 1) * rng.choice([1, 2]) for i in range(rank - 1))


def arguments(launcher, rng, good=True):
    """One argument tuple for `launcher` (an entry of a generated module's
    LAUNCHERS): distinct 256-byte aligned addresses, scalars from the pool,
    MapSpecs for tensor maps."""
    args = []
    for i, p in enumerate(launcher.params):
        address = 0x7f0000000000 + 0x100000 * (i + 1)
        if p.kind == "ptr":
            args.append(tensor(p.element, address, kind=rng.choice(["cai", "dlpack", None])))
        elif p.kind == "tensor_map":
            args.append(MapSpec(address, p.element, p.rank, rng, good=rng.random() < 0.9 if good else False))
        else:
            args.append(scalar(p.kind, rng, good))
    return tuple(args)


def materialize(family, launcher, args, module):
    """args with each MapSpec encoded on `module` (a klaunch.Error when the
    builder refuses it)."""
    out = list(args)
    for i, (p, a) in enumerate(zip(launcher.params, args)):
        if p.kind == "tensor_map" and isinstance(a, MapSpec):
            encode = getattr(family, "%s_%s_encode" % (launcher.name, p.name))
            out[i] = encode(a.tensor, extents=a.extents, strides=a.strides, module=module)
    return tuple(out)


def passing_arguments(family, launcher, variant, seed, tries=40000):
    """Argument tuples the C launcher accepts in `variant` (its check),
    found from a seeded search; [] if none is found."""
    rng = random.Random(seed)
    mod = family.load_record(variant)
    fn = getattr(family, launcher.name)
    found = []
    for _ in range(tries):
        args = arguments(launcher, rng)
        # Fill the equalities preconditions ask for from the others, as a
        # caller would: head_dim == MLA_HDIM, hd == nope + rope, ...
        args = _satisfy(launcher, args, family.VARIANTS[variant], rng)
        try:
            fn(*materialize(family, launcher, args, mod), module=mod, check_only=True)
        except klaunch.Error:
            continue
        found.append(args)
        if len(found) >= 3:
            break
    return found


def _satisfy(launcher, args, constants, rng):
    names = [p.name for p in launcher.params]
    a = dict(zip(names, args))

    def put(name, value):
        if name in a and value is not None and 0 <= value < 2**32:
            a[name] = value

    if "DECODE_GQA_PACK_WIDTH" in constants and "num_kv_heads" in a:
        if rng.random() < 0.8:
            put("num_kv_heads", rng.choice([1, 2, 8]))
            put("num_q_heads", a["num_kv_heads"] * constants["DECODE_GQA_PACK_WIDTH"])
            put("head_dim", constants["DECODE_GQA_PACK_HEAD_DIM"])
    if "num_q_heads" in a and "num_kv_heads" in a and rng.random() < 0.3:
        put("num_q_heads", a["num_kv_heads"] * rng.choice([1, 2, 4]))
    if "kv_lora" in a and "num_kv_heads" in a:  # mla_fused_prefill: one latent KV head
        put("num_kv_heads", 1)
        put("kv_lora", rng.choice([256, 512]))
    if "MLA_HDIM" in constants and "head_dim" in a:
        put("head_dim", constants["MLA_HDIM"])
        put("kv_lora", constants["MLA_HDIM"] - 64)
    if "hd" in a and "nope" in a and "rope" in a:
        put("hd", a["nope"] + a["rope"])
    if "mla_cache_dim" in a and "kv_lora" in a and "rope" in a:
        put("mla_cache_dim", a["kv_lora"] + a["rope"])
    for stride, parts in (("q_stride", ("num_q_heads", "head_dim")), ("q_dim", ("nq", "hd")),
                          ("a_stride", ("g", "k_g")), ("c_stride", ("g", "n_g"))):
        if stride in a and all(n in a for n in parts) and rng.random() < 0.9:
            put(stride, a[parts[0]] * a[parts[1]] + rng.choice([0, 0, 8]))
    if "kv_expanded_stride" in a:
        put("kv_expanded_stride", a["nkv"] * (a["nope"] + a["v_dim"]))
    if "block_size" in a and any(p.kind == "tensor_map" for p in launcher.params):
        put("block_size", rng.choice([16, 64]))  # the _tma decode launchers: a box is 16 slots of one block
    if "cache_stride" in a:
        a["cache_stride"] = a["block_size"] * a["num_kv_heads"] * a["head_dim"] + rng.choice([0, 16])
    if "num_splits" in a and a["num_splits"] == 0:
        a["num_splits"] = rng.choice([1, 3])
    if "sched_words" in a:  # mla_decode: the schedule's and the workspace's sizes (klaunch/mla_decode_layout.h)
        put("batch", rng.choice([1, 3, 128]))
        put("num_parts", rng.choice([1, 7, 132]))
        for name, choices in (("s_q", [1, 2, 8]), ("h_q", [8, 16, 128]), ("max_blocks_per_seq", [1, 5]),
                              ("num_blocks", [1, 40])):
            put(name, rng.choice(choices))
        if "page_size" in a:
            put("page_size", rng.choice([64, 128]) if any(p.kind == "tensor_map" for p in launcher.params)
                else rng.choice([1, 16, 64]))
        a["sched_words"] = 16 + 8 * a["num_parts"] + 4 * a["batch"] + rng.choice([0, 8])
        if "workspace_bytes" in a:
            a["workspace_bytes"] = 8 * a["num_parts"] * a["s_q"] * a["h_q"] * (a["head_dim"] - 63) + rng.choice([0, 64])
    elif "workspace_bytes" in a:
        need = 4 * a["num_seqs"] * a.get("num_splits", 1) * a["num_q_heads"] * (a["head_dim"] + 2)
        if "num_ctas" in a:
            a["num_ctas"] = rng.choice([1, 7, 132])
            need = 8 * a["num_ctas"] * constants.get("DECODE_GQA_PACK_WIDTH", 1) * (a["head_dim"] + 2)
        a["workspace_bytes"] = need + rng.choice([0, 64])
    if "num_counters" in a:  # the decode launchers: a word a unit; grouped_gemm_tma: 2 pacing words
        a["num_counters"] = a["num_seqs"] * a["num_kv_heads"] if "num_seqs" in a else 2 + rng.choice([0, 1])
    # Tensor maps of the extents the scalars need (the spec's tensor_map
    # extent, which the C launcher checks), mostly: exactly the need where
    # it is exact, the need or more where at least; a need of 0 keeps any.
    # Their strides dense over those extents, each row padded to 16 bytes
    # (the builder's rule), as a caller's tensor would be.
    values = tuple(a[n] for n in names)
    for p in launcher.params:
        m = a[p.name]
        if p.kind != "tensor_map" or not p.extent or not isinstance(m, MapSpec) or rng.random() >= 0.9:
            continue
        extents = list(m.extents)
        for dim, entry in enumerate(p.extent):
            if entry is None:
                continue
            _, exact, _, need_of = entry
            try:
                need = need_of(values, constants)
            except _expr.Fail:
                continue  # overflows: the C launcher refuses the launch
            if need:
                extents[dim] = need if exact else need + rng.choice([0, 0, 1, 16])
        per16 = 16 // _ESIZE.get(p.element, 1)
        strides, step = [], -(-extents[0] // per16) * per16
        for e in extents[1:]:
            strides.append(step)
            step *= e
        m = copy.copy(m)
        m.extents, m.strides = tuple(extents), tuple(strides)
        a[p.name] = m
    return tuple(a[n] for n in names)


def main():
    junit_unittest.main()


__all__ = ["klaunch", "klaunch_paged_decode", "klaunch_mla_prefill", "klaunch_mla_decode", "FAMILIES", "sys", "os"]
