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

/* paged_decode_split_bf16_gqa (specs/paged_decode.yaml; not in the seed)
 *
 * GQA-packed split-KV partial pass: block (kv_head, seq, split) runs the
 * packed core of paged_decode_attn_bf16_gqa (the KV head's
 * DECODE_GQA_PACK_WIDTH query heads kv_head * width + i in registers) over
 * one split of the window and writes each head's (m, l, acc) to the
 * workspace; the heads' rows are consecutive there (row = (seq *
 * num_splits + split) * num_q_heads + q_head). An empty split writes
 * (m, l) = (-inf, 0) for its heads. How: paged_decode_common.cuh.
 *
 * Geometry: grid (num_kv_heads, num_seqs, num_splits), block 256.
 */

#include "paged_decode_common.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_bf16_gqa)
paged_decode_split_bf16_gqa(KL_PARAMS_paged_decode_split_bf16_gqa) {
    /* Programmatic dependent launch: a dependent grid launched with
     * programmatic_serialization (paged_decode_split_combine_pdl) may start
     * once every block of this grid has passed here; it waits in
     * griddepcontrol.wait until this grid has completed and its writes are
     * visible, so triggering before the stores is safe. A no-op without
     * such a dependent, and below sm_90. */
    kl__griddep_launch_dependents();
    constexpr int NH = DECODE_GQA_PACK_WIDTH, HD = DECODE_GQA_PACK_HEAD_DIM;
    __shared__ paged_decode__gqa_smem<NH, HD> sm;
    if (head_dim != (uint32_t)HD || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u ||
        num_splits == 0u)
        return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y, j = blockIdx.z;

    uint32_t wbegin, wend, begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &wbegin, &wend);
    paged_decode__split_range(wbegin, wend, block_size, num_splits, j, &begin, &end);

    const uint64_t row = paged_decode__ws_row(s, j, num_splits, num_q_heads, kvh * (uint32_t)NH);
    float *ml = paged_decode__ws_ml(workspace, num_seqs, num_splits, num_q_heads, (uint32_t)HD, row);
    if (begin >= end) {
        paged_decode__empty_split(ml, (uint32_t)NH);
        return;
    }

    const uint64_t row_stride = (uint64_t)num_kv_heads * HD;
    const uint64_t block_stride = (uint64_t)block_size * row_stride;
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * HD;
    const int32_t *table = block_tables + (uint64_t)s * max_blocks_per_seq;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache + (uint64_t)kvh * HD);
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache + (uint64_t)kvh * HD);
    const float q_scale = inv_sqrt_d * PAGED_DECODE__LOG2E;
    const paged_decode__out_partial out{workspace + row * HD, ml, 1.0f};

    const bool vec = HD % 8 == 0 && (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u;
    if (vec)
        paged_decode__gqa_core<false, NH, HD, 8>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                 block_stride, row_stride, q_scale);
    else
        paged_decode__gqa_core<false, NH, HD, 1>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                 block_stride, row_stride, q_scale);
}
