"""The expression translator: parsing, C semantics, short-circuit, overflow.

Expected values are worked out by hand from the language's definition
(docs/DESIGN.md: unsigned 64-bit, `/` truncates, overflow, underflow and
division by zero detected, Python's `and`/`or`). Each case is checked twice:
with the generator's own evaluator (used for constant folding) and by
compiling the C that the translator emits, with gcc, and running it.
"""

import os
import subprocess
import tempfile
import unittest

import codegen_test_support as support
from klaunch_codegen import expr as ex
from klaunch_codegen.model import Type

U64 = (1 << 64) - 1

# name -> (spec type, C type)
VARS = {
    "a": "u64",
    "b": "u64",
    "c": "u64",
    "d": "u64",
    "n": "u32",
    "i": "i32",
    "flag": "bool",
}
C_TYPES = {"u64": "uint64_t", "u32": "uint32_t", "i32": "int32_t", "bool": "bool"}
CONSTS = ["TILE"]

OK, OVERFLOW, DIV0 = "ok", "overflow", "division_by_zero"

# (expression, variable values, expected value (int or bool), expected status)
CASES = [
    ("7 / 2", {}, 3, OK),
    ("7 % 2", {}, 1, OK),
    ("a / b", {"a": 9, "b": 10}, 0, OK),
    ("ceil_div(7, 2)", {}, 4, OK),
    ("ceil_div(8, 2)", {}, 4, OK),
    ("ceil_div(a, 3)", {"a": 0}, 0, OK),
    # no a + b - 1 inside: the largest value still divides up without overflow
    ("ceil_div(a, 2)", {"a": U64}, 1 << 63, OK),
    ("a + b * 2", {"a": 1, "b": 3}, 7, OK),
    ("(a + b) * 2", {"a": 1, "b": 3}, 8, OK),
    ("a - b - c", {"a": 10, "b": 3, "c": 2}, 5, OK),
    ("a / b * b", {"a": 7, "b": 2}, 6, OK),
    ("max(a, b) - min(a, b)", {"a": 3, "b": 10}, 7, OK),
    ("0x10 * a", {"a": 2}, 32, OK),
    ("a + 5000000000", {"a": 1}, 5000000001, OK),
    ("n * n", {"n": 0xFFFFFFFF}, 0xFFFFFFFE00000001, OK),  # u32 operands widen to 64 bits
    ("a * b", {"a": 1 << 32, "b": 1 << 32}, None, OVERFLOW),
    ("a + b", {"a": U64, "b": 1}, None, OVERFLOW),
    ("a - b", {"a": 1, "b": 2}, None, OVERFLOW),  # underflow
    ("a / b", {"a": 1, "b": 0}, None, DIV0),
    ("a % b", {"a": 1, "b": 0}, None, DIV0),
    ("ceil_div(a, b)", {"a": 1, "b": 0}, None, DIV0),
    # the first problem wins
    ("a * b + c / d", {"a": U64, "b": 2, "c": 1, "d": 0}, None, OVERFLOW),
    ("c / d + a * b", {"a": U64, "b": 2, "c": 1, "d": 0}, None, DIV0),
    # and/or short-circuit like Python and C: the right side never runs
    ("b >= 1 and a % b == 0", {"a": 6, "b": 0}, False, OK),
    ("b >= 1 and a % b == 0", {"a": 6, "b": 4}, False, OK),
    ("b >= 1 and a % b == 0", {"a": 8, "b": 4}, True, OK),
    ("b == 0 or a / b > 1", {"a": 6, "b": 0}, True, OK),
    ("not (b >= 1) or a % b == 0", {"a": 6, "b": 0}, True, OK),
    ("a % b == 0 and b >= 1", {"a": 6, "b": 0}, None, DIV0),
    ("a < b < c / d", {"a": 5, "b": 1, "c": 1, "d": 0}, False, OK),  # chain stops at a < b
    ("1 <= a <= 4", {"a": 5}, False, OK),
    ("1 <= a <= 4", {"a": 3}, True, OK),
    ("a == b == c", {"a": 2, "b": 2, "c": 2}, True, OK),
    ("not a == b", {"a": 1, "b": 1}, False, OK),
    ("not a == b and a > 0", {"a": 1, "b": 2}, True, OK),
    ("a > 0 or b > 0 and c > 0", {"a": 1, "b": 0, "c": 0}, True, OK),  # and binds tighter
    ("a != b", {"a": 1, "b": 2}, True, OK),
    ("flag and a > 1", {"flag": False, "a": 5}, False, OK),
    ("flag or a / b > 0", {"flag": True, "a": 5, "b": 0}, True, OK),
    ("not flag", {"flag": False}, True, OK),
    ("i + 1", {"i": 5}, 6, OK),
    ("i + 1", {"i": -1}, None, OVERFLOW),  # a negative i32 has no unsigned value
    ("ceil_div(a, TILE)", {"a": 100, "TILE": 16}, 7, OK),
    ("ceil_div(a, TILE)", {"a": 100, "TILE": 0}, None, DIV0),
    ("TILE * 2", {"TILE": -4}, None, OVERFLOW),
]


