"""Names that reach C (codegen/klaunch_codegen/names.py), checked against
what the compilers and the runtime headers say, not against lists copied
from the code under test:

- every macro gcc, g++ and nvcc define with the headers the generated files
  include (and every function those headers declare, for kernel entries and
  constants) is refused as a spec name;
- every identifier the rendered kernel-side headers use after the variant
  constants are defined is refused as a constant name;
- the runtime's names and limits are read from include/klaunch/*.h, the
  limits equal what a C compiler says of kl_module.

Names of two families that collide after prefixing, or differ only in case,
are test_cli.py's AcrossFamiliesTest (the generator run as a program).

    python3 tests/codegen/test_names.py --update

rewrites codegen/klaunch_codegen/header_names.txt from this machine's
compilers (after a toolkit or libc upgrade the first test says so).
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

import codegen_test_support as support

from klaunch_codegen import names, schema, validate

GCC = support.tool("gcc")
GXX = support.tool("g++")
NVCC = support.tool("nvcc")
HEADER_NAMES = os.path.join(support.ROOT, "codegen", "klaunch_codegen", "header_names.txt")

# What the generated files include: klaunch/<family>.h (and through it the
# runtime, whose system headers are read from its files) and the .cuh.
H_INCLUDES = ["stddef.h", "stdint.h", "stdbool.h"]
CUH_INCLUDES = ["cuda_bf16.h", "cuda_fp8.h", "stdint.h", "cuda.h"]  # cuda.h: families with tensor maps


def runtime_system_includes():
    found = set()
    for h in glob.glob(os.path.join(support.INCLUDE, "klaunch", "*.h")):
        with open(h) as f:
            found.update(re.findall(r"^\s*#\s*include\s*<([^>]+)>", f.read(), flags=re.M))
    return sorted(found)


def _macros(cmd, source, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t" + suffix)
        with open(path, "w") as f:
            f.write(source)
        out = subprocess.run(cmd + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=tmp)
        if out.returncode != 0:
            raise AssertionError("%s failed:\n%s" % (" ".join(cmd), out.stderr[-3000:]))
        return set(re.findall(r"^#define ([A-Za-z_][A-Za-z0-9_]*)", out.stdout, flags=re.M))


def cuh_headers_preprocessed():
    """nvcc -E of the headers the .cuh includes: directives dropped,
    literals emptied."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.cu")
        with open(path, "w") as f:
            f.write("".join("#include <%s>\n" % h for h in CUH_INCLUDES))
        out = subprocess.run([NVCC, "-std=c++17", "-E", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, cwd=tmp)
    if out.returncode != 0:
        raise AssertionError("nvcc -E failed:\n" + out.stderr[-3000:])
    text = re.sub(r"^#.*$", "", out.stdout, flags=re.M)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"'(?:\\.|[^'\\])*'", "''", text)


def compiler_names():
    """({macro}, {declared name}, {CUDA built-in variable}) from the
    compilers on this machine."""
    h_src = "".join("#include <%s>\n" % h for h in H_INCLUDES + runtime_system_includes())
    cuh_src = "".join("#include <%s>\n" % h for h in CUH_INCLUDES)
    macros = set()
    for cmd in ([GCC, "-std=c99", "-dM", "-E"], [GCC, "-dM", "-E"], [GXX, "-std=c++17", "-dM", "-E", "-x", "c++"],
                [GXX, "-dM", "-E", "-x", "c++"]):
        macros |= _macros(cmd, h_src, ".c")
    decls, builtins = set(), set()
    if NVCC:
        macros |= _macros([NVCC, "-std=c++17", "-E", "-Xcompiler", "-dM"], cuh_src, ".cu")
        text = cuh_headers_preprocessed()
        # Declarations the C library and CUDA headers make: extern ... name(
        decls = set(re.findall(r"\bextern\b[^;{}]*?\b([A-Za-z][A-Za-z0-9_]*)\s*\(", text))
        # CUDA's built-in variables (threadIdx, warpSize, ...), which a
        # parameter would hide from the kernel's body.
        builtins = set(re.findall(r"__attribute__\(\(device_builtin\)\)\s*extern\s+const\s+([A-Za-z]\w*)\s*;", text))
        decls |= global_names(file_scope(text))
    drop = schema.C_KEYWORDS | schema.CXX_KEYWORDS | {"__attribute__", "throw", "noexcept", "decltype", "operator"}
    keep = lambda n: not n.startswith("_") and n not in drop and not any(p.match(n) for p, _ in schema.RESERVED_PATTERNS)
    macros = {n for n in macros if keep(n)}
    builtins = {n for n in builtins if keep(n)} - macros
    decls = {n for n in decls if keep(n)} - macros - builtins
    return macros, decls, builtins


