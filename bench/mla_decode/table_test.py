"""bench/mla_decode/table.py on SYNTHETIC JSON (testdata/synthetic_*.json:
numbers made up for this test in the formats mla_decode_bench,
torch_baselines.py and flashinfer_mla.py write; not a measurement). The
expected ratios are computed here from the JSONs' own fields, not read from
the table.

    ./bazelw test //bench/mla_decode:table_test
"""
import json
import os
import sys
import tempfile
import unittest

import junit_unittest
from table_rows import table_rows

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "testdata")
BENCH = os.path.join(DATA, "synthetic_mla_decode_bench.json")
TORCH = os.path.join(DATA, "synthetic_torch_baselines.json")
FLASHINFER = os.path.join(DATA, "synthetic_flashinfer_mla.json")
TABLE = os.path.join(HERE, "table.py")


def ratio(cell):
    return float(cell.split()[0])


class MlaDecodeTableTest(unittest.TestCase):
    def setUp(self):
        self.b = json.load(open(BENCH))["results"]
        self.t = json.load(open(TORCH))
        self.f = json.load(open(FLASHINFER))
        self.rows = table_rows(TABLE, BENCH, "--torch", TORCH, "--flashinfer", FLASHINFER)

    def assert_target(self, measure, want, goal_text):
        got = self.rows[measure]
        self.assertEqual(got[2], goal_text, measure)
        self.assertAlmostEqual(ratio(got[3]), want, places=3, msg=measure)
        self.assertTrue(got[3].endswith("(meets)" if want >= 1.0 else "(MISSES)"), (measure, got[3]))

    def test_the_testdata_says_it_is_synthetic(self):
        for path in (BENCH, TORCH, FLASHINFER):
            self.assertIn("SYNTHETIC", json.load(open(path))["_comment"])

    def test_mem_and_long_bf16_are_held_to_the_same_runs_copy(self):
        copy = self.b["copy"]["gbps"]
        for launcher in ("bf16_mma", "bf16_tma"):
            self.assert_target("mem bf16 D 576, %s (GB/s) vs copy" % launcher,
                               self.b["mem_%s_576" % launcher]["gbps"] / (0.95 * copy), ">= 0.95 x copy")
            self.assert_target("long bf16 D 320, %s, 1 x 32768 (GB/s) vs copy" % launcher,
                               self.b["long_%s_320" % launcher]["gbps"] / (0.85 * copy), ">= 0.85 x copy")
        self.assertIn("copy %.0f GB/s" % copy, self.rows["mem bf16 D 576, bf16_mma (GB/s) vs copy"][1])

    def test_varlen_is_held_to_the_mem_row_of_its_launcher(self):
        for launcher in ("bf16_mma", "fp8_mma", "bf16_tma"):
            want = self.b["varlen_%s_576" % launcher]["tokens_per_s"] / (0.95 * self.b["mem_%s_576" % launcher]["tokens_per_s"])
            self.assert_target("varlen D 576, %s (Mtok/s) vs mem" % launcher, want, ">= 0.95 x mem (loses <= 5%)")

    def test_compute_is_held_to_the_torch_matmul(self):
        matmul = self.t["matmul"]["tflops"]
        self.assert_target("compute bf16 D 576, bf16_tma (TFLOP/s) vs torch matmul",
                           self.b["compute_bf16_tma_576"]["tflops"] / (0.8 * matmul), ">= 0.8 x matmul")
        self.assert_target("compute bf16 D 576, bf16_mma (TFLOP/s) vs torch matmul",
                           self.b["compute_bf16_mma_576"]["tflops"] / (0.8 * matmul), ">= 0.8 x matmul")

    def test_fp8_is_held_to_the_bf16_launcher_of_its_kind(self):
        want = self.b["mem_fp8_mma_576"]["tokens_per_s"] / (1.6 * self.b["mem_bf16_mma_576"]["tokens_per_s"])
        self.assert_target("fp8 mem D 576, fp8_mma (Mtok/s) vs bf16_mma", want, ">= 1.6 x bf16")
        # fp8_tma is not in this run: no row, and the run's note is printed.
        self.assertNotIn("fp8 mem D 576, fp8_tma (Mtok/s) vs bf16_tma", self.rows)

    def test_the_latency_targets_are_upper_bounds(self):
        for how, text in (("graph", "CUDA graph replay"), ("b2b", "back to back")):
            us = self.b["short_bf16_mma_576_%s" % how]["us"]
            self.assert_target("short D 576, bf16_mma, h_q 128 x 1024, %s (us a step)" % text, 10.0 / us, "<= 10 us")
        s = self.b["sched_combine_bf16_mma_576"]["us"]
        self.assertAlmostEqual(s, self.b["sched_bf16_mma_576"]["us"] + self.b["combine_bf16_mma_576"]["us"])
        self.assert_target("schedule + combine, batch 128, D 576, bf16_mma's parts (us)", 2.0 / s, "<= 2 us")

    def test_the_torch_reference_and_flashinfer_are_report_rows(self):
        got = self.rows["mem D 576, bf16_tma vs torch reference, with the gather (Mtok/s)"]
        self.assertEqual(got[2], "(report)")
        want = self.b["mem_bf16_tma_576"]["tokens_per_s"] / self.t["ref_mem"]["tokens_per_s"]
        self.assertAlmostEqual(float(got[3].split()[0]), want, places=2)
        got = self.rows["compute D 576, bf16_mma vs torch reference, K gathered beforehand (Mtok/s)"]
        want = self.b["compute_bf16_mma_576"]["tokens_per_s"] / self.t["ref_compute"]["tokens_per_s_no_gather"]
        self.assertAlmostEqual(float(got[3].split()[0]), want, places=2)
        # FlashInfer: its fastest backend and mode of the shape (varlen's fa2 failed: fa3's graph time).
        for shape in ("mem", "varlen", "compute", "long"):
            fi = min(v[k] for v in self.f["shapes"][shape].values() for k in ("us", "us_graph") if k in v)
            got = self.rows["%s D 576, bf16_tma vs FlashInfer (us a step)" % shape]
            self.assertAlmostEqual(float(got[3].split()[0]), fi / self.b["%s_bf16_tma_576" % shape]["us"], places=2)
            self.assertIn("%.1f us" % fi, got[1])

    def test_without_torch_or_flashinfer_the_rows_have_no_baseline(self):
        rows = table_rows(TABLE, BENCH)
        self.assertEqual(rows["compute bf16 D 576, bf16_tma (TFLOP/s) vs torch matmul"][3], "n/a (no baseline)")
        self.assertFalse([m for m in rows if "FlashInfer" in m or "torch reference" in m])
        # The rows held to this run's own numbers are still there.
        self.assertTrue(rows["mem bf16 D 576, bf16_tma (GB/s) vs copy"][3].endswith("(meets)"))

    def test_a_run_that_failed_elsewhere_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            fi = os.path.join(d, "fi.json")
            json.dump({"ok": False, "error": "ModuleNotFoundError: No module named 'flashinfer'"}, open(fi, "w"))
            tb = os.path.join(d, "torch.json")
            json.dump({"ok": False, "error": "torch.cuda.is_available() is False"}, open(tb, "w"))
            rows = table_rows(TABLE, BENCH, "--torch", tb, "--flashinfer", fi)
        self.assertIn("No module named 'flashinfer'", rows["FlashInfer BatchMLAPagedAttentionWrapper"][3])
        self.assertIn("is_available", rows["torch_baselines.py"][3])

    def test_a_run_without_the_hopper_launchers_has_only_the_portable_rows(self):
        bench = json.load(open(BENCH))
        bench["results"] = {k: v for k, v in bench["results"].items() if "_tma" not in k}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bench.json")
            json.dump(bench, open(path, "w"))
            rows = table_rows(TABLE, path, "--torch", TORCH, "--flashinfer", FLASHINFER)
        self.assertFalse([m for m in rows if "_tma" in m])
        self.assertIn("mem bf16 D 576, bf16_mma (GB/s) vs copy", rows)
        self.assertIn("mem D 576, bf16_mma vs FlashInfer (us a step)", rows)


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