class _Resolver:
    def __init__(self):
        self.names = {n: ex.Binding("param", n, ptype=Type(t)) for n, t in VARS.items()}
        for i, c in enumerate(CONSTS):
            self.names[c] = ex.Binding("const", c, const_index=i)

    def __call__(self, name):
        return self.names.get(name)

    def candidates(self):
        return list(self.names)


RESOLVE = _Resolver()


def kind_of(text):
    tree = ex.parse(text)
    want = ex.COND if not ex.check(tree, RESOLVE, ex.COND) else ex.INT
    return tree, want


class ParseAndCheckTest(unittest.TestCase):
    def test_every_case_parses_and_checks(self):
        for text, _, _, _ in CASES:
            tree, want = kind_of(text)
            self.assertEqual(ex.check(tree, RESOLVE, want), [], text)

    def assert_error_at(self, text, offset, fragment, want=ex.INT):
        try:
            tree = ex.parse(text)
        except ex.ExprError as e:
            errors = [e]
        else:
            errors = ex.check(tree, RESOLVE, want)
        self.assertTrue(errors, "%r was accepted" % text)
        self.assertEqual(errors[0].offset, offset, "%r: %s" % (text, errors[0].message))
        self.assertIn(fragment, errors[0].message + "; " + errors[0].hint)

    def test_syntax_errors_point_into_the_expression(self):
        self.assert_error_at("a +", 3, "ends where an operand is expected")
        self.assert_error_at("a ** 2", 2, "unsupported operator '**'")
        self.assert_error_at("a // 2", 2, "use / (it truncates)")
        self.assert_error_at("(a + b", 6, "missing ')'")
        self.assert_error_at("a + b)", 5, "unbalanced ')'")
        self.assert_error_at("ceil_div(a b)", 11, "unexpected 'b'")
        self.assert_error_at("a & b", 2, "no bitwise operators")
        self.assert_error_at("-a", 0, "unary '-'")
        self.assert_error_at("a * 1.5", 4, "has a fraction")
        self.assert_error_at("a + 012", 4, "malformed integer")
        self.assert_error_at("a + 18446744073709551616", 4, "does not fit in 64 bits")
        self.assert_error_at("a if b else c", 2, "unsupported operator 'if'")
        self.assert_error_at("a $ b", 2, "unexpected character")
        self.assert_error_at("", 0, "empty expression")

    def test_names_and_kinds(self):
        self.assert_error_at("a + bb", 4, "did you mean 'b'?")
        self.assert_error_at("ceildiv(a, 2)", 0, "did you mean 'ceil_div'?")
        self.assert_error_at("max(a)", 0, "max takes 2 arguments, got 1")
        self.assert_error_at("a + flag", 4, "is a condition, not a number")
        self.assert_error_at("a > 1", 0, "expected a number, got a condition")
        self.assert_error_at("a + 1", 0, "must be a condition", want=ex.COND)
        self.assert_error_at("a and b", 0, "operand of 'and' is a number", want=ex.COND)
        self.assert_error_at("a >= 0", 0, "is always true", want=ex.COND)
        self.assert_error_at("0 > a", 0, "is always false", want=ex.COND)
        self.assert_error_at("a / 0", 4, "division by zero")

    def test_names_read_in_order_of_first_appearance(self):
        self.assertEqual(ex.names_read(ex.parse("b * a + b < TILE and not flag")), ["b", "a", "TILE", "flag"])


