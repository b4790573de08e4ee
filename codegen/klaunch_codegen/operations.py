"""A spec's `operations:` (docs/DESIGN.md, "Operations"; issue 45).

An operation is one computation several launchers of the family implement
(its alternatives); the generator emits a chooser for it
(templates/operations.h.j2, klaunch/choose.h). This module validates the
key, reporting into the spec validator's collector like the rest of
validate.py, and builds model.Operation objects.

    operations:
      - name: paged_decode_gqa_bf16
        doc: text
        include: klaunch/paged_decode_split.h     # the helpers `values` call
        shape:                                    # the chooser's inputs
          - num_seqs: u32
          - {name: aligned, type: bool, doc: text}
        keys: {num_seqs: log2, num_kv_heads: exact}   # what a table is keyed by
        values:                                   # computed once per choice
          splits: {call: kl_paged_decode_num_splits, args: [num_seqs, sm_count, 16]}
        alternatives:
          - name: mma_split
            launcher: paged_decode_split_bf16_gqa_mma
            when: persistent_ok                   # what the launcher cannot check
            tunables: {num_splits: splits}        # launcher parameter: default
        fallback:                                 # the rule without a table
          - {use: mma_split, if: splits > 1}
          - mma_seed
"""

import re

from . import expr as ex
from . import names as nm
from .model import Alternative, Operation, Type
from .yamlpos import NULL, STR, is_mapping, is_scalar, is_sequence, kind_of, node_pos

OPERATION_KEYS = ("name", "doc", "include", "shape", "keys", "values", "alternatives", "fallback")
OPERATION_REQUIRED = ("name", "shape", "alternatives")
SHAPE_KEYS = ("name", "type", "doc")
SHAPE_TYPES = ("u32", "u64", "i32", "bool")
KEY_KINDS = ("exact", "log2")
VALUE_KEYS = ("call", "args")
ALTERNATIVE_KEYS = ("name", "launcher", "doc", "when", "tunables")
FALLBACK_KEYS = ("use", "if")
# What the chooser reads of the device (kl_device in klaunch/choose.h).
DEVICE_FIELDS = (("cc_major", "u32"), ("cc_minor", "u32"), ("sm_count", "u32"), ("l2_bytes", "u64"),
                 ("mem_bytes", "u64"), ("mem_bandwidth_gbs", "u32"))
# The chooser's own parameters: no shape parameter or value may take them.
CHOOSER_PARAMS = ("shape", "device", "table", "policy", "kernels")
# klaunch/choose.h's limits (KL_CHOICE_MAX_KEYS, KL_CHOICE_MAX_TUNABLES) and
# the alternatives a u32 bit mask and a row's fields can count.
MAX_KEYS = 6
MAX_TUNABLES = 4
MAX_ALTERNATIVES = 32
_HELPER_CONST = re.compile(r"KL_[A-Z0-9_]+\Z")
_INCLUDE = re.compile(r"klaunch/[a-z0-9_]+\.h\Z")


class _Resolver:
    """Names an operation's expressions read: shape parameters, device
    fields and values, each an integer (or bool) of the chooser."""

    def __init__(self, bindings):
        self.bindings = bindings  # name -> Type, or None for a value refused (reported once)

    def __call__(self, name):
        if name not in self.bindings:
            return None
        return ex.Binding("param", name, ptype=self.bindings[name])

    def candidates(self):
        return list(self.bindings)


_LAUNCHER_HINT = "expressions read this launcher's parameters and the family's variant constants"
_OPERATION_HINT = "an operation's expressions read its shape parameters, its values and the device's " + ", ".join(
    n for n, _ in DEVICE_FIELDS)


def _expression(v, node, what, label, resolver, want):
    """v.expression, its messages worded for an operation's expressions."""
    report = v.err

    def err(pos, message, hint):
        if hint == _LAUNCHER_HINT:
            hint = _OPERATION_HINT
        report(pos, message.replace("a precondition must be a condition", "it must be a condition"), hint)

    v.err = err
    try:
        return v.expression(node, what, label, resolver, want)
    finally:
        del v.err


def _runtime_text(header):
    try:
        d = nm.runtime_dir()
    except Exception:  # noqa: BLE001 -- reported as a missing header
        return None
    path = d + "/" + header.split("/", 1)[1]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return nm._code_only(f.read())
    except OSError:
        return None


