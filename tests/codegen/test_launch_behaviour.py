"""The generated C and CUDA headers, compiled and run.

- c/launch_behaviour.c (expectations worked out by hand from the golden
  specs) against the golden headers: C99 and C++17 with -Wall -Wextra
  -Werror -pedantic, then run; also through nvcc when it is installed.
- Each golden .cuh, for each variant, compiled to a cubin: the module
  metadata text is in it, exactly as docs/DESIGN.md specifies, with the
  spec's sha256 computed here; no variant or two variants do not compile; a
  kernel definition whose parameters differ from the spec does not compile.
- The launch path stays cheap: no snprintf, strcmp or loop in a launcher.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import codegen_test_support as support

CASES = ["minimal", "launch_only_bool", "variants_constants", "grid3d_shared", "all_launch_only", "launch_attributes", "arch",
         "extents"]
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
GCC = support.tool("gcc")
GXX = support.tool("g++")
NVCC = support.tool("nvcc")


def golden_include_dir(tmp):
    """tmp/klaunch/ holding every golden case's expected headers."""
    dest = os.path.join(tmp, "klaunch")
    os.makedirs(dest)
    for case in CASES:
        src = os.path.join(support.GOLDEN, case, "expected", "klaunch")
        for f in os.listdir(src):
            shutil.copy(os.path.join(src, f), dest)
    return tmp


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kw)


class LaunchBehaviourTest(unittest.TestCase):
    SRC = os.path.join(support.TESTS, "c", "launch_behaviour.c")

    def build_and_run(self, compiler, flags):
        with tempfile.TemporaryDirectory() as tmp:
            inc = golden_include_dir(tmp)
            exe = os.path.join(tmp, "t")
            r = run([compiler] + flags + ["-I", support.INCLUDE, "-I", inc, self.SRC, "-o", exe])
            self.assertEqual(r.returncode, 0, r.stdout)
            r = run([exe])
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertIn("all expectations hold", r.stdout)

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_c99(self):
        self.build_and_run(GCC, ["-std=c99"] + STRICT)

    @unittest.skipUnless(GXX, "g++ is not installed")
    def test_cxx17(self):
        self.build_and_run(GXX, ["-x", "c++", "-std=c++17"] + STRICT)

    @unittest.skipUnless(NVCC, "nvcc is not installed")
    def test_through_nvcc(self):
        self.build_and_run(NVCC, ["-x", "cu", "-std=c++17", "-Xcompiler", "-Wall,-Wextra,-Werror"])


class ByNameTest(unittest.TestCase):
    """kl_X_args with C99 designated initializers: every parameter by its
    spec name; a name the launcher does not have is a compile error naming
    it (what a swapped or misspelt argument becomes when called by name)."""

    PROGRAM = (
        '#define KLAUNCH_IMPLEMENTATION\n#include "klaunch/gather.h"\n'
        "int call(const kl_kernel *k, const float *t, const int32_t *i, float *o, uint32_t *s) {\n"
        "    kl_gather_rows_args a = {.table = t, .idx = i, .out = o, .mask = NULL, .scratch = s,\n"
        "                             .n = 5, .out_stride = 6, %s = 2};\n"
        "    return (int)kl_gather_rows_call(k, &a, NULL);\n}\n")

    def compile(self, field):
        with tempfile.TemporaryDirectory() as tmp:
            inc = golden_include_dir(tmp)
            src = os.path.join(tmp, "by_name.c")
            with open(src, "w") as f:
                f.write(self.PROGRAM % field)
            return run([GCC, "-std=c99"] + STRICT + ["-I", support.INCLUDE, "-I", inc, "-c", src, "-o",
                                                      os.path.join(tmp, "by_name.o")])

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_the_spec_names_compile(self):
        r = self.compile(".blocks")
        self.assertEqual(r.returncode, 0, r.stdout)

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_an_unknown_name_is_a_compile_error_naming_it(self):
        r = self.compile(".num_blocks")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("num_blocks", r.stdout)
        self.assertIn("error", r.stdout)


