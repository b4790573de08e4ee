"""Names that reach C: each is checked against what it will meet there.

A spec's names reach the output raw (parameters, variant constants,
kernel entries) or prefixed (launchers become kl_<name>, kl_<name>_get,
..., families become file names and macros). header_name_problem() checks
a raw name against the macros, declarations and built-in variables of the
headers the output includes (header_names.txt, kept honest by
tests/codegen/test_names.py against the compilers) and the prefixes CUDA
owns. check_run() lists the files the run writes and the names the build
makes beside them (fatbin files and symbols), for every family, and
reports collisions with the runtime's own names (read from
include/klaunch/*.h, so the list cannot drift), with each other (file
names compared without case) and the runtime's limits (KL_MAX_CONSTS, the
module metadata's field sizes). What the rendered headers declare is
collisions.py's, read from them.
"""

import os
import re

from . import schema


class RuntimeHeadersError(Exception):
    """The runtime headers are missing or no longer say what is read here."""


# ---- the headers the output includes ---------------------------------------------


def _read_header_names():
    """({macro}, {declared function, type, namespace or variable}, {CUDA
    built-in variable}) from header_names.txt."""
    sections = {"# macros": set(), "# declarations": set(), "# built-in variables": set()}
    section = None
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "header_names.txt")
    with open(path) as f:
        for line in f:
            word = line.strip()
            if word in sections:
                section = sections[word]
            elif word and not word.startswith("#") and section is not None:
                section.add(word)
    return tuple(frozenset(sections[k]) for k in ("# macros", "# declarations", "# built-in variables"))


HEADER_MACROS, HEADER_DECLARATIONS, CUDA_BUILTINS = _read_header_names()


def header_name_problem(name, role):
    """(message, hint) when a name is the headers' or CUDA's, else None."""
    for pattern, owner in schema.RESERVED_PATTERNS:
        if pattern.match(name):
            return ("'%s' is reserved by %s" % (name, owner), "rename it")
    if name in HEADER_MACROS:
        return ("'%s' is a macro of the C or CUDA headers the generated files include" % name,
                "it would be replaced wherever the name is used; rename it")
    if name in CUDA_BUILTINS:
        return ("'%s' is one of CUDA's built-in variables" % name,
                "a kernel parameter, kernel or macro of that name would hide or replace it; rename it")
    if role in ("constant", "entry") and name in HEADER_DECLARATIONS:
        return ("'%s' is declared by the C or CUDA headers the kernel-side header includes" % name,
                "a %s of that name would clash with it; rename it" % ("macro" if role == "constant" else "kernel"))
    return None


# ---- the runtime ----------------------------------------------------------------------


class Runtime:
    """What include/klaunch/*.h declares and the limits klaunch.h sets."""

    def __init__(self, directory):
        self.directory = directory
        self.headers = sorted(f for f in os.listdir(directory) if f.endswith(".h"))
        self.identifiers = set()
        texts = {}
        for h in self.headers:
            with open(os.path.join(directory, h), encoding="utf-8", errors="replace") as f:
                texts[h] = _code_only(f.read())
            self.identifiers.update(_RUNTIME_NAME.findall(texts[h]))
        core = texts.get("klaunch.h")
        if core is None:
            raise RuntimeHeadersError("%s has no klaunch.h" % directory)
        self.limits = {}
        for key, pattern in _LIMITS.items():
            m = re.search(pattern, core)
            if not m:
                raise RuntimeHeadersError("cannot read %s from %s" % (key, os.path.join(directory, "klaunch.h")))
            self.limits[key] = int(m.group(1))


# Generated names start with kl_, kl__, KL_, KL__ or KLAUNCH_: those of the
# runtime that could meet them.
_RUNTIME_NAME = re.compile(r"\b(?:kl_|KL_|KLAUNCH_)[A-Za-z0-9_]*")
_LIMITS = {
    "KL_MAX_CONSTS": r"#\s*define\s+KL_MAX_CONSTS\s+(\d+)",
    "KL_MODULE_INFO_BYTES": r"#\s*define\s+KL_MODULE_INFO_BYTES\s+(\d+)",
    "family": r"\bchar\s+family\s*\[\s*(\d+)\s*\]",
    "variant": r"\bchar\s+variant\s*\[\s*(\d+)\s*\]",
    "const_name": r"\bchar\s+const_names\s*\[\s*KL_MAX_CONSTS\s*\]\s*\[\s*(\d+)\s*\]",
}


