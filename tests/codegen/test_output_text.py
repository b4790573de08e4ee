"""Text from a spec that reaches a generated comment or string cannot end,
splice or change anything around it.

The property is checked on what the compiler sees: a spec whose docs hold
every sequence that ends, opens or splices a comment (*/, /*, a trailing
backslash, the trigraph ??/, a backslash-newline between * and /, line and
paragraph separators, bidi overrides, NUL) preprocesses to exactly the
tokens of the same spec with plain docs, and compiles strictly as C99
(trigraphs on), C++17 and through nvcc. A spec path made to end the
banner's comment and define KL_NO_SIGNATURE_CHECKS defines nothing, and
reaches the C string kl_X_desc.spec_file unchanged.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import codegen_test_support as support

GCC = support.tool("gcc")
GXX = support.tool("g++")
NVCC = support.tool("nvcc")
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]

# Every doc of the spec gets this (a YAML double-quoted scalar: \\ is a
# backslash, \n a newline, \0 NUL, \e ESC, \u2028 a line separator).
NASTY = (r'"ends */ here /* opens ??/ ??= ??( a *\\\n/ spliced \\\n#define KL_NO_SIGNATURE_CHECKS 1\n'
         r'/* \u2028 ls \u2029 ps \u202e bidi \u00a0 nbsp \0 nul \e esc \t tab --> end \\"')
NASTY_TAIL = r'"trailing backslash \\"'

SPEC = """family: txt
doc: %(doc)s
variants:
  v1:
    doc: %(doc)s
    constants: {WIDTH: 4}
  v2:
    doc: %(tail)s
    constants: {WIDTH: 8}
launchers:
  - name: txt_copy
    doc: %(doc)s
    params:
      - {name: n, type: u32, doc: %(doc)s}
      - dst: f32*
    grid: {x: "ceil_div(n, WIDTH)"}
    block: {x: 128}
    preconditions:
      - check: n >= 1
        message: at least one
  - name: txt_fill
    doc: %(tail)s
    params:
      - dst: f32*
    grid: {x: 1}
    block: {x: 32}
