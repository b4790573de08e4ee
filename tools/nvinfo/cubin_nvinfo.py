"""cubin_nvinfo: the kernel parameter records of CUDA cubins, read without cuobjdump.

A cubin is an ELF file (machine EM_CUDA, 190). Each kernel K has a section
`.nv.info.K` (type SHT_CUDA_INFO, 0x70000000) holding a flat list of
attribute records, each

    u8 format, u8 attribute, then by format:
      EIFMT_NVAL 0x01  2 unused bytes
      EIFMT_BVAL 0x02  2 bytes (a byte value and padding)
      EIFMT_HVAL 0x03  u16 value
      EIFMT_SVAL 0x04  u16 size, then `size` bytes

Two attributes give the layout the driver packs arguments by:

    EIATTR_KPARAM_INFO      0x17  SVAL, one per parameter, 12 bytes:
                                  u32 index, u16 ordinal, u16 offset,
                                  u32 flags: bits 0-7 log2 of the pointee's
                                  alignment, 8-11 space, 12-16 constant bank,
                                  17 "not in a constant bank", 18-31 size in bytes
    EIATTR_CBANK_PARAM_SIZE 0x19  HVAL, the parameter buffer's size in bytes

(as `cuobjdump -elf` prints them: "Index : 0x0  Ordinal : 0x2  Offset : 0x10
Size : 0x8"; kl_fatbin's <name>_cuobjdump_test, bazel/cuobjdump_test.py,
checks this reader against its output on every cubin of the build). A klaunch cubin also holds the module metadata text in the
device global `kl__module_info` (docs/DESIGN.md), read here too.

Standard library only, so it runs wherever Python 3 does.

    python3 tools/nvinfo/cubin_nvinfo.py [--json] CUBIN...
"""

import argparse
import json
import os
import re
import stat
import struct
import sys

EM_CUDA = 190
SHT_SYMTAB = 2
SHT_NOBITS = 8
SHT_CUDA_INFO = 0x70000000

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK = 0x0A
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19

MODULE_INFO_SYMBOL = "kl__module_info"
INFO_PREFIX = ".nv.info."


class CubinError(Exception):
    """The file is not a cubin this reader understands; says why and where."""


class Param:
    """One EIATTR_KPARAM_INFO record."""

    __slots__ = ("ordinal", "offset", "size", "index", "flags")

    def __init__(self, ordinal, offset, size, index=0, flags=0):
        self.ordinal = ordinal
        self.offset = offset
        self.size = size
        self.index = index
        self.flags = flags

    @property
    def log_alignment(self):
        return self.flags & 0xFF

    @property
    def space(self):
        return (self.flags >> 8) & 0xF

    @property
    def cbank(self):
        return (self.flags >> 12) & 0x1F

    def key(self):
        return (self.ordinal, self.offset, self.size)

    def as_dict(self):
        return {"ordinal": self.ordinal, "offset": self.offset, "size": self.size}

    def __repr__(self):
        return "Param(ordinal=%d, offset=%d, size=%d)" % (self.ordinal, self.offset, self.size)


class Kernel:
    """A kernel's parameter records, sorted by ordinal, and its buffer size."""

    def __init__(self, name, params, param_size, param_base=None):
        self.name = name
        self.params = sorted(params, key=lambda p: p.ordinal)
        self.param_size = param_size  # EIATTR_CBANK_PARAM_SIZE, or None when absent
        # EIATTR_PARAM_CBANK's offset: where the parameters start in constant
        # bank 0 (0x160 for sm_7x/8x, 0x210 for sm_90, 0x380 for sm_100), which
        # places a 128-byte-aligned parameter; None when absent.
        self.param_base = param_base

    def as_dict(self):
        return {"params": [p.as_dict() for p in self.params], "param_size": self.param_size}


class Cubin:
    def __init__(self, path, sm, kernels, module_info):
        self.path = path
        self.sm = sm  # e.g. 90, from e_flags
        self.kernels = kernels  # {name: Kernel}
        self.module_info = module_info  # the metadata text, or None

    def module_field(self, key):
        """A field of the module metadata ("spec_hash", "family", ...), or None."""
        for line in (self.module_info or "").splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] == key:
                return parts[1].strip()
        return None


class _Section:
    __slots__ = ("index", "name", "type", "offset", "size", "link", "info")


def _u(fmt, data, offset, what, path):
    try:
        return struct.unpack_from(fmt, data, offset)
    except struct.error:
        raise CubinError("%s: truncated: %s at byte %d lies past the end (%d bytes)" % (path, what, offset, len(data)))


