#!/usr/bin/env python3
"""Counts the test cases of a test run and prints what failed.

    test_summary.py --bep FILE        tests of one `bazel test` run, from its
                                      --build_event_json_file (what ./bazelw uses)
    test_summary.py --testlogs DIR    every DIR/**/test.xml (e.g. bazel-testlogs,
                                      or the copies tools/gpu/run.sh writes)

A test case is a JUnit <testcase> element: GoogleTest writes one per TEST;
for a test that writes no XML (a py_test, a shell test) Bazel writes one for
the whole target. A case is failed when it has a <failure> or <error> child,
skipped when it has a <skipped> child, result="skipped" or "suppressed", or
status="notrun" (GTEST_SKIP, DISABLED_ tests), and passed otherwise.

With --bep only the tests this run built or ran count, so results left in
bazel-testlogs by earlier runs of other targets cannot creep in. A test
Bazel reports failed whose XML records no failing case (a crash, a timeout)
counts as one failed case. A build failure is not a test result: a test
target that did not run because the build failed (or stopped first) is
neither passed nor failed; the failed actions (label, first error line) and
the tests that did not run are listed, and a line
"build failed: N targets not built" comes before the counts.

Prints, per target, the failed cases (and a line for skipped ones), then one
last line exactly "N passed, N failed, N skipped". Exits 1 when a case failed
or the build failed.
"""
import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from urllib.parse import unquote, urlparse

MAX_LISTED = 10  # failed cases listed per target


class Target:
    def __init__(self, label):
        self.label = label
        self.passed = 0
        self.failed = []   # (case name, first line of the message)
        self.skipped = []  # (case name, first line of the reason)
        self.problem = ""  # target-level failure (no XML, did not build, ...)
        self.log = ""


def first_line(text):
    """A message on one line ("file:line Expected equality ..."), cut short."""
    text = " ".join((text or "").split())
    return text if len(text) <= 200 else text[:197] + "..."


def case_name(case):
    cls = case.get("classname")
    name = case.get("name", "?")
    return "%s.%s" % (cls, name) if cls and cls != name else name


def read_xml(path, target):
    """Adds the cases of one JUnit XML file to target; False if unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        target.problem = "unreadable %s (%s)" % (os.path.basename(path), e)
        return False
    for case in root.iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            target.failed.append((case_name(case), first_line(bad.get("message") or bad.text)))
        elif (skip is not None or case.get("result") in ("skipped", "suppressed")
              or case.get("status") == "notrun"):
            reason = first_line(skip.get("message") or skip.text) if skip is not None else ""
            target.skipped.append((case_name(case), reason))
        else:
            target.passed += 1
    return True


def short_path(path):
    """bazel-testlogs/... for a path in Bazel's output tree, else as given."""
    i = path.find("/testlogs/")
    return "bazel-testlogs/" + path[i + len("/testlogs/"):] if i >= 0 else path


def uri_path(uri):
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


class Build:
    """What the build (not the tests) did: failed actions and targets not built."""

    def __init__(self):
        self.failed_actions = []  # (label, first error line, stderr path)
        self.not_built = {}       # label -> why ("failed to build", "aborted", ...)
        self.exit_name = ""       # buildFinished's exit code name

    def failed(self):
        return bool(self.not_built or self.failed_actions) or self.exit_name not in ("", "SUCCESS", "TESTS_FAILED", "NO_TESTS_FOUND")


def first_error(path):
    """The first line of a failed action's stderr that reads like an error."""
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f]
    except OSError:
        return ""
    for l in lines:
        if "error" in l.lower():
            return first_line(l)
    return first_line(next((l for l in lines if l.strip()), ""))


