"""Layer 1 (compile time): a kernel whose parameters differ from its spec
does not compile, and the error names the kernel, the parameter and the
spec's file:line:col.

Each fixture (fixtures/<case>/argtest_axpy.cu, next to the good
argtest_fill.cu) is compiled by nvcc as bazel/cuda.bzl compiles a family: one
unity translation unit written by bazel/write_unity.py (the program kl_fatbin
runs) with KL_SIGNATURE_CHECKS_AT_END, the sources, and each kernel's check
at a #line marker naming its source and line (the family's .cuh again with
KL_CHECK_SIGNATURES where a kernel is not found). The expected messages are
written here from the spec's text (positions found by reading
specs/argtest.yaml), not taken from the generator. Also: a single .cu
compiled by plain nvcc (the declarations catch a wrong definition), a single
.cu with KL_CHECK_KERNEL, and the KL_NO_SIGNATURE_CHECKS opt-out that the
layer 2 and 3 fixtures are built with. Skips without nvcc.

    --cuh tests/arg_order/klaunch/argtest.cuh --spec tests/arg_order/specs/argtest.yaml
        --write-unity bazel/write_unity.py [--cuda-bzl bazel/cuda.bzl]
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import arg_order_test_support as support
import junit_unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
NVCC = support.nvcc()
ARGS = {}
# The generator runs on the spec as specs/argtest.yaml (the BUILD's genrule,
# as kl_family does), so that is the path its messages give.
SPEC_SHOWN = "specs/argtest.yaml"


def spec_text():
    with open(ARGS["--spec"]) as f:
        return f.read()


def at_param(param):
    line, col = support.param_pos(spec_text(), "argtest_axpy", param)
    return "[%s:%d:%d]" % (SPEC_SHOWN, line, col)


def at_launcher():
    line, col = support.launcher_pos(spec_text(), "argtest_axpy")
    return "[%s:%d:%d]" % (SPEC_SHOWN, line, col)


def wrong_type(index, name, ctype, spec_type):
    return "klaunch: kernel argtest_axpy, parameter %d (%s): the definition's type is not %s (spec type %s) %s" % (
        index, name, ctype, spec_type, at_param(name))


def lacks(index, name, ctype, spec_type):
    return "klaunch: kernel argtest_axpy lacks parameter %d (%s: %s, spec type %s) %s" % (
        index, name, ctype, spec_type, at_param(name))


def fixture(case, name="argtest_axpy.cu"):
    """The fixture's path as the Bazel build names it (relative to the
    runfiles root, the test's working directory)."""
    return os.path.relpath(os.path.join(FIXTURES, case, name))


def definition_line(path, entry="argtest_axpy"):
    """The line of `path` that holds `entry(`: each fixture defines its
    kernel on one line."""
    with open(path) as f:
        hits = [n for n, line in enumerate(f, 1) if entry + "(" in line]
    assert len(hits) == 1, "%s: %s( on lines %s" % (path, entry, hits)
    return hits[0]


def assertion_messages(output):
    return re.findall(r'static assertion failed with "(.*)"', output)


