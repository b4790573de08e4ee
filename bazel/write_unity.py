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
    static_assert(0, "klaunch: kernel ...");    (when its own parameter list
                                                 has a spec parameter where the
                                                 spec has another of that type:
                                                 a swap no type check sees)
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
    """{entry: [(name, spec type, line, col)]} of the spec's kernels (the
    kernel parameters of launchers[].entry, default name), in spec order;
    None when the spec cannot be read (the generator reports why)."""
    try:
        import yaml
    except ImportError:
        return None  # (without PyYAML: every kernel checked at the end)
    try:
        with open(spec_path) as f:
            root = yaml.compose(f, Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return None

    def mapping(node):
        if not isinstance(node, yaml.MappingNode):
            return {}
        return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}

    def at(node):
        return node.start_mark.line + 1, node.start_mark.column + 1

    out = {}
    launchers = mapping(root).get("launchers")
    for ln in launchers.value if isinstance(launchers, yaml.SequenceNode) else []:
        f = mapping(ln)
        entry = f.get("entry") or f.get("name")
        if not isinstance(entry, yaml.ScalarNode) or entry.value in out:
            continue
        params = []
        plist = f.get("params")
        for pnode in plist.value if isinstance(plist, yaml.SequenceNode) else []:
            pf = mapping(pnode)
            if "name" in pf and "type" in pf:  # {name: n, type: u32, ...}
                if pf.get("launch_only") is not None and pf["launch_only"].value in ("true", "True", "yes"):
                    continue
                params.append((pf["name"].value, pf["type"].value) + at(pf["name"]))
            elif len(pnode.value) == 1:  # n: u32
                k, v = pnode.value[0]
                params.append((k.value, v.value) + at(k))
        out[entry.value] = params
    return out


def parameter_names(text, start):
    """Names of the parameter list that opens at text[start] == "(", or
    None when it is not a plain list (a macro such as KL_PARAMS_<entry>)."""
    depth, j = 0, start
    while j < len(text):
        if text[j] in "([":
            depth += 1
        elif text[j] in ")]":
            depth -= 1
            if depth == 0:
                break
        j += 1
    inner = text[start + 1:j]
    names, depth, piece = [], 0, ""
    for ch in inner + ",":
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            words = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]|__attribute__\s*\(\(.*?\)\)", " ", piece))
            words = [w for w in words if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")]
            names.append(words[-1] if words else "")
            piece = ""
        else:
            piece += ch
    if names == [""]:
        return []
    if len(names) == 1 and re.fullmatch(r"\s*KL_PARAMS_\w+\s*", inner):
        return None
    return names


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


def definition(text, entry):
    """(line, parameter names or None) of the definition of __global__
    kernel `entry` (line 1-based), or None when the text has none."""
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
            return text.count("\n", 0, m.start()) + 1, parameter_names(text, m.end() - 1)
    return None


def name_problem(entry, names, params, spec):
    """The message when a hand-written parameter list puts a spec parameter
    where the spec has another of the same type (that swap compiles, and
    the launcher's value of one arrives as the other), or None. A list of
    other types fails the type checks instead; other names are left alone."""
    if names is None:
        return None
    spec_type = {p[0]: p[1] for p in params}
    for i, (got, p) in enumerate(zip(names, params)):
        if got != p[0] and spec_type.get(got) == p[1]:
            return ("klaunch: kernel %s, parameter %d is named %s; the spec's parameter %d is %s (%s) [%s:%d:%d]: "
                    "two parameters of one type in another order compile and read each other's values; "
                    "write the list as KL_PARAMS_%s" % (entry, i + 1, got, i + 1, p[0], p[1], spec, p[2], p[3], entry))
    return None


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
            d = definition(text, e)
            if d is None:
                continue
            found.add(e)
            line, params = d
            checks += ['#line %d "%s"' % (line, src), "KL_CHECK_KERNEL(%s);" % e]
            problem = name_problem(e, params, names[e], spec)
            if problem:
                checks += ['#line %d "%s"' % (line, src), "static_assert(0, %s);" % c_string(problem)]
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
