"""What every generated klaunch_<family> module is made of: its library,
its modules (one per device and variant), and the call of a launcher.

A generated module builds one Family from its tables (the spec's variants
and launchers) and its library, libklaunch_<family>.so beside it (or
$KLAUNCH_<FAMILY>_LIBRARY). Family.call() is every launcher function:

  1. the module: the one given, else the one for the tensors' device and
     the variant whose constants fit the arguments (the preconditions that
     read a constant, evaluated as C would; among several that fit, one
     already loaded, else the first in spec order; none fits: the first,
     and the C launcher refuses), loaded once per (device, variant) from
     the library's embedded fatbin, $KLAUNCH_FATBIN_DIR or the package's
     fatbins/ folder, every kl_X_get made then;
  2. the arguments, in order: tensors (element type, device, layout,
     writability; _args.py), then scalars (type and range);
  3. the stream: the one given, else the current stream of the tensors'
     framework (torch, CuPy), else 0;
  4. kl__X_py() in the library: kl_X() (or kl_X_check()) on the module's
     device, whose status, if not KL_SUCCESS, is raised as its class with
     kl_last_error_message().

Loading never happens during a stream capture: before loading for a launch
the library asks whether the launch's stream is capturing
(kl_cuda_stream_check_not_capturing) and refuses with CaptureActiveError;
load() asks torch whether its current stream is capturing. Launches are
plain kernel launches, which a CUDA graph capture records.
"""

import ctypes
import operator
import os
import threading

from . import _args as A
from . import _errors as E

ABI = 2  # klaunch/python_abi.h KL_PYTHON_ABI

# Spec kind -> the ctypes type of kl__X_py()'s parameter (the generator's
# emit.PY_C_PARAM has the same keys and the C types).
CTYPES = {
    "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64,
    "i32": ctypes.c_int32,
    "f32": ctypes.c_float,
    "bool": ctypes.c_bool,
    "ptr": ctypes.c_uint64,
    "tensor_map": ctypes.c_uint64,  # the address of a TensorMap's kl_tensor_map
}

_CUDA, _RECORD = 1, 2
_MISSING = object()  # a parameter no argument gave (Family.bind)


class _RecordView(ctypes.Structure):
    _fields_ = [
        ("launcher", ctypes.c_char_p),
        ("entry", ctypes.c_char_p),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("cluster", ctypes.c_uint32 * 3),
        ("shared_bytes", ctypes.c_uint32),
        ("attribute_flags", ctypes.c_uint32),
        ("arg_bytes", ctypes.c_uint32),
        ("stream", ctypes.c_uint64),
        ("args", ctypes.POINTER(ctypes.c_ubyte)),
        ("num_extents", ctypes.c_uint32),
        ("extents", ctypes.POINTER(ctypes.c_uint64)),
    ]


class Record(tuple):
    """One launch a recording module kept: launcher, entry, grid, block,
    shared_bytes, stream, cluster, attribute_flags, args (the kernel's
    parameter buffer, bytes as the kernel would read them) and extents
    ({pointer parameter: elements its declared extent came to}, None where
    data bounds it)."""

    __slots__ = ()
    _fields = ("launcher", "entry", "grid", "block", "shared_bytes", "stream", "cluster", "attribute_flags", "args",
               "extents")

    def __new__(cls, *values):
        return tuple.__new__(cls, values)

    def __getattr__(self, name):
        try:
            return self[Record._fields.index(name)]
        except ValueError:
            raise AttributeError(name)

    def __repr__(self):
        return "Record(%s)" % ", ".join("%s=%r" % (f, v) for f, v in zip(Record._fields, self))


class TensorMap:
    """An encoded tensor map (klaunch/tensor_map.h kl_tensor_map, 128-byte
    aligned) of one tensor-map parameter, from klaunch_F.X_P_encode(): pass
    it as that parameter. It holds the tensor's address, extents and strides
    (and a reference to the tensor); the launcher copies its 128 bytes into
    the kernel's parameters and checks it was encoded on the launch's backend
    for its variant's copy."""

    def __init__(self, family, launcher, param, module, tensor, extents, strides):
        size = family.lib.kl__py_tensor_map_size()
        self._storage = (ctypes.c_char * (size + 128))()
        self.address = (ctypes.addressof(self._storage) + 127) & ~127
        self.family, self.launcher, self.param = family, launcher.name, param.name
        self.module, self.device = module, module.device
        self.tensor, self.extents, self.strides = tensor, tuple(extents), tuple(strides)

    def opaque(self):
        """The 128 bytes the kernel receives."""
        return ctypes.string_at(self.address, 128)

    def __repr__(self):
        return "<TensorMap %s.%s: extents %s, strides %s, %r>" % (self.launcher, self.param, list(self.extents),
                                                                 list(self.strides), self.module)


