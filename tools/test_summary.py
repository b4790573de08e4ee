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
bazel-testlogs by earlier runs of other targets cannot creep in; a test target
that did not run (it failed to build, or the build stopped first), and one
Bazel reports failed whose XML records no failing case (a crash, a timeout),
counts as one failed case.

Prints, per target, the failed cases (and a line for skipped ones), then one
last line exactly "N passed, N failed, N skipped". Exits 1 when a case failed.
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


def from_bep(path):
    """Targets of one bazel invocation's build event JSON file."""
    results = {}      # (label, run, shard) -> (attempt, status, xml, log)
    test_labels = []  # test targets this invocation was asked to test
    not_run = {}      # label -> why
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            event = json.loads(line)
            eid = event.get("id", {})
            if "testResult" in eid and "testResult" in event:
                key = eid["testResult"]
                res = event["testResult"]
                files = {o.get("name"): uri_path(o.get("uri", "")) for o in res.get("testActionOutput", [])}
                k = (key["label"], key.get("run", 1), key.get("shard", 1))
                attempt = key.get("attempt", 1)
                if k not in results or results[k][0] <= attempt:
                    results[k] = (attempt, res.get("status", "NO_STATUS"), files.get("test.xml"), files.get("test.log"))
            elif "targetConfigured" in eid:
                conf = event.get("configured", {})
                if "testSize" in conf or conf.get("targetKind", "").endswith("_test rule"):
                    label = eid["targetConfigured"]["label"]
                    if label not in test_labels:
                        test_labels.append(label)
            elif "targetCompleted" in eid:
                label = eid["targetCompleted"]["label"]
                if "aborted" in event:
                    not_run[label] = first_line(event["aborted"].get("description")) or event["aborted"].get("reason", "aborted")
                elif "completed" in event and not event["completed"].get("success"):
                    # (JSON leaves out success: false)
                    not_run[label] = "failed to build"
            elif "aborted" in event:
                # A target the build never reached (it stopped at an earlier error).
                for kind in ("targetCompleted", "targetConfigured", "testSummary"):
                    if kind in eid and "label" in eid[kind]:
                        not_run.setdefault(eid[kind]["label"], "not built: " + (
                            first_line(event["aborted"].get("description")) or event["aborted"].get("reason", "aborted").lower()))

    targets = {}
    for (label, run, shard), (attempt, status, xml, log) in sorted(results.items()):
        t = targets.setdefault(label, Target(label))
        t.log = short_path(log) if log else t.log
        before = len(t.failed)
        if xml and os.path.exists(xml):
            read_xml(xml, t)
        else:
            t.problem = "no test.xml (status %s)" % status
        if status not in ("PASSED", "FLAKY") and len(t.failed) == before and not t.problem:
            t.problem = "Bazel reports %s but test.xml records no failing case" % status
    for label in test_labels:
        if label not in targets:
            t = targets.setdefault(label, Target(label))
            t.problem = not_run.get(label, "did not run")
    return [targets[k] for k in sorted(targets)]


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


def report(targets, out):
    """Skips first, then failures (nearest the count line), then the counts."""
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
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped), file=out)
    return failed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--bep", metavar="FILE", help="build event JSON file of one bazel test run")
    src.add_argument("--testlogs", metavar="DIR", help="a tree of test.xml files (default: bazel-testlogs)")
    args = ap.parse_args(argv)
    if args.bep:
        targets = from_bep(args.bep)
    else:
        targets = from_testlogs(args.testlogs or "bazel-testlogs")
    sys.stdout.flush()
    return 1 if report(targets, sys.stdout) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
