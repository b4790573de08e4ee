"""Every row of docs/PERFORMANCE.md's current figures says where, when and
how it was measured (issue 46): each table of the part "## Current figures"
(one table per "### " subject) has the columns

    | measure | figure | baseline (same run) | ratio | card | date | commit | command |

and in every row
  - card names the GPU (H100, H200, ...), or is "none (CPU, cores)" for a
    figure that needs no GPU;
  - date is YYYY-MM-DD;
  - commit is 7 to 40 hex digits (and, where the test can reach the
    checkout's git, a commit git knows; a shallow clone or a tree without
    .git checks the form only);
  - command is one `code span` whose script (after VAR=value assignments
    and a leading bash / sh / python3) is a file of the repository: one
    declared as data of this test in tests/docs/BUILD, or, for a script
    whose package does not export it, a file of the source tree the page
    comes from (its runfile resolves into it; hence the tag "external").
A row not measured yet says so: its figure is exactly "not yet measured"
(its date and commit may then be "-"); it still names the card it is for
and the command that will measure it.

    performance_tables_test.py docs/PERFORMANCE.md SCRIPT...
"""
import datetime
import os
import re
import shlex
import subprocess
import sys
import unittest

import junit_unittest

DOC = None
SCRIPTS = []

COLUMNS = ["measure", "figure", "baseline (same run)", "ratio", "card", "date", "commit", "command"]
NOT_MEASURED = "not yet measured"
CARD = re.compile(r"\b(H100|H200|H20|GH200|GB200|B100|B200|A100|A10G?|L4|L40S?|RTX [0-9A-Za-z ]+)\b")
NO_GPU = re.compile(r"^none \(.+\)$")
DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
RUNNERS = ("bash", "sh", "python3", "python")


def current_figures(text):
    """The lines of the part '## Current figures', up to the next '## ' heading."""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Current figures"), None)
    if start is None:
        return None
    part = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## "):
            break
        part.append((i + 1, lines[i]))
    return part


def tables(part):
    """(subject, first line number, header cells, [(line number, cells)]) for each table."""
    out, subject, i = [], None, 0
    while i < len(part):
        n, line = part[i]
        if line.startswith("### "):
            subject = line[4:].strip()
        if line.startswith("|"):
            block = []
            while i < len(part) and part[i][1].startswith("|"):
                block.append(part[i])
                i += 1
            header = cells(block[0][1])
            rows = [(bn, cells(bl)) for bn, bl in block[2:]]
            out.append((subject, n, header, rows))
            continue
        i += 1
    return out


def cells(line):
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [c.strip() for c in body.split("|")]


