"""Every kernel source opens with where its reference and its tests are and
the one command that runs them (issue 14), and what it names exists:

    /* Reference: tests/<family>/<file> (...)
     * Tests:
     *   tests/<family>/<file> (...)
     * Run them (...):
     *   ./bazelw test \\
     *     //tests/<family>:<target> ...
     */

The named files must be files of tests/<family>/ and each named target a
name of tests/<family>/BUILD, so the header cannot point at a test that was
moved or renamed. They are looked up in the source tree the kernels come
from (their runfiles resolve to it), so a new family's tests/<family>/
needs no line here; the test is tagged "external" (never cached), since
those files are not its declared inputs.

    kernel_headers_test.py K.cu...
"""
import os
import re
import sys
import unittest

import junit_unittest

KERNELS = []


def source_root(kernel):
    """The workspace directory the kernel source (a runfile) resolves into."""
    real = os.path.realpath(kernel)
    return real[: real.rindex("/kernels/")]


def header(path):
    with open(path) as f:
        text = f.read()
    if not text.startswith("/* Reference: "):
        return None
    return text[: text.index("*/")]


class KernelHeadersTest(unittest.TestCase):
    def test_there_are_kernels(self):
        self.assertGreater(len(KERNELS), 0)

    def check(self, path):
        rel = path[path.index("kernels/"):]
        root = source_root(path)
        family = rel.split("/")[1]
        h = header(path)
        self.assertIsNotNone(h, "%s: does not open with '/* Reference: tests/%s/...', its tests and the command "
                                "that runs them (see kernels/%s's other sources)" % (rel, family, family))
        ref = re.match(r"/\* Reference: (\S+)", h).group(1)
        self.assertIn("\n * Tests:\n", h, "%s: no ' * Tests:' line" % rel)
        self.assertIn("./bazelw test", h, "%s: no './bazelw test' command" % rel)
        tests_part, run_part = h.split(" * Tests:\n", 1)[1].split("./bazelw test", 1)
        tests = re.findall(r"^ \*   (tests/\S+)", tests_part, re.M)
        targets = re.findall(r"(//tests/\S+?:\w+)", run_part)
        self.assertTrue(tests, "%s: names no test file" % rel)
        self.assertTrue(targets, "%s: its command names no target" % rel)
        for f in [ref] + tests:
            self.assertTrue(f.startswith("tests/%s/" % family), "%s: %s is not in tests/%s/" % (rel, f, family))
            self.assertTrue(os.path.isfile(os.path.join(root, f)), "%s: names %s, which does not exist" % (rel, f))
        for t in targets:
            pkg, name = t[2:].split(":")
            build = os.path.join(root, pkg, "BUILD")
            self.assertTrue(os.path.isfile(build), "%s: names %s, but there is no %s/BUILD" % (rel, t, pkg))
            with open(build) as b:
                defined = re.search(r'"%s"' % re.escape(name), b.read())
            self.assertTrue(defined, "%s: names %s, which %s/BUILD does not define" % (rel, t, pkg))
        # Each test file it names runs in its command.
        for f in tests:
            target = "//%s:%s" % (os.path.dirname(f), os.path.basename(f).rsplit(".", 1)[0])
            self.assertIn(target, targets, "%s: names %s but its command does not run %s" % (rel, f, target))


def add_tests():
    for k in KERNELS:
        def test(self, k=k):
            self.check(k)
        safe = re.sub(r"\W", "_", k[k.index("kernels/") + len("kernels/"):])
        setattr(KernelHeadersTest, "test_opens_with_its_reference_tests_and_command_" + safe, test)


if __name__ == "__main__":
    rest = []
    for a in sys.argv[1:]:
        (rest if a.startswith("-") else KERNELS).append(a)
    add_tests()
    junit_unittest.main(argv=rest)
