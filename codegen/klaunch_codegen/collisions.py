"""Collisions in what the rendered outputs declare (docs/DESIGN.md, "Names").

The names a run emits are read back from the rendered headers
(declared.py), not listed by hand, so a name a template adds is covered at
once. check_outputs() refuses, at the spec name that causes it:

- a file-scope name declared twice: across every family's C header (one
  program may include them all, and the fatbin symbols bazel/cuda.bzl and
  cmake/klaunch.cmake define beside them) and within each kernel-side
  header; or one that the klaunch runtime (include/klaunch/*.h) declares;
- a parameter or local of a generated function that another of its
  parameters or locals, or a file-scope name, already takes (a redefinition,
  or a shadow that changes what a later use means);
- a variant constant (a macro of the kernel-side header) whose name the
  header uses anywhere after defining it.

Two declarations of one name are fine in different branches of one #if
chain, or inside the same include-once region written identically in two
files (the signature traits every kernel-side header carries).

Which spec names built a generated name is found by rendering the spec
again with each name replaced by a tag (zq<N>qz) and reading the same
declaration there: `kl__zq3qz_prepare` is launcher 3's private helper. That
second rendering runs only when there is a collision to explain.
"""

import copy
import gc
import re

from . import declared
from . import expr as ex

_TAG = re.compile(r"zq(\d+)qz", re.I)

# Kinds of spec names by how specific they are: a message is about the
# most specific spec name in a generated name (a variant, not its family).
_RANK = {"parameter": 5, "constant": 4, "entry": 3, "variant": 2, "launcher": 1, "family": 0}

# What some generated names are, by their shape (spec names as {kind},
# digits as #), for messages; a shape not here is described by its kind.
_WHAT = {
    "kl_{launcher}": "its launcher",
    "kl_{launcher}_get": "its kernel lookup",
    "kl_{launcher}_check": "its check function",
    "kl_{launcher}_params": "its parameter table",
    "kl_{launcher}_desc": "its kernel description",
    "kl__{launcher}_prepare": "its private check helper",
    "kl__{launcher}_checks": "its check table",
    "kl__{launcher}_consts": "its constant names",
    "kl__{launcher}_attributes": "its launch attributes",
    "kl__{launcher}_args#": "the names of a check",
    "kl_{family}_variant_info": "its variant table",
    "kl__{family}_{variant}_const_names": "its constant names",
    "kl__{family}_{variant}_const_values": "its constant values",
    "KLAUNCH_{FAMILY}_H": "the include guard of its C header",
    "KLAUNCH_{FAMILY}_CUH": "the include guard of its kernel-side header",
    "kl_{launcher}_{parameter}_encode": "its tensor map's builder",
    "kl__{launcher}_{parameter}_request": "its tensor map's request",
    "kl__{launcher}_{parameter}_site": "its tensor map's spec position",
    "kl__{launcher}_{parameter}_encode_site": "its tensor map builder's spec position",
    "kl__{parameter}": "the u32 copy of a bool parameter",
    "kl__args": "the kernel's argument array",
    "kl__st": "the checks' status",
    "kl__launch": "the launch geometry",
    "{entry}": "its kernel",
}
_KIND_WHAT = {
    "macro": "a macro",
    "function": "a function",
    "prototype": "a declaration",
    "object": "a static table",
    "type": "a type",
    "fatbin": "an embedded fatbin",
}


class Entity:
    """A spec name: what it is, where, and how a message calls it."""

    __slots__ = ("kind", "name", "pos", "label", "spec")

    def __init__(self, kind, name, pos, label, spec):
        self.kind, self.name, self.pos, self.label, self.spec = kind, name, pos, label, spec


class Extra:
    """A name made outside the templates (a fatbin symbol), as a Decl."""

    kind = "fatbin"
    function = None
    cond = ()
    guard = None

    def __init__(self, name, path, entity, what):
        self.name, self.path, self.entity, self.what = name, path, entity, what

    def exclusive_with(self, other):
        return False


