"""Spec validation (docs/DESIGN.md, "Spec format").

load_spec() walks the composed YAML nodes, reports every problem it finds
to a Diagnostics collector (position, message, hint) and returns a Spec
only when the file had none. cross_check() then looks across files. What
is allowed (keys, types, limits, reserved names) is data in schema.py; the
objects built are in model.py; the launch geometry checks (grid, block,
shared memory, attributes, per-variant evaluation) in launch_checks.py.
It stays one file past 600 lines because it is one walk over a spec's
nodes, each step reporting into the same collector.
"""

import difflib
import hashlib
import os
import re
import stat

from . import expr as ex
from .names import header_name_problem
from .launch_checks import LaunchChecks
from .operations import validate_operations
from .model import Check, Expr, Extent, Launcher, Param, Spec, TensorMap, Type, Variant
from .schema import (
    TENSOR_MAP,
    TENSOR_MAP_BOX_MAX,
    TENSOR_MAP_DTYPES,
    TENSOR_MAP_ELEMENT_STRIDE_MAX,
    TENSOR_MAP_EXTENT_EXACT,
    TENSOR_MAP_FLOAT_DTYPES,
    TENSOR_MAP_KEYS,
    TENSOR_MAP_MAX_RANK,
    TENSOR_MAP_OPTIONS,
    ARCH_PATTERN,
    BLOCK_LIMITS,
    C_KEYWORDS,
    CXX_KEYWORDS,
    DIM_KEYS,
    EXTENT_KEYS,
    EXTENT_ROWS_KEYS,
    EXTENT_UNKNOWN_KEY,
    GRID_LIMITS,
    INT64_MAX,
    INT64_MIN,
    PREPROCESSOR_WORDS,
    PROGRAM_ENTRY,
    LAUNCHER_KEYS,
    LAYOUTS,
    MAX_SPEC_BYTES,
    PARAM_KEYS,
    POINTER_ELEMENTS,
    PRE_KEYS,
    PRE_REQUIRED,
    PY_KEYWORDS,
    PY_LAUNCH_KEYWORDS,
    PY_MODULE_NAMES,
    REQUIRED_HINTS,
    RESERVED,
    SCALAR_TYPES,
    TOP_KEYS,
    TYPE_EXPECTED,
    VARIANT_KEYS,
)
from .yamlpos import (
    BOOL,
    INT,
    MERGE,
    NULL,
    STR,
    Source,
    YamlSyntaxError,
    is_mapping,
    is_scalar,
    is_sequence,
    kind_of,
    node_pos,
    scalar_bool,
)

# ---- types and names ------------------------------------------------------------

_PTR_RE = re.compile(r"^\s*(const\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\*\s*$")


def parse_type(text):
    """(Type, None) or (None, (message, hint))."""
    m = _PTR_RE.match(text)
    if m:
        elem = m.group(2)
        if elem not in POINTER_ELEMENTS:
            guess = ex.did_you_mean(elem, POINTER_ELEMENTS)
            return None, (
                "unknown pointer element type '%s' (expected %s)" % (elem, ", ".join(POINTER_ELEMENTS)),
                ("did you mean '%s'?" % guess) if guess else "a device pointer is T* or const T* with one of those T",
            )
        return Type("ptr", elem, bool(m.group(1))), None
    word = text.strip()
    if word in SCALAR_TYPES or word == TENSOR_MAP:
        return Type(word), None
    if re.match(r"^const\s+\w+$", word):
        return None, ("'%s': const applies only to pointers" % word, "write %s for a scalar, or const %s* for a pointer" % (word[5:].strip(), word[5:].strip()))
    guess = ex.did_you_mean(word, SCALAR_TYPES + (TENSOR_MAP,) + tuple(e + "*" for e in POINTER_ELEMENTS))
    return None, (
        "unknown type '%s' (%s)" % (word, TYPE_EXPECTED),
        ("did you mean '%s'?" % guess) if guess else "device pointer element types are %s" % ", ".join(POINTER_ELEMENTS),
    )



# \Z, not $: `$` also matches before a final newline, which a YAML | block keeps.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# What each `what` of name_problem() is, for the checks that depend on
# where the name goes (names.py).
_ROLE = {
    "family": "family",
    "launcher name": "launcher",
    "entry": "entry",
    "parameter name": "param",
    "variant name": "variant",
    "constant name": "constant",
}


def name_problem(name, what):
    """(message, hint) when `name` cannot be a C identifier here, else None."""
    if not _IDENT.match(name):
        if _IDENT.match(name.strip()):
            return ("%s '%s' is not a C identifier: it has blanks or a line break around it" % (what, name),
                    "a YAML | or > block keeps its final newline; write the name on its key's line (or use |-)")
        return ("%s '%s' is not a C identifier" % (what, name), "use letters, digits and _, not starting with a digit")
    if name in C_KEYWORDS:
        return ("%s '%s' is a C keyword" % (what, name), "rename it, e.g. '%s_'" % name)
    if name in CXX_KEYWORDS:
        return ("%s '%s' is a C++ keyword" % (what, name), "rename it, e.g. '%s_'" % name)
    if name.lower().startswith("kl_") or name.startswith("__"):
        return ("%s '%s' uses a reserved prefix" % (what, name), "kl_, KL_ and __ belong to klaunch and the compiler")
    if name in RESERVED:
        return ("%s '%s' is reserved" % (what, name), "the generated code uses this name itself; rename it")
    if name.startswith("_"):
        return ("%s '%s' starts with _, which C reserves%s" % (what, name, " (with a capital: for keywords like _Float32 and _Pragma)" if name[1:2].isupper() else ""),
                "start it with a letter")
    role = _ROLE.get(what, "param")
    if "__" in name and role in ("param", "constant", "entry"):
        return ("%s '%s' contains __, which C++ reserves" % (what, name), "use single underscores")
    if name.lower().startswith("klaunch"):
        return ("%s '%s' uses a reserved prefix" % (what, name), "klaunch and KLAUNCH belong to klaunch's headers and guards")
    if name in PREPROCESSOR_WORDS:
        return ("%s '%s' is the preprocessor's operator" % (what, name), "rename it")
    if name in PROGRAM_ENTRY and role in ("constant", "entry"):
        return ("%s '%s' is the program's entry point" % (what, name),
                "a kernel named main cannot be __global__, and a macro main breaks the program's main(); rename it")
    if role in ("param", "constant", "entry"):
        problem = header_name_problem(name, role)
        if problem:
            return ("%s %s" % (what, problem[0]), problem[1])
    return None


