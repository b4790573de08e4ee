/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_split_test.cc (GPU)
 *   tests/paged_decode/paged_decode_split_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_emulated_test \
 *     //tests/paged_decode:paged_decode_split_test \
 *     //tests/paged_decode:paged_decode_split_launch_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_split_fp8 (specs/paged_decode.yaml; not in the seed)
 *
 * Split-KV partial pass of paged_decode_attn_fp8 (its cache layout,
 * cache_stride and scales): block (q_head, seq, split) runs the plain core
 * over one split of the window and writes the split's (m, l, acc) to the
 * workspace, acc dequantised (v_scale applied, as the seed kernel applies
 * it at its normalisation). An empty split writes (m, l) = (-inf, 0).
 * How: paged_decode_common.cuh.
 *
 * Geometry: grid (num_q_heads, num_seqs, num_splits), block 256, launch
 * bounds (256, 2) as the seed kernel.
 */

#include "paged_decode_common.cuh"

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_fp8, 2)
paged_decode_split_fp8(KL_PARAMS_paged_decode_split_fp8) {
    /* Programmatic dependent launch: a dependent grid launched with
     * programmatic_serialization (paged_decode_split_combine_pdl) may start
     * once every block of this grid has passed here; it waits in
     * griddepcontrol.wait until this grid has completed and its writes are
     * visible, so triggering before the stores is safe. A no-op without
     * such a dependent, and below sm_90. */
    kl__griddep_launch_dependents();
    __shared__ paged_decode__plain_smem sm;
    if (head_dim == 0u || head_dim > PAGED_DECODE__MAX_HEAD_DIM || block_size == 0u || num_kv_heads == 0u ||
        num_q_heads % num_kv_heads != 0u || num_splits == 0u)
        return;
    const uint32_t h = blockIdx.x, s = blockIdx.y, j = blockIdx.z;
    const uint32_t kvh = h / (num_q_heads / num_kv_heads);

    uint32_t wbegin, wend, begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &wbegin, &wend);
    paged_decode__split_range(wbegin, wend, block_size, num_splits, j, &begin, &end);

    const uint64_t row = paged_decode__ws_row(s, j, num_splits, num_q_heads, h);
    float *ml = paged_decode__ws_ml(workspace, num_seqs, num_splits, num_q_heads, head_dim, row);
    if (begin >= end) {
        paged_decode__empty_split(ml, 1u);
        return;
    }

    const uint64_t row_stride = (uint64_t)num_kv_heads * head_dim;
    const __nv_bfloat16 *q_head = q + (uint64_t)s * q_stride + (uint64_t)h * head_dim;
    const int32_t *table = block_tables + (uint64_t)s * max_blocks_per_seq;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache) + (uint64_t)kvh * head_dim;
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache) + (uint64_t)kvh * head_dim;
    const float q_scale = inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E;
    const paged_decode__out_partial out{workspace + row * head_dim, ml, v_scale * PAGED_DECODE__FP8_UNIT};

    const bool vec = (head_dim % 16u) == 0u && (cache_stride % 16u) == 0u &&
                     (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u;
    if (vec)
        paged_decode__plain_core<true, 16>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                           cache_stride, row_stride, q_scale);
    else
        paged_decode__plain_core<true, 1>(sm, q_head, k_head, v_head, out, table, begin, end, head_dim, block_size,
                                          cache_stride, row_stride, q_scale);
}
