"""klaunch_dependencies(): the repositories klaunch's build needs, offline.

For the klaunch workspace itself and for any workspace that uses klaunch:

    local_repository(name = "klaunch", path = "path/to/klaunch")
    load("@klaunch//bazel:deps.bzl", "klaunch_dependencies")
    klaunch_dependencies()

Declares each of these unless the WORKSPACE already has a repository of that
name (so a caller can bring its own):

  rules_cc               native C++ rules under rules_cc's name (klaunch's
                         third_party/rules_cc; Debian's bazel-rules-cc needs
                         a newer Bazel than Debian's 4.2.3)
  remote_coverage_tools  stand-ins for the coverage tools every test rule
                         depends on (klaunch's third_party/remote_coverage_tools)
  rules_java             Debian's bazel-rules-java, /usr/share/bazel/rules/java
  gtest                  Debian's libgtest-dev: @gtest//:gtest, @gtest//:gtest_main
  local_cuda             the CUDA toolkit (bazel/cuda_configure.bzl); `cuda_path`
                         is its `path` attribute
  kl_sass_tools          cuobjdump and nvdisasm for the SASS tests
                         (bazel/sass_tools.bzl; ./bazelw installs them)

The first three are what Bazel's default WORKSPACE suffix would download;
declared first, they make the suffix's maybe(http_archive, ...) skip them.
Call klaunch_dependencies() before anything that needs them is loaded.
"""

load(":cuda_configure.bzl", "cuda_configure")
load(":sass_tools.bzl", "sass_tools_configure")

def _klaunch_dir_impl(rctx):
    # A WORKSPACE macro cannot turn a label into a path; a repository rule
    # can, so klaunch's directories are found wherever klaunch is checked out.
    src = rctx.path(rctx.attr.anchor).dirname.get_child(rctx.attr.subdir)
    if not src.exists:
        fail("klaunch_dependencies: %s is missing" % src)
    for child in src.readdir():
        rctx.symlink(child, child.basename)

_klaunch_dir = repository_rule(
    implementation = _klaunch_dir_impl,
    attrs = {
        "anchor": attr.label(allow_single_file = True, doc = "A file of klaunch beside `subdir`."),
        "subdir": attr.string(mandatory = True),
    },
    local = True,
    doc = "A repository whose files are links to a directory of klaunch's source tree.",
)

def _missing(name):
    return native.existing_rule(name) == None

def klaunch_dependencies(cuda_path = None):
    """See the module docstring."""
    anchor = Label("//third_party:gtest.BUILD")
    if _missing("rules_cc"):
        _klaunch_dir(name = "rules_cc", anchor = anchor, subdir = "rules_cc")
    if _missing("remote_coverage_tools"):
        _klaunch_dir(name = "remote_coverage_tools", anchor = anchor, subdir = "remote_coverage_tools")
    if _missing("rules_java"):
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    if _missing("gtest"):
        native.new_local_repository(
            name = "gtest",
            # A string: this attribute takes no Label. str() names klaunch's
            # repository when the caller is another workspace.
            build_file = str(Label("//third_party:gtest.BUILD")),
            path = "/usr",
        )
    if _missing("local_cuda"):
        if cuda_path:
            cuda_configure(name = "local_cuda", path = cuda_path)
        else:
            cuda_configure(name = "local_cuda")
    if _missing("kl_sass_tools"):
        sass_tools_configure(name = "kl_sass_tools")