class Param:
    __slots__ = ("name", "kind", "element", "const", "layout", "line", "col", "rank", "spec_type", "convert", "pointer",
                 "site", "encode", "nullable", "extent")

    def __init__(self, name, kind, element, const, layout, line, col, rank=None, nullable=False, extent=None):
        self.name, self.kind, self.element, self.const, self.layout = name, kind, element, const, layout
        self.line, self.col, self.rank = line, col, rank
        self.nullable = nullable  # None passes NULL (the spec's nullable: true)
        # A pointer's declared extent: (text, names read, fn(a, c) or None
        # where data bounds it), or None: not declared. A tensor map's: per
        # dimension, innermost first, None (not checked) or (text, exact,
        # names read, fn(a, c)): what the launch needs of the map's extent
        # there, at least or exactly (the C launcher checks it).
        self.extent = extent
        self.spec_type = ("%s%s*" % ("const " if const else "", element)) if kind == "ptr" else kind
        self.convert = None
        self.pointer = None
        self.site = None
        self.encode = None  # a tensor map's kl__X_P_py_encode


class Launcher:
    """One launcher of a generated module's table."""

    def __init__(self, name, line, col, params, fits):
        self.name, self.line, self.col = name, line, col
        self.params = tuple(Param(*p) for p in params)
        self.fits = fits
        self.positions = {p.name: i for i, p in enumerate(self.params)}  # parameter name -> spec position
        self.function = "kl_" + name
        self.fn = None  # kl__X_py, once the library is loaded
        self.index = None
        # (position, Param) of the pointers that declare an extent, in the
        # C desc's order (parameter order): what the span check and Record read.
        self.extents = tuple((i, p) for i, p in enumerate(self.params) if p.extent is not None and p.kind == "ptr")


def _decode(b):
    return b.decode("utf-8", "replace") if b is not None else ""


