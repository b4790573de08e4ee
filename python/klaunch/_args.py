"""Arguments from Python to the C launchers: tensors, scalars, streams and
devices, and the checks only Python can make.

A pointer parameter takes a tensor: a torch.Tensor (read directly), or any
object with __cuda_array_interface__ (versions 2 and 3: CuPy, Numba, ...)
or __dlpack__ (versioned or not: JAX, CuPy, ...). Its address goes to C;
before that its element type must be the one the spec names (ELEMENTS),
its address a multiple of that element's size, its memory on the launch's
device, its strides the parameter's layout, and a tensor the kernel writes
through must not be read-only. A scalar takes a Python int (u32, u64, i32:
in range), float (f32: in float's range) or bool. Each refusal is a klaunch.Error whose message reads like the C
launchers': 'STATUS: kl_X: parameter ... [spec:line:col]'.

CONVERTERS maps each spec kind to its converter (pointers and tensor maps
need the launch: _family.py); the generator's emit.PY_C_PARAM and
_family.CTYPES have the same keys (a new spec type is one entry in each).
"""

import ctypes
import math
import operator
import struct
import sys

from . import _errors as E

# Each pointer element of the spec types (docs/DESIGN.md) in each framework:
# (torch dtype name, DLPack (type code, bits), __cuda_array_interface__
# typestrs, bytes). void takes any element type.
ELEMENTS = {
    "bf16": ("bfloat16", (4, 16), (), 2),
    "f16": ("float16", (2, 16), ("<f2",), 2),
    "fp8_e4m3": ("float8_e4m3fn", (10, 8), (), 1),  # kDLFloat8_e4m3fn: __nv_fp8_e4m3 (finite, max 448)
    "f32": ("float32", (2, 32), ("<f4",), 4),
    "i32": ("int32", (0, 32), ("<i4",), 4),
    "u32": ("uint32", (1, 32), ("<u4",), 4),
    "u8": ("uint8", (1, 8), ("|u1", "<u1"), 1),
    "void": None,
}
CAI_VERSIONS = (2, 3)  # the __cuda_array_interface__ versions read (3 adds "stream")
_BY_DLPACK = {v[1]: k for k, v in ELEMENTS.items() if v}
_BY_TYPESTR = {t: k for k, v in ELEMENTS.items() if v for t in v[2]}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                    11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}


def element_text(elem):
    """'bf16 (torch.bfloat16)' for messages."""
    e = ELEMENTS.get(elem)
    return "%s (torch.%s)" % (elem, e[0]) if e else elem


# ---- torch, without importing it --------------------------------------------------

_torch = None  # the torch module once a tensor of it is seen
_torch_dtypes = {}  # torch dtype -> spec element
_raw_stream = None  # torch's current stream of a device, as an int, without a Stream object


def torch_module():
    """torch, if this process imported it (klaunch never imports it)."""
    global _torch, _raw_stream
    if _torch is None:
        t = sys.modules.get("torch")
        if t is not None and hasattr(t, "Tensor"):
            _torch = t
            _raw_stream = getattr(getattr(t, "_C", None), "_cuda_getCurrentRawStream", None)
            for elem, e in ELEMENTS.items():
                if e:
                    dt = getattr(t, e[0], None)
                    if dt is not None:
                        _torch_dtypes[dt] = elem
    return _torch


def is_torch_tensor(obj):
    t = _torch if _torch is not None else torch_module()
    return t is not None and isinstance(obj, t.Tensor)


def is_cupy(obj):
    return type(obj).__module__.startswith("cupy")


# ---- tensors ---------------------------------------------------------------------


class Tensor:
    """What a launch needs of one tensor argument."""

    __slots__ = ("address", "element", "dtype_text", "device_type", "device_id", "shape", "strides", "readonly",
                 "source", "stream")

    def __init__(self, address, element, dtype_text, device_type, device_id, shape, strides, readonly, source,
                 stream=None):
        self.address = address  # int
        self.element = element  # spec element, or None for a type no spec names
        self.dtype_text = dtype_text  # e.g. "is a torch.float32 tensor", "has ... typestr '<f8'"
        self.device_type = device_type  # "cuda", "cuda_managed", "cpu", ..., or None: unknown
        self.device_id = device_id
        self.shape = shape  # tuple of ints
        self.strides = strides  # tuple of ints in elements, or None: row-major dense
        self.readonly = readonly
        self.source = source  # "torch", "__cuda_array_interface__", "DLPack"
        self.stream = stream  # the producer's stream (CAI v3), or None

    def device_text(self):
        if self.device_type == "cuda":
            return "cuda:%d" % self.device_id
        return self.device_type or "unknown device"


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


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DLPACK_READ_ONLY = 1
_DLPACK_IS_COPIED = 2
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Site:
    """Where a refusal is: the launcher, the parameter, its spec position."""

    __slots__ = ("function", "param", "where")

    def __init__(self, function, param, where):
        self.function, self.param, self.where = function, param, where

    def fail(self, cls, text):
        return E.fail(cls, self.function, "parameter %s %s" % (self.param, text), self.where)