class EvaluatorTest(unittest.TestCase):
    """The generator's evaluator (constant folding) against the table."""

    def test_table(self):
        for text, env, value, status in CASES:
            tree, _ = kind_of(text)
            with self.subTest(expr=text, env=env):
                if status == OK:
                    self.assertEqual(ex.evaluate(tree, env), value)
                else:
                    with self.assertRaises(ex.EvalError) as cm:
                        ex.evaluate(tree, env)
                    self.assertEqual(cm.exception.status, status)


HEADER_SPEC = """family: exprtest
variants:
  v: {}
launchers:
  - name: k
    params:
      - n: u32
    grid:
      x: n
    block:
      x: 32
"""


@unittest.skipUnless(support.tool("gcc"), "gcc is not installed; the C translation is not compiled")
class CTranslationTest(unittest.TestCase):
    """The C the translator emits, compiled with gcc and run, against the table."""

    def test_table_in_c(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Any generated header brings the kl__x_* helpers the translation calls.
            with open(os.path.join(tmp, "exprtest.yaml"), "w") as f:
                f.write(HEADER_SPEC)
            rc, _, err = support.run_codegen(["--include-dir", "inc", "exprtest.yaml"], cwd=tmp)
            self.assertEqual(rc, 0, err)
            lines = [
                "#define KLAUNCH_IMPLEMENTATION",
                '#include "klaunch/exprtest.h"',
                "#include <stdio.h>",
                "int main(void) {",
                "    kl_kernel k;",
                "    const kl_kernel *kernel = &k;",
            ]
            for idx, (text, env, _, _) in enumerate(CASES):
                tree, want = kind_of(text)
                c, temps = ex.to_c(tree, RESOLVE)
                lines.append("    {")
                for t in range(temps):
                    lines.append("        uint64_t kl__t%d;" % t)
                for name, t in VARS.items():
                    value = env.get(name, 0)
                    literal = ("true" if value else "false") if t == "bool" else "(%s)%dLL" % (C_TYPES[t], value) if value < 0 else "(%s)%du" % (C_TYPES[t], value) if value < 1 << 32 else "(%s)%dull" % (C_TYPES[t], value)
                    lines.append("        %s %s = %s;" % (C_TYPES[t], name, literal))
                    lines.append("        (void)%s;" % name)
                lines.append("        k.consts[0] = %dLL;" % env.get("TILE", 0))
                lines.append("        kl_status kl__err = KL_SUCCESS;")
                if want == ex.INT:
                    lines.append("        uint64_t v = %s;" % c)
                else:
                    lines.append("        uint64_t v = (%s) ? 1u : 0u;" % c)
                lines.append('        printf("%d %%s %%llu\\n", kl_status_name(kl__err), (unsigned long long)v);' % idx)
                lines.append("    }")
            lines += ["    return 0;", "}"]
            src = os.path.join(tmp, "t.c")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            exe = os.path.join(tmp, "t")
            subprocess.run(
                ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", support.INCLUDE,
                 "-I", os.path.join(tmp, "inc"), src, "-o", exe],
                check=True,
            )
            out = subprocess.run([exe], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        results = {}
        for line in out.splitlines():
            idx, status, value = line.split()
            results[int(idx)] = (status, int(value))
        status_name = {OK: "KL_SUCCESS", OVERFLOW: "KL_ERROR_OVERFLOW", DIV0: "KL_ERROR_DIVISION_BY_ZERO"}
        for idx, (text, env, value, status) in enumerate(CASES):
            with self.subTest(expr=text, env=env):
                got_status, got_value = results[idx]
                self.assertEqual(got_status, status_name[status])
                if status == OK:
                    self.assertEqual(got_value, int(value))


if __name__ == "__main__":
    support.main()
