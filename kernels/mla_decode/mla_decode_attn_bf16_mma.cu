/* Reference: tests/mla_decode/mla_decode_reference.h (attention, float64)
 * Tests:
 *   tests/mla_decode/mla_decode_emulated_test.cc (CPU emulator)
 *   tests/mla_decode/mla_decode_test.cc (GPU)
 *   tests/mla_decode/mla_decode_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_decode:mla_decode_emulated_test \
 *     //tests/mla_decode:mla_decode_test \
 *     //tests/mla_decode:mla_decode_launch_test
 */
#include "klaunch/mla_decode.cuh"

/* mla_decode_attn_bf16_mma: MLA decode attention over a paged bf16 latent cache, on
 * mma.sync tensor cores (sm_80 and later); the design is
 * mla_decode_mma.cuh's. */

#include "mla_decode_mma.cuh"

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_attn_bf16_mma)
mla_decode_attn_bf16_mma(KL_PARAMS_mla_decode_attn_bf16_mma) {
    KL_DYNAMIC_SHARED(mla_decode_attn_bf16_mma__smem, 16);
    mla_decode_mma_::attention<false>(q, reinterpret_cast<const uint8_t *>(kv_cache), block_table, lengths, sched, out, lse, workspace, batch, s_q,
                                      h_q, head_dim, page_size, max_blocks_per_seq, num_blocks, softmax_scale,
                                      mla_decode_attn_bf16_mma__smem);
}
