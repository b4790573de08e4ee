"""kl_fatbin: a family's kernels compiled into one fatbin per variant.

    kl_fatbin(
        name = "paged_decode",               # the family (or set family = ...)
        srcs = glob(["paged_decode/*.cu"]),  # one unity translation unit per variant
        hdrs = ["//specs:paged_decode_cuh"], # cc_library targets or files
        variants = ["gqa4_d128", "gqa8_d128"],
        copts = [],                          # extra nvcc flags
    )

For each variant V it writes `<name>_V.cu`:

    #define KL_VARIANT_V 1
    #define KL_SIGNATURE_CHECKS_AT_END 1
    #include "klaunch/<family>.cuh"     (the GENERATED header of kl_family)
    #include "<each src, in order>"
    #define KL_CHECK_SIGNATURES 1
    #include "klaunch/<family>.cuh"     (again: each kernel's parameters
                                         checked against the spec, see
                                         docs/ARG_ORDER.md)

and compiles it once per target architecture of --//bazel:cuda_archs
(default sm_80,sm_90,sm_100,sm_120,compute_120):
  sm_N[a|f]       nvcc -cubin -gencode arch=compute_N,code=sm_N  -> <name>_V.sm_N.cubin
  compute_N[a|f]  nvcc -ptx   -gencode arch=compute_N,code=compute_N -> <name>_V.compute_N.ptx
An sm_N whose compute_N is in the list too is assembled from that PTX (nvcc
on the .ptx runs only ptxas), so no translation unit goes through the front
end twice. `fatbinary` then combines them into `<name>_V.fatbin`.

Every compile gets -O3 -std=c++17, -I for the workspace root and for the
include directories of `hdrs`, and -DKL_SOURCE_HASH="sha256:<hex>": the
SHA-256 of the concatenated contents of the files listed after the first
line of `<name>.source_hash` (srcs in order, then every header of `hdrs`
sorted by path), so `cat <those files> | sha256sum` reproduces it.

Targets made by the macro:
  :<name>          the fatbins (one label per file: :<name>_V.fatbin)
  :<name>_cubins   the per-architecture cubins (output group "cubins";
                   "ptx", "manifest" and "source_hash" groups exist too)
  :<name>_embed    cc_library; "<name>_fatbins.h" (also reachable as
                   "<package>/<name>_fatbins.h") declares, extern "C",
                       extern const unsigned char kl_fatbin_<name>_V[];
                       extern const size_t kl_fatbin_<name>_V_size;
                   with the bytes 64-byte aligned in a generated .c.
  :<name>_layout_test     layer 2 of docs/ARG_ORDER.md: every cubin against
                          the spec (layout_test = False for fixtures built
                          wrong on purpose)
  :<name>_cuobjdump_test  the cubin reader against `cuobjdump -elf`, live,
                          on every cubin (@kl_sass_tools//:cuobjdump)

Without a CUDA toolkit (@local_cuda//:defs.bzl CUDA_AVAILABLE = False) the
fatbins, cubins and PTX are empty files and the embedded sizes are 0; loading
one gives KL_ERROR_INVALID_IMAGE.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "CUDA_PATH")

CudaArchsInfo = provider(
    doc = "The value of --//bazel:cuda_archs, checked and without duplicates.",
    fields = {"archs": "list of strings such as sm_90a or compute_120"},
)

def _parse_arch(entry):
    """"sm_90a" -> struct(kind = "elf", sm = "90a"); None when malformed."""
    for prefix, kind in [("sm_", "elf"), ("compute_", "ptx")]:
        if not entry.startswith(prefix):
            continue
        sm = entry[len(prefix):]
        digits = sm[:-1] if sm and sm[-1] in "af" else sm
        if len(digits) < 2 or not digits.isdigit():
            return None
        return struct(entry = entry, kind = kind, sm = sm)
    return None

def _cuda_archs_impl(ctx):
    archs = []
    for entry in ctx.build_setting_value:
        entry = entry.strip()
        if not entry:
            continue
        if _parse_arch(entry) == None:
            fail("--//bazel:cuda_archs: \"%s\" is not sm_<N> or compute_<N> (optionally with an a or f suffix), e.g. sm_90a or compute_120" % entry)
        if entry not in archs:
            archs.append(entry)
    if not archs:
        fail("--//bazel:cuda_archs is empty; give at least one target, e.g. sm_90")
    return CudaArchsInfo(archs = archs)

cuda_archs_flag = rule(
    implementation = _cuda_archs_impl,
    build_setting = config.string_list(flag = True),
    doc = "The target architectures of every kl_fatbin.",
)

def _sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

def _outputs(name, variants):
    return {"fatbin_" + v: "%s_%s.fatbin" % (name, v) for v in variants}

def _short_path(f):
    return f.short_path

def _headers_and_includes(ctx):
    """All header files of `hdrs` (depset) and the include directories they need."""
    transitive = []
    direct = []
    includes = ["."]
    for target in ctx.attr.hdrs:
        if CcInfo in target:
            cc = target[CcInfo].compilation_context
            transitive.append(cc.headers)
            for d in cc.quote_includes.to_list() + cc.includes.to_list() + cc.system_includes.to_list():
                if d not in includes:
                    includes.append(d)
        direct.extend(target[DefaultInfo].files.to_list())
    return depset(direct, transitive = transitive), includes

def _kl_fatbin_impl(ctx):
    archs = [_parse_arch(a) for a in ctx.attr._archs[CudaArchsInfo].archs]
    family = ctx.attr.family or ctx.label.name
    name = ctx.label.name
    headers, includes = _headers_and_includes(ctx)

    # One hash per target, read by every compile of it.
    # _virtual_includes/ holds copies of headers that are in the list anyway.
    hashed = ctx.files.srcs + sorted(
        [f for f in headers.to_list() if "/_virtual_includes/" not in f.path],
        key = _short_path,
    )
    hash_file = ctx.actions.declare_file(name + ".source_hash")
    ctx.actions.run_shell(
        outputs = [hash_file],
        inputs = hashed,
        command = "set -eu; out=$1; shift; " +
                  "h=$(cat \"$@\" </dev/null | sha256sum | cut -d' ' -f1); " +
                  "{ echo \"sha256:$h\"; printf '%s\\n' \"$@\"; } > \"$out\"",
        arguments = [hash_file.path] + [f.path for f in hashed],
        mnemonic = "KlSourceHash",
        progress_message = "Hashing the kernel sources of %s" % ctx.label,
    )

    nvcc_flags = ["-O3", "-std=c++17"] + ["-I" + d for d in includes] + ctx.attr.copts
    # nvcc finds cicc, ptxas and nvcc.profile beside the path it was run by,
    # so the toolkit runs from its own directory; these inputs only make a
    # changed toolkit rebuild what it compiled.
    tools = ctx.files._nvcc + ctx.files._fatbinary
    compile_inputs = depset(ctx.files.srcs + [hash_file] + ctx.files._cuda_version, transitive = [headers])
    have_ptx = [a.sm for a in archs if a.kind == "ptx"]

    fatbins = []
    cubins = []
    ptxs = []
    manifest = []
    for v in ctx.attr.variants:
        fatbin = getattr(ctx.outputs, "fatbin_" + v)
        fatbins.append(fatbin)
        unity = ctx.actions.declare_file("%s_%s.cu" % (name, v))
        # Written by an action: it reads the sources to put a #line marker
        # at each kernel's check (bazel/write_unity.py says what it writes).
        ctx.actions.run(
            outputs = [unity],
            inputs = ctx.files.srcs + ctx.files.spec,
            executable = ctx.executable._write_unity,
            arguments = [
                "--label",
                str(ctx.label),
                "--family",
                family,
                "--variant",
                v,
                "--spec",
                ctx.file.spec.path,
                "--out",
                unity.path,
            ] + [f.path for f in ctx.files.srcs],
            mnemonic = "KlUnity",
            progress_message = "Writing the unity file of %s variant %s" % (ctx.label, v),
            use_default_shell_env = True,
        )

        images = {}  # arch entry -> File
        for a in archs:
            suffix = "cubin" if a.kind == "elf" else "ptx"
            images[a.entry] = ctx.actions.declare_file("%s_%s.%s.%s" % (name, v, a.entry, suffix))
        # PTX first: an sm_N cubin reuses compute_N's PTX when there is one.
        for a in [a for a in archs if a.kind == "ptx"] + [a for a in archs if a.kind == "elf"]:
            out = images[a.entry]
            if a.kind == "ptx":
                ptxs.append(out)
            else:
                cubins.append(out)
            if not CUDA_AVAILABLE:
                ctx.actions.write(out, "")
                continue
            gencode = "arch=compute_%s,code=%s" % (a.sm, a.entry)
            if a.kind == "elf" and a.sm in have_ptx:
                src = images["compute_" + a.sm]
                inputs = depset([src, hash_file] + ctx.files._cuda_version)
            else:
                src = unity
                inputs = depset([unity], transitive = [compile_inputs])
            ctx.actions.run_shell(
                outputs = [out],
                inputs = inputs,
                tools = tools,
                # The hash is read here, not at analysis: it depends on file contents.
                command = "set -eu; hash=$(head -n 1 %s); exec %s %s -gencode %s %s -DKL_SOURCE_HASH=\\\"$hash\\\" %s -o %s" % (
                    _sh_quote(hash_file.path),
                    _sh_quote(CUDA_PATH + "/bin/nvcc"),
                    "-cubin" if a.kind == "elf" else "-ptx",
                    gencode,
                    " ".join([_sh_quote(f) for f in nvcc_flags]),
                    _sh_quote(src.path),
                    _sh_quote(out.path),
                ),
                mnemonic = "KlNvcc",
                progress_message = "Compiling %s variant %s for %s%s" % (
                    ctx.label,
                    v,
                    a.entry,
                    " (from its PTX)" if src != unity else "",
                ),
                use_default_shell_env = True,
            )

        if CUDA_AVAILABLE:
            args = ["--create=" + fatbin.path, "-64"]
            for a in archs:
                args.append("--image3=kind=%s,sm=%s,file=%s" % (a.kind, a.sm, images[a.entry].path))
            ctx.actions.run(
                outputs = [fatbin],
                inputs = [images[a.entry] for a in archs],
                executable = CUDA_PATH + "/bin/fatbinary",
                tools = tools,
                arguments = args,
                mnemonic = "KlFatbinary",
                progress_message = "Combining %s variant %s into a fatbin" % (ctx.label, v),
                use_default_shell_env = True,
            )
        else:
            ctx.actions.write(fatbin, "")
        manifest.append("\t".join([family, v, fatbin.short_path, ",".join([a.entry for a in archs]) if CUDA_AVAILABLE else "none (no CUDA toolkit)"]))

    manifest_file = ctx.actions.declare_file(name + ".fatbins.tsv")
    ctx.actions.write(manifest_file, "\n".join(manifest) + "\n")

    # The embedding: a header and a C file holding every variant's bytes.
    embed_h = ctx.actions.declare_file(name + "_fatbins.h")
    embed_c = ctx.actions.declare_file(name + "_fatbins.c")
    ctx.actions.run(
        outputs = [embed_h, embed_c],
        inputs = fatbins,
        executable = ctx.executable._embed,
        arguments = [
            "--symbol-prefix",
            "kl_fatbin_" + name,
            "--header",
            embed_h.path,
            "--header-include",
            embed_h.short_path,
            "--source",
            embed_c.path,
            "--label",
            str(ctx.label),
        ] + ["%s=%s" % (v, f.path) for v, f in zip(ctx.attr.variants, fatbins)],
        mnemonic = "KlEmbedFatbin",
        progress_message = "Embedding the fatbins of %s" % ctx.label,
        use_default_shell_env = True,
    )

    return [
        DefaultInfo(files = depset(fatbins), runfiles = ctx.runfiles(files = fatbins)),
        OutputGroupInfo(
            cubins = depset(cubins),
            ptx = depset(ptxs),
            embed_h = depset([embed_h]),
            embed_c = depset([embed_c]),
            manifest = depset([manifest_file]),
            source_hash = depset([hash_file]),
        ),
    ]

_kl_fatbin = rule(
    implementation = _kl_fatbin_impl,
    outputs = _outputs,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], doc = "Kernel sources, #included in this order."),
        "hdrs": attr.label_list(allow_files = True, doc = "Headers: cc_library targets (their include dirs are used) or files."),
        "variants": attr.string_list(mandatory = True, allow_empty = False),
        "copts": attr.string_list(doc = "Extra nvcc flags for every compile."),
        "family": attr.string(doc = "The kl_family whose klaunch/<family>.cuh leads each unity file; defaults to name."),
        "spec": attr.label(allow_single_file = [".yaml"], mandatory = True, doc = "The family's spec: its kernels are checked where the sources define them."),
        "_write_unity": attr.label(default = Label("//bazel:write_unity"), executable = True, cfg = "host"),
        "_archs": attr.label(default = Label("//bazel:cuda_archs"), providers = [CudaArchsInfo]),
        "_nvcc": attr.label(default = Label("@local_cuda//:nvcc"), allow_files = True, cfg = "host"),
        "_fatbinary": attr.label(default = Label("@local_cuda//:fatbinary"), allow_files = True, cfg = "host"),
        "_cuda_version": attr.label(default = Label("@local_cuda//:version"), allow_files = True),
        "_embed": attr.label(default = Label("//bazel:embed_fatbins"), executable = True, cfg = "host"),
    },
)

_LAYOUT_MAIN = Label("//bazel:layout_test.py")
_CUOBJDUMP_MAIN = Label("//bazel:cuobjdump_test.py")
_CUOBJDUMP = Label("@kl_sass_tools//:cuobjdump")

def kl_fatbin(name, variants, srcs = None, hdrs = None, spec = None, copts = [], family = None, layout_test = True, visibility = None, **kwargs):
    """See the module docstring. Defaults, for a family F (= family or name):
    srcs glob(["F/*.cu"]), hdrs ["//specs:F_cuh"] + glob(["F/*.cuh"]),
    spec "//specs:F_spec" (what kl_family/kl_families make)."""
    family = family or name
    if srcs == None:
        srcs = native.glob([family + "/*.cu"])
    if hdrs == None:
        hdrs = ["//specs:%s_cuh" % family] + native.glob([family + "/*.cuh"], allow_empty = True)
    if spec == None:
        spec = "//specs:%s_spec" % family
    _kl_fatbin(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        spec = spec,
        variants = variants,
        copts = copts,
        family = family,
        visibility = visibility,
        **kwargs
    )
    native.filegroup(
        name = name + "_cubins",
        srcs = [":" + name],
        output_group = "cubins",
        visibility = visibility,
    )
    native.filegroup(name = name + "_manifest", srcs = [":" + name], output_group = "manifest", visibility = visibility)
    native.filegroup(name = name + "_embed_h", srcs = [":" + name], output_group = "embed_h", visibility = ["//visibility:private"])
    native.filegroup(name = name + "_embed_c", srcs = [":" + name], output_group = "embed_c", visibility = ["//visibility:private"])
    native.cc_library(
        name = name + "_embed",
        srcs = [":" + name + "_embed_c"],
        hdrs = [":" + name + "_embed_h"],
        # "<name>_fatbins.h" as well as "<package>/<name>_fatbins.h".
        includes = ["."],
        visibility = visibility,
    )
    if layout_test:
        # Layer 2 of the argument-order checks (docs/ARG_ORDER.md): every
        # cubin of every variant and target against the spec.
        native.py_test(
            name = name + "_layout_test",
            size = "small",
            srcs = [_LAYOUT_MAIN],
            main = _LAYOUT_MAIN,
            args = ["--spec", "$(location %s)" % spec, "$(locations :%s_cubins)" % name],
            data = [spec, ":%s_cubins" % name],
            python_version = "PY3",
            deps = [Label("//tools:junit_unittest"), Label("//tools/nvinfo:layout_check_lib")],
            visibility = visibility,
        )

    # The cubin reader that layer 2 trusts, against `cuobjdump -elf` run live
    # on each of these cubins (right or wrong ones alike): the same kernels,
    # parameter records and parameter buffer size. cuobjdump is
    # @kl_sass_tools' (./bazelw installs it from PyPI); missing, the test fails.
    native.py_test(
        name = name + "_cuobjdump_test",
        size = "small",
        srcs = [_CUOBJDUMP_MAIN],
        main = _CUOBJDUMP_MAIN,
        args = ["--cuobjdump", "$(location %s)" % _CUOBJDUMP, "--cubins", "$(locations :%s_cubins)" % name],
        data = [_CUOBJDUMP, ":%s_cubins" % name],
        python_version = "PY3",
        deps = [Label("//tools:junit_unittest"), Label("//tools/nvinfo:nvinfo_lib")],
        visibility = visibility,
    )

def kl_fatbins(families, hdrs = [], copts = {}, visibility = None):
    """kl_fatbin for each family F of `families` ({F: [variants]}), with the
    defaults above plus `hdrs` (headers every family shares) and copts[F];
    and :manifests and :cubins, the filegroups of all of them (what
    //:generate and the cuobjdump cross-check read)."""
    for family in sorted(families):
        kl_fatbin(
            name = family,
            variants = families[family],
            hdrs = ["//specs:%s_cuh" % family] + hdrs + native.glob([family + "/*.cuh"], allow_empty = True),
            copts = copts.get(family, []),
            visibility = visibility,
        )
    native.filegroup(name = "manifests", srcs = [":%s_manifest" % f for f in sorted(families)], visibility = visibility)
    native.filegroup(name = "fatbins", srcs = [":" + f for f in sorted(families)], visibility = visibility)
    native.filegroup(name = "cubins", srcs = [":%s_cubins" % f for f in sorted(families)], visibility = visibility)
