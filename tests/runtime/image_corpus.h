// Kernel images for the image-check tests (issue 15, item 2): a small cubin
// and a fatbin built here from the ELF64 and fatbin layouts (so the tests
// run without a CUDA toolkit), readers of their structures, and the damaged
// images: each a named edit of an intact cubin or fatbin (synthetic or real)
// that moves an offset or a size the driver follows outside the image, with
// the words kl_image_check's message must contain.
//
// Layouts: ELF64 as the System V gABI gives it (header 64 bytes, program
// headers 56, section headers 64, symbols 24, Rela 24), EM_CUDA 190;
// .nv.info records as tools/nvinfo/cubin_nvinfo.py reads them; the fatbin
// container as fatbinary writes it (16-byte header: magic 0xBA55ED50, u16
// version 1, u16 header size, u64 size of the entries; each entry: u16
// kind, u16 version, u32 header size, u64 payload size, u32 compressed size,
// u32 options offset, u32 version, u32 sm, u32 identifier offset, u32
// identifier size, u64 flags, 8 reserved bytes, u64 decompressed size).
#ifndef KLAUNCH_TESTS_RUNTIME_IMAGE_CORPUS_H
#define KLAUNCH_TESTS_RUNTIME_IMAGE_CORPUS_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace kl_image_corpus {

using Bytes = std::vector<unsigned char>;

inline uint64_t get(const Bytes &b, uint64_t at, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = (v << 8) | b.at(at + i);
    return v;
}
inline void put(Bytes &b, uint64_t at, unsigned n, uint64_t v) {
    for (unsigned i = 0; i < n; i++) b.at(at + i) = static_cast<unsigned char>(v >> (8 * i));
}
inline void append(Bytes &b, unsigned n, uint64_t v) {
    b.resize(b.size() + n);
    put(b, b.size() - n, n, v);
}
inline void append(Bytes &b, const std::string &s) { b.insert(b.end(), s.begin(), s.end()); }
inline void pad_to(Bytes &b, size_t align) {
    while (b.size() % align) b.push_back(0);
}

// The metadata text kl_module_load reads (docs/DESIGN.md).
const char kModuleInfo[] = "klaunch-module 1\nfamily corpus\nvariant v\nconst C 3\n";

// ---- a cubin built from the ELF64 layout ---------------------------------------

struct Section {
    std::string name;
    uint32_t type;
    uint64_t flags;
    Bytes data;
    uint32_t link, info;
    uint64_t align, entsize;
    uint64_t nobits_size;  // SHT_NOBITS: its size (no contents)
};

enum : uint32_t {
    kSecShstrtab = 1,
    kSecStrtab,
    kSecSymtab,
    kSecNote,
    kSecInfo,
    kSecKernelInfo,
    kSecRela,
    kSecText,
    kSecGlobalInit,
    kSecShared,
    kNumSections
};

