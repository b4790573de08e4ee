/* tensor_map.h - tensor maps (CUtensorMap) for kernels that load and store
 * tiles through Hopper's bulk tensor copy engine (cp.async.bulk.tensor).
 *
 * A spec parameter of `type: tensor_map` (docs/DESIGN.md) reaches the
 * kernel as `const __grid_constant__ CUtensorMap`, by value: 128 bytes the
 * host encodes once (cuTensorMapEncodeTiled) and every launch copies into the
 * kernel's parameter buffer. The generated header gives each such parameter
 * a builder, kl_<launcher>_<param>_encode(), which fills the map's dtype,
 * rank, box, swizzle, interleave, L2 promotion and out-of-bounds fill from
 * the spec (the box may read the loaded variant's constants), takes the
 * address, extents and strides in elements, checks everything the driver
 * would refuse or misread, and only then asks the kernel's backend to
 * encode. The launcher takes the encoded map and refuses one whose dtype,
 * rank, box, element strides, swizzle, interleave, L2 promotion or fill is
 * not its spec's for the loaded variant, or that another backend encoded.
 *
 * USE (spec: `- {name: src, type: tensor_map, tensor_map: {dtype: bf16,
 * rank: 2, box: [64, 32], swizzle: 128B}}` of launcher `copy`)
 *
 *       kl_tensor_map src;                       // 128-byte aligned storage
 *       if (kl_copy_src_encode(&k, &src, d_src, cols, rows, row_stride) != KL_SUCCESS ||
 *           kl_copy(&k, &src, ..., stream) != KL_SUCCESS)
 *           fprintf(stderr, "%s\n", kl_last_error_message());
 *
 *   Encode once per buffer (the map holds the global address, extents and
 *   strides), launch many times; a map stays valid while its buffer does.
 *   kl_tensor_map_encode_tiled() is the same without a spec: every field
 *   given by the caller, every check made.
 *
 * ERROR REPORTING
 *   As klaunch.h. Every refusal happens before the backend (the driver) is
 *   called: KL_ERROR_NULL_POINTER (no map, no address), KL_ERROR_TENSOR_MAP
 *   (a dtype, rank, address alignment, extent, stride, box, element stride,
 *   swizzle, interleave, L2 promotion or fill the copy engine cannot take,
 *   each named with its value; or, at launch, a map that does not fit the
 *   kernel), KL_ERROR_UNSUPPORTED (the backend encodes no tensor maps);
 *   then the backend's own (KL_ERROR_DRIVER with the driver's error). A
 *   refused encode leaves *map as it was.
 */
#ifndef KLAUNCH_TENSOR_MAP_H
#define KLAUNCH_TENSOR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "klaunch/klaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types the copy engine moves; the values are cuda.h's
 * CUtensorMapDataType. A spec's fp8_e4m3 is copied as KL_TENSOR_MAP_U8. */
typedef enum kl_tensor_map_dtype {
    KL_TENSOR_MAP_U8 = 0,
    KL_TENSOR_MAP_U16 = 1,
    KL_TENSOR_MAP_U32 = 2,
    KL_TENSOR_MAP_I32 = 3,
    KL_TENSOR_MAP_U64 = 4,
    KL_TENSOR_MAP_I64 = 5,
    KL_TENSOR_MAP_F16 = 6,
    KL_TENSOR_MAP_F32 = 7,
    KL_TENSOR_MAP_F64 = 8,
    KL_TENSOR_MAP_BF16 = 9
} kl_tensor_map_dtype;

/* cuda.h's CUtensorMapSwizzle (the modes klaunch encodes), CUtensorMapInterleave,
 * CUtensorMapL2promotion and CUtensorMapFloatOOBfill values. */
