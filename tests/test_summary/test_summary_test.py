"""tools/test_summary.py on build event files of real runs (reduced), one
folder per case under cases/:

    bep.json              the --build_event_json_file lines (@CASE@ stands
                          for the folder: test.xml and stderr files are there)
    expected_stdout.txt   what it prints (@CASE@ again)
    expected_exit_code    0, or 1 when a case failed or the build failed

Cases: all_passed (with a --//bazel:cuda_archs flag, whose label Bazel
announces and aborts: not a target to build); tests_failed (a failing case, and a timeout whose XML
records none: one failed case, nothing passed); build_failed_stop and
build_failed_keep_going (a kernel that does not compile, the build stopping
first or going on: the tests it blocked did not run and are neither passed
nor failed; "build failed: N targets not built"); analysis_failed (a label
that does not exist).
"""

import os
import subprocess
import sys
import tempfile
import unittest

import junit_unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
SUMMARY = None  # tools/test_summary.py, from the command line


def read(path):
    with open(path) as f:
        return f.read()


class TestSummaryTest(unittest.TestCase):
    def run_case(self, case):
        folder = os.path.join(CASES, case)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(read(os.path.join(folder, "bep.json")).replace("@CASE@", folder))
            bep = f.name
        try:
            r = subprocess.run([sys.executable, SUMMARY, "--bep", bep], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
        finally:
            os.unlink(bep)
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout.replace(folder, "@CASE@"), read(os.path.join(folder, "expected_stdout.txt")))
        self.assertEqual(r.returncode, int(read(os.path.join(folder, "expected_exit_code"))))
        return r.stdout

    def test_all_passed(self):
        self.run_case("all_passed")

    def test_failing_cases_and_a_timeout_count_as_failed(self):
        out = self.run_case("tests_failed")
        self.assertNotIn("build failed", out)

    def test_a_build_that_stopped_counts_no_unbuilt_test(self):
        out = self.run_case("build_failed_stop")
        last = out.splitlines()[-2:]
        self.assertRegex(last[0], r"^build failed: \d+ targets not built")
        self.assertRegex(last[1], r"^\d+ passed, 0 failed, \d+ skipped$")

    def test_a_keep_going_build_names_the_failed_action(self):
        out = self.run_case("build_failed_keep_going")
        self.assertIn("BUILD FAILED //kernels:rms_norm: ./kernels/rms_norm/rms_norm_bf16.cu(16): error:", out)
        self.assertRegex(out.splitlines()[-1], r"^\d+ passed, 0 failed, \d+ skipped$")

    def test_an_analysis_failure_says_why(self):
        out = self.run_case("analysis_failed")
        self.assertIn("no such package 'nope'", out)

    def test_every_case_folder_is_tested(self):
        tested = {"all_passed", "tests_failed", "build_failed_stop", "build_failed_keep_going", "analysis_failed"}
        self.assertEqual(set(os.listdir(CASES)), tested)


if __name__ == "__main__":
    SUMMARY = sys.argv[1]
    junit_unittest.main(argv=sys.argv[2:])
