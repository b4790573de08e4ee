#!/usr/bin/env python3
"""Writes the unity translation unit kl_fatbin (bazel/cuda.bzl) compiles.

    write_unity.py --label LABEL --family F --variant V --spec SPEC --out FILE
                   [--source-hash FILE...] -- SRC...

Used by kl_fatbin (bazel/cuda.bzl) and klaunch_add_family (cmake/klaunch.cmake).
FILE holds, in this order:

    #define KL_SOURCE_HASH "sha256:..."          (with --source-hash: of those
                                                 files' contents, concatenated)
    #define KL_VARIANT_<V> 1
    #define KL_SIGNATURE_CHECKS_AT_END 1
    #include "klaunch/<F>.cuh"
    #include "<SRC>"                            (each source, in order)
    #line <line> "<SRC>"                        (for each kernel of the spec
    KL_CHECK_KERNEL(<entry>);                    that SRC defines, at the line
                                                 of its definition)
    #define KL_CHECK_SIGNATURES 1                (only when some kernel of the
    #include "klaunch/<F>.cuh"                   spec was not found: checks
                                                 every kernel, as before)

The #line markers make a layer-1 error (docs/ARG_ORDER.md) read "detected
during instantiation ... at line 12 of kernels/<family>/<file>.cu", the
author's file and the kernel's line, next to the spec's file:line:col the
message itself names. A kernel is found by reading the sources: its entry
name followed by a parameter list and a body, after __global__ in the same
declaration (comments and strings ignored). One defined some other way (a
macro, a template) is not found and is checked at the end instead.
"""

import argparse
import hashlib
import re
import sys


def entries(spec_path):
    """Kernel entry names of the spec (launchers[].entry, default name), in order."""
    try:
        import yaml
    except ImportError:
        return None  # (without PyYAML: every kernel checked at the end)
    try:
        with open(spec_path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None  # the generator reports it; check everything at the end
    out = []
    for launcher in (doc or {}).get("launchers") or []:
        if isinstance(launcher, dict):
            e = launcher.get("entry") or launcher.get("name")
            if isinstance(e, str) and e not in out:
                out.append(e)
    return out


def blank_comments_and_strings(text):
    """The text with comments, string and character literals replaced by
    spaces (newlines kept), so positions and line numbers stay."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
        i = j
    return "".join(out)


def definition_line(text, entry):
    """Line (1-based) of the definition of __global__ kernel `entry`, or None."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(entry), text):
        # The declaration it belongs to starts after the last ; { } or
        # preprocessor line before the name.
        start = max(text.rfind(ch, 0, m.start()) for ch in ";{}")
        head = text[start + 1:m.start()]
        head = "\n".join(l for l in head.split("\n") if not l.lstrip().startswith("#"))
        if "__global__" not in head:
            continue
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        rest = text[j + 1:].lstrip()
        if rest.startswith("{"):
            return text.count("\n", 0, m.start()) + 1
    return None


def source_hash(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return "sha256:" + h.hexdigest()


def unity(label, family, variant, spec, out, srcs, hashed=None):
    names = entries(spec)
    lines = ["/* Unity translation unit of %s, variant %s; written by bazel/write_unity.py. */" % (label, variant)]
    if hashed:
        lines.append('#define KL_SOURCE_HASH "%s"' % source_hash(hashed))
    lines += [
        "#define KL_VARIANT_%s 1" % variant,
        # The kernels' signatures are checked after their definitions,
        # parameter by parameter (docs/ARG_ORDER.md), not by declarations.
        "#define KL_SIGNATURE_CHECKS_AT_END 1",
        '#include "klaunch/%s.cuh"' % family,
    ]
    found = set()
    for src in srcs:
        lines.append('#include "%s"' % src)
        if names is None:
            continue
        with open(src, encoding="utf-8", errors="replace") as f:
            text = blank_comments_and_strings(f.read())
        checks = []
        for e in names:
            if e in found:
                continue
            line = definition_line(text, e)
            if line is not None:
                found.add(e)
                checks += ['#line %d "%s"' % (line, src), "KL_CHECK_KERNEL(%s);" % e]
        if checks:
            lines += ["#ifndef KL_NO_SIGNATURE_CHECKS"] + checks
            lines += ['#line %d "%s"' % (len(lines) + 2, out), "#endif"]
    missing = [e for e in names or [] if e not in found]
    if names is None or missing:
        lines += [
            "/* Not found in the sources above (%s): every kernel checked here. */" % (", ".join(missing) or "spec unreadable"),
            "#define KL_CHECK_SIGNATURES 1",
            '#include "klaunch/%s.cuh"' % family,
        ]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="a kernel family")
    ap.add_argument("--family", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--source-hash", nargs="+", metavar="FILE", help="define KL_SOURCE_HASH from these files")
    ap.add_argument("srcs", nargs="*")
    a = ap.parse_args(argv)
    unity(a.label, a.family, a.variant, a.spec, a.out, a.srcs, a.source_hash)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