// Sections in the order nvcc writes them, program headers at the end of the
// file (where cuModuleLoadData reads them last: a cubin cut by one byte loses
// them). One kernel "k" of 64 bytes with one u64 parameter, kl__module_info
// in .nv.global.init, one relocation, one note, shared memory.
inline Bytes SyntheticCubin() {
    std::vector<Section> s(kNumSections);
    s[kSecShstrtab] = {".shstrtab", 3, 0, {}, 0, 0, 1, 0, 0};
    s[kSecStrtab] = {".strtab", 3, 0, {}, 0, 0, 1, 0, 0};
    s[kSecSymtab] = {".symtab", 2, 0, {}, kSecStrtab, 2, 8, 24, 0};
    s[kSecNote] = {".note.nv.cuinfo", 7, 0, {}, 0, 0, 4, 0, 0};
    s[kSecInfo] = {".nv.info", 0x70000000, 0, {}, kSecSymtab, 0, 4, 0, 0};
    s[kSecKernelInfo] = {".nv.info.k", 0x70000000, 0x40, {}, kSecSymtab, kSecText, 4, 0, 0};
    s[kSecRela] = {".rela.text.k", 4, 0x40, {}, kSecSymtab, kSecText, 8, 24, 0};
    s[kSecText] = {".text.k", 1, 0x6, Bytes(64, 0x11), kSecSymtab, 3, 128, 0, 0};
    s[kSecGlobalInit] = {".nv.global.init", 1, 0x3, {}, 0, 0, 1, 0, 0};
    s[kSecShared] = {".nv.shared.k", 8, 0x3, {}, 0, kSecText, 16, 0, 4096};
    // Names.
    Bytes shstr{0};
    std::vector<uint32_t> name_at(kNumSections, 0);
    for (uint32_t i = 1; i < kNumSections; i++) {
        name_at[i] = static_cast<uint32_t>(shstr.size());
        append(shstr, s[i].name);
        shstr.push_back(0);
    }
    s[kSecShstrtab].data = shstr;
    Bytes str{0};
    append(str, "k");
    str.push_back(0);
    append(str, "kl__module_info");
    str.push_back(0);
    s[kSecStrtab].data = str;
    // Symbols: null, the kernel's section, then (global) k and kl__module_info.
    Bytes sym(24, 0);
    append(sym, 4, 0), append(sym, 1, 3), append(sym, 1, 0), append(sym, 2, kSecText), append(sym, 8, 0),
        append(sym, 8, 0);
    append(sym, 4, 1), append(sym, 1, 0x12), append(sym, 1, 0x10), append(sym, 2, kSecText), append(sym, 8, 0),
        append(sym, 8, 64);
    append(sym, 4, 3), append(sym, 1, 0x11), append(sym, 1, 0), append(sym, 2, kSecGlobalInit), append(sym, 8, 0),
        append(sym, 8, sizeof kModuleInfo);
    s[kSecSymtab].data = sym;
    // A note: name "NVIDIA\0" (7 bytes, padded to 8), an 8-byte descriptor.
    Bytes note;
    append(note, 4, 7), append(note, 4, 8), append(note, 4, 1000);
    append(note, "NVIDIA"), note.push_back(0), note.push_back(0);
    append(note, 8, 0x0000000200000008ull);
    s[kSecNote].data = note;
    // .nv.info: one HVAL record. .nv.info.k: the parameter (EIATTR_KPARAM_INFO,
    // u32 index, u16 ordinal, u16 offset, u32 flags with the size in bits
    // 18-31) and EIATTR_CBANK_PARAM_SIZE.
    Bytes info;
    append(info, 1, 3), append(info, 1, 0x2f), append(info, 2, 32);
    s[kSecInfo].data = info;
    Bytes kinfo;
    append(kinfo, 1, 4), append(kinfo, 1, 0x17), append(kinfo, 2, 12);
    append(kinfo, 4, 0), append(kinfo, 2, 0), append(kinfo, 2, 0), append(kinfo, 4, (8u << 18) | 0x1f000u);
    append(kinfo, 1, 3), append(kinfo, 1, 0x19), append(kinfo, 2, 8);
    s[kSecKernelInfo].data = kinfo;
    // One relocation in .text.k against kl__module_info.
    Bytes rela;
    append(rela, 8, 16), append(rela, 8, (3ull << 32) | 2u), append(rela, 8, 0);
    s[kSecRela].data = rela;
    Bytes init(kModuleInfo, kModuleInfo + sizeof kModuleInfo);
    s[kSecGlobalInit].data = init;

    // Layout: header, contents, section headers, program headers.
    Bytes out(64, 0);
    std::vector<uint64_t> off(kNumSections, 0);
    for (uint32_t i = 1; i < kNumSections; i++) {
        pad_to(out, s[i].align ? s[i].align : 1);
        off[i] = out.size();
        out.insert(out.end(), s[i].data.begin(), s[i].data.end());
    }
    pad_to(out, 8);
    const uint64_t shoff = out.size();
    out.resize(out.size() + 64, 0);  // section 0
    for (uint32_t i = 1; i < kNumSections; i++) {
        append(out, 4, name_at[i]), append(out, 4, s[i].type), append(out, 8, s[i].flags), append(out, 8, 0);
        append(out, 8, off[i]);
        append(out, 8, s[i].type == 8 ? s[i].nobits_size : s[i].data.size());
        append(out, 4, s[i].link), append(out, 4, s[i].info), append(out, 8, s[i].align),
            append(out, 8, s[i].entsize);
    }
    const uint64_t phoff = out.size();
    // PT_PHDR over the table itself, PT_LOAD over .text.k, PT_LOAD over
    // .nv.global.init with the shared memory after it (filesz < memsz).
    const uint64_t phnum = 3;
    append(out, 4, 6), append(out, 4, 4), append(out, 8, phoff), append(out, 8, 0), append(out, 8, 0),
        append(out, 8, phnum * 56), append(out, 8, phnum * 56), append(out, 8, 8);
    append(out, 4, 1), append(out, 4, 5), append(out, 8, off[kSecText]), append(out, 8, 0), append(out, 8, 0),
        append(out, 8, 64), append(out, 8, 64), append(out, 8, 8);
    append(out, 4, 1), append(out, 4, 6), append(out, 8, off[kSecGlobalInit]), append(out, 8, 0), append(out, 8, 0),
        append(out, 8, sizeof kModuleInfo), append(out, 8, sizeof kModuleInfo + 4096), append(out, 8, 8);
    // The ELF header.
    out[0] = 0x7f, out[1] = 'E', out[2] = 'L', out[3] = 'F';
    out[4] = 2, out[5] = 1, out[6] = 1, out[7] = 0x41, out[8] = 8;
    put(out, 16, 2, 2);    // ET_EXEC
    put(out, 18, 2, 190);  // EM_CUDA
    put(out, 20, 4, 1);
    put(out, 0x20, 8, phoff);
    put(out, 0x28, 8, shoff);
    put(out, 0x30, 4, 0x5a05a);  // e_flags: sm_90 as nvcc writes ABI 8
    put(out, 0x34, 2, 64);
    put(out, 0x36, 2, 56);
    put(out, 0x38, 2, phnum);
    put(out, 0x3a, 2, 64);
    put(out, 0x3c, 2, kNumSections);
    put(out, 0x3e, 2, kSecShstrtab);
    return out;
}

