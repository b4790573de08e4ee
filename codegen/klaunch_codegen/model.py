"""The validated spec: what validate.py builds and emit.py renders.

Objects here hold only what a spec says once it is known to be right
(names, types, positions, expressions, check tables, the parameter
layout); the checks that make it so live in validate.py.
"""

from . import expr as ex
from . import schema


class TensorMap:
    """What a `tensor_map` parameter's spec fixes: everything of the copy
    but the address, extents and strides (klaunch/tensor_map.h)."""

    def __init__(self, pos):
        self.pos = pos
        self.dtype = None  # "bf16" ...
        self.rank = None
        self.box = []  # [Expr], innermost first; literals or variant constants
        self.element_strides = None  # [int] or None: all 1
        self.options = dict(schema.TENSOR_MAP_DEFAULTS)  # "swizzle" -> "128B" ...
        self.option_pos = {}
        # `extent`: per dimension, innermost first, None (not checked: data
        # bounds it) or (Expr, exact): what the launch's scalars need of the
        # map's extent there, at least (>=) or exactly (==). None: no key.
        self.extent_node = None
        self.extents = None

    @property
    def esize(self):
        return schema.TENSOR_MAP_DTYPES[self.dtype][1]

    @property
    def dtype_c(self):
        return schema.TENSOR_MAP_DTYPES[self.dtype][0]

    def option_value(self, key):
        return schema.TENSOR_MAP_OPTIONS[key].index(self.options[key])

    @property
    def strides(self):
        return self.element_strides or [1] * self.rank

    def describe(self):
        return "%s, rank %d, box [%s], swizzle %s" % (
            self.dtype, self.rank, ", ".join(b.text for b in self.box), self.options["swizzle"])


class Type:
    """A parameter type: a scalar name, a pointer to `elem`, or a tensor map."""

    def __init__(self, name, elem=None, const=False):
        self.name = name  # "u32" ... "bool", "ptr" or "tensor_map"
        self.elem = elem
        self.const = const
        self.tmap = None  # TensorMap, for a tensor map

    @property
    def is_pointer(self):
        return self.name == "ptr"

    @property
    def is_tensor_map(self):
        return self.name == schema.TENSOR_MAP

    @property
    def spec(self):
        if self.is_pointer:
            return "%s%s*" % ("const " if self.const else "", self.elem)
        return self.name

    def _ptr(self, elems):
        return "%s%s *" % ("const " if self.const else "", elems[self.elem])

    @property
    def c(self):
        if self.is_tensor_map:
            return "const kl_tensor_map *"
        return self._ptr(schema.C_ELEM) if self.is_pointer else schema.C_SCALAR[self.name]

    @property
    def cuda(self):
        if self.is_tensor_map:
            return "const __grid_constant__ CUtensorMap"
        return self._ptr(schema.CUDA_ELEM) if self.is_pointer else schema.CUDA_SCALAR[self.name]

    @property
    def cuda_value(self):
        """The parameter's type in the kernel's function type (top-level
        const and attributes dropped), for the signature checks."""
        return "CUtensorMap" if self.is_tensor_map else self.cuda.strip()

    @property
    def kind(self):
        if self.is_tensor_map:
            return "KL_PARAM_TENSOR_MAP"
        return "KL_PARAM_PTR" if self.is_pointer else schema.PARAM_KIND[self.name]

    @property
    def size(self):
        if self.is_tensor_map:
            return schema.TENSOR_MAP_SIZE
        return 8 if self.is_pointer else schema.PARAM_SIZE[self.name]

    @property
    def align(self):
        """Alignment in the kernel's parameter buffer (natural; a tensor map 128)."""
        return schema.TENSOR_MAP_ALIGN if self.is_tensor_map else self.size



