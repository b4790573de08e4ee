"""bazel/generate.sh (bazel run //:generate) on scratch workspaces.

It is given every spec (//specs:all_specs) and every family's fatbin
manifest (//kernels:manifests), as //:generate passes them. It must refuse,
naming each file and writing nothing, a spec it would otherwise skip: a
spec whose family has no kernels, and a *.yaml or *.yml under specs/ that is
not specs/<family>.yaml (issue 14: a new family's spec was skipped without a
word). A clean workspace gets its headers, the launcher reference and the
table of fatbins.

    generate_test.py GENERATE_SH CODEGEN_MAIN SPEC
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import junit_unittest

GENERATE, CODEGEN_MAIN, SPEC = None, None, None


class GenerateTest(unittest.TestCase):
    def setUp(self):
        self.ws = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.ws)
        # The generator runs from the workspace's codegen/ (as generate.sh says).
        os.symlink(os.path.dirname(os.path.realpath(CODEGEN_MAIN)), os.path.join(self.ws, "codegen"))
        os.makedirs(os.path.join(self.ws, "specs"))
        self.outs = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.outs)

    def spec(self, rel, family="argtest"):
        """A copy of the argtest spec at specs/<rel>, family renamed."""
        with open(SPEC) as f:
            text = f.read().replace("family: argtest", "family: " + family)
        path = os.path.join(self.ws, "specs", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def manifest(self, family):
        fatbin = os.path.join(self.outs, family + "_v1.fatbin")
        with open(fatbin, "wb") as f:
            f.write(b"\0" * 7)
        path = os.path.join(self.outs, family + ".fatbins.tsv")
        with open(path, "w") as f:
            f.write("%s\tv1\t%s\tsm_90\n" % (family, fatbin))
        return path

    def generate(self, args):
        env = dict(os.environ, BUILD_WORKSPACE_DIRECTORY=self.ws)
        return subprocess.run(["bash", GENERATE] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    def test_writes_headers_docs_and_the_table(self):
        spec = self.spec("argtest.yaml")
        os.makedirs(os.path.join(self.ws, "generated"))
        os.makedirs(os.path.join(self.ws, "docs"))
        r = self.generate([spec, self.manifest("argtest")])
        self.assertEqual(r.returncode, 0, r.stderr)
        for f in ("generated/klaunch/argtest.h", "generated/klaunch/argtest.cuh", "docs/LAUNCHERS.md"):
            self.assertTrue(os.path.exists(os.path.join(self.ws, f)), f)
        self.assertRegex(r.stdout, r"argtest +v1 +\S+argtest_v1.fatbin +7 +sm_90")
        self.assertIn("argtest  argtest_axpy", r.stdout)

    def test_refuses_a_spec_whose_family_has_no_kernels(self):
        a, b = self.spec("argtest.yaml"), self.spec("rms_norm.yaml", "rms_norm")
        r = self.generate([a, b, self.manifest("argtest")])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.splitlines(), [
            'specs/rms_norm.yaml: error: no kernels are built for family rms_norm; '
            'add "rms_norm": [<its variants>] to kl_fatbins in kernels/BUILD',
            "generate: 1 error(s); nothing written",
        ])
        self.assertFalse(os.path.exists(os.path.join(self.ws, "generated")))

    def test_refuses_a_spec_file_it_would_not_read(self):
        a = self.spec("argtest.yaml")
        self.spec("old/argtest2.yaml", "argtest2")
        self.spec("rms_norm.yml", "rms_norm")
        r = self.generate([a, self.manifest("argtest")])
        self.assertEqual(r.returncode, 1)
        hint = "not read by //:generate, which reads specs/<family>.yaml; move it to specs/<family>.yaml (one family per file) or out of specs/"
        self.assertEqual(r.stderr.splitlines(), [
            "specs/old/argtest2.yaml: error: " + hint,
            "specs/rms_norm.yml: error: " + hint,
            "generate: 2 error(s); nothing written",
        ])
        self.assertFalse(os.path.exists(os.path.join(self.ws, "generated")))

    def test_outside_bazel_run_says_how_to_run_it(self):
        env = {k: v for k, v in os.environ.items() if k != "BUILD_WORKSPACE_DIRECTORY"}
        r = subprocess.run(["bash", GENERATE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("bazel run //:generate", r.stderr)


if __name__ == "__main__":
    GENERATE, CODEGEN_MAIN, SPEC = [os.path.abspath(a) for a in sys.argv[1:4]]
    junit_unittest.main(argv=sys.argv[4:])