def _sections(data, path):
    """The section headers, without their names (read_names gives the few
    that are needed): decoding every name of a crafted file costs time and
    memory quadratic in its size."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise CubinError("%s: not an ELF file (a fatbin or PTX? give the per-architecture .cubin)" % path)
    if data[4] != 2 or data[5] != 1:
        raise CubinError("%s: not a 64-bit little-endian ELF file" % path)
    (machine,) = _u("<H", data, 18, "e_machine", path)
    if machine != EM_CUDA:
        raise CubinError("%s: ELF machine %d is not EM_CUDA (190)" % (path, machine))
    (shoff,) = _u("<Q", data, 0x28, "e_shoff", path)
    shentsize, shnum, shstrndx = _u("<HHH", data, 0x3A, "section header fields", path)
    if shentsize < 64:
        raise CubinError("%s: section header entries of %d bytes (expected 64)" % (path, shentsize))
    if shoff + shnum * shentsize > len(data):
        raise CubinError("%s: truncated: %d section headers at byte %d end past the end (%d bytes)" % (path, shnum, shoff, len(data)))
    out = []
    for i in range(shnum):
        s = _Section()
        s.name, s.type, _flags, _addr, s.offset, s.size, s.link, s.info = struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize)
        s.index = i
        if s.type != SHT_NOBITS and s.offset + s.size > len(data):
            raise CubinError("%s: truncated: section %d (%d bytes at %d) ends past the end" % (path, i, s.size, s.offset))
        out.append(s)
    if not (0 < shstrndx < len(out)) or out[shstrndx].type == SHT_NOBITS:
        raise CubinError("%s: no section name table (e_shstrndx %d)" % (path, shstrndx))
    return out, out[shstrndx]


def _kernel_sections(data, sections, names, path):
    """[(section, kernel name)] of the .nv.info.<kernel> sections, in one
    pass over the name table: the names' ends are found in order of their
    starts, so no byte of the table is scanned twice, and two kernels may not
    share a name's bytes (a second section of one kernel, or a name that is
    the tail of another), which keeps the decoded names within the file's
    size."""
    prefix = INFO_PREFIX.encode()
    base, end = names.offset, names.offset + names.size
    starts = []
    for s in sections:
        if s.type != SHT_CUDA_INFO or s.index == 0:
            continue
        if s.name >= names.size:
            raise CubinError("%s: the name of section %d lies past its name table" % (path, s.index))
        if data.startswith(prefix, base + s.name):
            starts.append((s.name, s))
    starts.sort(key=lambda t: (t[0], t[1].index))
    out, owner, nul = [], {}, -1
    for start, s in starts:
        if base + start > nul:
            nul = data.find(b"\0", base + start, end)
            if nul < 0:
                raise CubinError("%s: the name of section %d is not NUL-terminated in its name table" % (path, s.index))
        if nul in owner:
            first = owner[nul]
            raise CubinError(
                "%s: sections %d and %d name the same kernel, or one kernel's name is the end of the other's: a cubin has one .nv.info section per kernel"
                % (path, first.index, s.index)
            )
        owner[nul] = s
        out.append((s, data[base + start + len(prefix) : nul].decode("utf-8", "backslashreplace")))
    out.sort(key=lambda t: t[0].index)
    return out


def parse_records(blob, where="section"):
    """[(format, attribute, value bytes)] of one .nv.info section."""
    out = []
    p = 0
    n = len(blob)
    while p < n:
        if p + 2 > n:
            raise CubinError("%s: a record header at byte %d is cut off" % (where, p))
        fmt, attr = blob[p], blob[p + 1]
        if fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            if p + 4 > n:
                raise CubinError("%s: attribute 0x%02x at byte %d is cut off" % (where, attr, p))
            value, p = (b"" if fmt == EIFMT_NVAL else bytes(blob[p + 2 : p + 4])), p + 4
        elif fmt == EIFMT_SVAL:
            if p + 4 > n:
                raise CubinError("%s: attribute 0x%02x at byte %d is cut off" % (where, attr, p))
            (size,) = struct.unpack_from("<H", blob, p + 2)
            if p + 4 + size > n:
                raise CubinError("%s: attribute 0x%02x at byte %d says %d bytes; %d are left" % (where, attr, p, size, n - p - 4))
            value, p = bytes(blob[p + 4 : p + 4 + size]), p + 4 + size
        else:
            raise CubinError("%s: unknown record format 0x%02x at byte %d" % (where, fmt, p))
        out.append((fmt, attr, value))
    return out


def kernel_from_records(name, records, where):
    params, param_size, param_base = [], None, None
    for fmt, attr, value in records:
        if attr == EIATTR_KPARAM_INFO:
            if fmt != EIFMT_SVAL or len(value) < 12:
                raise CubinError("%s: EIATTR_KPARAM_INFO of %d bytes (expected 12)" % (where, len(value)))
            index, ordinal, offset, flags = struct.unpack_from("<IHHI", value, 0)
            params.append(Param(ordinal, offset, (flags >> 18) & 0x3FFF, index, flags))
        elif attr == EIATTR_CBANK_PARAM_SIZE:
            if fmt != EIFMT_HVAL:
                raise CubinError("%s: EIATTR_CBANK_PARAM_SIZE in format 0x%02x (expected HVAL)" % (where, fmt))
            (param_size,) = struct.unpack_from("<H", value, 0)
        elif attr == EIATTR_PARAM_CBANK:
            # SVAL: the constant bank's symbol index (4 bytes), then the
            # parameters' offset and size in it (2 bytes each).
            if fmt != EIFMT_SVAL or len(value) < 8:
                raise CubinError("%s: EIATTR_PARAM_CBANK of %d bytes (expected 8)" % (where, len(value)))
            (param_base,) = struct.unpack_from("<H", value, 4)
    ordinals = sorted(p.ordinal for p in params)
    if ordinals != list(range(len(params))):
        raise CubinError("%s: kernel %s has parameter ordinals %s, not 0..%d" % (where, name, ordinals, len(params) - 1))
    return Kernel(name, params, param_size, param_base)


def _module_info(data, sections, path):
    """The kl__module_info text (up to its NUL), or None when there is none.
    Each symbol's name is compared in place (with its NUL), never decoded:
    many symbols sharing one long name cost no more than short ones."""
    wanted = MODULE_INFO_SYMBOL.encode() + b"\0"
    for s in sections:
        if s.type != SHT_SYMTAB or not (0 < s.link < len(sections)):
            continue
        strtab = sections[s.link]
        if strtab.type == SHT_NOBITS:
            continue
        for j, (st_name, _info, _other, shndx, value, size) in enumerate(struct.iter_unpack("<IBBHQQ", memoryview(data)[s.offset : s.offset + s.size - s.size % 24])):
            if st_name >= strtab.size or not data.startswith(wanted, strtab.offset + st_name):
                continue
            if strtab.offset + st_name + len(wanted) > strtab.offset + strtab.size:
                continue
            if not (0 < shndx < len(sections)) or sections[shndx].type == SHT_NOBITS:
                return None
            home = sections[shndx]
            if value + size > home.size:
                raise CubinError("%s: %s (%d bytes at %d) lies outside its section %d" % (path, MODULE_INFO_SYMBOL, size, value, shndx))
            raw = data[home.offset + value : home.offset + value + size]
            return raw.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
    return None


def parse_cubin(data, path="<cubin>"):
    sections, names = _sections(data, path)
    (flags,) = _u("<I", data, 48, "e_flags", path)
    # ELF ABI version 8 and later keep the SM in bits 8-15, earlier in 0-7.
    sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF
    kernels, home = {}, {}
    view = memoryview(data)
    read = 0
    for s, name in _kernel_sections(data, sections, names, path):
        if name in home:
            raise CubinError("%s: two .nv.info sections for kernel %s (sections %d and %d)" % (path, name, home[name], s.index))
        home[name] = s.index
        # Sections may overlap; reading the same bytes over and over is refused.
        read += s.size
        if read > 2 * len(data):
            raise CubinError("%s: the .nv.info sections add up to more than twice the file (they overlap over and over)" % path)
        where = "%s: section .nv.info.%s" % (path, name)
        kernels[name] = kernel_from_records(name, parse_records(view[s.offset : s.offset + s.size], where), where)
    return Cubin(path, sm, kernels, _module_info(data, sections, path))


# Largest file load() reads: klaunch's cubins are under 2 MB, the largest
# NVIDIA ships some tens of MB. --max-bytes changes it.
MAX_BYTES = 256 << 20


def load(path, max_bytes=MAX_BYTES):
    """The cubin at `path`: a regular file of at most max_bytes, asked
    without blocking (a FIFO or a device is refused, not read)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise CubinError("%s: cannot open: %s" % (path, e.strerror))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode) else "not a file"
            raise CubinError("%s: %s, not a regular file" % (path, kind))
        if st.st_size > max_bytes:
            raise CubinError("%s: %d bytes, more than the %d this reader takes (--max-bytes)" % (path, st.st_size, max_bytes))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise CubinError("%s: more than %d bytes (it grew while read)" % (path, max_bytes))
    if not data:
        raise CubinError("%s: empty file (built without a CUDA toolkit?)" % path)
    return parse_cubin(data, path)