def validate_operations(v, node, spec, launcher_names):
    """Reads `operations:` into spec.operations, reporting through the
    validator `v`. launcher_names: every launcher name the spec's list
    holds, valid or not (one already reported is not reported again)."""
    if not v.want_list(node, "operations", "declare at least one operation, or leave operations out"):
        return
    launchers = {l.name: l for l in spec.launchers}
    seen = {}
    for item in node.value:
        if not v.want_mapping(item, "an operation"):
            continue
        op = _operation(v, item, spec, launchers, launcher_names)
        if op is None:
            continue
        if op.name in seen:
            v.err(op.pos, "duplicate operation '%s'" % op.name, "the first is at line %d" % seen[op.name].pos[0])
            continue
        if op.name in launchers:
            v.err(op.pos, "operation '%s' has the name of a launcher" % op.name,
                  "kl_%s_choose and kl_%s would read as one thing; name the operation for what it computes" % (op.name, op.name))
            continue
        seen[op.name] = op
        spec.operations.append(op)


def _label_of(item):
    for knode, vnode in item.value:
        if is_scalar(knode) and knode.value == "name" and is_scalar(vnode):
            return "operation '%s'" % vnode.value
    return "an operation"


def _operation(v, item, spec, launchers, launcher_names):
    label = _label_of(item)
    where = "in " + label
    f = v.fields(item, where, OPERATION_KEYS, OPERATION_REQUIRED)
    name = v.ident(f["name"][1], "operation name") if "name" in f else None
    if name is None:
        return None
    op = Operation(name, node_pos(f["name"][1]))
    op.doc = v.doc(f)
    failed_at = len(v.diags)
    bindings = {}
    device = dict((n, Type(t)) for n, t in DEVICE_FIELDS)
    # include: the runtime headers whose helpers `values` call
    texts = []
    if "include" in f:
        inode = f["include"][1]
        items = inode.value if is_sequence(inode) else [inode]
        for n in items:
            if not is_scalar(n) or n.tag != STR or not _INCLUDE.match(n.value):
                got = "'%s'" % n.value if is_scalar(n) else kind_of(n)
                v.err(node_pos(n), "include of %s must name a klaunch runtime header, got %s" % (label, got),
                      "e.g. include: klaunch/paged_decode_split.h (a file of include/klaunch/)")
                continue
            text = _runtime_text(n.value)
            if text is None:
                v.err(node_pos(n), "include of %s: include/%s does not exist" % (label, n.value),
                      "name a header of include/klaunch/, where the helpers its values call are")
                continue
            op.includes.append(n.value)
            texts.append(text)
    # shape
    if "shape" in f and v.want_list(f["shape"][1], "shape of %s" % label, "list the parameters the choice depends on"):
        for p in f["shape"][1].value:
            _shape_param(v, p, op, label, bindings, device)
    # keys
    if "keys" in f:
        knode = f["keys"][1]
        if v.want_mapping(knode, "keys of %s" % label):
            for kn, vn in knode.value:
                if not is_scalar(kn):
                    v.err(node_pos(kn), "a key of %s is %s" % (label, kind_of(kn)), "keys are shape parameter names")
                    continue
                k = kn.value
                sp = op.shape_param(k)
                if sp is None:
                    guess = ex.did_you_mean(k, [p.name for p in op.shape])
                    v.err(node_pos(kn), "key '%s' of %s is no shape parameter" % (k, label),
                          ("did you mean '%s'?" % guess) if guess else "a table is keyed by shape parameters; list it under shape")
                    continue
                if any(n == k for n, _ in op.keys):
                    v.err(node_pos(kn), "key '%s' of %s is given twice" % (k, label), "give each key once")
                    continue
                if sp.type.name != "u32":
                    v.err(node_pos(kn), "key '%s' of %s is %s; a table keys by u32 shape parameters" % (k, label, sp.type.name),
                          "facts such as a bool are conditions (when:), not keys")
                    continue
                if not is_scalar(vn) or vn.value not in KEY_KINDS:
                    got = "'%s'" % vn.value if is_scalar(vn) else kind_of(vn)
                    v.err(node_pos(vn), "key '%s' of %s must be exact or log2, got %s" % (k, label, got),
                          "log2: a shape goes to the tabled value nearest in log2; exact: only that value")
                    continue
                op.keys.append((k, vn.value))
                sp.used = True
            if len(op.keys) > MAX_KEYS:
                v.err(node_pos(knode), "%s has %d keys; at most %d" % (label, len(op.keys), MAX_KEYS),
                      "KL_CHOICE_MAX_KEYS in klaunch/choose.h")
    # values
    if "values" in f:
        vnode = f["values"][1]
        if v.want_mapping(vnode, "values of %s" % label):
            for kn, val in vnode.value:
                _value(v, kn, val, op, label, bindings, device, texts)
    resolver = _Resolver(dict(list(device.items()) + list(bindings.items())))
    # alternatives
    if "alternatives" in f and v.want_list(f["alternatives"][1], "alternatives of %s" % label, "list the launchers that implement it"):
        for a in f["alternatives"][1].value:
            _alternative(v, a, op, label, launchers, launcher_names, resolver)
        if len(op.alternatives) > MAX_ALTERNATIVES:
            v.err(node_pos(f["alternatives"][1]), "%s has %d alternatives; at most %d" % (label, len(op.alternatives), MAX_ALTERNATIVES),
                  "split the operation")
    tunables = []
    for a in op.alternatives:
        for t, _ in a.tunables:
            if t not in tunables:
                tunables.append(t)
    op.tunables = tunables
    if len(tunables) > MAX_TUNABLES:
        v.err(op.pos, "%s has %d tunables; at most %d" % (label, len(tunables), MAX_TUNABLES), "KL_CHOICE_MAX_TUNABLES in klaunch/choose.h")
    # fallback
    if "fallback" in f and v.want_list(f["fallback"][1], "fallback of %s" % label, "list the rule's alternatives, first preferred"):
        used = {}
        for item in f["fallback"][1].value:
            if is_scalar(item) and item.tag == STR:
                use_node, cond = item, None
            elif is_mapping(item):
                ff = v.fields(item, "in the fallback of %s" % label, FALLBACK_KEYS, ("use",))
                if "use" not in ff:
                    continue
                use_node = ff["use"][1]
                cond = None
                if "if" in ff:
                    cond = _expression(v, ff["if"][1], "fallback condition", label, resolver, ex.COND)
                    if cond is None:
                        continue
                    _mark(op, cond.names)
            else:
                v.err(node_pos(item), "a fallback entry of %s is %s" % (label, kind_of(item)),
                      "write an alternative's name, or {use: NAME, if: CONDITION}")
                continue
            alt = op.alternative(use_node.value) if is_scalar(use_node) else None
            if alt is None and is_scalar(use_node) and use_node.value in op.refused_alternatives:
                continue  # reported where it is defined
            if alt is None:
                names = [a.name for a in op.alternatives]
                got = use_node.value if is_scalar(use_node) else kind_of(use_node)
                guess = ex.did_you_mean(str(got), names)
                v.err(node_pos(use_node), "fallback of %s names no alternative '%s'" % (label, got),
                      ("did you mean '%s'?" % guess) if guess else "expected one of %s" % ", ".join(names))
                continue
            if alt.name in used:
                v.err(node_pos(use_node), "fallback of %s names '%s' twice" % (label, alt.name),
                      "the first is at line %d; a later entry could never be reached unless its condition differs: merge the conditions with or" % used[alt.name])
                continue
            used[alt.name] = node_pos(use_node)[0]
            op.fallback.append((alt, cond))
    if len(v.diags) > failed_at:
        return None
    for p in op.shape:
        if not p.used:
            v.err(p.pos, "shape parameter '%s' of %s is not used" % (p.name, label),
                  "no alternative's launcher has a parameter of that name and no key, value, when, tunable or fallback reads it; remove it")
    for name_, (pos, used) in op.value_use.items():
        if not used:
            v.err(pos, "value '%s' of %s is not used" % (name_, label), "no tunable, when or fallback condition reads it; remove it")
    if len(v.diags) > failed_at:
        return None
    return op


