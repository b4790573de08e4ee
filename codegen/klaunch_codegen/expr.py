"""The launch expression language: parse, check, translate to C, evaluate.

Grammar (Python's syntax and precedence, restricted):

    or_expr    := and_expr ('or' and_expr)*
    and_expr   := not_expr ('and' not_expr)*
    not_expr   := 'not' not_expr | comparison
    comparison := sum (('==' | '!=' | '<' | '<=' | '>' | '>=') sum)*   # chains like Python
    sum        := term (('+' | '-') term)*
    term       := atom (('*' | '/' | '%') atom)*
    atom       := INTEGER | NAME | NAME '(' or_expr ',' or_expr ')' | '(' or_expr ')'

Values are unsigned 64-bit integers; `/` truncates. Numbers and conditions
are distinct kinds: `and`, `or`, `not` take conditions (comparisons and
bool parameters), everything else takes numbers. The parser is our own,
not Python's `ast`, so that messages and columns do not change with the
Python version.
"""

import difflib
import re

INT = "number"
COND = "condition"

U64_MAX = (1 << 64) - 1
# Far past any launch expression, and low enough that the recursive walks
# here (parse, check, to_c, evaluate) stay within Python's recursion limit.
MAX_NESTING = 32  # parentheses, calls and `not`s inside one another
MAX_DEPTH = 64  # operations inside one another, e.g. a + b + ... is one per +
FUNCTIONS = ("ceil_div", "max", "min")
OPERATORS_HINT = "the operators are + - * / % == != < <= > >= and or not"


class ExprError(Exception):
    """A problem at character `offset` of the expression text."""

    def __init__(self, offset, message, hint):
        super().__init__(message)
        self.offset = offset
        self.message = message
        self.hint = hint


# ---- syntax tree ------------------------------------------------------------


class Node:
    pos = 0


class Num(Node):
    def __init__(self, value, pos):
        self.value, self.pos = value, pos


class Name(Node):
    def __init__(self, name, pos):
        self.name, self.pos = name, pos


class BinOp(Node):
    def __init__(self, op, left, right, pos):
        self.op, self.left, self.right, self.pos = op, left, right, pos


class Compare(Node):
    """a op1 b op2 c ...: (a op1 b) and (b op2 c), each operand read once in Python."""

    def __init__(self, ops, operands, pos):
        self.ops, self.operands, self.pos = ops, operands, pos


class BoolOp(Node):
    def __init__(self, op, values, pos):
        self.op, self.values, self.pos = op, values, pos


class Not(Node):
    def __init__(self, operand, pos):
        self.operand, self.pos = operand, pos


class Call(Node):
    def __init__(self, func, args, pos):
        self.func, self.args, self.pos = func, args, pos


