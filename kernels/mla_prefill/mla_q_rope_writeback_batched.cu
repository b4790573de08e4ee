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
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_rope_writeback_batched)
mla_q_rope_writeback_batched(KL_PARAMS_mla_q_rope_writeback_batched) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    if (kl__chunk_width(kl__q_rope_align(q_rope_in, q_full, hd, nope, rope, q_dim)) == 8) {
        if (!kl__leads_block_group()) return;
        kl__q_rope_writeback_chunk(q_rope_in, q_full, total, nq, hd, nope, rope, q_dim, kl__group_chunk_index());
        return;
    }
    kl__q_rope_writeback_elem(q_rope_in, q_full, total, nq, hd, nope, rope, q_dim, kl__global_thread_index());
}