def _type_name(obj):
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__name__)


def _describe_torch(t):
    dev = t.device
    elem = _torch_dtypes.get(t.dtype)
    if dev.type == "cuda":
        device_type, device_id = "cuda", dev.index if dev.index is not None else 0
    else:
        device_type, device_id = dev.type, dev.index
    return Tensor(t.data_ptr(), elem, "is a %s tensor" % t.dtype, device_type, device_id, tuple(t.shape), tuple(t.stride()), False,
                  "torch")


def _ints(values):
    """A tuple of ints (shape, strides), as operator.index reads them."""
    if type(values) is tuple and all(type(n) is int for n in values):
        return values
    return tuple(operator.index(n) for n in values)


def _malformed(site, what):
    return site.fail(E.ArgumentTypeError, "has a malformed __cuda_array_interface__: %s" % what)


def _describe_cai(obj, cai, site):
    malformed = lambda what: _malformed(site, what)  # noqa: E731
    try:
        shape = _ints(cai["shape"])
        typestr = cai["typestr"]
        address, readonly = cai["data"]
        version = cai["version"]  # required by every version of the interface (Numba's and CuPy's docs)
        if type(version) is not int:
            version = operator.index(version)
        strides = cai.get("strides")
        if strides is not None:
            strides = _ints(strides)
    except KeyError as e:
        raise malformed("no %s" % e)
    except (TypeError, ValueError) as e:
        raise malformed("%s: %s" % (type(e).__name__, e))
    if version not in CAI_VERSIONS:
        raise site.fail(E.ArgumentTypeError, "has __cuda_array_interface__ version %d; klaunch reads versions %s"
                        % (version, " and ".join(map(str, CAI_VERSIONS))))
    if address is None:
        address = 0
    if type(address) is not int or not 0 <= address < (1 << 64):
        raise malformed("data[0] = %r is not an address" % (address,))
    if any(n < 0 for n in shape):
        raise malformed("shape %s has a negative extent" % (list(shape),))
    if cai.get("mask") is not None:
        raise site.fail(E.ArgumentTypeError, "has a masked __cuda_array_interface__; pass an unmasked array")
    if not isinstance(typestr, str) or len(typestr) < 3 or not typestr[2:].isdigit() or int(typestr[2:]) == 0:
        raise malformed("typestr %r" % (typestr,))
    itemsize = int(typestr[2:])
    if strides is not None:
        if len(strides) != len(shape):
            raise malformed("%d strides for %d dimensions" % (len(strides), len(shape)))
        if any(s % itemsize for s in strides):
            raise site.fail(E.LayoutError, "has strides %s bytes, not whole elements of %d bytes" % (strides, itemsize))
        strides = tuple(s // itemsize for s in strides)
    elem = _BY_TYPESTR.get(typestr)
    device_type, device_id = None, None
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        try:
            kind, device_id = dev()
            device_type = _DL_DEVICE_NAMES.get(int(kind), "DLPack device type %d" % int(kind))
            device_id = int(device_id)
        except Exception:  # a broken __dlpack_device__: the driver says where it is
            device_type, device_id = None, None
    stream = cai.get("stream") if version >= 3 else None
    return Tensor(address, elem, "has __cuda_array_interface__ typestr %r" % typestr, device_type, device_id, shape,
                  strides, bool(readonly), "__cuda_array_interface__", stream)


def _describe_dlpack(obj, site, stream):
    # DLPack: the consumer names its stream; 1 is CUDA's legacy default (0 is
    # ambiguous there), 2 the per-thread default.
    s = 1 if stream == 0 else stream
    try:
        try:
            capsule = obj.__dlpack__(stream=s, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=s)
    except Exception as e:
        raise site.fail(E.ArgumentTypeError, "cannot be exported with __dlpack__ (%s: %s)" % (type(e).__name__, e))
    flags = 0
    if _capsule_valid(capsule, b"dltensor_versioned"):
        m = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        if m.version.major != 1:
            raise site.fail(E.ArgumentTypeError, "is a DLPack %d.%d tensor; klaunch reads DLPack 1.x"
                            % (m.version.major, m.version.minor))
        flags = m.flags
        t = m.dl_tensor
    elif _capsule_valid(capsule, b"dltensor"):
        t = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor
    else:
        raise site.fail(E.ArgumentTypeError, "returned no DLPack capsule from __dlpack__ (got %s)" % _type_name(capsule))
    if flags & _DLPACK_IS_COPIED:
        raise site.fail(E.ArgumentTypeError, "was copied by its producer for DLPack (DLPACK_FLAG_BITMASK_IS_COPIED): "
                        "the copy is freed when the export is; pass the array itself")
    ndim = t.ndim
    if not 0 <= ndim <= 64 or (ndim and not t.shape):
        raise site.fail(E.ArgumentTypeError, "has a malformed DLPack tensor (ndim %d%s)" % (
            ndim, ", no shape" if ndim > 0 and 0 <= ndim <= 64 else ""))
    shape = tuple(t.shape[i] for i in range(ndim))
    strides = tuple(t.strides[i] for i in range(ndim)) if t.strides else None
    if any(n < 0 for n in shape):
        raise site.fail(E.ArgumentTypeError, "has a malformed DLPack tensor: shape %s" % (list(shape),))
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    elem = _BY_DLPACK.get((code, bits)) if lanes == 1 else None
    text = "has DLPack dtype code %d, bits %d%s" % (code, bits, ", lanes %d" % lanes if lanes != 1 else "")
    kind = t.device.device_type
    device_type = _DL_DEVICE_NAMES.get(kind, "DLPack device type %d" % kind)
    address = (t.data or 0) + t.byte_offset
    if address >= 1 << 64:
        raise site.fail(E.ArgumentTypeError, "has a malformed DLPack tensor: data 0x%x + byte_offset %d = 0x%x wraps "
                        "past 2^64" % (t.data or 0, t.byte_offset, address))
    return Tensor(address, elem, text, device_type, t.device.device_id, shape, strides,
                  bool(flags & _DLPACK_READ_ONLY), "DLPack")


def describe(obj, site, stream):
    """Tensor of a pointer argument; `stream` is the launch's (for DLPack)."""
    if is_torch_tensor(obj):
        return _describe_torch(obj)
    cai = None
    try:
        cai = getattr(obj, "__cuda_array_interface__", None)
    except Exception:  # e.g. an element type the interface cannot say: DLPack may
        cai = None
    if cai is not None:
        if not isinstance(cai, dict):
            raise site.fail(E.ArgumentTypeError, "has a __cuda_array_interface__ that is not a dict (%s)" % _type_name(cai))
        return _describe_cai(obj, cai, site)
    try:
        dlpack = hasattr(obj, "__dlpack__")
    except Exception:
        dlpack = False
    if dlpack:
        return _describe_dlpack(obj, site, stream)
    raise site.fail(E.ArgumentTypeError, "must be a device tensor (torch.Tensor, or an object with "
                    "__cuda_array_interface__ or __dlpack__), got %s" % _type_name(obj))


def _dense(shape, strides, first):
    """Dimensions first.. of a row-major array are dense."""
    expected = 1
    for i in range(len(shape) - 1, first - 1, -1):
        if shape[i] != 1 and strides[i] != expected:
            return False
        expected *= shape[i]
    return True


def span(shape, strides):
    """Elements from a tensor's address to one past the last its strides
    reach (0 for an empty tensor; a negative stride reaches back, not on)."""
    n = 1
    for d in shape:
        if d == 0:
            return 0
        n *= d
    if strides is None:
        return n
    return 1 + sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)


