"""Layer 2 (build time): every cubin of a kernel family (each variant, each
target architecture) holds every kernel of its spec
with exactly the parameter offsets and sizes and the parameter buffer size
the spec implies (tools/nvinfo/layout_check.py), and was built from that
spec. A failure prints the check's lines: spec file:line:col, cubin, kernel,
parameter.

kl_fatbin (bazel/cuda.bzl) runs it for its family as <name>_layout_test:

    --spec specs/<family>.yaml CUBIN... [--spec ... CUBIN...]
"""

import os
import sys
import unittest

import junit_unittest
import layout_check

FAMILIES = []  # [(spec path, [cubin paths])]


class KernelLayoutTest(unittest.TestCase):
    def test_there_are_families(self):
        self.assertTrue(FAMILIES, "no --spec given")
        for spec, cubins in FAMILIES:
            self.assertTrue(cubins, "%s: no cubins given" % spec)

    def check_variants(self, spec_path, cubins):
        spec = layout_check.load_spec(spec_path)
        names = [os.path.basename(c) for c in cubins]
        for v in spec.variants:
            self.assertTrue(any("_%s." % v.name in n for n in names), "%s: no cubin of variant %s among %s" % (spec_path, v.name, names))

    def check_cubin(self, spec_path, cubin):
        if os.path.getsize(cubin) == 0:
            self.skipTest("%s is empty: built without a CUDA toolkit" % cubin)
        spec = layout_check.load_spec(spec_path)
        problems = layout_check.check_files(spec, [cubin])
        self.assertEqual(problems, [], "\n" + "\n".join(problems))


def add_tests():
    for spec, cubins in FAMILIES:
        stem = os.path.splitext(os.path.basename(spec))[0]

        def variants(self, spec=spec, cubins=cubins):
            self.check_variants(spec, cubins)

        setattr(KernelLayoutTest, "test_%s_every_variant_has_cubins" % stem, variants)
        for c in cubins:
            def test(self, spec=spec, c=c):
                self.check_cubin(spec, c)

            name = os.path.basename(c).replace(".cubin", "")
            setattr(KernelLayoutTest, "test_" + "".join(ch if ch.isalnum() else "_" for ch in name), test)


def parse_args(argv):
    families, rest = [], []
    i = 0
    while i < len(argv):
        if argv[i] == "--spec" and i + 1 < len(argv):
            families.append((argv[i + 1], []))
            i += 2
            continue
        if families and not argv[i].startswith("-"):
            families[-1][1].append(argv[i])
        else:
            rest.append(argv[i])
        i += 1
    return families, rest


if __name__ == "__main__":
    fams, rest = parse_args(sys.argv[1:])
    FAMILIES.extend(fams)
    add_tests()
    junit_unittest.main(argv=rest)