// ---- reading a cubin's structures (synthetic or real) --------------------------

struct Elf {
    const Bytes &b;
    explicit Elf(const Bytes &bytes) : b(bytes) {}
    uint64_t phoff() const { return get(b, 0x20, 8); }
    uint64_t shoff() const { return get(b, 0x28, 8); }
    uint64_t phnum() const { return get(b, 0x38, 2); }
    uint64_t shnum() const { return get(b, 0x3c, 2); }
    uint64_t shstrndx() const { return get(b, 0x3e, 2); }
    uint64_t sh(uint64_t i) const { return shoff() + 64 * i; }  // section header i
    uint32_t type(uint64_t i) const { return static_cast<uint32_t>(get(b, sh(i) + 4, 4)); }
    uint64_t offset(uint64_t i) const { return get(b, sh(i) + 24, 8); }
    uint64_t size(uint64_t i) const { return get(b, sh(i) + 32, 8); }
    uint64_t link(uint64_t i) const { return get(b, sh(i) + 40, 4); }
    uint64_t info(uint64_t i) const { return get(b, sh(i) + 44, 4); }
    // The first non-empty section of `type`, or 0.
    uint64_t find(uint32_t t) const {
        for (uint64_t i = 1; i < shnum(); i++)
            if (type(i) == t && size(i) > 0) return i;
        return 0;
    }
    uint64_t ph(uint64_t i) const { return phoff() + 56 * i; }  // program header i
};

// ---- a fatbin built from the container layout ----------------------------------

struct Entry {
    uint16_t kind;  // 1 PTX, 2 ELF
    uint32_t sm;
    Bytes payload;
    std::string ident;  // kept in the header, as fatbinary --ident does
    uint64_t flags;     // 0x11 plain; | 0x8000 zstd
    uint64_t decompressed;
};

