"""SASS checks of the paged decode cubins (bench/decode/sass_count.py reads
the same listing): what the tensor-core launchers are meant to compile to,
read from every sm_90 cubin the build makes (both variants).

- every `*_gqa_mma` kernel issues HMMA (tensor cores) and no FFMA-per-
  element main loop: its innermost cache loops hold HMMA;
- the fp8 `*_mma` kernels convert E4M3 with the packed cvt
  (F2FP.F16.E4M3.UNPACK_B, two values an instruction), in their loops;
- no decode kernel touches local memory (LDL/STL: spills);
- the copy-engine kernels (`*_gqa_bulk`, `*_gqa_tma`, sm_90a cubins: their
  sm_90 code is a trap) issue cp.async.bulk (UBLKCP; the _tma ones
  cp.async.bulk.tensor, UTMALDG, and no row copies) and mbarrier operations
  (SYNCS) in their producer warp's loops, and their consumers' loop reads the ring
  with LDS.128 and runs HMMA, no per-element FFMA, no global cache loads,
  and (fp8) the packed E4M3 cvt;
- their producers fence the async proxy (FENCE.VIEW.ASYNC.S) between
  waiting on a slot's `empty` barrier (SYNCS.PHASECHK) and the copy that
  refills it: without it the copy's bytes overtook the consumers' reads on
  the H100 (paged_decode_test's
  PersistentBulkOneBlockRefillsNoSlotBeforeItIsRead).

Needs cuobjdump (PyPI nvidia-cuda-cuobjdump, or the CUDA toolkit's): found
on PATH, in $CUDA_PATH/bin, /usr/local/cuda/bin, or a venv named by
$KL_CUOBJDUMP. Without one every check is skipped, saying so.
"""
import glob
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "decode"))
import sass_count  # noqa: E402
import junit_unittest  # noqa: E402


