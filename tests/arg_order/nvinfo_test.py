"""The cubin reader (tools/nvinfo/cubin_nvinfo.py) on cubins built here in memory:
the record formats, the parameter records, the metadata text, and every way
a damaged file is refused with a message saying where. (Real cubins:
kl_fatbin's <name>_layout_test and <name>_cuobjdump_test, bazel/.)
"""

import struct
import unittest

import junit_unittest
import cubin_nvinfo as nvinfo


def record(fmt, attr, value=b""):
    if fmt == nvinfo.EIFMT_SVAL:
        return struct.pack("<BBH", fmt, attr, len(value)) + value
    return struct.pack("<BB", fmt, attr) + (value or b"\0\0")


def kparam(ordinal, offset, size, index=0):
    # flags: cbank 0x1f in bits 12-16, size in bits 18-31.
    return record(nvinfo.EIFMT_SVAL, nvinfo.EIATTR_KPARAM_INFO, struct.pack("<IHHI", index, ordinal, offset, (size << 18) | (0x1F << 12)))


def param_size(n):
    return record(nvinfo.EIFMT_HVAL, nvinfo.EIATTR_CBANK_PARAM_SIZE, struct.pack("<H", n))


def make_cubin(infos, module_info=None, sm=90, machine=190, abi=8):
    """A minimal ELF64 cubin: {kernel: .nv.info.<kernel> bytes}, and
    kl__module_info in a .nv.global.init section when given."""
    sections = [("", 0, b"")]  # (name, type, data)
    for k, blob in infos.items():
        sections.append((".nv.info." + k, nvinfo.SHT_CUDA_INFO, blob))
    if module_info is not None:
        text = module_info.encode() + b"\0"
        data_index = len(sections)
        sections.append((".nv.global.init", 1, text))
        strtab = b"\0kl__module_info\0"
        sym = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0) + struct.pack("<IBBHQQ", 1, 0x11, 0, data_index, 0, len(text))
        sections.append((".strtab", 3, strtab))
        sections.append((".symtab", nvinfo.SHT_SYMTAB, sym))
    names = b"\0"
    name_off = []
    for name, _, _ in sections:
        name_off.append(len(names) if name else 0)
        if name:
            names += name.encode() + b"\0"
    sections.append((".shstrtab", 3, names))
    name_off.append(len(names) - len(b".shstrtab\0"))
    body = b""
    offsets = []
    for _, _, data in sections:
        offsets.append(64 + len(body))
        body += data + b"\0" * (-len(data) % 8)
    shoff = 64 + len(body)
    headers = b""
    for i, (name, typ, data) in enumerate(sections):
        link = 0
        if typ == nvinfo.SHT_SYMTAB:
            link = i - 1  # .strtab just before it
        headers += struct.pack("<IIQQQQIIQQ", name_off[i], typ, 0, 0, offsets[i] if i else 0, len(data), link, 0, 1, 0)
    flags = (sm << 8) if abi >= 8 else sm
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x41, abi]) + b"\0" * 7
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, machine, 1, 0, 0, shoff, flags, 64, 0, 0, 64, len(sections), len(sections) - 1)
    return header + body + headers


GOOD = {"k": kparam(2, 16, 4) + kparam(1, 8, 8) + kparam(0, 0, 8) + record(nvinfo.EIFMT_NVAL, 0x35) + param_size(20)}


class ReaderTest(unittest.TestCase):
    def test_parameters_in_ordinal_order_with_offsets_sizes_and_buffer_size(self):
        c = nvinfo.parse_cubin(make_cubin(GOOD, sm=90), "t.cubin")
        self.assertEqual(c.sm, 90)
        self.assertEqual(list(c.kernels), ["k"])
        k = c.kernels["k"]
        self.assertEqual([p.key() for p in k.params], [(0, 0, 8), (1, 8, 8), (2, 16, 4)])
        self.assertEqual(k.param_size, 20)
        self.assertEqual(k.params[0].cbank, 0x1F)

    def test_every_record_format_is_stepped_over(self):
        blob = (record(nvinfo.EIFMT_NVAL, 0x35) + record(nvinfo.EIFMT_BVAL, 0x4C, b"\x01\x00")
                + record(nvinfo.EIFMT_HVAL, 0x1B, b"\x80\x00") + record(nvinfo.EIFMT_SVAL, 0x37, b"\x82\0\0\0")
                + kparam(0, 0, 4) + param_size(4))
        k = nvinfo.parse_cubin(make_cubin({"k": blob}), "t").kernels["k"]
        self.assertEqual([p.key() for p in k.params], [(0, 0, 4)])
        self.assertEqual(k.param_size, 4)

    def test_a_kernel_without_parameters(self):
        k = nvinfo.parse_cubin(make_cubin({"noop": param_size(0)}), "t").kernels["noop"]
        self.assertEqual(k.params, [])
        self.assertEqual(k.param_size, 0)

    def test_module_metadata_text(self):
        meta = "klaunch-module 1\nfamily argtest\nvariant v1\nspec_hash sha256:ab\n"
        c = nvinfo.parse_cubin(make_cubin(GOOD, module_info=meta), "t")
        self.assertEqual(c.module_info, meta)
        self.assertEqual(c.module_field("family"), "argtest")
        self.assertEqual(c.module_field("spec_hash"), "sha256:ab")
        self.assertIsNone(nvinfo.parse_cubin(make_cubin(GOOD), "t").module_info)

    def test_the_sm_of_both_elf_abi_versions(self):
        self.assertEqual(nvinfo.parse_cubin(make_cubin(GOOD, sm=120, abi=8), "t").sm, 120)
        self.assertEqual(nvinfo.parse_cubin(make_cubin(GOOD, sm=75, abi=7), "t").sm, 75)


