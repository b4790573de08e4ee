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

/* mla_q_rope_extract_batched (docs: ../shared/notes/kernel-contract.md, kernel 1)
 *
 *   q_rope_out[t, h, r] = q_full[t*q_dim + h*hd + nope + r]
 *
 * for t < num_tokens, h < nq, r < rope. Nothing else is written.
 *
 * Geometry (the seed's): grid x = ceil(num_tokens*nq*rope / 256), 256
 * threads; block b stands for output elements [256b, 256b + 256).
 *
 * Wide path, when both pointers, rope, nope, hd and q_dim are 16-byte
 * aligned (the models' nope 128, rope 64 and dense or padded rows are): block
 * groups (kl_copy.cuh). The first block of each 8 copies the group's 2048
 * output elements, one 16-byte chunk per thread, and the other 7 return. With
 * rope a multiple of 8 a chunk never straddles two heads, and the number of
 * elements is a multiple of 8.
 *
 * Otherwise one element per thread, 2-byte accesses: a warp's 32 stores are
 * 64 contiguous bytes and its loads runs of `rope` contiguous elements.
 *
 * The choice depends only on the arguments, so every block makes the same
 * one. Indices are 64-bit: num_tokens*nq*rope and t*q_dim can pass 2^32.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_rope_extract_batched)
mla_q_rope_extract_batched(KL_PARAMS_mla_q_rope_extract_batched) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    if (kl__chunk_width(kl__q_rope_align(q_full, q_rope_out, hd, nope, rope, q_dim)) == 8) {
        if (!kl__leads_block_group()) return;
        kl__q_rope_extract_chunk(q_full, q_rope_out, total, nq, hd, nope, rope, q_dim, kl__group_chunk_index());
        return;
    }
    kl__q_rope_extract_elem(q_full, q_rope_out, total, nq, hd, nope, rope, q_dim, kl__global_thread_index());
}