#define KL_TENSOR_MAP_SWIZZLE_NONE 0u
#define KL_TENSOR_MAP_SWIZZLE_32B 1u
#define KL_TENSOR_MAP_SWIZZLE_64B 2u
#define KL_TENSOR_MAP_SWIZZLE_128B 3u
#define KL_TENSOR_MAP_INTERLEAVE_NONE 0u
#define KL_TENSOR_MAP_INTERLEAVE_16B 1u
#define KL_TENSOR_MAP_INTERLEAVE_32B 2u
#define KL_TENSOR_MAP_L2_NONE 0u
#define KL_TENSOR_MAP_L2_64B 1u
#define KL_TENSOR_MAP_L2_128B 2u
#define KL_TENSOR_MAP_L2_256B 3u
#define KL_TENSOR_MAP_FILL_ZERO 0u /* out-of-bounds elements read as zero */
#define KL_TENSOR_MAP_FILL_NAN 1u  /* ... as NaN (floating-point dtypes only) */
#define KL_TENSOR_MAP_MAX_RANK 5u

/* Everything cuTensorMapEncodeTiled takes, in its own units: what a builder
 * hands the backend, and what an encoded map remembers. */
typedef struct kl_tensor_map_request {
    uint32_t dtype;                            /* kl_tensor_map_dtype */
    uint32_t rank;                             /* 1 .. 5 */
    const void *address;                       /* global address of element (0, ..., 0) */
    uint64_t extent[KL_TENSOR_MAP_MAX_RANK];   /* elements per dimension, innermost first */
    uint64_t stride[KL_TENSOR_MAP_MAX_RANK - 1]; /* bytes between steps of dimension 1 .. rank-1 */
    uint32_t box[KL_TENSOR_MAP_MAX_RANK];      /* elements per dimension of one copy */
    uint32_t element_stride[KL_TENSOR_MAP_MAX_RANK]; /* 1 for a dense box */
    uint32_t interleave, swizzle, l2_promotion, oob_fill; /* KL_TENSOR_MAP_* above */
} kl_tensor_map_request;

#if defined(__cplusplus) && __cplusplus >= 201103L
#define KL__ALIGN_128 alignas(128)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define KL__ALIGN_128 _Alignas(128)
#elif defined(__GNUC__) || defined(__clang__)
#define KL__ALIGN_128 __attribute__((aligned(128)))
#elif defined(_MSC_VER)
#define KL__ALIGN_128 __declspec(align(128))
#else
#define KL__ALIGN_128 /* no way to say it: the builders check the storage's alignment */
#endif

/* An encoded map. `opaque` is what the kernel receives (the driver's
 * CUtensorMap bytes, or another backend's encoding of the same request);
 * the rest is klaunch's record of it, checked at launch and never passed.
 * 128-byte aligned like CUDA 13's CUtensorMap (the driver needs 64). */
typedef struct kl_tensor_map {
    KL__ALIGN_128 uint64_t opaque[16];
    kl_tensor_map_request request;
    const struct kl_backend *backend; /* who encoded it */
    /* The spec parameter whose builder encoded it ("k_map") and that builder
     * ("kl_X_k_map_encode"); NULL for kl_tensor_map_encode_tiled. A launcher
     * refuses a map built for a parameter of another name. */
    const char *param;
    const char *builder;
    uint32_t magic; /* KL__TENSOR_MAP_MAGIC once encoded */
} kl_tensor_map;

#define KL__TENSOR_MAP_MAGIC 0x6b6c746du /* "kltm" */

/* Bytes per element of a dtype; 0 for a value that is not one. */
uint32_t kl_tensor_map_dtype_size(uint32_t dtype);

/* Checks every field of *request as the generated builders do, then has
 * `backend` encode it into *map. For maps no spec describes (a kernel of
 * your own); launchers take the maps of their own builders. */
kl_status kl_tensor_map_encode_tiled(const kl_backend *backend, const kl_tensor_map_request *request,
                                     kl_tensor_map *map);

