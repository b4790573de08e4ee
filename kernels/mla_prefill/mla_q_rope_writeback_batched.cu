#include "klaunch/mla_prefill.cuh"

#include "../common/kl_copy.cuh"

/* mla_q_rope_writeback_batched (docs: ../shared/notes/kernel-contract.md, kernel 2)
 *
 *   q_full[t*q_dim + h*hd + nope + r] = q_rope_in[t, h, r]
 *
 * for t < num_tokens, h < nq, r < rope: the inverse of
 * mla_q_rope_extract_batched. No other element of q_full is read or written
 * (the nope parts and any columns past nq*hd keep their values).
 *
 * Geometry (the seed's): grid x = ceil(num_tokens*nq*rope / 256), 256
 * threads; block b stands for q_rope_in elements [256b, 256b + 256).
 *
 * Wide path, when both pointers, rope, nope, hd and q_dim are 16-byte
 * aligned: block groups (kl_copy.cuh). The first block of each 8 copies the
 * group's 2048 elements, one 16-byte chunk per thread, and the other 7
 * return. With rope a multiple of 8 a chunk lies inside one head's rope
 * slice, so a 16-byte store writes nothing outside it.
 *
 * Otherwise one element per thread, 2-byte accesses: a warp's 32 loads are
 * 64 contiguous bytes and its stores runs of `rope` contiguous elements.
 *
 * The choice depends only on the arguments, so every block makes the same
 * one. Indices are 64-bit: num_tokens*nq*rope and t*q_dim can pass 2^32.
 */
extern "C" __global__ void __launch_bounds__(256)
mla_q_rope_writeback_batched(const __nv_bfloat16 *q_rope_in, __nv_bfloat16 *q_full, uint32_t num_tokens,
                             uint32_t nq, uint32_t hd, uint32_t nope, uint32_t rope, uint32_t q_dim) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    const uint64_t align = kl__addr_bits(q_rope_in) | kl__addr_bits(q_full) | kl__elem_bits(rope) |
                           kl__elem_bits(nope) | kl__elem_bits(hd) | kl__elem_bits(q_dim);
    if (kl__chunk_width(align) == 8) {
        if (!kl__leads_block_group()) return;
        const uint64_t g = kl__group_chunk_index(); /* q_rope_in elements [8g, 8g + 8) */
        if (g >= total / 8) return;
        uint32_t r8, h;
        const uint64_t token_head = kl__divmod_u64(g, rope / 8, &r8); /* t*nq + h */
        const uint64_t t = kl__divmod_u64(token_head, nq, &h);
        const uint64_t dst = t * q_dim + (uint64_t)h * hd + nope + (uint64_t)r8 * 8;
        kl__store_chunk16(q_full + dst, kl__load_chunk<8>(q_rope_in + g * 8));
        return;
    }
    const uint64_t i = kl__global_thread_index();
    if (i >= total) return;
    uint32_t r, h;
    const uint64_t token_head = kl__divmod_u64(i, rope, &r); /* t*nq + h */
    const uint64_t t = kl__divmod_u64(token_head, nq, &h);
    const uint64_t dst = t * q_dim + (uint64_t)h * hd + nope + r;
    kl__store_chunk<1>(q_full + dst, kl__load_chunk<1>(q_rope_in + i));
}