# ---- tokens ------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<num>(?:0[xX][0-9A-Za-z_]*|[0-9][0-9A-Za-z_]*)(?:\.[0-9A-Za-z_]*)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|//|<<|>>|==|!=|<=|>=|&&|\|\||[-+*/%(),<>&|^~!=\[\].:@?])
    """,
    re.VERBOSE,
)

_UNSUPPORTED = {
    "**": "use * (there is no power operator)",
    "//": "use / (it truncates)",
    "<<": "there are no shift operators; use * or /",
    ">>": "there are no shift operators; use * or /",
    "&": "there are no bitwise operators; " + OPERATORS_HINT,
    "|": "there are no bitwise operators; " + OPERATORS_HINT,
    "^": "there are no bitwise operators; " + OPERATORS_HINT,
    "~": "there are no bitwise operators; " + OPERATORS_HINT,
    "&&": "use and",
    "||": "use or",
    "!": "use not",
    "=": "use == to compare",
    "[": "there is no indexing; " + OPERATORS_HINT,
    ".": "there are no attributes or fractions; " + OPERATORS_HINT,
    "if": "there are no conditional expressions; " + OPERATORS_HINT,
    "else": "there are no conditional expressions; " + OPERATORS_HINT,
    "in": OPERATORS_HINT,
    "is": "use == or !=",
}
_KEYWORDS = {"and", "or", "not"}
_PY_WORDS = {"if", "else", "in", "is", "lambda", "for", "True", "False", "None"}
_CMP = ("==", "!=", "<", "<=", ">", ">=")


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind, text, pos):
        self.kind, self.text, self.pos = kind, text, pos

    def describe(self):
        return "the end of the expression" if self.kind == "end" else "'%s'" % self.text


def _tokenize(text):
    toks = []
    i = 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if not m:
            raise ExprError(i, "unexpected character %r in expression" % text[i], OPERATORS_HINT)
        kind = m.lastgroup
        tok = m.group(kind)
        if kind == "num":
            toks.append(_Tok("num", tok, i))
        elif kind == "name":
            toks.append(_Tok("kw" if tok in _KEYWORDS else "name", tok, i))
        elif kind == "op":
            toks.append(_Tok("op", tok, i))
        i = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _parse_int(tok):
    text = tok.text
    if "." in text:
        raise ExprError(tok.pos, "number '%s' has a fraction" % text, "expressions are unsigned integers")
    digits = text.replace("_", "")
    try:
        if digits[:2].lower() == "0x":
            value = int(digits[2:], 16)
        elif len(digits) > 1 and digits[0] == "0":
            raise ValueError
        else:
            value = int(digits, 10)
        if "__" in text or text.endswith("_") or "_" in text[:2]:
            raise ValueError
    except ValueError:
        raise ExprError(
            tok.pos,
            "malformed integer '%s'" % text,
            "write a decimal like 256 (no leading zeros or suffixes) or a hexadecimal like 0x100",
        )
    if value > U64_MAX:
        raise ExprError(tok.pos, "integer %s does not fit in 64 bits" % text, "the largest is 18446744073709551615")
    return value


def int_literal(text):
    """The value of an integer written as expressions write one, with an
    optional sign (variant constants may be negative); ExprError otherwise."""
    body = text.lstrip("+-")
    if len(text) - len(body) > 1 or not re.match(r"^[0-9][0-9A-Za-z_]*\Z", body):
        raise ExprError(0, "'%s' is not an integer" % text, "write a decimal like 256 (no leading zeros or suffixes) or a hexadecimal like 0x100")
    value = _parse_int(_Tok("num", body, len(text) - len(body)))
    return -value if text.startswith("-") else value


class _Parser:
    def __init__(self, text):
        self.toks = _tokenize(text)
        self.i = 0
        self.nesting = 0

    def nest(self, tok):
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise ExprError(tok.pos, "expression nests deeper than %d parentheses, calls or nots" % MAX_NESTING,
                            "a launch expression is a few operations; simplify it")

    def peek(self):
        return self.toks[self.i]

    def take(self):
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def at_op(self, *ops):
        t = self.peek()
        return t.kind == "op" and t.text in ops

    def at_kw(self, kw):
        t = self.peek()
        return t.kind == "kw" and t.text == kw

    def parse(self):
        node = self.or_expr()
        t = self.peek()
        if t.kind != "end":
            self._unexpected_after(t)
        return node

    def _unexpected_after(self, t):
        word = t.text
        if word in _UNSUPPORTED and (t.kind == "op" or word in _PY_WORDS):
            raise ExprError(t.pos, "unsupported operator '%s'" % word, _UNSUPPORTED[word])
        if t.kind == "op" and word == ")":
            raise ExprError(t.pos, "unbalanced ')'", "remove it or add the matching '('")
        raise ExprError(t.pos, "unexpected %s after a complete operand" % t.describe(), "an operator is missing; " + OPERATORS_HINT)

    def or_expr(self):
        first = self.and_expr()
        values = [first]
        while self.at_kw("or"):
            self.take()
            values.append(self.and_expr())
        return first if len(values) == 1 else BoolOp("or", values, first.pos)

    def and_expr(self):
        first = self.not_expr()
        values = [first]
        while self.at_kw("and"):
            self.take()
            values.append(self.not_expr())
        return first if len(values) == 1 else BoolOp("and", values, first.pos)

    def not_expr(self):
        if self.at_kw("not"):
            t = self.take()
            self.nest(t)
            node = Not(self.not_expr(), t.pos)
            self.nesting -= 1
            return node
        return self.comparison()

    def comparison(self):
        first = self.sum()
        ops, operands = [], [first]
        while self.at_op(*_CMP):
            ops.append(self.take().text)
            operands.append(self.sum())
        return first if not ops else Compare(ops, operands, first.pos)

    def sum(self):
        node = self.term()
        while self.at_op("+", "-"):
            op = self.take().text
            node = BinOp(op, node, self.term(), node.pos)
        return node

    def term(self):
        node = self.atom()
        while self.at_op("*", "/", "%"):
            op = self.take().text
            node = BinOp(op, node, self.atom(), node.pos)
        return node

    def atom(self):
        t = self.take()
        if t.kind == "num":
            return Num(_parse_int(t), t.pos)
        if t.kind == "name":
            if t.text in ("True", "False", "None"):
                raise ExprError(t.pos, "'%s' is not supported in expressions" % t.text, "compare numbers instead, e.g. x != 0")
            if t.text in _PY_WORDS:
                raise ExprError(t.pos, "unsupported operator '%s'" % t.text, _UNSUPPORTED.get(t.text, OPERATORS_HINT))
            if self.at_op("("):
                return self.call(t)
            return Name(t.text, t.pos)
        if t.kind == "op" and t.text == "(":
            self.nest(t)
            node = self.or_expr()
            self.nesting -= 1
            close = self.peek()
            if not (close.kind == "op" and close.text == ")"):
                if close.kind == "end":
                    raise ExprError(close.pos, "missing ')'", "the '(' at column %d is not closed" % (t.pos + 1))
                self._unexpected_after(close)
            self.take()
            return node
        if t.kind == "op" and t.text in ("-", "+"):
            raise ExprError(t.pos, "unary '%s' is not supported" % t.text, "expressions are unsigned; write the value without a sign")
        if t.kind == "op" and t.text in _UNSUPPORTED:
            raise ExprError(t.pos, "unsupported operator '%s'" % t.text, _UNSUPPORTED[t.text])
        if t.kind == "end":
            raise ExprError(t.pos, "expression ends where an operand is expected", "complete it, e.g. with a parameter name or a number")
        raise ExprError(t.pos, "expected an operand, got %s" % t.describe(), "an operand is a number, a parameter or constant name, a call or a parenthesized expression")

    def call(self, name_tok):
        self.nest(self.take())  # (
        args = []
        if not self.at_op(")"):
            while True:
                args.append(self.or_expr())
                if self.at_op(","):
                    self.take()
                    continue
                break
        close = self.peek()
        if not (close.kind == "op" and close.text == ")"):
            if close.kind == "end":
                raise ExprError(close.pos, "missing ')' of the call to '%s'" % name_tok.text, "close the argument list")
            self._unexpected_after(close)
        self.take()
        self.nesting -= 1
        return Call(name_tok.text, args, name_tok.pos)


def parse(text):
    """The syntax tree of `text`; raises ExprError at the first syntax problem."""
    if not text.strip():
        raise ExprError(0, "empty expression", "write a number, a parameter name or an expression of them")
    tree = _Parser(text).parse()
    _check_depth(tree)
    return tree


def _children(n):
    if isinstance(n, BinOp):
        return (n.left, n.right)
    if isinstance(n, Compare):
        return n.operands
    if isinstance(n, BoolOp):
        return n.values
    if isinstance(n, Not):
        return (n.operand,)
    if isinstance(n, Call):
        return n.args
    return ()


def _check_depth(tree):
    """ExprError when operations nest deeper than MAX_DEPTH (iteratively:
    the recursive walks come after this)."""
    todo = [(tree, 1)]
    while todo:
        n, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ExprError(0, "expression has more than %d operations inside one another" % MAX_DEPTH,
                            "a launch expression is a few operations; simplify it")
        todo.extend((c, depth + 1) for c in _children(n))


# ---- names, kinds and checks ------------------------------------------------


class Binding:
    """What a name in an expression stands for: a parameter or a constant."""

    def __init__(self, kind, name, ptype=None, const_index=None):
        self.kind = kind  # "param" or "const"
        self.name = name
        self.ptype = ptype  # a spec.Type for parameters
        self.const_index = const_index


def did_you_mean(word, candidates):
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def walk(node):
    """Every node, in source order."""
    yield node
    if isinstance(node, BinOp):
        yield from walk(node.left)
        yield from walk(node.right)
    elif isinstance(node, Compare):
        for o in node.operands:
            yield from walk(o)
    elif isinstance(node, BoolOp):
        for v in node.values:
            yield from walk(v)
    elif isinstance(node, Not):
        yield from walk(node.operand)
    elif isinstance(node, Call):
        for a in node.args:
            yield from walk(a)


def names_read(node):
    """Distinct names in order of first appearance."""
    out = []
    for n in walk(node):
        if isinstance(n, Name) and n.name not in out:
            out.append(n.name)
    return out


def check(node, resolve, want):
    """Kind-check `node`; returns a list of ExprError (empty when fine).

    resolve(name) -> Binding or None; names_for_hint() lists candidates.
    want is INT or COND: what the context expects.
    """
    errors = []

    def kind(n):
        if isinstance(n, Num):
            return INT
        if isinstance(n, Name):
            b = resolve(n.name)
            if b is None:
                guess = did_you_mean(n.name, resolve.candidates())
                if n.name in FUNCTIONS:
                    errors.append(ExprError(n.pos, "'%s' is a function" % n.name, "call it: %s(a, b)" % n.name))
                else:
                    errors.append(
                        ExprError(
                            n.pos,
                            "unknown name '%s'" % n.name,
                            ("did you mean '%s'?" % guess)
                            if guess
                            else "expressions read this launcher's parameters and the family's variant constants",
                        )
                    )
                return None
            if b.kind == "const":
                return INT
            t = b.ptype
            if t is None:  # its type was reported already
                return None
            if t.is_pointer or t.is_tensor_map:
                errors.append(
                    ExprError(n.pos, "parameter '%s' is a %s (%s)" % (n.name, "pointer" if t.is_pointer else "tensor map", t.spec), "expressions read only u32, u64, i32 and bool parameters")
                )
                return None
            if t.name == "f32":
                errors.append(ExprError(n.pos, "parameter '%s' is f32" % n.name, "expressions read only u32, u64, i32 and bool parameters"))
                return None
            return COND if t.name == "bool" else INT
        if isinstance(n, BinOp):
            k1, k2 = kind(n.left), kind(n.right)
            for sub, k in ((n.left, k1), (n.right, k2)):
                if k == COND:
                    errors.append(ExprError(sub.pos, "operand of '%s' is a condition, not a number" % n.op, "arithmetic takes numbers"))
            if n.op in ("/", "%") and isinstance(n.right, Num) and n.right.value == 0:
                errors.append(ExprError(n.right.pos, "division by zero", "the divisor is the literal 0"))
            return INT
        if isinstance(n, Compare):
            ks = [kind(o) for o in n.operands]
            for o, k in zip(n.operands, ks):
                if k == COND:
                    errors.append(ExprError(o.pos, "operand of a comparison is a condition, not a number", "compare numbers; combine conditions with and, or, not"))
            for i, op in enumerate(n.ops):
                left, right = n.operands[i], n.operands[i + 1]
                verdict = _always(op, left, right)
                if verdict is not None:
                    errors.append(
                        ExprError(
                            left.pos,
                            "comparison '%s %s %s' is always %s" % (_text(left), op, _text(right), verdict),
                            "values are unsigned, never below 0",
                        )
                    )
            return COND
        if isinstance(n, BoolOp):
            for v in n.values:
                if kind(v) == INT:
                    errors.append(ExprError(v.pos, "operand of '%s' is a number, not a condition" % n.op, "compare it, e.g. x != 0"))
            return COND
        if isinstance(n, Not):
            if kind(n.operand) == INT:
                errors.append(ExprError(n.operand.pos, "operand of 'not' is a number, not a condition", "compare it, e.g. x == 0"))
            return COND
        if isinstance(n, Call):
            if n.func not in FUNCTIONS:
                guess = did_you_mean(n.func, FUNCTIONS)
                errors.append(
                    ExprError(
                        n.pos,
                        "unknown function '%s'" % n.func,
                        ("did you mean '%s'?" % guess) if guess else "the functions are ceil_div(a, b), max(a, b), min(a, b)",
                    )
                )
            elif len(n.args) != 2:
                errors.append(ExprError(n.pos, "%s takes 2 arguments, got %d" % (n.func, len(n.args)), "write %s(a, b)" % n.func))
            for a in n.args:
                if kind(a) == COND:
                    errors.append(ExprError(a.pos, "argument of %s is a condition, not a number" % n.func, "pass numbers"))
            if n.func == "ceil_div" and len(n.args) == 2 and isinstance(n.args[1], Num) and n.args[1].value == 0:
                errors.append(ExprError(n.args[1].pos, "division by zero", "the divisor is the literal 0"))
            return INT
        raise AssertionError(n)

    got = kind(node)
    if not errors and got is not None and got != want:
        if want == COND:
            errors.append(ExprError(0, "a precondition must be a condition, not a number", "compare it, e.g. '%s != 0'" % _text(node)))
        else:
            errors.append(ExprError(0, "expected a number, got a condition", "grid, block and shared_bytes are numbers"))
    return errors


def _always(op, left, right):
    """'true'/'false' when comparing with the literal 0 is decided by unsignedness."""
    if isinstance(right, Num) and right.value == 0 and not isinstance(left, Num):
        return {">=": "true", "<": "false"}.get(op)
    if isinstance(left, Num) and left.value == 0 and not isinstance(right, Num):
        return {"<=": "true", ">": "false"}.get(op)
    return None


_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "atom": 7}


def _text(n, parent_prec=0):
    """Canonical text of a subtree (for messages)."""
    if isinstance(n, Num):
        s, p = str(n.value), _PREC["atom"]
    elif isinstance(n, Name):
        s, p = n.name, _PREC["atom"]
    elif isinstance(n, Call):
        s, p = "%s(%s)" % (n.func, ", ".join(_text(a) for a in n.args)), _PREC["atom"]
    elif isinstance(n, BinOp):
        p = _PREC[n.op]
        s = "%s %s %s" % (_text(n.left, p), n.op, _text(n.right, p + 1))
    elif isinstance(n, Compare):
        p = _PREC["cmp"]
        parts = [_text(n.operands[0], p + 1)]
        for op, o in zip(n.ops, n.operands[1:]):
            parts += [op, _text(o, p + 1)]
        s = " ".join(parts)
    elif isinstance(n, BoolOp):
        p = _PREC[n.op]
        s = (" %s " % n.op).join(_text(v, p + 1) for v in n.values)
    elif isinstance(n, Not):
        p = _PREC["not"]
        s = "not " + _text(n.operand, p)
    else:
        raise AssertionError(n)
    return "(%s)" % s if p < parent_prec else s


# ---- evaluation (generator-side constant folding and tests) -----------------


class EvalError(Exception):
    """status is 'overflow' or 'division_by_zero' (the first that happened)."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


