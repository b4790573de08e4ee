/* Reference: tests/mla_prefill/mla_data_movement_reference.h (bit exact)
 * Tests:
 *   tests/mla_prefill/mla_data_movement_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_data_movement_test.cc (GPU)
 *   tests/mla_prefill/mla_prefill_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_data_movement_emulated_test \
 *     //tests/mla_prefill:mla_data_movement_test \
 *     //tests/mla_prefill:mla_prefill_launch_test
 */
#include "klaunch/mla_prefill.cuh"

#include "mla_data_movement.cuh"

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
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_final_assemble_batched)
mla_q_final_assemble_batched(KL_PARAMS_mla_q_final_assemble_batched) {
    const uint64_t total = (uint64_t)num_tokens * nq * mla_cache_dim;
    if (kl__chunk_width(kl__q_final_align(q_absorbed, q_rope, q_final, kv_lora, rope, mla_cache_dim)) == 8) {
        if (!kl__leads_block_group()) return;
        kl__q_final_assemble_chunk(q_absorbed, q_rope, q_final, total, kv_lora, rope, mla_cache_dim,
                                   kl__group_chunk_index());
        return;
    }
    kl__q_final_assemble_elem(q_absorbed, q_rope, q_final, total, kv_lora, rope, mla_cache_dim,
                              kl__global_thread_index());
}