inline Bytes Fatbin(const std::vector<Entry> &entries) {
    Bytes out(16, 0);
    put(out, 0, 4, 0xBA55ED50u);
    put(out, 4, 2, 1);
    put(out, 6, 2, 16);
    for (const Entry &e : entries) {
        // Header: the 64 fixed bytes, the identifier (padded to 8), then an
        // options record {offset, size} pointing at empty options.
        const uint64_t ident_at = 64, ident_bytes = e.ident.size();
        const uint64_t options_at = ident_at + ((ident_bytes + 8) & ~7ull);
        const uint64_t header = options_at + 8 + 8;
        Bytes payload = e.payload;
        pad_to(payload, 8);
        const size_t at = out.size();
        out.resize(at + header, 0);
        put(out, at + 0, 2, e.kind);
        put(out, at + 2, 2, 0x101);
        put(out, at + 4, 4, header);
        put(out, at + 8, 8, payload.size());
        put(out, at + 16, 4, (e.flags & 0x8000) ? e.payload.size() : 0);
        put(out, at + 20, 4, options_at);
        put(out, at + 24, 4, e.kind == 1 ? 0x90000 : 0x10008);
        put(out, at + 28, 4, e.sm);
        put(out, at + 32, 4, ident_bytes ? ident_at : 0);
        put(out, at + 36, 4, ident_bytes);
        put(out, at + 40, 8, e.flags);
        put(out, at + 56, 8, e.decompressed);
        std::memcpy(&out[at + ident_at], e.ident.data(), ident_bytes);
        put(out, at + options_at, 4, options_at + 8);
        put(out, at + options_at + 4, 4, 0);
        out.insert(out.end(), payload.begin(), payload.end());
    }
    put(out, 8, 8, out.size() - 16);
    return out;
}

// An ELF entry (the synthetic cubin), a PTX entry with its NUL, and a
// zstd-flagged entry (a frame header and bytes: its contents are the
// decompressor's, only its sizes and frame magic are checked).
inline Bytes SyntheticFatbin() {
    Bytes ptx;
    append(ptx, ".version 9.0\n.target sm_120\n.address_size 64\n// ");
    append(ptx, kModuleInfo);
    ptx.push_back(0);
    Bytes zstd = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x10, 0x81, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    return Fatbin({{2, 90, SyntheticCubin(), "", 0x11, 0},
                   {1, 120, ptx, "corpus_ident", 0x11, 0},
                   {1, 100, zstd, "", 0x8011, 16}});
}

struct FatbinEntryAt {
    uint64_t at, header, payload;
    uint16_t kind;
    uint64_t flags;
};
inline std::vector<FatbinEntryAt> FatbinEntries(const Bytes &f) {
    std::vector<FatbinEntryAt> out;
    const uint64_t end = get(f, 6, 2) + get(f, 8, 8);
    for (uint64_t at = get(f, 6, 2); at < end;) {
        FatbinEntryAt e{at, get(f, at + 4, 4), get(f, at + 8, 8), static_cast<uint16_t>(get(f, at, 2)),
                        get(f, at + 40, 8)};
        out.push_back(e);
        at += e.header + e.payload;
    }
    return out;
}

// ---- the damaged images ----------------------------------------------------------

struct Damage {
    std::string name;    // what was damaged
    std::string expect;  // words the refusal's message must contain
    Bytes image;
};

