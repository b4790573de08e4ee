"""The launch expression language's arithmetic, for the preconditions the
generated modules evaluate in Python (the ones that read a variant
constant: they decide which variant fits a launch).

As in the C launchers (docs/DESIGN.md, "Expressions"): numbers are unsigned
64-bit, `/` truncates, and an overflow, a negative signed value or a
division by zero fails (Fail), where the C launcher would refuse. The
generator's expr.to_python() writes the calls.
"""

U64_MAX = (1 << 64) - 1


class Fail(Exception):
    """The expression fails in C (overflow or division by zero)."""


def u(v):
    if v < 0 or v > U64_MAX:
        raise Fail()
    return v


def add(a, b):
    return u(a + b)


def sub(a, b):
    return u(a - b)


def mul(a, b):
    return u(a * b)


def div(a, b):
    if b == 0:
        raise Fail()
    return a // b


def mod(a, b):
    if b == 0:
        raise Fail()
    return a % b


def ceil_div(a, b):
    if b == 0:
        raise Fail()
    return a // b + (1 if a % b else 0)


def max(a, b):  # noqa: A001 (the expression language's names)
    return a if a > b else b


def min(a, b):  # noqa: A001
    return a if a < b else b
