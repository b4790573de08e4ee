"""Interval evaluation (codegen/klaunch_codegen/ranges.py) and what the
validator decides with it before any launch.

Soundness is checked against expr.evaluate, the generator's reference
evaluator (itself checked against the generated C in test_expr.py): for
random expressions and random parameter values of each type, a value
evaluate() returns lies in the interval, a failure is one the interval
allows, and a condition's value is one of its possible truth values.
"""

import os
import random
import shutil
import tempfile
import unittest

import codegen_test_support as support

from klaunch_codegen import diag, expr as ex, ranges as rg, spec as specmod

PARAMS = {"a": "u32", "b": "u32", "w": "u64", "s": "i32", "f": "bool"}
CONSTS = {"C0": 0, "C1": 1, "C7": 7, "CB": 1 << 40}
U32 = (1 << 32) - 1


def random_expr(rng, depth, cond):
    if cond:
        k = rng.randrange(5 if depth > 0 else 1)
        if k == 0 or depth <= 0:
            return "%s %s %s" % (random_expr(rng, depth - 1, False), rng.choice(["<", "<=", ">", ">=", "==", "!="]),
                                 random_expr(rng, depth - 1, False))
        if k == 1:
            return "f"
        if k == 2:
            return "not (%s)" % random_expr(rng, depth - 1, True)
        return "(%s) %s (%s)" % (random_expr(rng, depth - 1, True), rng.choice(["and", "or"]), random_expr(rng, depth - 1, True))
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(["a", "b", "w", "s", "C0", "C1", "C7", "CB", "0", "1", "3", "4294967295", "4294967296",
                           str(rng.randrange(1 << 64))])
    k = rng.randrange(6)
    left, right = random_expr(rng, depth - 1, False), random_expr(rng, depth - 1, False)
    if k < 5:
        return "(%s %s %s)" % (left, "+-*/%"[k], right)
    return "%s(%s, %s)" % (rng.choice(["ceil_div", "max", "min"]), left, right)


def random_value(rng, t):
    lo, hi = {"u32": (0, U32), "u64": (0, (1 << 64) - 1), "i32": (-(1 << 31), (1 << 31) - 1)}[t]
    return rng.choice([lo, hi, 0, 1, rng.randint(lo, hi), rng.randint(0, 100)])


class SoundnessTest(unittest.TestCase):
    def test_every_value_evaluate_gives_is_inside_what_the_intervals_allow(self):
        rng = random.Random(15)
        checked = 0
        for i in range(1500):
            cond = i % 2 == 0
            text = random_expr(rng, 3, cond)
            tree = ex.parse(text)
            for consts in (CONSTS, None):
                got = rg.Evaluator(PARAMS, consts).evaluate(tree)
                for _ in range(6):
                    env = dict(CONSTS)
                    for n, t in PARAMS.items():
                        env[n] = rng.random() < 0.5 if t == "bool" else random_value(rng, t)
                    try:
                        value = ex.evaluate(tree, env)
                    except ex.EvalError:
                        # A negative i32 fails in C too (kl__x_signed).
                        self.assertNotEqual(got.fail, rg.NEVER, text)
                        continue
                    except KeyError:
                        continue
                    checked += 1
                    self.assertNotEqual(got.fail, rg.ALWAYS, text)
                    if isinstance(value, bool):
                        self.assertTrue(got.can_true if value else got.can_false, (text, env))
                    else:
                        self.assertTrue(got.lo <= value <= got.hi, (text, env, value, got.lo, got.hi))
        self.assertGreater(checked, 5000)

    def test_decided_cases(self):
        def ev(text, consts=CONSTS):
            return rg.Evaluator(PARAMS, consts).evaluate(ex.parse(text))

        self.assertEqual(ev("a / C0").fail, rg.ALWAYS)
        self.assertEqual(ev("a * C0").hi, 0)
        self.assertEqual(ev("a / 4294967296").hi, 0)
        self.assertEqual(ev("a - 4294967296").fail, rg.ALWAYS)
        self.assertFalse(ev("a <= 4294967295").can_false)
        self.assertFalse(ev("C7 == 5 and a > 1").can_true)
        # Short-circuit: the division is not reached where C0 is 0.
        self.assertEqual(ev("C0 != 0 and a / C0 > 1").fail, rg.NEVER)
        self.assertEqual(ev("C0 != 0 and a / C0 > 1", None).fail, rg.MAYBE)


def load(text, name="r"):
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        diags = diag.Diagnostics()
        spec = specmod.load_spec(path, diags)
        return spec, [str(d).split(": error: ", 1)[1] for d in diags.items]
    finally:
        shutil.rmtree(tmp)


SPEC = """family: r
variants:
  w4: {constants: {WIDTH: 4}}
  w0: {constants: {WIDTH: 0}}
launchers:
  - name: r_k
    params:
      - n: u32
    preconditions:
%s
    grid: {x: %s}
    block: {x: 32}
"""


class AcceptedTest(unittest.TestCase):
    def test_a_variant_refused_by_an_earlier_precondition_is_not_checked_further(self):
        spec, errors = load(SPEC % ("      - {check: WIDTH != 0, message: not the w0 variant}\n"
                                    "      - {check: n % WIDTH == 0, message: whole tiles}", "n / WIDTH"))
        self.assertEqual(errors, [])
        self.assertIsNotNone(spec)

    def test_a_precondition_false_in_some_variants_is_a_variant_check(self):
        spec, errors = load(SPEC % ("      - {check: WIDTH == 4, message: the w4 variant}", "n"))
        self.assertEqual(errors, [])

    def test_a_division_guarded_in_the_same_precondition_is_fine(self):
        spec, errors = load(SPEC % ("      - {check: WIDTH == 0 or n % WIDTH == 0, message: whole tiles}", "n"))
        self.assertEqual(errors, [])

    def test_the_project_specs_are_accepted(self):
        for name in ("mla_prefill", "paged_decode"):
            with open(os.path.join(support.ROOT, "specs", name + ".yaml")) as f:
                spec, errors = load(f.read(), name)
            self.assertEqual(errors, [], name)


if __name__ == "__main__":
    support.main()