# ---- cuobjdump -elf text ---------------------------------------------------------

_KPARAM_TEXT = re.compile(r"Index\s*:\s*(0x[0-9a-fA-F]+)\s+Ordinal\s*:\s*(0x[0-9a-fA-F]+)\s+Offset\s*:\s*(0x[0-9a-fA-F]+)\s+Size\s*:\s*(0x[0-9a-fA-F]+)")


def parse_cuobjdump_elf(text, where="<cuobjdump>"):
    """{kernel: Kernel} from `cuobjdump -elf` output of one cubin: its
    `.nv.info.<kernel>` blocks (a line naming the section, then tab-indented
    `Attribute:`, `Format:` and `Value:` lines)."""
    kernels = {}
    current = None  # [name, params, param_size]
    attr = None
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if line and not line[0].isspace():
            if current:
                kernels[current[0]] = Kernel(current[0], current[1], current[2])
            current = None
            name = line.strip()
            if name.startswith(INFO_PREFIX):
                current = [name[len(INFO_PREFIX) :], [], None]
            continue
        if current is None:
            continue
        s = line.strip()
        if s.startswith("Attribute:"):
            attr = s.split(":", 1)[1].strip()
        elif s.startswith("Value:") and attr == "EIATTR_KPARAM_INFO":
            m = _KPARAM_TEXT.search(s)
            if not m:
                raise CubinError("%s:%d: EIATTR_KPARAM_INFO value not understood: %s" % (where, n, s))
            index, ordinal, offset, size = (int(g, 16) for g in m.groups())
            current[1].append(Param(ordinal, offset, size, index))
        elif s.startswith("Value:") and attr == "EIATTR_CBANK_PARAM_SIZE":
            current[2] = int(s.split(":", 1)[1].strip(), 16)
    if current:
        kernels[current[0]] = Kernel(current[0], current[1], current[2])
    return kernels


