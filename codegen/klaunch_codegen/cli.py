"""klaunch_codegen command line.

    klaunch_codegen --include-dir DIR [--docs FILE] [--python-dir PYDIR] [--check] SPEC...

Writes DIR/klaunch/<family>.h and DIR/klaunch/<family>.cuh for each spec
and, with --docs, one Markdown reference of all of them; with --python-dir,
PYDIR/klaunch_<family>.py (the Python launchers) and PYDIR/klaunch_<family>.c
(the source of their shared library, libklaunch_<family>.so). Every problem in
the specs is reported (file:line:col: error: message; hint) and then
nothing is written. --check writes nothing either way; it names each output
that is missing or differs from what the specs produce.

Outputs are written only when every output of the run is ready: each goes
to a temporary file beside its destination first, every destination is
checked (not a folder, not an input, not another output, even without
regard to case), and only then are they renamed into place; a rename that
fails puts back every file already replaced. A problem with an output
names the spec it comes from (at its family) or the command-line argument.

Under `bazel run`, relative paths are taken from the workspace
($BUILD_WORKSPACE_DIRECTORY), so spec paths in the output read
specs/<family>.yaml whichever way the generator is run.
"""

import argparse
import os
import shlex
import stat
import sys
import tempfile

from . import REGENERATE_COMMAND, __version__
from .diag import one_line

MISSING_DEPS = "error: klaunch_codegen needs Jinja2 and PyYAML: python3 -m pip install jinja2 pyyaml"
COMMAND_LINE = "<command line>"


def _parser():
    p = argparse.ArgumentParser(
        prog="klaunch_codegen",
        description="Generate klaunch C launchers and kernel-side headers from YAML specs.",
    )
    p.add_argument("--include-dir", required=True, metavar="DIR", help="writes DIR/klaunch/<family>.{h,cuh}")
    p.add_argument("--docs", metavar="FILE", help="also writes a Markdown reference of every launcher")
    p.add_argument("--python-dir", metavar="PYDIR",
                   help="also writes PYDIR/klaunch_<family>.py and .c: the Python launchers and their library's source")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if an output is missing or stale")
    p.add_argument("--version", action="version", version="klaunch_codegen " + __version__)
    p.add_argument("specs", nargs="+", metavar="SPEC", help="specs/<family>.yaml files")
    return p


