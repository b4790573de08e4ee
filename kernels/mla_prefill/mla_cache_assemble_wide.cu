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

#if !defined(MLA_V_HAS_ROPE)
#error "klaunch/mla_prefill.cuh did not define MLA_V_HAS_ROPE; regenerate it from specs/mla_prefill.yaml"
#endif

/* mla_cache_assemble_wide: mla_cache_assemble_batched's contract
 * (../shared/notes/kernel-contract.md, kernel 4) on a grid of its own.
 *
 *   k_cache[t] = [kv_latent[t] | k_rope[t]]
 *   v_cache[t] = [kv_latent[t] | 0]          MLA_V_HAS_ROPE 0 (mistral_small_4)
 *   v_cache[t] = [kv_latent[t] | k_rope[t]]  MLA_V_HAS_ROPE 1 (deepseek_v4_flash)
 *
 * Geometry (not the seed's): grid x = ceil(num_tokens / 8), 256 threads;
 * block b writes tokens [8b, min(8b + 8, num_tokens)), what the first block
 * of a group of 8 seed blocks does on the seed twin's 16-byte path
 * (docs/MLA_PREFILL.md). num_tokens is a kernel argument here (the seed
 * twin's is launch-only) because the last block may be short.
 *
 * Chunks of W elements, W the widest of 8, 4, 2, 1 that the four pointers,
 * kv_lora and rope fit (8 for both variants' rows: 256 or 512 + 64), strided
 * over the block's tokens; each chunk is loaded once and stored to both
 * caches. The choice depends only on the arguments, so every block makes
 * the same one.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_cache_assemble_wide)
mla_cache_assemble_wide(KL_PARAMS_mla_cache_assemble_wide) {
    const uint64_t t0 = (uint64_t)blockIdx.x * KL__BLOCK_GROUP;
    if (t0 >= num_tokens) return;
    const uint64_t left = num_tokens - t0;
    const uint32_t n = left < KL__BLOCK_GROUP ? (uint32_t)left : KL__BLOCK_GROUP;
    const uint64_t align = kl__addr_bits(kv_latent) | kl__addr_bits(k_rope) | kl__addr_bits(k_cache) |
                           kl__addr_bits(v_cache) | kl__elem_bits(kv_lora) | kl__elem_bits(rope) |
                           kl__elem_bits(mla_cache_dim);
    const bool vr = MLA_V_HAS_ROPE != 0;
    switch (kl__chunk_width(align)) {
    case 8: kl__cache_assemble_rows<8>(kv_latent, k_rope, k_cache, v_cache, kv_lora, rope, mla_cache_dim, vr, t0, n); break;
    case 4: kl__cache_assemble_rows<4>(kv_latent, k_rope, k_cache, v_cache, kv_lora, rope, mla_cache_dim, vr, t0, n); break;
    case 2: kl__cache_assemble_rows<2>(kv_latent, k_rope, k_cache, v_cache, kv_lora, rope, mla_cache_dim, vr, t0, n); break;
    default: kl__cache_assemble_rows<1>(kv_latent, k_rope, k_cache, v_cache, kv_lora, rope, mla_cache_dim, vr, t0, n); break;
    }
}