# ---- tagged rendering: which spec names a generated name comes from ---------------


def _tagged(spec):
    """(copy of spec with every spec name replaced by a tag, [Entity])."""
    ents = []

    def tag(kind, name, pos, label):
        ents.append(Entity(kind, name, pos, label, spec))
        return "zq%dqz" % (len(ents) - 1)

    memo = {id(spec.source): spec.source}
    views = getattr(spec, "_views", None)
    if views is not None:
        memo[id(views)] = None
    for l in spec.launchers:
        for e in _exprs(l):
            memo[id(e.node)] = e.node
    t = copy.deepcopy(spec, memo)
    fam = spec.family
    t.family = tag("family", fam, spec.family_pos, "family '%s'" % fam)
    const_tags = {}
    for v in t.variants:
        vname = v.name
        v.name = tag("variant", vname, v.pos, "variant '%s' of family '%s'" % (vname, fam))
        for n, _ in v.constants:
            if n not in const_tags:
                const_tags[n] = tag("constant", n, v.const_pos.get(n, v.pos), "constant '%s'" % n)
        v.constants = [(const_tags[n], x) for n, x in v.constants]
        v.const_pos = {const_tags.get(n, n): p for n, p in v.const_pos.items()}
    entry_tags = {}
    for l in t.launchers:
        lname = l.name
        ptags = {}
        for p in l.params:
            ptags[p.name] = tag("parameter", p.name, p.pos, "parameter '%s' of launcher '%s'" % (p.name, lname))
            p.name = ptags[p.name]
        if l.entry not in entry_tags:
            entry_tags[l.entry] = tag("entry", l.entry, l.entry_pos, "entry '%s' of launcher '%s'" % (l.entry, lname))
        l.entry = entry_tags[l.entry]
        l.name = tag("launcher", lname, l.pos, "launcher '%s'" % lname)

        def rn(n, ptags=ptags):
            return ptags.get(n) or const_tags.get(n, n)

        l.const_names = [rn(n) for n in l.const_names]
        for c in l.checks:
            c.args = [rn(n) for n in c.args]
        for e in _exprs(l):
            e.tree = copy.deepcopy(e.tree)  # trees are shared between launchers
            for node in ex.walk(e.tree):
                if isinstance(node, ex.Name):
                    node.name = rn(node.name)
            e.names = [rn(n) for n in e.names]
    t._views = None
    return t, ents


def _exprs(launcher):
    """Every expression of a launcher that reads spec names."""
    out = [c.expr for c in launcher.checks if c.expr is not None]
    if launcher.max_dynamic_shared_expr is not None:
        out.append(launcher.max_dynamic_shared_expr)
    for p in launcher.params:
        tmap = getattr(p.type, "tmap", None) if p.type is not None else None
        if tmap is not None:
            out += tmap.box
        if p.extent is not None:
            out += p.extent.parts
    return out


class _Origins:
    """Per spec, lazily: the tagged rendering's Decls, to explain a Decl."""

    def __init__(self, spec):
        self.spec = spec
        self._by_path = None
        self.entities = []

    def _load(self):
        from . import emit

        self._by_path = {}
        try:
            t, self.entities = _tagged(self.spec)
            for suffix, render in ((".h", emit.render_header), (".cuh", emit.render_cuh)):
                path = "klaunch/%s%s" % (self.spec.family, suffix)
                self._by_path[path] = declared.scan(render(t), path).decls
        except Exception:  # noqa: BLE001 -- only the wording depends on it; the collision is reported regardless
            self._by_path = {}

    def explain(self, d):
        """(Entity or None, shape) of a Decl of this spec's outputs."""
        if isinstance(d, Extra):
            return d.entity, None
        if self._by_path is None:
            self._load()
        tagged = self._by_path.get(d.path)
        if not tagged or d.index >= len(tagged) or tagged[d.index].kind != d.kind:
            return None, None
        name = tagged[d.index].name
        found = [self.entities[int(m.group(1))] for m in _TAG.finditer(name)]

        def place(m):
            kind = self.entities[int(m.group(1))].kind
            return "{%s}" % (kind.upper() if m.group().isupper() else kind)

        shape = re.sub(r"\d+", "#", _TAG.sub(place, name))
        if not found:
            return None, shape
        return max(found, key=lambda e: _RANK[e.kind]), shape


