"""What a spec may say, as data: its keys, the hints for missing ones, the
parameter types and their C spellings, the CUDA limits a launch must meet,
and the names C and C++ reserve. The validator (validate.py) reads these
tables; nothing here reads a spec.
"""

import re

# ---- types --------------------------------------------------------------------

SCALAR_TYPES = ("u32", "u64", "i32", "f32", "bool")
# (tensor_map is a type too; see TENSOR_MAP below)
POINTER_ELEMENTS = ("bf16", "f16", "fp8_e4m3", "f32", "i32", "u32", "u8", "void")
TYPE_EXPECTED = "expected u32, u64, i32, f32, bool, T*, const T* or tensor_map"

C_SCALAR = {"u32": "uint32_t", "u64": "uint64_t", "i32": "int32_t", "f32": "float", "bool": "bool"}
C_ELEM = {
    "bf16": "kl_bf16",
    "f16": "kl_f16",
    "fp8_e4m3": "kl_fp8_e4m3",
    "f32": "float",
    "i32": "int32_t",
    "u32": "uint32_t",
    "u8": "uint8_t",
    "void": "void",
}
# Bytes of one element, as extents count them (void: bytes).
ELEM_BYTES = {"bf16": 2, "f16": 2, "fp8_e4m3": 1, "f32": 4, "i32": 4, "u32": 4, "u8": 1, "void": 1}
CUDA_SCALAR = {"u32": "uint32_t", "u64": "uint64_t", "i32": "int32_t", "f32": "float", "bool": "uint32_t"}
CUDA_ELEM = {
    "bf16": "__nv_bfloat16",
    "f16": "__half",
    "fp8_e4m3": "__nv_fp8_e4m3",
    "f32": "float",
    "i32": "int32_t",
    "u32": "uint32_t",
    "u8": "uint8_t",
    "void": "void",
}
PARAM_KIND = {"u32": "KL_PARAM_U32", "u64": "KL_PARAM_U64", "i32": "KL_PARAM_I32", "f32": "KL_PARAM_F32", "bool": "KL_PARAM_BOOL"}
PARAM_SIZE = {"u32": 4, "u64": 8, "i32": 4, "f32": 4, "bool": 4}

# Tensor maps (`type: tensor_map`, klaunch/tensor_map.h): a CUtensorMap by
# value, 128 bytes at 128-byte alignment (CUDA 13's cuda.h declares it
# alignas(128); the copy engine needs 64). Element types: the copy engine's
# dtype (cuda.h's CUtensorMapDataType) and bytes; fp8 moves as u8.
TENSOR_MAP = "tensor_map"
TENSOR_MAP_SIZE = 128
TENSOR_MAP_ALIGN = 128
TENSOR_MAP_KEYS = ("dtype", "rank", "box", "element_strides", "swizzle", "interleave", "l2_promotion", "oob_fill", "extent")
# An entry of a tensor map's `extent` list: an expression (the map's extent
# must be at least it), {exact: expression} (must equal it) or null.
TENSOR_MAP_EXTENT_EXACT = "exact"
TENSOR_MAP_DTYPES = {
    "bf16": ("KL_TENSOR_MAP_BF16", 2),
    "f16": ("KL_TENSOR_MAP_F16", 2),
    "f32": ("KL_TENSOR_MAP_F32", 4),
    "i32": ("KL_TENSOR_MAP_I32", 4),
    "u32": ("KL_TENSOR_MAP_U32", 4),
    "u8": ("KL_TENSOR_MAP_U8", 1),
    "fp8_e4m3": ("KL_TENSOR_MAP_U8", 1),
}
TENSOR_MAP_FLOAT_DTYPES = ("bf16", "f16", "f32")
# Each option's spellings in a spec, in cuda.h's order (the value is the index).
TENSOR_MAP_OPTIONS = {
    "swizzle": ("none", "32B", "64B", "128B"),
    "interleave": ("none", "16B", "32B"),
    "l2_promotion": ("none", "64B", "128B", "256B"),
    "oob_fill": ("zero", "nan"),
}
TENSOR_MAP_DEFAULTS = {"swizzle": "none", "interleave": "none", "l2_promotion": "128B", "oob_fill": "zero"}
TENSOR_MAP_MAX_RANK = 5
TENSOR_MAP_BOX_MAX = 256
TENSOR_MAP_ELEMENT_STRIDE_MAX = 8

# ---- the spec file ---------------------------------------------------------------

# A spec is a regular file of at most this many bytes: a 10,000-launcher
# spec is 8.5 MB (bench/codegen/speed.py); a FIFO or a device would block or
# never end, and a far larger file is a mistake.
MAX_SPEC_BYTES = 64 << 20

# ---- keys -----------------------------------------------------------------------

