"""Rendering: validated specs -> C header, kernel-side header, Markdown reference.

The templates hold the shape of each file; everything computed (C types,
expression translation, wrapping, escaping) is a Python filter here.
"""

import os
import re
import textwrap
import unicodedata

import jinja2

from . import REGENERATE_COMMAND, RUNTIME_ABI, __version__
from . import expr as ex
from . import schema
from .model import LauncherResolver

_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


# ---- filters ----------------------------------------------------------------------


_PLAIN_STRING = re.compile(r'[ !#-/0-9:->@-\[\]-~]*\Z')  # printable ASCII but " ? and backslash


def c_string(text):
    """A C string literal (ASCII-safe, no trigraphs)."""
    if _PLAIN_STRING.match(text):
        return '"' + text + '"'
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "?":
            out.append("\\?")  # never a trigraph
        elif 32 <= o < 127:
            out.append(ch)
        else:
            for b in ch.encode("utf-8"):
                out.append("\\%03o" % b)
    out.append('"')
    return "".join(out)


# ---- text in comments -----------------------------------------------------------

# Kept in comments: printable ASCII, and other characters that print (letters,
# marks, digits, punctuation, symbols). Written as <U+XXXX>: controls, format
# characters (the bidirectional overrides gcc warns about), line and paragraph
# separators, private-use and unassigned code points.
_COMMENT_PLAIN = re.compile(r"[ -~]*\Z")


def _comment_char(ch):
    if " " <= ch <= "~":
        return ch
    cat = unicodedata.category(ch)
    if cat[0] in "LMNPS":
        return ch
    if cat == "Zs":
        return " "
    return "<U+%04X>" % ord(ch)


def comment_text(text):
    """Text for inside /* ... */ on one line: nothing in it can end the
    comment (*/), open a nested one (/*, -Wcomment), form a trigraph (??/
    is a backslash with -trigraphs) or break the line (newline, U+2028);
    a backslash at its end cannot splice the next line."""
    text = " ".join(text.split())
    if not _COMMENT_PLAIN.match(text):
        text = "".join(_comment_char(ch) for ch in text)
    while "*/" in text or "/*" in text or "??" in text:
        text = text.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    if text.endswith("\\"):
        text = text[:-1] + "<U+005C>"
    return text


def wrap_lines(text, width=76, transform=None):
    """Doc text as lines of at most `width` characters (paragraphs kept)."""
    lines = []
    for para in text.strip().split("\n\n"):
        para = " ".join(para.split())
        if transform is not None:
            para = transform(para)
        lines += textwrap.wrap(para, width) or [""]
        lines.append("")
    return lines[:-1] if lines else []


def c_comment(text, indent=""):
    """Doc text as the inner lines of a /* ... */ block (` * ` prefixed)."""
    out = []
    for l in wrap_lines(text, transform=comment_text):
        if l.endswith("\\"):
            l = l[:-1] + "<U+005C>"
        out.append((indent + " * " + l).rstrip())
    return "\n".join(out)


def c_string_body(text):
    """A C string literal's characters without the quotes (for #error text)."""
    return c_string(text)[1:-1]


def wrap_list(items, prefix, suffix, indent="    ", width=110):
    """prefix + items joined by ', ' + suffix, broken before `width`."""
    lines, line = [], prefix
    for i, item in enumerate(items):
        piece = item + (", " if i + 1 < len(items) else "")
        if len(line) + len(piece.rstrip()) > width and line.strip() and line != prefix:
            lines.append(line.rstrip())
            line = indent
        line += piece
    line += suffix
    lines.append(line)
    return "\n".join(lines)


def c_decl(param):
    """`const kl_bf16 *q`, `uint32_t n`."""
    t = param.type.c
    return t + param.name if t.endswith("*") else "%s %s" % (t, param.name)


def cuda_decl(param):
    t = param.type.cuda
    return t + param.name if t.endswith("*") else "%s %s" % (t, param.name)