// Every damage below leaves the rest of the image intact; each one, alone,
// puts something the driver follows outside the image or makes a structure
// unreadable. `elf` is a whole cubin.
inline std::vector<Damage> CubinDamages(const Bytes &elf, const std::string &tag) {
    std::vector<Damage> out;
    const Elf e(elf);
    auto add = [&](const std::string &name, const std::string &expect, const std::function<void(Bytes &)> &edit) {
        Bytes b = elf;
        edit(b);
        out.push_back({tag + ": " + name, expect, b});
    };
    const uint64_t n = elf.size();
    add("truncated by one byte", "ends past the cubin's", [](Bytes &b) { b.pop_back(); });
    add("truncated inside the section header table", "section header table", [&](Bytes &b) {
        b.resize(e.shoff() + 64 * e.shnum() - 1);
    });
    add("truncated to its ELF header", "section header table", [](Bytes &b) { b.resize(64); });
    add("truncated to 63 bytes", "cannot hold the 64-byte ELF header", [](Bytes &b) { b.resize(63); });
    add("e_phoff past the end", "program header table", [&](Bytes &b) { put(b, 0x20, 8, n); });
    add("e_phoff wrapping around", "program header table", [&](Bytes &b) { put(b, 0x20, 8, ~0ull - 8); });
    add("e_phoff 0", "e_phoff is 0", [&](Bytes &b) { put(b, 0x20, 8, 0); });
    add("e_phnum too large", "program header table", [&](Bytes &b) { put(b, 0x38, 2, e.phnum() + 1000); });
    add("e_phnum 65535", "extended program header numbering", [&](Bytes &b) { put(b, 0x38, 2, 0xffff); });
    add("e_phentsize 32", "e_phentsize is 32", [&](Bytes &b) { put(b, 0x36, 2, 32); });
    add("e_shoff past the end", "section header table", [&](Bytes &b) { put(b, 0x28, 8, n + 64); });
    add("e_shoff wrapping around", "section header table", [&](Bytes &b) { put(b, 0x28, 8, ~0ull - 63); });
    add("e_shnum too large", "section header table", [&](Bytes &b) { put(b, 0x3c, 2, e.shnum() + 100); });
    add("e_shnum 0 (extended numbering)", "extended section numbering", [&](Bytes &b) { put(b, 0x3c, 2, 0); });
    add("e_shentsize 40", "e_shentsize is 40", [&](Bytes &b) { put(b, 0x3a, 2, 40); });
    add("e_shstrndx past the sections", "e_shstrndx", [&](Bytes &b) { put(b, 0x3e, 2, e.shnum()); });
    add("e_shstrndx on a symbol table", "not a string table", [&](Bytes &b) { put(b, 0x3e, 2, e.find(2)); });
    add("section name table without its NUL", "does not end with a NUL", [&](Bytes &b) {
        b.at(e.offset(e.shstrndx()) + e.size(e.shstrndx()) - 1) = 'x';
    });
    add("not EM_CUDA", "not EM_CUDA", [](Bytes &b) { put(b, 18, 2, 62); });
    add("a 32-bit ELF", "not a 64-bit little-endian ELF", [](Bytes &b) { b[4] = 1; });
    // Sections: the last one with contents, so its end is the image's last byte of section data.
    uint64_t last = 0;
    for (uint64_t i = 1; i < e.shnum(); i++)
        if (e.type(i) != 8 && e.size(i) > 0 && e.offset(i) >= e.offset(last)) last = i;
    add("section contents past the end", "its contents", [&](Bytes &b) { put(b, e.sh(last) + 24, 8, n - 1); });
    add("section size past the end", "its contents", [&](Bytes &b) { put(b, e.sh(last) + 32, 8, n); });
    add("section offset + size wrapping around", "its contents", [&](Bytes &b) {
        put(b, e.sh(last) + 24, 8, 16), put(b, e.sh(last) + 32, 8, ~0ull - 8);
    });
    add("section name past the name table", "its name at byte", [&](Bytes &b) {
        put(b, e.sh(last), 4, e.size(e.shstrndx()));
    });
    add("sh_link past the sections", "sh_link", [&](Bytes &b) { put(b, e.sh(last) + 40, 4, e.shnum()); });
    add("sh_addralign 3", "not a power of two", [&](Bytes &b) { put(b, e.sh(last) + 48, 8, 3); });
    const uint64_t symtab = e.find(2);
    if (symtab) {
        const uint64_t strtab = e.link(symtab), first = e.offset(symtab) + 24;
        add("symbol table entry size 16", "16-byte entries", [&](Bytes &b) {
            put(b, e.sh(symtab) + 56, 8, 16);
        });
        add("symbol table size not a multiple of 24", "whole number of 24-byte entries", [&](Bytes &b) {
            put(b, e.sh(symtab) + 32, 8, e.size(symtab) - 1);
        });
        add("symbol table linked to itself", "is not a string table", [&](Bytes &b) {
            put(b, e.sh(symtab) + 40, 4, symtab);
        });
        add("symbol name past its string table", "name at byte", [&](Bytes &b) { put(b, first, 4, e.size(strtab)); });
        add("symbol in a section that does not exist", "which does not exist", [&](Bytes &b) {
            put(b, first + 6, 2, e.shnum() + 3);
        });
        add("symbol in a reserved section index", "reserved index", [&](Bytes &b) { put(b, first + 6, 2, 0xffff); });
        // The first symbol defined in a section with contents: move it past its end.
        uint64_t def = 0;
        for (uint64_t j = 1; j < e.size(symtab) / 24; j++) {
            const uint64_t at = e.offset(symtab) + 24 * j, shndx = get(elf, at + 6, 2);
            if (shndx != 0 && shndx < e.shnum() && get(elf, at + 16, 8) > 0) {
                def = at;
                break;
            }
        }
        if (def) {
            const uint64_t home = get(elf, def + 6, 2);
            add("symbol value past its section", "lies outside its section", [&](Bytes &b) {
                put(b, def + 8, 8, e.size(home));
            });
            add("symbol size past its section", "lies outside its section", [&](Bytes &b) {
                put(b, def + 16, 8, e.size(home) + 1);
            });
        }
        add("string table without its NUL", "does not end with a NUL", [&](Bytes &b) {
            b.at(e.offset(strtab) + e.size(strtab) - 1) = 'x';
        });
    }
    const uint64_t rela = e.find(4);
    if (rela) {
        add("relocation past its section", "lies outside section", [&](Bytes &b) {
            put(b, e.offset(rela), 8, e.size(e.info(rela)));
        });
        add("relocation of a symbol that does not exist", "names symbol", [&](Bytes &b) {
            put(b, e.offset(rela) + 12, 4, e.size(e.link(rela)) / 24);
        });
        add("relocations of section 0", "the section it relocates", [&](Bytes &b) { put(b, e.sh(rela) + 44, 4, 0); });
        add("relocations linked to a string table", "is not a symbol table", [&](Bytes &b) {
            put(b, e.sh(rela) + 40, 4, e.shstrndx());
        });
    }
    const uint64_t note = e.find(7);
    if (note) {
        add("note descriptor past its section", "the note at byte 0", [&](Bytes &b) {
            put(b, e.offset(note) + 4, 4, e.size(note));
        });
        add("note name size 0xffffffff", "the note at byte 0", [&](Bytes &b) { put(b, e.offset(note), 4, 0xffffffffu); });
    }
    // The first .nv.info section with an SVAL record (a kernel's: its parameters).
    for (uint64_t i = 1; i < e.shnum(); i++) {
        if (e.type(i) != 0x70000000 || e.size(i) == 0) continue;
        const uint64_t base = e.offset(i), end = base + e.size(i);
        uint64_t sval = 0;
        for (uint64_t at = base; at + 4 <= end;) {
            if (elf[at] == 4) {
                sval = at;
                break;
            }
            at += elf[at] == 4 ? 4 + get(elf, at + 2, 2) : 4;
        }
        if (!sval) continue;
        add("an .nv.info record past its section", "says", [&](Bytes &b) { put(b, sval + 2, 2, 0xffff); });
        add("an .nv.info record of unknown format", "unknown attribute format", [&](Bytes &b) { b[sval] = 9; });
        add("an .nv.info section cut inside a record", "is cut off", [&](Bytes &b) {
            put(b, e.sh(i) + 32, 8, sval - base + 2);
        });
        add("an .nv.info section whose kernel section does not exist", "its kernel's section", [&](Bytes &b) {
            put(b, e.sh(i) + 44, 4, e.shnum() + 1);
        });
        if (elf[sval + 1] == 0x17)
            add("a parameter record of 8 bytes", "EIATTR_KPARAM_INFO", [&](Bytes &b) {
                put(b, sval + 2, 2, 8), b[sval + 12] = 3, b[sval + 13] = 0x2f;  // the rest: an HVAL record
            });
        break;
    }
    add("program header file bytes past the end", "program header 0", [&](Bytes &b) {
        put(b, e.ph(0) + 32, 8, n);
    });
    add("program header offset past the end", "program header 1", [&](Bytes &b) { put(b, e.ph(1) + 8, 8, n + 1); });
    add("PT_LOAD with more file than memory bytes", "exceed its", [&](Bytes &b) {
        for (uint64_t i = 0; i < e.phnum(); i++)
            if (get(b, e.ph(i), 4) == 1) {
                put(b, e.ph(i) + 40, 8, get(b, e.ph(i) + 32, 8) - 1);
                return;
            }
    });
    return out;
}

