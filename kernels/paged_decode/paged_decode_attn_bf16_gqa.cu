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

/* paged_decode_attn_bf16_gqa (docs: ../shared/notes/kernel-contract.md, kernel 11)
 *
 * The function of paged_decode_attn_bf16, one block per (kv_head, seq) with
 * the KV head's DECODE_GQA_PACK_WIDTH query heads (kv_head * width + j) in
 * registers, so each K and V row is read once for the whole group. The head
 * dim is the variant's DECODE_GQA_PACK_HEAD_DIM; the launcher refuses other
 * shapes (KL_ERROR_VARIANT_MISMATCH). How: paged_decode_common.cuh.
 *
 * Geometry (the seed's): grid (num_kv_heads, num_seqs), block 256.
 * 16-byte loads when both caches are 16-byte aligned, element loads otherwise.
 */

#include "paged_decode_common.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_bf16_gqa)
paged_decode_attn_bf16_gqa(KL_PARAMS_paged_decode_attn_bf16_gqa) {
    constexpr int NH = DECODE_GQA_PACK_WIDTH, HD = DECODE_GQA_PACK_HEAD_DIM;
    __shared__ paged_decode__gqa_smem<NH, HD> sm;
    /* The launcher's preconditions; a direct launch that breaks them does nothing. */
    if (head_dim != (uint32_t)HD || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u) return;
    const uint32_t kvh = blockIdx.x, s = blockIdx.y;

    uint32_t begin, end;
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, &begin, &end);

    const uint64_t row_stride = (uint64_t)num_kv_heads * HD;
    const uint64_t block_stride = (uint64_t)block_size * row_stride;
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * HD;
    __nv_bfloat16 *out_grp = output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * HD;
    const int32_t *table = block_tables + (uint64_t)s * max_blocks_per_seq;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache + (uint64_t)kvh * HD);
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache + (uint64_t)kvh * HD);
    const float q_scale = inv_sqrt_d * PAGED_DECODE__LOG2E;

    const bool vec = HD % 8 == 0 && (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u;
    /* Output rows of the NH heads are consecutive: [NH, HD]. */
    const paged_decode__out_bf16 out{out_grp, 1.0f};
    if (vec)
        paged_decode__gqa_core<false, NH, HD, 8>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                 block_stride, row_stride, q_scale);
    else
        paged_decode__gqa_core<false, NH, HD, 1>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                 block_stride, row_stride, q_scale);
}