def _what(d, shape):
    """What a declared name is, for a message: 'its kernel lookup', 'the
    launch geometry, a local of kl_k()'."""
    if isinstance(d, Extra):
        return d.what
    where = "a %s of %s()" % ("parameter" if d.kind == "param" else "local", d.function.name) if d.function is not None else None
    words = _WHAT.get(shape)
    if words is None:
        return where or _KIND_WHAT[d.kind]
    return words + (", " + where if where else "")


# ---- the checks ----------------------------------------------------------------------


class _Report:
    def __init__(self, diags, origins):
        self.diags = diags
        self.origins = origins  # id(spec) -> _Origins
        self.done = set()  # (entity or spec, name): one message per spec name and emitted name

    def explain(self, spec, d):
        return self.origins[id(spec)].explain(d)

    def collision(self, spec_a, a, spec_b, b, there=False):
        """Name b (of spec_b) collides with a (of spec_a): reported at the
        spec name behind b, or behind a when b is the templates' own."""
        ea, sa = self.explain(spec_a, a)
        eb, sb = self.explain(spec_b, b)
        if eb is None and ea is not None:
            (spec_a, a, ea, sa), (spec_b, b, eb, sb) = (spec_b, b, eb, sb), (spec_a, a, ea, sa)
        if eb is None:  # both the templates' own: a generator bug, still no traceback
            self._error(spec_b, None, b.name, "the generated %s declares %s twice (%s; %s)" % (
                b.path, b.name, _what(a, sa), _what(b, sb)), "this is a klaunch bug; please report it with the spec")
            return
        where = "" if ea is None or ea.spec is eb.spec else " in %s" % ea.spec.path
        if ea is None:
            other = "which the generated code also declares%s (%s)" % (" there" if there else "", _what(a, sa))
            hint = "rename the %s" % eb.kind
        else:
            other = "which %s%s also makes (%s)" % (ea.label, where, _what(a, sa))
            hint = "rename one of them"
        # One error per pair of spec names, however many names they both make.
        self._error(spec_b, eb, id(ea) if ea is not None else b.name, "%s makes %s (%s), %s" % (eb.label, b.name, _what(b, sb), other), hint)

    def runtime(self, spec, d):
        e, shape = self.explain(spec, d)
        label = e.label if e is not None else "family '%s'" % spec.family
        self._error(spec, e, "runtime " + d.name, "%s makes %s (%s), a name of the klaunch runtime" % (label, d.name, _what(d, shape)),
                    "rename it; include/klaunch/*.h declares %s" % d.name)

    def _error(self, spec, entity, other, message, hint):
        """Reported once per (spec name, other side)."""
        key = (id(entity) if entity is not None else id(spec), other)
        if key in self.done:
            return
        self.done.add(key)
        pos = entity.pos if entity is not None else spec.family_pos
        self.diags.error(spec.path if entity is None else entity.spec.path, pos, message, hint)


def _fine_together(a, b):
    """Two declarations of one name that C accepts and that mean one thing."""
    if a.exclusive_with(b):
        return True
    # One include-once region, written alike in two files.
    return a.guard is not None and a.guard == b.guard and a.path != b.path


