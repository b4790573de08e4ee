"""bench/mla/table.py on the JSON of a real H100 run
(testdata/h100_2026-12-06_*.json, as bench/mla/run.sh wrote them at
20274b7). The expected ratios are computed here from the two JSONs' own
fields, not read from the table.
"""
import json
import os
import sys
import unittest

import junit_unittest
from table_rows import table_rows

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "testdata", "h100_2026-12-06_mla_bench.json")
TORCH = os.path.join(HERE, "testdata", "h100_2026-12-06_torch_baselines.json")


def table(*args):
    return table_rows(os.path.join(HERE, "table.py"), BENCH, *args)


class MlaTableTest(unittest.TestCase):
    def setUp(self):
        self.b = json.load(open(BENCH))["results"]
        self.t = json.load(open(TORCH))

    def test_the_grouped_gemm_rows_are_ratios_to_bmm_and_to_copy(self):
        rows = table("--torch", TORCH)
        got = rows["grouped GEMM tma k 128 n 512 (TFLOP/s) vs bmm"]
        self.assertEqual(got[1], ">= 1.0 x bmm")
        want = self.b["gemm_tma"]["tflops"] / self.t["bmm_absorb"]["tflops"]
        self.assertAlmostEqual(float(got[2].split()[0]), want, places=3)
        self.assertEqual(got[2].split()[1], "(meets)" if want >= 1.0 else "(MISSES)")
        got = rows["grouped GEMM tma k 128 n 512 (GB/s, A + B + C once) vs copy"]
        want = self.b["gemm_tma"]["gbps"] / (0.85 * self.b["copy"]["gbps"])
        self.assertAlmostEqual(float(got[2].split()[0]), want, places=3)
        got = rows["grouped GEMM tma k 512 n 128 (TFLOP/s) vs bmm"]
        want = self.b["gemm_tma_t"]["tflops"] / self.t["bmm_absorb_t"]["tflops"]
        self.assertAlmostEqual(float(got[2].split()[0]), want, places=3)

    def test_the_layout_rows_report_the_same_job_in_both_layouts(self):
        rows = table("--torch", TORCH)
        got = rows["grouped GEMM tma k 128 / torch bmm, both in the contract's layout"]
        want = self.b["gemm_tma"]["tflops"] / self.t["bmm_absorb_mgn"]["tflops"]
        self.assertAlmostEqual(float(got[0]), want, places=3)
        self.assertEqual(got[1], "(report)")
        self.assertAlmostEqual(float(rows["fill cuMemsetD32 (GB/s, write only)"][0]), self.b["fill"]["gbps"], places=0)
        self.assertAlmostEqual(float(rows["grouped GEMM tma k 128 n 512 in bmm's layout (TFLOP/s)"][0]),
                               self.b["gemm_tma_gmn"]["tflops"], places=1)

    def test_without_torch_the_bmm_ratios_have_no_reference(self):
        rows = table()
        self.assertEqual(rows["grouped GEMM tma k 128 n 512 (TFLOP/s) vs bmm"][2], "n/a (no reference)")
        self.assertNotIn("  grouped GEMM tma k 128 / torch bmm, both in the contract's layout", rows)
        self.assertNotIn("grouped GEMM tma k 128 / torch bmm, both in the contract's layout", rows)


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
