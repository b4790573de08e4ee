"""Every launcher of every family, called from Python and from C with the
same inputs, gives the same result: the same status and message when it
refuses, the same grid, block, shared memory, stream, attributes and
argument bytes when it launches (both over the recording backend).

The inputs are seeded: for each launcher and variant, argument sets that
the C launcher accepts (searched for) and others, most of which it refuses.
The C side is a program this test writes and compiles with the generated
headers of this build (one call of kl_X per case, the values as literals)
and runs; the Python side calls klaunch_<family>.X through its library.

    ./bazelw test //tests/python:parity_test
"""

import os
import random
import shutil
import struct
import subprocess
import tempfile
import unittest

import python_test_support as S
from python_test_support import klaunch

CASES_PER_LAUNCHER = 8  # per variant: about half of them launch
STREAM = 0x5a5a0000
SHARED = 232448  # the dynamic shared memory an H100 or H200 grants a kernel


def metadata(family, variant):
    """The module metadata of `variant`, as its fatbin would carry it for the
    sm_90a image (so the sm_90a-only launchers look up too)."""
    lines = ["klaunch-module 1", "family " + family.FAMILY, "variant " + variant, "spec_hash " + family.SPEC_HASH,
             "source_hash unknown", "cuda_arch 900a"]
    lines += ["const %s %d" % kv for kv in family.VARIANTS[variant].items()]
    return "\n".join(lines) + "\n"


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def c_value(p, v):
    if p.kind == "tensor_map":
        return "&map_%s" % p.name
    if p.kind == "ptr":
        return "(void *)(uintptr_t)0x%xull" % v
    if p.kind == "bool":
        return "true" if v else "false"
    if p.kind == "f32":
        return "(float)%s" % float(v).hex()
    if p.kind == "i32":
        return "(int32_t)(%dLL)" % v
    return "%dull" % v if p.kind == "u64" else "%du" % v


def python_value(p, v):
    if p.kind == "ptr":
        # Large enough for every extent: the C launcher's checks are compared
        # here (Python's extent check has its own tests, record_test.py).
        return S.tensor(p.element, v, shape=S.HUGE)
    if p.kind == "tensor_map":
        m = S.MapSpec.__new__(S.MapSpec)
        m.address, m.extents, m.strides = v
        m.tensor = S.tensor(p.element, v[0], kind="dlpack")
        return m
    return v


class Case:
    def __init__(self, family, variant, launcher, values):
        self.family, self.variant, self.launcher, self.values = family, variant, launcher, values


def cases():
    out = []
    for family in S.FAMILIES:
        for variant in family.VARIANTS:
            for launcher in family.LAUNCHERS:
                rng = random.Random("%s/%s/%s" % (family.FAMILY, variant, launcher.name))
                for i in range(CASES_PER_LAUNCHER):
                    args = S.arguments(launcher, rng)
                    if i % 2 == 0:
                        args = S._satisfy(launcher, args, family.VARIANTS[variant], rng)
                    values = tuple(a.__cuda_array_interface__["data"][0] if hasattr(a, "__cuda_array_interface__")
                                   else a.address if isinstance(a, S.DLPackArray)
                                   else (a.address, a.extents, a.strides) if isinstance(a, S.MapSpec) else a
                                   for a in args)
                    out.append(Case(family, variant, launcher, values))
    return out


def result_line(status, message, record):
    if status != "KL_SUCCESS":
        return "%s %s" % (status, message)
    if record is None:
        return "KL_SUCCESS empty"
    grid, block, shared, stream, cluster, flags, args = record
    return "KL_SUCCESS grid %s block %s shared %d stream %x cluster %s flags %d args %s" % (
        " ".join(map(str, grid)), " ".join(map(str, block)), shared, stream, " ".join(map(str, cluster)), flags,
        args.hex())


def run_python(all_cases):
    mods = {}
    out = []
    for c in all_cases:
        key = (c.family.FAMILY, c.variant)
        if key not in mods:
            mods[key] = c.family.load_record(image=metadata(c.family, c.variant), capacity=4, max_dynamic_shared=SHARED)
        mod = mods[key]
        mod.clear_records()
        args = [python_value(p, v) for p, v in zip(c.launcher.params, c.values)]
        try:
            args = S.materialize(c.family, c.launcher, args, mod)
            getattr(c.family, c.launcher.name)(*args, module=mod, stream=STREAM)
        except klaunch.Error as e:
            out.append(result_line(e.status, e.message, None))
            continue
        recs = mod.records()
        r = recs[0] if recs else None
        out.append(result_line("KL_SUCCESS", "", r and (r.grid, r.block, r.shared_bytes, r.stream, r.cluster,
                                                          r.attribute_flags, r.args)))
    return out