def _mark(op, names):
    for n in names:
        p = op.shape_param(n)
        if p is not None:
            p.used = True
        if n in op.value_use:
            op.value_use[n] = (op.value_use[n][0], True)
            for m in op.value_reads.get(n, ()):
                _mark(op, [m])


def _name_ok(v, node, what, label, op, device):
    name = v.ident(node, what)
    if name is None:
        return None
    if name in CHOOSER_PARAMS:
        v.err(node_pos(node), "%s '%s' of %s is a parameter of the chooser" % (what, name, label),
              "kl_<operation>_choose takes %s; rename it" % ", ".join(CHOOSER_PARAMS))
        return None
    if name in device:
        v.err(node_pos(node), "%s '%s' of %s is a device field" % (what, name, label),
              "expressions read the device's %s by those names; rename it" % ", ".join(n for n, _ in DEVICE_FIELDS))
        return None
    if op.shape_param(name) is not None or name in op.value_use:
        v.err(node_pos(node), "%s '%s' of %s is defined twice" % (what, name, label), "shape parameters and values share one namespace")
        return None
    return name


def _shape_param(v, node, op, label, bindings, device):
    if not v.want_mapping(node, "a shape parameter of %s" % label):
        return
    keys = [k.value for k, _ in node.value if is_scalar(k)]
    if len(node.value) == 1 and keys and keys[0] not in SHAPE_KEYS:
        knode, tnode = node.value[0]
        doc = ""
    else:
        f = v.fields(node, "in a shape parameter of %s" % label, SHAPE_KEYS, ("name", "type"))
        if "name" not in f or "type" not in f:
            return
        knode, tnode = f["name"][1], f["type"][1]
        doc = v.doc(f)
    name = _name_ok(v, knode, "shape parameter", label, op, device)
    if name is None:
        return
    if not is_scalar(tnode) or tnode.value not in SHAPE_TYPES:
        got = "'%s'" % tnode.value if is_scalar(tnode) else kind_of(tnode)
        guess = ex.did_you_mean(tnode.value, SHAPE_TYPES) if is_scalar(tnode) and tnode.value else None
        v.err(node_pos(tnode), "shape parameter '%s' of %s has type %s (expected %s)" % (name, label, got, ", ".join(SHAPE_TYPES)),
              ("did you mean '%s'?" % guess) if guess else "a shape is integers and facts (bool) the choice depends on")
        return
    p = op.add_shape(name, Type(tnode.value), doc, node_pos(knode))
    bindings[name] = p.type


