"""bench/decode/flashinfer_decode.py without a GPU: its shapes are
decode_bench.cc's (heads, head dim, block size, the 32 x 4096 and 1 x 32768
rows, the fixed-cost sweep's lengths), and its exit codes say why it could
not run: 4 without PyTorch or CUDA, 3 when FlashInfer cannot be imported (a
stand-in torch module that claims a GPU, on PYTHONPATH), each with the
reason in its JSON, so bench/decode/run.sh can report it and carry on.

    ./bazelw test //bench/decode:flashinfer_decode_test
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import junit_unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flashinfer_decode  # noqa: E402  (stdlib only at import)

SCRIPT = os.path.join(HERE, "flashinfer_decode.py")

FAKE_TORCH = '''
__version__ = "0.0+stand-in"
def device(name):
    return name
class cuda:
    @staticmethod
    def is_available():
        return %s
    @staticmethod
    def get_device_name(i):
        return "Stand-in GPU"
    @staticmethod
    def get_device_capability(i):
        return (9, 0)
'''


class ShapesTest(unittest.TestCase):
    def setUp(self):
        self.src = open(os.path.join(HERE, "decode_bench.cc")).read()

    def test_heads_head_dim_and_block_size_are_decode_benchs(self):
        m = re.search(r"constexpr uint32_t kNq = (\d+), kNkv = (\d+), kHd = (\d+), kBs = (\d+);", self.src)
        self.assertIsNotNone(m, "decode_bench.cc's constants moved")
        fd = flashinfer_decode
        self.assertEqual(tuple(int(x) for x in m.groups()), (fd.NQ, fd.NKV, fd.HD, fd.PAGE))

    def test_the_shapes_are_decode_benchs_rows_and_fixed_sweep(self):
        for seqs, length, fp8 in ((32, 4096, "false"), (32, 4096, "true"), (1, 32768, "false"), (1, 32768, "true")):
            self.assertIn('Shape{%d, %d, 0, %s}' % (seqs, length, fp8), self.src)
        m = re.search(r"nseq == 1 \? std::vector<uint32_t>\{([\d, ]+)\}\s*: std::vector<uint32_t>\{([\d, ]+)\}",
                      self.src)
        self.assertIsNotNone(m, "decode_bench.cc's fixed-cost sweep moved")
        one = [int(x) for x in m.group(1).split(",")]
        many = [int(x) for x in m.group(2).split(",")]
        got = flashinfer_decode.shapes(True)
        want = set((1, n, kv) for n in one for kv in ("bf16", "fp8")) | set(
            (32, n, kv) for n in many for kv in ("bf16", "fp8"))
        self.assertEqual(set(got), want)
        self.assertEqual(len(got), len(want))
        self.assertEqual(set(flashinfer_decode.shapes(False)),
                         set((s, n, kv) for s, n in ((32, 4096), (1, 32768)) for kv in ("bf16", "fp8")))


class ExitCodesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fi-decode-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_script(self, gpu, *args):
        site = os.path.join(self.tmp, "fake")
        os.makedirs(os.path.join(site, "torch"), exist_ok=True)
        with open(os.path.join(site, "torch", "__init__.py"), "w") as f:
            f.write(FAKE_TORCH % gpu)
        out = os.path.join(self.tmp, "fi.json")
        env = dict(os.environ, PYTHONPATH=site, FLASHINFER_WORKSPACE_BASE=os.path.join(self.tmp, "ws"))
        r = subprocess.run([sys.executable, SCRIPT, "--json", out, "--site", os.path.join(self.tmp, "site")]
                           + list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        return r, json.load(open(out))

    def test_no_cuda_is_exit_4_with_the_reason(self):
        r, j = self.run_script(False, "--fi", os.path.join(self.tmp, "nothing"))
        self.assertEqual(r.returncode, flashinfer_decode.EXIT_NO_GPU, r.stderr)
        self.assertFalse(j["ok"])
        self.assertIn("is_available() is False", j["error"])

    def test_a_fi_folder_without_wheels_is_exit_3_naming_the_prep(self):
        empty = os.path.join(self.tmp, "fi")
        os.makedirs(empty)
        r, j = self.run_script(True, "--fi", empty)
        self.assertEqual(r.returncode, flashinfer_decode.EXIT_NO_FLASHINFER, r.stderr)
        self.assertFalse(j["ok"])
        self.assertTrue(j["error"].startswith("FlashInfer is not importable: "), j["error"])
        self.assertIn("flashinfer_prep.sh", j["error"])
        self.assertIn("FlashInfer is not importable", r.stderr)
        self.assertEqual(j["device"], "Stand-in GPU")

    def test_no_flashinfer_on_the_path_is_exit_3(self):
        r, j = self.run_script(True, "--fi", os.path.join(self.tmp, "nothing"))
        self.assertEqual(r.returncode, flashinfer_decode.EXIT_NO_FLASHINFER, r.stderr)
        self.assertIn("flashinfer", j["error"])


if __name__ == "__main__":
    junit_unittest.main(argv=sys.argv[1:])