def script_of(command):
    """The repository file a command runs, or None when it names none."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if words and words[0] in RUNNERS:
        words = words[1:]
    if not words:
        return None
    path = words[0]
    if path.startswith("./"):
        path = path[2:]
    if path.startswith("/") or ".." in path.split("/") or path.startswith("-"):
        return None
    return path


class Git:
    """The checkout's git, when this test can reach it (not in a bare
    sandbox, a tree without .git or a shallow clone)."""

    def __init__(self, root):
        self.root = None
        if not root:
            return
        try:
            top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                                 capture_output=True, text=True, timeout=30)
            shallow = subprocess.run(["git", "-C", root, "rev-parse", "--is-shallow-repository"],
                                     capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return
        if top.returncode == 0 and os.path.realpath(top.stdout.strip()) == os.path.realpath(root) \
                and shallow.stdout.strip() == "false":
            self.root = root

    def knows(self, commit):
        if self.root is None:
            return True
        r = subprocess.run(["git", "-C", self.root, "cat-file", "-e", commit + "^{commit}"],
                           capture_output=True, timeout=30)
        return r.returncode == 0


def problems(text, scripts, root=None, git=None):
    """What is wrong with the current figures of a PERFORMANCE.md text.
    scripts: the repository paths declared as this test's data; root: the
    source tree (to tell a missing file from an undeclared one), or None."""
    git = git or Git(None)
    part = current_figures(text)
    if part is None:
        return ["no '## Current figures' part"]
    found = tables(part)
    out = []
    if not found:
        out.append("'## Current figures' holds no table")
    subjects = [l[4:].strip() for _, l in part if l.startswith("### ")]
    with_table = {t[0] for t in found}
    for s in subjects:
        if s not in with_table:
            out.append("subject '%s' has no table" % s)
    for subject, n, header, rows in found:
        where = "line %d (%s)" % (n, subject or "no subject")
        if subject is None:
            out.append("%s: a table before the first '### ' subject" % where)
        if [h.lower() for h in header] != COLUMNS:
            out.append("%s: the columns are %s, not %s" % (where, header, COLUMNS))
            continue
        if not rows:
            out.append("%s: a table without rows" % where)
        col = {c: i for i, c in enumerate(COLUMNS)}
        for rn, row in rows:
            at = "line %d (%s)" % (rn, row[0] if row else "")
            if len(row) != len(COLUMNS):
                out.append("%s: %d cells, not %d" % (at, len(row), len(COLUMNS)))
                continue
            figure, card, date, commit, command = (row[col[c]] for c in ("figure", "card", "date", "commit", "command"))
            pending = figure == NOT_MEASURED
            if NOT_MEASURED in figure and not pending:
                out.append("%s: a row not measured says exactly '%s' in its figure, not '%s'" % (at, NOT_MEASURED, figure))
            if not pending and not re.search(r"\d", figure):
                out.append("%s: the figure '%s' has no number (or say '%s')" % (at, figure, NOT_MEASURED))
            if not (CARD.search(card) or NO_GPU.match(card)):
                out.append("%s: the card '%s' names no GPU (H100, H200, ...) nor 'none (CPU, cores)'" % (at, card))
            if not (pending and date == "-"):
                m = DATE.match(date)
                valid = False
                if m:
                    try:
                        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
                        valid = True
                    except ValueError:
                        pass
                if not valid:
                    out.append("%s: the date '%s' is not YYYY-MM-DD" % (at, date))
            if not (pending and commit == "-"):
                c = commit.strip("`")
                if not COMMIT.match(c):
                    out.append("%s: the commit '%s' is not 7-40 hex digits" % (at, commit))
                elif not git.knows(c):
                    out.append("%s: git does not know the commit %s" % (at, c))
            spans = re.findall(r"`([^`]+)`", command)
            if len(spans) != 1:
                out.append("%s: the command cell holds %d code spans, not one: '%s'" % (at, len(spans), command))
                continue
            script = script_of(spans[0])
            if script is None:
                out.append("%s: the command `%s` names no script of the repository" % (at, spans[0]))
            elif script not in scripts and not (root is not None and os.path.isfile(os.path.join(root, script))):
                out.append("%s: the command's script %s does not exist (or is neither declared as data of "
                           "//tests/docs:performance_tables_test nor found in the source tree)" % (at, script))
    return out


def source_root(doc):
    real = os.path.realpath(doc)
    suffix = os.sep + os.path.join("docs", "PERFORMANCE.md")
    return real[: -len(suffix)] if real.endswith(suffix) else None


GOOD = """# t

## Current figures

### Launch cost

| measure | figure | baseline (same run) | ratio | card | date | commit | command |
|---|---|---|---|---|---|---|---|
| (b) - (a) | 3707 ns | raw 3644 ns | 1.017 | H200 | 2026-11-29 | 967fe36 | `bash bench/launch/run.sh` |
| codegen | 20.0 s | 17.1 s | 1.17 | none (AMD EPYC, 2 cores) | 2026-12-04 | eb05c50 | `python3 bench/codegen/speed.py --before 14370aa` |
| mla decode | not yet measured | copy | - | H100 | - | - | `MLA_DECODE_SKIP=torch bash bench/mla_decode/run.sh` |

## What bounds them

