/* mla_data_movement.cuh - the bodies of the Q data-movement kernels, shared
 * by the seed-grid kernels (mla_q_rope_extract_batched, ..._writeback_batched,
 * mla_q_final_assemble_batched) and their wide twins (..._wide), which differ
 * only in which thread runs which body.
 *
 * Two bodies per kernel:
 *   *_chunk(..., g): output (or, for writeback, input) elements [8g, 8g + 8)
 *     with one 16-byte load and one 16-byte store. Only when the kernel's
 *     16-byte conditions hold (kl__chunk_width(align) == 8); see each
 *     kernel's header for why a chunk then never straddles two heads or two
 *     sources. Chunks past the end do nothing.
 *   *_elem(..., i): element i with 2-byte accesses, any alignment. Elements
 *     past the end do nothing.
 *
 * Static and behind an include guard: the family is one translation unit.
 */
#ifndef KLAUNCH_KERNELS_MLA_PREFILL_MLA_DATA_MOVEMENT_CUH
#define KLAUNCH_KERNELS_MLA_PREFILL_MLA_DATA_MOVEMENT_CUH

#include <stdint.h>
#include <cuda_bf16.h>

#include "../common/kl_copy.cuh"

/* Alignment of everything mla_q_rope_extract / _writeback touch. */
static __device__ __forceinline__ uint64_t kl__q_rope_align(const void *a, const void *b, uint32_t hd, uint32_t nope,
                                                            uint32_t rope, uint32_t q_dim) {
    return kl__addr_bits(a) | kl__addr_bits(b) | kl__elem_bits(rope) | kl__elem_bits(nope) | kl__elem_bits(hd) |
           kl__elem_bits(q_dim);
}

/* Offset in Q of q_rope element j = (t*nq + h)*rope + r, with `rope_w` =
 * rope / w elements of w per head (w = 8 for chunks, 1 for elements). */
static __device__ __forceinline__ uint64_t kl__q_rope_offset(uint64_t j, uint32_t rope_w, uint32_t w, uint32_t nq,
                                                             uint32_t hd, uint32_t nope, uint32_t q_dim) {
    uint32_t rw, h;
    const uint64_t token_head = kl__divmod_u64(j, rope_w, &rw); /* t*nq + h */
    const uint64_t t = kl__divmod_u64(token_head, nq, &h);
    return t * q_dim + (uint64_t)h * hd + nope + (uint64_t)rw * w;
}

static __device__ __forceinline__ void kl__q_rope_extract_chunk(const __nv_bfloat16 *q_full,
                                                                __nv_bfloat16 *q_rope_out, uint64_t total,
                                                                uint32_t nq, uint32_t hd, uint32_t nope,
                                                                uint32_t rope, uint32_t q_dim, uint64_t g) {
    if (g >= total / 8) return;
    const uint64_t src = kl__q_rope_offset(g, rope / 8, 8, nq, hd, nope, q_dim);
    kl__store_chunk16(q_rope_out + g * 8, kl__load_chunk<8>(q_full + src));
}

static __device__ __forceinline__ void kl__q_rope_extract_elem(const __nv_bfloat16 *q_full,
                                                               __nv_bfloat16 *q_rope_out, uint64_t total,
                                                               uint32_t nq, uint32_t hd, uint32_t nope,
                                                               uint32_t rope, uint32_t q_dim, uint64_t i) {
    if (i >= total) return;
    const uint64_t src = kl__q_rope_offset(i, rope, 1, nq, hd, nope, q_dim);
    kl__store_chunk<1>(q_rope_out + i, kl__load_chunk<1>(q_full + src));
}

static __device__ __forceinline__ void kl__q_rope_writeback_chunk(const __nv_bfloat16 *q_rope_in,
                                                                  __nv_bfloat16 *q_full, uint64_t total,
                                                                  uint32_t nq, uint32_t hd, uint32_t nope,
                                                                  uint32_t rope, uint32_t q_dim, uint64_t g) {
    if (g >= total / 8) return;
    const uint64_t dst = kl__q_rope_offset(g, rope / 8, 8, nq, hd, nope, q_dim);
    kl__store_chunk16(q_full + dst, kl__load_chunk<8>(q_rope_in + g * 8));
}

static __device__ __forceinline__ void kl__q_rope_writeback_elem(const __nv_bfloat16 *q_rope_in,
                                                                 __nv_bfloat16 *q_full, uint64_t total,
                                                                 uint32_t nq, uint32_t hd, uint32_t nope,
                                                                 uint32_t rope, uint32_t q_dim, uint64_t i) {
    if (i >= total) return;
    const uint64_t dst = kl__q_rope_offset(i, rope, 1, nq, hd, nope, q_dim);
    kl__store_chunk<1>(q_full + dst, kl__load_chunk<1>(q_rope_in + i));
}

/* Alignment of everything mla_q_final_assemble touches. */
static __device__ __forceinline__ uint64_t kl__q_final_align(const void *q_absorbed, const void *q_rope,
                                                             const void *q_final, uint32_t kv_lora, uint32_t rope,
                                                             uint32_t mla_cache_dim) {
    return kl__addr_bits(q_absorbed) | kl__addr_bits(q_rope) | kl__addr_bits(q_final) | kl__elem_bits(kv_lora) |
           kl__elem_bits(rope) | kl__elem_bits(mla_cache_dim);
}