def _display(path):
    """Paths as messages and outputs show them: relative when under the cwd."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


class _Arguments:
    """Where each argument's value sits on the command line, for messages:
    <command line>:1:COL, COL counted in the line as the shell would show it."""

    def __init__(self, argv):
        self.argv = list(argv)
        words = ["klaunch_codegen"] + [shlex.quote(a) for a in self.argv]
        self.cols, col = [], 1 + len(words[0]) + 1
        for w in words[1:]:
            self.cols.append(col)
            col += len(w) + 1

    def pos_of_option(self, option):
        for i, a in enumerate(self.argv):
            if len(a) > 2 and option.startswith(a):
                return (1, self.cols[i + 1] if i + 1 < len(self.cols) else self.cols[i])
            if a.startswith(option + "="):
                return (1, self.cols[i])
        return (1, 1)

    def spec_positions(self):
        """The position of each SPEC argument, in order."""
        out, skip, rest = [], False, False
        for j, a in enumerate(self.argv):
            if skip:
                skip = False
                continue
            if not rest:
                if a == "--":
                    rest = True
                    continue
                # argparse takes unambiguous prefixes (--inc) too.
                if len(a) > 2 and any(o.startswith(a) for o in ("--include-dir", "--docs", "--python-dir")):
                    skip = True
                    continue
                if a.startswith("-") and a != "-":
                    continue
            out.append((1, self.cols[j]))
        return out


def _key(path):
    """One file whatever the case of its name or the links to it."""
    return os.path.normcase(os.path.realpath(path)).lower()


def _check_paths(planned, inputs, diags):
    """Refuses outputs that are folders or other non-files, inputs, or one
    file twice (after resolving links, without regard to case).
    planned: [(path, (file or <command line>, pos))]."""
    seen = {}
    input_keys = {_key(p): p for p in inputs}
    for path, (where, pos) in planned:
        k = _key(path)
        if k in input_keys:
            diags.error(where, pos, "the output %s is the input %s" % (path, input_keys[k]),
                        "writing it would replace the spec; choose another --include-dir or --docs")
            continue
        if k in seen:
            diags.error(where, pos, "the output %s is also the output %s" % (path, seen[k]),
                        "two outputs would be one file; choose another --docs or rename the family")
            continue
        seen[k] = path
        d = os.path.dirname(path)
        blocked = None
        while d:
            if os.path.lexists(d):
                if not os.path.isdir(d):
                    blocked = d
                break
            d = os.path.dirname(d)
        if blocked:
            diags.error(where, pos, "cannot write %s: %s is not a folder" % (path, blocked),
                        "remove it, or choose another --include-dir or --docs")
            continue
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            diags.error(where, pos, "cannot write %s: %s" % (path, e.strerror or e), "check the path")
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            diags.error(where, pos, "cannot write %s: it is %s" % (path, kind), "remove it, or choose another --include-dir or --docs")


def _write_all(files, old):
    """Writes every file or none: temporaries first, renamed only when all
    exist; a failed rename puts back what was replaced. `old` holds each
    destination's previous bytes (None: it did not exist). Returns None or
    (path, message)."""
    temps, made_dirs = [], []
    try:
        for path, data in files.items():
            directory = os.path.dirname(path) or "."
            missing = []
            d = directory
            while d and not os.path.isdir(d):
                missing.append(d)
                parent = os.path.dirname(d)
                if parent == d:
                    break
                d = parent
            for d in reversed(missing):
                os.mkdir(d)
                made_dirs.append(d)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
    except OSError as e:
        _undo(temps, [], old, made_dirs)
        return (e.filename or "output", e.strerror or str(e))
    done = []
    for tmp, path in temps:
        try:
            os.replace(tmp, path)
        except OSError as e:
            _undo(temps[len(done):], done, old, made_dirs)
            return (path, e.strerror or str(e))
        done.append((tmp, path))
    return None


def _undo(temps, done, old, made_dirs):
    for tmp, _ in temps:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    for _, path in reversed(done):
        try:
            if old.get(path) is None:
                os.unlink(path)
            else:
                with open(path, "wb") as f:
                    f.write(old[path])
        except OSError:
            pass
    for d in reversed(made_dirs):
        try:
            os.rmdir(d)
        except OSError:
            pass


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
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
    where = _Arguments(argv)

    def report():
        for d in diags.sorted(paths + [COMMAND_LINE]):
            print(d, file=sys.stderr)
        n = len(diags)
        print("klaunch_codegen: %d error%s; nothing written" % (n, "" if n == 1 else "s"), file=sys.stderr)
        return 1

    # Empty paths: os.path cannot even make them relative.
    paths = []
    positions = where.spec_positions()
    if len(positions) != len(args.specs):
        positions = [(1, 1)] * len(args.specs)
    for p, pos in zip(args.specs, positions):
        if p:
            paths.append(_display(p))
        else:
            diags.error(COMMAND_LINE, pos, "a SPEC argument is empty", "give the path of a spec file, e.g. specs/<family>.yaml")
    examples = {"--include-dir": "--include-dir generated", "--docs": "--docs docs/LAUNCHERS.md",
                "--python-dir": "--python-dir generated/python"}
    for option, value in (("--include-dir", args.include_dir), ("--docs", args.docs), ("--python-dir", args.python_dir)):
        if value == "":
            diags.error(COMMAND_LINE, where.pos_of_option(option), "the %s argument is empty" % option,
                        "give a path, e.g. %s" % examples[option])
    if diags:
        return report()

    specs = [s for s in (load_spec(p, diags) for p in paths) if s is not None]
    if not diags:
        cross_check(specs, diags)
    if not diags:
        from .names import RuntimeHeadersError, check_run

        try:
            check_run(specs, diags)
        except RuntimeHeadersError as e:
            print(one_line("klaunch_codegen: error: %s; the generator reads the runtime's names and limits from them" % e), file=sys.stderr)
            return 1
    if diags:
        return report()

    include_dir = _display(args.include_dir)
    docs = _display(args.docs) if args.docs else None
    python_dir = _display(args.python_dir) if args.python_dir else None
    # Every output and where it comes from, checked before anything renders.
    planned = []
    for s in specs:
        for suffix in (".h", ".cuh"):
            planned.append((os.path.join(include_dir, "klaunch", s.family) + suffix, (s.path, s.family_pos)))
        if python_dir:
            for path in emit.python_outputs(s, python_dir):
                planned.append((path, (s.path, s.family_pos)))
    if docs:
        planned.append((docs, (COMMAND_LINE, where.pos_of_option("--docs"))))
    _check_paths(planned, paths, diags)
    if diags:
        return report()
    origins = dict(planned)
    texts = emit.outputs(specs, include_dir, docs, python_dir)
    # What the rendered headers declare, against each other and the runtime.
    from .collisions import check_outputs
    from .names import emitted, runtime

    base = lambda s: os.path.join(include_dir, "klaunch", s.family)
    fatbins = [(s, e.name, e.pos, e.origin, e.what) for s in specs for e in emitted(s) if e.space == "c"]
    check_outputs(specs, [(s, texts[base(s) + ".h"], texts[base(s) + ".cuh"]) for s in specs], runtime().identifiers, fatbins, diags)
    if diags:
        return report()
    files = {p: text.encode("utf-8") for p, text in texts.items()}

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
                print(one_line("%s: %s; run: %s" % (path, state, REGENERATE_COMMAND)), file=sys.stderr)
        return 1 if stale else 0

    # Files whose bytes are already right are left alone (their mtime too).
    changed, old = {}, {}
    for path, data in files.items():
        try:
            with open(path, "rb") as f:
                before = f.read()
        except OSError:
            before = None
        if before == data:
            continue
        changed[path] = data
        old[path] = before
    problem = _write_all(changed, old)
    if problem:
        path, message = problem
        src, pos = origins.get(path, (COMMAND_LINE, where.pos_of_option("--include-dir")))
        diags.error(src, pos, "cannot write %s: %s" % (path, message), "nothing was written; check the folder and its permissions")
        return report()
    return 0
