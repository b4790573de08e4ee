"""klaunch_codegen command line.

    klaunch_codegen --include-dir DIR [--docs FILE] [--check] SPEC...

Writes DIR/klaunch/<family>.h and DIR/klaunch/<family>.cuh for each spec
and, with --docs, one Markdown reference of all of them. Every problem in
the specs is reported (file:line:col: error: message; hint) and then
nothing is written. --check writes nothing either way; it names each output
that is missing or differs from what the specs produce.

Under `bazel run`, relative paths are taken from the workspace
($BUILD_WORKSPACE_DIRECTORY), so spec paths in the output read
specs/<family>.yaml whichever way the generator is run.
"""

import argparse
import os
import sys
import tempfile

from . import REGENERATE_COMMAND, __version__

MISSING_DEPS = "error: klaunch_codegen needs Jinja2 and PyYAML: python3 -m pip install jinja2 pyyaml"


def _parser():
    p = argparse.ArgumentParser(
        prog="klaunch_codegen",
        description="Generate klaunch C launchers and kernel-side headers from YAML specs.",
    )
    p.add_argument("--include-dir", required=True, metavar="DIR", help="writes DIR/klaunch/<family>.{h,cuh}")
    p.add_argument("--docs", metavar="FILE", help="also writes a Markdown reference of every launcher")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if an output is missing or stale")
    p.add_argument("--version", action="version", version="klaunch_codegen " + __version__)
    p.add_argument("specs", nargs="+", metavar="SPEC", help="specs/<family>.yaml files")
    return p


def _display(path):
    """Paths as messages and outputs show them: relative when under the cwd."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def _write_all(files):
    """Writes every file or none: temporaries first, renamed only when all exist."""
    temps = []
    try:
        for path, data in files.items():
            directory = os.path.dirname(path) or "."
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as e:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return "error: cannot write %s: %s" % (e.filename or "output", e.strerror or e)
    for tmp, path in temps:
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return None


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        import jinja2  # noqa: F401
        import yaml  # noqa: F401
    except ImportError:
        print(MISSING_DEPS, file=sys.stderr)
        return 1
    from . import emit
    from .diag import Diagnostics
    from .spec import cross_check, load_spec

    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if workspace:
        os.chdir(workspace)

    diags = Diagnostics()
    paths = [_display(p) for p in args.specs]
    specs = [s for s in (load_spec(p, diags) for p in paths) if s is not None]
    if not diags:
        cross_check(specs, diags)
    if not diags:
        from .names import RuntimeHeadersError, check_run

        try:
            check_run(specs, diags)
        except RuntimeHeadersError as e:
            print("klaunch_codegen: error: %s; the generator reads the runtime's names and limits from them" % e, file=sys.stderr)
            return 1
    if diags:
        for d in diags.sorted(paths):
            print(d, file=sys.stderr)
        n = len(diags)
        print("klaunch_codegen: %d error%s; nothing written" % (n, "" if n == 1 else "s"), file=sys.stderr)
        return 1

    include_dir = _display(args.include_dir)
    docs = _display(args.docs) if args.docs else None
    files = {p: text.encode("utf-8") for p, text in emit.outputs(specs, include_dir, docs).items()}

    if args.check:
        stale = 0
        for path, data in files.items():
            try:
                with open(path, "rb") as f:
                    same = f.read() == data
                state = None if same else "stale: it differs from what the specs produce"
            except FileNotFoundError:
                state = "missing"
            except OSError as e:
                state = "unreadable: %s" % (e.strerror or e)
            if state:
                stale += 1
                print("%s: %s; run: %s" % (path, state, REGENERATE_COMMAND), file=sys.stderr)
        return 1 if stale else 0

    # Files whose bytes are already right are left alone (their mtime too).
    changed = {}
    for path, data in files.items():
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        changed[path] = data
    problem = _write_all(changed)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0