def _shown(text):
    """A name or text as one line: control characters escaped, so a crafted
    name cannot start a line of its own."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def describe(cubin):
    lines = ["%s: sm_%d, %d kernels" % (cubin.path, cubin.sm, len(cubin.kernels))]
    for name in sorted(cubin.kernels):
        k = cubin.kernels[name]
        size = "?" if k.param_size is None else str(k.param_size)
        lines.append("  %s: %d parameters, %s bytes (EIATTR_CBANK_PARAM_SIZE)" % (_shown(name), len(k.params), size))
        for p in k.params:
            lines.append("    ordinal %2d  offset %4d  size %2d" % (p.ordinal, p.offset, p.size))
    if cubin.module_info is not None:
        lines.append("  %s:" % MODULE_INFO_SYMBOL)
        lines += ["    " + _shown(l) for l in cubin.module_info.split("\n")]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cubin_nvinfo", description="Print the kernel parameter records (EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE) of cubins.")
    ap.add_argument("--json", action="store_true", help="one JSON object: {cubin: {sm, module_info, kernels: {name: {params, param_size}}}}")
    ap.add_argument("--max-bytes", type=int, default=MAX_BYTES, metavar="N", help="largest file read (default %d)" % MAX_BYTES)
    ap.add_argument("cubins", nargs="+", metavar="CUBIN")
    args = ap.parse_args(argv)
    # Names are printed as they are; a terminal or pipe that cannot show a
    # character gets an escape instead of a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    out, status = {}, 0
    for path in args.cubins:
        try:
            c = load(path, args.max_bytes)
        except (OSError, CubinError) as e:
            print("cubin_nvinfo: %s" % _shown(str(e)), file=sys.stderr)
            status = 1
            continue
        if args.json:
            out[path] = {"sm": c.sm, "module_info": c.module_info, "kernels": {n: k.as_dict() for n, k in sorted(c.kernels.items())}}
        else:
            print(describe(c))
    if args.json:
        json.dump(out, sys.stdout, indent=1, sort_keys=True)
        print()
    return status


if __name__ == "__main__":
    sys.exit(main())
