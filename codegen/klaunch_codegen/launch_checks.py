"""The launch geometry checks of a launcher: what its grid, block, shared
memory, max_dynamic_shared and launch_attributes must meet, decided from
the spec alone (literals, every variant's constants, the parameters'
types). A mixin of validate._Validator, whose err() and failed they use;
kept apart so the validator reads as the walk over the spec's structure.
"""

from . import expr as ex
from . import ranges as rg
from .model import Variant
from .schema import (
    ATTRIBUTE_KEYS,
    BLOCK_LIMITS,
    CLUSTER_MAX,
    DEFAULT_DYNAMIC_SHARED,
    DIM_KEYS,
    GRID_LIMITS,
    THREADS_MAX,
    U32_MAX,
)
from .yamlpos import BOOL, INT, is_scalar, kind_of, node_pos, scalar_bool


class LaunchChecks:
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
        params = {p.name: p.type.name for p in launcher.params
                  if p.type is not None and not p.type.is_pointer and not p.type.is_tensor_map}
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

            if any(isinstance(n, ex.Compare) for n in ex.walk(c.expr.tree)):
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
            same_everywhere = None  # a check reading no constant: one evaluation serves every variant
            for vname, env in env_of:
                if vname in refused or any(n not in env for n in c.args if n not in params):
                    continue
                if reads_const or same_everywhere is None:
                    r = rg.Evaluator(params, env).evaluate(c.expr.tree)
                    if not reads_const:
                        same_everywhere = r
                else:
                    r = same_everywhere
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
