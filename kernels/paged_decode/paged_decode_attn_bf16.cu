/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_test.cc (GPU)
 *   tests/paged_decode/paged_decode_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_emulated_test \
 *     //tests/paged_decode:paged_decode_test \
 *     //tests/paged_decode:paged_decode_launch_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_attn_bf16 (docs: ../shared/notes/kernel-contract.md, kernel 9)
 *
 * Paged decode attention over a bf16 KV cache [num_blocks, block_size,
 * num_kv_heads, head_dim]; q [num_seqs, q_stride] with head h at h*head_dim;
 * output [num_seqs, num_q_heads, head_dim]. How: paged_decode_common.cuh.
 *
 * Geometry (the seed's): grid (num_q_heads, num_seqs), block 256; the block
 * takes its query head from blockIdx.x and its sequence from blockIdx.y.
 * Launch bounds (256, 2): up to 128 registers, so the fast and the fallback
 * path together do not spill (ptxas otherwise aims lower and spills).
 * 16-byte loads (8 elements a lane) when both caches are 16-byte aligned and
 * head_dim % 8 == 0, element loads otherwise; checked once per block.
 */

#include "paged_decode_common.cuh"

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_bf16, 2)
paged_decode_attn_bf16(KL_PARAMS_paged_decode_attn_bf16) {
    __shared__ paged_decode__plain_smem sm;
    /* The launcher's preconditions; a direct launch that breaks them does nothing. */
    if (head_dim == 0u || head_dim > PAGED_DECODE__MAX_HEAD_DIM || block_size == 0u || num_kv_heads == 0u ||
        num_q_heads % num_kv_heads != 0u)
        return;
    const uint32_t h = blockIdx.x, s = blockIdx.y;
    const uint32_t kvh = h / (num_q_heads / num_kv_heads);

    uint32_t begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &begin, &end);

    const uint64_t row_stride = (uint64_t)num_kv_heads * head_dim;
    const uint64_t block_stride = (uint64_t)block_size * row_stride;
    const __nv_bfloat16 *q_head = q + (uint64_t)s * q_stride + (uint64_t)h * head_dim;
    __nv_bfloat16 *out_head = output + ((uint64_t)s * num_q_heads + h) * head_dim;
    const int32_t *table = block_tables + (uint64_t)s * max_blocks_per_seq;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache + (uint64_t)kvh * head_dim);
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache + (uint64_t)kvh * head_dim);
    const float q_scale = inv_sqrt_d * PAGED_DECODE__LOG2E;

    /* Every row starts a multiple of head_dim elements after the cache base. */
    const bool vec = (head_dim % 8u) == 0u && (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u;
    const paged_decode__out_bf16 out{out_head, 1.0f};
    if (vec)
        paged_decode__plain_core<false, 8>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                           block_stride, row_stride, q_scale);
    else
        paged_decode__plain_core<false, 1>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                           block_stride, row_stride, q_scale);
}
