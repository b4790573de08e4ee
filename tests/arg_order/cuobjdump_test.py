"""The cubin reader (tools/nvinfo/cubin_nvinfo.py) against cuobjdump.

testdata/cuobjdump/*.txt hold `cuobjdump -elf` of cubins this build makes,
reduced by tools/nvinfo/dump_cuobjdump.sh to the kernel parameter records
and headed by each cubin's name and sha256. For every dumped cubin that is
still byte for byte the one built here, each kernel's records (ordinal,
offset, size) and its EIATTR_CBANK_PARAM_SIZE must be what the reader finds
in the cubin, and the kernels the same. A dump of a cubin that has changed
since is reported as skipped: it says nothing about this build.

To (re)make the dumps: see docs/ARG_ORDER.md ("The cuobjdump cross-check").

    --dump-dir tests/arg_order/testdata/cuobjdump --cubins CUBIN...
"""

import hashlib
import os
import sys
import unittest

import junit_unittest
import cubin_nvinfo as nvinfo

DUMPS = []
CUBINS = []
REMAKE = ("remake the dumps: bash tools/gpu/stage.sh, then on the GPU machine bash .gpu/run.sh, and copy "
          "$OUT/cuobjdump_elf.txt to tests/arg_order/testdata/cuobjdump/ (docs/ARG_ORDER.md)")


def sha256(path):
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def built():
    """{basename: path} of the build's cubins (non-empty ones)."""
    return {os.path.basename(c): c for c in CUBINS if os.path.getsize(c) > 0}


def entries():
    """[(dump file, cubin name, digest, release, kernels)]."""
    out = []
    for d in DUMPS:
        with open(d) as f:
            for name, digest, release, kernels in nvinfo.split_dump_file(f.read(), d):
                out.append((d, name, digest, release, kernels))
    return out


class CuobjdumpTest(unittest.TestCase):
    def test_every_cubin_of_this_build_was_cross_checked(self):
        cubins = built()
        if not cubins:
            self.skipTest("the build made no cubins (no CUDA toolkit)")
        if not DUMPS:
            self.skipTest("no cuobjdump dumps in tests/arg_order/testdata/cuobjdump/ yet; " + REMAKE)
        dumped = {(name, digest) for _, name, digest, _, _ in entries()}
        unchecked = sorted(n for n, p in cubins.items() if (n, sha256(p)) not in dumped)
        print("%d of %d cubins of this build have a cuobjdump dump" % (len(cubins) - len(unchecked), len(cubins)))
        if unchecked:
            self.skipTest("%d cubins changed since the dumps were made (or are new), so are not cross-checked: %s; %s"
                          % (len(unchecked), ", ".join(unchecked), REMAKE))

    def check_entry(self, dump, name, digest, release, want):
        cubins = built()
        if name not in cubins:
            self.skipTest("%s: the build makes no %s any more" % (dump, name))
        path = cubins[name]
        if sha256(path) != digest:
            self.skipTest("%s: dump of another build of %s (the cubin changed since); %s" % (os.path.basename(dump), name, REMAKE))
        got = nvinfo.load(path).kernels
        where = "%s vs cuobjdump (%s) in %s" % (name, release, os.path.basename(dump))
        self.assertTrue(want, "%s: cuobjdump showed no kernel; was the dump cut short?" % where)
        self.assertEqual(sorted(got), sorted(want), "%s: kernels" % where)
        for k in sorted(want):
            self.assertEqual([p.key() for p in got[k].params], [p.key() for p in want[k].params],
                             "%s: kernel %s: (ordinal, offset, size) of each parameter" % (where, k))
            self.assertEqual(got[k].param_size, want[k].param_size, "%s: kernel %s: EIATTR_CBANK_PARAM_SIZE" % (where, k))


def add_entry_tests():
    for i, (dump, name, digest, release, kernels) in enumerate(entries()):
        def test(self, a=(dump, name, digest, release, kernels)):
            self.check_entry(*a)

        safe = "".join(c if c.isalnum() else "_" for c in name)
        setattr(CuobjdumpTest, "test_%03d_%s" % (i, safe), test)


def parse_args(argv):
    dumps, cubins, rest, target, i = [], [], [], None, 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--dump-dir" and i < len(argv):
            d = argv[i]
            i += 1
            if os.path.isdir(d):
                dumps += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".txt"))
            target = None
        elif a == "--cubins":
            target = cubins
        elif target is not None and not a.startswith("-"):
            target.append(a)
        else:
            rest.append(a)
    return dumps, cubins, rest


if __name__ == "__main__":
    d, c, rest = parse_args(sys.argv[1:])
    DUMPS.extend(d)
    CUBINS.extend(c)
    add_entry_tests()
    junit_unittest.main(argv=rest)