def c_int(value):
    """A C integer constant for a variant constant (signed 64-bit range)."""
    if -(1 << 31) < value < (1 << 31):
        return str(value) if value >= 0 else "(%d)" % value
    return "%dLL" % value if value >= 0 else "(%dLL)" % value


def md_escape(text):
    """Text for one Markdown table cell: one line, | escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def md_comment(text):
    """Text inside <!-- ... -->: one line, no -- (which ends the comment)."""
    text = " ".join(text.split())
    while "--" in text:
        text = text.replace("--", "- -")
    return text


def md_code(text):
    return "`%s`" % text.replace("|", "\\|")


# ---- per-launcher view: what the templates read -------------------------------------


class CheckView:
    """One kl_check_info entry and the C that evaluates it."""

    def __init__(self, launcher, check, resolver):
        self.check = check
        self.index = check.index
        # A buffer's size check names the buffer ("buffer workspace"): the
        # runtime then says how much it holds and needs (kl__fail_check).
        buffer = getattr(check, "buffer", None)
        self.what = "buffer " + buffer if buffer else check.what
        self.needed_c = ex.to_c(check.expr.tree.operands[1], resolver)[0] if buffer else None
        self.text = check.text
        self.message = check.message
        self.line, self.col = check.pos
        self.args = check.args
        self.args_array = "kl__%s_args%d" % (launcher.name, check.index) if check.args else "NULL"
        self.status = check.status
        self.value = check.value
        self.c, self.temps = ex.to_c(check.expr.tree, resolver) if check.expr is not None else (None, 0)
        self.can_fail = ex.can_fail(check.expr.tree, resolver) if check.expr is not None else False
        self.values = []
        for name in check.args:
            b = resolver(name)
            if b.kind == "const":
                self.values.append("(uint64_t)kernel->consts[%d]" % b.const_index)
            elif b.ptype.name == "i32":
                self.values.append("(uint64_t)(int64_t)%s" % name)
            else:
                self.values.append("(uint64_t)%s" % name)


class TensorMapView:
    """One tensor-map parameter: its builder, the request its spec fixes
    (the box evaluated in C from the loaded variant's constants) and the
    sites its messages name."""

    def __init__(self, launcher, param, resolver):
        t = param.type.tmap
        self.name = param.name
        self.builder = "kl_%s_%s_encode" % (launcher.name, param.name)
        self.request = "kl__%s_%s_request" % (launcher.name, param.name)
        self.site = "kl__%s_%s_site" % (launcher.name, param.name)
        self.encode_site = "kl__%s_%s_encode_site" % (launcher.name, param.name)
        self.line, self.col = param.pos
        self.dtype = t.dtype_c
        self.dtype_spec = t.dtype
        self.address_c = "const %s *" % schema.C_ELEM[t.dtype]
        self.rank = t.rank
        self.box = []  # (index, text, C or None for a literal, value of a literal)
        temps = 0
        self.box_can_fail = False
        for i, e in enumerate(t.box):
            if not e.names:
                self.box.append((i, e.text, None, ex.evaluate(e.tree, {})))
                continue
            c, n = ex.to_c(e.tree, resolver)
            temps = max(temps, n)
            self.box_can_fail = self.box_can_fail or ex.can_fail(e.tree, resolver)
            self.box.append((i, e.text, c, None))
        self.box_reads_consts = any(c is not None for _, _, c, _ in self.box)
        self.temps = ["kl__t%d" % i for i in range(temps)]
        self.element_strides = t.strides
        self.options = [(k, t.option_value(k), t.options[k]) for k in ("interleave", "swizzle", "l2_promotion", "oob_fill")]
        self.describe = t.describe()

    def builder_params(self):
        return (["kl_tensor_map *map", self.address_c + "address"] + ["uint64_t extent%d" % i for i in range(self.rank)]
                + ["uint64_t stride%d" % i for i in range(1, self.rank)])


class ExtentView:
    """One declared extent: its kl_extent_info entry and the C that computes it."""

    def __init__(self, launcher, index, param, by_check, resolver):
        x = param.extent
        self.index = index
        self.name = param.name
        self.arg = launcher.kernel_params.index(param)
        self.elem_bytes = schema.ELEM_BYTES[param.type.elem]
        self.kind = x.kind
        self.text = x.text
        self.unknown = x.unknown
        self.check = by_check[id(param.extent_check)] if param.extent_check is not None else None
        self.rows_c, self.rows_temps = ex.to_c(x.rows.tree, resolver) if x.kind == "rows" else (None, 0)
        self.rows_text = x.rows.text if x.kind == "rows" else None
        self.c_type = param.type.c


_GRID_LIMIT = {"x": "KL__GRID_X_MAX", "y": "KL__GRID_YZ_MAX", "z": "KL__GRID_YZ_MAX"}
_BLOCK_LIMIT = {"x": "KL__BLOCK_XY_MAX", "y": "KL__BLOCK_XY_MAX", "z": "KL__BLOCK_Z_MAX"}
_AXIS = {"x": 0, "y": 1, "z": 2}


class LauncherView:
    def __init__(self, spec, launcher):
        self.l = launcher
        self.name = launcher.name
        self.entry = launcher.entry
        self.doc = launcher.doc
        self.line, self.col = launcher.pos
        self.spec_path = spec.path
        self.params = launcher.params
        self.kernel_params = launcher.kernel_params
        self.param_bytes = launcher.param_bytes
        self.const_names = launcher.const_names
        r = LauncherResolver(launcher)
        self.checks = [CheckView(launcher, c, r) for c in launcher.checks]
        by_check = {id(c.check): c for c in self.checks}
        self.preconditions = [by_check[id(c)] for c in launcher.preconditions]
        self.grid = [(a, _AXIS[a], by_check.get(id(launcher.grid.get(a)))) for a in "xyz"]
        self.block = [(a, _AXIS[a], by_check.get(id(launcher.block.get(a)))) for a in "xyz"]
        self.grid_limit = _GRID_LIMIT
        self.block_limit = _BLOCK_LIMIT
        self.block_threads = by_check[id(launcher.block_threads)]
        self.shared = by_check.get(id(launcher.shared)) if launcher.shared is not None else None
        self.max_dynamic_shared = launcher.max_dynamic_shared
        self.max_dynamic_shared_text = launcher.max_dynamic_shared_expr.text if launcher.max_dynamic_shared_expr else None
        # launch_attributes: the desc points at a static kl_launch_attributes.
        self.has_attributes = launcher.has_attributes
        self.cluster = launcher.cluster
        self.attributes_line, self.attributes_col = launcher.attributes_pos or (0, 0)
        self.arch = launcher.arch  # e.g. "sm_90a", or None
        flags = []
        if launcher.programmatic_serialization:
            flags.append("KL_LAUNCH_PROGRAMMATIC_SERIALIZATION")
        if launcher.cooperative:
            flags.append("KL_LAUNCH_COOPERATIVE")
        self.attribute_flags = " | ".join(flags) if flags else "0u"
        # Grid axes a cluster divides whose extent is known only at launch.
        self.cluster_axes = []
        if launcher.cluster is not None:
            for axis, v in zip("xyz", launcher.cluster):
                g = launcher.grid.get(axis)
                if v > 1 and g is not None and g.value is None:
                    self.cluster_axes.append((_AXIS[axis], v))
        self.attribute_words = []
        if launcher.cluster is not None:
            self.attribute_words.append("cluster (%d, %d, %d)" % launcher.cluster)
        if launcher.programmatic_serialization:
            self.attribute_words.append("programmatic_serialization")
        if launcher.cooperative:
            self.attribute_words.append("cooperative")
        # Only checks evaluated in C declare kl__err and the temporaries: a
        # grid or block value the generator folded is stored as a literal
        # (macros.j2 sized()); shared memory is always evaluated.
        emitted = [c for c in self.checks if (c.value is None or c.what == "shared_bytes") and c.check.extent is None]
        self.uses_err = any(c.can_fail for c in emitted)
        self.temps = ["kl__t%d" % i for i in range(max([c.temps for c in emitted] + [0]))]
        read = set()
        for c in launcher.checks:
            read.update(c.args)
        # prepare() takes what it checks: pointers (NULL, unless nullable), tensor maps and what expressions read.
        self.prepare_params = [p for p in launcher.params if (p.type.is_pointer and not p.nullable) or p.type.is_tensor_map
                               or p.name in read]
        self.tensor_maps = [TensorMapView(launcher, p, r) for p in launcher.params if p.type.is_tensor_map]
        # Tensor-map extents the scalars decide: (check, map, dimension, exact), checked last.
        self.tmap_extents = [(by_check[id(c)], c.tmap[0], c.tmap[1], c.tmap[2]) for c in launcher.tmap_extent_checks]
        self.unchecked_params = [p for p in launcher.params if p not in self.prepare_params]
        self.pointers = [p for p in launcher.params if p.type.is_pointer and not p.nullable]
        # Declared extents: the table, the private evaluator's parameters
        # (the scalars they read), what it declares.
        self.extents = [ExtentView(launcher, i, p, by_check, r) for i, p in enumerate(launcher.extents)]
        ext_read = []
        for p in launcher.extents:
            ext_read += [n for n in p.extent.names if n not in ext_read]
        self.extent_params = [p for p in launcher.params if p.name in ext_read]
        self.extent_reads_consts = any(n in launcher.const_names for n in ext_read)
        computed = [x.check for x in self.extents if x.check is not None]
        self.extent_uses_err = any(c.can_fail for c in computed)
        self.extent_uses_v = any(x.rows_c is not None or x.check.can_fail for x in self.extents if x.check is not None)
        self.extent_temps = ["kl__t%d" % i for i in range(max([c.temps for c in computed] + [x.rows_temps for x in self.extents] + [0]))]
        self.bools = [p for p in launcher.kernel_params if p.type.name == "bool"]
        # Only extents that can be 0 at run time need the empty-grid test.
        self.zero_grid_axes = [i for a, i, c in self.grid if c is not None and c.value is None]
        self.block_axes = [i for a, i, c in self.block if c is not None]
        self.block_threads_const = None
        if all(c is None or c.value is not None for _, _, c in self.block):
            total = 1
            for _, _, c in self.block:
                if c is not None:
                    total *= c.value
            self.block_threads_const = total

        self.fixed = _fixed_values(spec, launcher)

    def c_params(self):
        return [c_decl(p) for p in self.params]

    def params_macro(self):
        """`#define KL_PARAMS_<entry> ...`: the kernel's parameter list as
        the spec gives it, lines continued with a backslash."""
        decls = [cuda_decl(p) for p in self.kernel_params] or ["void"]
        text = wrap_list(decls, "#define KL_PARAMS_%s " % self.entry, "", indent="    ", width=106)
        return " \\\n".join(text.split("\n"))

    def signature_asserts(self):
        """[(C++ condition, message)]: the kernel-side header's check of a
        kernel definition's function type kl__F against the spec, parameter
        by parameter (count, then type), then no extra parameter."""
        where = "%s:%d:%d" % (self.spec_path, self.line, self.col)
        out = [("kl__fn<kl__F>::is_kernel", "klaunch: %s is not a kernel (a function returning void) [%s]" % (self.entry, where))]
        for i, p in enumerate(self.kernel_params):
            t = p.type.cuda_value
            at = "%s:%d:%d" % (self.spec_path, p.pos[0], p.pos[1])
            out.append((
                "kl__fn<kl__F>::arity >= %d" % (i + 1),
                "klaunch: kernel %s lacks parameter %d (%s: %s, spec type %s) [%s]" % (self.entry, i + 1, p.name, t, p.type.spec, at),
            ))
            out.append((
                "kl__param_is<kl__F, %d, %s>::value" % (i, t),
                "klaunch: kernel %s, parameter %d (%s): the definition's type is not %s (spec type %s) [%s]"
                % (self.entry, i + 1, p.name, t, p.type.spec, at),
            ))
        n = len(self.kernel_params)
        out.append((
            "kl__fn<kl__F>::arity <= %d" % n,
            "klaunch: kernel %s has more parameters than the %d of its spec [%s]" % (self.entry, n, where),
        ))
        return out

    def signature_check_message(self):
        return "klaunch: kernel %s [%s:%d:%d]; if it is undefined here, no kernel source of the family defines it" % (
            self.entry, self.spec_path, self.line, self.col)

    def arg_ref(self, p):
        if p.type.is_tensor_map:
            return "%s->opaque" % p.name  # the 128 bytes the kernel receives
        return "&kl__%s" % p.name if p.type.name == "bool" else "&%s" % p.name


# ---- the Python module and its library --------------------------------------------

# How each spec type reaches kl_X() from Python: the C type of kl__X_py()'s
# parameter (what ctypes passes: python/klaunch/_family.py's CTYPES has the
# same keys), and the C text that makes kl_X()'s argument of it. A new spec
# type is one entry here and one in the runtime's _args.py (its converter).
PY_C_PARAM = {
    "u32": ("uint32_t", "{name}"),
    "u64": ("uint64_t", "{name}"),
    "i32": ("int32_t", "{name}"),
    "f32": ("float", "{name}"),
    "bool": ("bool", "{name}"),
    "ptr": ("uint64_t", "({ctype})(uintptr_t){name}"),
    # The address of a kl_tensor_map a klaunch.TensorMap holds.
    "tensor_map": ("uint64_t", "({ctype})(uintptr_t){name}"),
}


def py_string(text):
    """A Python string literal (ASCII, double quotes)."""
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= o < 127:
            out.append(ch)
        elif o < 0x10000:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    out.append('"')
    return "".join(out)


def py_text(text):
    """Text for inside a Python string literal or docstring, one line."""
    return py_string(" ".join(text.split()))[1:-1]


def py_doc(text, indent="    "):
    """Doc text as the lines of a docstring (wrapped, escaped: no quote,
    backslash or character that does not print survives raw)."""
    lines = []
    for l in wrap_lines(text, width=80 - len(indent)):
        l = py_string(l)[1:-1]
        lines.append((indent + l).rstrip())
    return "\n".join(lines)


class PyParamView:
    def __init__(self, launcher, param):
        self.p = param
        self.name = param.name
        self.kind = "ptr" if param.type.is_pointer else param.type.name
        tmap = param.type.tmap if param.type.is_tensor_map else None
        # A tensor map's element is the dtype of the tensor it maps.
        self.elem = tmap.dtype if tmap else param.type.elem
        self.const = param.type.const or bool(tmap)
        self.rank = tmap.rank if tmap else None
        self.layout = param.layout
        self.line, self.col = param.pos
        c_type, arg = PY_C_PARAM[self.kind]
        self.c_decl = "%s %s" % (c_type, self.name)
        self.c_arg = arg.format(name=self.name, ctype=param.type.c.strip())
        self.spec_type = param.type.spec
        self.doc = param.doc
        self.nullable = param.nullable
        # The declared extent: (text, the names it reads, a function of the
        # arguments a and the variant's constants c, or None where data
        # bounds it), for the runtime's check of each tensor's span.
        self.extent = None
        x = param.extent
        self.extent_text = None if x is None else ("extent " + x.text) if x.kind != "unknown" else "extent unknown: " + x.unknown
        tx = tmap.extents if tmap else None
        if tx:
            index = {q.name: i for i, q in enumerate(launcher.params)}
            r = LauncherResolver(launcher)

            def tref(b):
                return "a[%d]" % index[b.name] if b.kind == "param" else "c[%s]" % py_string(b.name)

            entries = []
            for entry in tx:
                if entry is None:
                    entries.append("None")
                    continue
                e, exact = entry
                entries.append("(%s, %s, (%s), lambda a, c: %s)" % (
                    py_string(e.text), "True" if exact else "False", "".join(py_string(n) + ", " for n in e.names),
                    ex.to_python(e.tree, r, tref)))
            self.extent = "(%s)" % "".join(s + ", " for s in entries)
        if x is not None:
            index = {q.name: i for i, q in enumerate(launcher.params)}
            r = LauncherResolver(launcher)

            def ref(b):
                return "a[%d]" % index[b.name] if b.kind == "param" else "c[%s]" % py_string(b.name)

            if x.kind == "unknown":
                fn = "None"
            elif x.kind == "expr":
                fn = "lambda a, c: %s" % ex.to_python(x.expr.tree, r, ref)
            else:
                full = param.extent_check.expr.tree
                fn = "lambda a, c: 0 if %s == 0 else %s" % (ex.to_python(x.rows.tree, r, ref), ex.to_python(full, r, ref))
            self.extent = "(%s, (%s), %s)" % (py_string(x.text if x.kind != "unknown" else x.unknown),
                                              "".join(py_string(n) + ", " for n in x.names), fn)

    def table_entry(self):
        """The runtime's Param(name, kind, element, const, layout, line, col[, rank[, nullable, extent]])."""
        tail = ""
        if self.nullable or self.extent:
            tail = ", %s, %s, %s" % (self.rank or "None", "True" if self.nullable else "False", self.extent or "None")
        elif self.rank:
            tail = ", %d" % self.rank
        return "(%s, %s, %s, %s, %s, %d, %d%s)" % (
            py_string(self.name), py_string(self.kind), py_string(self.elem) if self.elem else "None",
            "True" if self.const else "False", py_string(self.layout) if self.layout else "None", self.line, self.col,
            tail)


class PyTensorMapView:
    """A tensor-map parameter's Python builder and its library entry point,
    kl__X_P_py_encode (calling kl_X_P_encode)."""

    def __init__(self, launcher, index, param, view):
        self.index = index
        self.name = param.name
        self.function = "%s_%s_encode" % (launcher.name, param.name)
        self.export = "kl__%s_%s_py_encode" % (launcher.name, param.name)
        self.builder = view.builder
        self.rank = view.rank
        self.dtype = view.dtype_spec
        self.describe = view.describe
        self.address_c = view.address_c
        self.params = ["uint64_t extent%d" % i for i in range(self.rank)] + [
            "uint64_t stride%d" % i for i in range(1, self.rank)]
        self.args = ["extent%d" % i for i in range(self.rank)] + ["stride%d" % i for i in range(1, self.rank)]
        self.doc = (
            "Tensor map %s of %s (%s) for `tensor`, a klaunch.TensorMap to pass as %s: %s on the module's backend, "
            "for its variant. extents (innermost first, %d of them) and strides (of dimensions 1 to %d, in elements) "
            "default to the tensor's shape and strides read innermost first (its innermost stride must be 1); "
            "module and variant as for %s (None: the tensor's device, a loaded variant). The map keeps the tensor "
            "alive." % (self.name, launcher.name, self.describe, self.name, self.builder, self.rank, self.rank - 1,
                        launcher.name))


class PyLauncherView:
    def __init__(self, spec, view):
        l = view.l
        self.name = view.name
        self.line, self.col = view.line, view.col
        self.doc = view.doc
        self.params = [PyParamView(l, p) for p in l.params]
        index = {p.name: i for i, p in enumerate(l.params)}
        r = LauncherResolver(l)

        def ref(b):
            return "a[%d]" % index[b.name] if b.kind == "param" else "c[%s]" % py_string(b.name)

        # The preconditions that read a variant constant decide which
        # variants fit a launch (the runtime picks among those); the C
        # launcher makes every check again.
        self.fits = [(c.text, ex.to_python(c.expr.tree, r, ref)) for c in l.preconditions
                     if any(n in r.const_index for n in c.args) and c.buffer is None]
        by_name = {t.name: t for t in view.tensor_maps}
        self.maps = [PyTensorMapView(l, i, p, by_name[p.name]) for i, p in enumerate(l.params) if p.type.is_tensor_map]


def python_views(spec):
    views = getattr(spec, "_py_views", None)
    if views is None:
        views = spec._py_views = [PyLauncherView(spec, v) for v in _views(spec)]
    return views


def _fixed_values(spec, launcher):
    """[(macro, [(variant, value)])]: what the spec fixes for one launcher's
    kernel, named after its entry, for the .cuh to export (block components,
    the thread count, shared_bytes, max_dynamic_shared), each only where its
    expression reads no parameter; one (None, value) when every variant
    gives the same value."""
    params = {p.name for p in launcher.params}
    variants = spec.variants or []

    def values(expr, literal=None):
        if literal is not None:
            return [(None, literal)]
        if expr is None or any(n in params for n in expr.names):
            return None
        out = []
        for v in variants:
            try:
                out.append((v.name, ex.evaluate(expr.tree, dict(v.constants))))
            except (ex.EvalError, KeyError):
                return None
        if not out:
            return None
        return [(None, out[0][1])] if len({x for _, x in out}) == 1 else out

    out = []
    block = {}
    for a in "xyz":
        c = launcher.block.get(a)
        block[a] = [(None, 1)] if c is None else values(c.expr, c.value)
    for a in "xyz":
        if launcher.block.get(a) is not None and block[a] is not None:
            out.append(("KL_BLOCK_%s_%s" % (a.upper(), launcher.entry), block[a]))
    if all(block[a] is not None for a in "xyz"):
        names = [v.name for v in variants] or [None]
        per = {}
        for n in names:
            total = 1
            for a in "xyz":
                vals = dict(block[a])
                total *= vals[None] if None in vals else vals[n]
            per[n] = total
        threads = [(None, per[names[0]])] if len(set(per.values())) == 1 else sorted(per.items(), key=lambda kv: names.index(kv[0]))
        out.append(("KL_THREADS_%s" % launcher.entry, threads))
    if launcher.shared is not None:
        v = values(launcher.shared.expr, launcher.shared.value)
        if v is not None:
            out.append(("KL_SHARED_BYTES_%s" % launcher.entry, v))
    if launcher.max_dynamic_shared_expr is not None:
        e = launcher.max_dynamic_shared_expr
        v = values(e, None if e.names else ex.evaluate(e.tree, {}))
        if v is not None:
            out.append(("KL_MAX_DYNAMIC_SHARED_%s" % launcher.entry, v))
    for p in launcher.kernel_params:
        if not p.type.is_tensor_map:
            continue
        t = p.type.tmap
        boxes = [values(e, None if e.names else ex.evaluate(e.tree, {})) for e in t.box]
        for i, v in enumerate(boxes):
            out.append(("KL_TMAP_%s_%s_BOX%d" % (launcher.entry, p.name, i), v))
        # Bytes one copy lands in shared memory: what its mbarrier expects.
        names = [v.name for v in variants] or [None]
        per = []
        for n in names:
            total = t.esize
            for v, stride in zip(boxes, t.strides):
                vals = dict(v)
                extent = vals[None] if None in vals else vals[n]
                total *= -(-extent // stride)
            per.append((n, total))
        out.append(("KL_TMAP_%s_%s_BYTES" % (launcher.entry, p.name),
                    [(None, per[0][1])] if len({x for _, x in per}) == 1 else per))
    return out


def _environment():
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        c_string=c_string,
        c_comment=c_comment,
        comment_text=comment_text,
        c_string_body=c_string_body,
        md_comment=md_comment,
        wrap_list=wrap_list,
        wrap_lines=wrap_lines,
        c_decl=c_decl,
        prefix=lambda text, pre: pre + text,
        cuda_decl=cuda_decl,
        c_int=c_int,
        c_not=ex.c_not,
        md_escape=md_escape,
        md_code=md_code,
        py_string=py_string,
        py_doc=py_doc,
        py_text=py_text,
    )
    env.globals.update(version=__version__, regenerate=REGENERATE_COMMAND, runtime_abi=RUNTIME_ABI)
    return env


_ENV = None


def env():
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def _views(spec):
    """The LauncherViews of a spec, made once for all three outputs."""
    views = getattr(spec, "_views", None)
    if views is None:
        views = spec._views = [LauncherView(spec, l) for l in spec.launchers]
    return views


def render_header(spec):
    from . import choose_emit

    launchers = _views(spec)
    operations = getattr(spec, "operations", None) or []
    return env().get_template("header.h.j2").render(
        spec=spec, launchers=launchers, guard="KLAUNCH_%s_H" % spec.family.upper(), file="klaunch/%s.h" % spec.family,
        has_tensor_maps=any(l.tensor_maps for l in launchers),
        operations=choose_emit.operation_views(spec, launchers) if operations else [],
        operation_includes=choose_emit.includes(spec) if operations else [],
    )


def render_cuh(spec):
    launchers = _views(spec)
    kernels, seen = [], set()  # one view per kernel entry (launchers may share one)
    fixed, conflicting = {}, set()  # macro -> values; one that launchers of an entry disagree on is left out
    for l in launchers:
        if l.entry not in seen:
            seen.add(l.entry)
            kernels.append(l)
        for name, values in l.fixed:
            if fixed.setdefault(name, values) != values:
                conflicting.add(name)
    fixed = [(n, v) for n, v in fixed.items() if n not in conflicting]
    return env().get_template("kernel.cuh.j2").render(
        spec=spec, launchers=launchers, kernels=kernels, fixed=fixed, guard="KLAUNCH_%s_CUH" % spec.family.upper(),
        file="klaunch/%s.cuh" % spec.family, has_tensor_maps=any(l.tensor_maps for l in launchers),
    )


def render_docs(specs):
    families = [(s, _views(s)) for s in specs]
    return env().get_template("launchers.md.j2").render(specs=specs, families=families)


def render_python(spec):
    return env().get_template("python.py.j2").render(
        spec=spec, launchers=python_views(spec), module="klaunch_%s" % spec.family,
        library="libklaunch_%s.so" % spec.family)


def render_python_library(spec):
    return env().get_template("python_library.c.j2").render(
        spec=spec, launchers=python_views(spec), file="klaunch_%s.c" % spec.family,
        module="klaunch_%s" % spec.family, library="libklaunch_%s.so" % spec.family)


def python_outputs(spec, python_dir):
    """The paths of the Python module and its library's source."""
    base = os.path.join(python_dir, "klaunch_%s" % spec.family)
    return base + ".py", base + ".c"


def outputs(specs, include_dir, docs_path, python_dir=None):
    """{path: text} of every file the specs produce."""
    out = {}
    for s in specs:
        base = os.path.join(include_dir, "klaunch", s.family)
        out[base + ".h"] = render_header(s)
        out[base + ".cuh"] = render_cuh(s)
        if python_dir is not None:
            py, c = python_outputs(s, python_dir)
            out[py] = render_python(s)
            out[c] = render_python_library(s)
    if docs_path:
        out[docs_path] = render_docs(specs)
    return out
