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

#if !defined(MLA_V_HAS_ROPE)
#error "klaunch/mla_prefill.cuh did not define MLA_V_HAS_ROPE; regenerate it from specs/mla_prefill.yaml"
#endif

/* mla_cache_assemble_batched (docs: ../shared/notes/kernel-contract.md, kernel 4)
 *
 * kv_latent [num_tokens, kv_lora], k_rope [num_tokens, rope]. Writes the
 * compressed cache rows, mla_cache_dim = kv_lora + rope wide (a launcher
 * precondition):
 *
 *   k_cache[t] = [kv_latent[t] | k_rope[t]]
 *   v_cache[t] = [kv_latent[t] | 0]          MLA_V_HAS_ROPE 0 (mistral_small_4)
 *   v_cache[t] = [kv_latent[t] | k_rope[t]]  MLA_V_HAS_ROPE 1 (deepseek_v4_flash)
 *
 * The zeros are +0.0 (all bits clear).
 *
 * Geometry (the seed's): grid x = num_tokens (launch-only; the kernel reads
 * it as gridDim.x), block max(mla_cache_dim, 256) threads, at most 1024 (the
 * launcher checks it), hence the launch bounds; block t stands for token t.
 *
 * Wide path, when the four pointers, kv_lora and rope are 16-byte aligned
 * (both variants' rows are: 256 or 512 + 64 elements): block groups
 * (kl_copy.cuh). The first block of each 8 writes the group's 8 tokens, one
 * 16-byte chunk per thread (8 tokens of mla_cache_dim / 8 chunks fit in the
 * block's mla_cache_dim or more threads), and the other 7 return. One block
 * per token would leave most threads idle (72 of 576 move a chunk) and keep
 * only a token's 1152 bytes of loads in flight.
 *
 * Otherwise one block per token, its threads striding over the row in
 * chunks of W elements, W the widest of 4, 2, 1 that every pointer and
 * offset fits.
 *
 * Either way a chunk is loaded once and stored to both caches, and with W
 * dividing kv_lora no chunk straddles the latent / rope boundary. The choice
 * depends only on the arguments, so every block makes the same one.
 */

template <int W>
static __device__ __forceinline__ void mla_cache_assemble_batched__row(
    const __nv_bfloat16 *latent_row, const __nv_bfloat16 *rope_row, __nv_bfloat16 *k_row, __nv_bfloat16 *v_row,
    uint32_t kv_lora, uint32_t mla_cache_dim) {
    const uint32_t chunks = mla_cache_dim / W;
    const uint32_t latent_chunks = kv_lora / W;
    for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        const uint64_t col = (uint64_t)c * W;
        if (c < latent_chunks) {
            const typename kl__bf16_chunk<W>::type v = kl__load_chunk<W>(latent_row + col);
            kl__store_chunk<W>(k_row + col, v);
            kl__store_chunk<W>(v_row + col, v);
        } else {
            const typename kl__bf16_chunk<W>::type v = kl__load_chunk<W>(rope_row + (col - kv_lora));
            kl__store_chunk<W>(k_row + col, v);
            kl__store_chunk<W>(v_row + col, MLA_V_HAS_ROPE ? v : kl__zero_chunk<W>());
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024)
mla_cache_assemble_batched(KL_PARAMS_mla_cache_assemble_batched) {
    const uint64_t t = blockIdx.x;
    const uint64_t align = kl__addr_bits(kv_latent) | kl__addr_bits(k_rope) | kl__addr_bits(k_cache) |
                           kl__addr_bits(v_cache) | kl__elem_bits(kv_lora) | kl__elem_bits(rope) |
                           kl__elem_bits(mla_cache_dim);
    const int w = kl__chunk_width(align);
    if (w == 8) {
        if (!kl__leads_block_group()) return;
        const uint32_t left = gridDim.x - blockIdx.x;
        /* the group's 8 tokens (fewer in a short last group): the body
         * mla_cache_assemble_wide runs per block */
        kl__cache_assemble_rows<8>(kv_latent, k_rope, k_cache, v_cache, kv_lora, rope, mla_cache_dim,
                                   MLA_V_HAS_ROPE != 0, t, left < KL__BLOCK_GROUP ? left : KL__BLOCK_GROUP);
        return;
    }
    const __nv_bfloat16 *latent_row = kv_latent + t * kv_lora;
    const __nv_bfloat16 *rope_row = k_rope + t * rope;
    __nv_bfloat16 *k_row = k_cache + t * mla_cache_dim;
    __nv_bfloat16 *v_row = v_cache + t * mla_cache_dim;
    switch (w) {
    case 4: mla_cache_assemble_batched__row<4>(latent_row, rope_row, k_row, v_row, kv_lora, mla_cache_dim); break;
    case 2: mla_cache_assemble_batched__row<2>(latent_row, rope_row, k_row, v_row, kv_lora, mla_cache_dim); break;
    default: mla_cache_assemble_batched__row<1>(latent_row, rope_row, k_row, v_row, kv_lora, mla_cache_dim); break;
    }
}