// Damage to a fatbin's container and to the cubin inside its first
// uncompressed ELF entry.
inline std::vector<Damage> FatbinDamages(const Bytes &fat, const std::string &tag) {
    std::vector<Damage> out;
    auto add = [&](const std::string &name, const std::string &expect, const std::function<void(Bytes &)> &edit) {
        Bytes b = fat;
        edit(b);
        out.push_back({tag + ": " + name, expect, b});
    };
    const std::vector<FatbinEntryAt> entries = FatbinEntries(fat);
    add("truncated by one byte", "truncated", [](Bytes &b) { b.pop_back(); });
    add("truncated to its header", "truncated", [](Bytes &b) { b.resize(16); });
    add("truncated to 15 bytes", "cannot hold the 16-byte fatbin header", [](Bytes &b) { b.resize(15); });
    add("header version 2", "header version 2", [](Bytes &b) { put(b, 4, 2, 2); });
    add("header size 8", "header size 8", [](Bytes &b) { put(b, 6, 2, 8); });
    add("size of the entries past the end", "truncated", [](Bytes &b) { put(b, 8, 8, get(b, 8, 8) + 1); });
    add("size of the entries wrapping around", "truncated", [](Bytes &b) { put(b, 8, 8, ~0ull - 8); });
    add("no entries", "holds no entries", [](Bytes &b) { put(b, 8, 8, 0); });
    add("a wrapper, not a fatbin", "fatbin wrapper", [](Bytes &b) { put(b, 0, 4, 0x466243B1u); });
    const FatbinEntryAt &first = entries.at(0);
    add("entry header size 0", "its header size 0", [&](Bytes &b) { put(b, first.at + 4, 4, 0); });
    add("entry header size 63", "its header size 63", [&](Bytes &b) { put(b, first.at + 4, 4, 63); });
    add("entry header size past the end", "its header size", [&](Bytes &b) { put(b, first.at + 4, 4, b.size()); });
    add("entry payload past the end", "ends past the fatbin", [&](Bytes &b) {
        put(b, first.at + 8, 8, b.size());
    });
    add("entry payload wrapping around", "ends past the fatbin", [&](Bytes &b) { put(b, first.at + 8, 8, ~0ull); });
    add("entry payload one byte short of the next entry", "", [&](Bytes &b) {
        put(b, first.at + 8, 8, first.payload - 1);
    });
    add("entry of kind 7", "kind 7", [&](Bytes &b) { put(b, first.at, 2, 7); });
    add("entry identifier past its header", "its identifier", [&](Bytes &b) {
        put(b, first.at + 32, 4, first.header), put(b, first.at + 36, 4, 8);
    });
    add("entry options record past its header", "its options record", [&](Bytes &b) {
        put(b, first.at + 20, 4, first.header - 4);
    });
    add("entry options past its header", "its options", [&](Bytes &b) {
        const uint64_t o = get(b, first.at + 20, 4);
        if (o) put(b, first.at + o + 4, 4, first.header);
        else put(b, first.at + 20, 4, first.header + 8);
    });
    add("the last entry cut by one byte", "", [&](Bytes &b) {
        put(b, 8, 8, get(b, 8, 8) - 1);
        b.pop_back();
    });
    for (const FatbinEntryAt &e : entries) {
        if (e.kind == 2 && !(e.flags & 0xa000)) {
            const Bytes elf(fat.begin() + e.at + e.header, fat.begin() + e.at + e.header + e.payload);
            const Elf in(elf);
            add("its cubin's e_phoff past the entry", "program header table", [&](Bytes &b) {
                put(b, e.at + e.header + 0x20, 8, e.payload);
            });
            add("its cubin's e_phnum too large", "program header table", [&](Bytes &b) {
                put(b, e.at + e.header + 0x38, 2, in.phnum() + 100);
            });
            add("its cubin's section headers past the entry", "section header table", [&](Bytes &b) {
                put(b, e.at + e.header + 0x28, 8, e.payload - 8);
            });
            add("its cubin not an ELF file", "not an ELF file", [&](Bytes &b) { b[e.at + e.header + 1] = 'X'; });
            break;
        }
    }
    for (const FatbinEntryAt &e : entries) {
        if (e.kind == 1 && !(e.flags & 0xa000)) {
            add("PTX without a NUL in its entry", "no NUL byte", [&](Bytes &b) {
                for (uint64_t i = 0; i < e.payload; i++)
                    if (b[e.at + e.header + i] == 0) b[e.at + e.header + i] = ' ';
            });
            break;
        }
    }
    for (const FatbinEntryAt &e : entries) {
        if (e.flags & 0x8000) {
            add("compressed size past its payload", "compressed size", [&](Bytes &b) {
                put(b, e.at + 16, 4, e.payload + 1);
            });
            add("compressed size 0", "compressed size 0", [&](Bytes &b) { put(b, e.at + 16, 4, 0); });
            add("decompressed size 0", "decompressed size of 0", [&](Bytes &b) { put(b, e.at + 56, 8, 0); });
            add("zstd-flagged payload without a zstd frame", "not a zstd frame", [&](Bytes &b) {
                b[e.at + e.header] ^= 0xff;
            });
            break;
        }
    }
    return out;
}