def layout_problem(t, layout):
    """None when tensor t has the layout, else what is wrong."""
    if layout == "any" or t.strides is None or 0 in t.shape:
        return None
    shape, strides = t.shape, t.strides
    if layout == "rows" and len(shape) >= 2:
        if not _dense(shape, strides, 1):
            return ("has shape %s and strides %s (elements): every dimension but the first must be dense "
                    "(layout rows)" % (list(shape), list(strides)))
        row = 1
        for n in shape[1:]:
            row *= n
        if shape[0] > 1 and strides[0] < row:
            return ("has shape %s and strides %s (elements): its rows overlap (a row stride below the %d elements "
                    "of a row; layout rows)" % (list(shape), list(strides), row))
        return None
    if not _dense(shape, strides, 0):
        return ("has shape %s and strides %s (elements), not contiguous (layout %s): pass a contiguous tensor "
                "(.contiguous())" % (list(shape), list(strides), layout))
    return None


class PointerArg:
    """The converter of one pointer parameter."""

    __slots__ = ("site", "element", "const", "layout", "spec_type", "align")

    def __init__(self, site, element, const, layout, spec_type):
        self.site, self.element, self.const, self.layout, self.spec_type = site, element, const, layout, spec_type
        e = ELEMENTS.get(element)
        self.align = e[3] if e else 1  # the address is a multiple of the element's bytes; void: any

    def check(self, t):
        """Element type, address alignment, layout and writability of Tensor t."""
        elem = self.element
        if elem != "void" and t.element != elem:
            hint = ""
            if elem == "fp8_e4m3" and t.element == "u8":
                hint = ": view the bytes as torch.float8_e4m3fn (t.view(torch.float8_e4m3fn))"
            elif t.source == "__cuda_array_interface__" and not ELEMENTS[elem][2]:
                hint = ": __cuda_array_interface__ has no %s type; pass it through DLPack or as a torch tensor" % elem
            raise self.site.fail(E.DtypeError, "(%s) %s; the kernel reads %s%s"
                                 % (self.spec_type, t.dtype_text, element_text(elem), hint))
        if t.address % self.align:
            raise self.site.fail(E.AlignmentError, "(%s) is at 0x%x, not %d-byte aligned: its %s elements are %d bytes "
                                 "(address from %s)" % (self.spec_type, t.address, self.align, elem, self.align,
                                                        t.source))
        if self.layout != "any":
            problem = layout_problem(t, self.layout)
            if problem:
                raise self.site.fail(E.LayoutError, "(%s) %s" % (self.spec_type, problem))
        if t.readonly and not self.const:
            raise self.site.fail(E.ReadOnlyError, "(%s) is read-only (from %s); the kernel writes through it"
                                 % (self.spec_type, t.source))