/* The encoding of backends without a driver (the recording backend, the CPU
 * emulator): the request's fields at fixed places of the 128 bytes, so a
 * recorded launch shows what was encoded and the emulator's copy engine
 * reads it back. Little-endian:
 *   0 u32 "kltr" magic | 4 u8 dtype | 5 u8 rank | 6 u8 interleave | 7 u8 swizzle
 *   8 u8 L2 promotion | 9 u8 fill | 10..14 u8 element strides | 15 zero
 *   16 u64 address | 24 u64 extents[5] | 64 u64 strides[4] | 96 u16 boxes[5] | 106..127 zero
 * Unused dimensions are zero. decode returns 0 for bytes that are not such
 * an encoding (wrong magic, or fields out of range). */
#define KL_TENSOR_MAP_REFERENCE_MAGIC 0x72746c6bu /* "kltr" */
void kl_tensor_map_reference_encode(const kl_tensor_map_request *request, void *opaque);
int kl_tensor_map_reference_decode(const void *opaque, kl_tensor_map_request *request);

/* ---- private: used by generated code ---------------------------------- */

/* Who asks, for messages: "kl_copy_src_encode" and the spec position of the
 * parameter, or the generic function's name and NULL. */
typedef struct kl__tensor_map_site {
    const char *function; /* "kl_copy_src_encode" */
    const char *param;    /* "src", or NULL */
    const char *spec_file;
    uint32_t line, col;
    int strides_in_elements; /* the caller gave strides in elements (a builder): say both */
} kl__tensor_map_site;

kl_status kl__tensor_map_encode(const kl_backend *backend, const kl_tensor_map_request *request, kl_tensor_map *map,
                                const kl__tensor_map_site *site);
/* A box extent the loaded variant's constants put outside 1..256 (or whose
 * expression overflowed): KL_ERROR_VARIANT_MISMATCH naming it. */
kl_status kl__tensor_map_box_fail(const kl__tensor_map_site *site, uint32_t dim, const char *expr, uint64_t value,
                                  kl_status err);
static inline void kl__tensor_map_request_clear(kl_tensor_map_request *r) {
    uint32_t i;
    r->dtype = r->rank = 0u;
    r->address = NULL;
    for (i = 0; i < KL_TENSOR_MAP_MAX_RANK; i++) {
        r->extent[i] = 0u;
        if (i + 1u < KL_TENSOR_MAP_MAX_RANK) r->stride[i] = 0u;
        r->box[i] = r->element_stride[i] = 0u;
    }
    r->interleave = r->swizzle = r->l2_promotion = r->oob_fill = 0u;
}
/* stride_elems elements of dimension `dim` in bytes (overflow-checked) into
 * *bytes; a refusal names the builder's argument. */
kl_status kl__tensor_map_stride_bytes(uint64_t stride_elems, uint32_t dtype, uint32_t dim, uint64_t *bytes,
                                      const kl__tensor_map_site *site);
/* At launch: `map` was encoded, on `kernel`'s backend, for what `expect`
 * says (every field but address, extents and strides). */
kl_status kl__tensor_map_check(const kl_kernel *kernel, const kl_tensor_map *map,
                               const kl_tensor_map_request *expect, const kl__tensor_map_site *site);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_TENSOR_MAP_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_TENSOR_MAP_IMPLEMENTATION_DONE
#define KLAUNCH_TENSOR_MAP_IMPLEMENTATION_DONE

#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t kl_tensor_map_dtype_size(uint32_t dtype) {
    switch (dtype) {
    case KL_TENSOR_MAP_U8:
        return 1u;
    case KL_TENSOR_MAP_U16:
    case KL_TENSOR_MAP_F16:
    case KL_TENSOR_MAP_BF16:
        return 2u;
    case KL_TENSOR_MAP_U32:
    case KL_TENSOR_MAP_I32:
    case KL_TENSOR_MAP_F32:
        return 4u;
    case KL_TENSOR_MAP_U64:
    case KL_TENSOR_MAP_I64:
    case KL_TENSOR_MAP_F64:
        return 8u;
    default:
        return 0u;
    }
}