def from_bep(path):
    """(targets, build) of one bazel invocation's build event JSON file."""
    results = {}      # (label, run, shard) -> (attempt, status, xml, log)
    test_labels = []  # test targets this invocation was asked to test
    build = Build()
    flags = set()
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            event = json.loads(line)
            eid = event.get("id", {})
            aborted = event.get("aborted")
            if "testResult" in eid and "testResult" in event:
                key = eid["testResult"]
                res = event["testResult"]
                files = {o.get("name"): uri_path(o.get("uri", "")) for o in res.get("testActionOutput", [])}
                k = (key["label"], key.get("run", 1), key.get("shard", 1))
                attempt = key.get("attempt", 1)
                if k not in results or results[k][0] <= attempt:
                    results[k] = (attempt, res.get("status", "NO_STATUS"), files.get("test.xml"), files.get("test.log"))
            elif "targetConfigured" in eid and aborted is None:
                conf = event.get("configured", {})
                if "testSize" in conf or conf.get("targetKind", "").endswith("_test rule"):
                    label = eid["targetConfigured"]["label"]
                    if label not in test_labels:
                        test_labels.append(label)
            elif "actionCompleted" in eid and "action" in event:
                act = event["action"]
                if not act.get("success"):  # (JSON leaves out success: false)
                    err = uri_path(act.get("stderr", {}).get("uri", ""))
                    build.failed_actions.append((eid["actionCompleted"].get("label") or act.get("label", "?"),
                                                 first_error(err) if err else "", err))
            elif "targetCompleted" in eid:
                label = eid["targetCompleted"]["label"]
                if aborted is not None:
                    build.not_built[label] = first_line(aborted.get("description")) or "not built: the build stopped first"
                elif "completed" in event and not event["completed"].get("success"):
                    build.not_built[label] = "failed to build"
            elif "unstructuredCommandLine" in eid:
                # --//pkg:flag=value: Bazel announces the flag's label as a
                # target and aborts it at the end; it is not one to build.
                for a in event.get("unstructuredCommandLine", {}).get("args", []):
                    if a.startswith(("--//", "--@")):
                        flags.add(a[2:].split("=", 1)[0])
            elif "buildFinished" in eid:
                build.exit_name = event.get("finished", {}).get("exitCode", {}).get("name", "")
            elif aborted is not None:
                # What did not load or analyse says why; a target the build
                # never reached (it stopped at an earlier error) says nothing.
                for kind in ("configuredLabel", "unconfiguredLabel", "pattern"):
                    if kind in eid and aborted.get("description"):
                        what = eid[kind].get("label") or " ".join(eid[kind].get("pattern", []))
                        build.failed_actions.append((what, first_line(aborted["description"]), ""))
                for kind in ("targetConfigured", "testSummary"):
                    if kind in eid and "label" in eid[kind]:
                        build.not_built.setdefault(eid[kind]["label"], first_line(aborted.get("description")) or
                                                   "not built: " + aborted.get("reason", "aborted").lower())

    targets = {}
    for (label, run, shard), (attempt, status, xml, log) in sorted(results.items()):
        if status == "NO_STATUS" and not xml:
            continue  # an aborted test: it never ran (counted as not built)
        t = targets.setdefault(label, Target(label))
        t.log = short_path(log) if log else t.log
        before, passed_before = len(t.failed), t.passed
        if xml and os.path.exists(xml):
            read_xml(xml, t)
        else:
            t.problem = "no test.xml (status %s)" % status
        if status not in ("PASSED", "FLAKY") and len(t.failed) == before and not t.problem:
            # (a timeout or crash: the XML is Bazel's one case, not a pass)
            t.passed = passed_before
            t.problem = "Bazel reports %s but test.xml records no failing case" % status
    for label in test_labels:
        if label not in targets:
            build.not_built.setdefault(label, "did not run")
    for label in targets:
        build.not_built.pop(label, None)  # it ran: its result counts
    for label in flags:
        build.not_built.pop(label, None)
    build.tests_not_run = sorted(l for l in test_labels if l not in targets)
    return [targets[k] for k in sorted(targets)], build


def from_testlogs(root):
    targets = []
    for dirpath, _, files in sorted(os.walk(root, followlinks=True)):
        if "test.xml" in files:
            t = Target(os.path.relpath(dirpath, root))
            read_xml(os.path.join(dirpath, "test.xml"), t)
            if os.path.exists(os.path.join(dirpath, "test.log")):
                t.log = os.path.join(dirpath, "test.log")
            targets.append(t)
    return targets


def report(targets, out, build=None):
    """Skips first, then failures (nearest the count line), then the build's
    failures, then the counts. Returns the number of failed cases."""
    passed = sum(t.passed for t in targets)
    skipped = sum(len(t.skipped) for t in targets)
    failed = sum(len(t.failed) + (1 if t.problem else 0) for t in targets)
    for t in targets:
        if t.skipped:
            name, reason = t.skipped[0]
            print("SKIPPED %s: %d case%s (%s%s)" % (
                t.label, len(t.skipped), "" if len(t.skipped) == 1 else "s", name,
                ": " + reason if reason else ""), file=out)
    for t in targets:
        if not (t.failed or t.problem):
            continue
        print("FAILED %s" % t.label, file=out)
        if t.problem:
            print("  %s" % t.problem, file=out)
        for name, msg in t.failed[:MAX_LISTED]:
            print("  %s%s" % (name, ": " + msg if msg else ""), file=out)
        if len(t.failed) > MAX_LISTED:
            print("  ... and %d more" % (len(t.failed) - MAX_LISTED), file=out)
        if t.log:
            print("  log: %s" % t.log, file=out)
    if build is not None and build.failed():
        seen = set()
        for label, err, _ in build.failed_actions:
            if (label, err) in seen:
                continue
            seen.add((label, err))
            print("BUILD FAILED %s%s" % (label, ": " + err if err else ""), file=out)
        if build.tests_not_run:
            shown = build.tests_not_run[:MAX_LISTED]
            more = len(build.tests_not_run) - len(shown)
            print("NOT RUN (not built): %s%s" % (" ".join(shown), " and %d more" % more if more else ""), file=out)
        n = len(build.not_built)
        print("build failed: %d target%s not built (%d test%s did not run)%s" % (
            n, "" if n == 1 else "s", len(build.tests_not_run), "" if len(build.tests_not_run) == 1 else "s",
            "" if n or not build.exit_name else "; bazel: " + build.exit_name), file=out)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped), file=out)
    return failed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--bep", metavar="FILE", help="build event JSON file of one bazel test run")
    src.add_argument("--testlogs", metavar="DIR", help="a tree of test.xml files (default: bazel-testlogs)")
    args = ap.parse_args(argv)
    build = None
    if args.bep:
        targets, build = from_bep(args.bep)
    else:
        targets = from_testlogs(args.testlogs or "bazel-testlogs")
    sys.stdout.flush()
    failed = report(targets, sys.stdout, build)
    return 1 if failed or (build is not None and build.failed()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
