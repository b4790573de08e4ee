"""What a launch expression can be, before any launch: interval evaluation.

A number is an interval [lo, hi] of uint64 values, a condition the set of
truth values it can take; each also says whether evaluating it can fail
(overflow, underflow or division by zero, as the generated C detects
them): never, maybe, or always. Parameters take their type's range (u32:
0 to 2^32-1; i32: 0 to 2^31-1, a negative value failing), variant
constants their value in one variant, or, where the question is what the
compiler can prove, any value. Evaluation follows the generated C: left
operand first, `and`/`or` short-circuit, chained comparisons stop at the
first false pair.

validate.py asks, per variant: does a check always fail, is a
precondition never true, is a grid extent always 0 or a block extent
always over its limit; and, with constants unknown, is a comparison
decided by its parameters' types alone (the compiler proves such a one
always true or false and -Werror rejects it).
"""

from . import expr as ex

NEVER, MAYBE, ALWAYS = 0, 1, 2
U64 = ex.U64_MAX

_RANGE = {"u32": (0, (1 << 32) - 1), "u64": (0, U64), "i32": (0, (1 << 31) - 1)}


class Num:
    __slots__ = ("lo", "hi", "fail", "why")

    def __init__(self, lo, hi, fail=NEVER, why=None):
        self.lo, self.hi, self.fail, self.why = lo, hi, fail, why


class Cond:
    __slots__ = ("can_true", "can_false", "fail", "why")

    def __init__(self, can_true, can_false, fail=NEVER, why=None):
        self.can_true, self.can_false, self.fail, self.why = can_true, can_false, fail, why


def _failed(why):
    return Num(0, 0, ALWAYS, why)


def _worst(*values):
    fail = max(v.fail for v in values)
    why = next((v.why for v in values if v.fail == fail and v.why), None)
    return fail, why


