"""mla_decode_bench's JSON as its own writer makes it (json_fixture compiles
mla_decode_bench.cc with made-up rows and a faked driver: no GPU, nothing
measured), read back by json.load and by table.py; and the shapes' lengths
of mla_decode_bench.cc against those torch_baselines.py and flashinfer_mla.py
generate (the three must time the same lengths).

    ./bazelw test //bench/mla_decode:json_test
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import junit_unittest
from table_rows import table_rows

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flashinfer_mla  # noqa: E402  (stdlib only at import)
import torch_baselines  # noqa: E402


class MlaDecodeJsonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.json_path = os.path.join(cls.tmp, "bench.json")
        cls.shapes_path = os.path.join(cls.tmp, "shapes.json")
        subprocess.run([os.path.join(HERE, "json_fixture"), cls.json_path, cls.shapes_path], check=True,
                       stdout=subprocess.DEVNULL)
        cls.bench = json.load(open(cls.json_path))
        cls.shapes = json.load(open(cls.shapes_path))

    def test_the_json_parses_with_every_field(self):
        b = self.bench
        self.assertEqual(b["program"], "mla_decode_bench")
        self.assertEqual(b["cc"], "9.0")
        self.assertEqual(b["sm_count"], 132)
        self.assertEqual(b["pick"], {"bf16": "bf16_tma", "fp8": "fp8_mma"})
        self.assertTrue(b["launchers"]["bf16_tma_576"])
        self.assertFalse(b["launchers"]["fp8_tma_320"])
        self.assertEqual(b["notes"], ['fp8_tma D 576 left out: a "quoted" reason\\with a backslash'])
        for name, r in b["results"].items():
            for key in ("us", "shape", "launcher", "head_dim", "bytes", "kv_bytes", "flops", "tokens", "gbps",
                        "copy_ratio", "tflops", "tokens_per_s", "what"):
                self.assertIn(key, r, name)
            if r["bytes"]:
                self.assertAlmostEqual(r["gbps"], r["bytes"] / r["us"] * 1e-3, delta=1e-3 * r["gbps"])
                self.assertAlmostEqual(r["copy_ratio"], r["gbps"] / b["copy_gbps"], places=3)
            if r["tokens"]:
                self.assertAlmostEqual(r["tokens_per_s"] / (r["tokens"] / (r["us"] * 1e-6)), 1.0, places=5)
        mem = b["results"]["mem_fp8_mma_576"]
        self.assertEqual(mem["kv_bytes"], 128 * 4096 * 656)
        self.assertEqual(mem["flops"], 2.0 * 16 * 128 * 4096 * (576 + 512))

    def test_table_reads_it(self):
        rows = table_rows(os.path.join(HERE, "table.py"), self.json_path)
        for measure in ("mem bf16 D 576, bf16_tma (GB/s) vs copy", "varlen D 320, fp8_mma (Mtok/s) vs mem",
                        "fp8 mem D 576, fp8_mma (Mtok/s) vs bf16_mma",
                        "short D 576, bf16_tma, h_q 128 x 1024, CUDA graph replay (us a step)",
                        "schedule + combine, batch 128, D 576, bf16_mma's parts (us)"):
            self.assertIn(measure, rows)
        self.assertEqual(rows["compute bf16 D 576, bf16_mma (TFLOP/s) vs torch matmul"][3], "n/a (no baseline)")

    def test_the_three_programs_time_the_same_lengths(self):
        fi = flashinfer_mla.shapes(128, 32768)
        for name in ("mem", "varlen", "compute", "long"):
            s_q, h_q, lengths = fi[name]
            self.assertEqual((self.shapes[name]["s_q"], self.shapes[name]["h_q"]), (s_q, h_q), name)
            self.assertEqual(self.shapes[name]["lengths"], lengths, name)
        self.assertEqual(self.shapes["compute"]["lengths"], torch_baselines.compute_shape_lengths(128))
        varlen = self.shapes["varlen"]["lengths"]
        self.assertEqual(sum(varlen), 128 * 4096)
        self.assertTrue(all(1 <= x <= 8191 for x in varlen))
        compute = self.shapes["compute"]["lengths"]
        self.assertTrue(all(4096 <= x <= 32768 for x in compute))
        self.assertEqual(self.shapes["short"], {"s_q": 1, "h_q": 128, "lengths": [1024]})


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
