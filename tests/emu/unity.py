#!/usr/bin/env python3
"""Writes the translation unit that compiles a kernel family's sources for
the CPU emulator (tests/emu/emu.bzl runs it; docs/EMULATOR.md).

    unity.py --family F --variant V --spec specs/F.yaml --out F_V_emu.cc SRC...
    unity.py --family F --entries a,b --out x.cc SRC...   (kernels without a spec)

Like bazel/cuda.bzl's unity file it defines KL_VARIANT_<V>, includes the
family's generated .cuh, every source, and the .cuh again for the signature
checks. Around that it includes the emulator's prelude first, wraps the
family in namespace kl_emu_<F>_<V> (so two variants link into one test
binary without sharing inline functions), renames every extern "C" kernel
and kl__module_info with a __<V> suffix, and ends with the image the
emulated backend loads: the family's metadata text and one entry per kernel
(its name, a caller that unpacks the argument bytes into the kernel's own
parameter types, their layout).
"""
import argparse
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.stderr.write("unity.py: PyYAML is missing; install python3-yaml (./bazelw installs it)\n")
    sys.exit(1)


def entries_of(spec_path):
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    out = []
    for launcher in spec.get("launchers", []):
        out.append(launcher.get("entry", launcher["name"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--variant", default="")
    ap.add_argument("--spec")
    ap.add_argument("--entries", default="")
    ap.add_argument("--arch", default="900")
    ap.add_argument("--out", required=True)
    ap.add_argument("srcs", nargs="+")
    a = ap.parse_args()

    entries = entries_of(a.spec) if a.spec else [e for e in a.entries.split(",") if e]
    ident = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
    for name in [a.family, a.variant or "x"] + entries:
        if not ident.match(name):
            sys.stderr.write("unity.py: '%s' is not a C identifier\n" % name)
            return 1
    tag = "%s_%s" % (a.family, a.variant) if a.variant else a.family
    suffix = "__" + (a.variant or a.family)
    ns = "kl_emu_" + tag

    lines = [
        "/* Emulated unity translation unit of %s (variant %s); written by tests/emu/unity.py. */"
        % (a.family, a.variant or "-"),
        "#define KL_EMU_ARCH %s" % a.arch,
        '#include "tests/emu/kernel_prelude.h"',
        '#include "tests/emu/kernel_table.h"',
    ]
    if a.variant:
        lines += ["#define KL_VARIANT_%s 1" % a.variant, "#define KL_SIGNATURE_CHECKS_AT_END 1"]
    lines += ["#define %s %s%s" % (e, e, suffix) for e in entries]
    lines += ["#define kl__module_info kl__module_info__%s" % tag]
    lines += ["namespace %s {" % ns]
    if a.spec:
        lines += ['#include "klaunch/%s.cuh"' % a.family]
    lines += ['#include "%s"' % s for s in a.srcs]
    if a.spec:
        lines += ["#define KL_CHECK_SIGNATURES 1", '#include "klaunch/%s.cuh"' % a.family]
    lines += ["static const ::emu::KernelEntry kl__emu_kernels[] = {"]
    lines += ['    KL_EMU_KERNEL(%s, "%s"),' % (e, e) for e in entries]
    if not entries:
        lines += ["    {nullptr, nullptr, 0, nullptr},"]
    lines += ["};", "}  // namespace %s" % ns]
    info = "%s::kl__module_info__%s" % (ns, tag) if a.spec else '"klaunch-module 1\\nfamily %s\\n"' % a.family
    lines += [
        "extern \"C\" const ::emu::Image kl_emu_image_%s = {" % tag,
        '    "klaunch-emulated-image 1", "%s", "%s", %s, %s::kl__emu_kernels, %d};'
        % (a.family, a.variant, info, ns, len(entries)),
        "static const ::emu::ImageRegistration kl__emu_registration(&kl_emu_image_%s);" % tag,
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
