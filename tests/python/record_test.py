"""The Python launchers over klaunch's recording backend: what a launch
records, and every refusal a launch can meet without a GPU, each with its
class and message (the C launcher's own for the C checks).

    ./bazelw test //tests/python:record_test
"""

import random
import struct
import unittest

import python_test_support as S
from python_test_support import CudaArray, DLPackArray, klaunch, tensor

pd = S.klaunch_paged_decode
mla = S.klaunch_mla_prefill

Q, K, V, OUT, TABLES, LENS = (0x7f0000001000 + 0x10000 * i for i in range(6))


def decode_args(**over):
    """paged_decode_attn_bf16's arguments: 3 sequences, 32 query and 8 KV
    heads of 128, 16-position blocks."""
    a = dict(q=tensor("bf16", Q), k_cache=tensor("bf16", K), v_cache=tensor("bf16", V), output=tensor("bf16", OUT),
             block_tables=tensor("i32", TABLES), seq_lens=tensor("i32", LENS), max_blocks_per_seq=4, num_seqs=3,
             num_q_heads=32, num_kv_heads=8, head_dim=128, block_size=16, inv_sqrt_d=0.088, q_stride=32 * 128,
             sliding_window=0)
    a.update(over)
    return a


def launch(mod, fn=None, **over):
    (fn or pd.paged_decode_attn_bf16)(**decode_args(**over), module=mod)


class Records(unittest.TestCase):
    def setUp(self):
        self.mod = pd.load_record("gqa8_d128")

    def test_a_launch_records_grid_block_stream_and_the_packed_arguments(self):
        launch(self.mod, stream=0x5000)
        (r,) = self.mod.records()
        self.assertEqual(r.launcher, "paged_decode_attn_bf16")
        self.assertEqual(r.entry, "paged_decode_attn_bf16")
        self.assertEqual(r.grid, (32, 3, 1))  # (num_q_heads, num_seqs)
        self.assertEqual(r.block, (256, 1, 1))
        self.assertEqual(r.shared_bytes, 0)
        self.assertEqual(r.stream, 0x5000)
        want = struct.pack("<6Q", Q, K, V, OUT, TABLES, LENS) + struct.pack(
            "<5IfII", 4, 32, 8, 128, 16, struct.unpack("<f", struct.pack("<f", 0.088))[0], 32 * 128, 0)
        self.assertEqual(r.args, want)

    def test_the_layout_it_packs_by_is_the_c_launchers(self):
        params = pd._F.kernel_params("paged_decode_attn_bf16")
        self.assertEqual([p[0] for p in params], ["q", "k_cache", "v_cache", "output", "block_tables", "seq_lens",
                                                  "max_blocks_per_seq", "num_q_heads", "num_kv_heads", "head_dim",
                                                  "block_size", "inv_sqrt_d", "q_stride", "sliding_window"])
        self.assertEqual([p[2] for p in params], [0, 8, 16, 24, 32, 40, 48, 52, 56, 60, 64, 68, 72, 76])

    def test_check_only_launches_nothing(self):
        pd.paged_decode_attn_bf16(**decode_args(), module=self.mod, check_only=True)
        self.assertEqual(self.mod.records(), [])

    def test_a_module_launches_its_launchers_as_methods(self):
        self.mod.paged_decode_attn_bf16(*decode_args().values(), stream=7)
        self.assertEqual(self.mod.records()[0].stream, 7)
        with self.assertRaises(AttributeError):
            self.mod.no_such_launcher
        with self.assertRaises(klaunch.ArgumentTypeError):
            self.mod.paged_decode_attn_bf16(1, 2)

    def test_an_empty_grid_launches_nothing_and_succeeds(self):
        launch(self.mod, num_seqs=0)
        self.assertEqual(self.mod.records(), [])

    def test_bool_and_u64_parameters_pack_as_the_kernel_reads_them(self):
        mod = mla.load_record("deepseek_v4_flash")
        args = [tensor("bf16", 0x10000 * (i + 1)) for i in range(4)] + [100, 2, 4, 1, 576, 0.04, True]
        mla.mla_prefill_attention_320(*args, module=mod)
        (r,) = mod.records()
        self.assertEqual(r.args[-4:], struct.pack("<I", 1))  # bool: a u32 1
        self.assertEqual(r.grid, (4, 7, 2))  # (num_q_heads, ceil_div(100, 16), batch)
        fp8 = pd.load_record("gqa4_d128")
        pd.paged_decode_attn_fp8(tensor("bf16", Q), tensor("fp8_e4m3", K), tensor("fp8_e4m3", V), tensor("bf16", OUT),
                                 tensor("i32", TABLES), tensor("i32", LENS), 4, 3, 32, 8, 128, 16, 0.088, 0.5, 2.0,
                                 4096, 2**40, 0, module=fp8)
        (r,) = fp8.records()
        params = dict((p[0], p) for p in pd._F.kernel_params("paged_decode_attn_fp8"))
        off = params["cache_stride"][2]
        self.assertEqual(r.args[off:off + 8], struct.pack("<Q", 2**40))

    def test_streams_from_objects_and_handles(self):
        class TorchLikeStream:
            cuda_stream = 0x1234

        class ProtocolStream:
            def __cuda_stream__(self):
                return (0, 0x4321)

        for stream, handle in ((TorchLikeStream(), 0x1234), (ProtocolStream(), 0x4321), (0, 0), (2**64 - 1, 2**64 - 1)):
            self.mod.clear_records()
            launch(self.mod, stream=stream)
            self.assertEqual(self.mod.records()[0].stream, handle)

    def test_dlpack_exports_are_asked_for_the_launch_stream(self):
        q = tensor("bf16", Q, kind="dlpack")
        launch(self.mod, q=q, stream=0x77)
        launch(self.mod, q=q, stream=0)  # the legacy default stream is 1 in DLPack
        self.assertEqual(q.streams, [0x77, 1])

    def test_legacy_dlpack_and_byte_offsets(self):
        q = DLPackArray(Q, (3, 4096), 4, 16, versioned=False, byte_offset=256)
        launch(self.mod, q=q)
        self.assertEqual(self.mod.records()[0].args[:8], struct.pack("<Q", Q + 256))


class VariantChoice(unittest.TestCase):
    """Launches without module=: the device's registered module of the
    variant whose constants fit."""

    def setUp(self):
        for (device, variant), m in pd._F.modules().items():
            m.close()
        self.gqa4 = pd.load_record("gqa4_d128", register=True)
        self.gqa8 = pd.load_record("gqa8_d128", register=True)

    def tearDown(self):
        self.gqa4.close()
        self.gqa8.close()

    def test_the_variant_whose_constants_fit_launches(self):
        pd.paged_decode_attn_bf16_gqa(**decode_args(num_q_heads=16, num_kv_heads=4))
        pd.paged_decode_attn_bf16_gqa(**decode_args(num_q_heads=64, num_kv_heads=8, q_stride=64 * 128))
        self.assertEqual([r.grid for r in self.gqa4.records()], [(4, 3, 1)])
        self.assertEqual([r.grid for r in self.gqa8.records()], [(8, 3, 1)])

    def test_variant_names_one(self):
        pd.paged_decode_attn_bf16(**decode_args(), variant="gqa4_d128")
        self.assertEqual(len(self.gqa4.records()), 1)
        with self.assertRaises(klaunch.VariantMismatchError) as e:
            pd.paged_decode_attn_bf16(**decode_args(), variant="gqa2")
        self.assertIn("paged_decode has no variant 'gqa2' (it has gqa4_d128, gqa8_d128)", str(e.exception))

    def test_none_fits_the_c_launcher_refuses_in_the_first_registered(self):
        with self.assertRaises(klaunch.VariantMismatchError) as e:
            pd.paged_decode_attn_bf16_gqa(**decode_args(num_q_heads=16, num_kv_heads=8))
        self.assertTrue(str(e.exception).startswith(
            "KL_ERROR_VARIANT_MISMATCH: kl_paged_decode_attn_bf16_gqa: precondition `num_q_heads == num_kv_heads * "
            "DECODE_GQA_PACK_WIDTH` does not hold (num_q_heads = 16, num_kv_heads = 8, DECODE_GQA_PACK_WIDTH = 4)"),
            str(e.exception))

    def test_a_launcher_without_constants_takes_a_loaded_variant(self):
        pd.paged_decode_attn_bf16(**decode_args())
        self.assertEqual(len(self.gqa4.records()) + len(self.gqa8.records()), 1)

    def test_the_device_of_the_tensors_picks_the_module(self):
        other = pd.load_record("gqa4_d128", device=1, register=True)
        try:
            args = decode_args(num_q_heads=16, num_kv_heads=4)
            for name in ("q", "k_cache", "v_cache", "output", "block_tables", "seq_lens"):
                args[name] = tensor("i32" if name in ("block_tables", "seq_lens") else "bf16", 0x1000, device=1)
            pd.paged_decode_attn_bf16_gqa(**args)
            self.assertEqual(len(other.records()), 1)
            self.assertEqual(self.gqa4.records(), [])
        finally:
            other.close()