def evaluate(node, env):
    """Value of `node` with the launcher's C semantics; env maps names to ints.

    Numbers are int in [0, 2^64), conditions are bool. Like the generated C,
    `and`/`or` short-circuit and the first overflow or division by zero wins.
    """

    def num(v):
        if v < 0 or v > U64_MAX:
            raise EvalError("overflow")
        return v

    def ev(n):
        if isinstance(n, Num):
            return n.value
        if isinstance(n, Name):
            v = env[n.name]
            if isinstance(v, bool):
                return v
            return num(v)
        if isinstance(n, BinOp):
            a, b = ev(n.left), ev(n.right)
            if n.op == "+":
                return num(a + b)
            if n.op == "-":
                return num(a - b)
            if n.op == "*":
                return num(a * b)
            if b == 0:
                raise EvalError("division_by_zero")
            return a // b if n.op == "/" else a % b
        if isinstance(n, Compare):
            # Like the C translation, (a < b && b < c): stop at the first false.
            for op, left, right in zip(n.ops, n.operands, n.operands[1:]):
                a, b = ev(left), ev(right)
                holds = {
                    "==": a == b,
                    "!=": a != b,
                    "<": a < b,
                    "<=": a <= b,
                    ">": a > b,
                    ">=": a >= b,
                }[op]
                if not holds:
                    return False
            return True
        if isinstance(n, BoolOp):
            for v in n.values:
                r = ev(v)
                if n.op == "and" and not r:
                    return False
                if n.op == "or" and r:
                    return True
            return n.op == "and"
        if isinstance(n, Not):
            return not ev(n.operand)
        if isinstance(n, Call):
            a, b = ev(n.args[0]), ev(n.args[1])
            if n.func == "max":
                return max(a, b)
            if n.func == "min":
                return min(a, b)
            if b == 0:
                raise EvalError("division_by_zero")
            return a // b + (1 if a % b else 0)
        raise AssertionError(n)

    return ev(node)