def file_scope(text):
    """Preprocessed C++ at file scope: the bodies of namespaces, classes
    and functions dropped, those of extern "C" { ... } kept, and those of
    unscoped enums kept in their braces (their enumerators are global)."""
    out, stack, last = [], [], 0
    for m in re.finditer(r"[{}]", text):
        i = m.start()
        if all(stack):
            out.append(text[last:i])
        if m.group() == "{":
            before = text[max(0, i - 200):i]
            if re.search(r'\bextern\s*""\s*$', before):
                stack.append("extern")
                out.append(" ")
            elif all(stack) and re.search(r"\benum\s+(?!class\b|struct\b)(?:[A-Za-z_]\w*\s*)?(?::[^{};()]*)?$", before):
                stack.append("enum")
                out.append("{")
            else:
                stack.append(False)
                if all(stack[:-1]):
                    out.append("{")
        else:
            t = stack.pop() if stack else "extern"
            if all(stack):
                out.append(" " if t == "extern" else "}")
        last = i + 1
    out.append(text[last:])
    return "".join(out)


def global_names(flat):
    """Types (typedefs, struct/class/union/enum tags), namespaces and
    extern variables that file-scope text declares."""
    found = set()
    attribute = r"__attribute__\s*\(\((?:[^;{}()]|\([^;{}()]*\))*\)\)"
    for m in re.finditer(r"\btypedef\b([^;]*);", flat):
        body = re.sub(attribute, " ", m.group(1))  # typedef int register_t __attribute__((mode(word)));
        pointer = re.search(r"\(\s*\*\s*([A-Za-z]\w*)\s*\)", body)
        ids = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]|\{[^{}]*\}", "", body))
        if pointer or ids:
            found.add(pointer.group(1) if pointer else ids[-1])
    found.update(re.findall(r"\b(?:struct|class|union|enum)\s+(?:__attribute__\s*\(\([^;{]*?\)\)\s*|alignas\([^)]*\)\s*)*"
                            r"([A-Za-z_]\w*)\s*(?:final\s*)?(?::[^{;]*)?\{", flat))
    found.update(re.findall(r"\bnamespace\s+([A-Za-z_]\w*)", flat))
    for body in re.findall(r"\benum\b[^{};]*\{([^{}]*)\}", flat):  # enumerators (MAJOR_VERSION)
        found.update(m.group(1) for m in re.finditer(r"(?:^|,)\s*([A-Za-z_]\w*)", body))
    found.update(re.findall(r"\bextern\b[^;(){}]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*;", flat))
    # Names a using-declaration brings into the global namespace (<cmath>'s
    # std::isnan, signbit: overloads a kernel of that name would meet).
    found.update(re.findall(r"\busing\s+(?:::)?(?:[A-Za-z_]\w*\s*::\s*)+([A-Za-z_]\w*)\s*;", flat))
    # Functions declared or defined there, extern or not (CUDA's device
    # functions are static inline: atomicAdd, make_float2).
    found.update(re.findall(r"\b([A-Za-z_]\w*)\s*\((?:[^;{}()]|\([^;{}()]*\))*\)\s*(?:const\s*|noexcept\s*(?:\([^()]*\)\s*)?|"
                            r"throw\s*\(\s*\)\s*|" + attribute + r"\s*)*(?:;|\{\}|->)", flat))
    return found


