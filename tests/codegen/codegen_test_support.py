"""Shared by the codegen tests: where things are, how to run the generator.

Works both from a checkout (python3 tests/codegen/test_x.py) and under
`bazel test`, where the runfiles tree mirrors the workspace.
"""

import os
import shutil
import subprocess
import sys


def _find_root():
    here = os.path.dirname(os.path.abspath(__file__))
    d = here
    while True:
        if os.path.isdir(os.path.join(d, "codegen", "klaunch_codegen")) and os.path.isdir(os.path.join(d, "tests")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            raise RuntimeError("cannot find the workspace root above %s" % here)
        d = parent


ROOT = _find_root()
# KLAUNCH_TEST_CHECKOUT=DIR: the generator (as a program and as the
# klaunch_codegen package) and the runtime headers are another checkout's;
# the tests and their data stay this one's. tests/codegen/on_commit.py uses
# it to show a regression test failing on the commit before the fix (a test
# importing a module that checkout lacks fails at import: no evidence).
_OTHER = os.environ.get("KLAUNCH_TEST_CHECKOUT")
CODEGEN_MAIN = os.path.join(_OTHER or ROOT, "codegen", "main.py")
TESTS = os.path.join(ROOT, "tests", "codegen")
GOLDEN = os.path.join(TESTS, "golden")
ERRORS = os.path.join(TESTS, "errors")
INCLUDE = os.path.join(_OTHER or ROOT, "include")

for p in (ROOT, os.path.join(ROOT, "codegen"), os.path.join(ROOT, "tools")):
    if p not in sys.path:
        sys.path.insert(0, p)
if _OTHER:
    sys.path.insert(0, os.path.join(_OTHER, "codegen"))

import junit_unittest  # noqa: E402  (tools/, on the path above)

main = junit_unittest.main


def run_codegen(args, cwd=None, env=None, timeout=None):
    """(returncode, stdout, stderr) of `python3 codegen/main.py args`
    (subprocess.TimeoutExpired past `timeout` seconds)."""
    full_env = dict(os.environ)
    full_env.pop("BUILD_WORKSPACE_DIRECTORY", None)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, CODEGEN_MAIN] + list(args),
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr


class GeneratorTimeout(Exception):
    pass


def run_codegen_in_process(args, cwd, timeout):
    """(exit status, stderr) of the generator run in this process (much
    faster than a program per spec) from `cwd`; GeneratorTimeout past
    `timeout` seconds. Any exception the generator lets out propagates:
    for the tests that call it, that is the failure."""
    import contextlib
    import io
    import signal

    from klaunch_codegen import cli

    def alarm(signum, frame):
        raise GeneratorTimeout()

    stderr = io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = cli.main(list(args))
            except SystemExit as e:
                rc = e.code
    finally:
        signal.alarm(0)
        os.chdir(old)
    return rc, stderr.getvalue()


def case_spec(case_dir):
    """The one <family>.yaml of a golden or error case folder."""
    specs = sorted(f for f in os.listdir(case_dir) if f.endswith(".yaml"))
    if len(specs) != 1:
        raise AssertionError("%s: expected exactly one .yaml, found %s" % (case_dir, specs))
    return specs[0]


def tree_snapshot(root, folders=False):
    """{relative path: bytes} of every file under root (and, with folders,
    {relative path + '/': None} of every folder)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if folders:
            for d in dirs:
                out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out


def tool(name):
    """Path of a compiler, or None."""
    found = shutil.which(name)
    if found:
        return found
    if name == "nvcc":
        for base in (os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if base and os.path.exists(os.path.join(base, "bin", "nvcc")):
                return os.path.join(base, "bin", "nvcc")
    return None


def yaml_tree(node, seen=None):
    """A comparable picture of a composed YAML node tree: kind, tag, value,
    position, style, end offset; an alias shows as a reference to the
    first occurrence's position."""
    from klaunch_codegen import yamlpos

    if seen is None:
        seen = {}
    if node is None:
        return None
    if id(node) in seen:
        return ("alias", seen[id(node)])
    seen[id(node)] = node.pos
    if isinstance(node, yamlpos.ScalarNode):
        return ("scalar", node.tag, node.value, node.pos, node.style, node.end)
    if isinstance(node, yamlpos.SequenceNode):
        return ("seq", node.pos, node.flow_style, [yaml_tree(n, seen) for n in node.value], node.end)
    return ("map", node.pos, node.flow_style, [(yaml_tree(k, seen), yaml_tree(v, seen)) for k, v in node.value], node.end)
