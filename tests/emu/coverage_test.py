"""Every launcher of every spec (specs/*.yaml) runs on the CPU emulator in
some emulated test, and every launcher with a computable extent has its
declared extents shown tight there (issue 44).

1. Called: its generated launcher kl_<name>( is called in one of the
   emulated tests' sources, tests/**/*emulated_test.cc. So a kernel added
   to a spec without an emulated test fails here, naming it.
2. Tight: a launcher one of whose pointers declares a computable extent
   (an `extent` that is not {unknown: ...}) is called in an emulated test
   source that also asserts extents reached (emu_test::extents_reached or
   emu_test::ExtentsReached, tests/emu/emu_test_util.h), outside comments;
   a source counts with the tests/ headers it includes (a shared runner
   such as tests/mla_decode/mla_decode_emu_harness.h asserts for them).

Half 2 is static; what makes it sound is its runtime half in every
emulated test program (tests/emu/emu_backend.cc, linked into each by
kl_emulated_test): the emulated backend records every launcher that runs
to completion, ExtentsReached records the launchers whose all() succeeded
(which it only does for launches of that launcher, complete, no NULL
pointer, every computable extent's last element touched by one of them),
and at the end of a whole run a launcher that ran with no such success
fails the program, naming it. So a test that calls the launcher and runs
it cannot skip the assertion, and half 2 catches the launcher whose
emulated test file asserts nothing at all (say, one that only checks
refusals). What neither half sees: a file that asserts for other
launchers and calls this one only on a path that never launches.

The specs and sources are read in the source tree this file resolves into
(its runfile is a link to it), so a new family's emulated test needs no
line in tests/emu/BUILD; the test is tagged "external" (never cached) for
that."""
import glob
import os
import re
import sys
import unittest

import yaml

from tools import junit_unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

_ASSERTS = re.compile(r"\bemu_test::(?:extents_reached\s*\(|ExtentsReached\b)")


def strip_comments(text):
    """C++ source without its comments (string literals kept whole, so a
    "//" inside one is not taken for a comment)."""
    out, at = [], 0
    for m in re.finditer(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', text, re.S):
        out.append(text[at:m.start()])
        out.append(m.group(0) if m.group(0).startswith('"') else " ")
        at = m.end()
    out.append(text[at:])
    return "".join(out)


_INCLUDE = re.compile(r'^\s*#\s*include\s+"(tests/[^"]+)"', re.M)


def with_includes(root, rel, seen):
    """The file's text without comments, then that of the project's test
    headers it includes ("tests/..."), each once: a runner shared by tests
    (tests/mla_decode/mla_decode_emu_harness.h) asserts for them."""
    if rel in seen or not os.path.exists(os.path.join(root, rel)):
        return ""
    seen.add(rel)
    with open(os.path.join(root, rel)) as f:
        text = strip_comments(f.read())
    return text + "".join("\n" + with_includes(root, inc, seen) for inc in _INCLUDE.findall(text))


def emulated_sources(root=ROOT):
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "tests", "**", "*emulated_test.cc"), recursive=True)):
        rel = os.path.relpath(path, root)
        out[rel] = with_includes(root, rel, set())
    return out


def launchers(root=ROOT):
    """(launcher, spec path, whether a pointer of it declares a computable extent)."""
    for spec in sorted(glob.glob(os.path.join(root, "specs", "*.yaml"))):
        with open(spec) as f:
            doc = yaml.safe_load(f)
        for launcher in doc.get("launchers", []):
            computable = any(isinstance(p, dict) and "extent" in p and
                             not (isinstance(p["extent"], dict) and "unknown" in p["extent"])
                             for p in launcher.get("params", []))
            yield launcher["name"], os.path.relpath(spec, root), computable


def call_of(name):
    return re.compile(r"\bkl_%s\b\s*[(,}]" % re.escape(name))


def uncalled(sources, specs):
    return ["%s (%s)" % (n, spec) for n, spec, _ in specs
            if not any(call_of(n).search(text) for text in sources.values())]


def untight(sources, specs):
    """Launchers with a computable extent called in no source that asserts extents reached."""
    return ["%s (%s; called in %s)" % (n, spec, ", ".join(f for f, t in sources.items() if call_of(n).search(t)))
            for n, spec, computable in specs
            if computable and any(call_of(n).search(t) for t in sources.values()) and
            not any(call_of(n).search(t) and _ASSERTS.search(t) for t in sources.values())]