def update():
    macros, decls, builtins = compiler_names()
    with open(HEADER_NAMES, "w") as f:
        f.write("# Names the headers of the generated files define as macros, or declare, and\n"
                "# which spec names therefore must not take (codegen/klaunch_codegen/names.py).\n"
                "# Made by `python3 tests/codegen/test_names.py --update` from gcc, g++ and\n"
                "# nvcc (-dM -E, and nvcc -E's extern functions, file-scope types, namespaces\n"
                "# and extern variables) on the headers the generated .h, the runtime and the\n"
                "# .cuh include; names starting with _ and names the patterns of\n"
                "# schema.RESERVED_PATTERNS cover are left out. Macros and CUDA's built-in\n"
                "# variables are refused for every raw name, declarations for kernel entries\n"
                "# and constants.\n")
        f.write("# macros\n")
        f.writelines(n + "\n" for n in sorted(macros))
        f.write("# built-in variables\n")
        f.writelines(n + "\n" for n in sorted(builtins))
        f.write("# declarations\n")
        f.writelines(n + "\n" for n in sorted(decls))
    print("wrote %s: %d macros, %d built-in variables, %d declarations" % (HEADER_NAMES, len(macros), len(builtins), len(decls)))


def problem(name, role):
    return validate.name_problem(name, {"param": "parameter name", "constant": "constant name", "entry": "entry"}[role])


