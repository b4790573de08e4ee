#!/usr/bin/env python3
"""Runs a module's unittest tests and writes JUnit XML, one <testcase> per test.

    # at the end of a test file
    if __name__ == "__main__":
        junit_unittest.main()

CI counts test cases from the JUnit XML files of a run (tools/test_summary.py);
Bazel only writes one case per py_test target by itself. With
$XML_OUTPUT_FILE set (as `bazel test` sets it), the XML goes there: a
<testcase> per test method, with <failure>, <error> or <skipped> children.
Text output is unittest's own. Exits 1 when a test failed or errored.
"""

import sys
import time
import traceback
import unittest
import xml.etree.ElementTree as ET


class _Result(unittest.TextTestResult):
    """unittest's text result that also keeps (test, outcome, text, seconds)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []
        self._start = 0.0

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, text=""):
        self.cases.append((test, outcome, text, time.monotonic() - self._start))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failure", "unexpected success")

    def addSubTest(self, test, subtest, err):
        # A failing subtest fails its test method (one case per method).
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if issubclass(err[0], test.failureException) else "error"
            self._record(test, kind, "%s\n%s" % (subtest.id(), self._exc_info_to_string(err, test)))


def _case_names(test):
    """('pkg.module.Class', 'test_method') for a test, or the id for others."""
    test_id = test.id()
    if "." in test_id:
        cls, _, name = test_id.rpartition(".")
        return cls, name
    return "", test_id


def write_xml(path, suite_name, cases):
    """One <testsuite> with a <testcase> per test method (subtests merged)."""
    merged = {}
    order = []
    for test, outcome, text, seconds in cases:
        key = test.id()
        if key not in merged:
            merged[key] = [test, outcome, text, seconds]
            order.append(key)
            continue
        entry = merged[key]
        entry[3] += seconds
        rank = {"passed": 0, "skipped": 1, "failure": 2, "error": 3}
        if rank[outcome] > rank[entry[1]]:
            entry[1], entry[2] = outcome, text
        elif outcome == entry[1] and outcome in ("failure", "error"):
            entry[2] += "\n" + text
    counts = {"tests": len(order), "failures": 0, "errors": 0, "skipped": 0}
    suite = ET.Element("testsuite", name=suite_name)
    total = 0.0
    for key in order:
        test, outcome, text, seconds = merged[key]
        total += seconds
        cls, name = _case_names(test)
        case = ET.SubElement(suite, "testcase", classname=cls, name=name, time="%.3f" % seconds)
        if outcome == "failure":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=(text.strip().splitlines() or [""])[-1]).text = text
        elif outcome == "error":
            counts["errors"] += 1
            ET.SubElement(case, "error", message=(text.strip().splitlines() or [""])[-1]).text = text
        elif outcome == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=text)
    for k, v in counts.items():
        suite.set(k, str(v))
    suite.set("time", "%.3f" % total)
    root = ET.Element("testsuites")
    root.append(suite)
    for k, v in counts.items():
        root.set(k, str(v))
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def main(module="__main__", argv=None):
    """Runs the tests of `module` (names on the command line select some)."""
    import os

    argv = list(sys.argv[1:] if argv is None else argv)
    loader = unittest.TestLoader()
    mod = sys.modules[module] if isinstance(module, str) else module
    if argv:
        suite = loader.loadTestsFromNames(argv, mod)
    else:
        suite = loader.loadTestsFromModule(mod)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=_Result)
    result = runner.run(suite)
    path = os.environ.get("XML_OUTPUT_FILE")
    if path:
        name = os.environ.get("TEST_TARGET") or getattr(mod, "__name__", "tests")
        try:
            write_xml(path, name, result.cases)
        except OSError:
            traceback.print_exc()
            sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    # python3 tools/junit_unittest.py path/to/test_x.py: runs that file's tests.
    import importlib.util
    import os

    if len(sys.argv) < 2:
        print("usage: junit_unittest.py TEST_FILE.py [TEST_NAME...]", file=sys.stderr)
        sys.exit(2)
    path = sys.argv[1]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("__test__", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["__test__"] = mod
    spec.loader.exec_module(mod)
    main(mod, sys.argv[2:])
