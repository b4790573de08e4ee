"""What templates/operations.h.j2 reads: one view per spec operation.

The chooser (klaunch/choose.h says what it does) evaluates, for each
alternative, the checks of its launcher that the shape decides: those
whose every name is a shape parameter the launcher takes, a tunable of
the alternative or a variant constant. Their C is the launcher's own
(emit.CheckView), so a chosen launcher passes kl_X_check for the shape.
"""

from . import expr as ex
from . import schema
from .operations import DEVICE_FIELDS

_DEVICE = dict(DEVICE_FIELDS)
_GRID_LIMIT = {"x": "KL__GRID_X_MAX", "y": "KL__GRID_YZ_MAX", "z": "KL__GRID_YZ_MAX"}
_BLOCK_LIMIT = {"x": "KL__BLOCK_XY_MAX", "y": "KL__BLOCK_XY_MAX", "z": "KL__BLOCK_Z_MAX"}


class _Resolver:
    def __init__(self, names):
        self.names = names  # name -> Type

    def __call__(self, name):
        return ex.Binding("param", name, ptype=self.names[name])

    def candidates(self):
        return list(self.names)


class ExprView:
    """A chooser expression's C, its temporaries and whether it can fail."""

    def __init__(self, e, resolver):
        self.text = e.text
        self.c, self.temps = ex.to_c(e.tree, resolver)
        self.can_fail = ex.can_fail(e.tree, resolver)
        self.names = e.names


class AltView:
    def __init__(self, op, index, alt, lview):
        l = alt.launcher
        self.name = alt.name
        self.index = index
        self.macro = "KL_%s_%s" % (op.name.upper(), alt.name.upper())
        self.launcher = l.name
        self.doc = alt.doc
        self.fits = "kl__%s_%s_fits" % (op.name, alt.name)
        tunable_names = [t for t, _ in alt.tunables]
        # The launcher's parameters by index (collisions.py renders a copy
        # whose parameter names are tags): what each one is in the shape.
        of_param = {i: ("shape", n) for n, i in alt.shape_index.items()}
        of_param.update({i: ("tunable", op.tunables.index(t)) for t, i in alt.tunable_index.items()})
        decided = {l.params[i].name for i in of_param} | set(l.const_names)
        read = set()

        def decides(c):
            if c is None or any(n not in decided for n in c.args):
                return False
            read.update(n for n in c.args if n not in l.const_names)
            return True

        self.steps = []  # (kind, CheckView, extra)
        for c in lview.preconditions:
            if decides(c.check):
                self.steps.append(("precondition", c, None))
        for axis, i, c in lview.grid:
            if c is not None and c.value is None and decides(c.check):
                self.steps.append(("grid", c, _GRID_LIMIT[axis]))
        block_known = True
        self.block_terms = []
        for axis, i, c in lview.block:
            if c is None:
                continue
            if c.value is not None:
                self.block_terms.append("%du" % c.value)
            elif decides(c.check):
                self.steps.append(("block", c, (_BLOCK_LIMIT[axis], i)))
                self.block_terms.append("kl__b%d" % i)
            else:
                block_known = False
        self.block_axes = [i for k, c, x in self.steps if k == "block" for i in [x[1]]]
        self.threads_const = lview.block_threads_const
        self.threads_check = block_known and self.threads_const is None
        if lview.shared is not None and decides(lview.shared.check):
            self.steps.append(("shared", lview.shared, None))
        for x in lview.extents:
            if x.check is not None and x.check.can_fail and decides(x.check.check):
                self.steps.append(("extent", x.check, x.rows_c))
        self.uses_err = any(c.can_fail for _, c, _ in self.steps)
        self.uses_v = any(k in ("grid", "block", "shared", "extent") for k, _, _ in self.steps)
        self.temps = ["kl__t%d" % i for i in range(max([c.temps for _, c, _ in self.steps] + [0]))]
        ptypes = {p.name: p.type for p in l.params}
        picked = [i for i, p in enumerate(l.params) if p.name in read]  # launcher order
        self.params = [l.params[i] for i in picked]
        self.param_decls = ["%s %s" % (p.type.c, p.name) for p in self.params]
        self.tunables = []  # (name, index in op.tunables, ExprView of the default)
        self.tunable_names = tunable_names
        self.mask = 0
        self._args = [of_param[i] for i in picked]
        self.when = None
        self.ptypes = ptypes

    def call_args(self, tunables):
        """The arguments of the fits function: shape fields and tunables[]."""
        out = []
        for kind, v in self._args:
            out.append("kl__c->shape->%s" % v if kind == "shape" else "%s[%d]" % (tunables, v))
        return out


class OperationView:
    def __init__(self, spec, op, lviews):
        self.op = op
        self.name = op.name
        self.upper = op.name.upper()
        self.doc = op.doc
        self.line, self.col = op.pos
        self.spec_path = spec.path
        self.shape = [(p.name, p.type.c if p.type.name != "bool" else "bool", p.doc) for p in op.shape]
        self.keys = op.keys
        self.tunables = op.tunables
        self.alternatives = [AltView(op, i, a, lviews[a.launcher.name]) for i, a in enumerate(op.alternatives)]
        by_name = {a.name: a for a in self.alternatives}
        for a in self.alternatives:
            a.mask = sum(1 << op.tunables.index(t) for t in a.tunable_names)
            a.mask_c = "%du" % a.mask
        names = {p.name: p.type for p in op.shape}
        for n, t in DEVICE_FIELDS:
            names[n] = schema_type(t)
        for n, _, _ in op.values:
            names[n] = schema_type("u64")
        r = _Resolver(names)
        exprs = []
        for a, alt in zip(self.alternatives, op.alternatives):
            if alt.when is not None:
                a.when = ExprView(alt.when, r)
                exprs.append(a.when)
            for t, e in alt.tunables:
                v = ExprView(e, r)
                a.tunables.append((t, op.tunables.index(t), v))
                exprs.append(v)
        self.fallback = []
        for alt, cond in op.fallback:
            v = ExprView(cond, r) if cond is not None else None
            if v is not None:
                exprs.append(v)
            self.fallback.append((by_name[alt.name], v))
        # Locals of the chooser: what its expressions and values read.
        read = set()
        for v in exprs:
            read.update(v.names)
        values = {n: (fn, args) for n, fn, args in op.values}
        pending = [n for n in read if n in values]
        while pending:
            n = pending.pop()
            for kind, a in values[n][1]:
                if kind == "name" and a not in read:
                    read.add(a)
                    if a in values:
                        pending.append(a)
        self.shape_locals = [(n, c) for n, c, _ in self.shape if n in read]
        self.device_locals = [(n, "uint64_t" if t == "u64" else "uint32_t") for n, t in DEVICE_FIELDS if n in read]
        self.values = []
        for n, fn, args in op.values:
            if n not in read:
                continue
            parts = [str(a) + "u" if k == "int" else a for k, a in args]
            self.values.append((n, "%s(%s)" % (fn, ", ".join(parts))))
        self.uses_err = any(v.can_fail for v in exprs)
        self.temps = ["kl__t%d" % i for i in range(max([v.temps for v in exprs] + [0]))]
        self.has_defaults = any(a.tunables for a in self.alternatives)


def schema_type(name):
    from .model import Type
    return Type(name)


def operation_views(spec, lviews):
    by = {v.name: v for v in lviews}
    return [OperationView(spec, op, by) for op in spec.operations]


def includes(spec):
    out = []
    for op in spec.operations:
        for h in op.includes:
            if h not in out:
                out.append(h)
    return out