class Family:
    """The runtime of one generated module (see the module docstring)."""

    def __init__(self, family, spec, spec_hash, variants, launchers, module_file, library):
        self.name = family
        self.module_name = "klaunch_" + family
        self.spec = spec
        self.spec_hash = spec_hash
        self.variants = variants
        self.launchers = launchers
        self.by_name = {l.name: l for l in launchers}
        self._lock = threading.RLock()
        self._modules = {}  # (device, variant) -> Module: what launches without module= use
        self._backends = {}  # device -> CUDA backend handle (one per device, for the process)
        self.lib = self._open(module_file, library)
        self._declare()
        self._check_library()
        for i, l in enumerate(launchers):
            l.index = i
            for p in l.params:
                p.site = site = A.Site(l.function, p.name, "%s:%d:%d" % (spec, p.line, p.col))
                if p.kind == "ptr":
                    p.pointer = A.PointerArg(site, p.element, p.const, p.layout, p.spec_type)
                elif p.kind != "tensor_map":
                    p.convert = A.scalar_converter(p.kind, site)

    # -- the library --

    def _open(self, module_file, library):
        env = "KLAUNCH_%s_LIBRARY" % self.name.upper()
        path = os.environ.get(env) or os.path.join(os.path.dirname(os.path.abspath(module_file)), library)
        if not os.path.isfile(path):
            raise ImportError(
                "%s: its library %s is missing (looked for %s; $%s names another): build it with "
                "./bazelw build //kernels:%s_python, cmake's klaunch_add_family(... PYTHON) or pip install "
                "<klaunch>/python" % (self.module_name, library, path, env, self.name))
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            raise ImportError("%s: cannot load %s: %s" % (self.module_name, path, e))

    def _declare(self):
        lib = self.lib
        vp, sz, u32, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
        cp = ctypes.c_char_p
        sigs = {
            "kl__py_abi": (u32, []),
            "kl__py_status_count": (i, []),
            "kl__py_status_name": (cp, [i]),
            "kl__py_last_error_message": (cp, []),
            "kl__py_record_view_size": (sz, []),
            "kl__py_cuda_open": (i, [i, ctypes.POINTER(vp)]),
            "kl__py_record_open": (i, [sz, ctypes.POINTER(vp)]),
            "kl__py_record_configure": (None, [vp, u32, u32, cp, i, cp]),
            "kl__py_backend_close": (None, [vp]),
            "kl__py_record_count": (sz, [vp]),
            "kl__py_record_clear": (None, [vp]),
            "kl__py_record_get": (i, [vp, sz, ctypes.POINTER(_RecordView)]),
            "kl__py_check_not_capturing": (i, [vp, ctypes.c_uint64, cp]),
            "kl__py_pointer_device": (i, [vp, ctypes.c_uint64, ctypes.POINTER(i)]),
            "kl__py_module_load": (i, [vp, cp, sz, ctypes.POINTER(vp)]),
            "kl__py_module_load_file": (i, [vp, cp, ctypes.POINTER(vp)]),
            "kl__py_module_variant": (cp, [vp]),
            "kl__py_module_arch": (cp, [vp]),
            "kl__py_module_unload": (None, [vp]),
            "kl__py_module_free": (None, [vp]),
            "kl__py_kernel_free": (None, [vp]),
            "kl__py_family": (cp, []),
            "kl__py_spec_hash": (cp, []),
            "kl__py_launcher_count": (ctypes.c_uint, []),
            "kl__py_launcher_name": (cp, [ctypes.c_uint]),
            "kl__py_param": (i, [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(cp), ctypes.POINTER(i),
                                 ctypes.POINTER(u32), ctypes.POINTER(u32)]),
            "kl__py_param_bytes": (u32, [ctypes.c_uint]),
            "kl__py_get": (i, [vp, ctypes.c_uint, ctypes.POINTER(vp)]),
            "kl__py_record_load_variant": (i, [vp, cp, ctypes.POINTER(vp)]),
            "kl__py_fatbin": (i, [cp, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(sz)]),
            "kl__py_tensor_map_size": (sz, []),
        }
        try:
            for name, (restype, argtypes) in sigs.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = restype, argtypes
            for l in self.launchers:
                f = getattr(lib, "kl__%s_py" % l.name)
                f.restype = i
                f.argtypes = [vp, i] + [CTYPES[p.kind] for p in l.params] + [ctypes.c_uint64]
                l.fn = f
                for p in l.params:
                    if p.kind == "tensor_map":
                        e = getattr(lib, "kl__%s_%s_py_encode" % (l.name, p.name))
                        e.restype = i
                        e.argtypes = [vp, ctypes.c_uint64, ctypes.c_uint64] + [ctypes.c_uint64] * (2 * p.rank - 1)
                        p.encode = e
        except AttributeError as e:
            raise ImportError("%s: %s lacks %s: it was built from another version of the generator; rebuild it"
                              % (self.module_name, lib._name, e))

    def _check_library(self):
        lib, where = self.lib, self.lib._name
        remake = "rebuild the library and regenerate the module from the same spec (./bazelw run //:generate)"
        if lib.kl__py_abi() != ABI:
            raise ImportError("%s: %s has Python ABI %d, this runtime %d; %s" % (
                self.module_name, where, lib.kl__py_abi(), ABI, remake))
        if _decode(lib.kl__py_family()) != self.name or _decode(lib.kl__py_spec_hash()) != self.spec_hash:
            raise ImportError("%s: %s is family %s from spec %s; this module is %s from %s: one of them is stale; %s" % (
                self.module_name, where, _decode(lib.kl__py_family()), _decode(lib.kl__py_spec_hash()), self.name,
                self.spec_hash, remake))
        names = [_decode(lib.kl__py_launcher_name(i)) for i in range(lib.kl__py_launcher_count())]
        if names != [l.name for l in self.launchers]:
            raise ImportError("%s: %s's launchers are not this module's; %s" % (self.module_name, where, remake))
        statuses = [_decode(lib.kl__py_status_name(i)) for i in range(lib.kl__py_status_count())]
        if statuses != [n for n, _ in E.STATUSES]:
            raise ImportError("%s: %s's statuses (kl_status_name) are not KL_STATUS_LIST of %s; rebuild the library "
                              "against the same runtime" % (self.module_name, where, E.HEADER_PATH))
        if lib.kl__py_record_view_size() != ctypes.sizeof(_RecordView):
            raise ImportError("%s: %s's kl__py_record_view is not this runtime's; %s" % (self.module_name, where, remake))

    def error(self, status):
        """The exception of a status the library returned."""
        return E.error(status, _decode(self.lib.kl__py_last_error_message()))

    def launcher(self, name, function):
        """The launcher called `name`; any other name is refused
        (InvalidArgumentError), listing the family's launchers."""
        L = self.by_name.get(name) if isinstance(name, str) else None
        if L is None:
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "%s has no launcher %r (its launchers: %s)"
                         % (self.name, name, ", ".join(self.by_name)))
        return L

    def kernel_params(self, launcher):
        """[(name, kind, offset, size)] of a launcher's kernel arguments, as
        its kl_X_params[] says (kind: KL_PARAM_* value)."""
        i = self.launcher(launcher, "%s.kernel_params" % self.module_name).index
        out, j = [], 0
        name, kind, offset, size = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_uint32(), ctypes.c_uint32()
        while self.lib.kl__py_param(i, j, ctypes.byref(name), ctypes.byref(kind), ctypes.byref(offset),
                                    ctypes.byref(size)):
            out.append((_decode(name.value), kind.value, offset.value, size.value))
            j += 1
        return out

    # -- backends and modules --

    def _cuda_backend(self, device):
        b = self._backends.get(device)
        if b is None:
            handle = ctypes.c_void_p()
            st = self.lib.kl__py_cuda_open(device, ctypes.byref(handle))
            if st:
                raise self.error(st)
            b = self._backends[device] = handle
        return b

    def variant_name(self, variant, constants, function):
        """The variant `variant` names, or whose constants include `constants`."""
        if variant is not None:
            if variant not in self.variants:
                raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "%s has no variant %r (it has %s) [%s]" % (
                    self.name, variant, ", ".join(self.variants), self.spec))
            if constants:
                return self._by_constants(constants, function, [variant])
            return variant
        if constants:
            return self._by_constants(constants, function, list(self.variants))
        if len(self.variants) == 1:
            return next(iter(self.variants))
        return None

    def _by_constants(self, constants, function, names):
        fit = [v for v in names if all(self.variants[v].get(k, object()) == c for k, c in constants.items())]
        if not fit:
            raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "no variant of %s has %s (%s) [%s]" % (
                self.name, ", ".join("%s = %r" % kv for kv in constants.items()),
                "; ".join("%s: %s" % (v, ", ".join("%s = %d" % kv for kv in self.variants[v].items())) for v in names),
                self.spec))
        return fit[0]

    def load(self, device=None, variant=None, *, fatbin=None, constants=None):
        """The Module of `variant` (a name, or the one whose constants
        include `constants`) on CUDA device `device` (an int, 'cuda:N', a
        torch.device; None: the current one), loaded once and kept: from
        `fatbin` (a path or the bytes of a fatbin; its metadata names the
        variant), else the library's embedded fatbin, else
        $KLAUNCH_FATBIN_DIR/<family>_<variant>.fatbin, else the installed
        package's. Every kl_X_get is made here, so a launch loads nothing:
        load before capturing a CUDA graph."""
        function = "%s.load" % self.module_name
        device = A.device_index(device, function)
        name = self.variant_name(variant, constants, function)
        if name is None and fatbin is None:
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "%s has variants %s: name one (variant=) or "
                         "its constants (constants=)" % (self.name, ", ".join(self.variants)))
        with self._lock:
            if fatbin is None and (device, name) in self._modules:
                return self._modules[(device, name)]
            t = A.torch_module()
            if t is not None and t.cuda.is_initialized() and t.cuda.is_current_stream_capturing():
                raise E.fail(E.BY_NAME["KL_ERROR_CAPTURE_ACTIVE"], function, "torch's current stream is capturing a "
                             "CUDA graph; loading would invalidate the capture: load modules before capturing "
                             "(docs/PYTHON.md)")
            return self._load(device, name, fatbin, function)

    def _load(self, device, variant, fatbin, function):
        backend = self._cuda_backend(device)
        handle = ctypes.c_void_p()
        if fatbin is not None:
            if isinstance(fatbin, (bytes, bytearray, memoryview)):
                data = bytes(fatbin)
                st = self.lib.kl__py_module_load(backend, data, len(data), ctypes.byref(handle))
            else:
                st = self.lib.kl__py_module_load_file(backend, os.fsencode(fatbin), ctypes.byref(handle))
        else:
            st = self._load_found(backend, variant, handle, function)
        if st:
            raise self.error(st)
        mod = Module(self, backend, handle, device, _CUDA, owns_backend=False)
        if variant is not None and mod.variant != variant:
            mod.close()
            raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "the fatbin %s is variant %s of %s, not %s"
                         % (fatbin if isinstance(fatbin, (str, os.PathLike)) else "given", mod.variant, self.name,
                            variant))
        self._modules[(device, mod.variant)] = mod
        return mod

    def _load_found(self, backend, variant, handle, function):
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        if self.lib.kl__py_fatbin(variant.encode(), ctypes.byref(data), ctypes.byref(size)):
            return self.lib.kl__py_module_load(backend, ctypes.cast(data, ctypes.c_char_p), size.value,
                                               ctypes.byref(handle))
        file_name = "%s_%s.fatbin" % (self.name, variant)
        places = []
        if os.environ.get("KLAUNCH_FATBIN_DIR"):
            places.append(os.path.join(os.environ["KLAUNCH_FATBIN_DIR"], file_name))
        places.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fatbins", file_name))
        for path in places:
            if os.path.isfile(path):
                return self.lib.kl__py_module_load_file(backend, os.fsencode(path), ctypes.byref(handle))
        raise E.fail(E.BY_NAME["KL_ERROR_INVALID_IMAGE"], function, "no fatbin of %s variant %s: %s embeds none (built "
                     "without KL_PYTHON_EMBED_FATBINS or without a CUDA toolkit) and there is no %s; pass fatbin=, or "
                     "set KLAUNCH_FATBIN_DIR to the folder of %s (e.g. bazel-bin/kernels)" % (
                         self.name, variant, os.path.basename(self.lib._name), " nor ".join(places), file_name))

    def load_record(self, variant=None, *, device=0, capacity=256, register=False, image=None, max_threads=1024,
                    max_dynamic_shared=48 * 1024, missing_entry=None, launch_status=None, device_arch=None):
        """A Module on klaunch's recording backend (klaunch/record_backend.h):
        every launch is checked as on a GPU and kept (Module.records())
        instead of run; no GPU or fatbin needed. `variant` loads that
        variant's metadata (kl_<family>_variant_info); `image` loads a
        metadata text of your own instead. `device` is the CUDA device the
        tensors must be on. register=True makes it the module that launches
        without module= use on that device for its variant (a dry run of a
        whole program). The rest set the backend's reports
        (record_backend.h): the kernels' thread and shared-memory limits, an
        entry whose lookup fails, a status every launch returns, the device
        architecture messages name."""
        function = "%s.load_record" % self.module_name
        device = A.device_index(device, function)
        name = self.variant_name(variant, None, function) if image is None else None
        if image is None and name is None:
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "%s has variants %s: name one" % (
                self.name, ", ".join(self.variants)))
        capacity = _setting(function, "capacity", capacity, "size_t", 0, 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1)
        max_threads = _setting(function, "max_threads", max_threads, "uint32_t", 0, 2 ** 32 - 1)
        max_dynamic_shared = _setting(function, "max_dynamic_shared", max_dynamic_shared, "uint32_t", 0, 2 ** 32 - 1)
        status = 0 if launch_status is None else _status_setting(function, launch_status)
        missing = _text_setting(function, "missing_entry", missing_entry, _MISSING_ENTRY_BYTES)
        arch = _text_setting(function, "device_arch", device_arch, _DEVICE_ARCH_BYTES)
        backend = ctypes.c_void_p()
        st = self.lib.kl__py_record_open(capacity, ctypes.byref(backend))
        if st:
            raise self.error(st)
        self.lib.kl__py_record_configure(backend, max_threads, max_dynamic_shared, missing, status, arch)
        handle = ctypes.c_void_p()
        if image is not None:
            data = image.encode() if isinstance(image, str) else bytes(image)
            st = self.lib.kl__py_module_load(backend, data, len(data), ctypes.byref(handle))
        else:
            st = self.lib.kl__py_record_load_variant(backend, name.encode(), ctypes.byref(handle))
        if st:
            exc = self.error(st)
            self.lib.kl__py_backend_close(backend)
            raise exc
        mod = Module(self, backend, handle, device, _RECORD, owns_backend=True)
        if register:
            with self._lock:
                self._modules[(device, mod.variant)] = mod
        return mod

    def modules(self):
        """{(device, variant): Module} that launches without module= use."""
        with self._lock:
            return dict(self._modules)

    # -- a launch --

    def pick_variant(self, launcher, values, device, constants_free=False):
        """The variant a launch of `launcher` with converted arguments
        `values` uses on `device` (see the module docstring); with
        constants_free, as for a launcher that reads no constant."""
        names = list(self.variants)
        fits = None if constants_free else launcher.fits
        if fits is not None:
            ok = []
            for v in names:
                try:
                    if fits(values, self.variants[v]):
                        ok.append(v)
                except Exception:  # the expression fails (overflow, division by zero): not this one
                    pass
        else:
            ok = names
        loaded = [v for v in ok if (device, v) in self._modules]
        if loaded:
            return loaded[0]
        if ok:
            return ok[0]
        loaded = [v for v in names if (device, v) in self._modules]
        return loaded[0] if loaded else names[0]

    @staticmethod
    def bind(L, args, by_name):
        """The arguments of launcher L in spec order, from positional ones
        and keywords by the spec's parameter names (a Module's methods; the
        generated functions are Python functions with those names)."""
        params = L.params
        if not by_name and len(args) == len(params):
            return args
        names = "; its parameters are " + ", ".join(p.name for p in params)
        if len(args) > len(params):
            raise E.fail(E.ArgumentTypeError, L.function, "takes %d arguments, got %d positional%s" % (
                len(params), len(args), names))
        values = list(args) + [_MISSING] * (len(params) - len(args))
        for name, value in by_name.items():
            i = L.positions.get(name)
            if i is None:
                raise E.fail(E.ArgumentTypeError, L.function, "got an unexpected keyword argument %r: no parameter "
                             "has that name (a Module's launcher also takes stream= and check_only=)%s" % (name, names))
            if i < len(args):
                raise E.fail(E.ArgumentTypeError, L.function, "got parameter %s twice: as argument %d and as a keyword"
                             % (name, i + 1))
            values[i] = value
        missing = [p.name for p, v in zip(params, values) if v is _MISSING]
        if missing:
            raise E.fail(E.ArgumentTypeError, L.function, "takes %d arguments, got %d: %s missing%s" % (
                len(params), len(params) - len(missing), ", ".join(missing), names))
        return tuple(values)

    def call(self, index, args, stream, module, variant, check_only):
        L = self.launchers[index]
        function = L.function
        if variant is not None and not isinstance(variant, str):
            raise E.fail(E.ArgumentTypeError, function, "variant must be a variant's name (%s), got %s" % (
                ", ".join(self.variants), A._type_name(variant)))
        if module is not None:
            if not isinstance(module, Module) or module.family is not self:
                raise E.fail(E.ArgumentTypeError, function, "module must be a Module of %s (from %s.load()), got %s" % (
                    self.name, self.module_name, "a Module of " + module.family.name if isinstance(module, Module)
                    else A._type_name(module)))
            if variant is not None and variant != module.variant:
                raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "variant=%r, but the module is variant %s"
                             % (variant, module.variant))
            device = module.device
        else:
            device = None
        if variant is not None and variant not in self.variants:
            raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "%s has no variant %r (it has %s) [%s]" % (
                self.name, variant, ", ".join(self.variants), self.spec))
        if stream is None:
            handle, stream_device = A.default_stream(args, device), None
        else:
            handle, stream_device = A.stream_handle(stream, function)
        values = [None] * len(args)
        first = None  # the parameter whose tensor set the device
        unknown = []  # tensors that do not say their device
        torch = A.torch_module()
        tensor_type = torch.Tensor if torch is not None else None
        dtypes = A._torch_dtypes
        maps = []
        spans = [None] * len(args) if L.extents else None  # elements each tensor's strides reach
        for i, p in enumerate(L.params):
            a = args[i]
            pa = p.pointer
            if a is None and p.nullable:
                values[i] = 0  # NULL: the kernel reads no memory through it
                continue
            if pa is None:
                if p.kind != "tensor_map":
                    values[i] = p.convert(a)
                    continue
                m = self._map_arg(L, p, a, device)
                if device is None:
                    device, first = m.device, p.name
                maps.append(m)
                values[i] = m.address
                continue
            if tensor_type is not None and isinstance(a, tensor_type):
                # The common case, without building a Tensor: a CUDA tensor
                # of the element type, aligned to it, contiguous; anything
                # else goes the general way below (which says what is wrong).
                d = a.get_device()
                if d >= 0 and (d == device or device is None) and (
                        pa.element == "void" or dtypes.get(a.dtype) == pa.element) and a.is_contiguous():
                    ptr = a.data_ptr()
                    if not ptr % pa.align:
                        if device is None:
                            device, first = d, p.name
                        values[i] = ptr
                        if spans is not None:
                            spans[i] = a.numel()
                        continue
            site = pa.site
            if a is None:
                raise site.fail(E.NoneArgumentError, "(%s) is None; the kernel reads its memory" % p.spec_type)
            t = A.describe(a, site, handle)
            pa.check(t)
            if t.device_type == "cuda":
                if device is None:
                    device, first = t.device_id, p.name
                elif t.device_id != device:
                    raise site.fail(E.DeviceError, "is on %s; %s" % (t.device_text(), (
                        "the module is loaded on cuda:%d" % device) if first is None else (
                        "%s (the first tensor) is on cuda:%d: every tensor of a launch is on one device" % (first, device))))
            elif t.device_type is None:
                unknown.append((site, t))
            elif t.device_type != "cuda_managed":
                raise site.fail(E.DeviceError, "is in %s memory; the kernel reads device memory: move it to the GPU "
                                "(e.g. t.cuda())" % t.device_type)
            values[i] = t.address
            if spans is not None:
                spans[i] = A.span(t.shape, t.strides)
        if device is None:
            device = A.device_index(None, function)
        if stream_device is not None and stream_device != device:
            raise E.fail(E.DeviceError, function, "the stream is on cuda:%d; the launch is on cuda:%d" % (
                stream_device, device))
        if module is None and maps and maps[0].device == device and variant in (None, maps[0].module.variant):
            module = maps[0].module  # the module the maps were encoded for
        if module is None:
            module = self._launch_module(L, values, device, variant, handle)
        if unknown and module.kind == _CUDA:
            for site, t in unknown:
                ordinal = ctypes.c_int(-1)
                where = self.lib.kl__py_pointer_device(module._backend, t.address, ctypes.byref(ordinal))
                if where == 2:
                    raise site.fail(E.DeviceError, "at 0x%x is in host memory; the kernel reads device memory: move it "
                                    "to the GPU" % t.address)
                if where != 1:
                    raise site.fail(E.DeviceError, "at 0x%x is not memory the CUDA driver knows" % t.address)
                if ordinal.value != device:
                    raise site.fail(E.DeviceError, "is on cuda:%d; the launch is on cuda:%d" % (ordinal.value, device))
        if spans is not None:
            self._check_extents(L, values, spans, module)
        kernel = module._kernel(index)
        st = L.fn(kernel, 1 if check_only else 0, *values, handle)
        if st:
            raise self.error(st)

    def _check_extents(self, L, values, spans, module):
        """Each tensor's span (the elements its strides reach) against its
        pointer's declared extent for these scalars and the module's
        variant: ExtentError naming the parameter, the elements needed, the
        expression and the elements given. An extent past 64 bits is left
        to the C launcher, which refuses it (OverflowError, naming the
        extent and its spec position) before launching."""
        consts = module.constants
        for i, p in L.extents:
            given = spans[i]
            text, names, fn = p.extent
            if given is None or fn is None:
                continue  # None for a nullable pointer, or data bounds it
            try:
                need = fn(values, consts)
            except Exception:  # _expr.Fail: past 64 bits (or negative): the C launcher refuses it, naming it
                continue
            if given < need:
                raise p.site.fail(E.ExtentError, "needs %d elements (its extent %s = %d with %s); the tensor's strides "
                                  "reach %d" % (need, text, need, self._reads(L, names, values, consts), given))

    @staticmethod
    def _reads(L, names, values, consts):
        return ", ".join("%s = %s" % (n, values[L.positions[n]] if n in L.positions else consts.get(n, "?"))
                         for n in names)

    def _map_arg(self, L, p, a, device):
        """A TensorMap argument of tensor-map parameter p."""
        site = p.site
        if a is None:
            raise site.fail(E.NoneArgumentError, "(tensor_map) is None; encode one with %s.%s_%s_encode()" % (
                self.module_name, L.name, p.name))
        if not isinstance(a, TensorMap):
            raise site.fail(E.ArgumentTypeError, "(tensor_map) must be a klaunch.TensorMap from %s.%s_%s_encode(), "
                            "got %s" % (self.module_name, L.name, p.name, A._type_name(a)))
        if device is not None and a.device != device:
            raise site.fail(E.DeviceError, "is a map of cuda:%d memory; the launch is on cuda:%d" % (a.device, device))
        return a

    def encode(self, index, param, tensor, extents, strides, module, variant):
        """klaunch_F.X_P_encode(): see its docstring."""
        L = self.launchers[index]
        p = L.params[param]
        function = "kl_%s_%s_encode" % (L.name, p.name)
        site = A.Site(function, "tensor", "%s:%d:%d" % (self.spec, p.line, p.col))
        if module is not None and (not isinstance(module, Module) or module.family is not self):
            raise E.fail(E.ArgumentTypeError, function, "module must be a Module of %s, got %s" % (
                self.name, A._type_name(module)))
        if variant is not None and (not isinstance(variant, str) or variant not in self.variants):
            raise E.fail(E.BY_NAME["KL_ERROR_VARIANT_MISMATCH"], function, "%s has no variant %r (it has %s)" % (
                self.name, variant, ", ".join(self.variants)))
        if tensor is None:
            raise site.fail(E.NoneArgumentError, "is None; the map describes a tensor's memory")
        stream = A.default_stream((tensor,), None)
        t = A.describe(tensor, site, stream)
        A.PointerArg(site, p.element, True, "any", p.element + " tensor").check(t)
        device = module.device if module is not None else None
        if t.device_type == "cuda":
            if device is not None and t.device_id != device:
                raise site.fail(E.DeviceError, "is on %s; the module is loaded on cuda:%d" % (t.device_text(), device))
            device = t.device_id
        elif t.device_type not in (None, "cuda_managed"):
            raise site.fail(E.DeviceError, "is in %s memory; the kernel reads device memory" % t.device_type)
        if device is None:
            device = A.device_index(None, function)
        rank = p.rank
        if extents is None:
            if len(t.shape) != rank:
                raise site.fail(E.LayoutError, "has %d dimensions; the map has rank %d: reshape it, or give extents= "
                                "and strides=" % (len(t.shape), rank))
            extents = tuple(reversed(t.shape))
        if strides is None:
            if len(t.shape) != rank:
                raise site.fail(E.LayoutError, "has %d dimensions; the map has rank %d: give strides=" % (
                    len(t.shape), rank))
            elems = t.strides
            if elems is None:  # row-major dense
                elems, n = [], 1
                for d in reversed(t.shape):
                    elems.insert(0, n)
                    n *= d
            inner = tuple(reversed(elems))
            if t.shape and t.shape[-1] != 1 and inner[0] != 1:
                raise site.fail(E.LayoutError, "has innermost stride %d; a tensor map reads dense rows (stride 1)"
                                % inner[0])
            strides = inner[1:]
        extents, strides = self._dims(extents, rank, "extents", site), self._dims(strides, rank - 1, "strides", site)
        if module is None:
            name = variant or self.pick_variant(L, None, device, constants_free=True)
            module = self._modules.get((device, name)) or self._launch_module(L, None, device, name, stream)
        tm = TensorMap(self, L, p, module, tensor, extents, strides)
        st = p.encode(module._kernel(index), tm.address, t.address, *(tuple(extents) + tuple(strides)))
        if st:
            raise self.error(st)
        return tm

    @staticmethod
    def _dims(values, n, what, site):
        try:
            values = tuple(operator.index(v) for v in values)
        except TypeError:
            raise site.fail(E.ArgumentTypeError, "%s must be %d ints, got %r" % (what, n, values))
        if len(values) != n or any(not 0 <= v < (1 << 64) for v in values):
            raise site.fail(E.ArgumentTypeError, "%s must be %d ints in 0..2^64-1 (innermost first), got %r" % (
                what, n, list(values)))
        return values

    def _launch_module(self, L, values, device, variant, stream):
        name = variant or self.pick_variant(L, values, device)
        mod = self._modules.get((device, name))
        if mod is not None:
            return mod
        with self._lock:
            mod = self._modules.get((device, name))
            if mod is not None:
                return mod
            backend = self._cuda_backend(device)
            what = "%s: loading %s variant %s on cuda:%d for %s" % (self.module_name, self.name, name, device, L.function)
            st = self.lib.kl__py_check_not_capturing(backend, stream, what.encode())
            if st:
                raise self.error(st)
            return self._load(device, name, None, "%s.%s" % (self.module_name, L.name))