def variants_of(case):
    """[(variant, [(const, value)])] read from the spec by hand-rolled YAML-free
    means is not worth it: PyYAML is a test dependency anyway."""
    import yaml

    with open(os.path.join(support.GOLDEN, case, support.case_spec(os.path.join(support.GOLDEN, case)))) as f:
        spec = yaml.safe_load(f)
    return spec["family"], [(v, list(((body or {}).get("constants") or {}).items())) for v, body in spec["variants"].items()]


@unittest.skipUnless(NVCC, "nvcc is not installed")
class KernelHeaderTest(unittest.TestCase):
    def compile_cuh(self, tmp, family, defines, extra_source=""):
        src = os.path.join(tmp, "k.cu")
        with open(src, "w") as f:
            f.write('#include "klaunch/%s.cuh"\n%s' % (family, extra_source))
        out = os.path.join(tmp, "k.cubin")
        r = run([NVCC, "-cubin", "-arch=sm_90", "-I", tmp] + defines + [src, "-o", out])
        return r, out

    def test_module_info_in_every_variant_cubin(self):
        for case in CASES:
            family, variants = variants_of(case)
            spec_path = os.path.join(support.GOLDEN, case, support.case_spec(os.path.join(support.GOLDEN, case)))
            with open(spec_path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            for variant, consts in variants:
                for source_hash in (None, "0123abcd"):
                    with self.subTest(case=case, variant=variant, source_hash=source_hash), tempfile.TemporaryDirectory() as tmp:
                        golden_include_dir(tmp)
                        defines = ["-DKL_VARIANT_%s" % variant]
                        if source_hash:
                            defines.append('-DKL_SOURCE_HASH="%s"' % source_hash)
                        r, cubin = self.compile_cuh(tmp, family, defines)
                        self.assertEqual(r.returncode, 0, r.stdout)
                        with open(cubin, "rb") as f:
                            data = f.read()
                        text = (
                            "klaunch-module 1\nfamily %s\nvariant %s\nspec_hash sha256:%s\nsource_hash %s\ncuda_arch 900\n"
                            % (family, variant, digest, source_hash or "unknown")
                        )
                        text += "".join("const %s %d\n" % (n, v) for n, v in consts)
                        self.assertIn(text.encode() + b"\0", data)
                        self.assertIn(b"kl__module_info\0", data)

    def test_module_info_names_the_target_of_each_image(self):
        """cuda_arch is __CUDA_ARCH__ with a for arch-specific and f for
        family-specific code: what kl_kernel_get compares a launcher's arch with."""
        family, variants = variants_of("arch")
        for gencode, line in (("arch=compute_80,code=sm_80", b"cuda_arch 800\n"),
                              ("arch=compute_90a,code=sm_90a", b"cuda_arch 900a\n"),
                              ("arch=compute_100f,code=sm_100f", b"cuda_arch 1000f\n")):
            with self.subTest(gencode=gencode), tempfile.TemporaryDirectory() as tmp:
                golden_include_dir(tmp)
                src = os.path.join(tmp, "k.cu")
                with open(src, "w") as f:
                    f.write('#include "klaunch/%s.cuh"\n' % family)
                out = os.path.join(tmp, "k.cubin")
                r = run([NVCC, "-cubin", "-gencode", gencode, "-I", tmp, "-DKL_VARIANT_%s" % variants[0][0], src, "-o", out])
                self.assertEqual(r.returncode, 0, r.stdout)
                with open(out, "rb") as f:
                    data = f.read()
                self.assertIn(b"source_hash unknown\n" + line, data)

    def test_variant_must_be_chosen_once(self):
        family, variants = variants_of("variants_constants")
        with tempfile.TemporaryDirectory() as tmp:
            golden_include_dir(tmp)
            r, _ = self.compile_cuh(tmp, family, [])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("define one of KL_VARIANT_t64, KL_VARIANT_t128, KL_VARIANT_t128_d256", r.stdout)
            r, _ = self.compile_cuh(tmp, family, ["-DKL_VARIANT_t64", "-DKL_VARIANT_t128"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("more than one KL_VARIANT_* is defined", r.stdout)

    def test_constants_are_defined_for_kernels(self):
        with tempfile.TemporaryDirectory() as tmp:
            golden_include_dir(tmp)
            probe = "static_assert(TILE == 128 && HEAD_DIM == 256 && BIAS == 5000000000LL, \"constants\");\n"
            r, _ = self.compile_cuh(tmp, "tile", ["-DKL_VARIANT_t128_d256"], probe)
            self.assertEqual(r.returncode, 0, r.stdout)
            probe = "static_assert(BIAS == -1, \"negative constant\");\n"
            r, _ = self.compile_cuh(tmp, "tile", ["-DKL_VARIANT_t64"], probe)
            self.assertEqual(r.returncode, 0, r.stdout)

    def test_a_definition_that_differs_from_the_spec_does_not_compile(self):
        # volume.yaml: stencil3d(src, dst, nx, ny, nz, bx, by, bz, offset: i32, total: u64)
        right = (
            'extern "C" __global__ void stencil3d(const float *src, float *dst, uint32_t nx, uint32_t ny, '
            "uint32_t nz, uint32_t bx, uint32_t by, uint32_t bz, int32_t offset, uint64_t total) {}\n"
        )
        wrong = right.replace("int32_t offset", "uint32_t offset")
        # scale.yaml: the launch-only rows is not a kernel parameter; accumulate (bool) is a uint32_t.
        scale = (
            'extern "C" __global__ void scale_rows_kernel(const void *x, __nv_bfloat16 *y, uint32_t cols, '
            "uint64_t row_stride, float alpha, uint32_t accumulate, uint32_t group) {}\n"
        )
        with tempfile.TemporaryDirectory() as tmp:
            golden_include_dir(tmp)
            r, _ = self.compile_cuh(tmp, "volume", ["-DKL_VARIANT_v1"], right)
            self.assertEqual(r.returncode, 0, r.stdout)
            r, _ = self.compile_cuh(tmp, "volume", ["-DKL_VARIANT_v1"], wrong)
            self.assertNotEqual(r.returncode, 0, "a definition with another parameter type compiled")
            self.assertIn("stencil3d", r.stdout)
            r, _ = self.compile_cuh(tmp, "scale", ["-DKL_VARIANT_base"], scale)
            self.assertEqual(r.returncode, 0, r.stdout)
            r, _ = self.compile_cuh(tmp, "scale", ["-DKL_VARIANT_base"], scale.replace("uint32_t cols,", "uint32_t cols, uint32_t rows,"))
            self.assertNotEqual(r.returncode, 0, "a definition taking the launch-only rows compiled")


class HotPathTest(unittest.TestCase):
    """kl__X_prepare and kl_X: no formatting, string compares or loops."""

    def launcher_bodies(self, path):
        with open(path) as f:
            text = f.read()
        bodies = re.findall(r"\n(static inline kl_status kl_{1,2}\w+?(?:_prepare)?\(.*?\n\})", text, re.S)
        return [b for b in bodies if not re.match(r"static inline kl_status kl_\w+_get\(", b)]

    def test_no_formatting_or_loops_on_the_launch_path(self):
        paths = [os.path.join(support.ROOT, "generated", "klaunch", f) for f in ("mla_prefill.h", "paged_decode.h")]
        paths += [os.path.join(support.GOLDEN, c, "expected", "klaunch", f)
                  for c in CASES for f in os.listdir(os.path.join(support.GOLDEN, c, "expected", "klaunch")) if f.endswith(".h")]
        seen = 0
        for path in paths:
            for body in self.launcher_bodies(path):
                seen += 1
                name = body.split("(", 1)[0].split()[-1]
                for banned in ("snprintf", "printf", "strcmp", "strlen", "memcpy", "for (", "while ("):
                    self.assertNotIn(banned, body, "%s in %s" % (banned, name))
                # Message arguments are gathered only inside a failed test's branch.
                for line in body.splitlines():
                    if "kl__values[" in line and line.lstrip().startswith("uint64_t"):
                        self.assertTrue(line.startswith("        uint64_t"), "%s: %r" % (name, line))
        self.assertGreater(seen, 20)


if __name__ == "__main__":
    support.main()