def refusal(test, cls, call, *args, **kwargs):
    with test.assertRaises(cls) as e:
        call(*args, **kwargs)
    return str(e.exception)


class Extents(unittest.TestCase):
    """Each tensor against its pointer's declared extent (the spec's
    `extent`): paged_decode_attn_bf16 with 3 sequences of 32 heads of 128
    needs q: (3 - 1) * q_stride + 32 * 128, output: 3 * 32 * 128 = 12288,
    block_tables: 3 * 4 = 12, seq_lens: 3 elements; the caches are bounded
    by the table's entries (not checked). Nothing is launched on a refusal."""

    def setUp(self):
        self.mod = pd.load_record("gqa8_d128")

    def refused(self, cls, **over):
        self.mod.clear_records()
        msg = refusal(self, cls, launch, self.mod, **over)
        self.assertEqual(self.mod.records(), [])
        return msg

    def sized(self, **over):
        """decode_args with every tensor exactly as large as its extent."""
        a = dict(q=tensor("bf16", Q, 3 * 4096), output=tensor("bf16", OUT, 12288),
                 block_tables=tensor("i32", TABLES, 12), seq_lens=tensor("i32", LENS, 3))
        a.update(over)
        return a

    def test_tensors_exactly_as_large_as_their_extents_launch(self):
        launch(self.mod, **self.sized())
        (r,) = self.mod.records()
        self.assertEqual(r.extents, {"q": 12288, "k_cache": None, "v_cache": None, "output": 12288,
                                     "block_tables": 12, "seq_lens": 3})

    def test_a_tensor_one_element_short(self):
        msg = self.refused(klaunch.ExtentError, **self.sized(output=tensor("bf16", OUT, 12287)))
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter output needs 12288 "
                              "elements (its extent num_seqs * num_q_heads * head_dim = 12288 with num_seqs = 3, "
                              "num_q_heads = 32, head_dim = 128); the tensor's strides reach 12287 "
                              "[specs/paged_decode.yaml:34:16]")
        self.assertIsInstance(klaunch.ExtentError("x"), klaunch.InvalidArgumentError)

    def test_a_tensor_one_row_short(self):
        msg = self.refused(klaunch.ExtentError, **self.sized(q=DLPackArray(Q, (2, 4096), 4, 16)))
        self.assertIn("parameter q needs 12288 elements", msg)
        self.assertIn("the tensor's strides reach 8192", msg)
        self.refused(klaunch.ExtentError, **self.sized(block_tables=DLPackArray(TABLES, (2, 4), 0, 32)))

    def test_a_strided_view_whose_last_row_ends_past_its_storage(self):
        # Rows 4096 elements apart in the tensor, 4160 apart for the kernel
        # (q_stride): its numel is 12288, its last row ends at 12288, the
        # kernel's at (3 - 1) * 4160 + 4096 = 12416.
        q = DLPackArray(Q, (3, 4096), 4, 16, strides=(4096, 1))
        msg = self.refused(klaunch.ExtentError, **self.sized(q=q, q_stride=4160))
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter q needs 12416 elements "
                              "(its extent (num_seqs - 1) * q_stride + (num_q_heads * head_dim) = 12416 with "
                              "num_seqs = 3, q_stride = 4160, num_q_heads = 32, head_dim = 128); the tensor's strides "
                              "reach 12288 [specs/paged_decode.yaml:31:16]")
        # The same rows as a view of a wider buffer: its strides reach the kernel's last row.
        launch(self.mod, **self.sized(q=DLPackArray(Q, (3, 4096), 4, 16, strides=(4160, 1)), q_stride=4160))

    def test_check_only_reports_it_too(self):
        self.mod.clear_records()
        with self.assertRaises(klaunch.ExtentError):
            pd.paged_decode_attn_bf16(**decode_args(**self.sized(seq_lens=tensor("i32", LENS, 2))), module=self.mod,
                                      check_only=True)
        self.assertEqual(self.mod.records(), [])

    def test_an_extent_past_64_bits_is_the_c_launchers_overflow(self):
        m = mla.load_record("deepseek_v4_flash")
        t = tensor("bf16", Q)
        with self.assertRaises(klaunch.OverflowError) as e:
            # k_out: num_tokens * nkv * hd = (2^31 - 1) * 2^31 * (2^32 - 1)
            mla.mla_kv_assemble_batched(t, t, t, t, 2**31 - 1, 2**31, 1, 0, 2**32 - 2, 2**32 - 1, 2**32 - 1, module=m)
        self.assertIn("kl_mla_kv_assemble_batched: extent of k_out = num_tokens * nkv * hd overflows 64 bits "
                      "(num_tokens = 2147483647, nkv = 2147483648, hd = 4294967295)", str(e.exception))
        self.assertEqual(m.records(), [])