class Extent:
    """A pointer's declared extent (schema.EXTENT_KEYS): `kind` is "expr"
    (one expression of elements), "rows" ((rows - 1) * stride + width, or 0
    when rows is 0) or "unknown" (data the host does not see bounds it;
    `unknown` says what)."""

    def __init__(self, kind, pos, expr=None, rows=None, stride=None, width=None, unknown=None):
        self.kind = kind
        self.pos = pos
        self.expr = expr  # Expr, for "expr"
        self.rows, self.stride, self.width = rows, stride, width  # Expr each, for "rows"
        self.unknown = unknown  # text, for "unknown"

    @property
    def parts(self):
        return [self.expr] if self.kind == "expr" else [self.rows, self.stride, self.width] if self.kind == "rows" else []

    @property
    def names(self):
        out = []
        for e in self.parts:
            out += [n for n in e.names if n not in out]
        return out

    @property
    def text(self):
        """What messages show: the expression, or the rows form written out."""
        if self.kind == "expr":
            return self.expr.text
        if self.kind == "rows":
            return "(%s - 1) * %s + %s" % (_grouped(self.rows), _grouped(self.stride), _grouped(self.width))
        return "unknown: " + self.unknown


def _grouped(e):
    return e.text if isinstance(e.tree, (ex.Num, ex.Name, ex.Call)) else "(%s)" % e.text


class Param:
    def __init__(self, name, ptype, launch_only, doc, pos, layout=None):
        self.name = name
        # Pointers: the declared extent (Extent) or None, and whether NULL
        # (Python: None) is accepted (`nullable: true`).
        self.extent = None
        self.extent_node = None  # the YAML node, until validate.py reads it
        self.extent_check = None  # its Check (the launcher's table), for a computable extent
        self.nullable = False
        self.type = ptype
        self.launch_only = launch_only
        self.doc = doc
        self.pos = pos
        self.offset = None  # in the kernel's parameter buffer; None if launch-only
        # Pointers: how the Python launchers check a tensor's strides
        # (schema.LAYOUTS); None for scalars.
        if layout is None and ptype is not None and ptype.is_pointer:
            layout = schema.DEFAULT_LAYOUT
        self.layout = layout


class Expr:
    """An expression as written, where it is, and its syntax tree."""

    def __init__(self, text, node, pos, tree):
        self.text = text
        self.node = node
        self.pos = pos
        self.tree = tree
        self.names = ex.names_read(tree)


class Check:
    """One entry of the launcher's kl_check_info table."""

    def __init__(self, what, expr, message, pos, args, status=None):
        self.what = what  # "precondition", "grid.x", ..., "block", "shared_bytes"
        self.expr = expr  # Expr, or None for the block's thread count
        self.message = message
        self.pos = pos
        self.args = args  # names read, in order of first appearance
        self.status = status  # preconditions: KL_ERROR_PRECONDITION or KL_ERROR_VARIANT_MISMATCH
        self.buffer = None  # preconditions: the pointer a `SIZE >= NEEDED` check sizes (`buffer:`)
        self.text = expr.text if expr is not None else None
        self.index = None
        self.value = None  # int when the expression reads nothing (checked here)
        self.extent = None  # model.Extent, for an "extent of P" entry
        self.tmap = None  # (parameter, dimension, exact), for a tensor map's extent entry


class Launcher:
    def __init__(self, name, pos):
        self.name = name
        self.pos = pos
        self.entry = name
        self.entry_pos = pos
        self.doc = ""
        self.params = []
        self.grid = {}  # "x" -> Check (only the given components)
        self.block = {}
        self.block_threads = None  # Check of x*y*z
        self.block_pos = pos
        self.shared = None  # Check or None (0 bytes)
        self.max_dynamic_shared = 0  # bytes the kernel opts in to when loaded; 0: the 48 KiB default
        self.max_dynamic_shared_expr = None  # Expr as written, or None
        self.preconditions = []
        self.extent_checks = []  # Check per computable extent, in parameter order (finish())
        self.tmap_extent_checks = []  # Check per tensor-map extent entry, parameter then dimension order (finish())
        self.const_names = []
        # launch_attributes: cluster (x, y, z) or None; the two flags; where
        # the mapping is (for runtime messages).
        self.cluster = None
        self.programmatic_serialization = False
        self.cooperative = False
        self.attributes_pos = None
        # arch: the one target whose machine code the kernel needs (e.g.
        # "sm_90a" for wgmma), or None for a kernel built for every target.
        self.arch = None

    @property
    def has_attributes(self):
        return self.attributes_pos is not None

    @property
    def kernel_params(self):
        return [p for p in self.params if not p.launch_only]

    @property
    def param_bytes(self):
        kp = self.kernel_params
        return kp[-1].offset + kp[-1].type.size if kp else 0

    @property
    def checks(self):
        out = list(self.preconditions)
        out += [self.grid[a] for a in "xyz" if a in self.grid]
        out += [self.block[a] for a in "xyz" if a in self.block]
        out.append(self.block_threads)
        if self.shared is not None:
            out.append(self.shared)
        out += self.extent_checks
        out += self.tmap_extent_checks
        return out

    @property
    def extents(self):
        """The pointer parameters that declare an extent, in parameter order."""
        return [p for p in self.params if p.extent is not None]