def _code_only(text):
    """C text without comments and string or character literals."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', " ", text, flags=re.S)


_RUNTIME = None


def runtime_dir():
    """include/klaunch of the checkout or package the generator runs from."""
    here = os.path.dirname(os.path.abspath(__file__))
    # A checkout's include/klaunch, or the copy `pip install ./codegen` puts
    # in the package (codegen/setup.py).
    for base in (here, os.path.dirname(os.path.realpath(__file__))):
        for d in (os.path.join(base, os.pardir, os.pardir, "include", "klaunch"), os.path.join(base, "include", "klaunch")):
            if os.path.isfile(os.path.join(d, "klaunch.h")):
                return os.path.normpath(d)
    raise RuntimeHeadersError(
        "cannot find the klaunch runtime headers (include/klaunch/klaunch.h) beside the generator (%s)" % here)


def runtime():
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = Runtime(runtime_dir())
    return _RUNTIME


# ---- what the output declares ---------------------------------------------------------


class Emitted:
    """One name the output declares, and the spec name it comes from."""

    __slots__ = ("name", "space", "spec", "pos", "origin", "what")

    def __init__(self, name, space, spec, pos, origin, what):
        self.name = name
        self.space = space  # "c": file scope of the .h; "file": an output path
        self.spec = spec
        self.pos = pos
        self.origin = origin  # "launcher 'x'", "family 'f'", ...
        self.what = what  # "its kernel lookup", ...


def emitted(spec):
    """The files the spec's outputs are, and the names the build makes
    beside them (bazel/cuda.bzl, cmake/klaunch.cmake); the names the
    generated headers declare are read from them once rendered
    (collisions.py)."""
    out = []
    fam = spec.family
    fam_origin = "family '%s'" % fam
    out.append(Emitted("klaunch/%s.h" % fam, "file", spec, spec.family_pos, fam_origin, "its C header"))
    out.append(Emitted("klaunch/%s.cuh" % fam, "file", spec, spec.family_pos, fam_origin, "its kernel-side header"))
    for v in spec.variants:
        origin = "variant '%s' of family '%s'" % (v.name, fam)
        out.append(Emitted("kl_fatbin_%s_%s" % (fam, v.name), "c", spec, v.pos, origin, "its embedded fatbin (bazel/cuda.bzl)"))
        out.append(Emitted("kl_fatbin_%s_%s_size" % (fam, v.name), "c", spec, v.pos, origin, "its embedded fatbin's size"))
        out.append(Emitted("%s_%s.fatbin" % (fam, v.name), "file", spec, v.pos, origin, "its fatbin file"))
    return out


def check_run(specs, diags):
    """Collisions of the run's emitted names with the runtime's and with
    each other, and the runtime's limits."""
    rt = runtime()
    runtime_files = {("klaunch/" + h).lower(): "klaunch/" + h for h in rt.headers}
    seen = {}  # name (files: lower case) -> Emitted
    reported = set()  # (spec, origin): a variant whose symbol collides has a colliding fatbin file too
    for s in specs:
        _limits(s, rt, diags)
        over_runtime = False  # its guard then collides too: one message is enough
        for e in emitted(s):
            key = e.name.lower() if e.space == "file" else e.name
            if e.space == "file" and key in runtime_files:
                if not over_runtime:
                    diags.error(s.path, e.pos, "%s would write %s over the runtime header %s" % (e.origin, e.name, runtime_files[key]),
                                "rename the family")
                over_runtime = True
                continue
            if over_runtime and e.origin.startswith("family"):
                continue
            if e.space == "c" and e.name in rt.identifiers:
                diags.error(s.path, e.pos, "%s makes %s (%s), a name of the klaunch runtime" % (e.origin, e.name, e.what),
                            "rename it; include/klaunch/*.h declares %s" % e.name)
                continue
            other = seen.get(key)
            if other is None:
                seen[key] = e
                continue
            if other.origin == e.origin and other.spec is not e.spec and e.origin.startswith("launcher"):
                continue  # the same launcher name twice: cross_check says so
            if other.spec is e.spec and other.origin == e.origin:
                continue
            where = "" if other.spec is e.spec else " in %s" % other.spec.path
            if (id(s), e.origin) in reported:
                continue
            reported.add((id(s), e.origin))
            if e.space == "file":
                diags.error(s.path, e.pos, "%s writes %s, which %s%s also writes%s" % (
                    e.origin, e.name, other.origin, where, "" if other.name == e.name else " as %s" % other.name),
                    "file names that differ only in case are one file on some systems; rename one %s" % (
                        "family" if e.origin.startswith("family") else "of them"))
            else:
                diags.error(s.path, e.pos, "%s makes %s (%s), which %s%s also makes (%s)" % (
                    e.origin, e.name, e.what, other.origin, where, other.what), "rename one of them")


def _limits(spec, rt, diags):
    lim = rt.limits
    fam_max = lim["family"] - 1
    if len(spec.family) > fam_max:
        diags.error(spec.path, spec.family_pos, "family name '%s' has %d characters; module metadata holds %d" % (
            spec.family, len(spec.family), fam_max), "the runtime's kl_module.family is char[%d]; shorten it" % lim["family"])
    for v in spec.variants:
        if len(v.name) > lim["variant"] - 1:
            diags.error(spec.path, v.pos, "variant name '%s' has %d characters; module metadata holds %d" % (
                v.name, len(v.name), lim["variant"] - 1), "the runtime's kl_module.variant is char[%d]; shorten it" % lim["variant"])
        if len(v.constants) > lim["KL_MAX_CONSTS"]:
            diags.error(spec.path, v.pos, "variant '%s' has %d constants; a module carries at most %d" % (
                v.name, len(v.constants), lim["KL_MAX_CONSTS"]), "KL_MAX_CONSTS in include/klaunch/klaunch.h is %d" % lim["KL_MAX_CONSTS"])
        for name, _ in v.constants:
            if len(name) > lim["const_name"] - 1:
                diags.error(spec.path, v.const_pos.get(name, v.pos), "constant name '%s' of variant '%s' has %d characters; module metadata holds %d" % (
                    name, v.name, len(name), lim["const_name"] - 1), "shorten it")