# ---- scalars ---------------------------------------------------------------------


def _tensorish(value):
    try:
        return hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__") or is_torch_tensor(value)
    except Exception:  # an interface that raises: a tensor of some kind
        return True


class IntArg:
    __slots__ = ("site", "lo", "hi", "kind")

    def __init__(self, site, kind, lo, hi):
        self.site, self.kind, self.lo, self.hi = site, kind, lo, hi

    def __call__(self, value):
        if type(value) is not int:
            if isinstance(value, bool) or not hasattr(type(value), "__index__") or _tensorish(value):
                raise self.site.fail(E.ArgumentTypeError, "(%s) must be an int, got %s%s" % (
                    self.kind, _type_name(value),
                    " (a tensor: int(t) would read it back to the host)" if _tensorish(value) else ""))
            try:
                value = operator.index(value)
            except Exception as e:
                raise self.site.fail(E.ArgumentTypeError, "(%s): int(%s) failed (%s: %s)" % (
                    self.kind, _type_name(value), type(e).__name__, e))
        if not self.lo <= value <= self.hi:
            raise self.site.fail(E.BY_NAME["KL_ERROR_OVERFLOW"], "= %d does not fit %s (%d..%d)"
                                 % (value, self.kind, self.lo, self.hi))
        return value


_F32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


class FloatArg:
    __slots__ = ("site",)

    def __init__(self, site):
        self.site = site

    def __call__(self, value):
        if type(value) is not float:
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or hasattr(type(value), "__float__")) \
                    or _tensorish(value):
                raise self.site.fail(E.ArgumentTypeError, "(f32) must be a float, got %s%s" % (
                    _type_name(value), " (a tensor: float(t) would read it back to the host)" if _tensorish(value) else ""))
            try:
                value = float(value)
            except OverflowError:
                raise self.site.fail(E.BY_NAME["KL_ERROR_OVERFLOW"], "= %r does not fit f32" % (value,))
            except Exception as e:
                raise self.site.fail(E.ArgumentTypeError, "(f32): float(%s) failed (%s: %s)" % (
                    _type_name(value), type(e).__name__, e))
        if math.isfinite(value) and abs(value) > _F32_MAX:
            # Beyond what rounds to float's largest finite value.
            try:
                struct.pack("<f", value)
            except OverflowError:
                raise self.site.fail(E.BY_NAME["KL_ERROR_OVERFLOW"], "= %r does not fit f32 (at most %r)" % (value, _F32_MAX))
        return value