class PythonChecks(unittest.TestCase):
    """What only Python can check: types, element types, devices, layouts,
    writability, ranges. Messages name the launcher, the parameter and its
    spec position."""

    def setUp(self):
        self.mod = pd.load_record("gqa8_d128")

    def refused(self, cls, **over):
        self.mod.clear_records()
        msg = refusal(self, cls, launch, self.mod, **over)
        self.assertEqual(self.mod.records(), [])
        return msg

    def test_none_for_a_pointer(self):
        msg = self.refused(klaunch.NoneArgumentError, k_cache=None)
        self.assertEqual(msg, "KL_ERROR_NULL_POINTER: kl_paged_decode_attn_bf16: parameter k_cache (const bf16*) is "
                              "None; the kernel reads its memory [specs/paged_decode.yaml:32:16]")
        self.assertIsInstance(klaunch.NoneArgumentError("x"), klaunch.NullPointerError)

    def test_a_null_address_is_the_c_launchers_refusal(self):
        msg = self.refused(klaunch.NullPointerError, output=tensor("bf16", 0))
        self.assertEqual(msg, "KL_ERROR_NULL_POINTER: kl_paged_decode_attn_bf16: parameter output is NULL "
                              "[specs/paged_decode.yaml:25]")

    def test_element_types(self):
        msg = self.refused(klaunch.DtypeError, q=CudaArray(Q, (64,), "<f4"))
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter q (const bf16*) has "
                              "__cuda_array_interface__ typestr '<f4'; the kernel reads bf16 (torch.bfloat16): "
                              "__cuda_array_interface__ has no bf16 type; pass it through DLPack or as a torch tensor "
                              "[specs/paged_decode.yaml:31:16]")
        msg = self.refused(klaunch.DtypeError, block_tables=DLPackArray(TABLES, (8,), 0, 64))
        self.assertIn("parameter block_tables (const i32*) has DLPack dtype code 0, bits 64; the kernel reads i32 "
                      "(torch.int32)", msg)
        self.refused(klaunch.DtypeError, q=CudaArray(Q, (64,), "<f2"))  # f16 is not bf16
        self.refused(klaunch.DtypeError, q=DLPackArray(Q, (64,), 4, 16, lanes=2))
        msg = self.refused(klaunch.DtypeError, q=CudaArray(Q, (64,), "<V2"))
        self.assertIn("__cuda_array_interface__ has no bf16 type; pass it through DLPack or as a torch tensor", msg)
        fp8 = pd.load_record("gqa8_d128")
        msg = refusal(self, klaunch.DtypeError, pd.paged_decode_attn_fp8, tensor("bf16", Q),
                      CudaArray(K, (64,), "|u1"), tensor("fp8_e4m3", V), tensor("bf16", OUT), tensor("i32", TABLES),
                      tensor("i32", LENS), 4, 3, 32, 8, 128, 16, 0.088, 1.0, 1.0, 4096, 16 * 8 * 128, 0, module=fp8)
        self.assertIn("view the bytes as torch.float8_e4m3fn", msg)
        self.assertTrue(issubclass(klaunch.DtypeError, TypeError))

    def test_void_pointers_take_any_element_type(self):
        # paged_decode's workspaces are typed; mla's and decode's have no
        # void*: the rule is tested on the converter.
        from klaunch import _args
        site = _args.Site("kl_x", "w", "x.yaml:1:1")
        p = _args.PointerArg(site, "void", False, "contiguous", "void*")
        for t in (CudaArray(Q, (8,), "<f8"), DLPackArray(Q, (8,), 2, 64)):
            p.check(_args.describe(t, site, 0))

    def test_devices(self):
        msg = self.refused(klaunch.DeviceError, v_cache=tensor("bf16", V, device=1))
        self.assertIn("parameter v_cache is on cuda:1; the module is loaded on cuda:0", msg)
        msg = self.refused(klaunch.DeviceError, v_cache=DLPackArray(V, (64,), 4, 16, device_type=1))
        self.assertIn("parameter v_cache is in cpu memory; the kernel reads device memory", msg)
        self.refused(klaunch.DeviceError, v_cache=DLPackArray(V, (64,), 4, 16, device_type=3))  # pinned host
        launch(self.mod, v_cache=DLPackArray(V, (64,), 4, 16, device_type=13))  # managed memory is fine
        # An array that does not say its device: on a recording module there
        # is no driver to ask (on a GPU the driver is asked: gpu_test).
        launch(self.mod, block_tables=CudaArray(TABLES, (12,), "<i4", device=None))
        self.assertEqual(len(self.mod.records()), 2)

    def test_tensors_of_one_launch_on_two_devices(self):
        args = decode_args(q=tensor("bf16", Q, device=1))
        msg = refusal(self, klaunch.DeviceError, pd.paged_decode_attn_bf16, **args)
        self.assertIn("parameter k_cache is on cuda:0; q (the first tensor) is on cuda:1: every tensor of a launch "
                      "is on one device", msg)

    def test_a_stream_of_another_device(self):
        class Dev:
            index = 1

        class Stream:
            cuda_stream = 5
            device = Dev()

        msg = self.refused(klaunch.DeviceError, stream=Stream())
        self.assertIn("the stream is on cuda:1; the launch is on cuda:0", msg)

    def test_layouts(self):
        # q is layout rows: any row stride, dense rows.
        launch(self.mod, q=DLPackArray(Q, (3, 32, 128), 4, 16, strides=(5000, 128, 1)))
        msg = self.refused(klaunch.LayoutError, q=DLPackArray(Q, (3, 32, 128), 4, 16, strides=(5000, 256, 1)))
        self.assertIn("parameter q (const bf16*) has shape [3, 32, 128] and strides [5000, 256, 1] (elements): every "
                      "dimension but the first must be dense (layout rows)", msg)
        self.refused(klaunch.LayoutError, q=DLPackArray(Q, (3, 4096), 4, 16, strides=(100, 1)))  # overlapping rows
        # k_cache is contiguous.
        msg = self.refused(klaunch.LayoutError, k_cache=DLPackArray(K, (4, 16), 4, 16, strides=(32, 1)))
        self.assertIn("not contiguous (layout contiguous): pass a contiguous tensor (.contiguous())", msg)
        self.refused(klaunch.LayoutError, block_tables=CudaArray(TABLES, (3, 4), "<i4", strides=(4, 12)))
        self.refused(klaunch.LayoutError, block_tables=CudaArray(TABLES, (4,), "<i4", strides=(6,)))  # not whole elements
        # Size-1 dimensions and empty tensors have no stride to check.
        launch(self.mod, block_tables=CudaArray(TABLES, (3, 1, 4), "<i4", strides=(16, 996, 4)))
        # (an empty table is 0 of the 12 elements 3 sequences need: for 0 sequences)
        launch(self.mod, num_seqs=0, block_tables=CudaArray(TABLES, (0, 4), "<i4", strides=(4, 40)))

    def test_read_only_tensors(self):
        msg = self.refused(klaunch.ReadOnlyError, output=DLPackArray(OUT, (64,), 4, 16, flags=1))
        self.assertIn("parameter output (bf16*) is read-only (from DLPack); the kernel writes through it", msg)
        args = dict(decode_args(), workspace=CudaArray(K, (64,), "<f4", readonly=True), num_splits=1,
                    workspace_bytes=10**9)
        del args["output"]
        msg = refusal(self, klaunch.ReadOnlyError, pd.paged_decode_split_bf16, **args, module=self.mod)
        self.assertIn("parameter workspace (f32*) is read-only (from __cuda_array_interface__)", msg)
        launch(self.mod, block_tables=CudaArray(TABLES, (12,), "<i4", readonly=True))  # const: reading is fine

    def test_objects_that_are_not_tensors(self):
        for bad, text in (([1, 2], "must be a device tensor (torch.Tensor, or an object with __cuda_array_interface__ "
                                   "or __dlpack__), got list"),
                          (Q, "must be a device tensor"),
                          (CudaArray(Q, (4,), "<i4", mask=object()), "has a masked __cuda_array_interface__"),
                          (DLPackArray(Q, (64,), 4, 16, flags=2), "was copied by its producer for DLPack"),
                          (DLPackArray(Q, (64,), 4, 16, major=2), "is a DLPack 2.0 tensor; klaunch reads DLPack 1.x")):
            msg = self.refused(klaunch.ArgumentTypeError, q=bad)
            self.assertIn(text, msg)

        class Broken:
            __cuda_array_interface__ = {"shape": (4,)}

        self.assertIn("malformed __cuda_array_interface__", self.refused(klaunch.ArgumentTypeError, q=Broken()))

    def refused_also_when_checking_only(self, cls, **over):
        """The refusal of a launch with `over`, the same with check_only=True;
        neither records anything."""
        msg = self.refused(cls, **over)
        self.assertEqual(self.refused(cls, check_only=True, **over), msg)
        return msg

    def test_dlpack_address_that_wraps_past_2_64_is_refused(self):
        msg = self.refused_also_when_checking_only(
            klaunch.ArgumentTypeError, q=DLPackArray(2**64 - 256, (64,), 4, 16, byte_offset=512))
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter q has a malformed DLPack "
                              "tensor: data 0xffffffffffffff00 + byte_offset 512 = 0x10000000000000100 wraps past 2^64 "
                              "[specs/paged_decode.yaml:31:16]")
        # Exactly 2^64 would reach the kernel as NULL; just below it is an address.
        self.refused(klaunch.ArgumentTypeError, q=DLPackArray(2**64 - 2, (64,), 4, 16, byte_offset=2))
        launch(self.mod, q=DLPackArray(2**64 - 2**16, (3, 4096), 4, 16, byte_offset=256))
        self.assertEqual(self.mod.records()[0].args[:8], struct.pack("<Q", 2**64 - 2**16 + 256))

    def test_tensor_at_an_address_off_its_element_size_is_refused(self):
        # A bf16 tensor one byte into its buffer (DLPack byte_offset 1).
        msg = self.refused_also_when_checking_only(klaunch.AlignmentError,
                                                   q=DLPackArray(Q, (64,), 4, 16, byte_offset=1))
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter q (const bf16*) is at "
                              "0x%x, not 2-byte aligned: its bf16 elements are 2 bytes (address from DLPack) "
                              "[specs/paged_decode.yaml:31:16]" % (Q + 1))
        # i32 through __cuda_array_interface__, 2 bytes off; and an f32 workspace.
        msg = self.refused_also_when_checking_only(klaunch.AlignmentError, block_tables=CudaArray(TABLES + 2, (8,), "<i4"))
        self.assertIn("parameter block_tables (const i32*) is at 0x%x, not 4-byte aligned: its i32 elements are 4 bytes "
                      "(address from __cuda_array_interface__)" % (TABLES + 2), msg)
        args = dict(decode_args(), workspace=CudaArray(K + 6, (64,), "<f4"), num_splits=1, workspace_bytes=10**9)
        del args["output"]
        msg = refusal(self, klaunch.AlignmentError, pd.paged_decode_split_bf16, **args, module=self.mod)
        self.assertIn("parameter workspace (f32*) is at 0x%x, not 4-byte aligned" % (K + 6), msg)
        self.assertEqual(self.mod.records(), [])
        # Whole elements off are fine.
        launch(self.mod, q=DLPackArray(Q, (3, 4096), 4, 16, byte_offset=2),
               block_tables=CudaArray(TABLES + 4, (12,), "<i4"))
        self.assertEqual(self.mod.records()[0].args[:8], struct.pack("<Q", Q + 2))
        self.assertTrue(issubclass(klaunch.AlignmentError, klaunch.InvalidArgumentError))

    def test_every_element_type_needs_an_address_that_is_a_multiple_of_its_size(self):
        from klaunch import _args
        site = _args.Site("kl_x", "p", "x.yaml:1:1")
        for elem, size in (("bf16", 2), ("f16", 2), ("f32", 4), ("i32", 4), ("u32", 4), ("u8", 1), ("fp8_e4m3", 1),
                           ("void", 1)):
            code, bits = _args.ELEMENTS[elem][1] if elem != "void" else (1, 8)
            p = _args.PointerArg(site, elem, True, "contiguous", "const %s*" % elem)
            for offset in range(0, 9):
                t = _args.describe(DLPackArray(0x1000, (8,), code, bits, byte_offset=offset), site, 0)
                if offset % size:
                    with self.assertRaises(klaunch.AlignmentError, msg="%s at +%d" % (elem, offset)):
                        p.check(t)
                else:
                    p.check(t)

    def test_tensor_map_builder_refuses_a_tensor_off_its_element_size(self):
        # The C builder wants 16 bytes; an address off the element is refused before it, as a launcher's is.
        text = "klaunch-module 1\nfamily mla_prefill\nvariant mistral_small_4\nspec_hash %s\ncuda_arch 900a\n" % (
            mla.SPEC_HASH) + "".join("const %s %d\n" % kv for kv in mla.VARIANTS["mistral_small_4"].items())
        m = mla.load_record(image=text)
        msg = refusal(self, klaunch.AlignmentError, mla.mla_q_rope_extract_tma_q_map_encode,
                      DLPackArray(0x10000, (37, 16, 64), 4, 16, byte_offset=1), module=m)
        self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_mla_q_rope_extract_tma_q_map_encode: parameter tensor "
                              "(bf16 tensor) is at 0x10001, not 2-byte aligned: its bf16 elements are 2 bytes (address "
                              "from DLPack) [specs/mla_prefill.yaml:%d:%d]" % self.q_map_position())
        # 2 bytes off: the element is whole, the C builder's 16 bytes are not.
        msg = refusal(self, klaunch.TensorMapError, mla.mla_q_rope_extract_tma_q_map_encode,
                      DLPackArray(0x10000, (37, 16, 64), 4, 16, byte_offset=2), module=m)
        self.assertIn("is not 16-byte aligned", msg)

    @staticmethod
    def q_map_position():
        (L,) = [l for l in mla.LAUNCHERS if l.name == "mla_q_rope_extract_tma"]
        (p,) = [p for p in L.params if p.name == "q_map"]
        return p.line, p.col

    def test_cuda_array_interface_version_other_than_2_or_3_is_refused(self):
        for version in (99, 4, 1, 0, -3, True):
            msg = self.refused_also_when_checking_only(
                klaunch.ArgumentTypeError, block_tables=CudaArray(TABLES, (8,), "<i4", version=version))
            self.assertEqual(msg, "KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: parameter block_tables has "
                                  "__cuda_array_interface__ version %d; klaunch reads versions 2 and 3 "
                                  "[specs/paged_decode.yaml:35:16]" % version)
        for version in (2, 3):
            launch(self.mod, block_tables=CudaArray(TABLES, (12,), "<i4", version=version))
        self.assertEqual(len(self.mod.records()), 2)

    def test_cuda_array_interface_without_a_version_is_refused(self):
        # Every version of the interface (Numba's, CuPy's) requires the key.
        a = CudaArray(TABLES, (8,), "<i4")
        del a.__cuda_array_interface__["version"]
        msg = self.refused_also_when_checking_only(klaunch.ArgumentTypeError, block_tables=a)
        self.assertIn("parameter block_tables has a malformed __cuda_array_interface__: no 'version'", msg)

    def test_integer_scalars(self):
        for bad in ("4", 4.0, None, True, [4], tensor("i32", 8)):
            msg = self.refused(klaunch.ArgumentTypeError, max_blocks_per_seq=bad)
            self.assertIn("parameter max_blocks_per_seq (u32) must be an int", msg)
        for bad in (-1, 2**32):
            msg = self.refused(klaunch.OverflowError, num_seqs=bad)
            self.assertIn("parameter num_seqs = %d does not fit u32 (0..4294967295) [specs/paged_decode.yaml:38:16]" % bad,
                          msg)
        self.assertTrue(issubclass(klaunch.OverflowError, OverflowError))

        class Index:
            def __index__(self):
                return 3

        launch(self.mod, num_seqs=Index())
        self.assertEqual(self.mod.records()[-1].grid, (32, 3, 1))

    def test_float_scalars(self):
        launch(self.mod, inv_sqrt_d=1)
        launch(self.mod, inv_sqrt_d=float("nan"))
        launch(self.mod, inv_sqrt_d=3.4028235e38)
        for bad in (1e39, -1e300, 10**400):
            self.assertIn("does not fit f32", self.refused(klaunch.OverflowError, inv_sqrt_d=bad))
        for bad in ("0.5", None, True, 1j):
            self.assertIn("parameter inv_sqrt_d (f32) must be a float", self.refused(klaunch.ArgumentTypeError,
                                                                                      inv_sqrt_d=bad))

    def test_bool_scalars(self):
        mod = mla.load_record("deepseek_v4_flash")
        args = [tensor("bf16", 0x10000 * (i + 1)) for i in range(4)] + [100, 2, 4, 1, 576, 0.04]
        for ok in (True, False, 0, 1):
            mla.mla_prefill_attention_320(*args, ok, module=mod)
        for bad in (2, "yes", None, 1.0):
            msg = refusal(self, klaunch.ArgumentTypeError, mla.mla_prefill_attention_320, *args, bad, module=mod)
            self.assertIn("parameter causal (bool) must be True or False", msg)

    def test_signed_scalars(self):
        from klaunch import _args
        convert = _args.scalar_converter("i32", _args.Site("kl_x", "n", "x.yaml:1:1"))
        self.assertEqual(convert(-2**31), -2**31)
        with self.assertRaises(klaunch.OverflowError):
            convert(2**31)

    def test_bad_streams(self):
        for bad in ("0", -1, 2**64, True, 1.5, object()):
            msg = self.refused(klaunch.ArgumentTypeError, stream=bad)
            self.assertTrue(msg.startswith("KL_ERROR_INVALID_ARGUMENT: kl_paged_decode_attn_bf16: stream"), msg)

    def test_modules_of_another_family_or_variant(self):
        other = mla.load_record("deepseek_v4_flash")
        msg = refusal(self, klaunch.ArgumentTypeError, pd.paged_decode_attn_bf16, **decode_args(), module=other)
        self.assertIn("module must be a Module of paged_decode (from klaunch_paged_decode.load()), got a Module of "
                      "mla_prefill", msg)
        msg = refusal(self, klaunch.VariantMismatchError, pd.paged_decode_attn_bf16, **decode_args(), module=self.mod,
                      variant="gqa4_d128")
        self.assertIn("variant='gqa4_d128', but the module is variant gqa8_d128", msg)


