/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_mma_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_split_test.cc (GPU)
 *   tests/paged_decode/paged_decode_mma_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_mma_emulated_test \
 *     //tests/paged_decode:paged_decode_split_test \
 *     //tests/paged_decode:paged_decode_mma_launch_test \
 *     //tests/paged_decode:sass_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_split_bf16_gqa_mma, paged_decode_split_fp8_gqa_mma
 * (specs/paged_decode.yaml; not in the seed)
 *
 * The split-KV partial passes paged_decode_split_bf16_gqa and
 * paged_decode_split_fp8_gqa (same arguments, grid, block, splits and
 * workspace layout: paged_decode_common.cuh) on the tensor-core core of
 * paged_decode_mma.cuh. Block (kv_head, seq, split) writes each head's
 * (m, l, acc) of its split; an empty split writes (m, l) = (-inf, 0).
 * Combined by paged_decode_split_combine or its PDL twin.
 */

#include "paged_decode_mma.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif


extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_bf16_gqa_mma, 1)
paged_decode_split_bf16_gqa_mma(KL_PARAMS_paged_decode_split_bf16_gqa_mma) {
    /* Programmatic dependent launch, as in paged_decode_split_fp8_gqa.cu: a
     * dependent combine may start once every block has passed here; it
     * waits for this grid's completion before reading the workspace. */
    kl__griddep_launch_dependents();
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    static_assert(DECODE_GQA_PACK_HEAD_DIM == 128, "the MMA layout is for head dim 128");
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u || num_splits == 0u)
        return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y, j = blockIdx.z;
    uint32_t wbegin, wend, begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &wbegin, &wend);
    paged_decode__split_range(wbegin, wend, block_size, num_splits, j, &begin, &end);
    const uint64_t row = paged_decode__ws_row(s, j, num_splits, num_q_heads, kvh * (uint32_t)NH);
    float *ml = paged_decode__ws_ml(workspace, num_seqs, num_splits, num_q_heads, 128u, row);
    if (begin >= end) {
        paged_decode__empty_split(ml, (uint32_t)NH);
        return;
    }
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
    const paged_decode__out_partial out{workspace + row * 128u, ml, 1.0f};
    paged_decode__mma_run<false, NH>(sm, q_grp, k_cache, v_cache, out, block_tables + (uint64_t)s * max_blocks_per_seq,
                                 begin, end, kvh, num_kv_heads, block_size,
                                 (uint64_t)block_size * num_kv_heads * 128u, inv_sqrt_d * PAGED_DECODE__LOG2E);
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_fp8_gqa_mma, 1)
paged_decode_split_fp8_gqa_mma(KL_PARAMS_paged_decode_split_fp8_gqa_mma) {
    /* Programmatic dependent launch, as in paged_decode_split_fp8_gqa.cu: a
     * dependent combine may start once every block has passed here; it
     * waits for this grid's completion before reading the workspace. */
    kl__griddep_launch_dependents();
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u || num_splits == 0u)
        return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y, j = blockIdx.z;
    uint32_t wbegin, wend, begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &wbegin, &wend);
    paged_decode__split_range(wbegin, wend, block_size, num_splits, j, &begin, &end);
    const uint64_t row = paged_decode__ws_row(s, j, num_splits, num_q_heads, kvh * (uint32_t)NH);
    float *ml = paged_decode__ws_ml(workspace, num_seqs, num_splits, num_q_heads, 128u, row);
    if (begin >= end) {
        paged_decode__empty_split(ml, (uint32_t)NH);
        return;
    }
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
    const paged_decode__out_partial out{workspace + row * 128u, ml, v_scale * PAGED_DECODE__FP8_UNIT};
    paged_decode__mma_run<true, NH>(sm, q_grp, k_cache, v_cache, out, block_tables + (uint64_t)s * max_blocks_per_seq,
                                begin, end, kvh, num_kv_heads, block_size, cache_stride,
                                inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E);
}
