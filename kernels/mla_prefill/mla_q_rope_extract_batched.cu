#include "klaunch/mla_prefill.cuh"

#include "../common/kl_copy.cuh"

/* mla_q_rope_extract_batched (docs: ../shared/notes/kernel-contract.md, kernel 1)
 *
 *   q_rope_out[t, h, r] = q_full[t*q_dim + h*hd + nope + r]
 *
 * for t < num_tokens, h < nq, r < rope. Nothing else is written.
 *
 * Geometry (the seed's): grid x = ceil(num_tokens*nq*rope / 256), 256
 * threads, one output element per thread, in output order.
 *
 * Accesses stay 2 bytes wide: the grid has exactly one thread per element, so
 * a thread cannot own the 8 elements a 16-byte access would need. Nothing is
 * lost in memory traffic: a warp's 32 stores are 64 contiguous bytes, and its
 * loads are runs of `rope` contiguous elements (one per head), so both fill
 * whole 32-byte sectors. Indices are 64-bit: num_tokens*nq*rope and
 * t*q_dim can pass 2^32.
 */
extern "C" __global__ void __launch_bounds__(256)
mla_q_rope_extract_batched(const __nv_bfloat16 *q_full, __nv_bfloat16 *q_rope_out, uint32_t num_tokens,
                           uint32_t nq, uint32_t hd, uint32_t nope, uint32_t rope, uint32_t q_dim) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    const uint64_t i = kl__global_thread_index();
    if (i >= total) return;
    uint32_t r, h;
    const uint64_t token_head = kl__divmod_u64(i, rope, &r); /* t*nq + h */
    const uint64_t t = kl__divmod_u64(token_head, nq, &h);
    const uint64_t src = t * q_dim + (uint64_t)h * hd + nope + r;
    kl__store_chunk<1>(q_rope_out + i, kl__load_chunk<1>(q_full + src));
}
