"""Property: a renamed spec is refused at its line, or its headers compile.

Every launcher of every spec the project ships and tests with (specs/,
tests/**, examples/) is a seed. A mutant renames one of its names (a
parameter, the launcher, its entry, a variant constant, a variant or the
family) to a name drawn from those that cause trouble in C: the names the
seed's own generated headers use (with their kl_/KL_ prefixes taken
off, which is how a spec name meets them), C and C++ keywords, macros and
declarations of the C and CUDA headers, CUDA's built-in variables and
types, `main`, and the spec's other names. The generator, run in-process,
must then either

- refuse: exit 1, every line `file:line:col: error: message; hint` at the
  spec's file, the summary line last, nothing written; or
- accept: the C header compiles with gcc -std=c99 and g++ -std=c++17
  (-Wall -Wextra -Werror -pedantic), and a kernel source written as the
  README says (KL_PARAMS_<entry>, __launch_bounds__(KL_THREADS_<entry>),
  KL_CHECK_KERNEL, then the end-of-unit signature checks), with the C
  header included too, compiles with nvcc.

A traceback, a hang or anything else is a failure, printed with the seed,
the mutant and its spec (also written under $TEST_UNDECLARED_OUTPUTS_DIR).

In `./bazelw test //...` a seeded slice runs (KLAUNCH_RENAME_COUNT,
default 24 mutants, KLAUNCH_RENAME_SEED, default 1). The mutants walk the
seeds' launchers in a shuffled cycle, so a count at least the number of
launchers (printed) renames in every one. By hand, longer:

    python3 tests/codegen/test_renames.py --seed 7 --count 500
"""

import glob
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import codegen_test_support as support

from klaunch_codegen import diag, emit, names, schema
from klaunch_codegen.spec import load_spec

GCC = support.tool("gcc")
GXX = support.tool("g++")
NVCC = support.tool("nvcc")
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
COUNT = int(os.environ.get("KLAUNCH_RENAME_COUNT", "24"))
SEED = int(os.environ.get("KLAUNCH_RENAME_SEED", "1"))
TIMEOUT_S = 30


def _yaml_under(top):
    """The .yaml files below `top`, never through a linked folder: a Bazel
    workspace under examples/ (external_workspace, after its check.sh ran)
    holds bazel-* links into whole output trees. (Files may be links: the
    runfiles tree is made of them.)"""
    out = []
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x)) and not x.startswith("bazel-")]
        out += [os.path.join(d, f) for f in files if f.endswith(".yaml")]
    return out


def seed_paths():
    found = glob.glob(os.path.join(support.ROOT, "specs", "*.yaml"))
    found += _yaml_under(os.path.join(support.ROOT, "tests"))
    found += _yaml_under(os.path.join(support.ROOT, "examples"))
    return sorted(p for p in set(found) if os.sep + "errors" + os.sep not in p)


# Names C, C++, the C library and CUDA treat specially, beyond keywords.
SPECIAL = ["main", "NULL", "EOF", "errno", "assert", "offsetof", "linux", "unix", "UINT32_MAX", "SIZE_MAX", "CHAR_BIT",
           "true", "false", "bool", "min", "max", "abs", "exp", "printf", "malloc", "free", "memcpy", "clock", "time",
           "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "float4", "half", "uint3", "std",
           "atomicAdd", "make_float2", "signbit", "isnan", "defined", "kernel", "stream", "module", "launch", "value",
           "type", "ok", "arity", "present", "is_kernel", "arg", "entry", "x", "size_t", "int32_t", "cudaStream_t"]


