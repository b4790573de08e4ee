"""bench/decode/table.py on the JSON of real runs (testdata/: an H200's
whole run of 2026-12-04, an H100's `decode_bench --only-gqa
--tables-in-order` of 2026-12-06, as bench/decode/run.sh wrote them), and
on a hand-made flashinfer_decode.py JSON (testdata/synthetic_flashinfer_decode.json:
the keys that script writes, made-up figures; no FlashInfer run yet).

Regression: with the copy-engine rows present, the torch SDPA rows were
missing from the table (a loop's target had the name of torch_sdpa.py's
result, which it overwrote with None). The expected ratio is computed here
from the two JSONs' own fields.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest

import junit_unittest
from table_rows import table_rows

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "testdata", "h200_2026-12-04_decode_bench.json")
TORCH = os.path.join(HERE, "testdata", "h200_2026-12-04_torch_sdpa.json")
PARTIAL = os.path.join(HERE, "testdata", "h100_2026-12-06_only_gqa_in_order_decode_bench.json")
PARTIAL_TORCH = os.path.join(HERE, "testdata", "h100_2026-12-06_only_gqa_torch_sdpa.json")
FLASHINFER = os.path.join(HERE, "testdata", "synthetic_flashinfer_decode.json")


def table(*args):
    return table_rows(os.path.join(HERE, "table.py"), BENCH, *args)


class DecodeTableTest(unittest.TestCase):
    def test_the_sdpa_rows_are_there_beside_the_copy_engine_rows(self):
        import json
        rows = table("--torch", TORCH)
        self.assertIn("tma persistent bf16 32 x 4096 (128 blocks), fraction of copy", rows)
        b, t = json.load(open(BENCH)), json.load(open(TORCH))
        want = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_tma_persist_rule_us"] * 1e3) / t["best_kv_gbps"]
        got = rows["tma persistent bf16 over torch SDPA (K+V bytes/s)"]
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


    def test_runs_before_the_chooser_have_no_chooser_rows(self):
        self.assertFalse([k for k in table("--torch", TORCH) if "chooser" in k])


class ChooserRowsTest(unittest.TestCase):
    """The chooser's rows, on the H200 run's JSON with the keys decode_bench
    now writes added from that run's own fields (the rule's pick there: the
    _tma persistent launcher at 128 blocks; 1 x 32768 fp8 at a grid the run
    did not time)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="decode-table-test-")
        b = json.load(open(BENCH))
        for key in ("gqa_bf16", "gqa_fp8", "long_seq", "long_seq_fp8"):
            b[key + "_chooser_alt"] = "tma_persist"
            b[key + "_chooser_source"] = "rule"
            b[key + "_chooser_num_splits"] = 0
            b[key + "_chooser_num_ctas"] = 128
            if key != "long_seq_fp8":
                b[key + "_chooser_us"] = b[key + "_mma_tma_persist128_us"]
                b[key + "_chooser_fraction_of_copy"] = b[key + "_mma_tma_persist_rule_fraction_of_copy"]
        self.b = b
        self.path = os.path.join(self.tmp, "bench.json")
        with open(self.path, "w") as f:
            json.dump(b, f)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_the_pick_its_fraction_of_copy_and_sdpa(self):
        rows = table_rows(os.path.join(HERE, "table.py"), self.path, "--torch", TORCH)
        b, t = self.b, json.load(open(TORCH))
        got = rows["chooser's pick bf16 32 x 4096: tma_persist (128 blocks), from the rule, fraction of copy"]
        self.assertAlmostEqual(float(got[0]), b["gqa_bf16_mma_tma_persist_rule_fraction_of_copy"], places=3)
        want = b["gqa_bf16_mma_kv_bytes"] / (b["gqa_bf16_mma_tma_persist128_us"] * 1e3) / t["best_kv_gbps"]
        got = rows["chooser's pick bf16 32 x 4096 over torch SDPA (K+V bytes/s)"]
        self.assertAlmostEqual(float(got[0]), want, places=3)
        self.assertEqual(got[1], ">= 1.000")
        got = rows["chooser's pick fp8 32 x 4096: tokens/s over the chooser's bf16 pick"]
        self.assertAlmostEqual(float(got[0]), b["gqa_bf16_mma_tma_persist128_us"] / b["gqa_fp8_mma_tma_persist128_us"],
                               places=3)

    def test_a_pick_the_run_did_not_time_is_na(self):
        rows = table_rows(os.path.join(HERE, "table.py"), self.path)
        self.assertEqual(rows["chooser's pick fp8 1 x 32768: tma_persist (128 blocks), from the rule, fraction of copy"][0],
                         "n/a")
        self.assertFalse([k for k in rows if "SDPA" in k])


class FlashInferRowsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="decode-table-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, obj):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_klaunch_over_flashinfer_at_32x4096_bf16_is_the_target_row(self):
        rows = table("--torch", TORCH, "--flashinfer", FLASHINFER)
        b, fi = json.load(open(BENCH)), json.load(open(FLASHINFER))
        r = fi["shapes"]["32x4096_bf16"]
        want = r["best_us"] / b["gqa_bf16_mma_tma_persist_rule_us"]
        got = rows["klaunch tma persistent over FlashInfer, bf16 32 x 4096: tokens/s"]
        self.assertAlmostEqual(float(got[0]), want, places=3)
        self.assertEqual(got[1], ">= 1.000")
        self.assertIn("meets" if want >= 1 else "MISSES", got[2])
        # FlashInfer's own default beside its best variant.
        got = rows["klaunch tma persistent over FlashInfer's default (cuda_cores), bf16 32 x 4096: tokens/s"]
        self.assertAlmostEqual(float(got[0]), r["variants"]["cuda_cores"]["best_us"]
                               / b["gqa_bf16_mma_tma_persist_rule_us"], places=3)
        label = "FlashInfer decode bf16 32 x 4096 (%s, graph replay): K+V GB/s" % r["best"]
        self.assertAlmostEqual(float(rows[label][0]), r["best_kv_gbps"], places=0)
        # The SDPA rows stay.
        self.assertIn("tma persistent bf16 over torch SDPA (K+V bytes/s)", rows)

    def test_fp8_and_long_sequence_rows_read_their_own_keys(self):
        rows = table("--flashinfer", FLASHINFER)
        b, fi = json.load(open(BENCH)), json.load(open(FLASHINFER))
        for shape, label, key in (("32x4096_fp8", "fp8 32 x 4096", "gqa_fp8_mma_tma_persist_rule_us"),
                                  ("1x32768_bf16", "bf16 1 x 32768", "long_seq_mma_tma_persist_rule_us"),
                                  ("1x32768_fp8", "fp8 1 x 32768", "long_seq_fp8_mma_tma_persist_rule_us")):
            got = rows["klaunch tma persistent over FlashInfer, %s: tokens/s" % label]
            self.assertAlmostEqual(float(got[0]), fi["shapes"][shape]["best_us"] / b[key], places=3)
            self.assertEqual(got[1], "(report)")
        got = rows["FlashInfer decode fp8 32 x 4096: tokens/s over its bf16"]
        self.assertAlmostEqual(float(got[0]), fi["fp8_over_bf16_tokens_per_s"], places=3)

    def test_the_grid_rows_take_the_rule_grid_not_one_block_an_sm_nor_mma(self):
        b = json.load(open(BENCH))
        fi = json.load(open(FLASHINFER))
        sms = int(b["sm_count"])
        for length, us in ((256, 20.0), (512, 30.0), (1024, 50.0), (2048, 90.0), (4096, 170.0)):
            b["fixed_32_bf16_ctas128_len%d_us" % length] = us
            b["fixed_32_bf16_ctas%d_len%d_us" % (sms, length)] = 1e6  # one block an SM: not the rule's
            b["fixed_32_bf16_mma_ctas128_len%d_us" % length] = 1e6  # the _mma persistent: not this row
        rows = table_rows(os.path.join(HERE, "table.py"), self.write("bench.json", b), "--flashinfer", FLASHINFER)
        got = rows["klaunch tma persistent (128 blocks) over FlashInfer, bf16 32 x L: tokens/s by L"]
        cells = dict(c.split(": ") for c in got[0].split(", "))
        self.assertEqual(sorted(int(k) for k in cells), [256, 512, 1024, 2048, 4096])
        self.assertAlmostEqual(float(cells["256"]), fi["shapes"]["32x256_bf16"]["best_us"] / 20.0, places=3)
        self.assertAlmostEqual(float(cells["4096"]), fi["shapes"]["32x4096_bf16"]["best_us"] / 170.0, places=3)
        self.assertFalse([k for k in rows if "over FlashInfer" in k and "fp8 32 x L" in k])  # no fp8 keys given

    def test_a_failed_flashinfer_run_is_one_row_saying_why(self):
        fi = {"ok": False, "program": "flashinfer_decode.py",
              "error": "FlashInfer is not importable: ModuleNotFoundError: No module named 'flashinfer'"}
        rows = table("--flashinfer", self.write("fi.json", fi))
        self.assertEqual(rows["FlashInfer decode"][2], fi["error"])
        self.assertFalse([k for k in rows if "over FlashInfer" in k])

    def test_a_shape_whose_variants_all_failed_says_why(self):
        fi = json.load(open(FLASHINFER))
        r = fi["shapes"]["1x32768_fp8"]
        for v in r["variants"].values():
            for k in ("us", "us_graph", "best_us", "kv_gbps", "tokens_per_s"):
                v.pop(k, None)
            v["error"] = "RuntimeError: output differs from the PyTorch reference"
        for k in ("best", "best_us", "best_kv_gbps", "best_tokens_per_s"):
            r.pop(k)
        rows = table("--flashinfer", self.write("fi.json", fi))
        self.assertIn("output differs", rows["FlashInfer decode fp8 1 x 32768"][2])
        self.assertNotIn("klaunch tma persistent over FlashInfer, fp8 1 x 32768: tokens/s", rows)
        self.assertIn("klaunch tma persistent over FlashInfer, bf16 1 x 32768: tokens/s", rows)

    def test_tables_in_order_are_named_beside_flashinfers_shuffled_ones(self):
        rows = table_rows(os.path.join(HERE, "table.py"), PARTIAL, "--flashinfer", FLASHINFER)
        self.assertIn("klaunch tma persistent over FlashInfer, bf16 32 x 4096 (klaunch's tables in order, "
                      "FlashInfer's shuffled): tokens/s", rows)


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