class EveryLauncherIsEmulatedTest(unittest.TestCase):
    def test_there_are_specs_and_emulated_tests(self):
        self.assertTrue(glob.glob(os.path.join(ROOT, "specs", "*.yaml")))
        self.assertTrue(emulated_sources())

    def test_every_launcher_is_called_in_an_emulated_test(self):
        self.assertEqual(uncalled(emulated_sources(), list(launchers())), [],
                         "launchers no emulated test calls (docs/EMULATOR.md says how to add one)")

    def test_every_launcher_with_a_computable_extent_has_its_extents_asserted_reached(self):
        specs = list(launchers())
        self.assertTrue(any(c for _, _, c in specs))
        self.assertEqual(untight(emulated_sources(), specs), [],
                         "launchers whose emulated test asserts no extents reached: add an "
                         "emu_test::ExtentsReached (tests/emu/emu_test_util.h) after a launch whose shape touches "
                         "the last declared element of each buffer (docs/EMULATOR.md)")


class ScanTest(unittest.TestCase):
    """The scan on made-up sources and specs."""

    SPECS = [("a", "specs/f.yaml", True), ("b", "specs/f.yaml", True), ("maps_only", "specs/f.yaml", False)]

    def test_a_launcher_called_where_nothing_asserts_is_named(self):
        src = {"tests/f/x_emulated_test.cc": strip_comments(
            "void t() { kl_a(&k, p, n, nullptr); EXPECT_TRUE(emu_test::extents_reached(\"a\")); }\n"
            "// kl_b(&k) in a comment is no call\n"),
            "tests/f/y_emulated_test.cc": strip_comments(
            "void u() { kl_b(&k, p, nullptr); kl_maps_only(&k, &map, nullptr); }\n"
            "/* emu_test::ExtentsReached e(\"b\"); only in a comment */\n")}
        self.assertEqual(uncalled(src, self.SPECS), [])
        self.assertEqual(untight(src, self.SPECS), ["b (specs/f.yaml; called in tests/f/y_emulated_test.cc)"])

    def test_a_launcher_without_a_computable_extent_needs_no_assertion(self):
        src = {"tests/f/x_emulated_test.cc": "kl_maps_only(&k, &m, nullptr);"}
        self.assertEqual(untight(src, [("maps_only", "specs/f.yaml", False)]), [])

    def test_a_string_keeps_its_slashes(self):
        self.assertIn("emu_test::ExtentsReached", strip_comments('x("a//b"); emu_test::ExtentsReached e("a");'))

    def test_a_header_the_source_includes_counts(self):
        root = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "coverage_includes")
        os.makedirs(os.path.join(root, "tests", "f"), exist_ok=True)
        with open(os.path.join(root, "tests", "f", "runner.h"), "w") as f:
            f.write('#include "tests/f/x_emulated_test.cc"\ninline void run() { emu_test::ExtentsReached e("a"); }\n')
        with open(os.path.join(root, "tests", "f", "x_emulated_test.cc"), "w") as f:
            f.write('#include "tests/f/runner.h"\n#include "tests/f/missing.h"\nvoid t() { kl_a(&k, nullptr); }\n')
        src = emulated_sources(root)
        self.assertEqual(list(src), ["tests/f/x_emulated_test.cc"])
        self.assertEqual(untight(src, [("a", "specs/f.yaml", True)]), [])

    def test_unknown_extents_are_not_computable(self):
        root = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "coverage_scan")
        os.makedirs(os.path.join(root, "specs"), exist_ok=True)
        with open(os.path.join(root, "specs", "f.yaml"), "w") as f:
            f.write("family: f\nlaunchers:\n"
                    "  - name: paged\n    params:\n"
                    "      - {name: cache, type: const bf16*, extent: {unknown: the table}}\n"
                    "      - {name: map, type: tensor_map}\n      - n: u32\n"
                    "  - name: dense\n    params:\n"
                    "      - {name: x, type: const bf16*, extent: {rows: n, stride: s, width: w}}\n      - n: u32\n")
        self.assertEqual(list(launchers(root)), [("paged", "specs/f.yaml", False), ("dense", "specs/f.yaml", True)])


if __name__ == "__main__":
    junit_unittest.main()
