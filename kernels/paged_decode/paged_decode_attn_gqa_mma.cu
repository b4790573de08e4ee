/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_mma_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_test.cc (GPU)
 *   tests/paged_decode/paged_decode_mma_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_mma_emulated_test \
 *     //tests/paged_decode:paged_decode_test \
 *     //tests/paged_decode:paged_decode_mma_launch_test \
 *     //tests/paged_decode:sass_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_attn_bf16_gqa_mma, paged_decode_attn_fp8_gqa_mma
 * (specs/paged_decode.yaml; not in the seed)
 *
 * The functions of paged_decode_attn_bf16_gqa and paged_decode_attn_fp8_gqa
 * (kernel-contract.md, kernels 11 and 12; same arguments, grid and block)
 * computed on tensor cores: paged_decode_mma.cuh says how and what it
 * rounds. One block per (kv_head, seq), the KV head's DECODE_GQA_PACK_WIDTH
 * (<= 8) query heads, head dim DECODE_GQA_PACK_HEAD_DIM (128).
 *
 * Fast path when block_size % 16 == 0 and the caches' rows are 16-byte
 * aligned (bf16: both pointers; fp8: both pointers and cache_stride % 16);
 * the general path otherwise. Tiles in flight per warp: 2 for bf16 (8 KiB
 * a warp), 3 for fp8 (two 4 KiB tiles arriving while one is computed).
 */

#include "paged_decode_mma.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_bf16_gqa_mma, 1)
paged_decode_attn_bf16_gqa_mma(KL_PARAMS_paged_decode_attn_bf16_gqa_mma) {
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    static_assert(DECODE_GQA_PACK_HEAD_DIM == 128, "the MMA layout is for head dim 128");
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u) return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y;
    uint32_t begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &begin, &end);
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
    const paged_decode__out_bf16 out{output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * 128u, 1.0f};
    paged_decode__mma_run<false, NH>(sm, q_grp, k_cache, v_cache, out, block_tables + (uint64_t)s * max_blocks_per_seq,
                                 begin, end, kvh, num_kv_heads, block_size,
                                 (uint64_t)block_size * num_kv_heads * 128u, inv_sqrt_d * PAGED_DECODE__LOG2E);
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_fp8_gqa_mma, 1)
paged_decode_attn_fp8_gqa_mma(KL_PARAMS_paged_decode_attn_fp8_gqa_mma) {
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u) return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y;
    uint32_t begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &begin, &end);
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
    const paged_decode__out_bf16 out{output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * 128u,
                                     v_scale * PAGED_DECODE__FP8_UNIT};
    paged_decode__mma_run<true, NH>(sm, q_grp, k_cache, v_cache, out, block_tables + (uint64_t)s * max_blocks_per_seq,
                                begin, end, kvh, num_kv_heads, block_size, cache_stride,
                                inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E);
}
