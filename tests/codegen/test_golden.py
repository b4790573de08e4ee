"""Golden cases: tests/codegen/golden/<case>/{<family>.yaml, expected/...}.

Each case's spec, run through the generator (from inside the case folder,
so the spec path reads <family>.yaml), must produce exactly
expected/klaunch/<family>.h, expected/klaunch/<family>.cuh,
expected/python/klaunch_<family>.py and .c (the Python launchers and their
library's source) and expected/LAUNCHERS.md. A change to the output shows up here as a diff to
review; the expected files are regenerated only deliberately, by
`python3 tests/codegen/test_golden.py --update` after reading the diff.
"""

import difflib
import os
import sys
import tempfile
import unittest

import codegen_test_support as support

CASES = sorted(d for d in os.listdir(support.GOLDEN) if os.path.isdir(os.path.join(support.GOLDEN, d)))


def generate(case, out):
    case_dir = os.path.join(support.GOLDEN, case)
    spec = support.case_spec(case_dir)
    rc, _, err = support.run_codegen(
        ["--include-dir", out, "--python-dir", os.path.join(out, "python"), "--docs", os.path.join(out, "LAUNCHERS.md"),
         spec], cwd=case_dir
    )
    return rc, err


class GoldenTest(unittest.TestCase):
    def test_there_are_enough_cases(self):
        self.assertGreaterEqual(len(CASES), 4, CASES)

    def _check_case(self, case):
        with tempfile.TemporaryDirectory() as out:
            rc, err = generate(case, out)
            self.assertEqual(rc, 0, err)
            self.assertEqual(err, "")
            got = support.tree_snapshot(out)
            want = support.tree_snapshot(os.path.join(support.GOLDEN, case, "expected"))
            self.assertEqual(sorted(got), sorted(want), "files made for %s" % case)
            for path in sorted(want):
                if got[path] != want[path]:
                    diff = "".join(
                        difflib.unified_diff(
                            want[path].decode().splitlines(True),
                            got[path].decode().splitlines(True),
                            "expected/" + path,
                            "generated/" + path,
                        )
                    )
                    self.fail("%s: %s differs from the golden copy:\n%s" % (case, path, diff[:6000]))


def _add_case_tests():
    for case in CASES:
        def test(self, case=case):
            self._check_case(case)

        test.__doc__ = "golden case %s" % case
        setattr(GoldenTest, "test_%s_matches_expected" % case, test)


_add_case_tests()


def update():
    """Rewrites every expected/ folder from the current generator."""
    import shutil

    for case in CASES:
        expected = os.path.join(support.GOLDEN, case, "expected")
        shutil.rmtree(expected, ignore_errors=True)
        rc, err = generate(case, expected)
        print("%s: %s" % (case, "updated" if rc == 0 else "FAILED\n" + err))


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        support.main()
