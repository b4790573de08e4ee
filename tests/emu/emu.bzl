"""Bazel macros of the CPU emulator (tests/emu, docs/EMULATOR.md).

    kl_emulated_family(
        name = "paged_decode_emu",
        family = "paged_decode",            # the spec's family: //specs:<family>_cuh, //specs:<family>.yaml
        srcs = glob(["paged_decode/*.cu"]), # the kernel sources, as kl_fatbin takes them
        hdrs = glob(["paged_decode/*.cuh", "common/*.cuh"]),
        variants = ["gqa4_d128", "gqa8_d128"],
    )

(kernels/BUILD calls kl_emulated_families with kl_fatbins' dict of families.)

makes one library per variant, :<name>_<variant>, and :<name> with all of
them: the family's kernels compiled from their own sources for the
emulator (one unity translation unit per variant, tests/emu/unity.py, with
-fsanitize=thread so every access reaches the emulator's checks),
each registering its image for kl_emu_image(family, variant).

    kl_emulated_test(
        name = "paged_decode_emulated_test",
        srcs = ["paged_decode_emulated_test.cc"],
        families = ["//kernels:paged_decode_emu"],
    )

is a cc_test linked statically with the emulator, the emulated backend,
klaunch's runtime and the families' generated headers. `kernels` (instead
of families) takes .cu files with no spec: tests of the emulator itself.
"""

_UNITY = Label("//tests/emu:unity")
_KERNEL_RUNTIME = Label("//tests/emu:kernel_runtime")
_TEST_RUNTIME = Label("//tests/emu:emu")

# The kernel translation unit: every access to memory that can escape is a
# call into the emulator (gcc's ThreadSanitizer instrumentation; its
# callbacks are emu.cc's, no sanitizer runtime is linked), no vectorisation
# (a vector access would stand for several of the kernel's own), type
# punning as nvcc allows it.
KL_EMU_KERNEL_COPTS = [
    "-O2",
    "-fsanitize=thread",
    "-fno-tree-vectorize",
    "-fno-strict-aliasing",
    "-Wno-unknown-pragmas",
    "-Wno-attributes",
    # A kernel taking a CUtensorMap (128-byte aligned) by value: gcc notes
    # the x86-64 ABI change of GCC 4.6 for such parameters, which concerns
    # no code here (kernels are called from the emulator's own unpacking).
    "-Wno-psabi",
]

def _unity(name, family, variant, spec, srcs, arch, entries = None):
    out = "%s_emu.cc" % name
    args = ["--family", family, "--arch", str(arch), "--out", "$@"]
    if variant:
        args += ["--variant", variant]
    if spec:
        args += ["--spec", "$(location %s)" % spec]
    if entries:
        args += ["--entries", ",".join(entries)]
    native.genrule(
        name = name + "_unity",
        srcs = srcs + ([spec] if spec else []),
        outs = [out],
        tools = [_UNITY],
        cmd = "$(location %s) %s %s" % (_UNITY, " ".join(args), " ".join(["$(location %s)" % s for s in srcs])),
        message = "Writing the emulated unity file of %s" % name,
    )
    return out

def kl_emulated_family(name, family, srcs, hdrs = [], variants = [], arch = 900, deps = [], visibility = None):
    spec = "//specs:%s.yaml" % family
    libs = []
    for v in variants:
        lib = "%s_%s" % (name, v)
        unity = _unity(lib, family, v, spec, srcs, arch)
        native.cc_library(
            name = lib,
            testonly = True,
            srcs = [unity],
            hdrs = srcs + hdrs,
            copts = KL_EMU_KERNEL_COPTS,
            deps = ["//specs:%s_cuh" % family, _KERNEL_RUNTIME] + deps,
            alwayslink = True,
            linkstatic = True,
            visibility = visibility,
        )
        libs.append(":" + lib)
    native.cc_library(
        name = name,
        testonly = True,
        deps = libs,
        linkstatic = True,
        visibility = visibility,
    )

def kl_emulated_families(families, hdrs = [], visibility = None):
    """kl_emulated_family <F>_emu for each family F of `families` ({F:
    [variants]}, kl_fatbins' dict) over F/*.cu, F/*.cuh and `hdrs`."""
    for family in sorted(families):
        kl_emulated_family(
            name = family + "_emu",
            family = family,
            srcs = native.glob([family + "/*.cu"], allow_empty = True),
            hdrs = hdrs + native.glob([family + "/*.cuh"], allow_empty = True),
            variants = families[family],
            visibility = visibility,
        )

def kl_emulated_kernels(name, srcs, entries, hdrs = [], arch = 900, deps = [], visibility = None):
    """Kernels without a spec (the emulator's own tests): entries are their extern "C" names."""
    unity = _unity(name, name, "", None, srcs, arch, entries = entries)
    native.cc_library(
        name = name,
        testonly = True,
        srcs = [unity],
        hdrs = srcs + hdrs,
        copts = KL_EMU_KERNEL_COPTS,
        deps = [_KERNEL_RUNTIME] + deps,
        alwayslink = True,
        linkstatic = True,
        visibility = visibility,
    )

def kl_emulated_test(name, srcs, families = [], kernels = [], deps = [], size = "medium", copts = [], **kwargs):
    # The sources, for //tests/emu:coverage_test (every launcher called by some emulated test).
    native.filegroup(name = name + "_srcs", srcs = srcs, testonly = True, visibility = ["//visibility:public"])
    native.cc_test(
        name = name,
        srcs = srcs,
        size = size,
        copts = copts,
        # One executable: the emulator finds the kernels' shared-memory
        # section through symbols the linker defines in it.
        linkstatic = True,
        deps = families + kernels + deps + [_TEST_RUNTIME, "@gtest//:gtest_main"],
        **kwargs
    )
