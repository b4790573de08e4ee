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
 * 256 threads, one output element per thread, in output order.
 *
 * Accesses stay 2 bytes wide: the grid has exactly one thread per element, so
 * a thread cannot own the 8 elements a 16-byte access would need. A warp's
 * stores are 64 contiguous bytes and its loads at most two contiguous runs
 * per (token, head) row, so both fill whole 32-byte sectors. Indices are
 * 64-bit: num_tokens*nq*mla_cache_dim can pass 2^32.
 */
extern "C" __global__ void __launch_bounds__(256)
mla_q_final_assemble_batched(const __nv_bfloat16 *q_absorbed, const __nv_bfloat16 *q_rope,
                             __nv_bfloat16 *q_final, uint32_t num_tokens, uint32_t nq, uint32_t kv_lora,
                             uint32_t rope, uint32_t mla_cache_dim) {
    const uint64_t total = (uint64_t)num_tokens * nq * mla_cache_dim;
    const uint64_t i = kl__global_thread_index();
    if (i >= total) return;
    uint32_t c;
    const uint64_t token_head = kl__divmod_u64(i, mla_cache_dim, &c); /* t*nq + h */
    const __nv_bfloat16 *src = c < kv_lora ? q_absorbed + token_head * kv_lora + c
                                           : q_rope + token_head * rope + (c - kv_lora);
    kl__store_chunk<1>(q_final + i, kl__load_chunk<1>(src));
}