def python_name_problem(name, what, role):
    """Launcher and parameter names are also the names of the generated
    Python module's functions and of their arguments."""
    if name in PY_KEYWORDS:
        return ("%s '%s' is a Python keyword" % (what, name),
                "the Python launchers (klaunch_<family>.py) use it as a name too; rename it, e.g. '%s_'" % name)
    if role == "param" and name in PY_LAUNCH_KEYWORDS:
        return ("%s '%s' is reserved" % (what, name),
                "every Python launcher takes %s as keyword arguments of its own; rename it" % ", ".join(PY_LAUNCH_KEYWORDS))
    if role == "launcher" and name in PY_MODULE_NAMES:
        return ("%s '%s' is reserved" % (what, name),
                "the Python module klaunch_<family> defines %s itself; rename it" % ", ".join(sorted(PY_MODULE_NAMES)))
    return None


# ---- validation -----------------------------------------------------------------


class _Validator(LaunchChecks):
    def __init__(self, source, diags):
        self.src = source
        self.diags = diags
        self.n_errors_at_start = len(diags)
        # text -> syntax tree or ExprError: a large spec repeats its
        # expressions (trees are never changed after parsing).
        self._parsed = {}

    def err(self, pos, message, hint):
        self.diags.error(self.src.path, pos, message, hint)

    @property
    def failed(self):
        return len(self.diags) > self.n_errors_at_start

    # -- generic node helpers --

    def fields(self, node, where, allowed, required):
        """{key: (key_node, value_node)} of a mapping, reporting bad keys."""
        out = {}
        merged = False
        guessed = set()  # keys a misspelt key was taken for
        for knode, vnode in node.value:
            if knode.tag == MERGE:
                merged = True
                self.err(node_pos(knode), "YAML merge keys (<<) are not supported %s" % where, "write the keys out, or alias a whole value with *name")
                continue
            if not is_scalar(knode):
                self.err(node_pos(knode), "a key %s is %s" % (where, kind_of(knode)), "keys are plain names")
                continue
            key = knode.value
            if key in out:
                line, col = node_pos(out[key][0])
                self.err(node_pos(knode), "duplicate key '%s' %s" % (key, where), "the first is at line %d, column %d" % (line, col))
                continue
            if key not in allowed:
                guess = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                guessed.update(guess)
                self.err(
                    node_pos(knode),
                    "unknown key '%s' %s" % (key, where),
                    ("did you mean '%s'?" % guess[0]) if guess else "expected one of %s" % ", ".join(allowed),
                )
                continue
            out[key] = (knode, vnode)
        for key in required:
            # Not again for a key already reported misspelt or merged in.
            if key not in out and key not in guessed and not merged:
                self.err(node_pos(node), "missing key '%s' %s" % (key, where), REQUIRED_HINTS.get(key, "add it"))
        return out

    def want_mapping(self, node, what):
        if is_mapping(node):
            return True
        self.err(node_pos(node), "%s must be a mapping, got %s" % (what, kind_of(node)), "write key: value lines")
        return False

    def want_list(self, node, what, nonempty_hint=None):
        if not is_sequence(node):
            self.err(node_pos(node), "%s must be a list, got %s" % (what, kind_of(node)), "write one '- ' item per line")
            return False
        if nonempty_hint and not node.value:
            self.err(node_pos(node), "%s is empty" % what, nonempty_hint)
            return False
        return True

    def text(self, node, what):
        """A scalar's text, or None after reporting."""
        if not is_scalar(node):
            self.err(node_pos(node), "%s must be text, got %s" % (what, kind_of(node)), "write it on one line or as a folded block (>-)")
            return None
        if node.tag == NULL:
            self.err(node_pos(node), "%s is empty" % what, "give it a value")
            return None
        return node.value

    def integer(self, node, what):
        """An integer scalar's value, read as expressions read integers
        (YAML 1.1 would take 064 as octal 52 and 1:30 as 90), or None after
        reporting."""
        try:
            return ex.int_literal(node.value)
        except ex.ExprError as e:
            self.err(node_pos(node), "%s: %s" % (what, e.message), e.hint + ", as in expressions")
            return None

    def ident(self, node, what, refused=None):
        """The name, or None after reporting (and, for a name that is a C
        identifier refused where it stands, adding it to `refused`)."""
        name = self.text(node, what)
        if name is None:
            return None
        problem = name_problem(name, what)
        if problem:
            self.err(node_pos(node), *problem)
            if refused is not None and _IDENT.match(name):
                refused.add(name)
            return None
        role = _ROLE.get(what)
        problem = python_name_problem(name, what, role) if role in ("param", "launcher") else None
        if problem:
            # Reported, and kept: the C side can take the name, so nothing
            # that reads it should report it again as unknown.
            self.err(node_pos(node), *problem)
        return name

    def doc(self, fields):
        if "doc" in fields:
            value = self.text(fields["doc"][1], "doc")
            return value or ""
        return ""

    # -- the spec --

    def spec(self, root, spec):
        if root is None:
            self.err((1, 1), "the spec is empty", "a spec is a mapping with family, doc, variants and launchers")
            return
        if not self.want_mapping(root, "the spec"):
            return
        f = self.fields(root, "in the spec", TOP_KEYS, ("family", "variants", "launchers"))
        if "family" in f:
            knode, vnode = f["family"]
            spec.family_pos = node_pos(vnode)
            family = self.ident(vnode, "family")
            if family is not None:
                stem = os.path.splitext(os.path.basename(self.src.path))[0]
                if family != stem:
                    self.err(
                        node_pos(vnode),
                        "family '%s' does not match the file name '%s'" % (family, os.path.basename(self.src.path)),
                        "name the file %s.yaml or set family: %s" % (family, stem),
                    )
                spec.family = family
        spec.doc = self.doc(f)
        if "variants" in f:
            self.variants(f["variants"][1], spec)
        if "launchers" in f:
            self.launchers(f["launchers"][1], spec)
        if "operations" in f:
            # Launchers named in the list, valid or not: one refused is not reported again.
            lnode = f["launchers"][1] if "launchers" in f else None
            named = set()
            for item in (lnode.value if lnode is not None and is_sequence(lnode) else []):
                for knode, vnode in (item.value if is_mapping(item) else []):
                    if is_scalar(knode) and knode.value == "name" and is_scalar(vnode):
                        named.add(vnode.value)
            validate_operations(self, f["operations"][1], spec, named)

    def variants(self, node, spec):
        if not self.want_mapping(node, "variants"):
            return
        if not node.value:
            self.err(node_pos(node), "variants is empty", "define at least one variant (one fatbin is built per variant)")
            return
        # Where each constant name is defined, over every variant: a name
        # that cannot be a constant is reported once, with the others.
        self.const_sites = {}
        for _, vnode in node.value:
            cnode = dict((k.value, v) for k, v in vnode.value if is_scalar(k)).get("constants") if is_mapping(vnode) else None
            if cnode is not None and is_mapping(cnode):
                for k, _ in cnode.value:
                    if is_scalar(k):
                        self.const_sites.setdefault(k.value, []).append(node_pos(k))
        seen = {}
        for knode, vnode in node.value:
            if not is_scalar(knode):
                self.err(node_pos(knode), "a variant name is %s" % kind_of(knode), "variant names are plain names")
                continue
            name = knode.value
            if name in seen:
                line, col = node_pos(seen[name])
                self.err(node_pos(knode), "duplicate variant '%s'" % name, "the first is at line %d, column %d" % (line, col))
                continue
            seen[name] = knode
            problem = name_problem(name, "variant name")
            if problem:
                self.err(node_pos(knode), *problem)
                continue
            where = "in variant '%s'" % name
            if vnode.tag == NULL:
                fields = {}
            elif not self.want_mapping(vnode, "variant '%s'" % name):
                continue
            else:
                fields = self.fields(vnode, where, VARIANT_KEYS, ())
            constants, const_pos, refused = [], {}, {}
            if "constants" in fields:
                constants = self.constants(fields["constants"][1], name, const_pos, refused)
            variant = Variant(name, self.doc(fields), constants, node_pos(knode))
            variant.const_pos = const_pos
            spec.variants.append(variant)
            spec.refused_consts.update(refused)
            # A constant refused for its value is still defined here; one
            # refused for its name leaves the variant's set unknown.
            variant.defined = None if "name" in refused.values() else [n for n, _ in constants] + [
                n for n, why in refused.items() if why == "value"]
        # One wrong constant is one error: variants compared only with what
        # is known of them.
        known = [v for v in spec.variants if v.defined is not None]
        if not known:
            return
        first = known[0]
        first_names = first.defined
        for v in known[1:]:
            names = v.defined
            missing = [n for n in first_names if n not in names]
            extra = [n for n in names if n not in first_names]
            for n in missing:
                self.err(
                    v.pos,
                    "variant '%s' does not define constant %s, which variant '%s' defines" % (v.name, n, first.name),
                    "every variant defines the same constants",
                )
            for n in extra:
                self.err(
                    v.pos,
                    "variant '%s' defines constant %s, which variant '%s' does not" % (v.name, n, first.name),
                    "every variant defines the same constants",
                )

    def constants(self, node, variant, positions, refused):
        """[(name, value)] of a variant's constants; refused[name] is "name"
        or "value" for each one reported."""
        out = []
        if node.tag == NULL:
            return out
        if not self.want_mapping(node, "constants of variant '%s'" % variant):
            return out
        seen = {}
        for knode, vnode in node.value:
            if not is_scalar(knode):
                self.err(node_pos(knode), "a constant name is %s" % kind_of(knode), "constant names are plain names")
                continue
            name = knode.value
            if name in seen:
                line, col = node_pos(seen[name])
                self.err(node_pos(knode), "duplicate constant '%s' in variant '%s'" % (name, variant), "the first is at line %d, column %d" % (line, col))
                continue
            seen[name] = knode
            problem = name_problem(name, "constant name")
            if problem:
                refused[name] = "name"
                sites = getattr(self, "const_sites", {}).get(name, [node_pos(knode)])
                if sites[0] == node_pos(knode):
                    lines = ["%d" % line for line, _ in sites[1:]]
                    also = " (it is defined at line%s %s too)" % ("s" if len(lines) > 1 else "", " and ".join(
                        [", ".join(lines[:-1]), lines[-1]] if len(lines) > 1 else lines)) if lines else ""
                    self.err(node_pos(knode), problem[0], problem[1] + also)
                continue
            refused[name] = "value"  # until its value is read
            if not is_scalar(vnode) or vnode.tag != INT:
                shown = vnode.value if is_scalar(vnode) else kind_of(vnode)
                self.err(
                    node_pos(vnode),
                    "constant %s = %s is not an integer" % (name, shown if is_scalar(vnode) and vnode.value else kind_of(vnode)),
                    "variant constants are integers (they are compared with launch values and #defined for the kernel)",
                )
                continue
            value = self.integer(vnode, "constant %s = %s" % (name, vnode.value))
            if value is None:
                continue
            if not INT64_MIN <= value <= INT64_MAX:
                self.err(node_pos(vnode), "constant %s = %s does not fit in 64 bits" % (name, vnode.value), "constants are signed 64-bit integers")
                continue
            del refused[name]
            out.append((name, value))
            positions[name] = node_pos(knode)
        return out

    def launchers(self, node, spec):
        if not self.want_list(node, "launchers", "define at least one launcher"):
            return
        for item in node.value:
            if not self.want_mapping(item, "a launcher"):
                continue
            launcher = self.launcher(item, spec)
            if launcher is not None:
                spec.launchers.append(launcher)
        names, entries = {}, {}
        for l in spec.launchers:
            if l.name in names:
                line, _ = names[l.name].pos
                self.err(l.pos, "duplicate launcher name '%s'" % l.name, "the first is at line %d" % line)
                continue  # its entry is a duplicate too, most likely for the same reason
            names[l.name] = l
            if l.entry in entries:
                other = entries[l.entry]
                self.err(
                    l.entry_pos,
                    "duplicate entry '%s' (launchers '%s' and '%s')" % (l.entry, other.name, l.name),
                    "each launcher runs its own kernel symbol; the first is at line %d" % other.pos[0],
                )
            else:
                entries[l.entry] = l
        const_names = {n for v in spec.variants for n, _ in v.constants}
        for l in spec.launchers:
            if l.entry in const_names:
                self.err(l.entry_pos, "entry '%s' of launcher '%s' has the name of a variant constant" % (l.entry, l.name),
                         "the constant is #defined in kernel sources, so the kernel's name would become a number; rename one of them")

    def launcher(self, node, spec):
        label = "a launcher"
        name = None
        for knode, vnode in node.value:
            if is_scalar(knode) and knode.value == "name" and is_scalar(vnode):
                label = "launcher '%s'" % vnode.value
                break
        where = "in " + label
        f = self.fields(node, where, LAUNCHER_KEYS, ("name", "params", "grid", "block"))
        if "name" in f:
            name = self.ident(f["name"][1], "launcher name")
        launcher = Launcher(name or "?", node_pos(node))
        self.refused_params = set()  # names reported, still known to this launcher's expressions
        if "entry" in f:
            launcher.entry = self.ident(f["entry"][1], "entry") or launcher.entry
            launcher.entry_pos = node_pos(f["entry"][1])
        elif name is not None:
            # The kernel takes the launcher's name: it must be one a kernel may have.
            problem = name_problem(name, "entry")
            if problem:
                said = problem[0][len("entry '%s' " % name):]
                self.err(node_pos(f["name"][1]), "launcher '%s' gives no entry, so its kernel is named %s, which %s" % (name, name, said),
                         "%s; or give it an entry: %s_kernel" % (problem[1], name))
        launcher.doc = self.doc(f)
        if "params" in f and not self.params(f["params"][1], launcher, label, spec):
            return None  # its expressions would only report unknown names
        consts = {}
        for v in spec.variants:
            for n, _ in v.constants:
                consts.setdefault(n, True)
        # A constant already reported is still a constant to its readers:
        # no 'unknown name' for each expression that reads it.
        for n in spec.refused_consts:
            if _IDENT.match(n):
                consts.setdefault(n, True)
        resolver = _Resolver(launcher.params, list(consts), self.refused_params)
        if "preconditions" in f and self.want_list(f["preconditions"][1], "preconditions of %s" % label):
            for number, item in enumerate(f["preconditions"][1].value, 1):
                self.precondition(item, number, launcher, label, resolver)
        for key, limits in (("grid", GRID_LIMITS), ("block", BLOCK_LIMITS)):
            if key not in f:
                continue
            knode, vnode = f[key]
            if key == "block":
                launcher.block_pos = node_pos(knode)
            if not self.want_mapping(vnode, "%s of %s" % (key, label)):
                continue
            dims = self.fields(vnode, "in %s of %s" % (key, label), DIM_KEYS, ("x",))
            for axis in DIM_KEYS:
                if axis in dims:
                    c = self.sized(dims[axis][1], "%s.%s" % (key, axis), label, resolver, vnode.flow_style)
                    if c is not None:
                        getattr(launcher, key)[axis] = c
        if "shared_bytes" in f:
            launcher.shared = self.sized(f["shared_bytes"][1], "shared_bytes", label, resolver)
        if "max_dynamic_shared" in f:
            self.max_dynamic_shared(f["max_dynamic_shared"][1], launcher, label, resolver, spec)
        if "launch_attributes" in f:
            self.launch_attributes(f["launch_attributes"][1], launcher, label)
        if "arch" in f:
            self.arch(f["arch"][1], launcher, label)
        for p in launcher.params:
            if p.extent_node is not None:
                p.extent = self.extent(p, label, resolver)
        self.tensor_map_boxes(launcher, label, spec)
        self.tensor_map_extents(launcher, label, resolver, spec)
        self.limits(launcher, label)
        self.shared_fits(launcher, label, spec)
        if not self.failed:
            self.ranges(launcher, label, spec)
        # Launch-only parameters exist only for expressions.
        used = set()
        for c in launcher.preconditions + list(launcher.grid.values()) + list(launcher.block.values()) + ([launcher.shared] if launcher.shared else []):
            used.update(c.args)
        for p in launcher.extents:
            used.update(p.extent.names)
        for p in launcher.params:
            if p.type is not None and p.type.is_tensor_map and p.type.tmap.extents:
                for entry in p.type.tmap.extents:
                    if entry is not None:
                        used.update(entry[0].names)
        for p in launcher.params:
            if p.launch_only and p.type is not None and not p.type.is_pointer and not p.type.is_tensor_map and p.name not in used:
                self.err(
                    p.pos,
                    "launch-only parameter '%s' of %s is not used" % (p.name, label),
                    "no grid, block, shared_bytes, precondition or extent reads it; use it, or pass it to the kernel (drop launch_only)",
                )
        if name is None or self.failed:
            return launcher if name is not None else None
        self.finish(launcher)
        return launcher

    def params(self, node, launcher, label, spec):
        if not self.want_list(node, "params of %s" % label, "list the kernel's parameters in kernel order"):
            return is_sequence(node)  # an empty list leaves nothing to misread
        seen = {}
        const_names = {n for v in spec.variants for n, _ in v.constants}
        for item in node.value:
            if not self.want_mapping(item, "a parameter"):
                continue
            p = self.param(item, label)
            if p is None:
                continue
            if p.name in seen:
                line, col = seen[p.name].pos
                self.err(p.pos, "duplicate parameter '%s' in %s" % (p.name, label), "the first is at line %d, column %d" % (line, col))
                continue
            if p.name in const_names:
                self.err(p.pos, "parameter '%s' of %s has the name of a variant constant" % (p.name, label), "the constant is #defined in kernel sources; rename one of them")
            seen[p.name] = p
            launcher.params.append(p)
        return True

    def param(self, node, label):
        keys = [k.value for k, _ in node.value if is_scalar(k)]
        if len(node.value) == 1 and keys and keys[0] not in PARAM_KEYS:
            knode, vnode = node.value[0]
            name = self.ident(knode, "parameter name", self.refused_params)
            type_text = self.text(vnode, "the type of parameter '%s'" % knode.value) if is_scalar(vnode) else None
            if not is_scalar(vnode):
                self.err(node_pos(vnode), "the type of parameter '%s' must be text, got %s" % (knode.value, kind_of(vnode)), "write name: type, e.g. n: u32")
            type_node, launch_only, doc, pos = vnode, False, "", node_pos(knode)
            tmap_node = None
            layout_node = None
            extent_node = nullable_node = None
        else:
            where = "in a parameter of %s" % label
            f = self.fields(node, where, PARAM_KEYS, ("name", "type"))
            name = self.ident(f["name"][1], "parameter name", self.refused_params) if "name" in f else None
            type_node = f["type"][1] if "type" in f else None
            type_text = self.text(type_node, "type") if type_node is not None else None
            launch_only = False
            if "launch_only" in f:
                lnode = f["launch_only"][1]
                if not is_scalar(lnode) or lnode.tag != BOOL:
                    self.err(node_pos(lnode), "launch_only must be true or false, got %s" % kind_of(lnode), "write launch_only: true")
                else:
                    launch_only = scalar_bool(lnode)
            doc = self.doc(f)
            pos = node_pos(f["name"][1]) if "name" in f else node_pos(node)
            tmap_node = f["tensor_map"] if "tensor_map" in f else None
            layout_node = f["layout"][1] if "layout" in f else None
            extent_node = f["extent"] if "extent" in f else None
            nullable_node = f["nullable"] if "nullable" in f else None
        ptype = None
        if type_text is not None:
            ptype, problem = parse_type(type_text)
            if problem:
                self.err(node_pos(type_node), *problem)
        if ptype is not None and ptype.is_tensor_map:
            if tmap_node is None:
                self.err(node_pos(type_node), "tensor_map parameter '%s' does not say what it maps" % (name or "?"),
                         "write the long form: {name: %s, type: tensor_map, tensor_map: {dtype: bf16, rank: 2, box: [64, 32]}}" % (name or "src"))
                ptype = None
            else:
                ptype.tmap = self.tensor_map(tmap_node[1], name or "?")
                if ptype.tmap is None:
                    ptype = None
        elif tmap_node is not None and ptype is not None:
            self.err(node_pos(tmap_node[0]), "parameter '%s' has tensor_map: but its type is %s" % (name or "?", ptype.spec),
                     "set type: tensor_map, or remove the tensor_map: mapping")
        if name is None:
            return None
        if launch_only and ptype is not None and ptype.is_tensor_map:
            self.err(pos, "launch-only parameter '%s' is a tensor map" % name, "a tensor map goes to the kernel; drop launch_only")
        if launch_only and ptype is not None and ptype.is_pointer:
            self.err(pos, "launch-only parameter '%s' is a pointer (%s)" % (name, ptype.spec), "only integer parameters can size a launch; a device pointer goes to the kernel")
        layout = self.layout(layout_node, name, ptype) if layout_node is not None else None
        # Kept even when its type is bad, so expressions naming it do not
        # add an 'unknown name' to the report.
        param = Param(name, ptype, launch_only, doc, pos, layout)
        for key, knode in (("extent", extent_node), ("nullable", nullable_node)):
            if knode is not None and ptype is not None and not ptype.is_pointer:
                self.err(node_pos(knode[0]), "parameter '%s' is a %s; %s applies to pointer parameters" % (name, ptype.spec, key),
                         "a tensor map's extents go in its tensor_map: mapping (extent: [e0, e1, ...], innermost first)"
                         if key == "extent" and ptype.is_tensor_map else
                         "drop %s: %s" % (key, "a scalar has no buffer to bound" if key == "extent" else
                                          "only a device pointer can be NULL"))
                if key == "extent":
                    extent_node = None
                else:
                    nullable_node = None
        if nullable_node is not None:
            vnode = nullable_node[1]
            if not is_scalar(vnode) or vnode.tag != BOOL:
                self.err(node_pos(vnode), "nullable of parameter '%s' must be true or false, got %s" % (
                    name, ("'%s'" % vnode.value) if is_scalar(vnode) and vnode.value else kind_of(vnode)),
                    "write nullable: true for a pointer that may be NULL (None in Python)")
            else:
                param.nullable = scalar_bool(vnode)
        param.extent_node = extent_node[1] if extent_node is not None else None
        return param

    def extent(self, p, label, resolver):
        """p.extent from its `extent:` node (scalars and constants known), or
        None after reporting."""
        node = p.extent_node
        what = "extent of parameter '%s'" % p.name
        pos = node_pos(node)
        if is_mapping(node):
            f = self.fields(node, "in %s" % what, EXTENT_KEYS, ())
            if EXTENT_UNKNOWN_KEY in f:
                others = [k for k in EXTENT_ROWS_KEYS if k in f]
                if others:
                    self.err(node_pos(f[others[0]][0]), "%s gives both unknown and %s" % (what, others[0]),
                             "unknown: says data bounds it; drop it, or drop rows, stride and width")
                    return None
                text = self.text(f[EXTENT_UNKNOWN_KEY][1], "unknown of %s" % what)
                if text is None:
                    return None
                if not text.strip():
                    self.err(node_pos(f[EXTENT_UNKNOWN_KEY][1]), "unknown of %s is blank" % what,
                             "say what bounds it, e.g. block_tables' entries are below the cache's block count")
                    return None
                return Extent("unknown", pos, unknown=" ".join(text.split()))
            missing = [k for k in EXTENT_ROWS_KEYS if k not in f]
            if missing:
                if len(f) == len(node.value):  # not again for a key reported misspelt
                    self.err(pos, "%s lacks %s" % (what, " and ".join(missing)),
                             "rows a stride apart are {rows: R, stride: S, width: W}: (R - 1) * S + W elements")
                return None
            parts = [self.expression(f[k][1], "%s of %s" % (k, what), label, resolver, ex.INT, node.flow_style) for k in EXTENT_ROWS_KEYS]
            if any(e is None for e in parts):
                return None
            return Extent("rows", pos, rows=parts[0], stride=parts[1], width=parts[2])
        if is_sequence(node):
            self.err(pos, "%s must be an expression or a mapping, got a list" % what,
                     "write extent: n, extent: {rows: R, stride: S, width: W} or extent: {unknown: ...}")
            return None
        e = self.expression(node, what, label, resolver, ex.INT)
        if e is None:
            return None
        if not e.names:
            try:
                ex.evaluate(e.tree, {})
            except ex.EvalError as err:
                self.err(e.pos, "%s = %s %s" % (what, e.text, "overflows 64 bits" if err.status == "overflow" else "divides by zero"),
                         "fix the arithmetic")
                return None
        return Extent("expr", e.pos, expr=e)

    def layout(self, node, name, ptype):
        """The `layout` of pointer parameter `name`, or None after reporting."""
        text = self.text(node, "layout of parameter '%s'" % name)
        if text is None:
            return None
        if ptype is not None and not ptype.is_pointer:
            self.err(node_pos(node), "parameter '%s' is a %s; layout applies to pointer parameters" % (name, ptype.spec),
                     "drop layout: the Python launchers check the strides of tensors only")
            return None
        if text not in LAYOUTS:
            guess = ex.did_you_mean(text, LAYOUTS)
            self.err(node_pos(node), "unknown layout '%s' of parameter '%s' (expected %s)" % (text, name, ", ".join(LAYOUTS)),
                     ("did you mean '%s'?" % guess) if guess else
                     "contiguous: dense row-major (the default); rows: every dimension but the first dense; any: unchecked")
            return None
        return text

    def tensor_map(self, node, pname):
        """The TensorMap of a `tensor_map:` mapping (its box still
        unevaluated), or None after reporting."""
        where = "in tensor_map of parameter '%s'" % pname
        if not self.want_mapping(node, "tensor_map of parameter '%s'" % pname):
            return None
        f = self.fields(node, where, TENSOR_MAP_KEYS, ("dtype", "rank", "box"))
        t = TensorMap(node_pos(node))
        ok = True
        if "dtype" in f:
            vnode = f["dtype"][1]
            if not is_scalar(vnode) or vnode.value not in TENSOR_MAP_DTYPES:
                shown = ("'%s'" % vnode.value) if is_scalar(vnode) else kind_of(vnode)
                guess = ex.did_you_mean(vnode.value, tuple(TENSOR_MAP_DTYPES)) if is_scalar(vnode) and vnode.value else None
                self.err(node_pos(vnode), "dtype %s of tensor map '%s' is not one the copy engine moves" % (shown, pname),
                         ("did you mean '%s'?" % guess) if guess else "expected one of %s" % ", ".join(TENSOR_MAP_DTYPES))
                ok = False
            else:
                t.dtype = vnode.value
        else:
            ok = False
        if "rank" in f:
            vnode = f["rank"][1]
            rank = self.integer(vnode, "rank of tensor map '%s'" % pname) if is_scalar(vnode) and vnode.tag == INT else None
            if rank is None or not 1 <= rank <= TENSOR_MAP_MAX_RANK:
                shown = vnode.value if is_scalar(vnode) else kind_of(vnode)
                self.err(node_pos(vnode), "rank %s of tensor map '%s' is outside 1..%d" % (shown, pname, TENSOR_MAP_MAX_RANK),
                         "the copy engine moves tensors of 1 to 5 dimensions")
                ok = False
            else:
                t.rank = rank
        else:
            ok = False
        for key, names in TENSOR_MAP_OPTIONS.items():
            if key not in f:
                continue
            vnode = f[key][1]
            # YAML reads a bare 128B as text, but `none` as a string and
            # `nan` as a float: compare the scalar's own text.
            if not is_scalar(vnode) or vnode.value not in names:
                shown = ("'%s'" % vnode.value) if is_scalar(vnode) else kind_of(vnode)
                self.err(node_pos(vnode), "%s %s of tensor map '%s' is not one of %s" % (key, shown, pname, ", ".join(names)),
                         "write one of those, e.g. %s: %s" % (key, names[-1]))
                ok = False
            else:
                t.options[key] = vnode.value
                t.option_pos[key] = node_pos(vnode)
        if "box" in f:
            knode, vnode = f["box"]
            t.box_pos = node_pos(vnode)
            if not self.want_list(vnode, "box of tensor map '%s'" % pname, "give one extent per dimension"):
                ok = False
            else:
                t.box_nodes = list(vnode.value)
                if t.rank is not None and len(t.box_nodes) != t.rank:
                    self.err(node_pos(vnode), "box of tensor map '%s' has %d entries; its rank is %d" % (pname, len(t.box_nodes), t.rank),
                             "give one extent per dimension, innermost first")
                    ok = False
        else:
            ok = False
        if "element_strides" in f:
            vnode = f["element_strides"][1]
            if self.want_list(vnode, "element_strides of tensor map '%s'" % pname, "give one stride per dimension"):
                strides = []
                for item in vnode.value:
                    v = self.integer(item, "element stride of tensor map '%s'" % pname) if is_scalar(item) and item.tag == INT else None
                    if v is None or not 1 <= v <= TENSOR_MAP_ELEMENT_STRIDE_MAX:
                        self.err(node_pos(item), "element stride %s of tensor map '%s' is outside 1..%d" % (
                            item.value if is_scalar(item) else kind_of(item), pname, TENSOR_MAP_ELEMENT_STRIDE_MAX),
                            "the copy engine steps 1 to 8 elements")
                        ok = False
                    strides.append(v)
                if t.rank is not None and len(strides) != t.rank:
                    self.err(node_pos(vnode), "element_strides of tensor map '%s' has %d entries; its rank is %d" % (pname, len(strides), t.rank),
                             "give one stride per dimension, innermost first")
                    ok = False
                t.element_strides = strides
            else:
                ok = False
        if "extent" in f:
            t.extent_node = f["extent"][1]
        if not ok:
            return None
        interleave = t.options["interleave"]
        if interleave != "none" and t.rank < 3:
            self.err(t.option_pos["interleave"], "an interleaved tensor map needs rank 3 or more; '%s' has rank %d" % (pname, t.rank),
                     "use interleave: none, or describe the tensor in 3 or more dimensions")
            return None
        if interleave == "32B" and t.options["swizzle"] != "32B":
            self.err(t.option_pos["interleave"], "interleave 32B needs swizzle 32B (tensor map '%s')" % pname, "write swizzle: 32B")
            return None
        if t.options["oob_fill"] == "nan" and t.dtype not in TENSOR_MAP_FLOAT_DTYPES:
            self.err(t.option_pos["oob_fill"], "a NaN fill needs a floating-point dtype; tensor map '%s' is %s" % (pname, t.dtype),
                     "use oob_fill: zero")
            return None
        return t

    def tensor_map_boxes(self, launcher, label, spec):
        """Each tensor map's box: expressions of literals and variant
        constants, in 1..256 for every variant, the innermost one a whole
        number of 16 bytes and inside the swizzle's span."""
        consts = []
        for v in spec.variants:
            for n, _ in v.constants:
                if n not in consts:
                    consts.append(n)
        resolver = _Resolver([], consts)
        for p in launcher.params:
            if p.type is None or not p.type.is_tensor_map:
                continue
            t = p.type.tmap
            what = "box of tensor map '%s'" % p.name
            params = {q.name for q in launcher.params}
            for node in t.box_nodes:
                try:
                    read = ex.names_read(ex.parse(node.value)) if is_scalar(node) and node.tag != NULL else []
                except ex.ExprError:
                    read = []  # reported by expression() below
                named = [n for n in read if n in params]
                if named:
                    self.err(node_pos(node), "%s reads parameter '%s'" % (what, named[0]),
                             "a box is fixed when the map is encoded: use literals and variant constants")
                    return
                e = self.expression(node, what, label, resolver, ex.INT)
                if e is None:
                    return
                t.box.append(e)
            span = {"none": None, "32B": 32, "64B": 64, "128B": 128}[t.options["swizzle"]]
            for var in spec.variants or []:
                env = dict(var.constants)
                for i, e in enumerate(t.box):
                    try:
                        value = ex.evaluate(e.tree, env)
                    except (ex.EvalError, KeyError):
                        self.err(e.pos, "%s entry %d = %s cannot be evaluated in variant '%s'" % (what, i, e.text, var.name), "use literals and variant constants")
                        return
                    in_variant = " in variant '%s'" % var.name if e.names else ""
                    shown = e.text if str(value) == e.text else "%s = %d" % (e.text, value)
                    if not 1 <= value <= TENSOR_MAP_BOX_MAX:
                        self.err(e.pos, "%s entry %d = %s%s is outside 1..%d" % (what, i, shown, in_variant, TENSOR_MAP_BOX_MAX),
                                 "the copy engine moves at most 256 elements per dimension")
                        return
                    if i == 0 and t.options["interleave"] == "none":
                        inner = value * t.esize
                        if inner % 16:
                            self.err(e.pos, "%s: the innermost extent %s%s is %d bytes of %s, not a multiple of 16" % (
                                what, shown, in_variant, inner, t.dtype), "the copy engine moves whole 16-byte chunks")
                            return
                        if span is not None and inner > span:
                            self.err(e.pos, "%s: the innermost extent %s%s is %d bytes of %s, more than the %s swizzle's span" % (
                                what, shown, in_variant, inner, t.dtype, t.options["swizzle"]),
                                "use a box of at most %d elements there, or a wider swizzle" % (span // t.esize))
                            return
                if not spec.variants:
                    break
            for e in t.box:
                for n in e.names:
                    if n not in launcher.const_names:
                        launcher.const_names.append(n)

    def tensor_map_extents(self, launcher, label, resolver, spec):
        """Each tensor map's `extent`: one entry per dimension, innermost
        first, each an integer expression of the launcher's scalars and the
        variant's constants (the launch needs the map's extent there to be
        at least it), {exact: expression} (exactly it: the kernel relies on
        the map's bounds there) or null (not checked)."""
        params = {q.name for q in launcher.params}
        for p in launcher.params:
            if p.type is None or not p.type.is_tensor_map or p.type.tmap.extent_node is None:
                continue
            t, node = p.type.tmap, p.type.tmap.extent_node
            what = "extent of tensor map '%s'" % p.name
            if not is_sequence(node):
                self.err(node_pos(node), "%s must be a list, got %s" % (what, kind_of(node)),
                         "give one entry per dimension, innermost first: an expression (at least), {exact: expression} "
                         "or null (not checked)")
                continue
            if t.rank is not None and len(node.value) != t.rank:
                self.err(node_pos(node), "%s has %d entries; its rank is %d" % (what, len(node.value), t.rank),
                         "give one entry per dimension, innermost first (null where the scalars do not decide it)")
                continue
            entries, ok = [], True
            for i, item in enumerate(node.value):
                here = "entry %d of %s" % (i, what)
                if is_scalar(item) and item.tag == NULL:
                    entries.append(None)
                    continue
                exact = False
                if is_mapping(item):
                    f = self.fields(item, "in " + here, (TENSOR_MAP_EXTENT_EXACT,), (TENSOR_MAP_EXTENT_EXACT,))
                    if TENSOR_MAP_EXTENT_EXACT not in f:
                        ok = False
                        continue
                    item, exact = f[TENSOR_MAP_EXTENT_EXACT][1], True
                    if is_scalar(item) and item.tag == NULL:
                        self.err(node_pos(item), "exact of %s is null" % here,
                                 "write exact: an expression, or null alone for a dimension not checked")
                        ok = False
                        continue
                e = self.expression(item, here, label, resolver, ex.INT, node.flow_style)
                if e is None:
                    ok = False
                    continue
                if not any(n in params for n in e.names) and self.per_variant(e, here, spec) is None:
                    # Literals and constants alone: one value per variant,
                    # which must evaluate (else every launch would fail).
                    ok = False
                    continue
                entries.append((e, exact))
            if not ok:
                continue
            if all(x is None for x in entries):
                self.err(node_pos(node), "every entry of %s is null" % what,
                         "drop extent, or give the expression of the launch's scalars a dimension needs")
                continue
            t.extents = entries

    def expression(self, node, what, label, resolver, want, flow=False):
        """Expr, or None after reporting. `flow`: the value sits in a {...} mapping."""
        if not is_scalar(node):
            self.err(node_pos(node), "%s of %s must be an expression, got %s" % (what, label, kind_of(node)), "write it on one line, e.g. ceil_div(n, 256)")
            return None
        text = "" if node.tag == NULL else node.value
        tree = self._parsed.get(text)
        if tree is None:
            try:
                tree = ex.parse(text)
            except ex.ExprError as e:
                tree = e
            self._parsed[text] = tree
        if isinstance(tree, ex.ExprError):
            e = tree
            hint = e.hint
            if flow and node.style is None and e.message.startswith("missing ')'"):
                hint = "in a {...} mapping a comma ends the value; quote the expression or write the mapping one key per line"
            self.err(self.src.pos_in_scalar(node, e.offset) if text else node_pos(node), "%s: %s" % (what, e.message), hint)
            return None
        problems = ex.check(tree, resolver, want)
        for e in problems:
            self.err(self.src.pos_in_scalar(node, e.offset), "%s: %s" % (what, e.message), e.hint)
        if problems:
            return None
        # The position of its first character (inside quotes, past a | or >).
        return Expr(text, node, self.src.pos_in_scalar(node, len(text) - len(text.lstrip())), tree)

    def precondition(self, item, number, launcher, label, resolver):
        what = "precondition %d" % number
        if not self.want_mapping(item, "%s of %s" % (what, label)):
            return
        f = self.fields(item, "in %s of %s" % (what, label), PRE_KEYS, PRE_REQUIRED)
        message = self.text(f["message"][1], "message of %s" % what) if "message" in f else None
        if "check" not in f:
            return
        e = self.expression(f["check"][1], what, label, resolver, ex.COND)
        if e is None or message is None:
            return
        if not e.names:
            self.err(e.pos, "%s reads no parameter or constant" % what, "it is always true or always false; remove it")
            return
        # A refused buffer: reported, and the check kept (its names are used).
        buffer = self.buffer_of(f["buffer"][1], e, what, launcher, label, resolver) if "buffer" in f else None
        reads_const = any(resolver(n).kind == "const" for n in e.names)
        # A buffer too small for the launch is the caller's error in every
        # variant, never a sign that another variant fits.
        status = "KL_ERROR_VARIANT_MISMATCH" if reads_const and buffer is None else "KL_ERROR_PRECONDITION"
        c = Check("precondition", e, message, e.pos, e.names, status)
        c.buffer = buffer
        launcher.preconditions.append(c)

    def buffer_of(self, node, e, what, launcher, label, resolver):
        """`buffer: P` of a precondition: P is a pointer parameter and the
        check reads `SIZE >= NEEDED`, SIZE an integer parameter (its size as
        the caller gives it), so a refusal can say how much P holds and
        needs. The name, or None (reported)."""
        pointers = [p.name for p in launcher.params if p.type.is_pointer]
        if not is_scalar(node) or node.tag != STR or node.value not in pointers:
            got = "'%s'" % node.value if is_scalar(node) else kind_of(node)
            self.err(node_pos(node), "buffer of %s of %s must name a pointer parameter, got %s" % (what, label, got),
                     "expected one of %s" % ", ".join(pointers) if pointers else "the launcher has no pointer parameter")
            return None
        t = e.tree
        if not (isinstance(t, ex.Compare) and t.ops == [">="] and isinstance(t.operands[0], ex.Name)
                and resolver(t.operands[0].name).kind == "param"):
            self.err(e.pos, "%s sizes buffer %s, so it must read SIZE >= NEEDED with SIZE a parameter" % (what, node.value),
                     "e.g. workspace_bytes >= 4 * num_seqs * head_dim")
            return None
        return node.value

    def sized(self, node, what, label, resolver, flow=False):
        e = self.expression(node, what, label, resolver, ex.INT, flow)
        if e is None:
            return None
        c = Check(what, e, None, e.pos, e.names)
        if not e.names:
            try:
                c.value = ex.evaluate(e.tree, {})
            except ex.EvalError as err:
                self.err(e.pos, "%s = %s %s" % (what, e.text, "overflows 64 bits" if err.status == "overflow" else "divides by zero"), "fix the arithmetic")
                return None
        return c

    def arch(self, node, launcher, label):
        """arch: sm_<N> with an optional a or f suffix: the target whose
        machine code the kernel's work is in (kl_X_get refuses a module
        whose loaded code is for another, docs/DESIGN.md)."""
        if not is_scalar(node) or node.tag != STR or not re.match(ARCH_PATTERN, node.value):
            got = "'%s'" % node.value if is_scalar(node) else kind_of(node)
            self.err(node_pos(node), "arch of %s must be sm_<N> with an optional a or f suffix, got %s" % (label, got),
                     "name the one target whose machine code the kernel needs, e.g. arch: sm_90a; leave arch out for a kernel built for every target")
            return
        launcher.arch = node.value

    def finish(self, launcher):
        """Layout, the block's thread-count check, constant slots, check indexes."""
        offset = 0
        for p in launcher.kernel_params:
            size, align = p.type.size, p.type.align
            # Natural alignment, for a buffer that starts 128-byte aligned
            # (a target's own start moves a tensor map: docs/ARG_ORDER.md).
            offset = (offset + align - 1) // align * align
            p.offset = offset
            offset += size
        parts, args = [], []
        for axis in DIM_KEYS:
            c = launcher.block.get(axis)
            if c is None:
                continue
            tree = c.expr.tree
            simple = isinstance(tree, (ex.Num, ex.Name, ex.Call))
            parts.append(c.text if simple else "(%s)" % c.text)
            args += [n for n in c.args if n not in args]
        launcher.block_threads = Check("block", None, None, launcher.block_pos, args)
        launcher.block_threads.text = " * ".join(parts)
        for p in launcher.extents:
            x = p.extent
            if x.kind == "unknown":
                continue
            if x.kind == "expr":
                e = x.expr
            else:
                # (rows - 1) * stride + width; the launcher skips it when rows is 0.
                tree = ex.BinOp("+", ex.BinOp("*", ex.BinOp("-", x.rows.tree, ex.Num(1, 0), 0), x.stride.tree, 0), x.width.tree, 0)
                e = Expr(x.text, None, x.pos, tree)
            c = Check("extent of %s" % p.name, e, None, x.pos, e.names)
            c.extent = x
            p.extent_check = c
            launcher.extent_checks.append(c)
        for p in launcher.params:
            if not p.type.is_tensor_map or not p.type.tmap.extents:
                continue
            for dim, entry in enumerate(p.type.tmap.extents):
                if entry is None:
                    continue
                e, exact = entry
                c = Check("tensor map %s: extent%d" % (p.name, dim), e, None, e.pos, e.names, "KL_ERROR_TENSOR_MAP")
                c.tmap = (p.name, dim, exact)
                launcher.tmap_extent_checks.append(c)
        for i, c in enumerate(launcher.checks):
            c.index = i
            if c.expr is not None:
                for n in c.expr.names:
                    if n not in launcher.const_names and not any(p.name == n for p in launcher.params):
                        launcher.const_names.append(n)


class _Resolver:
    """Names an expression of one launcher may read."""

    def __init__(self, params, const_names, refused=()):
        self.params = {p.name: p for p in params}
        self.consts = const_names
        self.refused = refused  # parameters refused for their names: reported once, not at each use

    def __call__(self, name):
        p = self.params.get(name)
        if p is not None:
            return ex.Binding("param", name, ptype=p.type)
        if name in self.consts:
            return ex.Binding("const", name)
        if name in self.refused:
            return ex.Binding("param", name, ptype=None)
        return None

    def candidates(self):
        return list(self.params) + list(self.consts)



class _NotASpecFile(Exception):
    pass


def _read_spec(path):
    """The bytes of a spec file. Opened without blocking (a FIFO opens at
    once, and is refused), checked to be a regular file, read only up to
    MAX_SPEC_BYTES (a file growing meanwhile is cut there, and refused)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            mode = st.st_mode
            what = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                    "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other special file")
            raise _NotASpecFile("cannot read the spec: it is %s, not a regular file" % what, "give the path of a <family>.yaml file")
        chunks, size = [], 0
        while size <= MAX_SPEC_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_SPEC_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SPEC_BYTES:
            raise _NotASpecFile("the spec is over %d MiB" % (MAX_SPEC_BYTES >> 20),
                                "a spec of 10,000 launchers is under 9 MB; split the family or check the path")
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_spec(path, diags):
    """A validated Spec, or None when the file had problems (all reported)."""
    try:
        data = _read_spec(path)
    except OSError as e:
        diags.error(path, (1, 1), "cannot read the spec: %s" % (e.strerror or e), "check the path")
        return None
    except _NotASpecFile as e:
        diags.error(path, (1, 1), e.args[0], e.args[1])
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        diags.error(path, (1, 1), "the spec is not UTF-8 (byte %d)" % e.start, "save it as UTF-8")
        return None
    source = Source(path, text)
    spec = Spec(source, hashlib.sha256(data).hexdigest())
    v = _Validator(source, diags)
    try:
        root = source.compose()
    except YamlSyntaxError as e:
        diags.error(path, e.pos, e.prefix + e.problem, e.hint)
        return None
    if source.tag_problems:
        for pos, message, hint in source.tag_problems:
            diags.error(path, pos, message, hint)
        return None
    v.spec(root, spec)
    return None if v.failed else spec


def cross_check(specs, diags):
    """Problems between files: a family or a launcher name defined twice."""
    families, launchers = {}, {}
    for s in specs:
        if s.family in families:
            other = families[s.family]
            diags.error(s.path, s.family_pos, "family '%s' is also defined by %s" % (s.family, other.path), "give each family one spec file")
        else:
            families[s.family] = s
        for l in s.launchers:
            if l.name in launchers:
                os_, ol = launchers[l.name]
                diags.error(s.path, l.pos, "launcher name '%s' is also used in %s:%d" % (l.name, os_.path, ol.pos[0]), "C launchers share one namespace (kl_<name>); rename one")
            else:
                launchers[l.name] = (s, l)
