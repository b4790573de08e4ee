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

/* paged_decode_attn_fp8 (docs: ../shared/notes/kernel-contract.md, kernel 10)
 *
 * Paged decode attention over an fp8 (E4M3) KV cache: element
 * (b, slot, kvh, d) at b*cache_stride + (slot*num_kv_heads + kvh)*head_dim + d,
 * k = float(k8) * k_scale, v = float(v8) * v_scale. The scales are applied
 * once, not per element: k_scale is folded into q, v_scale into the final
 * normalisation. How: paged_decode_common.cuh.
 *
 * Geometry (the seed's): grid (num_q_heads, num_seqs), block 256. Launch
 * bounds (256, 2): up to 128 registers, so the fast and the fallback path
 * together do not spill.
 * 16-byte loads (16 elements a lane) when both caches are 16-byte aligned and
 * head_dim and cache_stride are multiples of 16, element loads otherwise.
 */

#include "paged_decode_common.cuh"

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_fp8, 2)
paged_decode_attn_fp8(KL_PARAMS_paged_decode_attn_fp8) {
    __shared__ paged_decode__plain_smem sm;
    if (head_dim == 0u || head_dim > PAGED_DECODE__MAX_HEAD_DIM || block_size == 0u || num_kv_heads == 0u ||
        num_q_heads % num_kv_heads != 0u)
        return;
    const uint32_t h = blockIdx.x, s = blockIdx.y;
    const uint32_t kvh = h / (num_q_heads / num_kv_heads);

    uint32_t begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &begin, &end);

    const uint64_t row_stride = (uint64_t)num_kv_heads * head_dim;
    const __nv_bfloat16 *q_head = q + (uint64_t)s * q_stride + (uint64_t)h * head_dim;
    __nv_bfloat16 *out_head = output + ((uint64_t)s * num_q_heads + h) * head_dim;
    const int32_t *table = block_tables + (uint64_t)s * max_blocks_per_seq;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache) + (uint64_t)kvh * head_dim;
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache) + (uint64_t)kvh * head_dim;
    const float q_scale = inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E;
    const float out_scale = v_scale * PAGED_DECODE__FP8_UNIT;

    const bool vec = (head_dim % 16u) == 0u && (cache_stride % 16u) == 0u &&
                     (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u;
    const paged_decode__out_bf16 out{out_head, out_scale};
    if (vec)
        paged_decode__plain_core<true, 16>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                           cache_stride, row_stride, q_scale);
    else
        paged_decode__plain_core<true, 1>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                          cache_stride, row_stride, q_scale);
}