class Seed:
    """A spec that generates, and what can be renamed in it."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        d = diag.Diagnostics()
        cwd = os.getcwd()
        os.chdir(os.path.dirname(path))
        try:
            self.spec = load_spec(os.path.basename(path), d)
        finally:
            os.chdir(cwd)
        if self.spec is None:
            return
        # The names its own headers use, as spec names would meet them (read
        # from the text, not from declared.py: this test also runs against
        # an older generator, tests/codegen/on_commit.py).
        found = set()
        for render in (emit.render_header, emit.render_cuh):
            for name in set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", re.sub(r'"(?:\\.|[^"\\\n])*"', " ", render(self.spec)))):
                found.add(name)
                found.add(re.sub(r"^(?:kl__|kl_|KL__|KL_|KLAUNCH_)", "", name))
        self.emitted = sorted(found)
        s = self.spec
        self.names = sorted({s.family} | {v.name for v in s.variants} | {n for v in s.variants for n, _ in v.constants}
                            | {l.name for l in s.launchers} | {l.entry for l in s.launchers}
                            | {p.name for l in s.launchers for p in l.params})


def _lines(text):
    return text.split("\n")


def _replace_at(text, pos, old, new):
    """text with `old` at (line, col) replaced by `new`, or None when the
    name is not spelt there (a quoted or folded scalar)."""
    lines = _lines(text)
    line, col = pos
    l = lines[line - 1]
    if l[col - 1: col - 1 + len(old)] != old:
        return None
    lines[line - 1] = l[: col - 1] + new + l[col - 1 + len(old):]
    return "\n".join(lines)


def _replace_words(text, old, new, first_line=1, last_line=None):
    """Every whole word `old` in lines first_line..last_line renamed."""
    lines = _lines(text)
    last_line = last_line or len(lines)
    word = re.compile(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(old))
    for i in range(first_line - 1, last_line):
        lines[i] = word.sub(lambda m: new, lines[i])
    return "\n".join(lines)


def rename(rng, seed, launcher_index, new):
    """(what, spec file name, text) of one rename in the seed, or None."""
    s = seed.spec
    l = s.launchers[launcher_index]
    start = l.pos[0]
    later = [x.pos[0] for x in s.launchers if x.pos[0] > start]
    end = min(later) - 1 if later else None
    name = os.path.basename(seed.path)
    kinds = ["parameter"] * 3 + ["launcher"] * 2 + ["constant"] * bool(s.const_names) + ["variant", "family"]
    if l.entry_pos != l.pos:
        kinds += ["entry"]
    kind = rng.choice(kinds)
    if kind == "parameter" and l.params:
        p = rng.choice(l.params)
        # A parameter is its key and every use in its launcher's expressions.
        return "parameter %s of launcher %s -> %s" % (p.name, l.name, new), name, _replace_words(seed.text, p.name, new, start, end)
    if kind == "constant":
        c = rng.choice(s.const_names)
        return "constant %s -> %s" % (c, new), name, _replace_words(seed.text, c, new)
    if kind == "variant":
        v = rng.choice(s.variants)
        return "variant %s -> %s" % (v.name, new), name, _replace_at(seed.text, v.pos, v.name, new)
    if kind == "family":
        return "family %s -> %s" % (s.family, new), new + ".yaml", _replace_at(seed.text, s.family_pos, s.family, new)
    if kind == "entry":
        return "entry %s of launcher %s -> %s" % (l.entry, l.name, new), name, _replace_at(seed.text, l.entry_pos, l.entry, new)
    # The launcher's name (and its entry, where the spec gives none).
    lines = _lines(seed.text)
    for n in range(start, min(end or len(lines), len(lines)) + 1):
        m = re.match(r"^(\s*-?\s*name:\s*)%s\s*$" % re.escape(l.name), lines[n - 1])
        if m:
            return "launcher %s -> %s" % (l.name, new), name, _replace_at(seed.text, (n, len(m.group(1)) + 1), l.name, new)
    return None


DIAG = re.compile(r"^(?P<file>[^:]+):\d+:\d+: error: .+; .+$")


def kernel_source(spec):
    """A kernel source of the family as the README writes one, with the C
    header in the same unit, and the signature checks at the end."""
    out = ['#include "klaunch/%s.h"\n' % spec.family, '#include "klaunch/%s.cuh"\n' % spec.family]
    seen = set()
    for l in spec.launchers:
        if l.entry in seen:
            continue
        seen.add(l.entry)
        body = "".join(" (void)%s;" % p.name for p in l.kernel_params) + " (void)threadIdx.x; (void)blockDim.x;"
        e = l.entry
        out.append("#ifdef KL_THREADS_%s\nextern \"C\" __global__ void __launch_bounds__(KL_THREADS_%s) %s(KL_PARAMS_%s) {%s }\n"
                   "#else\nextern \"C\" __global__ void %s(KL_PARAMS_%s) {%s }\n#endif\nKL_CHECK_KERNEL(%s);\n"
                   % (e, e, e, e, body, e, e, body, e))
    out.append('#define KL_CHECK_SIGNATURES\n#include "klaunch/%s.cuh"\n' % spec.family)
    return "".join(out)


class RenameTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.compiled = set()

    def fail_mutant(self, i, what, text, why):
        out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
        if out:
            with open(os.path.join(out, "rename_mutant_%d.yaml" % i), "w", encoding="utf-8") as f:
                f.write(text)
        self.fail("mutant %d (--seed %d): %s: %s\n--- spec ---\n%s" % (i, SEED, what, why, text[:4000]))

    def compile(self, i, what, text, out, spec):
        h = os.path.join(out, "klaunch", spec.family + ".h")
        cuh = os.path.join(out, "klaunch", spec.family + ".cuh")
        with open(h, "rb") as f1, open(cuh, "rb") as f2:
            key = hashlib.sha256(f1.read() + b"\0" + f2.read()).hexdigest()
        if key in self.compiled:
            return
        self.compiled.add(key)
        cu = os.path.join(out, "k.cu")
        with open(cu, "w") as f:
            f.write(kernel_source(spec))
        runs = [
            [GCC, "-std=c99", "-x", "c"] + STRICT + ["-fsyntax-only", "-I", support.INCLUDE, "-I", out, h],
            [GXX, "-std=c++17", "-x", "c++"] + STRICT + ["-fsyntax-only", "-I", support.INCLUDE, "-I", out, h],
        ]
        if NVCC:
            runs.append([NVCC, "-std=c++17", "-DKL_VARIANT_%s" % spec.variants[0].name, "-I", support.INCLUDE, "-I", out,
                         "-c", cu, "-o", os.path.join(out, "k.o")])
        for cmd in runs:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if r.returncode != 0:
                self.fail_mutant(i, what, text, "accepted, but %s fails:\n%s" % (os.path.basename(cmd[0]), r.stdout[-3000:]))

    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_a_renamed_spec_is_refused_at_its_line_or_compiles(self):
        seeds = [s for s in (Seed(p) for p in seed_paths()) if s.spec is not None]
        self.assertGreaterEqual(len(seeds), 10, [s.path for s in seeds])
        launchers = [(s, i) for s in seeds for i in range(len(s.spec.launchers))]
        rng = random.Random(SEED)
        rng.shuffle(launchers)
        keywords = sorted(schema.C_KEYWORDS | schema.CXX_KEYWORDS)
        macros = sorted(names.HEADER_MACROS)
        decls = sorted(names.HEADER_DECLARATIONS)
        accepted = refused = 0
        start = time.monotonic()
        for i in range(COUNT):
            seed, li = launchers[i % len(launchers)]
            pool = rng.choice([seed.emitted, seed.emitted, keywords, SPECIAL, SPECIAL, macros, decls, seed.names])
            new = rng.choice(pool)
            made = rename(rng, seed, li, new)
            if made is None or made[2] is None or made[2] == seed.text:
                continue
            what, spec_name, text = made
            case = os.path.join(self.tmp, "case%d" % i)
            os.makedirs(os.path.join(case, "out"))
            with open(os.path.join(case, spec_name), "w", encoding="utf-8") as f:
                f.write(text)
            before = support.tree_snapshot(case)
            try:
                rc, err = support.run_codegen_in_process(["--include-dir", "out", spec_name], case, TIMEOUT_S)
            except support.GeneratorTimeout:
                self.fail_mutant(i, what, text, "the generator ran past %d s" % TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 (any escape is the failure)
                import traceback

                self.fail_mutant(i, what, text, "an exception escaped:\n" + "".join(traceback.format_exception(e))[-4000:])
            if rc != 0:
                refused += 1
                lines = err.splitlines()
                if rc != 1 or not lines or not re.match(r"^klaunch_codegen: \d+ errors?; nothing written$", lines[-1]):
                    self.fail_mutant(i, what, text, "exit %r without the summary line:\n%s" % (rc, err))
                for line in lines[:-1]:
                    m = DIAG.match(line)
                    if not m or m.group("file") != spec_name:
                        self.fail_mutant(i, what, text, "a report line that is not %s:line:col: error: message; hint:\n%r" % (spec_name, line))
                if support.tree_snapshot(case) != before:
                    self.fail_mutant(i, what, text, "refused, yet something was written:\n" + err)
            else:
                accepted += 1
                d = diag.Diagnostics()
                cwd = os.getcwd()
                os.chdir(case)
                try:
                    spec = load_spec(spec_name, d)
                finally:
                    os.chdir(cwd)
                self.compile(i, what, text, os.path.join(case, "out"), spec)
            shutil.rmtree(case)
        print("renames: %d mutants (seed %d) over %d launchers of %d specs: %d refused, %d accepted, %d distinct outputs "
              "compiled, %.1f s" % (COUNT, SEED, len(launchers), len(seeds), refused, accepted, len(self.compiled),
                                    time.monotonic() - start))
        self.assertGreater(refused, 0)
        self.assertGreater(accepted, 0)


def _parse_args(argv):
    """--seed N and --count N for a longer run by hand; the rest is unittest's."""
    global SEED, COUNT
    rest = []
    it = iter(argv)
    for a in it:
        if a in ("--seed", "--count"):
            value = int(next(it))
            if a == "--seed":
                SEED = value
            else:
                COUNT = value
        else:
            rest.append(a)
    return rest


if __name__ == "__main__":
    support.main(argv=_parse_args(sys.argv[1:]))