def check_outputs(specs, rendered, runtime_names, fatbins, diags):
    """rendered: [(spec, h_text, cuh_text)] for every spec of the run;
    runtime_names: what include/klaunch/*.h declares; fatbins: [(spec,
    symbol, position, origin, what)], the symbols the build defines."""
    # The scan makes a few objects per generated line and none of them
    # cycles: without the cyclic collector's passes over them it is 40% faster.
    enabled = gc.isenabled()
    gc.disable()
    try:
        _check_outputs(specs, rendered, runtime_names, fatbins, diags)
    finally:
        if enabled:
            gc.enable()


def _check_outputs(specs, rendered, runtime_names, fatbins, diags):
    origins = {id(s): _Origins(s) for s in specs}
    report = _Report(diags, origins)
    h_scope = {}  # name -> [(spec, Decl)]: every C header together
    scans = []
    for s, h_text, cuh_text in rendered:
        h = declared.scan(h_text, "klaunch/%s.h" % s.family)
        cuh = declared.scan(cuh_text, "klaunch/%s.cuh" % s.family, keep_code=True)
        scans.append((s, h, cuh))
        for d in h.file_scope:
            h_scope.setdefault(d.name, []).append((s, d))
    for s, symbol, pos, origin, what in fatbins:
        e = Entity("variant", symbol, pos, origin, s)
        h_scope.setdefault(symbol, []).append((s, Extra(symbol, "klaunch/%s.h" % s.family, e, what)))

    _same_scope(h_scope, report)
    for name, decls in h_scope.items():
        if name in runtime_names:
            for s, d in decls:
                report.runtime(s, d)
    for s, h, cuh in scans:
        cuh_scope = {}
        for d in cuh.file_scope:
            cuh_scope.setdefault(d.name, []).append((s, d))
        _same_scope(cuh_scope, report)
        for scan, outer in ((h, h_scope), (cuh, cuh_scope)):
            _functions(s, scan, outer, runtime_names, report)
        _constants(s, cuh, report)


def _same_scope(scope, report):
    for name, decls in scope.items():
        if len(decls) < 2:
            continue
        for j in range(1, len(decls)):
            sb, b = decls[j]
            for i in range(j):
                sa, a = decls[i]
                if not _fine_together(a, b):
                    report.collision(sa, a, sb, b)
                    break


def _functions(spec, scan, outer, runtime_names, report):
    """Parameters and locals: unique along each chain of nested blocks, and
    no file-scope name of the headers or the runtime taken."""
    seen = {}  # (function, name) -> [Decl]: decls come function by function
    for b in scan.decls:
        if b.function is None:
            continue
        key = (id(b.function), b.name)
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = [b]
            shadowed = outer.get(b.name)
            if shadowed:
                shadowed = [x for x in shadowed if x[1] is not b.function]
            if shadowed:
                report.collision(shadowed[0][0], shadowed[0][1], spec, b)
            elif b.name in runtime_names:
                report.runtime(spec, b)
            continue
        for a in earlier:
            if a.block == b.block[: len(a.block)] or b.block == a.block[: len(b.block)]:
                report.collision(spec, a, spec, b, there=True)
                break
        earlier.append(b)


_DEFINE = r"^[ \t]*#[ \t]*define[ \t]+(?:%s)\b"


def _constants(spec, cuh, report):
    """A constant is a macro from its #define on: the kernel-side header
    must not use its name anywhere else."""
    names = []
    for v in spec.variants:
        names += [n for n, _ in v.constants if n not in names]
    if not names:
        return
    alternation = "|".join(re.escape(n) for n in names)
    code = re.sub(_DEFINE % alternation, " ", cuh.code, flags=re.M)
    used = set(re.findall(r"\b(?:%s)\b" % alternation, code))
    for n in names:
        if n not in used:
            continue
        v = next(v for v in spec.variants if any(c == n for c, _ in v.constants))
        e = Entity("constant", n, v.const_pos.get(n, v.pos), "constant '%s'" % n, spec)
        report._error(spec, e, n, "constant name '%s' is a name the generated kernel-side header uses after the constants are "
                      "#defined" % n, "the macro would replace it there; rename the constant")