static const char *kl__tensor_map_dtype_name(uint32_t dtype) {
    static const char *const names[] = {"u8", "u16", "u32", "i32", "u64", "i64", "f16", "f32", "f64", "bf16"};
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

static const char *kl__tensor_map_swizzle_name(uint32_t s) {
    static const char *const names[] = {"none", "32B", "64B", "128B"};
    return s < 4u ? names[s] : "?";
}

/* "kl_copy_src_encode: src" or "kl_tensor_map_encode_tiled", and " [spec:line:col]" or "". */
static void kl__tensor_map_who(const kl__tensor_map_site *site, char *who, size_t cap, char *where, size_t wcap) {
    if (site->param)
        snprintf(who, cap, "%s: tensor map %s", site->function, site->param);
    else
        snprintf(who, cap, "%s", site->function);
    if (site->spec_file)
        snprintf(where, wcap, " [%s:%u:%u]", site->spec_file, (unsigned)site->line, (unsigned)site->col);
    else
        where[0] = '\0';
}

#define KL__TM_FAIL(status, fmt, ...)                                                    \
    do {                                                                                 \
        char kl__who[160], kl__where[200];                                               \
        kl__tensor_map_who(site, kl__who, sizeof kl__who, kl__where, sizeof kl__where);  \
        return kl__fail(status, "%s: " fmt "%s", kl__who, __VA_ARGS__, kl__where);       \
    } while (0)

/* Every rule of cuTensorMapEncodeTiled (cuda.h, CUDA 13.0) for the modes
 * klaunch encodes, in the order the request lists its fields. */
static kl_status kl__tensor_map_validate(const kl_tensor_map_request *r, const kl__tensor_map_site *site) {
    const uint32_t esize = kl_tensor_map_dtype_size(r->dtype);
    const uint64_t stride_align = r->interleave == KL_TENSOR_MAP_INTERLEAVE_32B ? 32u : 16u;
    uint32_t i;
    if (esize == 0u)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "dtype %u is not one klaunch encodes (u8, u16, u32, i32, u64, i64, f16, f32, "
                                         "f64, bf16: KL_TENSOR_MAP_*)",
                    (unsigned)r->dtype);
    if (r->rank < 1u || r->rank > KL_TENSOR_MAP_MAX_RANK)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "rank %u is outside 1..5", (unsigned)r->rank);
    if (r->interleave > KL_TENSOR_MAP_INTERLEAVE_32B)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "interleave %u is not none (0), 16B (1) or 32B (2)", (unsigned)r->interleave);
    if (r->interleave != KL_TENSOR_MAP_INTERLEAVE_NONE && r->rank < 3u)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "an interleaved map needs rank 3 or more; this one has rank %u",
                    (unsigned)r->rank);
    if (r->swizzle > KL_TENSOR_MAP_SWIZZLE_128B)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "swizzle %u is not none (0), 32B (1), 64B (2) or 128B (3)", (unsigned)r->swizzle);
    if (r->interleave == KL_TENSOR_MAP_INTERLEAVE_32B && r->swizzle != KL_TENSOR_MAP_SWIZZLE_32B)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "interleave 32B needs swizzle 32B; this map has swizzle %s",
                    kl__tensor_map_swizzle_name(r->swizzle));
    if (r->l2_promotion > KL_TENSOR_MAP_L2_256B)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "L2 promotion %u is not none (0), 64B (1), 128B (2) or 256B (3)",
                    (unsigned)r->l2_promotion);
    if (r->oob_fill > KL_TENSOR_MAP_FILL_NAN)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "out-of-bounds fill %u is not zero (0) or NaN (1)", (unsigned)r->oob_fill);
    if (r->oob_fill == KL_TENSOR_MAP_FILL_NAN && r->dtype != KL_TENSOR_MAP_F16 && r->dtype != KL_TENSOR_MAP_F32 &&
        r->dtype != KL_TENSOR_MAP_F64 && r->dtype != KL_TENSOR_MAP_BF16)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "NaN out-of-bounds fill needs a floating-point dtype; this map's is %s",
                    kl__tensor_map_dtype_name(r->dtype));
    if (r->address == NULL) KL__TM_FAIL(KL_ERROR_NULL_POINTER, "the global address is NULL%s", "");
    if ((uintptr_t)r->address % stride_align != 0u)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the global address %p is not %u-byte aligned%s", r->address,
                    (unsigned)stride_align, stride_align == 32u ? " (interleave 32B)" : "");
    for (i = 0; i < r->rank; i++) {
        if (r->extent[i] == 0u || r->extent[i] > ((uint64_t)1 << 32))
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "extent%u = %llu is outside 1..2^32", (unsigned)i,
                        (unsigned long long)r->extent[i]);
    }
    for (i = 1; i < r->rank; i++) {
        const uint64_t s = r->stride[i - 1];
        char elems[48] = "";
        if (site->strides_in_elements)
            snprintf(elems, sizeof elems, "%llu elements = ", (unsigned long long)(s / esize));
        if (s % stride_align != 0u)
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "stride%u = %s%llu bytes is not a multiple of %u bytes", (unsigned)i, elems,
                        (unsigned long long)s, (unsigned)stride_align);
        if (s >= ((uint64_t)1 << 40))
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "stride%u = %s%llu bytes is not below 2^40", (unsigned)i, elems,
                        (unsigned long long)s);
    }
    for (i = 0; i < r->rank; i++) {
        if (r->box[i] == 0u || r->box[i] > 256u)
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "box%u = %u is outside 1..256", (unsigned)i, (unsigned)r->box[i]);
        if (r->element_stride[i] == 0u || r->element_stride[i] > 8u)
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "element stride %u = %u is outside 1..8", (unsigned)i,
                        (unsigned)r->element_stride[i]);
    }
    if (r->interleave == KL_TENSOR_MAP_INTERLEAVE_NONE) {
        const uint64_t inner = (uint64_t)r->box[0] * esize;
        if (inner % 16u != 0u)
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "box0 = %u elements of %s is %llu bytes, not a multiple of 16",
                        (unsigned)r->box[0], kl__tensor_map_dtype_name(r->dtype), (unsigned long long)inner);
        if (r->swizzle != KL_TENSOR_MAP_SWIZZLE_NONE && inner > (16u << r->swizzle))
            KL__TM_FAIL(KL_ERROR_TENSOR_MAP,
                        "box0 = %u elements of %s is %llu bytes, more than the %s swizzle's span of %u bytes",
                        (unsigned)r->box[0], kl__tensor_map_dtype_name(r->dtype), (unsigned long long)inner,
                        kl__tensor_map_swizzle_name(r->swizzle), (unsigned)(16u << r->swizzle));
    }
    return KL_SUCCESS;
}

