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

/* mla_q_rope_extract_wide: mla_q_rope_extract_batched's contract
 * (../shared/notes/kernel-contract.md, kernel 1) on a grid of its own.
 *
 *   q_rope_out[t, h, r] = q_full[t*q_dim + h*hd + nope + r]
 *
 * Geometry (not the seed's): grid x = ceil(num_tokens*nq*rope / 2048), 256
 * threads; block b stands for output elements [2048b, 2048b + 2048), what
 * the first block of a group of 8 seed blocks does (docs/MLA_PREFILL.md):
 * the seed grid's 7 idle blocks of each 8 cost block launches the GPU cannot
 * issue fast enough.
 *
 * 16-byte path under mla_q_rope_extract_batched's conditions (both pointers,
 * rope, nope, hd, q_dim 16-byte aligned): one chunk of 8 elements per
 * thread. Otherwise 8 elements per thread with 2-byte accesses, 256 apart,
 * so a warp's stores stay contiguous.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_rope_extract_wide)
mla_q_rope_extract_wide(KL_PARAMS_mla_q_rope_extract_wide) {
    const uint64_t total = (uint64_t)num_tokens * nq * rope;
    if (kl__chunk_width(kl__q_rope_align(q_full, q_rope_out, hd, nope, rope, q_dim)) == 8) {
        kl__q_rope_extract_chunk(q_full, q_rope_out, total, nq, hd, nope, rope, q_dim, kl__wide_chunk_index());
        return;
    }
    for (uint32_t s = 0; s < KL__BLOCK_GROUP; s++)
        kl__q_rope_extract_elem(q_full, q_rope_out, total, nq, hd, nope, rope, q_dim, kl__wide_elem_index(s));
}