def _setting(function, name, value, c_type, lo, hi):
    """An integer setting of load_record(), refused (naming it) unless an int
    its C type holds: ctypes would wrap it silently (2**64 -> 0, -1 ->
    4294967295)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise E.fail(E.ArgumentTypeError, function, "%s must be an int, got %s" % (name, type(value).__name__))
    if not lo <= value <= hi:
        raise E.fail(E.BY_NAME["KL_ERROR_OVERFLOW"], function, "%s = %d does not fit %s (%d..%d)"
                     % (name, value, c_type, lo, hi))
    return value


# The recording backend's text settings are copied into buffers of these
# sizes, NUL included (klaunch/python_abi.h kl__py_backend: missing_entry[128],
# device_arch[32]; the runtime's arch messages hold 31 characters too).
_MISSING_ENTRY_BYTES = 128
_DEVICE_ARCH_BYTES = 32


def _text_setting(function, name, value, size):
    """A text setting of load_record() as the library's bytes (None or "":
    the default), refused (naming it) unless a str whose UTF-8 fits the
    library's buffer without a NUL: the C side would cut it short silently
    (strncat), and a non-str would fail inside with AttributeError."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise E.fail(E.ArgumentTypeError, function, "%s must be a str or None, got %s" % (name, type(value).__name__))
    data = value.encode("utf-8", "surrogatepass")
    if b"\0" in data:
        raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "%s %r holds a NUL character, which would end "
                     "it there" % (name, value))
    if len(data) > size - 1:
        raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "%s is %d bytes long (UTF-8); the recording "
                     "backend holds at most %d" % (name, len(data), size - 1))
    return data or None


