"""Error corpus: tests/codegen/errors/<case>/{<family>.yaml, expected_stderr.txt}.

Each folder is a bad spec named for what is wrong with it. The generator
must exit 1, print exactly expected_stderr.txt (every problem as
file:line:col: error: message; hint, then one summary line), and leave its
output folder exactly as it was: files already there unchanged, nothing
added.
"""

import os
import tempfile
import unittest

import codegen_test_support as support

CASES = sorted(d for d in os.listdir(support.ERRORS) if os.path.isdir(os.path.join(support.ERRORS, d)))

# What each pre-existing output holds before a failed run; it must survive.
OLD_FILES = {
    "klaunch/bad.h": b"/* an older bad.h */\n",
    "klaunch/bad.cuh": b"/* an older bad.cuh */\n",
    "LAUNCHERS.md": b"# older reference\n",
}


class ErrorCorpusTest(unittest.TestCase):
    def test_there_are_enough_cases(self):
        self.assertGreaterEqual(len(CASES), 30, CASES)

    def _check_case(self, case):
        case_dir = os.path.join(support.ERRORS, case)
        spec = support.case_spec(case_dir)
        with open(os.path.join(case_dir, "expected_stderr.txt")) as f:
            expected = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            for rel, data in OLD_FILES.items():
                os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
                with open(os.path.join(out, rel), "wb") as f:
                    f.write(data)
            before = support.tree_snapshot(out)
            rc, stdout, stderr = support.run_codegen(
                ["--include-dir", out, "--docs", os.path.join(out, "LAUNCHERS.md"), spec], cwd=case_dir
            )
            self.assertEqual(stderr, expected, "%s: stderr" % case)
            self.assertEqual(rc, 1, "%s: exit status" % case)
            self.assertEqual(stdout, "")
            self.assertEqual(support.tree_snapshot(out), before, "%s: the output folder changed" % case)
            self.assertEqual(sorted(os.listdir(tmp)), ["out"], "%s: something was written beside it" % case)

    def test_every_error_line_has_position_and_hint(self):
        for case in CASES:
            with open(os.path.join(support.ERRORS, case, "expected_stderr.txt")) as f:
                lines = f.read().splitlines()
            self.assertTrue(lines[-1].startswith("klaunch_codegen: "), case)
            self.assertTrue(lines[-1].endswith("; nothing written"), case)
            for line in lines[:-1]:
                path, line_no, col, rest = line.split(":", 3)
                self.assertTrue(path.endswith(".yaml"), line)
                self.assertGreaterEqual(int(line_no), 1, line)
                self.assertGreaterEqual(int(col), 1, line)
                self.assertTrue(rest.startswith(" error: "), line)
                self.assertIn("; ", rest, "%s: no hint in %r" % (case, line))


def _add_case_tests():
    for case in CASES:
        def test(self, case=case):
            self._check_case(case)

        setattr(ErrorCorpusTest, "test_%s" % case, test)


_add_case_tests()

if __name__ == "__main__":
    support.main()
