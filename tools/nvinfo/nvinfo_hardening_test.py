"""The cubin reader (tools/nvinfo/cubin_nvinfo.py) on crafted files (issue 15,
"Cubin reader"): linear time where many symbols share one string (1-4 MB
files), bounded memory where 65,533 sections share one name, a clean error
(no traceback) for /dev/zero, a FIFO, a directory and a file over the size
cap, and non-ASCII or control characters in a kernel name printed to an
ASCII stdout. The command line runs in a subprocess with its address space
capped, so a reader that allocated without bound fails here with a
MemoryError instead of taking the machine's memory.
"""

import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import junit_unittest
import cubin_nvinfo as nvinfo

READER = os.path.join(os.path.dirname(os.path.abspath(nvinfo.__file__)), "cubin_nvinfo.py")
SHT_STRTAB, SHT_SYMTAB, SHT_CUDA_INFO = 3, 2, 0x70000000


def elf(sections, shstrtab_index):
    """An ELF64 EM_CUDA file: sections [(name offset, type, data, link)] after
    a null one; contents first, then the section header table."""
    parts, offsets, at = [], [], 64
    for _, _, data, _ in sections:
        offsets.append(at)
        parts.append(data + b"\0" * (-len(data) % 8))
        at += len(parts[-1])
    body = b"".join(parts)
    shoff = 64 + len(body)
    headers = b"\0" * 64 + b"".join(
        struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, off, len(data), link, 0, 1, 0) for (name, typ, data, link), off in zip(sections, offsets)
    )
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x41, 8]) + b"\0" * 7
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 90 << 8, 64, 0, 0, 64, len(sections) + 1, shstrtab_index)
    return header + body + headers


def many_symbols_one_string(size):
    """About `size` bytes: half a string table holding one long name, half a
    symbol table whose every symbol names it (the quadratic case)."""
    name = b"s" * (size // 2)
    strtab = b"\0" + name + b"\0"
    nsyms = size // 2 // 24
    symtab = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0) + struct.pack("<IBBHQQ", 1, 0x11, 0, 0, 0, 0) * nsyms
    shstrtab = b"\0.shstrtab\0.strtab\0.symtab\0"
    return elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_STRTAB, strtab, 0), (19, SHT_SYMTAB, symtab, 2)], 1)


def same_named_sections(count, name_bytes):
    """`count` .nv.info sections sharing one name of about name_bytes bytes."""
    shstrtab = b"\0.shstrtab\0.nv.info.k" + b"x" * name_bytes + b"\0"
    record = struct.pack("<BBH", 3, 0x19, 8)
    sections = [(1, SHT_STRTAB, shstrtab, 0)] + [(11, SHT_CUDA_INFO, record, 0)] * count
    return elf(sections, 1)


def kernel_named(raw_name):
    """One kernel whose name is the bytes raw_name."""
    shstrtab = b"\0.shstrtab\0.nv.info." + raw_name + b"\0"
    kparam = struct.pack("<BBH", 4, 0x17, 12) + struct.pack("<IHHI", 0, 0, 0, (8 << 18) | (0x1F << 12))
    return elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_CUDA_INFO, kparam, 0)], 1)


def kernel_with_param_cbank(value):
    """One kernel with one parameter and an EIATTR_PARAM_CBANK record holding `value`."""
    shstrtab = b"\0.shstrtab\0.nv.info.k\0"
    kparam = struct.pack("<BBH", 4, 0x17, 12) + struct.pack("<IHHI", 0, 0, 0, (4 << 18) | (0x1F << 12))
    cbank = struct.pack("<BBH", 4, 0x0A, len(value)) + value
    return elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_CUDA_INFO, kparam + cbank, 0)], 1)