def find_cuobjdump():
    cands = [os.environ.get("KL_CUOBJDUMP"), shutil.which("cuobjdump")]
    for d in (os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if d:
            cands.append(os.path.join(d, "bin", "cuobjdump"))
    cands += glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/cu*/bin/cuobjdump")
    named = os.environ.get("KL_CUOBJDUMP")
    if named:
        # Named by the build (@kl_sass_tools): missing is a failure, not a skip.
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise RuntimeError("KL_CUOBJDUMP=%s is not an executable file" % named)
        return named
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def is_cache_loop(s):
    """A loop over the paged cache: wide cache loads and block-table reads.
    (The persistent kernels' record merge loads 16-byte workspace records
    but reads no block table: it is no cache loop.)"""
    return s["load_bytes"] >= 16 and s["table_loads"] > 0


def cubins(target="sm_90"):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    found = sorted(glob.glob(os.path.join(root, "kernels", "paged_decode_*.%s.cubin" % target)))
    return found


class DecodeSass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = find_cuobjdump()
        cls.funcs = {}
        if cls.tool is None:
            return
        cls.funcs_90a = {}
        for target, into in (("sm_90", cls.funcs), ("sm_90a", cls.funcs_90a)):
            for c in cubins(target):
                text = subprocess.run([cls.tool, "-sass", c], check=True, capture_output=True, text=True).stdout
                into[os.path.basename(c)] = sass_count.functions(text)

    def setUp(self):
        if self.tool is None:
            self.skipTest("no cuobjdump (PyPI nvidia-cuda-cuobjdump or the CUDA toolkit's) on this machine")
        self.assertTrue(self.funcs, "no paged_decode sm_90 cubin in the test's data")
        self.assertTrue(self.funcs_90a, "no paged_decode sm_90a cubin in the test's data")

    def each(self, pred, funcs_by_cubin=None):
        for cubin, funcs in (self.funcs if funcs_by_cubin is None else funcs_by_cubin).items():
            for name, ins in funcs.items():
                if pred(name):
                    yield cubin, name, ins

    def test_mma_kernels_run_their_cache_loops_on_tensor_cores(self):
        seen = 0
        for cubin, name, ins in self.each(lambda n: n.endswith("_gqa_mma")):
            seen += 1
            loops = [sass_count.summary(ins, lo, hi) for lo, hi in sass_count.loops(ins)]
            cache_loops = [s for s in loops if is_cache_loop(s)]
            self.assertTrue(cache_loops, "%s %s: no cache loop found" % (cubin, name))
            for s in cache_loops:
                self.assertGreater(s["hmma"], 0, "%s %s: a cache loop without HMMA" % (cubin, name))
                self.assertLess(s["ffma"], 8, "%s %s: a cache loop doing per-element FFMA" % (cubin, name))
        self.assertEqual(seen, 6 * len(self.funcs), "want 6 *_gqa_mma kernels per cubin (attn, split, persist x bf16, fp8)")

    def test_fp8_mma_kernels_use_the_packed_e4m3_cvt(self):
        for cubin, name, ins in self.each(lambda n: "fp8" in n and n.endswith("_mma")):
            for lo, hi in sass_count.loops(ins):
                s = sass_count.summary(ins, lo, hi)
                if is_cache_loop(s):
                    self.assertGreater(s["fp8_packed_cvt"], 0, "%s %s: a cache loop without the packed cvt" % (cubin, name))

    def test_no_decode_kernel_spills_to_local_memory(self):
        for funcs in (self.funcs, self.funcs_90a):
            for cubin, name, ins in self.each(lambda n: n.startswith("paged_decode"), funcs):
                s = sass_count.summary(ins, 0, 1 << 40)
                self.assertEqual(s["local"], 0, "%s %s: LDL/STL (spills)" % (cubin, name))

    def bulk_loops(self, ins):
        loops = [sass_count.summary(ins, lo, hi) for lo, hi in sass_count.loops(ins)]
        producer = [sass_count.summary(ins, lo, hi) for lo, hi in sass_count.copy_loops(ins)]
        ring = [s for s in loops if s["ring_bytes"] >= 16 and s["hmma"] > 0]
        return producer, ring

    def test_bulk_kernels_copy_by_the_engine_and_compute_from_the_ring(self):
        seen = 0
        for cubin, name, ins in self.each(lambda n: n.endswith(("_gqa_bulk", "_gqa_tma")), self.funcs_90a):
            seen += 1
            producer, ring = self.bulk_loops(ins)
            kind = "tensor_copies" if name.endswith("_tma") else "bulk_copies"
            self.assertTrue(producer, "%s %s: no producer loop with UBLKCP or UTMALDG" % (cubin, name))
            for s in producer:
                self.assertGreater(s[kind], 0, "%s %s: producer loop without %s" % (cubin, name, kind))
                self.assertGreater(s["mbarrier_ops"], 0, "%s %s: producer loop without mbarrier ops" % (cubin, name))
            if name.endswith("_tma"):
                self.assertTrue(all(s["bulk_copies"] == 0 for s in producer), "%s %s: row copies" % (cubin, name))
            self.assertEqual(len(ring), 1, "%s %s: want one consumer loop over the ring" % (cubin, name))
            r = ring[0]
            self.assertGreaterEqual(r["ring_bytes"], 128, "%s %s: the ring loop reads too little" % (cubin, name))
            self.assertGreater(r["mbarrier_ops"], 0, "%s %s: the ring loop waits on no mbarrier" % (cubin, name))
            self.assertEqual(r["load_bytes"], 0, "%s %s: global cache loads in the ring loop" % (cubin, name))
            self.assertLess(r["ffma"], 8, "%s %s: per-element FFMA in the ring loop" % (cubin, name))
            if "fp8" in name:
                self.assertGreater(r["fp8_packed_cvt"], 0, "%s %s: no packed E4M3 cvt in the ring loop" % (cubin, name))
        self.assertEqual(seen, 8 * len(self.funcs_90a), "want 4 *_gqa_bulk and 4 *_gqa_tma kernels per sm_90a cubin")

    def test_bulk_producers_fence_the_async_proxy_before_each_refill(self):
        # In address order, the nearest barrier wait or proxy fence before
        # every copy must be the fence (the waits' retry loops sit at the
        # function's end and return to just after the wait).
        seen = 0
        for cubin, name, ins in self.each(lambda n: n.endswith(("_gqa_bulk", "_gqa_tma")), self.funcs_90a):
            ordered = sorted(ins)
            copies = 0
            for i, (addr, text) in enumerate(ordered):
                if not sass_count.opcode(text).startswith(("UBLKCP", "UTMALDG")):
                    continue
                copies += 1
                before = None
                for _, t in reversed(ordered[:i]):
                    op = sass_count.opcode(t)
                    if op.startswith(("FENCE.VIEW.ASYNC", "SYNCS.PHASECHK")):
                        before = op
                        break
                self.assertIsNotNone(before, "%s %s: a copy at %#x with no barrier wait before it" % (cubin, name, addr))
                self.assertTrue(before.startswith("FENCE.VIEW.ASYNC"),
                                "%s %s: the copy at %#x follows a barrier wait (%s) with no proxy fence between"
                                % (cubin, name, addr, before))
            self.assertGreater(copies, 0, "%s %s: no copy found" % (cubin, name))
            seen += 1
        self.assertEqual(seen, 8 * len(self.funcs_90a), "want 4 *_gqa_bulk and 4 *_gqa_tma kernels per sm_90a cubin")


if __name__ == "__main__":
    junit_unittest.main()
