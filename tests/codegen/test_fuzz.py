"""A bounded, seeded mutation fuzzer of the generator.

Each mutant is a real spec (the golden cases and the project's specs) with
one to three mutations: a nasty name, number, character or text put in
place of a token, a line deleted, duplicated or swapped, YAML syntax
inserted. The generator runs in-process on it, over an output folder that
already holds files. The property:

- no Python exception escapes (a traceback is a failure), and no run takes
  more than a few seconds (a hang is a failure);
- a refused spec changes nothing in the output folder, and every line of
  its report is `file:line:col: error: message; hint` or the summary;
- an accepted spec's C header compiles as C99 and C++17 with -Wall -Wextra
  -Werror -pedantic, and its kernel-side header as C++17 against stand-in
  CUDA headers (the stress test compiles real ones through nvcc);
- where both YAML parsers accept the text they compose the same tree.

KLAUNCH_FUZZ_COUNT (default 100) and KLAUNCH_FUZZ_SEED (default 15) set
how many mutants and which; a failure prints the seed, the mutant's index
and its text, and writes it under $TEST_UNDECLARED_OUTPUTS_DIR.
"""

import glob
import hashlib
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import codegen_test_support as support
import yaml

from klaunch_codegen import yamlpos

GCC = support.tool("gcc")
GXX = support.tool("g++")
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
COUNT = int(os.environ.get("KLAUNCH_FUZZ_COUNT", "100"))
SEED = int(os.environ.get("KLAUNCH_FUZZ_SEED", "15"))
TIMEOUT_S = 20

SEEDS = sorted(glob.glob(os.path.join(support.GOLDEN, "*", "*.yaml")) + glob.glob(os.path.join(support.ROOT, "specs", "*.yaml")))

NAMES = [
    "UINT32_MAX", "_Float32", "_Pragma", "typeof", "int", "class", "kernel", "stream", "NULL", "EOF", "linux", "value",
    "type", "ok", "k_get", "kl_x", "KL_X", "klaunch", "cuda_backend", "a__b", "_x", "cudaStream_t", "CUresult", "exp",
    "defined", "x" * 70, "n\n", "é", "TILE", "HEAD_DIM", "n", "scale", "Copy", "copy", "x_desc", "module", "stdin", "ROWS",
]
NUMBERS = ["0", "064", "1:30", "-1", "18446744073709551616", "4294967296", "2147483648", "1e3", "0x", "0x10", "1_000",
           "65536", "1025", "99999999999999999999", "+5", ".inf", "~", "''", "0b101"]
CHARS = ["\f", "\0", "\u2028", "\r", "\t", "\ufeff", "\u202e", "\x1b", "\\", "?" * 3 + "/", "*/", "/*", '"', "'", "#", "|", ">",
         ":", "-", "{", "}", "[", "]", ",", "&a", "*a", "!!int ", "<<: ", "---\n", "? ", "%", " "]
TEXTS = ["*/ x /*", "ends with \\", "trigraph ??/", "a\n#define KL_NO_SIGNATURE_CHECKS 1\n", "|\n  x\n", "[" * 80 + "]" * 80,
         " + ".join(["n"] * 80), "(" * 40 + "n" + ")" * 40, "not " * 40 + "n > 1", "ceil_div(n, 0)", "n / 0", "n <= 4294967295",
         "n == n", "max(n)", "n ** 2"]


NASTY_DOCS = [r'"*\\\n/ \u2028 ??/ ends \\"', r'"lone \ud800 surrogate"', r'"pair \ud83d\ude00"', r'"past \U00110000"', r'"a */ b /* c \0 \e \u202e"', '"%s %d %n"', r'"\"quoted\" \\ ??="',
              "|\n      two\n      lines \\", ">-\n      folded */"]


def random_expression(rng, names, depth=2):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(names + ["1", "2", "0", "4294967295", "65536"])
    k = rng.randrange(7)
    a, b = random_expression(rng, names, depth - 1), random_expression(rng, names, depth - 1)
    if k < 5:
        return "(%s %s %s)" % (a, "+-*/%"[k], b)
    return "%s(%s, %s)" % (rng.choice(["ceil_div", "max", "min"]), a, b)