def write(data, name):
    path = os.path.join(os.environ.get("TEST_TMPDIR", tempfile.gettempdir()), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def run_reader(args, env=None, memory_bytes=512 << 20, timeout=60):
    """The command line in a subprocess whose address space is capped."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return subprocess.run(
        [sys.executable, READER] + args, capture_output=True, timeout=timeout, preexec_fn=cap, env=dict(os.environ, **(env or {}))
    )


class CleanErrorTest(unittest.TestCase):
    def refused(self, args, *pieces, **kw):
        r = run_reader(args, **kw)
        err = r.stderr.decode("utf-8", "replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertNotIn("Traceback", err)
        self.assertTrue(err.startswith("cubin_nvinfo: "), err)
        for p in pieces:
            self.assertIn(p, err)
        return err

    def test_param_cbank_gives_where_the_parameters_start(self):
        # symbol 9, parameters at 0x210 of the bank, 256 bytes of them: sm_90's start.
        path = write(kernel_with_param_cbank(struct.pack("<IHH", 9, 0x210, 256)), "cbank.cubin")
        cubin = nvinfo.load(path)
        self.assertEqual(cubin.kernels["k"].param_base, 0x210)

    def test_a_cut_param_cbank_record_is_one_clean_error(self):
        path = write(kernel_with_param_cbank(struct.pack("<IH", 9, 0x210)), "cbank_cut.cubin")
        self.refused([path], "EIATTR_PARAM_CBANK of 6 bytes (expected 8)")

    def test_dev_zero_is_refused_unread(self):
        self.refused(["/dev/zero"], "/dev/zero: a character device, not a regular file")

    def test_a_fifo_is_refused_without_waiting_for_a_writer(self):
        path = os.path.join(os.environ.get("TEST_TMPDIR", tempfile.gettempdir()), "cubin.fifo")
        if os.path.exists(path):
            os.unlink(path)
        os.mkfifo(path)
        try:
            self.refused([path], "a FIFO, not a regular file", timeout=20)
        finally:
            os.unlink(path)

    def test_a_directory_is_refused(self):
        self.refused([os.environ.get("TEST_TMPDIR", tempfile.gettempdir())], "a directory, not a regular file")

    def test_a_file_over_the_cap_is_refused_unread(self):
        path = write(kernel_named(b"k"), "capped.cubin")
        self.refused(["--max-bytes", "100", path], "more than the 100 this reader takes (--max-bytes)")

    def test_65533_same_named_sections_are_one_clean_error_in_bounded_memory(self):
        # 65,533 sections naming one 64 KiB name: decoding the name once per
        # section would take 4 GiB; the subprocess has 512 MiB.
        path = write(same_named_sections(65533, 64 << 10), "same_named.cubin")
        self.refused([path], "sections 2 and 3 name the same kernel")

    def two_kernel_sections_refused(self, names, second_name_at, message):
        """Sections 2 and 3: .nv.info sections named at byte 11 and at
        second_name_at of the name table `names`."""
        record = struct.pack("<BBH", 3, 0x19, 8)
        shstrtab = b"\0.shstrtab\0" + names
        data = elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_CUDA_INFO, record, 0), (second_name_at, SHT_CUDA_INFO, record, 0)], 1)
        with self.assertRaises(nvinfo.CubinError) as cm:
            nvinfo.parse_cubin(data, "two.cubin")
        self.assertIn(message, str(cm.exception))

    def test_a_kernel_name_that_is_the_end_of_another_is_refused(self):
        self.two_kernel_sections_refused(
            b".nv.info.a.nv.info.b\0", 21, "sections 2 and 3 name the same kernel, or one kernel's name is the end of the other's"
        )

    def test_two_copies_of_one_kernels_name_are_refused(self):
        self.two_kernel_sections_refused(b".nv.info.k\0.nv.info.k\0", 22, "two .nv.info sections for kernel k (sections 2 and 3)")

    def test_sections_read_over_and_over_are_refused(self):
        # 4,000 kernels whose .nv.info sections all cover the same 4 KiB.
        names = b"".join(b".nv.info.k%d\0" % i for i in range(4000))
        shstrtab = b"\0.shstrtab\0" + names
        blob = struct.pack("<BBH", 3, 0x19, 8) * 1024
        data = bytearray(elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_CUDA_INFO, blob, 0)], 1))
        # Repeat the second section header 4,000 times over the same bytes.
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        second = bytes(data[shoff + 128 : shoff + 192])
        headers, at = [], 11
        for i in range(4000):
            h = bytearray(second)
            struct.pack_into("<I", h, 0, at)
            at += len(b".nv.info.k%d\0" % i)
            headers.append(bytes(h))
        data = bytes(data[: shoff + 128]) + b"".join(headers)
        data = data[:0x3C] + struct.pack("<H", 4002) + data[0x3E:]
        with self.assertRaises(nvinfo.CubinError) as cm:
            nvinfo.parse_cubin(data, "overlap.cubin")
        self.assertIn("add up to more than twice the file", str(cm.exception))


class LinearTimeTest(unittest.TestCase):
    def test_many_symbols_sharing_one_string_take_linear_time(self):
        # Before: 1 MB 10 s, 2 MB 52 s, 4 MB 176 s (issue 15). Each symbol's
        # name is compared in place now; the bound is 10 times what linear
        # time takes on a loaded two-core machine, 20 times under the old 4 MB.
        times = {}
        for mb in (1, 2, 4):
            data = many_symbols_one_string(mb << 20)
            start = time.perf_counter()
            c = nvinfo.parse_cubin(data, "%d MB" % mb)
            times[mb] = time.perf_counter() - start
            self.assertIsNone(c.module_info)
            self.assertLess(times[mb], 8.0, "%d MB took %.1f s" % (mb, times[mb]))
        print("parse times: %s" % ", ".join("%d MB %.3f s" % kv for kv in sorted(times.items())))

    def test_the_module_info_symbol_is_still_found_among_them(self):
        text = b"klaunch-module 1\nfamily f\n\0"
        strtab = b"\0" + b"s" * 100000 + b"\0kl__module_info\0"
        syms = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0) + struct.pack("<IBBHQQ", 1, 0x11, 0, 0, 0, 0) * 1000
        syms += struct.pack("<IBBHQQ", 100002, 0x11, 0, 4, 0, len(text))
        shstrtab = b"\0.shstrtab\0.strtab\0.symtab\0.nv.global.init\0"
        data = elf([(1, SHT_STRTAB, shstrtab, 0), (11, SHT_STRTAB, strtab, 0), (19, SHT_SYMTAB, syms, 2), (27, 1, text, 0)], 1)
        self.assertEqual(nvinfo.parse_cubin(data, "t").module_info, "klaunch-module 1\nfamily f\n")


class OutputTest(unittest.TestCase):
    def test_a_non_ascii_kernel_name_prints_to_an_ascii_stdout(self):
        path = write(kernel_named("kérnel_ß".encode("utf-8")), "non_ascii.cubin")
        r = run_reader([path], env={"PYTHONIOENCODING": "ascii"})
        self.assertEqual(r.returncode, 0, r.stderr.decode("utf-8", "replace"))
        self.assertNotIn(b"Traceback", r.stderr)
        out = r.stdout.decode("ascii")
        self.assertIn("k\\xe9rnel_\\xdf: 1 parameters", out)

    def test_a_non_utf8_kernel_name_is_shown_escaped(self):
        c = nvinfo.parse_cubin(kernel_named(b"k\xff"), "t")
        self.assertEqual(list(c.kernels), ["k\\xff"])

    def test_a_newline_in_a_kernel_name_cannot_start_a_line(self):
        path = write(kernel_named(b"k\ncubin_nvinfo: forged"), "newline.cubin")
        r = run_reader([path])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode("utf-8").splitlines()
        self.assertFalse([l for l in lines if l.startswith("cubin_nvinfo: forged")], lines)
        self.assertIn("k\\ncubin_nvinfo: forged", r.stdout.decode("utf-8"))

    def test_json_output_is_ascii(self):
        path = write(kernel_named("kérnel".encode("utf-8")), "json.cubin")
        r = run_reader(["--json", path], env={"PYTHONIOENCODING": "ascii"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"k\\u00e9rnel", r.stdout)


if __name__ == "__main__":
    junit_unittest.main()
