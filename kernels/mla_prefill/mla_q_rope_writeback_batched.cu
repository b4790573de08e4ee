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
 * threads, one element per thread, in q_rope_in order.
 *
 * Accesses stay 2 bytes wide: the grid has exactly one thread per element, so
 * a thread cannot own the 8 elements a 16-byte access would need. A warp's 32
 * loads are 64 contiguous bytes and its stores runs of `rope` contiguous
 * elements, so both fill whole 32-byte sectors. A wider store would also
 * have to stay inside the rope slice, which a 2-byte store does by
 * construction. Indices are 64-bit: num_tokens*nq*rope and t*q_dim can pass
 * 2^32.
 */
extern "C" __global__ void __launch_bounds__(256)
mla_q_rope_writeback_batched(const __nv_bfloat16 *q_rope_in, __nv_bfloat16 *q_full, uint32_t num_tokens,
                             uint32_t nq, uint32_t hd, uint32_t nope, uint32_t rope, uint32_t q_dim) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    const uint64_t i = kl__global_thread_index();
    if (i >= total) return;
    uint32_t r, h;
    const uint64_t token_head = kl__divmod_u64(i, rope, &r); /* t*nq + h */
    const uint64_t t = kl__divmod_u64(token_head, nq, &h);
    const uint64_t dst = t * q_dim + (uint64_t)h * hd + nope + r;
    kl__store_chunk<1>(q_full + dst, kl__load_chunk<1>(q_rope_in + i));
}