class CChecks(unittest.TestCase):
    """Refusals of the C launchers and of kl_X_get, raised as their status's
    class with kl_last_error_message()."""

    def test_precondition(self):
        mod = pd.load_record("gqa8_d128")
        msg = refusal(self, klaunch.PreconditionError, launch, mod, num_q_heads=30)
        self.assertEqual(msg, "KL_ERROR_PRECONDITION: kl_paged_decode_attn_bf16: precondition `num_kv_heads >= 1 and "
                              "num_q_heads % num_kv_heads == 0` does not hold (num_kv_heads = 8, num_q_heads = 30): "
                              "query heads are shared evenly by the KV heads [specs/paged_decode.yaml:52:16]")

    def test_variant_mismatch(self):
        mod = pd.load_record("gqa4_d128")
        msg = refusal(self, klaunch.VariantMismatchError, launch, mod, fn=pd.paged_decode_attn_bf16_gqa, num_q_heads=64,
                      q_stride=64 * 128)
        self.assertIn("(num_q_heads = 64, num_kv_heads = 8, DECODE_GQA_PACK_WIDTH = 4): the kernel packs", msg)

    def test_grid_block_overflow_and_shared_memory_limits(self):
        mod = pd.load_record("gqa8_d128")
        msg = refusal(self, klaunch.GridLimitError, launch, mod, num_seqs=65536)
        self.assertIn("grid.y = num_seqs = 65536 exceeds 65535", msg)
        m = mla.load_record("deepseek_v4_flash")
        b = [tensor("bf16", 0x10000 * (i + 1)) for i in range(4)]
        msg = refusal(self, klaunch.BlockLimitError, mla.mla_cache_assemble_batched, *b, 4, 1024, 64, 1088, module=m)
        self.assertIn("KL_ERROR_BLOCK_LIMIT: kl_mla_cache_assemble_batched: block.x = max(mla_cache_dim, 256) = 1088 "
                      "exceeds 1024", msg)
        big = 2**32 - 1
        msg = refusal(self, klaunch.OverflowError, pd.paged_decode_attn_fp8, tensor("bf16", Q), tensor("fp8_e4m3", K),
                      tensor("fp8_e4m3", V), tensor("bf16", OUT), tensor("i32", TABLES), tensor("i32", LENS), 4, 3, 0,
                      big, big, big, 0.1, 1.0, 1.0, 4096, 2**64 - 1, 0, module=mod)
        self.assertIn("KL_ERROR_OVERFLOW: kl_paged_decode_attn_fp8: precondition = cache_stride >= block_size * "
                      "num_kv_heads * head_dim overflows 64 bits (cache_stride = 18446744073709551615", msg)
        small = mla.load_record("deepseek_v4_flash", max_dynamic_shared=1024)
        msg = refusal(self, klaunch.SharedMemoryLimitError, mla.grouped_gemm_mma, b[0], b[1], b[2], 256, 2, 128, 128,
                      256, 256, module=small)
        self.assertIn("KL_ERROR_SHARED_MEMORY_LIMIT: kl_grouped_gemm_mma: shared_bytes = 65536 = 65536 exceeds 1024", msg)

    def test_kernel_lookups_that_fail(self):
        mod = pd.load_record("gqa8_d128", missing_entry="paged_decode_attn_bf16")
        self.assertIsInstance(mod.kernel_status("paged_decode_attn_bf16"), klaunch.KernelNotFoundError)
        self.assertIsNone(mod.kernel_status("paged_decode_attn_fp8"))
        msg = refusal(self, klaunch.KernelNotFoundError, launch, mod)
        self.assertIn("kl_paged_decode_attn_bf16_get: the module has no kernel 'paged_decode_attn_bf16'", msg)
        wgmma = mla.load_record("deepseek_v4_flash")
        self.assertIsInstance(wgmma.kernel_status("mla_absorbed_attention_wgmma"), klaunch.UnsupportedError)

    def test_launch_failure_capacity_and_unloaded_modules(self):
        mod = pd.load_record("gqa8_d128", launch_status="KL_ERROR_LAUNCH_FAILED")
        refusal(self, klaunch.LaunchFailedError, launch, mod)
        mod = pd.load_record("gqa8_d128", capacity=1)
        launch(mod)
        msg = refusal(self, klaunch.CapacityError, launch, mod)
        self.assertIn("the record backend is full (1 of 1 records)", msg)
        mod = pd.load_record("gqa8_d128")
        mod.close()
        msg = refusal(self, klaunch.KernelNotLoadedError, launch, mod)
        self.assertIn("module was unloaded", msg)

    def test_module_metadata_that_is_refused(self):
        info = "klaunch-module 1\nfamily %s\nvariant gqa8_d128\nspec_hash %s\nconst DECODE_GQA_PACK_WIDTH 8\n" \
               "const DECODE_GQA_PACK_HEAD_DIM 128\n"
        other = info % ("mla_prefill", pd.SPEC_HASH)
        mod = pd.load_record(image=other)
        self.assertIsInstance(mod.kernel_status("paged_decode_attn_bf16"), klaunch.FamilyMismatchError)
        stale = info % ("paged_decode", "sha256:" + "0" * 64)
        self.assertIsInstance(pd.load_record(image=stale).kernel_status("paged_decode_attn_bf16"),
                              klaunch.StaleFatbinError)
        with self.assertRaises(klaunch.ModuleInfoError):
            pd.load_record(image="not klaunch metadata\n")
        with self.assertRaises(klaunch.InvalidImageError):
            pd.load_record(image=b"klaunch-module 1\n\0family x\n")

    def test_no_driver(self):
        try:
            pd.load(0, "gqa8_d128")
        except klaunch.NoDriverError as e:
            self.assertIn("cannot load libcuda.so.1", str(e))
        except klaunch.Error:
            self.skipTest("a CUDA driver is here")


