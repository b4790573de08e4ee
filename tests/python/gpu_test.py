"""The Python launchers on a GPU, from PyTorch, against PyTorch references:
one launcher of each family and more (paged decode bf16 GQA on tensor
cores and fp8, MLA rope extraction and absorbed attention), the variant
picked from the arguments, launches on a side stream, under CUDA graph
capture (and the refusal to load during one), on every GPU without
changing PyTorch's current device, and tensors that come as
__cuda_array_interface__ or DLPack objects (and CuPy arrays where CuPy is).

Every test skips, saying why, without torch or without a CUDA device.

    ./bazelw test //tests/python:gpu_test                       (here: skips)
    bash tools/gpu/stage.sh && bash .gpu/run.sh python          (a GPU machine)
    PYTHONPATH=.gpu/python python3 tests/python/gpu_test.py     (the same, by hand)
"""

import os
import sys
import unittest

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
    WHY = "torch.cuda.is_available() is False" if not HAVE_GPU else ""
except Exception as e:  # no torch here: every test skips
    torch = None
    HAVE_GPU = False
    WHY = "PyTorch is not importable (%s)" % e

import junit_unittest

import klaunch
import klaunch_mla_prefill as mla
import klaunch_paged_decode as pd


def paged_problem(num_seqs, lens, nq, nkv, hd, block_size, dtype, seed=0, device="cuda", cache_stride=None):
    """A paged KV cache: each sequence's blocks scattered over a shuffled
    pool, its block table, lengths, and the queries."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    max_blocks = max((n + block_size - 1) // block_size for n in lens)
    num_blocks = num_seqs * max_blocks + 3
    perm = torch.randperm(num_blocks, generator=g)
    tables = perm[:num_seqs * max_blocks].reshape(num_seqs, max_blocks).to(torch.int32)
    k = torch.rand(num_blocks, block_size, nkv, hd, generator=g) * 2 - 1
    v = torch.rand(num_blocks, block_size, nkv, hd, generator=g) * 2 - 1
    q = (torch.rand(num_seqs, nq, hd, generator=g) * 2 - 1).to(torch.bfloat16)
    return dict(q=q.to(device), k=k, v=v, tables=tables.to(device), lens=torch.tensor(lens, dtype=torch.int32).to(device),
                max_blocks=max_blocks)


def paged_reference(q, k, v, tables, lens, scale):
    """float64 attention of each query head over its sequence's positions."""
    num_seqs, nq, hd = q.shape
    nkv = k.shape[2]
    group = nq // nkv
    out = torch.zeros(num_seqs, nq, hd, dtype=torch.float64)
    tables, lens, q = tables.cpu(), lens.cpu(), q.cpu().double()
    for s in range(num_seqs):
        n = int(lens[s])
        if n == 0:
            continue
        bs = k.shape[1]
        blocks = tables[s, :(n + bs - 1) // bs].long()
        ks = k[blocks].reshape(-1, nkv, hd)[:n].double()
        vs = v[blocks].reshape(-1, nkv, hd)[:n].double()
        for h in range(nq):
            scores = ks[:, h // group] @ q[s, h] * scale
            p = torch.softmax(scores, 0)
            out[s, h] = p @ vs[:, h // group]
    return out


def close(test, got, want, atol, rtol, what):
    got = got.double().cpu()
    err = (got - want).abs()
    bound = atol + rtol * want.abs()
    bad = int((err > bound).sum())
    test.assertEqual(bad, 0, "%s: %d of %d elements off (max error %.3g)" % (what, bad, err.numel(), float(err.max())))


@unittest.skipUnless(HAVE_GPU, WHY)
class PagedDecode(unittest.TestCase):
    def test_bf16_gqa_on_tensor_cores_picks_the_variant_of_its_group(self):
        for nq, nkv in ((32, 8), (64, 8)):  # group 4: gqa4_d128; group 8: gqa8_d128
            p = paged_problem(5, [1, 17, 300, 1000, 0], nq, nkv, 128, 16, torch.bfloat16, seed=nq)
            k, v = p["k"].to(torch.bfloat16), p["v"].to(torch.bfloat16)
            out = torch.full_like(p["q"], float("nan"))
            scale = 128 ** -0.5
            pd.paged_decode_attn_bf16_gqa_mma(p["q"], k.cuda(), v.cuda(), out, p["tables"], p["lens"], p["max_blocks"], 5,
                                              nq, nkv, 128, 16, scale, nq * 128, 0)
            torch.cuda.synchronize()
            want = paged_reference(p["q"], k.float(), v.float(), p["tables"], p["lens"], scale)
            close(self, out, want, 2e-2, 2e-2, "group %d" % (nq // nkv))
            self.assertIn((torch.cuda.current_device(), "gqa%d_d128" % (nq // nkv)), pd._F.modules())

    def test_fp8_cache_with_scales_and_a_block_stride(self):
        nq, nkv, hd, bs = 16, 4, 128, 16
        p = paged_problem(3, [5, 64, 333], nq, nkv, hd, bs, torch.float8_e4m3fn, seed=3)
        stride = bs * nkv * hd + 64  # cache blocks 64 elements apart
        def pack(x):
            flat = torch.zeros(x.shape[0], stride, dtype=torch.float8_e4m3fn)
            flat[:, :bs * nkv * hd] = (x * 4).to(torch.float8_e4m3fn).reshape(x.shape[0], -1)
            return flat.cuda()
        k8, v8 = pack(p["k"]), pack(p["v"])
        out = torch.empty_like(p["q"])
        scale = hd ** -0.5
        pd.paged_decode_attn_fp8(p["q"], k8[:, :bs * nkv * hd], v8[:, :bs * nkv * hd], out, p["tables"], p["lens"],
                                 p["max_blocks"], 3, nq, nkv, hd, bs, scale, 0.25, 0.25, nq * hd, stride, 0)
        torch.cuda.synchronize()
        deq = lambda f: f[:, :bs * nkv * hd].float().cpu().reshape(-1, bs, nkv, hd) * 0.25
        want = paged_reference(p["q"], deq(k8), deq(v8), p["tables"], p["lens"], scale)
        close(self, out, want, 2e-2, 2e-2, "fp8")

    def test_wrong_dtype_device_and_layout_are_refused_before_launching(self):
        p = paged_problem(2, [3, 4], 8, 8, 64, 16, torch.bfloat16)
        k = p["k"].to(torch.bfloat16).cuda()
        out = torch.empty_like(p["q"])
        args = [p["q"], k, k, out, p["tables"], p["lens"], p["max_blocks"], 2, 8, 8, 64, 16, 0.125, 512, 0]
        for i, bad, cls in ((1, k.float(), klaunch.DtypeError), (1, k.cpu(), klaunch.DeviceError),
                            (4, torch.cat([p["tables"], p["tables"]], 1)[:, ::2], klaunch.LayoutError),
                            (0, None, klaunch.NullPointerError)):
            a = list(args)
            a[i] = bad
            with self.assertRaises(cls):
                pd.paged_decode_attn_bf16(*a)


@unittest.skipUnless(HAVE_GPU, WHY)
class MlaPrefill(unittest.TestCase):
    def test_rope_extract_is_a_copy(self):
        tokens, nq, nope, rope = 37, 16, 128, 64
        hd = nope + rope
        q_dim = nq * hd + 64
        full = torch.randn(tokens, q_dim, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(tokens, nq, rope, dtype=torch.bfloat16, device="cuda")
        mla.mla_q_rope_extract_batched(full, out, tokens, nq, hd, nope, rope, q_dim)
        torch.cuda.synchronize()
        want = full[:, :nq * hd].reshape(tokens, nq, hd)[:, :, nope:]
        self.assertTrue(torch.equal(out, want))

    def test_rope_extract_through_tensor_maps(self):
        tokens, nq, nope, rope = 37, 16, 128, 64
        hd = nope + rope
        q_dim = nq * hd + 64
        full = torch.randn(tokens, q_dim, dtype=torch.bfloat16, device="cuda")
        out = torch.full((tokens, nq, rope), float("nan"), dtype=torch.bfloat16, device="cuda")
        slices = full[:, :nq * hd].unflatten(1, (nq, hd))[:, :, nope:]  # strides (q_dim, hd, 1)
        q_map = mla.mla_q_rope_extract_tma_q_map_encode(slices)
        out_map = mla.mla_q_rope_extract_tma_out_map_encode(out)
        mla.mla_q_rope_extract_tma(q_map, out_map, tokens, nq, rope)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, slices))
        with self.assertRaises(klaunch.TensorMapError):  # cuTensorMapEncodeTiled's rules, checked first
            mla.mla_q_rope_extract_tma_q_map_encode(full.view(-1)[1:1 + tokens * nq * rope].view(tokens, nq, rope))

    def test_absorbed_attention_picks_the_variant_of_its_head_dim(self):
        batch, seq, nq = 2, 97, 4
        for head_dim in (320, 576):
            kv_lora = head_dim - 64
            q = torch.randn(batch, seq, nq, head_dim, dtype=torch.bfloat16, device="cuda") * 0.5
            kv = torch.randn(batch, seq, head_dim, dtype=torch.bfloat16, device="cuda") * 0.5
            out = torch.empty(batch, seq, nq, kv_lora, dtype=torch.bfloat16, device="cuda")
            scale = head_dim ** -0.5
            mla.mla_absorbed_attention_mma(q, kv, out, seq, batch, nq, head_dim, kv_lora, scale, True)
            torch.cuda.synchronize()
            s = torch.einsum("bthd,bsd->bhts", q.double(), kv.double()) * scale
            mask = torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril()
            s = s.masked_fill(~mask, float("-inf"))
            want = torch.einsum("bhts,bsd->bthd", torch.softmax(s, -1), kv.double()[..., :kv_lora])
            close(self, out, want.cpu(), 3e-2, 3e-2, "head_dim %d" % head_dim)


def small_decode(device="cuda"):
    p = paged_problem(4, [7, 30, 100, 64], 32, 8, 128, 16, torch.bfloat16, device=device)
    k, v = p["k"].to(torch.bfloat16).to(device), p["v"].to(torch.bfloat16).to(device)
    return p, k, v


def run_decode(p, k, v, out, **kw):
    pd.paged_decode_attn_bf16_gqa(p["q"], k, v, out, p["tables"], p["lens"], p["max_blocks"], 4, 32, 8, 128, 16,
                                  128 ** -0.5, 32 * 128, 0, **kw)


@unittest.skipUnless(HAVE_GPU, WHY)
class StreamsGraphsDevices(unittest.TestCase):
    def reference(self, p, k, v):
        return paged_reference(p["q"], k.float().cpu(), v.float().cpu(), p["tables"], p["lens"], 128 ** -0.5)

    def test_a_launch_on_a_side_stream(self):
        p, k, v = small_decode()
        out = torch.zeros_like(p["q"])
        s = torch.cuda.Stream()
        torch.cuda.current_stream().synchronize()
        with torch.cuda.stream(s):
            run_decode(p, k, v, out)  # stream=None: torch's current stream, s
        s.synchronize()
        close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "side stream")
        out.zero_()
        run_decode(p, k, v, out, stream=s)
        s.synchronize()
        close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "stream=")

    def test_graph_capture_and_replay(self):
        p, k, v = small_decode()
        out = torch.zeros_like(p["q"])
        pd.load(variant="gqa4_d128")  # load before capturing
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            run_decode(p, k, v, out)  # warm-up, as torch asks
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run_decode(p, k, v, out)
        for seed in range(3):
            fresh = paged_problem(4, [7, 30, 100, 64], 32, 8, 128, 16, torch.bfloat16, seed=10 + seed)
            p["q"].copy_(fresh["q"])
            out.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "replay %d" % seed)

    def test_no_load_during_a_capture(self):
        mod = pd._F.modules().get((torch.cuda.current_device(), "gqa8_d128"))
        if mod is not None:
            mod.close()
        p, k, v = small_decode()
        k4, v4 = k[:, :, :4].contiguous(), v[:, :, :4].contiguous()
        out = torch.zeros_like(p["q"])
        pd.load(variant="gqa4_d128")  # the device's backend is open
        g = torch.cuda.CUDAGraph()
        with self.assertRaises(klaunch.CaptureActiveError) as e:
            with torch.cuda.graph(g):
                # group 8: gqa8_d128, not loaded: refused, the capture intact
                pd.paged_decode_attn_bf16_gqa(p["q"], k4, v4, out, p["tables"], p["lens"], p["max_blocks"], 4, 32, 4,
                                              128, 16, 0.1, 4096, 0)
        self.assertIn("loading there would invalidate the capture", str(e.exception))
        with self.assertRaises(klaunch.CaptureActiveError):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                pd.load(variant="gqa8_d128")

    def test_every_device_and_the_current_device_is_unchanged(self):
        before = torch.cuda.current_device()
        for d in range(torch.cuda.device_count()):
            p, k, v = small_decode(device="cuda:%d" % d)
            out = torch.zeros_like(p["q"])
            run_decode(p, k, v, out)
            torch.cuda.synchronize(d)
            self.assertEqual(torch.cuda.current_device(), before)
            close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "cuda:%d" % d)
            if d != before:
                with self.assertRaises(klaunch.DeviceError):
                    run_decode(p, k, v, out, module=pd.load(before, "gqa4_d128"))

    def test_array_interface_and_dlpack_objects(self):
        p, k, v = small_decode()
        out = torch.zeros_like(p["q"])

        class Cai:  # only __cuda_array_interface__: the driver says its device
            def __init__(self, t):
                self.t = t
                self.__cuda_array_interface__ = t.__cuda_array_interface__

        class DL:  # only DLPack
            def __init__(self, t):
                self.t = t

            def __dlpack__(self, **kw):
                return self.t.__dlpack__(**kw)

            def __dlpack_device__(self):
                return self.t.__dlpack_device__()

        pd.paged_decode_attn_bf16_gqa(DL(p["q"]), DL(k), DL(v), DL(out), Cai(p["tables"]), Cai(p["lens"]),
                                      p["max_blocks"], 4, 32, 8, 128, 16, 128 ** -0.5, 32 * 128, 0)
        torch.cuda.synchronize()
        close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "interfaces")
        host = torch.zeros(16, dtype=torch.int32).pin_memory()

        class HostCai:
            __cuda_array_interface__ = {"shape": (16,), "typestr": "<i4", "data": (host.data_ptr(), False), "version": 2}

        with self.assertRaises(klaunch.DeviceError):
            pd.paged_decode_attn_bf16_gqa(p["q"], k, v, out, HostCai(), p["lens"], p["max_blocks"], 4, 32, 8, 128, 16,
                                          0.1, 4096, 0)

    def test_fatbins_from_bytes_and_files(self):
        import ctypes
        import tempfile

        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        if not pd._F.lib.kl__py_fatbin(b"gqa8_d128", ctypes.byref(data), ctypes.byref(size)):
            self.skipTest("this library embeds no fatbin")
        image = ctypes.string_at(data, size.value)
        from_bytes = pd.load(variant="gqa8_d128", fatbin=image)
        self.assertEqual((from_bytes.variant, from_bytes.backend), ("gqa8_d128", "cuda"))
        with tempfile.NamedTemporaryFile(suffix=".fatbin") as f:
            f.write(image)
            f.flush()
            from_file = pd.load(fatbin=f.name)  # the variant its metadata names
            self.assertEqual(from_file.variant, "gqa8_d128")
            with self.assertRaises(klaunch.VariantMismatchError):
                pd.load(variant="gqa4_d128", fatbin=f.name)
        p, k, v = small_decode()
        out = torch.zeros_like(p["q"])
        pd.paged_decode_attn_bf16(p["q"], k, v, out, p["tables"], p["lens"], p["max_blocks"], 4, 32, 8, 128, 16,
                                  128 ** -0.5, 32 * 128, 0, module=from_file)
        torch.cuda.synchronize()
        close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "from a file")
        with self.assertRaises(klaunch.FileIoError):
            pd.load(fatbin="/nonexistent/paged_decode_gqa8_d128.fatbin")
        with self.assertRaises(klaunch.InvalidImageError):
            pd.load(fatbin=b"\x50\xed\x55\xba" + b"\0" * 60)
        pd.load(variant="gqa8_d128")  # the embedded one again, for the tests after

    def test_cupy_arrays(self):
        try:
            import cupy
        except Exception as e:
            self.skipTest("CuPy is not importable (%s)" % e)
        p, k, v = small_decode()
        out = torch.zeros_like(p["q"])
        tables = cupy.asarray(p["tables"])  # int32 through __cuda_array_interface__
        lens = cupy.asarray(p["lens"])
        torch.cuda.synchronize()
        pd.paged_decode_attn_bf16_gqa(p["q"], k, v, out, tables, lens, p["max_blocks"], 4, 32, 8, 128, 16, 128 ** -0.5,
                                      32 * 128, 0)
        torch.cuda.synchronize()
        close(self, out, self.reference(p, k, v), 2e-2, 2e-2, "cupy")


if __name__ == "__main__":
    junit_unittest.main()