| not | checked | here |
|---|---|---|
"""
GOOD_SCRIPTS = {"bench/launch/run.sh", "bench/codegen/speed.py", "bench/mla_decode/run.sh"}


class PerformanceTablesTest(unittest.TestCase):
    def test_every_row_of_the_current_figures_names_card_date_commit_and_command(self):
        with open(DOC) as f:
            text = f.read()
        root = source_root(DOC)
        found = problems(text, set(SCRIPTS), root, Git(root))
        self.assertEqual(found, [], "docs/PERFORMANCE.md:\n  " + "\n  ".join(found))

    def test_the_current_figures_have_rows(self):
        with open(DOC) as f:
            part = current_figures(f.read())
        self.assertIsNotNone(part)
        self.assertGreater(sum(len(t[3]) for t in tables(part)), 10)

    # The checker on made-up pages: it passes a good one and names each fault.
    def test_a_good_page_passes(self):
        self.assertEqual(problems(GOOD, GOOD_SCRIPTS), [])

    def fails(self, old, new, expect):
        bad = GOOD.replace(old, new, 1)
        self.assertNotEqual(bad, GOOD)
        found = problems(bad, GOOD_SCRIPTS)
        self.assertTrue(any(expect in p for p in found), "%r not in %r" % (expect, found))

    def test_a_row_without_a_card_fails(self):
        self.fails("| H200 |", "| - |", "the card '-' names no GPU")

    def test_a_row_without_a_date_fails(self):
        self.fails("| 2026-11-29 |", "| Nov 29 |", "the date 'Nov 29' is not YYYY-MM-DD")
        self.fails("| 2026-11-29 |", "| 2026-11-31 |", "the date '2026-11-31' is not YYYY-MM-DD")

    def test_a_row_without_a_commit_fails(self):
        self.fails("| 967fe36 |", "| main |", "the commit 'main' is not 7-40 hex digits")

    def test_a_commit_git_does_not_know_fails(self):
        class NoCommit:
            def knows(self, c):
                return False
        found = problems(GOOD, GOOD_SCRIPTS, git=NoCommit())
        self.assertTrue(any("git does not know the commit 967fe36" in p for p in found), found)

    def test_a_row_without_a_command_fails(self):
        self.fails("`bash bench/launch/run.sh`", "bench/launch/run.sh", "holds 0 code spans")

    def test_a_command_whose_script_does_not_exist_fails(self):
        self.fails("bench/launch/run.sh", "bench/launch/gone.sh", "bench/launch/gone.sh does not exist")
        found = problems(GOOD.replace("bench/launch/run.sh", "bench/launch/gone.sh"), GOOD_SCRIPTS,
                         root=os.path.dirname(os.path.abspath(__file__)))
        self.assertTrue(any("bench/launch/gone.sh does not exist" in p for p in found), found)

    def test_a_script_of_the_source_tree_counts_where_it_is_not_declared(self):
        here = os.path.dirname(os.path.abspath(__file__))
        page = GOOD.replace("bench/launch/run.sh", "performance_tables_test.py")
        self.assertEqual(problems(page, GOOD_SCRIPTS, root=here), [])

    def test_a_pending_row_must_say_exactly_not_yet_measured(self):
        self.fails("| not yet measured |", "| not yet measured (soon) |", "says exactly 'not yet measured'")
        self.fails("| not yet measured |", "| pending |", "has no number")

    def test_a_measured_row_needs_its_date_and_commit(self):
        self.fails("| 967fe36 |", "| - |", "the commit '-' is not 7-40 hex digits")
        self.fails("| 2026-11-29 |", "| - |", "the date '-' is not YYYY-MM-DD")

    def test_a_pending_row_still_needs_card_and_command(self):
        self.fails("| H100 | - | - |", "| - | - | - |", "the card '-' names no GPU")
        self.fails("`MLA_DECODE_SKIP=torch bash bench/mla_decode/run.sh`", "-", "holds 0 code spans")

    def test_a_subject_without_a_table_or_a_row_with_cells_missing_fails(self):
        self.fails("### Launch cost\n", "### Launch cost\n\ntext\n\n### Empty\n", "subject 'Launch cost' has no table")
        self.fails("| H200 | 2026-11-29 |", "| H200 |", "7 cells, not 8")

    def test_tables_after_the_part_are_not_checked(self):
        self.assertEqual(problems(GOOD + "\n| a | b |\n|---|---|\n| x | y |\n", GOOD_SCRIPTS), [])


if __name__ == "__main__":
    rest = []
    for a in sys.argv[1:]:
        if a.startswith("-"):
            rest.append(a)
        elif DOC is None:
            DOC = a
        else:
            SCRIPTS.append(a)
    junit_unittest.main(argv=rest)