class BoolArg:
    __slots__ = ("site",)

    def __init__(self, site):
        self.site = site

    def __call__(self, value):
        if value is True or value is False:
            return value
        if type(value) is int and value in (0, 1):
            return bool(value)
        if type(value).__name__ in ("bool_", "bool") and type(value).__module__ == "numpy":
            return bool(value)
        raise self.site.fail(E.ArgumentTypeError, "(bool) must be True or False, got %s" % _type_name(value))


def scalar_converter(kind, site):
    return CONVERTERS[kind](site)


# Spec kind -> converter factory(site). "ptr" is handled by PointerArg (it
# needs the launch's device and stream).
CONVERTERS = {
    "u32": lambda site: IntArg(site, "u32", 0, (1 << 32) - 1),
    "u64": lambda site: IntArg(site, "u64", 0, (1 << 64) - 1),
    "i32": lambda site: IntArg(site, "i32", -(1 << 31), (1 << 31) - 1),
    "f32": FloatArg,
    "bool": BoolArg,
    "ptr": None,
    "tensor_map": None,  # a klaunch.TensorMap (_family.py)
}


# ---- streams and devices ---------------------------------------------------------------


def stream_handle(stream, function):
    """(handle, device index or None) of a stream argument."""
    if isinstance(stream, bool):
        raise E.fail(E.ArgumentTypeError, function, "stream must be a stream or an int handle, got bool")
    if isinstance(stream, int):
        if not 0 <= stream < (1 << 64):
            raise E.fail(E.ArgumentTypeError, function, "stream handle %d is not a 64-bit address" % stream)
        return stream, None
    try:
        return _stream_handle(stream, function)
    except E.Error:
        raise
    except Exception as e:
        raise E.fail(E.ArgumentTypeError, function, "stream %s cannot be read (%s: %s)" % (
            _type_name(stream), type(e).__name__, e))


def _stream_handle(stream, function):
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream, ExternalStream
    if isinstance(handle, int):
        dev = getattr(stream, "device", None)
        index = getattr(dev, "index", None)
        return handle, index
    protocol = getattr(stream, "__cuda_stream__", None)  # CUDA Python's stream protocol
    if protocol is not None:
        try:
            _, handle = protocol()
            return int(handle), None
        except Exception as e:
            raise E.fail(E.ArgumentTypeError, function, "stream's __cuda_stream__() failed (%s: %s)" % (type(e).__name__, e))
    handle = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if isinstance(handle, int) and is_cupy(stream):
        return handle, getattr(stream, "device_id", None)
    raise E.fail(E.ArgumentTypeError, function,
                 "stream must be a torch.cuda.Stream, a CuPy stream, an object with __cuda_stream__, an int handle or "
                 "None, got %s" % _type_name(stream))


def default_stream(args, device):
    """The stream a launch with stream=None uses: the current stream of the
    tensors' framework (torch's of the device, CuPy's), else 0 (the legacy
    default stream)."""
    t = torch_module()
    if t is not None:
        tensor = t.Tensor
        for a in args:
            if isinstance(a, tensor):
                d = a.get_device()
                if d >= 0:
                    if _raw_stream is not None:
                        return _raw_stream(d)
                    return t.cuda.current_stream(d).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        for a in args:
            if is_cupy(a) and hasattr(a, "__cuda_array_interface__"):
                return cupy.cuda.get_current_stream().ptr
    return 0


def device_index(device, function):
    """A device argument (None, an int, "cuda:1", a torch.device) as an ordinal."""
    if device is None:
        t = torch_module()
        if t is not None and t.cuda.is_initialized():
            return t.cuda.current_device()
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            try:
                return cupy.cuda.runtime.getDevice()
            except Exception:
                pass
        return 0
    if isinstance(device, bool):
        raise E.fail(E.ArgumentTypeError, function, "device must be an int, 'cuda:N' or a torch.device, got bool")
    if isinstance(device, int):
        if device < 0:
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "device %d is negative" % device)
        return device
    text = device if isinstance(device, str) else None
    if text is None and type(device).__name__ == "device" and hasattr(device, "type"):
        if device.type != "cuda":
            raise E.fail(E.DeviceError, function, "device %s is not a CUDA device" % device)
        return device.index if device.index is not None else device_index(None, function)
    if text is not None:
        if text == "cuda":
            return device_index(None, function)
        if text.startswith("cuda:") and text[5:].isdigit():
            return int(text[5:])
    raise E.fail(E.ArgumentTypeError, function, "device must be an int, 'cuda:N' or a torch.device, got %r" % (device,))