class Evaluator:
    """evaluate(node) over one environment.

    consts: {name: int} of one variant, or None for "any value" (what the
    compiler knows). params: {name: spec type name}. on_compare(node, cond)
    is called for every comparison pair evaluated with its result."""

    def __init__(self, params, consts, on_compare=None):
        self.params = params
        self.consts = consts
        self.on_compare = on_compare

    def evaluate(self, n):
        if isinstance(n, ex.Num):
            return Num(n.value, n.value)
        if isinstance(n, ex.Name):
            return self.name(n.name)
        if isinstance(n, ex.BinOp):
            return self.binop(n)
        if isinstance(n, ex.Call):
            return self.call(n)
        if isinstance(n, ex.Compare):
            return self.compare(n)
        if isinstance(n, ex.BoolOp):
            return self.boolop(n)
        if isinstance(n, ex.Not):
            c = self.evaluate(n.operand)
            return Cond(c.can_false, c.can_true, c.fail, c.why)
        raise AssertionError(n)

    def name(self, name):
        t = self.params.get(name)
        if t == "bool":
            return Cond(True, True)
        if t is not None:
            lo, hi = _RANGE[t]
            return Num(lo, hi, MAYBE if t == "i32" else NEVER, "overflow" if t == "i32" else None)
        if self.consts is None:
            # kl__x_signed(kernel->consts[i]): negative fails.
            return Num(0, U64, MAYBE, "overflow")
        v = self.consts[name]
        return _failed("negative") if v < 0 else Num(v, v)

    def binop(self, n):
        a = self.evaluate(n.left)
        if a.fail == ALWAYS:
            return a
        b = self.evaluate(n.right)
        if b.fail == ALWAYS:
            return b
        fail, why = _worst(a, b)
        op = n.op
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            if a.hi < b.lo:
                return _failed("overflow")
            lo, hi = max(a.lo - b.hi, 0), a.hi - b.lo
            if a.lo < b.hi:
                fail, why = max(fail, MAYBE), why or "overflow"
        elif op == "*":
            lo, hi = a.lo * b.lo, a.hi * b.hi
        else:  # / %
            if b.hi == 0:
                return _failed("division_by_zero")
            if b.lo == 0:
                fail, why = max(fail, MAYBE), why or "division_by_zero"
            if op == "/":
                lo, hi = a.lo // b.hi, a.hi // max(b.lo, 1)
            elif a.hi < b.lo:
                lo, hi = a.lo, a.hi
            else:
                lo, hi = 0, min(a.hi, b.hi - 1)
        return self._fit(lo, hi, fail, why)

    @staticmethod
    def _fit(lo, hi, fail, why):
        if lo > U64:
            return _failed("overflow")
        if hi > U64:
            return Num(lo, U64, max(fail, MAYBE), why or "overflow")
        return Num(lo, hi, fail, why)

    def call(self, n):
        a = self.evaluate(n.args[0])
        if a.fail == ALWAYS:
            return a
        b = self.evaluate(n.args[1])
        if b.fail == ALWAYS:
            return b
        fail, why = _worst(a, b)
        if n.func == "max":
            return Num(max(a.lo, b.lo), max(a.hi, b.hi), fail, why)
        if n.func == "min":
            return Num(min(a.lo, b.lo), min(a.hi, b.hi), fail, why)
        if b.hi == 0:
            return _failed("division_by_zero")
        if b.lo == 0:
            fail, why = max(fail, MAYBE), why or "division_by_zero"
        return Num(-(-a.lo // b.hi), -(-a.hi // max(b.lo, 1)), fail, why)

    def compare(self, n):
        result = Cond(True, False)
        for op, left, right in zip(n.ops, n.operands, n.operands[1:]):
            a = self.evaluate(left)
            b = a if a.fail == ALWAYS else self.evaluate(right)
            if a.fail == ALWAYS or b.fail == ALWAYS:
                pair = Cond(False, False, ALWAYS, (a if a.fail == ALWAYS else b).why)
            else:
                t, f = _truths(op, a, b)
                fail, why = _worst(a, b)
                pair = Cond(t, f, fail, why)
                if self.on_compare is not None:
                    self.on_compare(left, op, right, pair)
            result = _and(result, pair)
            if not result.can_true:
                break
        return result

    def boolop(self, n):
        result = self.evaluate(n.values[0])
        for v in n.values[1:]:
            if result.fail == ALWAYS:
                break
            if n.op == "and" and not result.can_true:
                break
            if n.op == "or" and not result.can_false:
                break
            nxt = self.evaluate(v)
            result = _and(result, nxt) if n.op == "and" else _or(result, nxt)
        return result


def _and(a, b):
    """a and b, b evaluated only where a is true."""
    if a.fail == ALWAYS:
        return a
    if not a.can_true:
        return a
    fail = a.fail
    why = a.why
    if b.fail != NEVER:
        # Reached for certain only when a cannot be false.
        bf = b.fail if not a.can_false else MAYBE
        if bf > fail:
            fail, why = bf, b.why
    if b.fail == ALWAYS and not a.can_false:
        return Cond(False, False, ALWAYS, b.why)
    return Cond(b.can_true, a.can_false or b.can_false, fail, why)


def _or(a, b):
    if a.fail == ALWAYS:
        return a
    if not a.can_false:
        return a
    fail = a.fail
    why = a.why
    if b.fail != NEVER:
        bf = b.fail if not a.can_true else MAYBE
        if bf > fail:
            fail, why = bf, b.why
    if b.fail == ALWAYS and not a.can_true:
        return Cond(False, False, ALWAYS, b.why)
    return Cond(a.can_true or b.can_true, b.can_false, fail, why)


def _truths(op, a, b):
    """(can be true, can be false) of `a op b` over intervals."""
    if op == "<":
        return a.lo < b.hi, a.hi >= b.lo
    if op == "<=":
        return a.lo <= b.hi, a.hi > b.lo
    if op == ">":
        return a.hi > b.lo, a.lo <= b.hi
    if op == ">=":
        return a.hi >= b.lo, a.lo < b.hi
    overlap = a.lo <= b.hi and b.lo <= a.hi
    single = a.lo == a.hi == b.lo == b.hi
    if op == "==":
        return overlap, not single
    return not single, overlap  # !=