/* Source of q_final element j = (t*nq + h)*mla_cache_dim + c, `dim_w` =
 * mla_cache_dim / w units of w elements per row. */
static __device__ __forceinline__ const __nv_bfloat16 *kl__q_final_source(const __nv_bfloat16 *q_absorbed,
                                                                          const __nv_bfloat16 *q_rope, uint64_t j,
                                                                          uint32_t dim_w, uint32_t w,
                                                                          uint32_t kv_lora, uint32_t rope) {
    uint32_t cw;
    const uint64_t token_head = kl__divmod_u64(j, dim_w, &cw); /* t*nq + h */
    const uint32_t c = cw * w;
    return c < kv_lora ? q_absorbed + token_head * kv_lora + c : q_rope + token_head * rope + (c - kv_lora);
}

static __device__ __forceinline__ void kl__q_final_assemble_chunk(const __nv_bfloat16 *q_absorbed,
                                                                  const __nv_bfloat16 *q_rope,
                                                                  __nv_bfloat16 *q_final, uint64_t total,
                                                                  uint32_t kv_lora, uint32_t rope,
                                                                  uint32_t mla_cache_dim, uint64_t g) {
    if (g >= total / 8) return;
    const __nv_bfloat16 *src = kl__q_final_source(q_absorbed, q_rope, g, mla_cache_dim / 8, 8, kv_lora, rope);
    kl__store_chunk16(q_final + g * 8, kl__load_chunk<8>(src));
}

static __device__ __forceinline__ void kl__q_final_assemble_elem(const __nv_bfloat16 *q_absorbed,
                                                                 const __nv_bfloat16 *q_rope,
                                                                 __nv_bfloat16 *q_final, uint64_t total,
                                                                 uint32_t kv_lora, uint32_t rope,
                                                                 uint32_t mla_cache_dim, uint64_t i) {
    if (i >= total) return;
    const __nv_bfloat16 *src = kl__q_final_source(q_absorbed, q_rope, i, mla_cache_dim, 1, kv_lora, rope);
    kl__store_chunk<1>(q_final + i, kl__load_chunk<1>(src));
}

/* Wide grids: one block per KL__BLOCK_GROUP * blockDim.x elements (2048 for
 * 256 threads), the work of a seed-grid group's first block. Block b's
 * chunks are [b * blockDim.x, +blockDim.x), exactly those of the group of
 * seed blocks [8b, 8b + 8); its elements, on the 2-byte path, are
 * [b * 8 * blockDim.x, +8 * blockDim.x), a warp's accesses contiguous at
 * each step. */
static __device__ __forceinline__ uint64_t kl__wide_chunk_index() {
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ uint64_t kl__wide_elem_index(uint32_t step) {
    return ((uint64_t)blockIdx.x * KL__BLOCK_GROUP + step) * blockDim.x + threadIdx.x;
}

/* kl__store_chunk<W>, with the 16-byte store kept one instruction. */
template <int W>
static __device__ __forceinline__ void kl__store_chunk_w(__nv_bfloat16 *p, typename kl__bf16_chunk<W>::type v) {
    kl__store_chunk<W>(p, v);
}
template <>
__device__ __forceinline__ void kl__store_chunk_w<8>(__nv_bfloat16 *p, uint4 v) {
    kl__store_chunk16(p, v);
}

/* mla_cache_assemble_wide's body: the n_tokens cache rows from token t0 on,
 * the block's threads striding over n_tokens * mla_cache_dim / W chunks of
 * W elements, each loaded once and stored to both caches. W must divide
 * kv_lora, rope and every pointer's alignment (the caller picks it with
 * kl__chunk_width), so no chunk straddles the latent / rope boundary. For
 * W = 8 it is mla_cache_assemble_batched's group path; indices are 64-bit
 * because nothing bounds mla_cache_dim below 2^32 here (256 threads, not
 * mla_cache_dim of them). v_has_rope: MLA_V_HAS_ROPE. */
template <int W>
static __device__ __forceinline__ void kl__cache_assemble_rows(const __nv_bfloat16 *kv_latent,
                                                               const __nv_bfloat16 *k_rope,
                                                               __nv_bfloat16 *k_cache, __nv_bfloat16 *v_cache,
                                                               uint32_t kv_lora, uint32_t rope,
                                                               uint32_t mla_cache_dim, bool v_has_rope,
                                                               uint64_t t0, uint32_t n_tokens) {
    const uint32_t row_chunks = mla_cache_dim / W;
    const uint64_t chunks = (uint64_t)n_tokens * row_chunks;
    for (uint64_t i = threadIdx.x; i < chunks; i += blockDim.x) {
        uint32_t cw;
        const uint64_t t = t0 + kl__divmod_u64(i, row_chunks, &cw);
        const uint32_t col = cw * W;
        const __nv_bfloat16 *src = col < kv_lora ? kv_latent + t * kv_lora + col
                                                 : k_rope + t * rope + (col - kv_lora);
        const typename kl__bf16_chunk<W>::type v = kl__load_chunk<W>(src);
        kl__store_chunk_w<W>(k_cache + t * mla_cache_dim + col, v);
        kl__store_chunk_w<W>(v_cache + t * mla_cache_dim + col,
                             v_has_rope || col < kv_lora ? v : kl__zero_chunk<W>());
    }
}

#endif /* KLAUNCH_KERNELS_MLA_PREFILL_MLA_DATA_MOVEMENT_CUH */