kl_status kl__tensor_map_encode(const kl_backend *backend, const kl_tensor_map_request *request, kl_tensor_map *map,
                                const kl__tensor_map_site *site) {
    kl_tensor_map tmp;
    kl_status st;
    if (map == NULL) KL__TM_FAIL(KL_ERROR_NULL_POINTER, "the map to encode into is NULL%s", "");
    if ((uintptr_t)map % 64u != 0u)
        KL__TM_FAIL(KL_ERROR_INVALID_ARGUMENT, "the map's storage at %p is not 64-byte aligned (the driver needs it)",
                    (void *)map);
    if (request == NULL) KL__TM_FAIL(KL_ERROR_NULL_POINTER, "the request is NULL%s", "");
    if (backend == NULL || backend->ops == NULL)
        KL__TM_FAIL(KL_ERROR_INVALID_ARGUMENT, "no backend to encode with (a NULL or uninitialised one)%s", "");
    st = kl__tensor_map_validate(request, site);
    if (st != KL_SUCCESS) return st;
    if (backend->ops->tensor_map_encode == NULL)
        KL__TM_FAIL(KL_ERROR_UNSUPPORTED, "the %s backend encodes no tensor maps", backend->ops->name);
    memset(&tmp, 0, sizeof tmp);
    st = backend->ops->tensor_map_encode(backend, request, tmp.opaque);
    if (st != KL_SUCCESS) return st;
    tmp.request = *request;
    tmp.backend = backend;
    tmp.param = site != NULL ? site->param : NULL;
    tmp.builder = site != NULL && site->param != NULL ? site->function : NULL;
    tmp.magic = KL__TENSOR_MAP_MAGIC;
    *map = tmp;
    return KL_SUCCESS;
}