@unittest.skipUnless(NVCC, "nvcc not found ($CUDA_PATH/bin, PATH, /usr/local/cuda/bin): layer 1 needs it")
class SignatureCompileTest(unittest.TestCase):
    def compile(self, text, defines=()):
        """(returncode, output) of nvcc on a translation unit of `text`."""
        include = os.path.dirname(os.path.dirname(os.path.abspath(ARGS["--cuh"])))
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "tu.cu")
            with open(src, "w") as f:
                f.write(text)
            # -I the working directory: the unity file names sources relative to it.
            cmd = [NVCC, "-std=c++17", "-cubin", "-arch=sm_80", "-I", include, "-I", os.getcwd()] + list(defines)
            cmd += [src, "-o", os.path.join(tmp, "tu.cubin")]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            return r.returncode, r.stdout

    def unity(self, case, defines=()):
        """As kl_fatbin writes it (bazel/write_unity.py): the fixture's
        argtest_axpy (none for "missing") and the good argtest_fill."""
        srcs = [] if case == "missing" else [fixture(case)]
        srcs.append(fixture("good", "argtest_fill.cu"))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "argtest_v1.cu")
            subprocess.run([sys.executable, ARGS["--write-unity"], "--family", "argtest", "--variant", "v1",
                            "--spec", ARGS["--spec"], "--out", out] + srcs, check=True)
            with open(out) as f:
                text = f.read()
        return self.compile(text, defines)

    def single(self, case, tail="", defines=()):
        """One kernel source compiled alone, as a user might with plain nvcc."""
        with open(os.path.join(FIXTURES, case, "argtest_axpy.cu")) as f:
            text = f.read()
        return self.compile(text + tail, ["-DKL_VARIANT_v1"] + list(defines))

    def assert_refused(self, result, expected):
        rc, out = result
        self.assertNotEqual(rc, 0, "compiled, but should not have:\n" + out)
        self.assertEqual(assertion_messages(out), expected, out)

    # -- the unity translation unit (what the Bazel build compiles) --

    def test_the_unity_file_is_what_cuda_bzl_writes(self):
        if "--cuda-bzl" not in ARGS:
            self.skipTest("no --cuda-bzl given (bazel/BUILD does not export cuda.bzl)")
        with open(ARGS["--cuda-bzl"]) as f:
            bzl = f.read()
        self.assertIn('Label("//bazel:write_unity")', bzl,
                      "bazel/cuda.bzl no longer writes its unity files with bazel/write_unity.py; update this test's unity()")

    def test_a_mismatch_names_the_kernel_source_and_line(self):
        # The #line marker: "detected during instantiation ... at line N of
        # tests/arg_order/fixtures/swapped/argtest_axpy.cu", N the line that
        # defines the kernel, beside the spec position in the message.
        for case in ("swapped", "widened", "nonconst"):
            with self.subTest(case=case):
                rc, out = self.unity(case)
                self.assertNotEqual(rc, 0, out)
                self.assertIn("at line %d of %s" % (definition_line(fixture(case)), fixture(case)), out)
                self.assertIn(at_param("n" if case != "nonconst" else "x"), out)

    def test_two_parameters_of_one_type_swapped(self):
        # n and tag, both u32: every type matches, so only the names show
        # it. The unity file refuses them at the kernel's line; this was
        # the one swap no layer could see.
        rc, out = self.unity("same_type_swapped")
        self.assertNotEqual(rc, 0, "compiled, but should not have:\n" + out)
        line, col = support.param_pos(spec_text(), "argtest_axpy", "n")
        msg = ("klaunch: kernel argtest_axpy, parameter 3 is named tag; the spec's parameter 3 is n (u32) [%s:%d:%d]: "
               "two parameters of one type in another order compile and read each other's values; "
               "write the list as KL_PARAMS_argtest_axpy" % (ARGS["--spec"], line, col))
        self.assertEqual(assertion_messages(out), [msg], out)
        self.assertIn("%s(%d): error: static assertion failed" % (fixture("same_type_swapped"),
                                                                   definition_line(fixture("same_type_swapped"))), out)

    def test_the_spec_parameter_list_compiles_and_names_the_spec_parameters(self):
        # fixtures/good/argtest_fill.cu is defined as argtest_fill(KL_PARAMS_argtest_fill),
        # bounds KL_THREADS_argtest_fill: the spec's names, types and order.
        with open(fixture("good", "argtest_fill.cu")) as f:
            self.assertIn("argtest_fill(KL_PARAMS_argtest_fill)", f.read())
        with open(ARGS["--cuh"]) as f:
            cuh = f.read()
        self.assertIn("#define KL_PARAMS_argtest_fill uint32_t *out, uint32_t n, uint32_t value\n", cuh)
        self.assertIn("#define KL_THREADS_argtest_fill 128\n", cuh)
        rc, out = self.unity("good")
        self.assertEqual(rc, 0, out)

    def test_the_opt_out_skips_the_name_check_too(self):
        rc, out = self.unity("same_type_swapped", ["-DKL_NO_SIGNATURE_CHECKS"])
        self.assertEqual(rc, 0, out)

    def test_good_kernels_compile(self):
        rc, out = self.unity("good")
        self.assertEqual(rc, 0, out)

    def test_two_parameters_swapped(self):
        self.assert_refused(self.unity("swapped"), [
            wrong_type(3, "n", "uint32_t", "u32"),
            wrong_type(4, "stride", "uint64_t", "u64"),
        ])

    def test_a_u32_that_became_u64(self):
        self.assert_refused(self.unity("widened"), [wrong_type(3, "n", "uint32_t", "u32")])

    def test_a_missing_trailing_parameter(self):
        self.assert_refused(self.unity("truncated"), [lacks(6, "tag", "uint32_t", "u32")])

    def test_an_extra_parameter(self):
        self.assert_refused(self.unity("extra"), [
            "klaunch: kernel argtest_axpy has more parameters than the 6 of its spec %s" % at_launcher()])

    def test_const_ness_of_the_pointee(self):
        self.assert_refused(self.unity("nonconst"), [wrong_type(1, "x", "const float *", "const f32*")])

    def test_another_version_of_the_source(self):
        # fixtures/stale: right for the older spec (stride before n, no tag).
        self.assert_refused(self.unity("stale"), [
            wrong_type(3, "n", "uint32_t", "u32"),
            wrong_type(4, "stride", "uint64_t", "u64"),
            lacks(6, "tag", "uint32_t", "u32"),
        ])

    def test_a_kernel_no_source_defines(self):
        rc, out = self.unity("missing")
        self.assertNotEqual(rc, 0, out)
        self.assertIn('identifier "argtest_axpy" is undefined', out)
        self.assertIn("klaunch: kernel argtest_axpy %s; if it is undefined here, no kernel source of the family defines it"
                      % at_launcher(), out)

    def test_the_opt_out_lets_a_wrong_kernel_through(self):
        # How the layer 2 and 3 fixtures are built (tests/arg_order/BUILD).
        for case in ("swapped", "widened", "truncated", "extra", "missing"):
            with self.subTest(case=case):
                rc, out = self.unity(case, ["-DKL_NO_SIGNATURE_CHECKS"])
                self.assertEqual(rc, 0, out)

    # -- one .cu through plain nvcc --

    def test_plain_nvcc_on_one_source_uses_the_declarations(self):
        rc, out = self.single("good")
        self.assertEqual(rc, 0, out)
        rc, out = self.single("swapped")
        self.assertNotEqual(rc, 0, out)
        # nvcc 13: more than one instance of overloaded function "argtest_axpy" has "C" linkage
        self.assertRegex(out, r'(declaration is incompatible|overloaded function "argtest_axpy" has "C" linkage)')

    def test_plain_nvcc_with_KL_CHECK_KERNEL_names_the_parameter(self):
        tail = "\nKL_CHECK_KERNEL(argtest_axpy);\n"
        rc, out = self.single("good", tail, ["-DKL_SIGNATURE_CHECKS_AT_END"])
        self.assertEqual(rc, 0, out)
        self.assert_refused(self.single("widened", tail, ["-DKL_SIGNATURE_CHECKS_AT_END"]),
                            [wrong_type(3, "n", "uint32_t", "u32")])


if __name__ == "__main__":
    values, rest = support.split_args(sys.argv[1:], "--cuh", "--spec", "--cuda-bzl", "--write-unity")
    missing = [o for o in ("--cuh", "--spec", "--write-unity") if o not in values]
    if missing:
        sys.exit("usage: signature_compile_test.py --cuh FILE --spec FILE --write-unity FILE [--cuda-bzl FILE] (missing %s)"
                 % ", ".join(missing))
    ARGS.update(values)
    junit_unittest.main(argv=rest)
