"""kl_family: a spec's generated headers, built by the code generator.

    kl_family(name = "paged_decode", spec = "paged_decode.yaml")

Runs //codegen:generator on the spec and makes
  :<name>          the genrule: klaunch/<name>.h and klaunch/<name>.cuh
  :<name>_headers  cc_library of klaunch/<name>.h (deps on //:klaunch), so
                   `#include "klaunch/<name>.h"` works
  :<name>_cuh      cc_library of klaunch/<name>.cuh, for kl_fatbin's hdrs

The spec may live in any package; the generator reads it as
specs/<file name> (as //:generate does), which is what generated files and
messages name. Use it in a package without a committed klaunch/ folder: the
build must see only these generated headers, never the committed copies in
generated/. The spec's `family` must equal `name`.
"""

# Label(): these resolve in klaunch's repository also when the macros are
# called from another workspace (a plain string would name a target there).
_CODEGEN = Label("//codegen:generator")
_RUNTIME = Label("//:klaunch")

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

def kl_family(name, spec, visibility = None):
    h = "klaunch/%s.h" % name
    cuh = "klaunch/%s.cuh" % name
    native.genrule(
        name = name,
        srcs = [spec],
        outs = [h, cuh],
        tools = [_CODEGEN],
        # Run as //:generate runs it (--include-dir generated, the spec as
        # specs/<name>.yaml, paths the generator prints as given) so these
        # outputs equal the committed copies byte for byte.
        cmd = kl_codegen_cmd("--include-dir generated specs/%s" % _file_name(spec)) +
              " && cp $$KL_OUT/generated/%s $(location %s)" % (h, h) +
              " && cp $$KL_OUT/generated/%s $(location %s)" % (cuh, cuh),
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
