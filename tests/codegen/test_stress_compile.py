"""The generated headers of the stress specs (tests/codegen/stress/: names,
text and shapes at the edges of what the generator allows), together with
the golden cases' and the project's specs in one run, compile:

- every C header in one translation unit, as C99 and as C++17 with -Wall
  -Wextra -Werror -pedantic, with KLAUNCH_IMPLEMENTATION (so the runtime's
  system headers are there too), and through nvcc;
- every family's Python launchers: each library source (klaunch_<family>.c)
  as C99 with -Wall -Wextra -Werror -pedantic and as C++17, and each module
  (klaunch_<family>.py) compiled by Python;
- each stress family's kernel-side header through nvcc for each variant,
  with kernel definitions made from the spec: once with the default
  extern "C" declarations, once with the signature checks run after the
  definitions (KL_SIGNATURE_CHECKS_AT_END, then KL_CHECK_SIGNATURES), as
  kl_fatbin's unity file does.
"""

import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import codegen_test_support as support

from klaunch_codegen import diag, emit, spec as specmod

GCC = support.tool("gcc")
GXX = support.tool("g++")
NVCC = support.tool("nvcc")
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
STRESS = os.path.join(support.TESTS, "stress")
STRESS_SPECS = sorted(glob.glob(os.path.join(STRESS, "*.yaml")))
OTHER_SPECS = sorted(glob.glob(os.path.join(support.GOLDEN, "*", "*.yaml")) + glob.glob(os.path.join(support.ROOT, "specs", "*.yaml")))


def run(cmd, cwd=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, cwd=cwd)


def load(path):
    d = diag.Diagnostics()
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        s = specmod.load_spec(os.path.basename(path), d)
    finally:
        os.chdir(cwd)
    if s is None:
        raise AssertionError("\n".join(str(x) for x in d.items))
    return s


def kernel_definitions(spec):
    out = []
    for l in spec.launchers:
        params = [emit.cuda_decl(p) for p in l.kernel_params]
        body = "".join(" (void)%s;" % p.name for p in l.kernel_params)
        out.append('extern "C" __global__ void %s(%s) {%s }\n' % (l.entry, ", ".join(params), body))
    return "".join(out)


class StressCompileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        # One run over every spec: cross-family names are checked together.
        # Each spec is copied beside the others under its own name.
        cls.inc = os.path.join(cls.tmp, "inc")
        src = os.path.join(cls.tmp, "specs")
        os.makedirs(src)
        names = []
        for p in STRESS_SPECS + OTHER_SPECS:
            name = os.path.basename(p)
            if name in names:
                continue  # two golden cases share a family? keep the first
            shutil.copy(p, os.path.join(src, name))
            names.append(name)
        cls.py = os.path.join(cls.tmp, "python")
        rc, _, err = support.run_codegen(["--include-dir", cls.inc, "--python-dir", cls.py] + names, cwd=src)
        cls.generated = (rc, err)
        cls.families = [n[:-5] for n in names]
        cls.stress = [load(p) for p in STRESS_SPECS]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_every_stress_spec_is_accepted_with_the_others(self):
        self.assertGreaterEqual(len(STRESS_SPECS), 3)
        self.assertEqual(self.generated, (0, ""))

    def all_headers_source(self):
        path = os.path.join(self.tmp, "all.c")
        with open(path, "w") as f:
            f.write("#define KLAUNCH_IMPLEMENTATION\n")
            f.writelines('#include "klaunch/%s.h"\n' % fam for fam in self.families)
            f.write("int main(void) { return 0; }\n")
        return path

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_all_c_headers_in_one_translation_unit_c99_and_cxx17(self):
        src = self.all_headers_source()
        for compiler, flags in ((GCC, ["-std=c99", "-x", "c"]), (GXX, ["-std=c++17", "-x", "c++"])):
            r = run([compiler] + flags + STRICT + ["-I", support.INCLUDE, "-I", self.inc, "-c", src, "-o", os.path.join(self.tmp, "all.o")])
            self.assertEqual(r.returncode, 0, r.stdout[-4000:])

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_every_python_library_source_c99_and_cxx17(self):
        for fam in self.families:
            src = os.path.join(self.py, "klaunch_%s.c" % fam)
            for compiler, flags in ((GCC, ["-std=c99", "-x", "c"]), (GXX, ["-std=c++17", "-x", "c++"])):
                with self.subTest(family=fam, compiler=compiler):
                    r = run([compiler] + flags + STRICT + ["-fPIC", "-fvisibility=hidden", "-I", support.INCLUDE, "-I",
                             self.inc, "-c", src, "-o", os.path.join(self.tmp, "py.o")])
                    self.assertEqual(r.returncode, 0, r.stdout[-4000:])

    def test_every_python_module_compiles(self):
        for fam in self.families:
            path = os.path.join(self.py, "klaunch_%s.py" % fam)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            with self.subTest(family=fam):
                compile(text, path, "exec")

    @unittest.skipUnless(NVCC, "nvcc is not installed")
    def test_all_c_headers_through_nvcc(self):
        src = self.all_headers_source()
        r = run([NVCC, "-x", "cu", "-std=c++17", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra,-Werror",
                 "-I", support.INCLUDE, "-I", self.inc, "-c", src, "-o", os.path.join(self.tmp, "all_nvcc.o")])
        self.assertEqual(r.returncode, 0, r.stdout[-4000:])

    @unittest.skipUnless(NVCC, "nvcc is not installed")
    def test_kernel_side_headers_through_nvcc_with_the_signature_checks(self):
        for s in self.stress:
            defs = kernel_definitions(s)
            for i, v in enumerate(s.variants):
                modes = [("checks at the end", '#define KL_SIGNATURE_CHECKS_AT_END\n#include "klaunch/%s.cuh"\n%s'
                          '#define KL_CHECK_SIGNATURES\n#include "klaunch/%s.cuh"\n' % (s.family, defs, s.family))]
                if i == 0:  # the declarations do not depend on the variant
                    modes.append(("declarations", '#include "klaunch/%s.cuh"\n%s' % (s.family, defs)))
                for mode, text in modes:
                    with self.subTest(family=s.family, variant=v.name, mode=mode):
                        src = os.path.join(self.tmp, "k.cu")
                        with open(src, "w") as f:
                            f.write(text)
                        r = run([NVCC, "-std=c++17", "-DKL_VARIANT_%s" % v.name, "-Werror", "all-warnings",
                                 "-Xcompiler", "-Wall,-Wextra,-Werror", "-I", self.inc, "-c", src, "-o", os.path.join(self.tmp, "k.o")])
                        self.assertEqual(r.returncode, 0, r.stdout[-4000:])


if __name__ == "__main__":
    support.main()
