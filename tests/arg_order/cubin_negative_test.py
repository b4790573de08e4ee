"""Layer 2's negative tests: the cubins of the wrong fixtures (built with
KL_NO_SIGNATURE_CHECKS so that layer 1 lets them through) are each refused
by tools/nvinfo/layout_check.py with exactly the expected lines, for every
target architecture; the good fixture passes.

Expected layouts are worked out by hand below from each fixture's source
(natural alignment: pointers and u64 at multiples of 8, u32 and f32 of 4),
against specs/argtest.yaml:
  spec      x 0/8, y 8/8, n 16/4, stride 24/8, a 32/4, tag 36/4; 40 bytes
  swapped   x 0/8, y 8/8, stride 16/8, n 24/4, a 28/4, tag 32/4; 36 bytes
  widened   x 0/8, y 8/8, n 16/8, stride 24/8, a 32/4, tag 36/4; 40 bytes
  truncated x 0/8, y 8/8, n 16/4, stride 24/8, a 32/4;           36 bytes
  extra     the spec's six, then bias 40/4;                      44 bytes
  stale     x 0/8, y 8/8, stride 16/8, n 24/4, a 28/4;           32 bytes,
            and built from another spec (stale/argtest.yaml)
  missing   no argtest_axpy at all
  same_type_swapped  x, y, tag, stride, a, n: the spec's offsets and sizes
            exactly, so layer 2 passes it; this is the swap only layer 1's
            name check (signature_compile_test) refuses

    --spec tests/arg_order/specs/argtest.yaml --fixture=<name>=CUBIN CUBIN... ...
"""

import hashlib
import os
import sys
import unittest

import arg_order_test_support as support
import junit_unittest
import layout_check

SPEC = [None]
FIXTURES = {}  # name -> [cubin paths]


def spec_text():
    with open(SPEC[0]) as f:
        return f.read()


def at_param(name):
    return "%s:%d:%d" % ((SPEC[0],) + support.param_pos(spec_text(), "argtest_axpy", name))


def at_axpy():
    return "%s:%d:%d" % ((SPEC[0],) + support.launcher_pos(spec_text(), "argtest_axpy"))


def at_family():
    for n, line in enumerate(spec_text().splitlines(), 1):
        if line.startswith("family:"):
            return "%s:%d:%d" % (SPEC[0], n, len("family: ") + 1)
    raise KeyError("family")


def differs(index, name, got, want, spec_type):
    return (at_param(name), "kernel argtest_axpy, parameter %d (%s): the cubin has offset %d, %d bytes; the spec says offset %d, %d bytes (%s)"
            % ((index, name) + got + want + (spec_type,)))


def buffer(got):
    return (at_axpy(), "kernel argtest_axpy takes a %d-byte parameter buffer (EIATTR_CBANK_PARAM_SIZE); the spec's is 40 bytes" % got)


def expected(fixture):
    """[(spec position, message)] for every cubin of the fixture, in order."""
    lacks_tag = (at_param("tag"), "kernel argtest_axpy lacks parameter 6 (tag, offset 36, 4 bytes, u32): the cubin's kernel has 5 parameters, the spec 6")
    if fixture in ("good", "same_type_swapped"):
        return []
    if fixture == "swapped":
        return [
            differs(3, "n", (16, 8), (16, 4), "u32"),
            differs(4, "stride", (24, 4), (24, 8), "u64"),
            differs(5, "a", (28, 4), (32, 4), "f32"),
            differs(6, "tag", (32, 4), (36, 4), "u32"),
            buffer(36),
        ]
    if fixture == "widened":
        return [differs(3, "n", (16, 8), (16, 4), "u32")]
    if fixture == "truncated":
        return [lacks_tag, buffer(36)]
    if fixture == "extra":
        return [
            (at_axpy(), "kernel argtest_axpy has 7 parameters, the spec 6: parameter 7 (offset 40, 4 bytes) is not in the spec"),
            buffer(44),
        ]
    if fixture == "missing":
        return [(at_axpy(), "kernel argtest_axpy is not in the cubin (no .nv.info.argtest_axpy section): no kernel source of the family defines it")]
    if fixture == "stale":
        with open(SPEC[0], "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        with open(os.path.join(os.path.dirname(SPEC[0]), "..", "stale", "argtest.yaml"), "rb") as f:
            old = hashlib.sha256(f.read()).hexdigest()
        return [
            (at_family(), "stale: the cubin was built from spec sha256:%s; %s is sha256:%s; rebuild: ./bazelw build //kernels:argtest (or ./bazelw run //:generate)"
             % (old, SPEC[0], digest)),
            differs(3, "n", (16, 8), (16, 4), "u32"),
            differs(4, "stride", (24, 4), (24, 8), "u64"),
            differs(5, "a", (28, 4), (32, 4), "f32"),
            lacks_tag,
            buffer(32),
        ]
    raise KeyError(fixture)


class CubinNegativeTest(unittest.TestCase):
    def test_every_fixture_was_given(self):
        self.assertEqual(sorted(FIXTURES), sorted(["good", "swapped", "widened", "truncated", "extra", "missing", "stale",
                                                 "same_type_swapped"]))

    def check_fixture(self, fixture):
        cubins = FIXTURES[fixture]
        self.assertTrue(cubins, "fixture %s has no cubins" % fixture)
        if all(os.path.getsize(c) == 0 for c in cubins):
            self.skipTest("the %s cubins are empty: built without a CUDA toolkit" % fixture)
        spec = layout_check.load_spec(SPEC[0])
        for c in cubins:
            with self.subTest(cubin=os.path.basename(c)):
                want = ["%s: error: %s: %s" % (where, os.path.basename(c), message) for where, message in expected(fixture)]
                self.assertEqual(layout_check.check_files(spec, [c]), want)


    def test_a_same_type_swap_is_invisible_to_layer_2(self):
        # The gap layer 1 closes: n and tag swapped give the spec's bytes, so
        # the layout check finds nothing (and cannot). signature_compile_test's
        # test_two_parameters_of_one_type_swapped shows the unity file refuses
        # the same source; written with KL_PARAMS_argtest_axpy it cannot exist.
        self.check_fixture("same_type_swapped")


def add_tests():
    for fixture in sorted(set(FIXTURES) - {"same_type_swapped"}):
        def test(self, fixture=fixture):
            self.check_fixture(fixture)

        setattr(CubinNegativeTest, "test_fixture_%s" % fixture, test)


def parse_args(argv):
    rest, current = [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--spec" and i + 1 < len(argv):
            SPEC[0] = argv[i + 1]
            i += 2
            continue
        if a.startswith("--fixture="):
            name, _, first = a[len("--fixture="):].partition("=")
            current = FIXTURES.setdefault(name, [])
            if first:
                current.append(first)
        elif current is not None and not a.startswith("-"):
            current.append(a)
        else:
            rest.append(a)
        i += 1
    return rest


if __name__ == "__main__":
    rest = parse_args(sys.argv[1:])
    if SPEC[0] is None:
        sys.exit("usage: cubin_negative_test.py --spec SPEC --fixture=NAME=CUBIN [CUBIN...]...")
    add_tests()
    junit_unittest.main(argv=rest)