C_PROLOGUE = r"""
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/mla_decode.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <stdio.h>
#include <string.h>

static kl_record recs[4];
static kl_record_backend rb;

static void report(kl_status st) {
    uint32_t i;
    if (st != KL_SUCCESS) {
        printf("%s %s\n", kl_status_name(st), kl_last_error_message());
    } else if (rb.count == 0) {
        printf("KL_SUCCESS empty\n");
    } else {
        const kl_record *r = &recs[0];
        printf("KL_SUCCESS grid %u %u %u block %u %u %u shared %u stream %llx cluster %u %u %u flags %u args ",
               r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->shared_bytes,
               (unsigned long long)(uintptr_t)r->stream, r->cluster[0], r->cluster[1], r->cluster[2],
               r->attribute_flags);
        for (i = 0; i < r->arg_bytes; i++) printf("%02x", r->args[i]);
        printf("\n");
    }
    kl_record_backend_clear(&rb);
}

static kl_module load(const char *text) {
    kl_module m;
    if (kl_module_load(&rb.base, text, strlen(text), &m) != KL_SUCCESS) {
        fprintf(stderr, "%s\n", kl_last_error_message());
        exit(2);
    }
    return m;
}

int main(void) {
    kl_kernel k;
    kl_status st;
    kl_record_backend_init(&rb, recs, 4);
    rb.max_dynamic_shared = SHARED;
"""


def c_program(all_cases):
    lines = [C_PROLOGUE.replace("SHARED", "%du" % SHARED)]
    names = {}
    for c in all_cases:
        key = (c.family.FAMILY, c.variant)
        if key not in names:
            names[key] = "m_%s_%s" % key
            lines.append("    kl_module %s = load(%s);" % (names[key], c_string(metadata(c.family, c.variant))))
    maps = sorted({p.name for c in all_cases for p in c.launcher.params if p.kind == "tensor_map"})
    for name in maps:
        lines.append("    kl_tensor_map map_%s;" % name)
    for c in all_cases:
        args = ", ".join(c_value(p, v) for p, v in zip(c.launcher.params, c.values))
        lines.append("    st = kl_%s_get(&k, &%s);" % (c.launcher.name, names[(c.family.FAMILY, c.variant)]))
        for p, v in zip(c.launcher.params, c.values):
            if p.kind == "tensor_map":
                address, extents, strides = v
                dims = ", ".join("%dull" % n for n in tuple(extents) + tuple(strides))
                lines.append("    if (st == KL_SUCCESS) st = kl_%s_%s_encode(&k, &map_%s, (void *)(uintptr_t)0x%xull, %s);" % (
                    c.launcher.name, p.name, p.name, address, dims))
        lines.append("    report(st != KL_SUCCESS ? st : kl_%s(&k, %s%s(kl_stream)(uintptr_t)0x%xull));" % (
            c.launcher.name, args, ", " if args else "", STREAM))
    lines.append("    return 0;\n}\n")
    return "\n".join(lines)


def runfile(*parts):
    root = os.environ.get("TEST_SRCDIR")
    if root:
        return os.path.join(root, os.environ.get("TEST_WORKSPACE", "klaunch"), *parts)
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", *parts)


def compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


class ParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = cases()
        cls.python = run_python(cls.cases)
        cc = compiler()
        if cc is None:
            raise unittest.SkipTest("no C compiler (cc, gcc, clang) on PATH")
        cls.tmp = tempfile.mkdtemp()
        src = os.path.join(cls.tmp, "parity.c")
        exe = os.path.join(cls.tmp, "parity")
        with open(src, "w") as f:
            f.write(c_program(cls.cases))
        include = runfile("include")
        generated = runfile("specs")  # //specs:<family>'s klaunch/<family>.h
        build = subprocess.run([cc, "-std=c11", "-O0", "-w", "-I", include, "-I", generated, src, "-o", exe, "-ldl"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if build.returncode != 0:
            raise AssertionError("the C side does not compile:\n" + build.stdout[-4000:])
        run = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if run.returncode != 0:
            raise AssertionError("the C side failed: " + run.stderr)
        cls.c = run.stdout.splitlines()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    def test_every_case_gives_the_c_launchers_result(self):
        self.assertEqual(len(self.c), len(self.cases))
        bad = []
        for c, py, cc in zip(self.cases, self.python, self.c):
            if py != cc:
                bad.append("%s/%s %s%r:\n  python: %s\n  c:      %s" % (c.family.FAMILY, c.variant, c.launcher.name,
                                                                      c.values, py[:300], cc[:300]))
        if bad:
            self.fail("%d of %d cases differ; the first:\n%s" % (len(bad), len(self.cases), "\n".join(bad[:5])))

    def test_every_launcher_launches_in_some_case_and_is_refused_in_another(self):
        launched, refused = set(), set()
        for c, py in zip(self.cases, self.python):
            key = (c.family.FAMILY, c.launcher.name)
            (launched if py.startswith("KL_SUCCESS grid") else refused).add(key)
        every = {(f.FAMILY, l.name) for f in S.FAMILIES for l in f.LAUNCHERS}
        self.assertEqual(sorted(every - launched), [], "launchers no case launches")
        self.assertEqual(sorted(every - refused), [], "launchers no case refuses")

    def test_floats_are_rounded_as_c_rounds_them(self):
        # 0.1 is not a float32: both sides pass the nearest one.
        mod = S.klaunch_paged_decode.load_record("gqa8_d128")
        args = [S.tensor("bf16" if i < 4 else "i32", 0x1000 * (i + 1)) for i in range(6)]
        S.klaunch_paged_decode.paged_decode_attn_bf16(*args, 4, 3, 32, 8, 128, 16, 0.1, 4096, 0, module=mod)
        params = {p[0]: p for p in S.klaunch_paged_decode._F.kernel_params("paged_decode_attn_bf16")}
        off = params["inv_sqrt_d"][2]
        self.assertEqual(mod.records()[0].args[off:off + 4], struct.pack("<f", 0.1))


if __name__ == "__main__":
    S.main()
