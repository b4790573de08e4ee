/* image.h - what a kernel image must be before a driver sees a byte of it.
 *
 * cuModuleLoadData takes an image without its size: it reads a fatbin or a
 * cubin (ELF) as far as the image's own headers say, and anything else as
 * NUL-terminated PTX text. A damaged image (cut short, or with an offset or
 * a size that points outside it) makes the driver read past the caller's
 * buffer. kl_image_check follows every offset and size the driver would
 * follow, within the image's size, and refuses the image with
 * KL_ERROR_INVALID_IMAGE and a message naming the structure and the field
 * if any lies outside; the CUDA backend calls it before cuModuleLoadData.
 * docs/LOADING.md lists every check.
 *
 * USE
 *   Included by klaunch/cuda_backend.h; the implementation comes with
 *   KLAUNCH_IMPLEMENTATION as usual.
 *
 *       kl_image_kind kind;
 *       if (kl_image_check(bytes, size, &kind) != KL_SUCCESS)
 *           fprintf(stderr, "%s\n", kl_last_error_message());
 *
 * FORMATS (little-endian throughout)
 *   fatbin  a 16-byte header (magic 0xBA55ED50, version 1, header size, size
 *           of the entries), then entries, each a header (kind: 1 PTX, 2 ELF;
 *           its own size; payload size; compressed size; an identifier and an
 *           options record inside the header; flags; decompressed size) and
 *           its payload, as fatbinary writes them and public readers of the
 *           format (cuobjdump's, decompressors') take them.
 *   cubin   an ELF64 file for EM_CUDA (190): the ELF header, program header
 *           and section header tables, and the sections whose contents the
 *           driver walks (string and symbol tables, relocations, notes, the
 *           .nv.info attribute records).
 *   PTX     text; it must end with a NUL within the image (the CUDA backend
 *           copies it to add one where it does not).
 *
 * LIMITS
 *   A compressed fatbin entry (flags 0x2000 or 0x8000) is checked by its
 *   sizes and frame only: its contents are the decompressor's. Extended ELF
 *   numbering (65,280 sections or more, 65,535 program headers) is refused:
 *   no cubin has that many.
 */
#ifndef KLAUNCH_IMAGE_H
#define KLAUNCH_IMAGE_H

#include "klaunch/klaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kl_image_kind {
    KL_IMAGE_UNKNOWN = 0,
    KL_IMAGE_PTX = 1,    /* text, NUL-terminated within the image or not */
    KL_IMAGE_CUBIN = 2,  /* an ELF file */
    KL_IMAGE_FATBIN = 3 /* a fatbin container */
} kl_image_kind;

/* KL_SUCCESS and *kind (may be NULL) when every offset and size the driver
 * follows lies inside [image, image + size); else KL_ERROR_INVALID_IMAGE
 * naming the first one that does not. Reads nothing outside the image. */
kl_status kl_image_check(const void *image, size_t size, kl_image_kind *kind);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_IMAGE_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_IMAGE_IMPLEMENTATION_DONE
#define KLAUNCH_IMAGE_IMPLEMENTATION_DONE

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KL__FATBIN_MAGIC 0xBA55ED50u
#define KL__FATBIN_WRAPPER_MAGIC 0x466243B1u /* __fatBinC_Wrapper_t: holds a pointer, not an image */
#define KL__FATBIN_HEADER_BYTES 16u
#define KL__FATBIN_ENTRY_BYTES 64u /* the fixed part of an entry header */
#define KL__FATBIN_KIND_PTX 1u
#define KL__FATBIN_KIND_ELF 2u
#define KL__FATBIN_FLAG_LZ4 0x2000u
#define KL__FATBIN_FLAG_ZSTD 0x8000u