class Settings(unittest.TestCase):
    """Module.kernel_status() and load_record()'s settings (issue 44): a name
    that names nothing, or an integer its C type cannot hold, is a klaunch
    refusal naming the setting and the value, never a KeyError from inside
    the library nor a value ctypes wraps."""

    def test_kernel_status_of_a_name_that_is_no_launcher_is_refused_naming_it_and_the_launchers(self):
        mod = pd.load_record("gqa8_d128")
        with self.assertRaises(klaunch.InvalidArgumentError) as e:
            mod.kernel_status("nope")
        self.assertIn("Module.kernel_status: paged_decode has no launcher 'nope'", str(e.exception))
        self.assertIn("paged_decode_attn_bf16, paged_decode_attn_fp8", str(e.exception))
        self.assertNotIsInstance(e.exception, KeyError)
        with self.assertRaises(klaunch.InvalidArgumentError):
            mod.kernel_status(None)
        self.assertIsNone(mod.kernel_status("paged_decode_attn_bf16"))

    def test_load_record_launch_status_that_is_no_status_is_refused_naming_it_and_the_statuses(self):
        with self.assertRaises(klaunch.InvalidArgumentError) as e:
            pd.load_record("gqa8_d128", launch_status="KL_NOPE")
        self.assertIn("load_record: launch_status 'KL_NOPE' is no klaunch status", str(e.exception))
        self.assertIn("KL_ERROR_LAUNCH_FAILED", str(e.exception))
        count = len(klaunch._errors.STATUSES)
        for bad in (-1, count, 2**32):
            with self.assertRaises(klaunch.OverflowError) as e:
                pd.load_record("gqa8_d128", launch_status=bad)
            self.assertIn("launch_status = %d is no klaunch status code (0..%d" % (bad, count - 1), str(e.exception))
        with self.assertRaises(klaunch.ArgumentTypeError):
            pd.load_record("gqa8_d128", launch_status=1.0)
        # Every valid name and code is taken: KL_SUCCESS (0) launches; the last code fails every launch.
        launch(pd.load_record("gqa8_d128", launch_status="KL_SUCCESS"))
        launch(pd.load_record("gqa8_d128", launch_status=0))
        last = klaunch.error_class(count - 1)
        with self.assertRaises(last):
            launch(pd.load_record("gqa8_d128", launch_status=count - 1))

    def test_load_record_text_settings_too_long_or_not_str_are_refused_naming_the_setting(self):
        # missing_entry and device_arch are copied into the library's buffers
        # (128 and 32 bytes, NUL included): before, a longer one was cut short
        # silently and a non-str raised AttributeError from .encode().
        for setting, size in (("missing_entry", 128), ("device_arch", 32)):
            with self.subTest(setting=setting):
                with self.assertRaises(klaunch.InvalidArgumentError) as e:
                    pd.load_record("gqa8_d128", **{setting: "x" * size})
                self.assertIn("load_record: %s is %d bytes long (UTF-8); the recording backend holds at most %d"
                              % (setting, size, size - 1), str(e.exception))
                with self.assertRaises(klaunch.InvalidArgumentError) as e:  # 2 bytes a character
                    pd.load_record("gqa8_d128", **{setting: "\u00e9" * (size // 2)})
                self.assertIn("%s is %d bytes long" % (setting, size), str(e.exception))
                with self.assertRaises(klaunch.InvalidArgumentError) as e:
                    pd.load_record("gqa8_d128", **{setting: "sm_9\0"})
                self.assertIn("%s 'sm_9\\x00' holds a NUL character" % setting, str(e.exception))
                for bad in (b"sm_90", 90, ["sm_90"]):
                    with self.assertRaises(klaunch.ArgumentTypeError) as e:
                        pd.load_record("gqa8_d128", **{setting: bad})
                    self.assertIn("load_record: %s must be a str or None, got %s" % (setting, type(bad).__name__),
                                  str(e.exception))
                    self.assertNotIsInstance(e.exception, AttributeError)
                pd.load_record("gqa8_d128", **{setting: "x" * (size - 1)})  # the longest that fits
                pd.load_record("gqa8_d128", **{setting: ""})  # the default, as None
        # The longest device_arch reaches the messages whole.
        arch = "sm_" + "9" * 28
        mod = mla.load_record("deepseek_v4_flash", device_arch=arch)
        self.assertIn("device %s " % arch, str(mod.kernel_status("mla_absorbed_attention_wgmma")))
        mod = pd.load_record("gqa8_d128", missing_entry="paged_decode_attn_fp8")
        self.assertIsInstance(mod.kernel_status("paged_decode_attn_fp8"), klaunch.KernelNotFoundError)

    def test_load_record_integer_settings_outside_their_c_type_are_refused_naming_setting_value_and_range(self):
        size_max = 2 ** (8 * struct.calcsize("N")) - 1
        cases = [("capacity", 2**64, "size_t (0..%d)" % size_max), ("capacity", -1, "size_t (0..%d)" % size_max),
                 ("max_threads", -1, "uint32_t (0..4294967295)"), ("max_threads", 2**32, "uint32_t (0..4294967295)"),
                 ("max_dynamic_shared", -1, "uint32_t (0..4294967295)"),
                 ("max_dynamic_shared", 2**32, "uint32_t (0..4294967295)")]
        for setting, value, c_range in cases:
            with self.subTest(setting=setting, value=value):
                with self.assertRaises(klaunch.OverflowError) as e:
                    pd.load_record("gqa8_d128", **{setting: value})
                self.assertIn("load_record: %s = %d does not fit %s" % (setting, value, c_range), str(e.exception))
        for setting in ("capacity", "max_threads", "max_dynamic_shared"):
            for bad in (True, 1.0, "8"):
                with self.assertRaises(klaunch.ArgumentTypeError) as e:
                    pd.load_record("gqa8_d128", **{setting: bad})
                self.assertIn("%s must be an int" % setting, str(e.exception))
        # The ends of each range are taken and mean what they say.
        mod = pd.load_record("gqa8_d128", max_threads=2**32 - 1, max_dynamic_shared=2**32 - 1, capacity=1)
        launch(mod)
        with self.assertRaises(klaunch.CapacityError):
            launch(mod)
        with self.assertRaises(klaunch.BlockLimitError):  # 256 threads a block, the kernels' limit set to 0
            launch(pd.load_record("gqa8_d128", max_threads=0))
        with self.assertRaises(klaunch.CapacityError):
            launch(pd.load_record("gqa8_d128", capacity=0))


class PersistentBuffers(unittest.TestCase):
    """Issue 44, defect 5: a persistent launcher given a workspace one byte
    short raised VariantMismatchError ("no variant fits"), its size check
    reading a variant constant. A buffer too small is that buffer's size
    error, PreconditionError naming it, the size given and the size needed,
    and the variant is still the one the shape picks."""

    def args(self, width, **over):
        nkv, hd, ctas, seqs = 3, 128, 7, 5
        a = dict(q=tensor("bf16", Q), k_cache=tensor("bf16", K), v_cache=tensor("bf16", V),
                 output=tensor("bf16", OUT), block_tables=tensor("i32", TABLES), seq_lens=tensor("i32", LENS),
                 max_blocks_per_seq=9, num_seqs=seqs, num_q_heads=nkv * width, num_kv_heads=nkv, head_dim=hd,
                 block_size=16, inv_sqrt_d=0.125, q_stride=nkv * width * hd, sliding_window=0,
                 workspace=tensor("f32", 0x7f0000100000), counters=tensor("u32", 0x7f0000200000), num_ctas=ctas,
                 # 2 records a block of width * (head_dim + 2) floats; a word per (sequence, KV head)
                 workspace_bytes=2 * ctas * width * (hd + 2) * 4, num_counters=seqs * nkv)
        a.update(over)
        return a

    def test_workspace_or_counters_one_short_is_a_size_error_of_that_buffer_not_no_variant_fits(self):
        for width, variant in ((8, "gqa8_d128"), (4, "gqa4_d128")):
            for name in ("paged_decode_persist_bf16_gqa_mma", "paged_decode_persist_bf16_gqa_bulk"):
                with self.subTest(variant=variant, launcher=name):
                    mod = pd.load_record(image="klaunch-module 1\nfamily paged_decode\nvariant %s\nspec_hash %s\n"
                                         "cuda_arch 900a\n" % (variant, pd.SPEC_HASH) + "".join(
                                             "const %s %d\n" % kv for kv in pd.VARIANTS[variant].items()),
                                         max_dynamic_shared=227 * 1024)
                    fn = getattr(pd, name)
                    good = self.args(width)
                    fn(**good, module=mod, check_only=True)
                    need = good["workspace_bytes"]
                    with self.assertRaises(klaunch.PreconditionError) as e:
                        fn(**self.args(width, workspace_bytes=need - 1), module=mod)
                    self.assertNotIsInstance(e.exception, klaunch.VariantMismatchError)
                    self.assertIn("workspace is too small: workspace_bytes = %d, %d needed" % (need - 1, need),
                                  str(e.exception))
                    with self.assertRaises(klaunch.PreconditionError) as e:
                        fn(**self.args(width, num_counters=good["num_counters"] - 1), module=mod)
                    self.assertIn("counters is too small: num_counters = %d, %d needed" % (
                        good["num_counters"] - 1, good["num_counters"]), str(e.exception))
                    self.assertEqual(mod.records(), [])
        # Without module=, the variant is the one the shape picks (width 8), and the short
        # workspace is still what is refused, not "no variant fits".
        registered = pd.load_record("gqa8_d128", register=True)
        try:
            need = self.args(8)["workspace_bytes"]
            with self.assertRaises(klaunch.PreconditionError) as e:
                pd.paged_decode_persist_bf16_gqa_mma(**self.args(8, workspace_bytes=need - 1))
            self.assertIn("workspace is too small", str(e.exception))
        finally:
            registered.close()


class Keywords(unittest.TestCase):
    """Every launcher of every family called with its parameters by the
    spec's names, as keywords in any order (mixed with positional ones, as a
    generated function and as a Module's method), packs what the positional
    call packs; a keyword that names no parameter, and a parameter given
    twice, are refused."""

    STREAM = 0x5a5a0000

    @classmethod
    def setUpClass(cls):
        cls.launches = []  # (family, launcher, module, arguments that launch)
        modules = {}
        for family in S.FAMILIES:
            for launcher in family.LAUNCHERS:
                cls.launches.append(cls._launching(family, launcher, modules))

    @classmethod
    def _launching(cls, family, launcher, modules):
        """Arguments `launcher` launches with in some variant (its sm_90a
        image, H100 shared memory), found from a seeded search."""
        fn = getattr(family, launcher.name)
        for variant in family.VARIANTS:
            key = (family.FAMILY, variant)
            if key not in modules:
                text = "klaunch-module 1\nfamily %s\nvariant %s\nspec_hash %s\ncuda_arch 900a\n" % (
                    family.FAMILY, variant, family.SPEC_HASH) + "".join(
                    "const %s %d\n" % kv for kv in family.VARIANTS[variant].items())
                modules[key] = family.load_record(image=text, max_dynamic_shared=232448)
            mod = modules[key]
            rng = random.Random("%s/%s/%s" % (family.FAMILY, variant, launcher.name))
            for _ in range(200):
                args = S._satisfy(launcher, S.arguments(launcher, rng), family.VARIANTS[variant], rng)
                mod.clear_records()
                try:
                    args = S.materialize(family, launcher, args, mod)
                    fn(*args, module=mod, stream=cls.STREAM)
                except klaunch.Error:
                    continue
                if mod.records():
                    mod.clear_records()
                    return family, launcher, mod, args
        return family, launcher, None, None

    def each(self):
        missing = ["%s.%s" % (f.FAMILY, l.name) for f, l, m, a in self.launches if m is None]
        self.assertEqual(missing, [], "launchers no searched argument set launches")
        self.assertEqual(len(self.launches), sum(len(f.LAUNCHERS) for f in S.FAMILIES))
        for family, launcher, mod, args in self.launches:
            mod.clear_records()
            yield getattr(family, launcher.name), getattr(mod, launcher.name), launcher, mod, args

    def test_every_launcher_takes_its_parameters_as_keywords_in_any_order_and_packs_the_same(self):
        rng = random.Random(5)
        for fn, method, launcher, mod, args in self.each():
            names = [p.name for p in launcher.params]
            fn(*args, module=mod, stream=self.STREAM)
            want = mod.records()
            self.assertEqual(len(want), 1, launcher.name)
            kw = dict(zip(names, args))
            shuffled = list(kw.items())
            rng.shuffle(shuffled)
            k = rng.randrange(len(args) + 1)
            calls = {
                "keywords in spec order": lambda: fn(**kw, module=mod, stream=self.STREAM),
                "keywords reversed": lambda: fn(**dict(reversed(list(kw.items()))), module=mod, stream=self.STREAM),
                "keywords shuffled": lambda: fn(**dict(shuffled), stream=self.STREAM, module=mod),
                "%d positional, the rest keywords" % k: lambda: fn(*args[:k], **{n: kw[n] for n in reversed(names[k:])},
                                                                   module=mod, stream=self.STREAM),
                "Module method, positional": lambda: method(*args, stream=self.STREAM),
                "Module method, keywords shuffled": lambda: method(stream=self.STREAM, **dict(shuffled)),
                "Module method, %d positional" % k: lambda: method(*args[:k], stream=self.STREAM,
                                                                   **{n: kw[n] for n in reversed(names[k:])}),
            }
            for what, call in calls.items():
                mod.clear_records()
                call()
                self.assertEqual(mod.records(), want, "%s, %s" % (launcher.name, what))
            mod.clear_records()
            method(**dict(shuffled), check_only=True)
            fn(**dict(shuffled), module=mod, check_only=True)
            self.assertEqual(mod.records(), [], launcher.name)

    def test_a_keyword_that_names_no_parameter_is_refused_naming_it(self):
        for fn, method, launcher, mod, args in self.each():
            kw = dict(zip((p.name for p in launcher.params), args))
            typo = launcher.params[-1].name + "s"
            # A generated function is a Python function: Python's own TypeError, before klaunch runs.
            with self.assertRaises(TypeError) as e:
                fn(**kw, **{typo: 1}, module=mod)
            self.assertIn("unexpected keyword argument '%s'" % typo, str(e.exception))
            # A Module's method: klaunch's ArgumentTypeError (also a TypeError), check_only or not.
            for bad in (typo, "module", "variant"):
                for check_only in (False, True):
                    with self.assertRaises(klaunch.ArgumentTypeError) as e:
                        method(**kw, **{bad: None}, check_only=check_only)
                    self.assertTrue(str(e.exception).startswith(
                        "KL_ERROR_INVALID_ARGUMENT: kl_%s: got an unexpected keyword argument '%s': no parameter has "
                        "that name" % (launcher.name, bad)), str(e.exception))
                    self.assertIsInstance(e.exception, TypeError)
            self.assertEqual(mod.records(), [], launcher.name)

    def test_a_parameter_given_twice_is_refused(self):
        for fn, method, launcher, mod, args in self.each():
            names = [p.name for p in launcher.params]
            kw = dict(zip(names, args))
            with self.assertRaises(TypeError) as e:
                fn(args[0], **kw, module=mod)
            self.assertIn("multiple values for argument '%s'" % names[0], str(e.exception))
            for k in (1, len(args)):
                with self.assertRaises(klaunch.ArgumentTypeError) as e:
                    method(*args[:k], **{names[k - 1]: args[k - 1]}, **{n: kw[n] for n in names[k:]}, check_only=k > 1)
                self.assertEqual(str(e.exception), "KL_ERROR_INVALID_ARGUMENT: kl_%s: got parameter %s twice: as "
                                                   "argument %d and as a keyword" % (launcher.name, names[k - 1], k))
            self.assertEqual(mod.records(), [], launcher.name)

    def test_a_module_method_missing_a_parameter_names_it(self):
        for fn, method, launcher, mod, args in self.each():
            names = [p.name for p in launcher.params]
            kw = dict(zip(names, args))
            gone = names[len(names) // 2]
            del kw[gone]
            with self.assertRaises(klaunch.ArgumentTypeError) as e:
                method(**kw)
            self.assertIn("kl_%s: takes %d arguments, got %d: %s missing" % (
                launcher.name, len(names), len(names) - 1, gone), str(e.exception))
            with self.assertRaises(TypeError):
                fn(**kw, module=mod)
            self.assertEqual(mod.records(), [], launcher.name)


class TensorMaps(unittest.TestCase):
    """tensor_map parameters: klaunch_F.X_P_encode(tensor) makes a
    klaunch.TensorMap (kl_X_P_encode through the library), which the
    launcher takes by value."""

    def setUp(self):
        # The sm_90a image's metadata: mla_q_rope_extract_tma needs it.
        text = "klaunch-module 1\nfamily mla_prefill\nvariant mistral_small_4\nspec_hash %s\ncuda_arch 900a\n" % (
            mla.SPEC_HASH) + "".join("const %s %d\n" % kv for kv in mla.VARIANTS["mistral_small_4"].items())
        self.mod = mla.load_record(image=text)
        self.tokens, self.nq, self.nope, self.rope = 37, 16, 128, 64
        hd = self.nope + self.rope
        self.q_dim = self.nq * hd + 64
        # Q's rope slices: [tokens, nq, rope] at q_full + nope, strides (q_dim, hd, 1)
        self.q = DLPackArray(0x7f0000100000 + 2 * self.nope, (self.tokens, self.nq, self.rope), 4, 16,
                             strides=(self.q_dim, hd, 1))
        self.out = DLPackArray(0x7f0000200000, (self.tokens, self.nq, self.rope), 4, 16)

    def maps(self):
        return (mla.mla_q_rope_extract_tma_q_map_encode(self.q, module=self.mod),
                mla.mla_q_rope_extract_tma_out_map_encode(self.out, module=self.mod))

    @staticmethod
    def decode(opaque):
        """klaunch's reference encoding (record backend): address, extents, byte strides, box."""
        rank = opaque[5]
        address = struct.unpack_from("<Q", opaque, 16)[0]
        extents = struct.unpack_from("<%dQ" % rank, opaque, 24)
        strides = struct.unpack_from("<%dQ" % (rank - 1), opaque, 64)
        box = struct.unpack_from("<%dH" % rank, opaque, 96)
        return address, extents, strides, box

    def test_maps_from_tensors_launch_by_value(self):
        q_map, out_map = self.maps()
        self.assertEqual((q_map.extents, q_map.strides), ((64, 16, 37), (192, self.q_dim)))
        self.assertEqual((out_map.extents, out_map.strides), ((64, 16, 37), (64, 16 * 64)))
        mla.mla_q_rope_extract_tma(q_map, out_map, self.tokens, self.nq, self.rope, module=self.mod)
        (r,) = self.mod.records()
        self.assertEqual(r.grid, (2, 3, 1))  # (ceil_div(nq, 8), ceil_div(tokens, 16), ceil_div(rope, 64))
        self.assertEqual(len(r.args), 256)
        self.assertEqual(r.args[:128], q_map.opaque())
        self.assertEqual(r.args[128:], out_map.opaque())
        self.assertEqual(self.decode(r.args[:128]), (0x7f0000100000 + 256, (64, 16, 37), (384, 2 * self.q_dim), (64, 8, 16)))
        # Without module=: the maps' module.
        mla.mla_q_rope_extract_tma(q_map, out_map, self.tokens, self.nq, self.rope)
        self.assertEqual(len(self.mod.records()), 2)

    def test_explicit_extents_and_strides(self):
        flat = DLPackArray(0x7f0000100000, (self.tokens * self.q_dim,), 4, 16)
        m = mla.mla_q_rope_extract_tma_q_map_encode(flat, extents=(64, 16, 37), strides=(192, self.q_dim),
                                                    module=self.mod)
        self.assertEqual(self.decode(m.opaque())[1:3], ((64, 16, 37), (384, 2 * self.q_dim)))

    def test_refusals(self):
        enc = mla.mla_q_rope_extract_tma_q_map_encode
        for tensor, cls, text in (
                (CudaArray(0x1000, (37, 16, 64), "<f4"), klaunch.DtypeError, "parameter tensor (bf16 tensor) has "
                                                                               "__cuda_array_interface__ typestr '<f4'"),
                (DLPackArray(0x1000, (37, 16, 64), 4, 16, strides=(2048, 128, 2)), klaunch.LayoutError,
                 "has innermost stride 2; a tensor map reads dense rows"),
                (DLPackArray(0x1000, (37, 1024), 4, 16), klaunch.LayoutError, "has 2 dimensions; the map has rank 3"),
                (DLPackArray(0x1000, (37, 16, 64), 4, 16, device_type=1), klaunch.DeviceError, "cpu memory"),
                (None, klaunch.NoneArgumentError, "is None"),
                (DLPackArray(0x1002, (37, 16, 64), 4, 16), klaunch.TensorMapError, "is not 16-byte aligned")):
            with self.assertRaises(cls) as e:
                enc(tensor, module=self.mod)
            self.assertIn(text, str(e.exception))
            self.assertIn("kl_mla_q_rope_extract_tma_q_map_encode", str(e.exception))
        with self.assertRaises(klaunch.ArgumentTypeError):
            enc(self.q, extents=(64, 16), module=self.mod)
        with self.assertRaises(klaunch.ArgumentTypeError):
            enc(self.q, strides=("a", 1), module=self.mod)
        q_map, out_map = self.maps()
        launch = mla.mla_q_rope_extract_tma
        for bad, cls in ((None, klaunch.NoneArgumentError), (self.q, klaunch.ArgumentTypeError),
                         (0x1000, klaunch.ArgumentTypeError)):
            with self.assertRaises(cls):
                launch(bad, out_map, 37, 16, 64, module=self.mod)
        # A map encoded on another backend (another module's): the C launcher's refusal.
        other = mla.load_record(image=self.mod_text())
        with self.assertRaises(klaunch.TensorMapError) as e:
            launch(q_map, out_map, 37, 16, 64, module=other)
        self.assertIn("tensor map q_map: the map was encoded by the record backend at", str(e.exception))
        on1 = mla.load_record(image=self.mod_text(), device=1)
        with self.assertRaises(klaunch.DeviceError):
            launch(q_map, out_map, 37, 16, 64, module=on1)
        self.assertEqual(self.mod.records(), [])

    def test_swapped_maps_of_one_shape_are_refused_naming_the_parameter_each_was_built_for(self):
        # Issue 44, defect 7: q_map and out_map share a description, so the two swapped launched.
        q_map, out_map = self.maps()
        launch = mla.mla_q_rope_extract_tma
        with self.assertRaises(klaunch.TensorMapError) as e:
            launch(out_map, q_map, 37, 16, 64, module=self.mod)
        self.assertIn("tensor map q_map: the map was built for parameter out_map (by "
                      "kl_mla_q_rope_extract_tma_out_map_encode), not for q_map", str(e.exception))
        with self.assertRaises(klaunch.TensorMapError) as e:
            launch(q_map, q_map, 37, 16, 64, module=self.mod, check_only=True)
        self.assertIn("tensor map out_map: the map was built for parameter q_map", str(e.exception))
        self.assertEqual(self.mod.records(), [])
        launch(q_map, out_map, 37, 16, 64, module=self.mod)
        self.assertEqual(len(self.mod.records()), 1)

    def test_a_map_not_matching_the_launchs_scalars_is_a_tensor_map_error_naming_the_map(self):
        # Issue 44, defect 7: maps of 37 tokens launched for 38 were taken (the
        # kernel read q_map's fill and out_map dropped the 38th row). The C
        # launcher's extent checks (the spec's tensor_map extent:) surface as
        # TensorMapError: q_map at least the scalars, out_map exactly them.
        q_map, out_map = self.maps()
        launch = mla.mla_q_rope_extract_tma
        for check_only in (False, True):
            with self.assertRaises(klaunch.TensorMapError) as e:
                launch(q_map, out_map, self.tokens + 1, self.nq, self.rope, module=self.mod, check_only=check_only)
            self.assertIn("kl_mla_q_rope_extract_tma: tensor map q_map: extent2 = 37, but the launch needs at least "
                          "num_tokens = 38", str(e.exception))
            self.assertIn("specs/mla_prefill.yaml:", str(e.exception))
        big_q = mla.mla_q_rope_extract_tma_q_map_encode(self.q, extents=(64, 16, 38), module=self.mod)
        with self.assertRaises(klaunch.TensorMapError) as e:
            launch(big_q, out_map, self.tokens + 1, self.nq, self.rope, module=self.mod)
        self.assertIn("tensor map out_map: extent2 = 37, but the launch needs exactly num_tokens = 38",
                      str(e.exception))
        with self.assertRaises(klaunch.TensorMapError) as e:
            launch(big_q, out_map, self.tokens, self.nq - 1, self.rope, module=self.mod)
        self.assertIn("tensor map out_map: extent1 = 16, but the launch needs exactly nq = 15", str(e.exception))
        self.assertEqual(self.mod.records(), [])
        launch(big_q, out_map, self.tokens, self.nq, self.rope, module=self.mod)  # q_map larger: at least
        self.assertEqual(len(self.mod.records()), 1)

    def mod_text(self):
        return "klaunch-module 1\nfamily mla_prefill\nvariant mistral_small_4\nspec_hash %s\ncuda_arch 900a\n" % (
            mla.SPEC_HASH) + "".join("const %s %d\n" % kv for kv in mla.VARIANTS["mistral_small_4"].items())


if __name__ == "__main__":
    S.main()