def _value(v, kn, val, op, label, bindings, device, texts):
    name = _name_ok(v, kn, "value", label, op, device)
    if name is None:
        return
    bindings[name] = None  # refused (and reported) until it is read below
    what = "value '%s' of %s" % (name, label)
    if not v.want_mapping(val, what):
        return
    f = v.fields(val, "in " + what, VALUE_KEYS, VALUE_KEYS)
    if "call" not in f or "args" not in f:
        return
    cnode, anode = f["call"][1], f["args"][1]
    fn = cnode.value if is_scalar(cnode) and cnode.tag == STR else None
    if fn is None or not re.match(r"kl_[a-z0-9_]+\Z", fn):
        v.err(node_pos(cnode), "%s calls %s, not a klaunch helper" % (what, "'%s'" % cnode.value if is_scalar(cnode) else kind_of(cnode)),
              "call a hand-written kl_* function of the operation's include")
        return
    if not any(re.search(r"\b%s\s*\(" % re.escape(fn), t) for t in texts):
        v.err(node_pos(cnode), "%s calls %s, which %s" % (what, fn, "the operation's include does not declare" if texts else "no include declares"),
              "add include: klaunch/<header>.h that defines it" if not texts else "check the name against the header")
        return
    if not is_sequence(anode):
        v.err(node_pos(anode), "args of %s must be a list, got %s" % (what, kind_of(anode)), "write args: [a, b, 16]")
        return
    args, reads = [], []
    for a in anode.value:
        text = a.value if is_scalar(a) and a.tag != NULL else None
        if text is None:
            v.err(node_pos(a), "an argument of %s is %s" % (what, kind_of(a)), "pass a shape parameter, device field, earlier value, integer or KL_ constant")
            return
        if _HELPER_CONST.match(text):
            if not any(re.search(r"\b%s\b" % re.escape(text), t) for t in texts):
                v.err(node_pos(a), "argument %s of %s is no constant of the operation's include" % (text, what), "check the name against the header")
                return
            args.append(("const", text))
            continue
        try:
            lit = ex.int_literal(text)
        except ex.ExprError:
            lit = None
        if lit is not None:
            if lit > (1 << 64) - 1:
                v.err(node_pos(a), "argument %s of %s does not fit in 64 bits" % (text, what), "pass a smaller integer")
                return
            args.append(("int", lit))
            continue
        if text in device or text in bindings:
            args.append(("name", text))
            if text not in device:
                reads.append(text)
            continue
        guess = ex.did_you_mean(text, list(bindings) + list(device))
        v.err(node_pos(a), "argument '%s' of %s is no shape parameter, device field or earlier value" % (text, what),
              ("did you mean '%s'?" % guess) if guess else "values read the shape, the device and the values before them")
        return
    op.values.append((name, fn, args))
    op.value_use[name] = (node_pos(kn), False)
    op.value_reads[name] = reads
    bindings[name] = Type("u64")


