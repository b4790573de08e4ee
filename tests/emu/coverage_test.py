"""Every launcher of every spec (specs/*.yaml) runs on the CPU emulator in
some emulated test: its generated launcher kl_<name>( is called in one of
the emulated tests' sources, tests/**/*emulated_test.cc. So a kernel added
to a spec without an emulated test fails here, naming it. The specs and
sources are read in the source tree this file resolves into (its runfile is
a link to it), so a new family's emulated test needs no line in
tests/emu/BUILD; the test is tagged "external" (never cached) for that."""
import glob
import os
import re
import sys
import unittest

import yaml

from tools import junit_unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def emulated_sources():
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*emulated_test.cc"), recursive=True)):
        with open(path) as f:
            out[os.path.relpath(path, ROOT)] = f.read()
    return out


class EveryLauncherIsEmulatedTest(unittest.TestCase):
    def test_there_are_specs_and_emulated_tests(self):
        self.assertTrue(glob.glob(os.path.join(ROOT, "specs", "*.yaml")))
        self.assertTrue(emulated_sources())

    def test_every_launcher_is_called_in_an_emulated_test(self):
        sources = emulated_sources()
        missing = []
        for spec in sorted(glob.glob(os.path.join(ROOT, "specs", "*.yaml"))):
            with open(spec) as f:
                doc = yaml.safe_load(f)
            for launcher in doc.get("launchers", []):
                call = re.compile(r"\bkl_%s\b\s*[(,}]" % re.escape(launcher["name"]))
                if not any(call.search(text) for text in sources.values()):
                    missing.append("%s (%s)" % (launcher["name"], os.path.relpath(spec, ROOT)))
        self.assertEqual(missing, [], "launchers no emulated test calls (docs/EMULATOR.md says how to add one)")


if __name__ == "__main__":
    junit_unittest.main()
