"""bench/decode/table.py on the JSON of a real H200 run
(testdata/h200_2026-12-04_*.json, as bench/decode/run.sh wrote them).

Regression: with the copy-engine rows present, the torch SDPA rows were
missing from the table (a loop's target had the name of torch_sdpa.py's
result, which it overwrote with None). The expected ratio is computed here
from the two JSONs' own fields.
"""
import os
import sys
import unittest

import junit_unittest
from table_rows import table_rows

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "testdata", "h200_2026-12-04_decode_bench.json")
TORCH = os.path.join(HERE, "testdata", "h200_2026-12-04_torch_sdpa.json")


def table(*args):
    return table_rows(os.path.join(HERE, "table.py"), BENCH, *args)


class DecodeTableTest(unittest.TestCase):
    def test_the_sdpa_rows_are_there_beside_the_copy_engine_rows(self):
        import json
        rows = table("--torch", TORCH)
        self.assertIn("tma persistent bf16 32 x 4096 (128 blocks), fraction of copy", rows)
        b, t = json.load(open(BENCH)), json.load(open(TORCH))
        want = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_tma_persist_rule_us"] * 1e3) / t["best_kv_gbps"]
        got = rows["tma persistent bf16 (kl_paged_decode_gqa_pick's) over torch SDPA (K+V bytes/s)"]
        self.assertAlmostEqual(float(got[0]), want, places=3)
        self.assertEqual(got[1], ">= 1.000")
        self.assertIn("torch SDPA (enable_gqa) 32 x 4096 bf16: K+V GB/s", rows)

    def test_without_torch_there_is_no_sdpa_row(self):
        self.assertFalse([k for k in table() if "SDPA" in k])


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
