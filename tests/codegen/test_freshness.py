"""generated/ and docs/LAUNCHERS.md are exactly what specs/ produce.

Runs the generator's --check over every specs/*.yaml, as `./bazelw run
//:generate` runs it, and fails naming each stale or missing file.
"""

import glob
import os
import unittest

import codegen_test_support as support


class FreshnessTest(unittest.TestCase):
    def specs(self):
        specs = sorted(os.path.relpath(p, support.ROOT) for p in glob.glob(os.path.join(support.ROOT, "specs", "*.yaml")))
        self.assertTrue(specs, "no specs/*.yaml")
        return specs

    def test_generated_files_match_the_specs(self):
        rc, out, err = support.run_codegen(
            ["--check", "--include-dir", "generated", "--python-dir", "generated/python", "--docs", "docs/LAUNCHERS.md"]
            + self.specs(), cwd=support.ROOT
        )
        self.assertEqual(rc, 0, "generated/ or docs/LAUNCHERS.md is stale:\n" + err)
        self.assertEqual(err, "")

    def test_no_generated_file_without_a_spec(self):
        families = {os.path.splitext(os.path.basename(s))[0] for s in self.specs()}
        expected = sorted("%s.%s" % (f, ext) for f in families for ext in ("h", "cuh"))
        present = sorted(os.listdir(os.path.join(support.ROOT, "generated", "klaunch")))
        self.assertEqual(present, expected, "generated/klaunch/ holds files no spec makes (or misses some)")
        expected = sorted("klaunch_%s.%s" % (f, ext) for f in families for ext in ("py", "c"))
        present = sorted(os.listdir(os.path.join(support.ROOT, "generated", "python")))
        self.assertEqual(present, expected, "generated/python/ holds files no spec makes (or misses some)")


if __name__ == "__main__":
    support.main()