def _alternative(v, node, op, label, launchers, launcher_names, resolver):
    if not v.want_mapping(node, "an alternative of %s" % label):
        return
    f = v.fields(node, "in an alternative of %s" % label, ALTERNATIVE_KEYS, ("name", "launcher"))
    if "name" not in f or "launcher" not in f:
        return
    name = v.ident(f["name"][1], "alternative name")
    if name is None:
        return
    op.refused_alternatives.add(name)  # until it is added below
    alabel = "alternative '%s' of %s" % (name, label)
    if op.alternative(name) is not None:
        v.err(node_pos(f["name"][1]), "duplicate alternative '%s' in %s" % (name, label), "the first is at line %d" % op.alternative(name).pos[0])
        op.refused_alternatives.discard(name)
        return
    if name.upper() in ("NONE", "ALTERNATIVES"):
        v.err(node_pos(f["name"][1]), "%s is named like KL_<OP>_%s, which the header defines itself" % (alabel, name.upper()), "rename it")
        return
    lnode = f["launcher"][1]
    lname = lnode.value if is_scalar(lnode) else None
    launcher = launchers.get(lname) if lname is not None else None
    if launcher is None:
        if lname is not None and lname in launcher_names:
            return  # that launcher was refused, and said so
        guess = ex.did_you_mean(str(lname), list(launchers))
        v.err(node_pos(lnode), "%s names no launcher '%s' of the family" % (alabel, lname if lname is not None else kind_of(lnode)),
              ("did you mean '%s'?" % guess) if guess else "an alternative is one of the spec's launchers")
        return
    for other in op.alternatives:
        if other.launcher is launcher:
            v.err(node_pos(lnode), "%s names launcher %s, which alternative '%s' names too" % (alabel, lname, other.name),
                  "an alternative is one launcher; give its tunables different defaults in one alternative")
            return
    alt = Alternative(name, node_pos(f["name"][1]), launcher)
    alt.doc = v.doc(f)
    params = {p.name: p for p in launcher.params}
    index = {p.name: i for i, p in enumerate(launcher.params)}
    for sp in op.shape:
        lp = params.get(sp.name)
        if lp is None:
            continue
        alt.shape_index[sp.name] = index[sp.name]
        sp.used = True
        if lp.type is None or lp.type.spec != sp.type.name:
            if not sp.mismatch_reported:  # once, at the first launcher that differs
                sp.mismatch_reported = True
                v.err(sp.pos, "shape parameter '%s' of %s is %s, but launcher %s takes it as %s" % (
                    sp.name, label, sp.type.name, lname, lp.type.spec if lp.type is not None else "?"),
                    "a shape parameter has its launchers' type")
    if "tunables" in f:
        tnode = f["tunables"][1]
        if v.want_mapping(tnode, "tunables of %s" % alabel):
            for kn, dn in tnode.value:
                t = kn.value if is_scalar(kn) else None
                lp = params.get(t) if t is not None else None
                if lp is None or lp.type is None or lp.type.spec != "u32":
                    got = "'%s'" % t if t is not None else kind_of(kn)
                    why = "no parameter of launcher %s" % lname if lp is None else "a %s parameter" % (lp.type.spec if lp.type else "?")
                    v.err(node_pos(kn), "tunable %s of %s is %s" % (got, alabel, why),
                          "a tunable is a u32 parameter of the launcher (a split count, a persistent grid)")
                    continue
                if op.shape_param(t) is not None:
                    v.err(node_pos(kn), "tunable '%s' of %s is a shape parameter" % (t, alabel), "the shape is given; a tunable is chosen")
                    continue
                if any(n == t for n, _ in alt.tunables):
                    v.err(node_pos(kn), "tunable '%s' of %s is given twice" % (t, alabel), "give it once")
                    continue
                e = _expression(v, dn, "default of tunable %s" % t, alabel, resolver, ex.INT)
                if e is None:
                    continue
                _mark(op, e.names)
                alt.tunables.append((t, e))
                alt.tunable_index[t] = index[t]
    if "when" in f:
        e = _expression(v, f["when"][1], "when", alabel, resolver, ex.COND)
        if e is not None:
            _mark(op, e.names)
            alt.when = e
    op.alternatives.append(alt)
    op.refused_alternatives.discard(name)