# ---- C translation -------------------------------------------------------------

ERR = "kl__err"


def can_fail(node, resolve):
    """Whether evaluating `node` in C may set the error status."""
    for n in walk(node):
        if isinstance(n, BinOp):
            return True
        if isinstance(n, Call) and n.func == "ceil_div":
            return True
        if isinstance(n, Name):
            b = resolve(n.name)
            if b.kind == "const" or b.ptype.name == "i32":
                return True
    return False


def _c_literal(v):
    return "%du" % v if v <= 0xFFFFFFFF else "%dull" % v


def to_c(node, resolve):
    """(C text, number of temporaries) for `node`.

    Numbers are uint64_t, conditions int-valued. Arithmetic goes through the
    kl__x_* helpers, which record the first overflow or division by zero in
    kl__err and never trap. C leaves the order of a call's arguments (and of
    a comparison's operands) open, so when both sides can fail the left one
    goes first into a temporary, kl__t<i>, behind a comma: the first problem
    is then the leftmost, as in Python, on every compiler. && and || keep
    Python's short-circuit, so `a >= 1 and b % a == 0` never divides by a
    zero a.
    """
    temps = [0]

    def read(n, as_arg):
        b = resolve(n.name)
        if b.kind == "const":
            return "kl__x_signed(kernel->consts[%d], &%s)" % (b.const_index, ERR)
        if b.ptype.name == "i32":
            return "kl__x_signed(%s, &%s)" % (n.name, ERR)
        if b.ptype.name == "bool":
            return n.name
        return n.name if as_arg else "(uint64_t)%s" % n.name

    def ordered(left, right, combine, as_arg=True):
        """combine(l, r) with the left side evaluated first when both can fail."""
        lt, rt = c(left, as_arg), c(right, as_arg)
        if can_fail(left, resolve) and can_fail(right, resolve):
            t = "kl__t%d" % temps[0]
            temps[0] += 1
            return "(%s = %s, %s)" % (t, lt, combine(t, rt))
        return combine(lt, rt)

    def c(n, as_arg=False):
        if isinstance(n, Num):
            return _c_literal(n.value)
        if isinstance(n, Name):
            return read(n, as_arg)
        if isinstance(n, BinOp):
            fn = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}[n.op]
            return ordered(n.left, n.right, lambda l, r: "kl__x_%s(%s, %s, &%s)" % (fn, l, r, ERR))
        if isinstance(n, Call):
            if n.func == "ceil_div":
                return ordered(n.args[0], n.args[1], lambda l, r: "kl__x_ceil_div(%s, %s, &%s)" % (l, r, ERR))
            return ordered(n.args[0], n.args[1], lambda l, r: "kl__x_%s(%s, %s)" % (n.func, l, r))
        if isinstance(n, Compare):
            parts = []
            for op, a, b in zip(n.ops, n.operands, n.operands[1:]):
                parts.append(ordered(a, b, lambda l, r, op=op: "%s %s %s" % (l, op, r), as_arg=False))
            return parts[0] if len(parts) == 1 else "(%s)" % " && ".join(parts)
        if isinstance(n, BoolOp):
            sep = " && " if n.op == "and" else " || "
            return "(%s)" % sep.join(c(v) for v in n.values)
        if isinstance(n, Not):
            return c_not(c(n.operand))
        raise AssertionError(n)

    text = c(node)
    return text, temps[0]


