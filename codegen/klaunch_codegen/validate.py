"""Spec validation (docs/DESIGN.md, "Spec format").

load_spec() walks the composed YAML nodes, reports every problem it finds
to a Diagnostics collector (position, message, hint) and returns a Spec
only when the file had none. cross_check() then looks across files. What
is allowed (keys, types, limits, reserved names) is data in schema.py; the
objects built are in model.py.
"""

import difflib
import hashlib
import os
import re

from . import expr as ex
from . import ranges as rg
from .names import header_name_problem
from .model import Check, Expr, Launcher, Param, Spec, Type, Variant
from .schema import (
    ATTRIBUTE_KEYS,
    BLOCK_LIMITS,
    C_KEYWORDS,
    CLUSTER_MAX,
    CXX_KEYWORDS,
    DEFAULT_DYNAMIC_SHARED,
    DIM_KEYS,
    GRID_LIMITS,
    INT64_MAX,
    INT64_MIN,
    PREPROCESSOR_WORDS,
    LAUNCHER_KEYS,
    PARAM_KEYS,
    POINTER_ELEMENTS,
    PRE_KEYS,
    REQUIRED_HINTS,
    RESERVED,
    SCALAR_TYPES,
    THREADS_MAX,
    TOP_KEYS,
    TYPE_EXPECTED,
    U32_MAX,
    VARIANT_KEYS,
)
from .yamlpos import (
    BOOL,
    INT,
    MERGE,
    NULL,
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
    if word in SCALAR_TYPES:
        return Type(word), None
    if re.match(r"^const\s+\w+$", word):
        return None, ("'%s': const applies only to pointers" % word, "write %s for a scalar, or const %s* for a pointer" % (word[5:].strip(), word[5:].strip()))
    guess = ex.did_you_mean(word, SCALAR_TYPES + tuple(e + "*" for e in POINTER_ELEMENTS))
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
    if role in ("param", "constant", "entry"):
        problem = header_name_problem(name, role)
        if problem:
            return ("%s %s" % (what, problem[0]), problem[1])
    return None


# ---- validation -----------------------------------------------------------------


class _Validator:
    def __init__(self, source, diags):
        self.src = source
        self.diags = diags
        self.n_errors_at_start = len(diags)

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

    def ident(self, node, what):
        name = self.text(node, what)
        if name is None:
            return None
        problem = name_problem(name, what)
        if problem:
            self.err(node_pos(node), *problem)
            return None
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

    def variants(self, node, spec):
        if not self.want_mapping(node, "variants"):
            return
        if not node.value:
            self.err(node_pos(node), "variants is empty", "define at least one variant (one fatbin is built per variant)")
            return
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
            constants, const_pos = [], {}
            if "constants" in fields:
                constants = self.constants(fields["constants"][1], name, const_pos)
            variant = Variant(name, self.doc(fields), constants, node_pos(knode))
            variant.const_pos = const_pos
            spec.variants.append(variant)
        if not spec.variants:
            return
        first = spec.variants[0]
        first_names = [n for n, _ in first.constants]
        for v in spec.variants[1:]:
            names = [n for n, _ in v.constants]
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

    def constants(self, node, variant, positions):
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
                self.err(node_pos(knode), *problem)
                continue
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
        if "entry" in f:
            launcher.entry = self.ident(f["entry"][1], "entry") or launcher.entry
            launcher.entry_pos = node_pos(f["entry"][1])
        launcher.doc = self.doc(f)
        if "params" in f and not self.params(f["params"][1], launcher, label, spec):
            return None  # its expressions would only report unknown names
        consts = {}
        for v in spec.variants:
            for n, _ in v.constants:
                consts.setdefault(n, True)
        resolver = _Resolver(launcher.params, list(consts))
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
        self.limits(launcher, label)
        self.shared_fits(launcher, label, spec)
        if not self.failed:
            self.ranges(launcher, label, spec)
        # Launch-only parameters exist only for expressions.
        used = set()
        for c in launcher.preconditions + list(launcher.grid.values()) + list(launcher.block.values()) + ([launcher.shared] if launcher.shared else []):
            used.update(c.args)
        for p in launcher.params:
            if p.launch_only and p.type is not None and not p.type.is_pointer and p.name not in used:
                self.err(
                    p.pos,
                    "launch-only parameter '%s' of %s is not used" % (p.name, label),
                    "no grid, block, shared_bytes or precondition reads it; use it, or pass it to the kernel (drop launch_only)",
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
            name = self.ident(knode, "parameter name")
            type_text = self.text(vnode, "the type of parameter '%s'" % knode.value) if is_scalar(vnode) else None
            if not is_scalar(vnode):
                self.err(node_pos(vnode), "the type of parameter '%s' must be text, got %s" % (knode.value, kind_of(vnode)), "write name: type, e.g. n: u32")
            type_node, launch_only, doc, pos = vnode, False, "", node_pos(knode)
        else:
            where = "in a parameter of %s" % label
            f = self.fields(node, where, PARAM_KEYS, ("name", "type"))
            name = self.ident(f["name"][1], "parameter name") if "name" in f else None
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
        ptype = None
        if type_text is not None:
            ptype, problem = parse_type(type_text)
            if problem:
                self.err(node_pos(type_node), *problem)
        if name is None:
            return None
        if launch_only and ptype is not None and ptype.is_pointer:
            self.err(pos, "launch-only parameter '%s' is a pointer (%s)" % (name, ptype.spec), "only integer parameters can size a launch; a device pointer goes to the kernel")
        # Kept even when its type is bad, so expressions naming it do not
        # add an 'unknown name' to the report.
        return Param(name, ptype, launch_only, doc, pos)

    def expression(self, node, what, label, resolver, want, flow=False):
        """Expr, or None after reporting. `flow`: the value sits in a {...} mapping."""
        if not is_scalar(node):
            self.err(node_pos(node), "%s of %s must be an expression, got %s" % (what, label, kind_of(node)), "write it on one line, e.g. ceil_div(n, 256)")
            return None
        text = "" if node.tag == NULL else node.value
        try:
            tree = ex.parse(text)
        except ex.ExprError as e:
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
        f = self.fields(item, "in %s of %s" % (what, label), PRE_KEYS, PRE_KEYS)
        message = self.text(f["message"][1], "message of %s" % what) if "message" in f else None
        if "check" not in f:
            return
        e = self.expression(f["check"][1], what, label, resolver, ex.COND)
        if e is None or message is None:
            return
        if not e.names:
            self.err(e.pos, "%s reads no parameter or constant" % what, "it is always true or always false; remove it")
            return
        reads_const = any(resolver(n).kind == "const" for n in e.names)
        status = "KL_ERROR_VARIANT_MISMATCH" if reads_const else "KL_ERROR_PRECONDITION"
        launcher.preconditions.append(Check("precondition", e, message, e.pos, e.names, status))

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

    def max_dynamic_shared(self, node, launcher, label, resolver, spec):
        """The kernel's opt-in dynamic shared memory limit: an expression of
        literals and variant constants, evaluated here for every variant; the
        largest value goes into kl_kernel_desc.max_dynamic_shared."""
        e = self.expression(node, "max_dynamic_shared", label, resolver, ex.INT)
        if e is None:
            return
        params = [n for n in e.names if resolver(n).kind == "param"]
        if params:
            self.err(
                e.pos,
                "max_dynamic_shared of %s reads parameter '%s'" % (label, params[0]),
                "it is set once, when the kernel is loaded, before any launch; use literals and variant constants",
            )
            return
        values = self.per_variant(e, "max_dynamic_shared", spec)
        if values is None:
            return
        for variant, value in values:
            if value > U32_MAX:
                where = " in variant '%s'" % variant if e.names else ""
                self.err(e.pos, "max_dynamic_shared = %s is %d%s, over 2^32-1" % (e.text, value, where), "give it in bytes, at most 4294967295")
                return
        launcher.max_dynamic_shared = max((v for _, v in values), default=0)
        launcher.max_dynamic_shared_expr = e

    def launch_attributes(self, node, launcher, label):
        """cluster: {x, y, z} integer literals (the kl_kernel_desc holds one
        value for every variant); programmatic_serialization, cooperative:
        booleans. Only attributes set to something other than their default
        make the launch go through cuLaunchKernelEx."""
        where = "launch_attributes of %s" % label
        if not self.want_mapping(node, where):
            return
        if not node.value:
            self.err(node_pos(node), "%s is empty" % where, "give cluster, programmatic_serialization or cooperative, or leave launch_attributes out")
            return
        f = self.fields(node, "in " + where, ATTRIBUTE_KEYS, ())
        for key in ("programmatic_serialization", "cooperative"):
            if key not in f:
                continue
            vnode = f[key][1]
            if not is_scalar(vnode) or vnode.tag != BOOL:
                self.err(node_pos(vnode), "%s must be true or false, got %s" % (key, kind_of(vnode)), "write %s: true" % key)
                continue
            setattr(launcher, key, scalar_bool(vnode))
        if "cluster" in f:
            cnode = f["cluster"][1]
            if self.want_mapping(cnode, "cluster of %s" % label):
                dims = self.fields(cnode, "in cluster of %s" % label, DIM_KEYS, ("x",))
                values = []
                ok = "x" in dims
                for axis in DIM_KEYS:
                    if axis not in dims:
                        values.append(1)
                        continue
                    vnode = dims[axis][1]
                    if not is_scalar(vnode) or vnode.tag != INT:
                        self.err(node_pos(vnode), "cluster.%s of %s must be an integer literal, got %s" % (axis, label, kind_of(vnode)),
                                 "cluster dimensions are fixed when the kernel is loaded; write a number of blocks, 1 to %d" % CLUSTER_MAX)
                        ok = False
                        continue
                    v = self.integer(vnode, "cluster.%s of %s" % (axis, label))
                    if v is None:
                        ok = False
                        continue
                    if v < 1 or v > CLUSTER_MAX:
                        self.err(node_pos(vnode), "cluster.%s of %s is %d" % (axis, label, v), "a cluster has 1 to %d blocks per dimension" % CLUSTER_MAX)
                        ok = False
                        continue
                    values.append(v)
                if ok:
                    total = values[0] * values[1] * values[2]
                    if total > CLUSTER_MAX:
                        self.err(node_pos(cnode), "cluster of %s has %d blocks, over the portable cluster size %d" % (label, total, CLUSTER_MAX),
                                 "x * y * z must be at most %d" % CLUSTER_MAX)
                    else:
                        launcher.cluster = tuple(values)
                        for axis, v in zip(DIM_KEYS, values):
                            g = launcher.grid.get(axis)
                            gv = g.value if g is not None else 1
                            if gv is not None and gv % v != 0:
                                self.err(node_pos(dims[axis][1]) if axis in dims else node_pos(cnode),
                                         "cluster.%s of %s is %d, but grid.%s is %d, not a multiple" % (axis, label, v, axis, gv),
                                         "the grid must be a whole number of clusters in every dimension")
        if launcher.cluster is None and not launcher.programmatic_serialization and not launcher.cooperative:
            if not self.failed:
                self.err(node_pos(node), "%s sets no attribute" % where, "with no cluster and both flags false the launch is a plain one; leave launch_attributes out")
            return
        launcher.attributes_pos = node_pos(node)

    def per_variant(self, e, what, spec):
        """[(variant, value)] of an expression of literals and constants, or
        None after reporting an overflow or a division by zero."""
        out = []
        for v in spec.variants or [Variant("", "", [], (1, 1))]:
            env = dict(v.constants)
            if any(n not in env for n in e.names):
                continue  # a variant that lacks a constant others define: reported by variants()
            try:
                out.append((v.name, ex.evaluate(e.tree, env)))
            except ex.EvalError as err:
                where = " in variant '%s'" % v.name if e.names else ""
                self.err(e.pos, "%s = %s %s%s" % (what, e.text, "overflows 64 bits" if err.status == "overflow" else "divides by zero", where), "fix the arithmetic")
                return None
        return out

    def shared_fits(self, launcher, label, spec):
        """A shared_bytes that reads no parameter must fit the kernel's limit
        in every variant: max_dynamic_shared, or the 48 KiB default."""
        c = launcher.shared
        params = {p.name for p in launcher.params}
        if c is None or any(n in params for n in c.args):
            return
        limit = launcher.max_dynamic_shared or DEFAULT_DYNAMIC_SHARED
        values = self.per_variant(c.expr, "shared_bytes", spec) if c.args else [("", c.value)]
        if values is None:
            return
        for variant, value in values:
            if value is not None and value > limit:
                where = " in variant '%s'" % variant if c.args else ""
                if launcher.max_dynamic_shared:
                    hint = "raise max_dynamic_shared to at least %d" % value
                else:
                    hint = "a kernel gets 48 KiB (49152 bytes) unless it opts in: add max_dynamic_shared: %d" % value
                self.err(c.pos, "shared_bytes = %s is %d bytes%s, over the kernel's limit of %d" % (c.text, value, where, limit), hint)
                return

    def ranges(self, launcher, label, spec):
        """What interval evaluation (ranges.py) decides before any launch:
        comparisons the parameters' types alone decide (the compiler
        proves them, and -Werror refuses), then, per variant, checks that
        always fail, preconditions never true, grid extents always 0, and
        block or shared-memory values always over their limits."""
        params = {p.name: p.type.name for p in launcher.params if p.type is not None and not p.type.is_pointer}
        checks = list(launcher.preconditions) + [launcher.grid[a] for a in DIM_KEYS if a in launcher.grid]
        checks += [launcher.block[a] for a in DIM_KEYS if a in launcher.block]
        if launcher.shared is not None:
            checks.append(launcher.shared)
        decided_somewhere = False
        for c in checks:
            seen = set()

            def on_compare(left, op, right, pair, c=c, seen=seen):
                same = ex._text(left) == ex._text(right)
                if same:  # x == x: true whatever x is
                    pair = rg.Cond(op in ("==", "<=", ">="), op in ("!=", "<", ">"))
                if pair.fail != rg.NEVER or (pair.can_true and pair.can_false) or id(left) in seen:
                    return
                seen.add(id(left))
                kinds = ["%s is %s" % (n, params[n]) for n in ex.names_read(ex.Compare([op], [left, right], left.pos)) if n in params]
                text = "%s %s %s" % (ex._text(left, 5), op, ex._text(right, 5))
                what = "precondition %d" % (launcher.preconditions.index(c) + 1) if c.what == "precondition" else c.what
                self.err(self.src.pos_in_scalar(c.expr.node, left.pos),
                         "%s: comparison '%s' is always %s%s" % (
                             what, text, "true" if pair.can_true else "false", " (%s)" % ", ".join(kinds) if kinds else ""),
                         "it is decided whatever the launch, and a compiler that proves it refuses it under -Werror; remove it")

            rg.Evaluator(params, None, on_compare).evaluate(c.expr.tree)
            decided_somewhere = decided_somewhere or bool(seen)
        if decided_somewhere:
            return
        env_of = [(var.name, dict(var.constants)) for var in spec.variants]
        limit_shared = launcher.max_dynamic_shared or DEFAULT_DYNAMIC_SHARED
        lows = {}  # block axis -> [lo per variant]
        # The checks run in order and the first that fails ends the launch:
        # a variant that an earlier precondition always refuses (a variant
        # mismatch, by design) never reaches the later ones.
        refused = set()
        for c in checks:
            if c.value is not None or not c.args:
                continue  # read nothing: checked as a number above
            reads_const = any(n not in params and not self._is_pointer(launcher, n) for n in c.args)
            found = {}  # problem -> [variant]
            for vname, env in env_of:
                if vname in refused or any(n not in env for n in c.args if n not in params):
                    continue
                r = rg.Evaluator(params, env).evaluate(c.expr.tree)
                if r.fail == rg.ALWAYS:
                    found.setdefault(("fails", {"overflow": "overflows 64 bits", "negative": "reads a negative constant"}.get(
                        r.why, "divides by zero")), []).append(vname)
                    continue
                if c.what == "precondition":
                    if not r.can_true:
                        found.setdefault(("never",), []).append(vname)
                        refused.add(vname)
                    continue
                axis = c.what.split(".")[-1]
                if c.what.startswith("block."):
                    lows.setdefault(axis, []).append((vname, r.lo))
                if c.what.startswith(("grid.", "block.")) and r.hi == 0:
                    found.setdefault(("zero",), []).append(vname)
                elif c.what.startswith("grid.") and r.lo > GRID_LIMITS[axis][0]:
                    found.setdefault(("over", r.lo, GRID_LIMITS[axis][1]), []).append(vname)
                elif c.what.startswith("block.") and r.lo > BLOCK_LIMITS[axis]:
                    found.setdefault(("over", r.lo, str(BLOCK_LIMITS[axis])), []).append(vname)
                elif c.what == "shared_bytes" and r.lo > limit_shared:
                    found.setdefault(("over", r.lo, "of %d bytes the kernel may use" % limit_shared), []).append(vname)
            for problem, vnames in found.items():
                if problem[0] == "never" and len(vnames) + len(refused - set(vnames)) < len(env_of):
                    continue  # false in some variants: that is what variant preconditions are for
                if reads_const:
                    where = " in variant%s %s" % ("s" if len(vnames) > 1 else "", ", ".join("'%s'" % n for n in vnames))
                    if problem[0] == "never":
                        where = " in every variant"
                else:
                    where = ""
                what = "%s %d" % (c.what, launcher.preconditions.index(c) + 1) if c.what == "precondition" else c.what
                shown = "%s (%s)" % (what, c.text) if c.what == "precondition" else "%s = %s" % (what, c.text)
                if problem[0] == "fails":
                    self.err(c.pos, "%s %s%s whatever the parameters" % (shown, problem[1], where),
                             "every launch would fail; fix the arithmetic%s" % (" or the constants" if reads_const else ""))
                elif problem[0] == "never":
                    self.err(c.pos, "%s (%s) is false%s whatever the parameters" % (what, c.text, where or " for every launch"),
                             "no launch could pass it; fix the check%s" % (" or the constants" if reads_const else ""))
                elif problem[0] == "zero":
                    self.err(c.pos, "%s = %s is 0%s whatever the parameters" % (what, c.text, where),
                             "every launch would %s; fix the expression%s" % (
                                 "launch nothing (an empty grid succeeds)" if c.what.startswith("grid") else "fail",
                                 " or the constants" if reads_const else ""))
                else:
                    self.err(c.pos, "%s = %s is at least %d%s, over the CUDA limit %s" % (what, c.text, problem[1], where, problem[2])
                             if not c.what == "shared_bytes" else
                             "%s = %s is at least %d%s, over the limit %s" % (what, c.text, problem[1], where, problem[2]),
                             "every launch would fail")
        # The block's thread count, from each axis's least value (when no
        # axis was found over its own limit).
        if lows and not self.failed:
            for vname, _ in env_of:
                total = 1
                for axis, c in launcher.block.items():
                    lo = c.value if c.value is not None else dict(lows.get(axis, [])).get(vname)
                    if lo is None:
                        break
                    total *= lo
                else:
                    if total > THREADS_MAX:
                        self.err(launcher.block_pos, "block of %s has at least %d threads in variant '%s', over the CUDA limit 1024" % (
                            label, total, vname), "x * y * z must be at most 1024; every launch would fail")
                        break

    @staticmethod
    def _is_pointer(launcher, name):
        return any(p.name == name and p.type is not None and p.type.is_pointer for p in launcher.params)

    def limits(self, launcher, label):
        """Values known here must already fit what CUDA allows."""
        for axis, c in launcher.grid.items():
            if c.value is None:
                continue
            limit, shown = GRID_LIMITS[axis]
            if c.value == 0:
                self.err(c.pos, "grid.%s of %s is 0" % (axis, label), "a launch needs at least one block per dimension; leave y and z out for 1")
            elif c.value > limit:
                self.err(c.pos, "grid.%s of %s is %d, over the CUDA limit %s" % (axis, label, c.value, shown), "split the work differently")
        for axis, c in launcher.block.items():
            if c.value is None:
                continue
            if c.value == 0:
                self.err(c.pos, "block.%s of %s is 0" % (axis, label), "a block needs at least one thread per dimension; leave y and z out for 1")
            elif c.value > BLOCK_LIMITS[axis]:
                self.err(c.pos, "block.%s of %s is %d, over the CUDA limit %d" % (axis, label, c.value, BLOCK_LIMITS[axis]), "a block has at most 1024 threads (z at most 64)")
        values = [c.value for c in launcher.block.values()]
        if launcher.block and None not in values:
            total = 1
            for v in values:
                total *= v
            if total > THREADS_MAX and all(0 < v <= BLOCK_LIMITS[a] for a, v in zip(launcher.block, values)):
                self.err(launcher.block_pos, "block of %s has %d threads, over the CUDA limit 1024" % (label, total), "x * y * z must be at most 1024")

    def finish(self, launcher):
        """Layout, the block's thread-count check, constant slots, check indexes."""
        offset = 0
        for p in launcher.kernel_params:
            size = p.type.size
            offset = (offset + size - 1) // size * size  # natural alignment
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
        for i, c in enumerate(launcher.checks):
            c.index = i
            if c.expr is not None:
                for n in c.expr.names:
                    if n not in launcher.const_names and not any(p.name == n for p in launcher.params):
                        launcher.const_names.append(n)


class _Resolver:
    """Names an expression of one launcher may read."""

    def __init__(self, params, const_names):
        self.params = {p.name: p for p in params}
        self.consts = const_names

    def __call__(self, name):
        p = self.params.get(name)
        if p is not None:
            return ex.Binding("param", name, ptype=p.type)
        if name in self.consts:
            return ex.Binding("const", name)
        return None

    def candidates(self):
        return list(self.params) + list(self.consts)



def load_spec(path, diags):
    """A validated Spec, or None when the file had problems (all reported)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        diags.error(path, (1, 1), "cannot read the spec: %s" % (e.strerror or e), "check the path")
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