TOP_KEYS = ("family", "doc", "variants", "launchers", "operations")
VARIANT_KEYS = ("doc", "constants")
LAUNCHER_KEYS = ("name", "entry", "doc", "params", "grid", "block", "shared_bytes", "max_dynamic_shared", "preconditions", "launch_attributes", "arch")
ATTRIBUTE_KEYS = ("cluster", "programmatic_serialization", "cooperative")
PARAM_KEYS = ("name", "type", "launch_only", "layout", "doc", "tensor_map", "extent", "nullable")
# A pointer's `extent`: the elements the kernel may touch through it, as an
# expression of the launcher's integer parameters and the variant constants,
# or rows a stride apart ({rows, stride, width}: (rows - 1) * stride + width
# elements, 0 when rows is 0), or {unknown: <what bounds it>} where data the
# host does not see decides it (a paged cache read through a block table).
EXTENT_ROWS_KEYS = ("rows", "stride", "width")
EXTENT_UNKNOWN_KEY = "unknown"
EXTENT_KEYS = EXTENT_ROWS_KEYS + (EXTENT_UNKNOWN_KEY,)
# How a pointer parameter's tensor must be laid out for the Python launchers
# to pass it (they see shapes and strides; C sees an address): every element
# dense in row-major order (the default), every dimension but the first dense
# (rows a stride parameter apart, e.g. q[:, :n] of a wider buffer), or no
# check at all.
LAYOUTS = ("contiguous", "rows", "any")
DEFAULT_LAYOUT = "contiguous"
# arch: sm_<N> with an optional a (arch-specific) or f (family-specific) suffix.
ARCH_PATTERN = r"^sm_[0-9]{2,3}[af]?$"
DIM_KEYS = ("x", "y", "z")
PRE_KEYS = ("check", "message", "buffer")
PRE_REQUIRED = ("check", "message")  # buffer: the pointer a `SIZE >= NEEDED` check sizes

REQUIRED_HINTS = {
    "family": "add family: <file stem>",
    "variants": "add variants: with at least one variant (one fatbin each)",
    "launchers": "add launchers: with one entry per kernel",
    "name": "every launcher has a name (its C launcher is kl_<name>)",
    "params": "list the kernel's parameters in kernel order",
    "grid": "add grid: {x: ...}",
    "block": "add block: {x: ...}",
    "x": "x is required; y and z default to 1",
    "check": "add check: <condition>",
    "message": "say what the caller got wrong, for the error message",
    "type": "add type: u32 (or u64, i32, f32, bool, T*, const T*, tensor_map)",
    "dtype": "add dtype: bf16 (the element type the map copies)",
    "rank": "add rank: 2 (dimensions, 1 to 5)",
    "box": "add box: [64, 32] (elements per dimension of one copy, innermost first)",
}


# ---- Python ----------------------------------------------------------------------

# The generated Python module (klaunch_<family>) makes one function per
# launcher, named after it, with the launcher's parameters as its own. Python's
# keywords and soft keywords (the fixed list of Python 3.12, so the result does
# not depend on the Python that runs the generator) cannot be either.
PY_KEYWORDS = frozenset(
    """False None True and as assert async await break class continue def del elif else except finally for
    from global if import in is lambda nonlocal not or pass raise return try while with yield match case
    type""".split()
)
# Keyword arguments every generated launcher function takes after the
# launcher's own parameters.
PY_LAUNCH_KEYWORDS = ("stream", "module", "variant", "check_only")
# Names the generated module itself defines beside its launcher functions.
PY_MODULE_NAMES = frozenset("FAMILY SPEC SPEC_HASH VARIANTS LAUNCHERS Module load load_record".split())


# ---- CUDA limits and defaults -------------------------------------------------------

CLUSTER_MAX = 8  # the portable cluster size (blocks), every cluster-capable GPU
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # what a kernel may use without opting in (cuFuncSetAttribute)
U32_MAX = (1 << 32) - 1
GRID_LIMITS = {"x": (2147483647, "2^31-1"), "y": (65535, "65535"), "z": (65535, "65535")}
BLOCK_LIMITS = {"x": 1024, "y": 1024, "z": 64}
THREADS_MAX = 1024
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# ---- names ------------------------------------------------------------------------

# C99/C11 keywords, the C23 ones C++ lacks, and GNU C's typeof.
C_KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline
    int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
    _Thread_local bool true false typeof typeof_unqual""".split()
)
CXX_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm bitand bitor catch char16_t char32_t char8_t class compl concept
    const_cast consteval constexpr constinit co_await co_return co_yield decltype delete dynamic_cast
    explicit export friend mutable namespace new noexcept not not_eq nullptr operator or or_eq private
    protected public reinterpret_cast requires static_assert static_cast template this thread_local throw
    try typeid typename using virtual wchar_t xor xor_eq""".split()
)
# Names the generated code itself uses for its own parameters and types.
RESERVED = frozenset("kernel stream NULL size_t uint8_t uint32_t uint64_t int32_t int64_t".split())

# The preprocessor's operator, which no macro may be named.
PREPROCESSOR_WORDS = frozenset(["defined"])

# The program's entry point: no kernel (nvcc: "function main cannot be
# marked __device__ or __global__") and no macro may take it.
PROGRAM_ENTRY = frozenset(["main"])

# Prefixes owned by others, for names that reach C raw (parameters, variant
# constants, kernel entries): (pattern, owner).
RESERVED_PATTERNS = (
    (re.compile(r"(?:cuda[A-Z0-9_]|CUDA|CU_|CU[a-z]|cu[A-Z]|NV_|nv_)"), "CUDA (cuda*, CUDA*, CU_*, CUx*, cuX*, NV_*, nv_*)"),
    (re.compile(r"U?INT[A-Z0-9_]*_(?:MAX|MIN|C|WIDTH)\Z"), "C's <stdint.h> (INT*/UINT* macros ending _MAX, _MIN, _C, _WIDTH)"),
    (re.compile(r"u?int[a-z0-9_]*_t\Z"), "C's <stdint.h> (int*_t and uint*_t types)"),
)