def _status_setting(function, status):
    """load_record()'s launch_status: a status name or code of KL_STATUS_LIST."""
    names = ", ".join(n for n, _ in E.STATUSES)
    if isinstance(status, str):
        if status not in E.BY_NAME and status != "KL_SUCCESS":
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], function, "launch_status %r is no klaunch status "
                         "(the statuses: %s)" % (status, names))
        return E.BY_NAME[status].code if status in E.BY_NAME else 0
    if isinstance(status, bool) or not isinstance(status, int):
        raise E.fail(E.ArgumentTypeError, function, "launch_status must be a status name or code, got %s"
                     % type(status).__name__)
    if not 0 <= status < len(E.STATUSES):
        raise E.fail(E.BY_NAME["KL_ERROR_OVERFLOW"], function, "launch_status = %d is no klaunch status code "
                     "(0..%d: %s)" % (status, len(E.STATUSES) - 1, names))
    return status


class Module:
    """One loaded module of a family: a variant's fatbin on one CUDA device,
    or a recording backend's metadata. Launch through it with module=mod,
    or mod.<launcher>(...)."""

    def __init__(self, family, backend, handle, device, kind, owns_backend):
        self.family = family
        self.device = device
        self.kind = kind
        self._backend = backend
        self._handle = handle
        self._owns_backend = owns_backend
        self._lib = family.lib
        self.variant = _decode(family.lib.kl__py_module_variant(handle))
        self.arch = _decode(family.lib.kl__py_module_arch(handle))
        self.constants = dict(family.variants.get(self.variant, {}))
        self._kernels = []
        self._failed = []
        for i in range(len(family.launchers)):
            k = ctypes.c_void_p()
            st = family.lib.kl__py_get(handle, i, ctypes.byref(k))
            self._kernels.append(k if not st else None)
            self._failed.append((st, _decode(family.lib.kl__py_last_error_message())) if st else None)

    @property
    def backend(self):
        return "cuda" if self.kind == _CUDA else "record"

    def _kernel(self, index):
        k = self._kernels[index]
        if k is None:
            st, message = self._failed[index]
            raise E.error(st, message)
        return k

    def kernel_status(self, launcher):
        """None when kl_<launcher>_get succeeded in this module, else the
        exception it gave (e.g. UnsupportedError for a wgmma kernel on a
        GPU other than sm_90a)."""
        i = self.family.launcher(launcher, "Module.kernel_status").index
        failed = self._failed[i]
        return None if failed is None else E.error(*failed)

    def records(self):
        """The launches a recording module kept, oldest first."""
        if self.kind != _RECORD:
            raise E.fail(E.BY_NAME["KL_ERROR_INVALID_ARGUMENT"], "Module.records", "a %s module keeps no records" % self.backend)
        out = []
        view = _RecordView()
        for i in range(self._lib.kl__py_record_count(self._backend)):
            self._lib.kl__py_record_get(self._backend, i, ctypes.byref(view))
            L = self.family.by_name.get(_decode(view.launcher))
            names = [p.name for _, p in L.extents] if L is not None else []
            extents = {}
            for j in range(min(view.num_extents, len(names))):
                v = view.extents[j]
                extents[names[j]] = None if v == (1 << 64) - 1 else v
            out.append(Record(_decode(view.launcher), _decode(view.entry), tuple(view.grid), tuple(view.block),
                              view.shared_bytes, view.stream, tuple(view.cluster), view.attribute_flags,
                              ctypes.string_at(view.args, view.arg_bytes), extents))
        return out

    def clear_records(self):
        if self.kind == _RECORD:
            self._lib.kl__py_record_clear(self._backend)

    def close(self):
        """Unloads the module: launches through it are refused from then on
        (KernelNotLoadedError, the C launcher's). Launches without module=
        load it again."""
        with self.family._lock:
            for key, m in list(self.family._modules.items()):
                if m is self:
                    del self.family._modules[key]
        if self._handle:
            self._lib.kl__py_module_unload(self._handle)

    def __getattr__(self, name):
        family = self.__dict__.get("family")
        launcher = family.by_name.get(name) if family is not None and not name.startswith("_") else None
        if launcher is None:
            raise AttributeError("%s Module has no launcher %r" % (family.name if family else "klaunch", name))
        index = launcher.index

        def launch(*args, stream=None, check_only=False, **by_name):
            family.call(index, family.bind(launcher, args, by_name), stream, self, None, check_only)

        launch.__name__ = name
        return launch

    def __repr__(self):
        where = "cuda:%d" % self.device if self.kind == _CUDA else "record, device %d" % self.device
        return "<%s module %s (%s)>" % (self.family.name, self.variant, where)

    def __del__(self):
        try:
            lib = self._lib
            for k in self._kernels:
                if k is not None:
                    lib.kl__py_kernel_free(k)
            self._kernels = []
            if self._handle:
                lib.kl__py_module_free(self._handle)
                self._handle = None
            if self._owns_backend and self._backend:
                lib.kl__py_backend_close(self._backend)
                self._backend = None
        except Exception:  # interpreter shutdown
            pass
