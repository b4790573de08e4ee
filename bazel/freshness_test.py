"""A family's committed generated headers equal what its spec makes now.

kl_family(..., committed = ...) (bazel/klaunch.bzl) runs it as
<family>_freshness_test:

    --spec SPEC --regenerate COMMAND --generated KLAUNCH_H KLAUNCH_CUH --committed FILE...

For each generated file (klaunch/<family>.h, .cuh, python/klaunch_<family>.py,
.c: the genrule's output, made from the spec in this build) the committed
file with the same <folder>/<name> ending must exist and be byte for byte the same. A failure
names the committed file, the spec, the first differing lines and the
command that remakes it (on the failure's last line, which the test
summary shows).
"""

import difflib
import os
import sys
import unittest

import junit_unittest

ARGS = {"--generated": [], "--committed": []}


def parse(argv):
    rest, key = [], None
    for a in argv:
        if a in ("--spec", "--regenerate"):
            key = a
        elif a in ("--generated", "--committed"):
            key = a
        elif key in ("--spec", "--regenerate"):
            ARGS[key] = a
            key = None
        elif key in ("--generated", "--committed"):
            ARGS[key].append(a)
        else:
            rest.append(a)
    return rest


def ending(path):
    """"x/y/klaunch/f.h" -> "klaunch/f.h", "x/python/klaunch_f.py" -> "python/klaunch_f.py"."""
    return "/".join(path.replace(os.sep, "/").split("/")[-2:])


def read(path):
    with open(path, "rb") as f:
        return f.read()


class FreshnessTest(unittest.TestCase):
    def check(self, generated):
        want = ending(generated)
        spec = ARGS.get("--spec", "the spec")
        remake = ARGS.get("--regenerate", "./bazelw run //:generate")
        matches = [c for c in ARGS["--committed"] if ending(c) == want]
        if not matches:
            folder = want.split("/")[0] + "/"
            dirs = sorted({os.path.dirname(os.path.dirname(c)) for c in ARGS["--committed"] if ending(c).startswith(folder)})
            where = os.path.join(dirs[0], want) if dirs else want
            self.fail("%s is missing: %s makes it; run: %s, and commit it" % (where, spec, remake))
        committed = matches[0]
        new, old = read(generated), read(committed)
        if new == old:
            return
        diff = list(difflib.unified_diff(
            old.decode("utf-8", "replace").splitlines(), new.decode("utf-8", "replace").splitlines(),
            committed + " (committed)", want + " (from " + spec + ")", lineterm="", n=1))
        # The summary last: the test summary shows a failure's last line.
        self.fail("\n%s\n%s is stale: it differs from what %s makes now; run: %s, and commit it" % (
            "\n".join(diff[:24] + (["..."] if len(diff) > 24 else [])), committed, spec, remake))


def add_tests():
    for g in ARGS["--generated"]:
        def test(self, g=g):
            self.check(g)

        safe = "".join(c if c.isalnum() else "_" for c in os.path.basename(g))
        setattr(FreshnessTest, "test_committed_%s_is_what_the_spec_makes" % safe, test)


if __name__ == "__main__":
    rest = parse(sys.argv[1:])
    add_tests()
    junit_unittest.main(argv=rest)