def mutate_value(rng, text):
    """A value made new but well formed: a doc's text, or an expression
    over the spec's u32 parameters and constants (often accepted)."""
    lines = text.split("\n")
    docs = [i for i, l in enumerate(lines) if re.match(r"^\s*(- )?doc: ", l)]
    exprs = [i for i, l in enumerate(lines) if re.match(r"^\s*(x|y|z|shared_bytes|check): ", l)]
    names = re.findall(r"^\s*- ([a-z_][a-z0-9_]*): u32\s*$", text, flags=re.M)
    names += re.findall(r"\b([A-Z][A-Z0-9_]+): -?\d+", text)
    if docs and (rng.random() < 0.5 or not exprs or not names):
        i = rng.choice(docs)
        head = lines[i][: lines[i].index("doc: ") + 5]
        lines[i] = head + rng.choice(NASTY_DOCS)
    elif exprs and names:
        i = rng.choice(exprs)
        key = lines[i][: lines[i].index(": ") + 2]
        e = random_expression(rng, names)
        if key.strip().startswith("check"):
            e = "%s %s %s" % (e, rng.choice(["<", "<=", ">", ">=", "==", "!="]), random_expression(rng, names, 1))
        lines[i] = key + '"%s"' % e
    return "\n".join(lines)


def mutate(rng, text):
    """One mutation of a spec's text."""
    if rng.random() < 0.35:
        return mutate_value(rng, text)
    lines = text.split("\n")
    k = rng.randrange(9)
    if k == 0 and len(lines) > 2:
        del lines[rng.randrange(len(lines))]
    elif k == 1:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif k == 2 and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        tokens = list(re.finditer(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S", text))
        if not tokens:
            return text + rng.choice(CHARS)
        t = rng.choice(tokens)
        pool = {3: NAMES, 4: NUMBERS, 5: CHARS, 6: TEXTS, 7: NAMES + NUMBERS, 8: CHARS + TEXTS}[k]
        new = rng.choice(pool)
        if rng.random() < 0.3:
            return text[: t.start()] + new + text[t.start():]
        return text[: t.start()] + new + text[t.end():]
    return "\n".join(lines)


DIAG = re.compile(r"^(?:.+):\d+:\d+: error: .+; .+$")

STUB_BF16 = "struct __nv_bfloat16 { unsigned short x; };\nstruct __half { unsigned short x; };\n"
STUB_FP8 = "struct __nv_fp8_e4m3 { unsigned char x; };\n"
STUB_PRE = "#define __global__\n#define __device__\n#define __grid_constant__\n"
# cuda.h as far as the kernel-side header reads it: CUDA 13's CUtensorMap.
STUB_CUDA = "typedef struct CUtensorMap_st { alignas(128) unsigned long long opaque[16]; } CUtensorMap;\n"


class FuzzTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.stubs = os.path.join(self.tmp, "stubs")
        os.makedirs(self.stubs)
        for name, text in (("cuda_bf16.h", STUB_BF16), ("cuda_fp8.h", STUB_FP8), ("cuda.h", STUB_CUDA), ("kl_pre.h", STUB_PRE)):
            with open(os.path.join(self.stubs, name), "w") as f:
                f.write(text)
        self.compiled = set()

    def fail_mutant(self, i, text, why):
        out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
        if out:
            with open(os.path.join(out, "fuzz_mutant_%d.yaml" % i), "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
        self.fail("mutant %d (KLAUNCH_FUZZ_SEED=%d): %s\n--- spec ---\n%s" % (i, SEED, why, text[:4000]))

    def run_generator(self, case, spec_name):
        rc, err = support.run_codegen_in_process(["--include-dir", "out", "--docs", "out/L.md", spec_name], case, TIMEOUT_S)
        return rc, err, os.path.join(case, "out")

    def compile_outputs(self, i, text, out, family, variant):
        h = os.path.join(out, "klaunch", family + ".h")
        cuh = os.path.join(out, "klaunch", family + ".cuh")
        with open(h, "rb") as f1, open(cuh, "rb") as f2:
            key = hashlib.sha256(f1.read() + f2.read()).hexdigest()
        if key in self.compiled:
            return
        self.compiled.add(key)
        runs = [
            [GCC, "-std=c99", "-x", "c"] + STRICT + ["-fsyntax-only", "-I", support.INCLUDE, "-I", out, h],
            [GXX, "-std=c++17", "-x", "c++"] + STRICT + ["-fsyntax-only", "-I", support.INCLUDE, "-I", out, h],
            [GXX, "-std=c++17", "-x", "c++", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-D__CUDACC__", "-DKL_VARIANT_" + variant,
             "-include", os.path.join(self.stubs, "kl_pre.h"), "-I", self.stubs, "-I", out, cuh],
        ]
        for cmd in runs:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if r.returncode != 0:
                self.fail_mutant(i, text, "accepted, but %s fails:\n%s" % (" ".join(cmd[:3]), r.stdout[-3000:]))

    def check_parsers_agree(self, i, text):
        if not hasattr(yaml, "CSafeLoader"):
            return
        results = []
        for parser in ("c", "python"):
            os.environ["KLAUNCH_CODEGEN_YAML"] = parser
            try:
                src = yamlpos.Source("t.yaml", text)
                try:
                    results.append(support.yaml_tree(src.compose()))
                except yamlpos.YamlSyntaxError:
                    results.append(None)
            finally:
                del os.environ["KLAUNCH_CODEGEN_YAML"]
        if results[0] is not None and results[1] is not None and results[0] != results[1]:
            self.fail_mutant(i, text, "the C and Python YAML parsers compose different trees")

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_mutants_never_crash_hang_write_on_error_or_emit_what_does_not_compile(self):
        rng = random.Random(SEED)
        seeds = []
        for p in SEEDS:
            with open(p, encoding="utf-8") as f:
                seeds.append((os.path.basename(p), f.read()))
        accepted = refused = 0
        start = time.monotonic()
        for i in range(COUNT):
            spec_name, text = rng.choice(seeds)
            for _ in range(rng.randint(1, 3)):
                text = mutate(rng, text)
            case = os.path.join(self.tmp, "case%d" % i)
            os.makedirs(os.path.join(case, "out", "klaunch"))
            family = spec_name[:-5]
            for rel in ("klaunch/%s.h" % family, "klaunch/%s.cuh" % family, "L.md"):
                with open(os.path.join(case, "out", rel), "w") as f:
                    f.write("/* an older file */\n")
            with open(os.path.join(case, spec_name), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            before = support.tree_snapshot(case, folders=True)
            try:
                rc, err, out = self.run_generator(case, spec_name)
            except support.GeneratorTimeout:
                self.fail_mutant(i, text, "the generator ran past %d s" % TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 (any escape is the failure)
                import traceback

                self.fail_mutant(i, text, "an exception escaped:\n" + "".join(traceback.format_exception(e))[-4000:])
            self.check_parsers_agree(i, text)
            if rc != 0:
                refused += 1
                self.assertEqual(rc, 1)
                if support.tree_snapshot(case, folders=True) != before:
                    self.fail_mutant(i, text, "refused, yet the folder changed:\n" + err)
                lines = err.splitlines()
                if not lines or not re.match(r"^klaunch_codegen: \d+ errors?; nothing written$", lines[-1]):
                    self.fail_mutant(i, text, "no summary line:\n" + err)
                for line in lines[:-1]:
                    if not DIAG.match(line):
                        self.fail_mutant(i, text, "a report line that is not file:line:col: error: message; hint:\n%r" % line)
                continue
            accepted += 1
            if err:
                self.fail_mutant(i, text, "accepted with output on stderr:\n" + err)
            variant = re.search(r"KL_VARIANT_([A-Za-z0-9_]+)", open(os.path.join(out, "klaunch", family + ".cuh")).read()).group(1)
            self.compile_outputs(i, text, out, family, variant)
            shutil.rmtree(case)
        print("fuzz: %d mutants (seed %d): %d refused, %d accepted, %d distinct outputs compiled, %.1f s"
              % (COUNT, SEED, refused, accepted, len(self.compiled), time.monotonic() - start))
        self.assertGreater(refused, COUNT // 10)
        self.assertGreater(accepted, COUNT // 20)


if __name__ == "__main__":
    support.main()
