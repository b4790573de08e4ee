"""kl_sass_test: a test that reads kernels' machine code (cuobjdump -sass).

    kl_sass_test(
        name = "mla_prefill_wgmma_sass_test",
        cubins = ["//kernels:mla_prefill_cubins"],   # any cubins; filtered by `suffix`
        suffix = ".sm_90a.cubin",
        kernels = ["mla_absorbed_attn_wgmma", "grouped_gemm_wgmma"],
        require_in_loop = ["HGMMA"],                   # default
        forbid = ["LDL", "STL"],                       # default: no local memory
        no_stack = True,                               # default: no stack frame (cuobjdump -res-usage)
        expect_checks_to_fail = False,                        # True: the checks must fail
    )

For every cubin of `cubins` whose name ends in `suffix` and every kernel,
tools/sass/sass_check.py fails the test when an opcode of
`require_in_loop` is not inside a loop body of the kernel's SASS (between a
backward branch and its target), when an opcode of `forbid` appears, when
(no_stack) cuobjdump -res-usage gives it a stack frame or local memory, or
when the kernel is missing. cuobjdump is @kl_sass_tools//:cuobjdump
(bazel/sass_tools.bzl; ./bazelw installs it); where it is missing the test
fails saying so. Without a CUDA toolkit the cubins are empty and the test
fails too: it exists to prove what the machine code holds.
"""

def _sass_test_impl(ctx):
    cubins = [f for f in ctx.files.cubins if f.basename.endswith(ctx.attr.suffix)]
    if not cubins:
        fail("kl_sass_test %s: no cubin of %s ends in %s" % (ctx.label, [str(c.label) for c in ctx.attr.cubins], ctx.attr.suffix))
    args = ["--cuobjdump", ctx.file._cuobjdump.short_path]
    for k in ctx.attr.kernels:
        args += ["--kernel", k]
    for op in ctx.attr.require_in_loop:
        args += ["--require-in-loop", op]
    for op in ctx.attr.require:
        args += ["--require", op]
    for op in ctx.attr.forbid:
        args += ["--forbid", op]
    if ctx.attr.no_stack:
        args.append("--no-stack")
    args += [f.short_path for f in cubins]
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    run = "python3 %s %s" % (ctx.file._checker.short_path, " ".join(["'%s'" % a for a in args]))
    if ctx.attr.expect_checks_to_fail:
        # The checker must find what it is told to miss (exit 1), not break (exit 2).
        body = "%s; rc=$?\nif [ $rc = 1 ]; then echo 'kl_sass_test: the checks failed, as this test expects'; exit 0; fi\necho \"kl_sass_test: expected the checks to fail (exit 1), got exit $rc\"; exit 1\n" % run
    else:
        body = "exec %s\n" % run
    ctx.actions.write(
        script,
        "#!/bin/sh\n# Written by bazel/sass.bzl for %s.\n%s" % (ctx.label, body),
        is_executable = True,
    )
    runfiles = ctx.runfiles(files = cubins + [ctx.file._checker, ctx.file._cuobjdump])
    return [DefaultInfo(executable = script, runfiles = runfiles)]

kl_sass_test = rule(
    implementation = _sass_test_impl,
    test = True,
    attrs = {
        "cubins": attr.label_list(allow_files = [".cubin"], mandatory = True),
        "suffix": attr.string(default = ".sm_90a.cubin"),
        "kernels": attr.string_list(mandatory = True, allow_empty = False),
        "require_in_loop": attr.string_list(default = ["HGMMA"]),
        "require": attr.string_list(default = [], doc = "Opcodes that must appear somewhere in each kernel."),
        "forbid": attr.string_list(default = ["LDL", "STL"]),
        "no_stack": attr.bool(default = True, doc = "Fail on a stack frame or local memory (cuobjdump -res-usage)."),
        "expect_checks_to_fail": attr.bool(default = False, doc = "The checks must fail (exit 1): a test of the checker on code that lacks what it requires."),
        "_checker": attr.label(default = Label("//tools/sass:sass_check.py"), allow_single_file = True),
        "_cuobjdump": attr.label(default = Label("@kl_sass_tools//:cuobjdump"), allow_single_file = True),
    },
    doc = "See the module docstring.",
)
