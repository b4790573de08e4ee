#!/usr/bin/env python3
"""Which generator regression tests fail on an older commit, and how.

    python3 tests/codegen/on_commit.py [COMMIT] [--files test_cli.py ...]

COMMIT (default 0c9d934, where issue 15 was filed) is unpacked with
`git archive` into a scratch folder. Then, with this checkout's tests and
data but that commit's generator and runtime headers
(KLAUNCH_TEST_CHECKOUT, codegen_test_support.py):

- every case of tests/codegen/errors/ runs through that generator and is
  classed by what it did: a traceback, a hang, accepted (exit 0), a write
  on error, refused with other text, or passed (the test does not fail
  there: no evidence of a fix);
- the program-level test files (--files; the default list below) run
  whole, and each test method's outcome is printed.

A test that imports a module the old commit lacks fails at import; such a
file is reported as "import error", which proves nothing. Not a test (it
needs git and the old tree): the evidence behind issue 15's defect table.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ERRORS = os.path.join(HERE, "errors")
FILES = ["test_cli.py", "test_names.py", "test_output_text.py"]


def classify_error_case(old_root, case):
    d = os.path.join(ERRORS, case)
    spec = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))[0]
    with open(os.path.join(d, "expected_stderr.txt")) as f:
        expected = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        os.makedirs(os.path.join(out, "klaunch"))
        env = dict(os.environ)
        env.pop("BUILD_WORKSPACE_DIRECTORY", None)
        cmd = [sys.executable, os.path.join(old_root, "codegen", "main.py"), "--include-dir", out,
               "--docs", os.path.join(out, "LAUNCHERS.md"), spec]
        try:
            p = subprocess.run(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
        except subprocess.TimeoutExpired:
            return "hang (over 60 s)"
        wrote = sorted(os.listdir(os.path.join(out, "klaunch"))) + (["LAUNCHERS.md"] if os.path.exists(
            os.path.join(out, "LAUNCHERS.md")) else [])
    if "Traceback (most recent call last)" in p.stderr:
        last = p.stderr.strip().splitlines()[-1].strip()
        what = "traceback: " + last[:90]
    elif p.returncode == 0:
        what = "accepted (exit 0)"
    elif p.stderr == expected and p.returncode == 1 and not wrote:
        return "PASSES (no evidence)"
    else:
        first = (p.stderr.splitlines() or [""])[0]
        what = "refused, other text: " + first[:110]
    if wrote and p.returncode != 0:
        what += "; wrote " + ", ".join(wrote)
    return what


def run_file(old_root, name):
    env = dict(os.environ, KLAUNCH_TEST_CHECKOUT=old_root)
    env.pop("XML_OUTPUT_FILE", None)
    p = subprocess.run([sys.executable, os.path.join(HERE, name)], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    rows = re.findall(r"^(test_\w+) \([\w.]+\)(?: \(.*\))? \.\.\. (ok|FAIL|ERROR|skipped.*)$", p.stdout, flags=re.M)
    if not rows:
        return [(name, "import error (no evidence)")]
    seen = {}
    for test, outcome in rows:
        if seen.get(test) in ("FAIL", "ERROR"):
            continue
        seen[test] = outcome
    return [(test, "fails (%s)" % o if o in ("FAIL", "ERROR") else "PASSES (no evidence)" if o == "ok" else o)
            for test, o in seen.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commit", nargs="?", default="0c9d934")
    ap.add_argument("--files", nargs="*", default=FILES)
    ap.add_argument("--cases", nargs="*", help="error cases (default: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "-C", ROOT, "archive", args.commit, "codegen", "include"],
                                 stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        print("on %s (%s):" % (args.commit, subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", args.commit],
                                                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()))
        cases = args.cases if args.cases is not None else sorted(
            c for c in os.listdir(ERRORS) if os.path.isdir(os.path.join(ERRORS, c)))
        for case in cases:
            print("errors_test test_%-55s %s" % (case, classify_error_case(old, case)))
        for name in args.files:
            for test, outcome in run_file(old, name):
                print("%-11s %-60s %s" % (name[5:-3] + "_test", test, outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
