"""mla_decode_bench's command line, refused before any GPU is touched (the
arguments are read before the driver is loaded, so this runs anywhere):
a bad argument prints the usage and exits 2, --help prints it and exits 0.

    ./bazelw test //bench/mla_decode:args_test
"""
import os
import subprocess
import sys
import unittest

import junit_unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mla_decode_bench")


def run(*args):
    r = subprocess.run([BENCH] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


class MlaDecodeBenchArgsTest(unittest.TestCase):
    def assert_refused(self, args, why):
        rc, out, err = run(*args)
        self.assertEqual(rc, 2, (args, out, err))
        self.assertIn("mla_decode_bench: " + why, err)
        self.assertIn("usage: mla_decode_bench [--json FILE] [--runs N] [--only WORD,WORD...] [--quick]", err)
        # Refused before the driver: nothing about a GPU or the driver.
        self.assertNotIn("kl_cuda_backend_init", err)
        self.assertEqual(out, "")

    def test_an_unknown_argument_gets_the_usage(self):
        self.assert_refused(["--bogus"], "unknown argument '--bogus'")
        self.assert_refused(["mem"], "unknown argument 'mem'")

    def test_runs_must_be_a_count(self):
        for bad in ("x", "0", "-3", "12abc", "", "100001", "99999999999999999999"):
            self.assert_refused(["--runs", bad], "--runs: a count of 1 to 100000, not '%s'" % bad)

    def test_an_option_without_its_value(self):
        self.assert_refused(["--runs"], "--runs needs a count")
        self.assert_refused(["--json"], "--json needs a file name")
        self.assert_refused(["--only"], "--only needs a comma-separated list of words")
        self.assert_refused(["--json", ""], "--json needs a file name")

    def test_only_needs_a_word(self):
        self.assert_refused(["--only", ","], "--only needs at least one word")

    def test_a_bad_argument_after_good_ones_is_still_refused(self):
        self.assert_refused(["--quick", "--runs", "3", "--only", "mem", "--what"], "unknown argument '--what'")

    def test_help_prints_the_usage_and_exits_0(self):
        rc, out, err = run("--help")
        self.assertEqual(rc, 0, err)
        self.assertIn("usage: mla_decode_bench", out)
        self.assertIn("--quick", out)


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
