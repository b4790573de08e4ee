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

/* mla_q_final_assemble_wide: mla_q_final_assemble_batched's contract
 * (../shared/notes/kernel-contract.md, kernel 6) on a grid of its own.
 *
 *   q_final[t, h, c] = q_absorbed[t, h, c]            for c <  kv_lora
 *   q_final[t, h, c] = q_rope[t, h, c - kv_lora]      for kv_lora <= c < mla_cache_dim
 *
 * Geometry (not the seed's): grid x = ceil(num_tokens*nq*mla_cache_dim /
 * 2048), 256 threads; block b stands for output elements [2048b, 2048b +
 * 2048), what the first block of a group of 8 seed blocks does
 * (docs/MLA_PREFILL.md).
 *
 * 16-byte path under mla_q_final_assemble_batched's conditions (the three
 * pointers, kv_lora, rope, mla_cache_dim 16-byte aligned): one chunk of 8
 * elements per thread, whole from one source. Otherwise 8 elements per
 * thread with 2-byte accesses, 256 apart.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_final_assemble_wide)
mla_q_final_assemble_wide(KL_PARAMS_mla_q_final_assemble_wide) {
    const uint64_t total = (uint64_t)num_tokens * nq * mla_cache_dim;
    if (kl__chunk_width(kl__q_final_align(q_absorbed, q_rope, q_final, kv_lora, rope, mla_cache_dim)) == 8) {
        kl__q_final_assemble_chunk(q_absorbed, q_rope, q_final, total, kv_lora, rope, mla_cache_dim,
                                   kl__wide_chunk_index());
        return;
    }
    for (uint32_t s = 0; s < KL__BLOCK_GROUP; s++)
        kl__q_final_assemble_elem(q_absorbed, q_rope, q_final, total, kv_lora, rope, mla_cache_dim,
                                  kl__wide_elem_index(s));
}