class HeaderNamesTest(unittest.TestCase):
    @unittest.skipUnless(GCC and GXX, "gcc/g++ are not installed")
    def test_every_macro_and_declaration_of_the_included_headers_is_refused(self):
        macros, decls, builtins = compiler_names()
        self.assertIn("UINT32_MAX", macros | set(n for n in ["UINT32_MAX"] if schema.RESERVED_PATTERNS[1][0].match(n)))
        if NVCC:
            self.assertEqual(builtins, {"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})
            self.assertTrue({"dim3", "float4", "half", "FILE", "std", "atomicAdd", "make_float2", "isnan", "norm",
                             "register_t", "MAJOR_VERSION"} <= decls, sorted(decls)[:50])
        missing = sorted(n for n in macros | builtins if problem(n, "param") is None)
        missing += sorted(n for n in decls if problem(n, "entry") is None or problem(n, "constant") is None)
        self.assertEqual(missing, [], "names the compilers define that a spec may take; run: python3 tests/codegen/test_names.py --update")

    def test_names_the_issue_found_are_refused(self):
        # Each compiled, and failed, as a parameter name on 0c9d934.
        for n in ("UINT32_MAX", "_Float32", "_Pragma", "typeof", "EOF", "linux", "INT64_C", "stdin", "NULL", "cudaStream_t"):
            self.assertIsNotNone(problem(n, "param"), n)
        for n in ("exp", "malloc", "printf", "sinf", "cudaMalloc"):
            self.assertIsNotNone(problem(n, "entry"), n)
            self.assertIsNone(problem(n, "param") if n not in ("cudaMalloc",) else None, n)
        # Ordinary names stay free; a parameter may shadow a C function.
        for n in ("n", "num_tokens", "TILE_MAX", "head_dim", "scale", "count", "x", "CUTOFF", "index", "time"):
            self.assertIsNone(problem(n, "param"), n)
        for n in ("n", "num_tokens", "TILE_MAX", "HEAD_DIM", "CUTOFF", "WIDTH"):
            self.assertIsNone(problem(n, "constant"), n)


class KernelNamesTest(unittest.TestCase):
    @unittest.skipUnless(NVCC, "nvcc is not installed")
    def test_every_identifier_of_the_cuh_headers_the_generator_allows_is_a_kernel_name(self):
        # The other side of header_names.txt: every name the preprocessed
        # headers of the .cuh spell that an entry may take compiles as an
        # extern "C" kernel whose decltype the signature checks can take
        # (an overload set, a type or an enumerator of that name fails).
        cuh_src = "".join("#include <%s>\n" % h for h in CUH_INCLUDES)
        text = cuh_headers_preprocessed()
        allowed = sorted(n for n in set(re.findall(r"\b[A-Za-z][A-Za-z0-9_]*\b", text)) if problem(n, "entry") is None)
        self.assertGreater(len(allowed), 500)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.cu")
            with open(path, "w") as f:
                f.write(cuh_src)
                for n in allowed:
                    f.write('extern "C" __global__ void %s(uint32_t n) { (void)n; }\n'
                            'static_assert(sizeof(decltype(%s) *) > 0, "");\n' % (n, n))
            r = subprocess.run([NVCC, "-std=c++17", "-c", path, "-o", os.path.join(tmp, "t.o"), "-Xcudafe", "--error_limit=100000"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, cwd=tmp)
            lines = open(path).read().split("\n")
            bad = sorted({re.search(r"void (\w+)\(|decltype\((\w+)\)", lines[int(m.group(1)) - 1]).group(0)
                          for m in re.finditer(r"t\.cu\((\d+)\): error", r.stdout)})
            self.assertEqual((r.returncode, bad), (0, []), "names the generator allows as entries that nvcc refuses; "
                             "run: python3 tests/codegen/test_names.py --update\n" + r.stdout[-2000:])


class KernelSideHeaderTest(unittest.TestCase):
    def test_constants_may_not_take_names_the_cuh_uses_after_defining_them(self):
        # Every identifier of the rendered .cuh files that the spec did not
        # name and that is not a keyword or klaunch's: a constant of that
        # name would be substituted into the signature checks. No list
        # says so: collisions.py reads the rendered header.
        found = set()
        for cuh in glob.glob(os.path.join(support.GOLDEN, "*", "expected", "klaunch", "*.cuh")):
            case = os.path.dirname(os.path.dirname(os.path.dirname(cuh)))
            spec_names = set()
            with open(os.path.join(case, support.case_spec(case))) as f:
                spec_names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f.read()))
            with open(cuh) as f:
                text = f.read()
            body = text.split("/* ---- variant ---- */", 1)[1]
            # Directives (with their continuation lines) are not expanded text.
            body = re.sub(r"^\s*#\s*(?:define|elif|if|ifndef|ifdef|endif|else|error|include)\b(?:[^\n]*\\\n)*[^\n]*", " ", body, flags=re.M)
            for n in re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", names._code_only(body)):
                if n in spec_names or n in schema.C_KEYWORDS or n in schema.CXX_KEYWORDS or re.match(r"(kl_|KL_|KLAUNCH_|__)", n):
                    continue
                found.add(n)
        self.assertTrue(found, "the scan found nothing: the header's layout changed?")
        accepted = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in sorted(found):
                if problem(n, "constant") is not None:
                    continue  # refused by name already (a header's, a keyword)
                spec = os.path.join(tmp, "c.yaml")
                with open(spec, "w") as f:
                    f.write("family: c\nvariants:\n  v: {constants: {%s: 1}}\nlaunchers:\n  - name: k\n    params:\n"
                            "      - n: u32\n    grid: {x: n}\n    block: {x: 32}\n" % n)
                rc, _, err = support.run_codegen(["--include-dir", os.path.join(tmp, "out"), "c.yaml"], cwd=tmp)
                if rc != 1 or "constant name '%s' is a name the generated kernel-side header uses" % n not in err:
                    accepted.append((n, err))
        self.assertEqual(accepted, [])


class RuntimeTest(unittest.TestCase):
    def test_runtime_names_come_from_its_headers(self):
        rt = names.runtime()
        self.assertEqual(os.path.realpath(rt.directory), os.path.realpath(os.path.join(support.INCLUDE, "klaunch")))
        for n in ("kl_kernel_get", "kl_module", "kl_kernel", "KLAUNCH_KLAUNCH_H", "kl__fail", "KL_SUCCESS"):
            self.assertIn(n, rt.identifiers)
        self.assertIn("klaunch.h", rt.headers)

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_limits_equal_what_the_compiler_says_of_kl_module(self):
        src = ('#include <stdio.h>\n#include "klaunch/klaunch.h"\nint main(void) { kl_module m; (void)m;\n'
               'printf("%d %d %d %d %d\\n", (int)sizeof m.family, (int)sizeof m.variant, (int)sizeof m.const_names[0],'
               ' (int)KL_MAX_CONSTS, (int)KL_MODULE_INFO_BYTES); return 0; }\n')
        with tempfile.TemporaryDirectory() as tmp:
            c = os.path.join(tmp, "t.c")
            with open(c, "w") as f:
                f.write(src)
            exe = os.path.join(tmp, "t")
            r = subprocess.run([GCC, "-std=c99", "-I", support.INCLUDE, c, "-o", exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stdout)
            got = subprocess.run([exe], stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
        lim = names.runtime().limits
        self.assertEqual([int(x) for x in got], [lim["family"], lim["variant"], lim["const_name"], lim["KL_MAX_CONSTS"],
                                                  lim["KL_MODULE_INFO_BYTES"]])


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        support.main()
