"""kl_python_family: a family's Python launchers, importable from Python targets.

    kl_python_families(families = {"paged_decode": [...variants], ...})   # kernels/BUILD

or one family at a time:

    kl_python_family(name = "paged_decode")

next to the family's kl_fatbin. For family F it makes, in one folder
(python/ of this package, so the module finds its library beside it):
  python/klaunch_F.py         the module kl_family generated from the spec
  python/libklaunch_F.so      its library (klaunch/python_abi.h): the
                              generated klaunch_F.c with the fatbins of
                              :F_embed embedded (-DKL_PYTHON_EMBED_FATBINS)
  :F_python                   py_library of both, depending on //python:klaunch
                              (the runtime package), so `import klaunch_F` works
  :F_python_library           the library alone
and kl_python_families adds :python_families, every family's :F_python.

The headers and the module come from kl_family (`spec_package`, default
//specs: :F_headers, :F_python_sources); the fatbins from :F_embed of this
package (kl_fatbin's). Without a CUDA toolkit the embedded fatbins are empty
and load() looks for fatbin files instead (docs/PYTHON.md).
"""

_RUNTIME = Label("//python:klaunch")

def kl_python_family(name, spec_package = "//specs", embed = None, visibility = None):
    """See the module docstring. `embed`: the fatbins' cc_library (default :<name>_embed)."""
    module = "python/klaunch_%s.py" % name
    library = "python/libklaunch_%s.so" % name
    sources = "%s:%s_python_sources" % (spec_package, name)
    native.genrule(
        name = name + "_python_module",
        srcs = [sources],
        outs = [module],
        cmd = "for f in $(SRCS); do case $$f in *.py) cp $$f $@ ;; esac; done",
        message = "Copying the Python launchers of %s" % name,
        visibility = ["//visibility:private"],
    )
    native.genrule(
        name = name + "_python_c",
        srcs = [sources],
        outs = ["python/klaunch_%s_library.c" % name],
        cmd = "for f in $(SRCS); do case $$f in *.c) cp $$f $@ ;; esac; done",
        visibility = ["//visibility:private"],
    )
    native.cc_binary(
        name = library,
        srcs = [":" + name + "_python_c"],
        # Only the kl__py_* and kl__X_py entry points are exported: two
        # families' libraries in one process keep their runtimes apart.
        copts = ["-fvisibility=hidden", "-DKL_PYTHON_EMBED_FATBINS"],
        linkopts = ["-ldl"],
        linkshared = 1,
        deps = [
            "%s:%s_headers" % (spec_package, name),
            embed or (":%s_embed" % name),
        ],
        visibility = visibility,
    )
    native.filegroup(
        name = name + "_python_library",
        srcs = [":" + library],
        visibility = visibility,
    )
    native.py_library(
        name = name + "_python",
        srcs = [":" + module],
        data = [":" + library],
        imports = ["python"],
        srcs_version = "PY3",
        deps = [_RUNTIME],
        visibility = visibility,
    )

def kl_python_families(families, spec_package = "//specs", visibility = None):
    """kl_python_family for every family of kl_fatbins' `families` dict, and
    :python_families, a py_library of all of them."""
    for family in families:
        kl_python_family(name = family, spec_package = spec_package, visibility = visibility)
    native.py_library(
        name = "python_families",
        deps = [":%s_python" % f for f in families],
        visibility = visibility,
    )
