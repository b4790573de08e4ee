"""kl_family: a spec's generated headers, built by the code generator.

    kl_families()                     # in specs/BUILD: one kl_family per *.yaml

or one family at a time:

    kl_family(name = "paged_decode", spec = "paged_decode.yaml")

kl_family runs //codegen:generator on the spec and makes
  :<name>          the genrule: klaunch/<name>.h and klaunch/<name>.cuh, and
                   the Python launchers python/klaunch_<name>.py with their
                   library's source python/klaunch_<name>.c (built by
                   kl_python_families, bazel/python.bzl)
  :<name>_headers  cc_library of klaunch/<name>.h (deps on //:klaunch), so
                   `#include "klaunch/<name>.h"` works
  :<name>_cuh      cc_library of klaunch/<name>.cuh, for kl_fatbin's hdrs
  :<name>_spec     the spec file (what kl_fatbin's layout test reads)
  :<name>_freshness_test
                   only with `committed`: the project's committed copies of
                   klaunch/<name>.h, .cuh and python/klaunch_<name>.py, .c
                   equal what the spec makes now

The spec may live in any package; the generator reads it as
specs/<file name> (as //:generate does), which is what generated files and
messages name. Use it in a package without a committed klaunch/ folder: the
build must see only these generated headers, never the committed copies in
generated/. The spec's `family` must equal `name`, and the file is
<name>.yaml.

kl_families(specs = glob(["*.yaml"]), committed = None, regenerate = None)
calls kl_family for every spec of the package (named after its file) and
makes :all_specs, a filegroup of them, so that a new spec file is a new
family with no BUILD line: whatever lists the families (//:generate, the
launcher reference, the freshness tests) reads :all_specs.
"""

# Label(): these resolve in klaunch's repository also when the macros are
# called from another workspace (a plain string would name a target there).
_CODEGEN = Label("//codegen:generator")
_RUNTIME = Label("//:klaunch")
_FRESHNESS_MAIN = Label("//bazel:freshness_test.py")
_JUNIT = Label("//tools:junit_unittest")

def kl_codegen_cmd(args):
    """A genrule command running the generator with `args` in a scratch copy
    of the workspace layout (its specs/ holds the spec files, by symlink).
    $$KL_OUT names that directory afterwards."""
    return ("KL_OUT=$$(mktemp -d) && trap 'rm -rf $$KL_OUT' EXIT && " +
            "mkdir -p $$KL_OUT/specs $$KL_OUT/generated $$KL_OUT/docs && " +
            "for s in $(SRCS); do ln -s $$PWD/$$s $$KL_OUT/specs/; done && " +
            "gen=$$PWD/$(location %s) && (cd $$KL_OUT && $$gen %s)") % (_CODEGEN, args)

def _file_name(spec):
    """"specs/x.yaml", ":x.yaml" or "//pkg:dir/x.yaml" -> "x.yaml"."""
    return spec.split(":")[-1].split("/")[-1]

def kl_family(name, spec, committed = None, regenerate = None, visibility = None):
    """See the module docstring.

    committed: a label whose files include the committed copies
      (.../klaunch/<name>.h and .cuh, .../python/klaunch_<name>.py and .c),
      e.g. a filegroup of generated/**;
      gives :<name>_freshness_test.
    regenerate: the command the freshness test tells to run when they are
      stale (default: ./bazelw run //:generate).
    """
    if _file_name(spec) != name + ".yaml":
        fail("kl_family(name = \"%s\"): the spec must be %s.yaml (the file is named after its family), not %s" % (name, name, spec))
    h = "klaunch/%s.h" % name
    cuh = "klaunch/%s.cuh" % name
    py = "python/klaunch_%s.py" % name
    py_c = "python/klaunch_%s.c" % name
    native.genrule(
        name = name,
        srcs = [spec],
        outs = [h, cuh, py, py_c],
        tools = [_CODEGEN],
        # Run as //:generate runs it (--include-dir generated --python-dir
        # generated/python, the spec as specs/<name>.yaml, paths the
        # generator prints as given) so these outputs equal the committed
        # copies byte for byte.
        cmd = kl_codegen_cmd("--include-dir generated --python-dir generated/python specs/%s" % _file_name(spec)) +
              "".join([" && cp $$KL_OUT/generated/%s $(location %s)" % (f, f) for f in [h, cuh, py, py_c]]),
        message = "Generating the launchers of %s" % name,
        visibility = visibility,
    )
    native.cc_library(
        name = name + "_headers",
        hdrs = [h],
        # -I (not -isystem, as `includes` would give): warnings in generated
        # code must reach the -Werror header tests.
        strip_include_prefix = "",
        deps = [_RUNTIME],
        visibility = visibility,
    )
    native.cc_library(
        name = name + "_cuh",
        hdrs = [cuh],
        strip_include_prefix = "",
        visibility = visibility,
    )
    native.filegroup(
        name = name + "_python_sources",
        srcs = [py, py_c],
        visibility = visibility,
    )
    native.filegroup(
        name = name + "_spec",
        srcs = [spec],
        visibility = visibility,
    )
    if committed:
        native.py_test(
            name = name + "_freshness_test",
            size = "small",
            srcs = [_FRESHNESS_MAIN],
            main = _FRESHNESS_MAIN,
            args = [
                "--spec",
                "$(location %s)" % spec,
                "--regenerate",
                # (args are shell-tokenized: one word)
                "'%s'" % (regenerate or "./bazelw run //:generate"),
                "--generated",
                "$(location %s)" % h,
                "$(location %s)" % cuh,
                "$(location %s)" % py,
                "$(location %s)" % py_c,
                "--committed",
                "$(locations %s)" % committed,
            ],
            data = [spec, h, cuh, py, py_c, committed],
            python_version = "PY3",
            deps = [_JUNIT],
            visibility = visibility,
        )

def kl_families(specs = None, committed = None, regenerate = None, visibility = None):
    """See the module docstring. Call it once, in the package of the specs."""
    if specs == None:
        specs = native.glob(["*.yaml"])
    if not specs:
        fail("kl_families: no *.yaml spec in %s" % native.package_name())
    for spec in specs:
        kl_family(
            name = _file_name(spec)[:-len(".yaml")],
            spec = spec,
            committed = committed,
            regenerate = regenerate,
            visibility = visibility,
        )
    native.filegroup(
        name = "all_specs",
        srcs = specs,
        visibility = visibility,
    )