def _one_group(text):
    """Whether C text is one parenthesized group: `(a) && (b)` is not."""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i + 1 < len(text):
            return False
    return True


def c_not(text):
    """The negation of a C condition; `!` binds tighter than anything in it."""
    if _one_group(text) or re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", text):
        return "!" + text
    return "!(%s)" % text


# ---- Python translation (the generated Python module) -------------------------


def to_python(node, resolve, ref):
    """Python text for `node`, with the launchers' semantics: numbers are
    unsigned 64-bit, and the helpers of the runtime's klaunch._expr (imported
    as `_x`) raise _x.Fail on an overflow, a negative signed value or a
    division by zero, where the C launcher would refuse. `ref(binding)` is
    the Python text that reads a parameter or a constant."""

    def p(n):
        if isinstance(n, Num):
            return str(n.value)
        if isinstance(n, Name):
            b = resolve(n.name)
            text = ref(b)
            if b.kind == "const" or b.ptype.name == "i32":
                return "_x.u(%s)" % text
            return text
        if isinstance(n, BinOp):
            fn = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}[n.op]
            return "_x.%s(%s, %s)" % (fn, p(n.left), p(n.right))
        if isinstance(n, Call):
            return "_x.%s(%s, %s)" % (n.func, p(n.args[0]), p(n.args[1]))
        if isinstance(n, Compare):
            parts = [p(n.operands[0])]
            for op, o in zip(n.ops, n.operands[1:]):
                parts += [op, p(o)]
            return "(%s)" % " ".join(parts)
        if isinstance(n, BoolOp):
            return "(%s)" % (" %s " % n.op).join(p(v) for v in n.values)
        if isinstance(n, Not):
            return "(not %s)" % p(n.operand)
        raise AssertionError(n)

    return p(node)
