"""bench/decode/table.py on the JSON of real runs (testdata/: an H200's
whole run of 2026-12-04, an H100's `decode_bench --only-gqa
--tables-in-order` of 2026-12-06, as bench/decode/run.sh wrote them).

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
PARTIAL = os.path.join(HERE, "testdata", "h100_2026-12-06_only_gqa_in_order_decode_bench.json")
PARTIAL_TORCH = os.path.join(HERE, "testdata", "h100_2026-12-06_only_gqa_torch_sdpa.json")


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

    def test_a_partial_run_gets_its_rows_not_a_traceback(self):
        """Regression: on an --only-gqa run's JSON (no 1 x 32768, window or
        PDL keys) table.py died with a KeyError on long_seq_rule_splits."""
        import json
        rows = table_rows(os.path.join(HERE, "table.py"), PARTIAL, "--torch", PARTIAL_TORCH)
        b, t = json.load(open(PARTIAL)), json.load(open(PARTIAL_TORCH))
        self.assertEqual(b["block_tables"], "in order")
        got = rows["tma persistent bf16 32 x 4096 (128 blocks), fraction of copy"]
        self.assertAlmostEqual(float(got[0]), b["gqa_bf16_mma_tma_persist_rule_fraction_of_copy"], places=3)
        want = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_tma_seed_us"] * 1e3) / t["best_kv_gbps"]
        self.assertAlmostEqual(float(rows["tma seed grid bf16 over torch SDPA"][0]), want, places=3)
        self.assertFalse([k for k in rows if "32768" in k or k.startswith("window")])


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
