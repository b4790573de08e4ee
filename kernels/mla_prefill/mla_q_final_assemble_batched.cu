#include "klaunch/mla_prefill.cuh"

#include "../common/kl_copy.cuh"

/* mla_q_final_assemble_batched (docs: ../shared/notes/kernel-contract.md, kernel 6)
 *
 *   q_final[t, h, c] = q_absorbed[t, h, c]            for c <  kv_lora
 *   q_final[t, h, c] = q_rope[t, h, c - kv_lora]      for kv_lora <= c < mla_cache_dim
 *
 * with q_final [num_tokens, nq, mla_cache_dim], q_absorbed [num_tokens, nq,
 * kv_lora], q_rope [num_tokens, nq, rope], mla_cache_dim = kv_lora + rope
 * (a launcher precondition).
 *
 * Geometry (the seed's): grid x = ceil(num_tokens*nq*mla_cache_dim / 256),
 * 256 threads; block b stands for output elements [256b, 256b + 256).
 *
 * Wide path, when the three pointers, kv_lora, rope and mla_cache_dim are
 * 16-byte aligned (both variants' 256 or 512 + 64 are): block groups
 * (kl_copy.cuh). The first block of each 8 writes the group's 2048 output
 * elements, one 16-byte chunk per thread, and the other 7 return. With
 * kv_lora and rope multiples of 8 a chunk comes whole from q_absorbed or
 * from q_rope, never from both, and the number of elements is a multiple
 * of 8.
 *
 * Otherwise one element per thread, 2-byte accesses: a warp's stores are 64
 * contiguous bytes and its loads at most two contiguous runs per row.
 *
 * The choice depends only on the arguments, so every block makes the same
 * one. Indices are 64-bit: num_tokens*nq*mla_cache_dim can pass 2^32.
 */
extern "C" __global__ void __launch_bounds__(256)
mla_q_final_assemble_batched(const __nv_bfloat16 *q_absorbed, const __nv_bfloat16 *q_rope,
                             __nv_bfloat16 *q_final, uint32_t num_tokens, uint32_t nq, uint32_t kv_lora,
                             uint32_t rope, uint32_t mla_cache_dim) {
    const uint64_t total = (uint64_t)num_tokens * nq * mla_cache_dim;
    const uint64_t align = kl__addr_bits(q_absorbed) | kl__addr_bits(q_rope) | kl__addr_bits(q_final) |
                           kl__elem_bits(kv_lora) | kl__elem_bits(rope) | kl__elem_bits(mla_cache_dim);
    if (kl__chunk_width(align) == 8) {
        if (!kl__leads_block_group()) return;
        const uint64_t g = kl__group_chunk_index(); /* output elements [8g, 8g + 8) */
        if (g >= total / 8) return;
        uint32_t c8;
        const uint64_t token_head = kl__divmod_u64(g, mla_cache_dim / 8, &c8); /* t*nq + h */
        const uint32_t c = c8 * 8;
        const __nv_bfloat16 *src = c < kv_lora ? q_absorbed + token_head * kv_lora + c
                                               : q_rope + token_head * rope + (c - kv_lora);
        kl__store_chunk16(q_final + g * 8, kl__load_chunk<8>(src));
        return;
    }
    const uint64_t i = kl__global_thread_index();
    if (i >= total) return;
    uint32_t c;
    const uint64_t token_head = kl__divmod_u64(i, mla_cache_dim, &c); /* t*nq + h */
    const __nv_bfloat16 *src = c < kv_lora ? q_absorbed + token_head * kv_lora + c
                                           : q_rope + token_head * rope + (c - kv_lora);
    kl__store_chunk<1>(q_final + i, kl__load_chunk<1>(src));
}