#define KL__EM_CUDA 190u
#define KL__ELF_HEADER_BYTES 64u
#define KL__ELF_PHDR_BYTES 56u
#define KL__ELF_SHDR_BYTES 64u
#define KL__ELF_SYM_BYTES 24u
#define KL__SHT_NULL 0u
#define KL__SHT_SYMTAB 2u
#define KL__SHT_STRTAB 3u
#define KL__SHT_RELA 4u
#define KL__SHT_NOTE 7u
#define KL__SHT_NOBITS 8u
#define KL__SHT_REL 9u
#define KL__SHT_DYNSYM 11u
#define KL__SHT_CUDA_INFO 0x70000000u      /* .nv.info, .nv.info.<kernel> */
#define KL__SHT_CUDA_MERC_INFO 0x70000083u /* .nv.merc.nv.info (sm_100 and newer) */
#define KL__SHT_CUDA_COMPAT 0x70000086u    /* .nv.compat */
#define KL__SHN_LORESERVE 0xff00u
#define KL__SHN_ABS 0xfff1u
#define KL__SHN_COMMON 0xfff2u
#define KL__PT_LOAD 1u
#define KL__PN_XNUM 0xffffu
#define KL__EIFMT_SVAL 4u
#define KL__EIATTR_KPARAM_INFO 0x17u

typedef struct kl__image_ctx {
    const char *who;  /* the API function: "kl_module_load", "kl_image_check" */
    char where[112];  /* "cubin", or "fatbin entry 2 (ELF for sm_90 at byte 684368)" */
    uint64_t walked;  /* bytes of section contents read record by record so far */
} kl__image_ctx;