class DamagedTest(unittest.TestCase):
    def refused(self, data, *pieces):
        with self.assertRaises(nvinfo.CubinError) as cm:
            nvinfo.parse_cubin(data, "bad.cubin")
        for p in pieces:
            self.assertIn(p, str(cm.exception))

    def test_not_elf(self):
        self.refused(b"\x50\xed\x55\xba" + b"\0" * 100, "bad.cubin", "not an ELF file")

    def test_not_cuda(self):
        self.refused(make_cubin(GOOD, machine=62), "machine 62 is not EM_CUDA")

    def test_truncated(self):
        data = make_cubin(GOOD)
        self.refused(data[: len(data) - 10], "truncated")

    def test_unknown_record_format(self):
        self.refused(make_cubin({"k": b"\x07\x17\x00\x00"}), ".nv.info.k", "unknown record format 0x07 at byte 0")

    def test_a_record_longer_than_its_section(self):
        self.refused(make_cubin({"k": struct.pack("<BBH", 4, 0x17, 40) + b"\0" * 12}), "says 40 bytes; 12 are left")

    def test_a_short_kparam_record(self):
        self.refused(make_cubin({"k": record(nvinfo.EIFMT_SVAL, nvinfo.EIATTR_KPARAM_INFO, b"\0" * 8)}), "EIATTR_KPARAM_INFO of 8 bytes")

    def test_a_gap_in_the_ordinals(self):
        self.refused(make_cubin({"k": kparam(0, 0, 8) + kparam(2, 16, 4)}), "kernel k has parameter ordinals [0, 2]")

    def test_an_empty_file(self):
        import os
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            path = f.name
        try:
            with self.assertRaises(nvinfo.CubinError) as cm:
                nvinfo.load(path)
            self.assertIn("empty file", str(cm.exception))
        finally:
            os.unlink(path)


# As cuobjdump -elf prints a cubin's records (what kl_fatbin's
# <name>_cuobjdump_test reads).
SAMPLE = (
    "64-bit ELF: type=ET_EXEC, ABI=8, sm=90, toolkit=13.0, flags=0x6005a04\n"
    ".nv.info.argtest_fill\n"
    "\t<0x2>\n"
    "\tAttribute:\tEIATTR_KPARAM_INFO\n"
    "\tFormat:\tEIFMT_SVAL\n"
    "\tValue:\tIndex : 0x0\tOrdinal : 0x2\tOffset  : 0xc\tSize    : 0x4\n"
    "\t\tPointee's logAlignment : 0x0\tSpace : 0x0\tcbank : 0x1f\tParameter Space : CBANK\t\n"
    "\t<0x3>\n"
    "\tAttribute:\tEIATTR_KPARAM_INFO\n"
    "\tFormat:\tEIFMT_SVAL\n"
    "\tValue:\tIndex : 0x0\tOrdinal : 0x1\tOffset  : 0x8\tSize    : 0x4\n"
    "\t\tPointee's logAlignment : 0x0\tSpace : 0x0\tcbank : 0x1f\tParameter Space : CBANK\t\n"
    "\t<0x4>\n"
    "\tAttribute:\tEIATTR_KPARAM_INFO\n"
    "\tFormat:\tEIFMT_SVAL\n"
    "\tValue:\tIndex : 0x0\tOrdinal : 0x0\tOffset  : 0x0\tSize    : 0x8\n"
    "\t\tPointee's logAlignment : 0x0\tSpace : 0x0\tcbank : 0x1f\tParameter Space : CBANK\t\n"
    "\t<0x9>\n"
    "\tAttribute:\tEIATTR_CBANK_PARAM_SIZE\n"
    "\tFormat:\tEIFMT_HVAL\n"
    "\tValue:\t0x10\n"
    ".nv.info.noop\n"
    "\t<0x1>\n"
    "\tAttribute:\tEIATTR_CBANK_PARAM_SIZE\n"
    "\tFormat:\tEIFMT_HVAL\n"
    "\tValue:\t0x0\n"
)


class CuobjdumpTextTest(unittest.TestCase):
    def test_records_of_two_kernels(self):
        kernels = nvinfo.parse_cuobjdump_elf(SAMPLE, "sample")
        self.assertEqual(sorted(kernels), ["argtest_fill", "noop"])
        fill = kernels["argtest_fill"]
        self.assertEqual([p.key() for p in fill.params], [(0, 0, 8), (1, 8, 4), (2, 12, 4)])
        self.assertEqual(fill.param_size, 16)
        noop = kernels["noop"]
        self.assertEqual((noop.params, noop.param_size), ([], 0))

    def test_a_value_not_understood_is_an_error(self):
        bad = SAMPLE.replace("Ordinal : 0x2", "Ordinal = 2")
        with self.assertRaises(nvinfo.CubinError) as cm:
            nvinfo.parse_cuobjdump_elf(bad, "sample")
        self.assertIn("EIATTR_KPARAM_INFO value not understood", str(cm.exception))


if __name__ == "__main__":
    junit_unittest.main()