kl_status kl_tensor_map_encode_tiled(const kl_backend *backend, const kl_tensor_map_request *request,
                                     kl_tensor_map *map) {
    static const kl__tensor_map_site site = {"kl_tensor_map_encode_tiled", NULL, NULL, 0, 0, 0};
    return kl__tensor_map_encode(backend, request, map, &site);
}

kl_status kl__tensor_map_stride_bytes(uint64_t stride_elems, uint32_t dtype, uint32_t dim, uint64_t *bytes,
                                      const kl__tensor_map_site *site) {
    const uint64_t esize = kl_tensor_map_dtype_size(dtype);
    if (esize != 0u && stride_elems > UINT64_MAX / esize)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "stride%u = %llu elements overflows 64 bits in bytes", (unsigned)dim,
                    (unsigned long long)stride_elems);
    *bytes = stride_elems * esize;
    return KL_SUCCESS;
}

kl_status kl__tensor_map_box_fail(const kl__tensor_map_site *site, uint32_t dim, const char *expr, uint64_t value,
                                  kl_status err) {
    if (err != KL_SUCCESS)
        KL__TM_FAIL(err, "box%u = %s overflows or divides by zero in the loaded variant", (unsigned)dim, expr);
    KL__TM_FAIL(KL_ERROR_VARIANT_MISMATCH, "box%u = %s = %llu is outside 1..256 in the loaded variant", (unsigned)dim,
                expr, (unsigned long long)value);
}

/* "(64, 32)" */
static void kl__tensor_map_dims(const uint32_t *v, uint32_t n, char *buf, size_t cap) {
    size_t used = 0;
    uint32_t i;
    buf[0] = '\0';
    for (i = 0; i < n && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%u%s", i ? ", " : "(", (unsigned)v[i], i + 1 == n ? ")" : "");
        if (w < 0) break;
        used += (size_t)w;
    }
}

kl_status kl__tensor_map_check(const kl_kernel *kernel, const kl_tensor_map *map,
                               const kl_tensor_map_request *expect, const kl__tensor_map_site *site) {
    const kl_tensor_map_request *got;
    if (map == NULL) KL__TM_FAIL(KL_ERROR_NULL_POINTER, "the map is NULL%s", "");
    if (map->magic != KL__TENSOR_MAP_MAGIC)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map was never encoded (encode it with %s_%s_encode first)",
                    site->function, site->param ? site->param : "?");
    if (map->backend != kernel->backend)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map was encoded by the %s backend at %p; the kernel runs on the %s "
                                         "backend at %p",
                    map->backend && map->backend->ops ? map->backend->ops->name : "?", (const void *)map->backend,
                    kernel->backend && kernel->backend->ops ? kernel->backend->ops->name : "?",
                    (const void *)kernel->backend);
    /* Two maps of one shape (k_map and v_map, q_map and out_map) pass every
     * check below: the name their builders tag them with tells them apart. */
    if (map->param != NULL && site->param != NULL && strcmp(map->param, site->param) != 0)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map was built for parameter %s (by %s), not for %s (swapped maps?)",
                    map->param, map->builder ? map->builder : "?", site->param);
    got = &map->request;
    if (got->dtype != expect->dtype || got->rank != expect->rank)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map is %s of rank %u; the kernel takes %s of rank %u",
                    kl__tensor_map_dtype_name(got->dtype), (unsigned)got->rank,
                    kl__tensor_map_dtype_name(expect->dtype), (unsigned)expect->rank);
    if (memcmp(got->box, expect->box, sizeof got->box[0] * expect->rank) != 0 ||
        memcmp(got->element_stride, expect->element_stride, sizeof got->element_stride[0] * expect->rank) != 0) {
        char a[64], b[64], c[64], d[64];
        kl__tensor_map_dims(got->box, got->rank, a, sizeof a);
        kl__tensor_map_dims(expect->box, expect->rank, b, sizeof b);
        kl__tensor_map_dims(got->element_stride, got->rank, c, sizeof c);
        kl__tensor_map_dims(expect->element_stride, expect->rank, d, sizeof d);
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map's box is %s with element strides %s; the loaded variant's kernel "
                                         "copies boxes of %s with element strides %s (a map built for another "
                                         "launcher or variant?)",
                    a, c, b, d);
    }
    if (got->swizzle != expect->swizzle || got->interleave != expect->interleave ||
        got->l2_promotion != expect->l2_promotion || got->oob_fill != expect->oob_fill)
        KL__TM_FAIL(KL_ERROR_TENSOR_MAP, "the map has swizzle %s, interleave %u, L2 promotion %u, fill %u; the kernel "
                                         "expects swizzle %s, interleave %u, L2 promotion %u, fill %u",
                    kl__tensor_map_swizzle_name(got->swizzle), (unsigned)got->interleave,
                    (unsigned)got->l2_promotion, (unsigned)got->oob_fill,
                    kl__tensor_map_swizzle_name(expect->swizzle), (unsigned)expect->interleave,
                    (unsigned)expect->l2_promotion, (unsigned)expect->oob_fill);
    return KL_SUCCESS;
}

