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
    uint32_t magic;                   /* KL__TENSOR_MAP_MAGIC once encoded */
} kl_tensor_map;

#define KL__TENSOR_MAP_MAGIC 0x6b6c746du /* "kltm" */

/* Bytes per element of a dtype; 0 for a value that is not one. */
uint32_t kl_tensor_map_dtype_size(uint32_t dtype);

/* Checks every field of *request as the generated builders do, then has
 * `backend` encode it into *map. For maps no spec describes (a kernel of
 * your own); launchers take the maps of their own builders. */
kl_status kl_tensor_map_encode_tiled(const kl_backend *backend, const kl_tensor_map_request *request,
                                     kl_tensor_map *map);

/* ---- private: used by generated code ---------------------------------- */

/* Who asks, for messages: "kl_copy_src_encode" and the spec position of the
 * parameter, or the generic function's name and NULL. */
typedef struct kl__tensor_map_site {
    const char *function; /* "kl_copy_src_encode" */
    const char *param;    /* "src", or NULL */
    const char *spec_file;
    uint32_t line, col;
} kl__tensor_map_site;

kl_status kl__tensor_map_encode(const kl_backend *backend, const kl_tensor_map_request *request, kl_tensor_map *map,
                                const kl__tensor_map_site *site);
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
