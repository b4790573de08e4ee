/* Reference: tests/mla_prefill/mla_data_movement_reference.h (bit exact)
 * Tests:
 *   tests/mla_prefill/mla_data_movement_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_data_movement_test.cc (GPU)
 *   tests/mla_prefill/mla_data_movement_wide_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_data_movement_emulated_test \
 *     //tests/mla_prefill:mla_data_movement_test \
 *     //tests/mla_prefill:mla_data_movement_wide_test
 */
#include "klaunch/mla_prefill.cuh"

#include "mla_data_movement.cuh"

/* mla_q_rope_writeback_wide: mla_q_rope_writeback_batched's contract
 * (../shared/notes/kernel-contract.md, kernel 2) on a grid of its own.
 *
 *   q_full[t*q_dim + h*hd + nope + r] = q_rope_in[t, h, r]
 *
 * and no other element of q_full is read or written.
 *
 * Geometry (not the seed's): grid x = ceil(num_tokens*nq*rope / 2048), 256
 * threads; block b stands for q_rope_in elements [2048b, 2048b + 2048), what
 * the first block of a group of 8 seed blocks does (docs/MLA_PREFILL.md).
 *
 * 16-byte path under mla_q_rope_writeback_batched's conditions: one chunk
 * of 8 elements per thread, inside one head's rope slice. Otherwise 8
 * elements per thread with 2-byte accesses, 256 apart.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_rope_writeback_wide)
mla_q_rope_writeback_wide(KL_PARAMS_mla_q_rope_writeback_wide) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    if (kl__chunk_width(kl__q_rope_align(q_rope_in, q_full, hd, nope, rope, q_dim)) == 8) {
        kl__q_rope_writeback_chunk(q_rope_in, q_full, total, nq, hd, nope, rope, q_dim, kl__wide_chunk_index());
        return;
    }
    for (uint32_t s = 0; s < KL__BLOCK_GROUP; s++)
        kl__q_rope_writeback_elem(q_rope_in, q_full, total, nq, hd, nope, rope, q_dim, kl__wide_elem_index(s));
}