"""


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kw)


def tokens(preprocessed):
    """The token stream of preprocessed text, one token per item: layout
    (line breaks, blanks, # line markers) does not count."""
    text = "\n".join(l for l in preprocessed.splitlines() if not l.startswith("#"))
    # The spec's hash differs with its text; nothing else may.
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:<spec>", text)
    return re.findall(r'"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z0-9_]*|\d\w*|\S', text)


class OutputTextTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        # Stand-ins for the CUDA headers: the .cuh is only preprocessed here.
        self.stubs = os.path.join(self.tmp, "stubs")
        os.makedirs(self.stubs)
        for h in ("cuda_bf16.h", "cuda_fp8.h"):
            open(os.path.join(self.stubs, h), "w").close()

    def generate(self, folder, spec_text, spec_dir="."):
        d = os.path.join(self.tmp, folder, spec_dir)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "txt.yaml"), "w") as f:
            f.write(spec_text)
        cwd = os.path.join(self.tmp, folder)
        rc, _, err = support.run_codegen(["--include-dir", "inc", "--docs", "L.md", os.path.join(spec_dir, "txt.yaml")], cwd=cwd)
        self.assertEqual((rc, err), (0, ""))
        return os.path.join(cwd, "inc")

    def preprocess_h(self, inc):
        r = run([GCC, "-std=c99", "-E", "-P", "-I", support.INCLUDE, "-I", inc, "-x", "c", os.path.join(inc, "klaunch", "txt.h")])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        return r.stdout

    def preprocess_cuh(self, inc, *defines):
        r = run([GXX, "-std=c++17", "-E", "-P", "-D__CUDACC__", "-DKL_VARIANT_v1"] + ["-D" + d for d in defines]
                + ["-I", self.stubs, "-I", inc, "-x", "c++", os.path.join(inc, "klaunch", "txt.cuh")])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        return r.stdout

    def compile_h(self, inc):
        src = os.path.join(self.tmp, "use_%d.c" % len(os.listdir(self.tmp)))
        with open(src, "w") as f:
            f.write('#define KLAUNCH_IMPLEMENTATION\n#include "klaunch/txt.h"\n#include <stdio.h>\n'
                    'int main(void) { fputs(kl_txt_copy_desc.spec_file, stdout); return 0; }\n')
        exe = src[:-2]
        for compiler, flags in ((GCC, ["-std=c99", "-x", "c"]), (GXX, ["-std=c++17", "-x", "c++"])):
            r = run([compiler] + flags + STRICT + ["-I", support.INCLUDE, "-I", inc, src, "-o", exe, "-ldl"])
            self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        return run([exe]).stdout

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_doc_text_cannot_end_open_or_splice_a_comment(self):
        plain = self.generate("plain", SPEC % {"doc": "plain", "tail": "plain"})
        nasty = self.generate("nasty", SPEC % {"doc": NASTY, "tail": NASTY_TAIL})
        with open(os.path.join(nasty, "klaunch", "txt.cuh")) as f:
            self.assertIn("define KL_NO_SIGNATURE_CHECKS", f.read())  # it is there, as comment text
        self.assertEqual(tokens(self.preprocess_h(nasty)), tokens(self.preprocess_h(plain)))
        for defines in ((), ("KL_SIGNATURE_CHECKS_AT_END", "KL_CHECK_SIGNATURES")):
            self.assertEqual(tokens(self.preprocess_cuh(nasty, *defines)), tokens(self.preprocess_cuh(plain, *defines)))
        self.compile_h(nasty)

    @unittest.skipUnless(NVCC, "nvcc is not installed")
    def test_doc_text_compiles_through_nvcc(self):
        nasty = self.generate("nasty", SPEC % {"doc": NASTY, "tail": NASTY_TAIL})
        src = os.path.join(self.tmp, "k.cu")
        with open(src, "w") as f:
            f.write('#include "klaunch/txt.cuh"\n'
                    'extern "C" __global__ void txt_copy(uint32_t n, float *dst) { dst[0] = WIDTH + n; }\n'
                    'extern "C" __global__ void txt_fill(float *dst) { dst[0] = 1.0f; }\n'
                    '#include "klaunch/txt.h"\n')
        r = run([NVCC, "-std=c++17", "-DKL_VARIANT_v1", "-Werror", "all-warnings", "-Xcompiler", ",".join(STRICT[:-1]),
                 "-I", support.INCLUDE, "-I", nasty, "-c", src, "-o", os.path.join(self.tmp, "k.o")])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_spec_path_cannot_end_a_comment_and_reaches_strings_unchanged(self):
        spec_dir = "x*/\n#define KL_NO_SIGNATURE_CHECKS 1\n/* \u2028 ??/ q\"/dir"
        inc = self.generate("path", SPEC % {"doc": "plain", "tail": "plain"}, spec_dir=spec_dir)
        for defines in ((), ("KL_SIGNATURE_CHECKS_AT_END", "KL_CHECK_SIGNATURES")):
            text = self.preprocess_cuh(inc, *defines)
            self.assertIn("static_assert", text)  # the signature checks are still there
        r = run([GXX, "-std=c++17", "-E", "-dM", "-D__CUDACC__", "-DKL_VARIANT_v1", "-I", self.stubs, "-I", inc, "-x", "c++",
                 os.path.join(inc, "klaunch", "txt.cuh")])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        self.assertNotIn("KL_NO_SIGNATURE_CHECKS", r.stdout)
        self.assertEqual(self.compile_h(inc), spec_dir + "/txt.yaml")

    def test_markdown_table_cells_stay_on_one_line(self):
        inc = self.generate("md", SPEC % {"doc": NASTY, "tail": NASTY_TAIL})
        with open(os.path.join(os.path.dirname(inc), "L.md")) as f:
            md = f.read()
        rows = [l for l in md.splitlines() if l.startswith("| `v1` |") or l.startswith("| 1 | `n` |")]
        self.assertEqual(len(rows), 2, md[-3000:])
        for row in rows:
            self.assertTrue(row.endswith(" |"), row)
        first = md.splitlines()[0]
        self.assertTrue(first.startswith("<!-- ") and first.endswith(" -->") and "--" not in first[4:-3], first)


if __name__ == "__main__":
    support.main()