static kl_status kl__image_fail(const kl__image_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static kl_status kl__image_fail(const kl__image_ctx *ctx, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kl__fail(KL_ERROR_INVALID_IMAGE, "%s: %s: %s", ctx->who, ctx->where, what);
}

static uint64_t kl__le(const unsigned char *p, unsigned bytes) {
    uint64_t v = 0;
    unsigned i;
    for (i = bytes; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

/* Does [offset, offset + count * each) fit in `size`? Without overflow. */
static int kl__fits(uint64_t size, uint64_t offset, uint64_t count, uint64_t each) {
    if (offset > size) return 0;
    if (each != 0 && count > (size - offset) / each) return 0;
    return 1;
}

/* A section's name for messages: the section name table was checked to be
 * NUL-terminated, so any in-range offset reads a string inside it. */
static const char *kl__elf_name(const unsigned char *names, uint64_t names_size, uint64_t offset) {
    if (names == NULL || offset >= names_size) return "?";
    return (const char *)names + offset;
}

/* The records of an attribute section (.nv.info, .nv.compat): u8 format, u8
 * attribute, then 2 bytes of value, or (EIFMT_SVAL) a u16 size and that many
 * bytes. They must tile the section exactly. */
static kl_status kl__elf_check_attributes(const kl__image_ctx *ctx, const unsigned char *p, uint64_t size,
                                          unsigned index, const char *name) {
    uint64_t at = 0;
    while (at < size) {
        unsigned format, attribute;
        uint64_t value_bytes = 2;
        if (size - at < 4)
            return kl__image_fail(ctx,
                                  "section %u (%.64s): an attribute record at byte %llu is cut off (%llu of its 4 "
                                  "header bytes)",
                                  index, name, (unsigned long long)at, (unsigned long long)(size - at));
        format = p[at];
        attribute = p[at + 1];
        if (format == KL__EIFMT_SVAL) {
            value_bytes = kl__le(p + at + 2, 2);
            if (value_bytes > size - at - 4)
                return kl__image_fail(ctx,
                                      "section %u (%.64s): attribute 0x%02x at byte %llu says %llu bytes; %llu are left",
                                      index, name, attribute, (unsigned long long)at,
                                      (unsigned long long)value_bytes, (unsigned long long)(size - at - 4));
            if (attribute == KL__EIATTR_KPARAM_INFO && value_bytes < 12)
                return kl__image_fail(ctx,
                                      "section %u (%.64s): EIATTR_KPARAM_INFO at byte %llu has %llu bytes; a "
                                      "parameter record has 12",
                                      index, name, (unsigned long long)at, (unsigned long long)value_bytes);
            at += 4 + value_bytes;
        } else if (format >= 1 && format <= 3) {
            at += 4;
        } else {
            return kl__image_fail(ctx, "section %u (%.64s): unknown attribute format 0x%02x at byte %llu", index, name,
                                  format, (unsigned long long)at);
        }
    }
    return KL_SUCCESS;
}

/* Notes: u32 name size, u32 descriptor size, u32 type, then the name and the
 * descriptor, each padded to 4 bytes; they must tile the section. */
static kl_status kl__elf_check_notes(const kl__image_ctx *ctx, const unsigned char *p, uint64_t size, unsigned index,
                                     const char *name) {
    uint64_t at = 0;
    while (at < size) {
        uint64_t namesz, descsz, need;
        if (size - at < 12)
            return kl__image_fail(ctx, "section %u (%.64s): a note at byte %llu is cut off (%llu of its 12 header bytes)",
                                  index, name, (unsigned long long)at, (unsigned long long)(size - at));
        namesz = kl__le(p + at, 4);
        descsz = kl__le(p + at + 4, 4);
        need = ((namesz + 3u) & ~(uint64_t)3u) + ((descsz + 3u) & ~(uint64_t)3u);
        if (need > size - at - 12)
            return kl__image_fail(ctx,
                                  "section %u (%.64s): the note at byte %llu says %llu name and %llu descriptor bytes; "
                                  "%llu are left",
                                  index, name, (unsigned long long)at, (unsigned long long)namesz,
                                  (unsigned long long)descsz, (unsigned long long)(size - at - 12));
        at += 12 + need;
    }
    return KL_SUCCESS;
}

/* An ELF64 cubin of `size` bytes at b (the whole image, or a fatbin entry's
 * payload). */
static kl_status kl__elf_check(kl__image_ctx *ctx, const unsigned char *b, uint64_t size) {
    uint64_t phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx, i;
    const unsigned char *sh, *names = NULL;
    uint64_t names_size = 0;
    kl_status st;
    if (size < KL__ELF_HEADER_BYTES)
        return kl__image_fail(ctx, "%llu bytes cannot hold the 64-byte ELF header", (unsigned long long)size);
    if (b[4] != 2 || b[5] != 1 || b[6] != 1)
        return kl__image_fail(ctx, "not a 64-bit little-endian ELF file of version 1 (e_ident class %u, data %u, "
                                   "version %u); a cubin is",
                              b[4], b[5], b[6]);
    if (kl__le(b + 18, 2) != KL__EM_CUDA)
        return kl__image_fail(ctx, "e_machine is %llu, not EM_CUDA (190): not a cubin",
                              (unsigned long long)kl__le(b + 18, 2));
    if (kl__le(b + 20, 4) != 1)
        return kl__image_fail(ctx, "e_version is %llu, not 1", (unsigned long long)kl__le(b + 20, 4));
    if (kl__le(b + 0x34, 2) != KL__ELF_HEADER_BYTES)
        return kl__image_fail(ctx, "e_ehsize is %llu, not 64", (unsigned long long)kl__le(b + 0x34, 2));
    phoff = kl__le(b + 0x20, 8);
    shoff = kl__le(b + 0x28, 8);
    phentsize = kl__le(b + 0x36, 2);
    phnum = kl__le(b + 0x38, 2);
    shentsize = kl__le(b + 0x3a, 2);
    shnum = kl__le(b + 0x3c, 2);
    shstrndx = kl__le(b + 0x3e, 2);

    /* ---- the section header table ---- */
    if (shoff == 0 || shnum == 0)
        return kl__image_fail(ctx, "no section header table (e_shoff %llu, e_shnum %llu)%s", (unsigned long long)shoff,
                              (unsigned long long)shnum,
                              shoff != 0 ? ": extended section numbering (65,280 sections or more) is not read" : "");
    if (shentsize != KL__ELF_SHDR_BYTES)
        return kl__image_fail(ctx, "e_shentsize is %llu, not 64", (unsigned long long)shentsize);
    if (!kl__fits(size, shoff, shnum, KL__ELF_SHDR_BYTES))
        return kl__image_fail(ctx,
                              "the section header table (e_shoff %llu, e_shnum %llu x 64 bytes) ends past the cubin's "
                              "%llu bytes",
                              (unsigned long long)shoff, (unsigned long long)shnum, (unsigned long long)size);
    sh = b + shoff;
    if (shstrndx == 0 || shstrndx >= shnum)
        return kl__image_fail(ctx, "e_shstrndx %llu names no section (there are %llu)%s", (unsigned long long)shstrndx,
                              (unsigned long long)shnum,
                              shstrndx == 0xffffu ? ": extended section numbering is not read" : "");
    {
        const unsigned char *s = sh + shstrndx * KL__ELF_SHDR_BYTES;
        const uint64_t off = kl__le(s + 24, 8), sz = kl__le(s + 32, 8);
        if (kl__le(s + 4, 4) != KL__SHT_STRTAB)
            return kl__image_fail(ctx, "e_shstrndx %llu is a section of type 0x%llx, not a string table",
                                  (unsigned long long)shstrndx, (unsigned long long)kl__le(s + 4, 4));
        if (!kl__fits(size, off, sz, 1))
            return kl__image_fail(ctx,
                                  "the section name table (section %llu: %llu bytes at %llu) ends past the cubin's %llu "
                                  "bytes",
                                  (unsigned long long)shstrndx, (unsigned long long)sz, (unsigned long long)off,
                                  (unsigned long long)size);
        if (sz == 0 || b[off + sz - 1] != '\0')
            return kl__image_fail(ctx, "the section name table (section %llu) does not end with a NUL byte",
                                  (unsigned long long)shstrndx);
        names = b + off;
        names_size = sz;
    }
    for (i = 0; i < KL__ELF_SHDR_BYTES; i++)
        if (sh[i] != 0) return kl__image_fail(ctx, "section header 0 is not all zeros (SHN_UNDEF is reserved)");

    for (i = 1; i < shnum; i++) {
        const unsigned char *s = sh + i * KL__ELF_SHDR_BYTES;
        const uint64_t name = kl__le(s, 4), type = kl__le(s + 4, 4), off = kl__le(s + 24, 8), sz = kl__le(s + 32, 8);
        const uint64_t link = kl__le(s + 40, 4), info = kl__le(s + 44, 4), align = kl__le(s + 48, 8);
        const uint64_t entsize = kl__le(s + 56, 8);
        const char *nm = kl__elf_name(names, names_size, name);
        const unsigned idx = (unsigned)i;
        if (name >= names_size)
            return kl__image_fail(ctx, "section %u: its name at byte %llu lies outside the %llu-byte section name table",
                                  idx, (unsigned long long)name, (unsigned long long)names_size);
        if (type != KL__SHT_NOBITS && !kl__fits(size, off, sz, 1))
            return kl__image_fail(ctx, "section %u (%.64s): its contents (%llu bytes at %llu) end past the cubin's %llu "
                                       "bytes",
                                  idx, nm, (unsigned long long)sz, (unsigned long long)off, (unsigned long long)size);
        if (link >= shnum)
            return kl__image_fail(ctx, "section %u (%.64s): sh_link %llu names no section (there are %llu)", idx, nm,
                                  (unsigned long long)link, (unsigned long long)shnum);
        if (align & (align - 1u))
            return kl__image_fail(ctx, "section %u (%.64s): sh_addralign %llu is not a power of two", idx, nm,
                                  (unsigned long long)align);
        if (type != KL__SHT_NOBITS && entsize != 0 && sz % entsize != 0)
            return kl__image_fail(ctx, "section %u (%.64s): %llu bytes are not a whole number of %llu-byte entries",
                                  idx, nm, (unsigned long long)sz, (unsigned long long)entsize);
        if (type == KL__SHT_NOBITS || sz == 0) continue;
        /* Sections read record by record; they may overlap (sm_100 cubins
         * mirror some), but not enough to read the image over and over. */
        if (type == KL__SHT_SYMTAB || type == KL__SHT_DYNSYM || type == KL__SHT_RELA ||
            type == KL__SHT_REL || type == KL__SHT_NOTE || type == KL__SHT_CUDA_INFO ||
            type == KL__SHT_CUDA_MERC_INFO || type == KL__SHT_CUDA_COMPAT) {
            ctx->walked += sz;
            if (ctx->walked > 2u * size)
                return kl__image_fail(ctx,
                                      "section %u (%.64s): the tables, notes and attribute sections add up to more than "
                                      "twice the cubin's %llu bytes (they overlap over and over)",
                                      idx, nm, (unsigned long long)size);
        }
        if (type == KL__SHT_STRTAB && b[off + sz - 1] != '\0')
            return kl__image_fail(ctx, "section %u (%.64s): a string table that does not end with a NUL byte", idx, nm);
        if (type == KL__SHT_NOTE) {
            st = kl__elf_check_notes(ctx, b + off, sz, idx, nm);
            if (st != KL_SUCCESS) return st;
        }
        if (type == KL__SHT_CUDA_INFO || type == KL__SHT_CUDA_MERC_INFO || type == KL__SHT_CUDA_COMPAT) {
            st = kl__elf_check_attributes(ctx, b + off, sz, idx, nm);
            if (st != KL_SUCCESS) return st;
            if (type == KL__SHT_CUDA_INFO && info >= shnum)
                return kl__image_fail(ctx, "section %u (%.64s): sh_info %llu (its kernel's section) names no section",
                                      idx, nm, (unsigned long long)info);
        }
        if (type == KL__SHT_SYMTAB || type == KL__SHT_DYNSYM) {
            const unsigned char *strs = sh + link * KL__ELF_SHDR_BYTES;
            const uint64_t strs_size = kl__le(strs + 32, 8), nsyms = sz / KL__ELF_SYM_BYTES;
            uint64_t j;
            if (entsize != KL__ELF_SYM_BYTES)
                return kl__image_fail(ctx, "section %u (%.64s): a symbol table with %llu-byte entries (ELF64's are 24)",
                                      idx, nm, (unsigned long long)entsize);
            if (kl__le(strs + 4, 4) != KL__SHT_STRTAB)
                return kl__image_fail(ctx, "section %u (%.64s): its sh_link %llu is not a string table", idx, nm,
                                      (unsigned long long)link);
            if (info > nsyms)
                return kl__image_fail(ctx, "section %u (%.64s): sh_info %llu (first global symbol) exceeds its %llu "
                                           "symbols",
                                      idx, nm, (unsigned long long)info, (unsigned long long)nsyms);
            for (j = 0; j < nsyms; j++) {
                const unsigned char *sym = b + off + j * KL__ELF_SYM_BYTES;
                const uint64_t st_name = kl__le(sym, 4), shndx = kl__le(sym + 6, 2);
                const uint64_t value = kl__le(sym + 8, 8), bytes = kl__le(sym + 16, 8);
                if (st_name != 0 && st_name >= strs_size)
                    return kl__image_fail(ctx,
                                          "section %u (%.64s): symbol %llu's name at byte %llu lies outside its %llu-byte "
                                          "string table",
                                          idx, nm, (unsigned long long)j, (unsigned long long)st_name,
                                          (unsigned long long)strs_size);
                if (shndx >= shnum && shndx != KL__SHN_ABS && shndx != KL__SHN_COMMON)
                    return kl__image_fail(ctx, "section %u (%.64s): symbol %llu is in section %llu, which does not "
                                               "exist%s",
                                          idx, nm, (unsigned long long)j, (unsigned long long)shndx,
                                          shndx >= KL__SHN_LORESERVE ? " (a reserved index klaunch does not read)" : "");
                if (shndx != 0 && shndx < shnum) {
                    const uint64_t home = kl__le(sh + shndx * KL__ELF_SHDR_BYTES + 32, 8);
                    if (value > home || bytes > home - value)
                        return kl__image_fail(ctx,
                                              "section %u (%.64s): symbol %llu (%llu bytes at %llu) lies outside its "
                                              "section %llu of %llu bytes",
                                              idx, nm, (unsigned long long)j, (unsigned long long)bytes,
                                              (unsigned long long)value, (unsigned long long)shndx,
                                              (unsigned long long)home);
                }
            }
        }
        if (type == KL__SHT_RELA || type == KL__SHT_REL) {
            const uint64_t each = type == KL__SHT_RELA ? 24u : 16u;
            const unsigned char *syms = sh + link * KL__ELF_SHDR_BYTES, *target;
            uint64_t nsyms, target_size, j;
            if (entsize != each)
                return kl__image_fail(ctx, "section %u (%.64s): relocations of %llu bytes (ELF64's are %llu)", idx, nm,
                                      (unsigned long long)entsize, (unsigned long long)each);
            if (kl__le(syms + 4, 4) != KL__SHT_SYMTAB && kl__le(syms + 4, 4) != KL__SHT_DYNSYM)
                return kl__image_fail(ctx, "section %u (%.64s): its sh_link %llu is not a symbol table", idx, nm,
                                      (unsigned long long)link);
            if (info == 0 || info >= shnum)
                return kl__image_fail(ctx, "section %u (%.64s): sh_info %llu (the section it relocates) names no "
                                           "section",
                                      idx, nm, (unsigned long long)info);
            nsyms = kl__le(syms + 32, 8) / KL__ELF_SYM_BYTES;
            target = sh + info * KL__ELF_SHDR_BYTES;
            target_size = kl__le(target + 32, 8);
            for (j = 0; j < sz / each; j++) {
                const unsigned char *r = b + off + j * each;
                const uint64_t r_offset = kl__le(r, 8), r_sym = kl__le(r + 12, 4);
                if (r_offset >= target_size)
                    return kl__image_fail(ctx,
                                          "section %u (%.64s): relocation %llu at byte %llu lies outside section %llu "
                                          "(%llu bytes)",
                                          idx, nm, (unsigned long long)j, (unsigned long long)r_offset,
                                          (unsigned long long)info, (unsigned long long)target_size);
                if (r_sym >= nsyms)
                    return kl__image_fail(ctx, "section %u (%.64s): relocation %llu names symbol %llu of %llu", idx, nm,
                                          (unsigned long long)j, (unsigned long long)r_sym, (unsigned long long)nsyms);
            }
        }
    }

    /* ---- the program header table (cubins keep it at their end) ---- */
    if (phnum != 0) {
        if (phnum == KL__PN_XNUM)
            return kl__image_fail(ctx, "e_phnum is 65535: extended program header numbering is not read");
        if (phentsize != KL__ELF_PHDR_BYTES)
            return kl__image_fail(ctx, "e_phentsize is %llu, not 56", (unsigned long long)phentsize);
        if (phoff == 0)
            return kl__image_fail(ctx, "e_phoff is 0 with %llu program headers: they would overlay the ELF header",
                                  (unsigned long long)phnum);
        if (!kl__fits(size, phoff, phnum, KL__ELF_PHDR_BYTES))
            return kl__image_fail(ctx,
                                  "the program header table (e_phoff %llu, e_phnum %llu x 56 bytes) ends past the "
                                  "cubin's %llu bytes",
                                  (unsigned long long)phoff, (unsigned long long)phnum, (unsigned long long)size);
        for (i = 0; i < phnum; i++) {
            const unsigned char *p = b + phoff + i * KL__ELF_PHDR_BYTES;
            const uint64_t type = kl__le(p, 4), off = kl__le(p + 8, 8), filesz = kl__le(p + 32, 8);
            const uint64_t memsz = kl__le(p + 40, 8), align = kl__le(p + 48, 8);
            if (!kl__fits(size, off, filesz, 1))
                return kl__image_fail(ctx,
                                      "program header %u (type %llu): its %llu file bytes at %llu end past the cubin's "
                                      "%llu bytes",
                                      (unsigned)i, (unsigned long long)type, (unsigned long long)filesz,
                                      (unsigned long long)off, (unsigned long long)size);
            if (type == KL__PT_LOAD && filesz > memsz)
                return kl__image_fail(ctx, "program header %u (PT_LOAD): %llu file bytes exceed its %llu memory bytes",
                                      (unsigned)i, (unsigned long long)filesz, (unsigned long long)memsz);
            if (align & (align - 1u))
                return kl__image_fail(ctx, "program header %u: p_align %llu is not a power of two", (unsigned)i,
                                      (unsigned long long)align);
        }
    }
    return KL_SUCCESS;
}

/* A fatbin container of `size` bytes at b. */
static kl_status kl__fatbin_check(kl__image_ctx *ctx, const unsigned char *b, uint64_t size) {
    uint64_t header, body, at, end;
    unsigned n = 0;
    kl_status st;
    strcpy(ctx->where, "fatbin");
    if (size < KL__FATBIN_HEADER_BYTES)
        return kl__image_fail(ctx, "%llu bytes cannot hold the 16-byte fatbin header", (unsigned long long)size);
    if (kl__le(b + 4, 2) != 1)
        return kl__image_fail(ctx, "header version %llu; klaunch reads version 1", (unsigned long long)kl__le(b + 4, 2));
    header = kl__le(b + 6, 2);
    body = kl__le(b + 8, 8);
    if (header < KL__FATBIN_HEADER_BYTES || header > size)
        return kl__image_fail(ctx, "header size %llu (at least 16, at most the image's %llu bytes)",
                              (unsigned long long)header, (unsigned long long)size);
    if (body > size - header)
        return kl__image_fail(ctx, "truncated: its header says %llu bytes of entries after %llu header bytes, the "
                                   "image has %llu",
                              (unsigned long long)body, (unsigned long long)header, (unsigned long long)size);
    if (body == 0) return kl__image_fail(ctx, "holds no entries");
    at = header;
    end = header + body;
    while (at < end) {
        const unsigned char *e = b + at;
        uint64_t kind, entry_header, payload, compressed, options, ident, ident_bytes, flags, decompressed, sm;
        n++;
        snprintf(ctx->where, sizeof ctx->where, "fatbin entry %u (at byte %llu)", n, (unsigned long long)at);
        if (end - at < KL__FATBIN_ENTRY_BYTES)
            return kl__image_fail(ctx, "only %llu bytes are left of the fatbin for a 64-byte entry header",
                                  (unsigned long long)(end - at));
        kind = kl__le(e, 2);
        entry_header = kl__le(e + 4, 4);
        payload = kl__le(e + 8, 8);
        compressed = kl__le(e + 16, 4);
        options = kl__le(e + 20, 4);
        sm = kl__le(e + 28, 4);
        ident = kl__le(e + 32, 4);
        ident_bytes = kl__le(e + 36, 4);
        flags = kl__le(e + 40, 8);
        decompressed = kl__le(e + 56, 8);
        snprintf(ctx->where, sizeof ctx->where, "fatbin entry %u (%s for sm_%llu at byte %llu)", n,
                 kind == KL__FATBIN_KIND_PTX ? "PTX" : kind == KL__FATBIN_KIND_ELF ? "ELF" : "unknown kind",
                 (unsigned long long)sm, (unsigned long long)at);
        if (kind != KL__FATBIN_KIND_PTX && kind != KL__FATBIN_KIND_ELF)
            return kl__image_fail(ctx, "kind %llu; klaunch loads PTX (1) and ELF (2) entries",
                                  (unsigned long long)kind);
        if (entry_header < KL__FATBIN_ENTRY_BYTES || entry_header > end - at)
            return kl__image_fail(ctx, "its header size %llu (at least 64, at most the %llu bytes left)",
                                  (unsigned long long)entry_header, (unsigned long long)(end - at));
        if (payload > end - at - entry_header)
            return kl__image_fail(ctx, "its payload of %llu bytes ends past the fatbin (%llu bytes are left)",
                                  (unsigned long long)payload, (unsigned long long)(end - at - entry_header));
        if (ident_bytes != 0 && (ident < KL__FATBIN_ENTRY_BYTES || !kl__fits(entry_header, ident, ident_bytes, 1)))
            return kl__image_fail(ctx, "its identifier (%llu bytes at %llu) lies outside its %llu-byte header",
                                  (unsigned long long)ident_bytes, (unsigned long long)ident,
                                  (unsigned long long)entry_header);
        if (options != 0) {
            uint64_t text, text_bytes;
            if (options < KL__FATBIN_ENTRY_BYTES || !kl__fits(entry_header, options, 1, 8))
                return kl__image_fail(ctx, "its options record at %llu lies outside its %llu-byte header",
                                      (unsigned long long)options, (unsigned long long)entry_header);
            text = kl__le(e + options, 4);
            text_bytes = kl__le(e + options + 4, 4);
            if (!kl__fits(entry_header, text, text_bytes, 1))
                return kl__image_fail(ctx, "its options (%llu bytes at %llu) lie outside its %llu-byte header",
                                      (unsigned long long)text_bytes, (unsigned long long)text,
                                      (unsigned long long)entry_header);
        }
        if ((flags & KL__FATBIN_FLAG_LZ4) && (flags & KL__FATBIN_FLAG_ZSTD))
            return kl__image_fail(ctx, "flags 0x%llx name two compressions", (unsigned long long)flags);
        if (flags & (KL__FATBIN_FLAG_LZ4 | KL__FATBIN_FLAG_ZSTD)) {
            /* The driver decompresses `compressed` payload bytes into
             * `decompressed` of its own; what comes out is its to check. */
            if (compressed == 0 || compressed > payload)
                return kl__image_fail(ctx, "compressed size %llu (at least 1, at most its %llu payload bytes)",
                                      (unsigned long long)compressed, (unsigned long long)payload);
            if (decompressed == 0) return kl__image_fail(ctx, "compressed, with a decompressed size of 0");
            if ((flags & KL__FATBIN_FLAG_ZSTD) && (compressed < 4 || kl__le(e + entry_header, 4) != 0xFD2FB528u))
                return kl__image_fail(ctx, "flagged zstd-compressed, but its payload is not a zstd frame");
        } else if (kind == KL__FATBIN_KIND_ELF) {
            const unsigned char *elf = e + entry_header;
            if (payload < 4 || elf[0] != 0x7f || elf[1] != 'E' || elf[2] != 'L' || elf[3] != 'F')
                return kl__image_fail(ctx, "an ELF entry whose %llu-byte payload is not an ELF file",
                                      (unsigned long long)payload);
            st = kl__elf_check(ctx, elf, payload);
            if (st != KL_SUCCESS) return st;
        } else if (memchr(e + entry_header, '\0', (size_t)payload) == NULL) {
            return kl__image_fail(ctx, "PTX text with no NUL byte in its %llu-byte payload: the driver would read on",
                                  (unsigned long long)payload);
        }
        at += entry_header + payload;
    }
    return KL_SUCCESS;
}

static kl_status kl__image_check(const void *image, size_t size, const char *who, kl_image_kind *kind) {
    const unsigned char *b = (const unsigned char *)image;
    kl__image_ctx ctx;
    kl_image_kind k = KL_IMAGE_UNKNOWN;
    kl_status st = KL_SUCCESS;
    ctx.who = who;
    ctx.walked = 0;
    strcpy(ctx.where, "image");
    if (kind) *kind = KL_IMAGE_UNKNOWN;
    if (image == NULL || size == 0) return kl__image_fail(&ctx, "empty (was the fatbin built without a CUDA toolkit?)");
    if (size >= 4 && kl__le(b, 4) == KL__FATBIN_MAGIC) {
        k = KL_IMAGE_FATBIN;
        st = kl__fatbin_check(&ctx, b, size);
    } else if (size >= 4 && kl__le(b, 4) == KL__FATBIN_WRAPPER_MAGIC) {
        strcpy(ctx.where, "fatbin");
        return kl__image_fail(&ctx, "a fatbin wrapper (__fatBinC_Wrapper_t, magic 0x466243B1) holds a pointer to "
                                    "its fatbin, not the fatbin: pass the bytes it points to");
    } else if (size >= 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
        k = KL_IMAGE_CUBIN;
        strcpy(ctx.where, "cubin");
        st = kl__elf_check(&ctx, b, size);
    } else if (size < 4 && (memcmp(b, "\x7f" "ELF", size) == 0 || memcmp(b, "\x50\xed\x55\xba", size) == 0)) {
        return kl__image_fail(&ctx, "%u bytes: a cubin or fatbin cut inside its 4-byte magic", (unsigned)size);
    } else {
        k = KL_IMAGE_PTX;
    }
    if (st == KL_SUCCESS && kind) *kind = k;
    return st;
}

kl_status kl_image_check(const void *image, size_t size, kl_image_kind *kind) {
    return kl__image_check(image, size, "kl_image_check", kind);
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_IMAGE_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
