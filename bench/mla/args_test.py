"""mla_bench's command line, refused before any GPU is touched (the
arguments are read before the driver is loaded, so this runs anywhere).

Regression: --ab-ctas took its count through std::stoul, so a count that
was not a number ended the program with an uncaught exception (abort)
instead of a message naming the option.
"""
import os
import subprocess
import sys
import unittest

import junit_unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mla_bench")


def run(*args):
    r = subprocess.run([BENCH] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    return r.returncode, r.stdout


class MlaBenchArgsTest(unittest.TestCase):
    def test_a_bad_ab_ctas_is_refused_by_name_not_thrown(self):
        for bad in ("x", "0", "70000"):
            rc, out = run("--ab-ctas", bad)
            self.assertEqual(rc, 1, out)
            self.assertIn("--ab-ctas: B's grid is 1 to 65535 blocks", out)

    def test_a_bad_gemm_ctas_is_refused_by_name(self):
        rc, out = run("--gemm-ctas", "128,0")
        self.assertEqual(rc, 1, out)
        self.assertIn("--gemm-ctas: each grid is 1 to 65535 blocks", out)

    def test_an_unknown_argument_gets_the_usage(self):
        rc, out = run("--bogus")
        self.assertEqual(rc, 1, out)
        self.assertIn("usage: mla_bench", out)
        self.assertIn("[--ab-ctas N]", out)


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