class Variant:
    def __init__(self, name, doc, constants, pos):
        self.name = name
        self.doc = doc
        self.constants = constants  # [(name, int)] in spec order
        self.pos = pos
        self.const_pos = {}  # name -> position of its key
        self.defined = None  # constant names it defines, or None when one was refused for its name


class Spec:
    def __init__(self, source, sha256):
        self.source = source
        self.path = source.path
        self.sha256 = sha256
        self.family = None
        self.family_pos = (1, 1)
        self.doc = ""
        self.variants = []
        self.launchers = []
        self.refused_consts = {}  # constant name -> "name" or "value": reported, so left out
        self.operations = []  # Operation, in spec order (operations.py)

    @property
    def const_names(self):
        return [n for n, _ in self.variants[0].constants] if self.variants else []



class LauncherResolver:
    """What an expression of a validated launcher reads, with each constant's slot in kernel->consts."""

    def __init__(self, launcher):
        self.params = {p.name: p for p in launcher.params}
        self.const_index = {n: i for i, n in enumerate(launcher.const_names)}

    def __call__(self, name):
        p = self.params.get(name)
        if p is not None:
            return ex.Binding("param", name, ptype=p.type)
        return ex.Binding("const", name, const_index=self.const_index[name])

    def candidates(self):
        return list(self.params) + list(self.const_index)


class ShapeParam:
    """One input of an operation's chooser (its kl_<op>_shape field)."""

    def __init__(self, name, ptype, doc, pos):
        self.name = name
        self.type = ptype
        self.doc = doc
        self.pos = pos
        self.used = False  # read by an alternative's launcher, a key or an expression
        self.mismatch_reported = False


class Alternative:
    """One launcher that implements an operation: when it applies beyond its
    launcher's checks, and its tunables' defaults ([(parameter, Expr)])."""

    def __init__(self, name, pos, launcher):
        self.name = name
        self.pos = pos
        self.launcher = launcher
        self.doc = ""
        self.when = None
        self.tunables = []
        # Which of the launcher's parameters (by index: names are renamed
        # in collisions.py's tagged copy) each shape parameter and tunable is.
        self.shape_index = {}
        self.tunable_index = {}


class Operation:
    """A spec operation (operations.py): its shape, table keys, values,
    alternatives and fallback rule ([(Alternative, Expr or None)])."""

    def __init__(self, name, pos):
        self.name = name
        self.pos = pos
        self.doc = ""
        self.includes = []
        self.shape = []
        self.keys = []  # [(shape parameter, "exact" or "log2")]
        self.values = []  # [(name, helper, [(kind, value)])], kind "name", "int" or "const"
        self.value_use = {}  # name -> (position, used)
        self.value_reads = {}  # name -> the values it reads
        self.alternatives = []
        self.refused_alternatives = set()  # names reported where defined: not again where used
        self.tunables = []  # every alternative's tunable names, first use first
        self.fallback = []

    def add_shape(self, name, ptype, doc, pos):
        p = ShapeParam(name, ptype, doc, pos)
        self.shape.append(p)
        return p

    def shape_param(self, name):
        for p in self.shape:
            if p.name == name:
                return p
        return None

    def alternative(self, name):
        for a in self.alternatives:
            if a.name == name:
                return a
        return None