// ---- images placed against an unreadable page ---------------------------------------

// A copy of `b` that ends exactly where a PROT_NONE page begins (and starts
// right after another): a read past either end faults at once.
class Guarded {
  public:
    explicit Guarded(const Bytes &b) : size_(b.size()) {
        page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t body = (size_ + page_ - 1) / page_ * page_;
        len_ = body + 2 * page_;
        void *m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return;
        base_ = static_cast<unsigned char *>(m);
        mprotect(base_, page_, PROT_NONE);
        mprotect(base_ + page_ + body, page_, PROT_NONE);
        data_ = base_ + page_ + body - size_;
        if (size_) std::memcpy(data_, b.data(), size_);
        // Read-only, as an embedded fatbin is.
        mprotect(base_ + page_, body, PROT_READ);
    }
    ~Guarded() {
        if (base_) munmap(base_, len_);
    }
    Guarded(const Guarded &) = delete;
    Guarded &operator=(const Guarded &) = delete;
    const unsigned char *data() const { return data_; }
    size_t size() const { return size_; }
    bool ok() const { return base_ != nullptr; }

  private:
    unsigned char *base_ = nullptr, *data_ = nullptr;
    size_t size_ = 0, page_ = 0, len_ = 0;
};

inline Bytes ReadFile(const std::string &path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return Bytes();
    Bytes b(static_cast<size_t>(in.tellg()));
    in.seekg(0);
    in.read(reinterpret_cast<char *>(b.data()), static_cast<std::streamsize>(b.size()));
    return b;
}

}  // namespace kl_image_corpus

#endif