#undef KL__TM_FAIL

static void kl__tm_put(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t kl__tm_get(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

void kl_tensor_map_reference_encode(const kl_tensor_map_request *r, void *opaque) {
    unsigned char *p = (unsigned char *)opaque;
    uint32_t i, rank = r->rank <= KL_TENSOR_MAP_MAX_RANK ? r->rank : KL_TENSOR_MAP_MAX_RANK;
    memset(p, 0, 128);
    kl__tm_put(p, KL_TENSOR_MAP_REFERENCE_MAGIC, 4);
    p[4] = (unsigned char)r->dtype;
    p[5] = (unsigned char)r->rank;
    p[6] = (unsigned char)r->interleave;
    p[7] = (unsigned char)r->swizzle;
    p[8] = (unsigned char)r->l2_promotion;
    p[9] = (unsigned char)r->oob_fill;
    kl__tm_put(p + 16, (uint64_t)(uintptr_t)r->address, 8);
    for (i = 0; i < rank; i++) {
        p[10 + i] = (unsigned char)r->element_stride[i];
        kl__tm_put(p + 24 + 8 * i, r->extent[i], 8);
        kl__tm_put(p + 96 + 2 * i, r->box[i], 2);
        if (i > 0) kl__tm_put(p + 64 + 8 * (i - 1), r->stride[i - 1], 8);
    }
}

int kl_tensor_map_reference_decode(const void *opaque, kl_tensor_map_request *r) {
    const unsigned char *p = (const unsigned char *)opaque;
    uint32_t i;
    memset(r, 0, sizeof *r);
    if (kl__tm_get(p, 4) != KL_TENSOR_MAP_REFERENCE_MAGIC || p[5] < 1u || p[5] > KL_TENSOR_MAP_MAX_RANK) return 0;
    r->dtype = p[4];
    r->rank = p[5];
    r->interleave = p[6];
    r->swizzle = p[7];
    r->l2_promotion = p[8];
    r->oob_fill = p[9];
    r->address = (const void *)(uintptr_t)kl__tm_get(p + 16, 8);
    for (i = 0; i < r->rank; i++) {
        r->element_stride[i] = p[10 + i];
        r->extent[i] = kl__tm_get(p + 24 + 8 * i, 8);
        r->box[i] = (uint32_t)kl__tm_get(p + 96 + 2 * i, 2);
        if (i > 0) r->stride[i - 1] = kl__tm_get(p + 64 + 8 * (i - 1), 8);
    }
    return kl_tensor_map_dtype_size(r->dtype) != 0u;
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_TENSOR_MAP_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
