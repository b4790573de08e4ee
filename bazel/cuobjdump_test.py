"""The cubin reader (tools/nvinfo/cubin_nvinfo.py) against cuobjdump, live,
on the cubins of one kl_fatbin (every variant and target architecture).

Layer 2 of docs/ARG_ORDER.md trusts the reader; this checks it. For each
cubin, `cuobjdump -elf` runs on it here and then: the kernels it shows are
the kernels the reader finds, and for each kernel every parameter record
(ordinal, offset, size) and EIATTR_CBANK_PARAM_SIZE are the same. Right and
wrong cubins alike (the argtest fixtures built wrong on purpose are checked
too). kl_fatbin (bazel/cuda.bzl) runs it as <name>_cuobjdump_test with
cuobjdump = @kl_sass_tools//:cuobjdump (PyPI's nvidia-cuda-cuobjdump, which
./bazelw installs); where that is missing the test fails saying so. Only a
build without a CUDA toolkit (empty cubins) skips, saying that.

    --cuobjdump PATH --cubins CUBIN...
"""

import os
import subprocess
import sys
import unittest

import cubin_nvinfo as nvinfo
import junit_unittest

CUOBJDUMP = None
CUBINS = []


class CuobjdumpTest(unittest.TestCase):
    def test_there_are_cubins(self):
        self.assertTrue(CUBINS, "no --cubins given")

    def test_cuobjdump_runs(self):
        r = subprocess.run([CUOBJDUMP, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 0, "%s --version: %s" % (CUOBJDUMP, r.stdout.strip()))
        print(r.stdout.strip().splitlines()[-1])

    def check(self, path):
        name = os.path.basename(path)
        if os.path.getsize(path) == 0:
            self.skipTest("%s is empty: built without a CUDA toolkit" % name)
        r = subprocess.run([CUOBJDUMP, "-elf", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 0, "cuobjdump -elf %s: %s" % (name, r.stderr.strip()))
        want = nvinfo.parse_cuobjdump_elf(r.stdout, name)
        got = nvinfo.load(path).kernels
        self.assertTrue(want, "%s: cuobjdump showed no kernel" % name)
        self.assertEqual(sorted(got), sorted(want), "%s: kernels, reader vs cuobjdump" % name)
        for k in sorted(want):
            self.assertEqual([p.key() for p in got[k].params], [p.key() for p in want[k].params],
                             "%s: kernel %s: (ordinal, offset, size) of each parameter, reader vs cuobjdump" % (name, k))
            self.assertEqual(got[k].param_size, want[k].param_size,
                             "%s: kernel %s: EIATTR_CBANK_PARAM_SIZE, reader vs cuobjdump" % (name, k))


def add_tests():
    for c in CUBINS:
        def test(self, c=c):
            self.check(c)

        safe = "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(c))
        setattr(CuobjdumpTest, "test_reader_agrees_with_cuobjdump_on_" + safe, test)


def parse_args(argv):
    cuobjdump, cubins, rest, target, i = None, [], [], None, 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--cuobjdump" and i < len(argv):
            cuobjdump = argv[i]
            i += 1
            target = None
        elif a == "--cubins":
            target = cubins
        elif target is not None and not a.startswith("-"):
            target.append(a)
        else:
            rest.append(a)
    return cuobjdump, cubins, rest


if __name__ == "__main__":
    CUOBJDUMP, cubins, rest = parse_args(sys.argv[1:])
    if CUOBJDUMP is None:
        sys.exit("usage: cuobjdump_test.py --cuobjdump PATH --cubins CUBIN...")
    CUOBJDUMP = os.path.abspath(CUOBJDUMP)
    CUBINS.extend(cubins)
    add_tests()
    junit_unittest.main(argv=rest)
