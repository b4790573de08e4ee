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

/* paged_decode_split_combine (specs/paged_decode.yaml; not in the seed)
 *
 * Merges the splits that a paged_decode_split_* launch (same num_seqs,
 * num_q_heads, head_dim, num_splits) wrote to the workspace into the bf16
 * output [num_seqs, num_q_heads, head_dim]. Split j of (seq, q_head) holds
 * m_j (largest base-2 score), l_j = sum_p 2^(s_p - m_j) and
 * acc_j[d] = sum_p 2^(s_p - m_j) v_p[d]; rescaled to the common max
 * M = max_j m_j they add up:
 *
 *   out[d] = sum_j 2^(m_j - M) acc_j[d] / sum_j 2^(m_j - M) l_j
 *
 * the log-sum-exp merge the cores use between warps. Splits with
 * m_j = -inf (no positions) are skipped, never read: their acc rows were
 * not written. No split with a position (M = -inf, or a zero sum) gives
 * zeros, as the seed kernels give for L == 0. fp32 throughout, one
 * rounding to bf16.
 *
 * Geometry: grid (num_q_heads, num_seqs), block 128; thread t takes
 * elements d = t, t + 128, ... of the head and walks the splits itself (the
 * (m, l) pairs are the same for every thread, so they come from L1 after
 * the first warp; the acc rows are read coalesced, once).
 */

#include "paged_decode_common.cuh"

/* The spec's block for both combines (KL_THREADS_<entry>, klaunch/paged_decode.cuh). */
#define PAGED_DECODE__COMBINE_THREADS KL_THREADS_paged_decode_split_combine
static_assert(KL_THREADS_paged_decode_split_combine_pdl == PAGED_DECODE__COMBINE_THREADS,
              "specs/paged_decode.yaml gives both combines one block size");

static __device__ __forceinline__ void paged_decode__combine(const float *workspace, __nv_bfloat16 *output,
                                                             uint32_t num_seqs, uint32_t num_q_heads,
                                                             uint32_t head_dim, uint32_t num_splits) {
    if (num_splits == 0u) return; /* the launcher's precondition */
    const uint32_t h = blockIdx.x, s = blockIdx.y;
    /* Split j's row is row0 + j * num_q_heads. */
    const uint64_t row0 = paged_decode__ws_row(s, 0u, num_splits, num_q_heads, h);
    const float *__restrict__ ml =
        paged_decode__ws_ml(const_cast<float *>(workspace), num_seqs, num_splits, num_q_heads, head_dim, row0);
    const float *__restrict__ acc = workspace + row0 * head_dim;
    const uint64_t ml_step = 2ull * num_q_heads;
    const uint64_t acc_step = (uint64_t)num_q_heads * head_dim;
    __nv_bfloat16 *__restrict__ out = output + ((uint64_t)s * num_q_heads + h) * head_dim;

    float mx = -INFINITY;
#pragma unroll 4
    for (uint32_t j = 0; j < num_splits; ++j) mx = fmaxf(mx, __ldg(ml + j * ml_step));

    for (uint32_t d = threadIdx.x; d < head_dim; d += PAGED_DECODE__COMBINE_THREADS) {
        float lt = 0.0f, o = 0.0f;
        if (mx != -INFINITY) {
#pragma unroll 4
            for (uint32_t j = 0; j < num_splits; ++j) {
                const float m = __ldg(ml + j * ml_step);
                if (m != -INFINITY) {
                    const float f = paged_decode__exp2(m - mx);
                    lt = fmaf(__ldg(ml + j * ml_step + 1u), f, lt);
                    o = fmaf(__ldg(acc + j * acc_step + d), f, o);
                }
            }
        }
        out[d] = __float2bfloat16_rn(lt > 0.0f ? o / lt : 0.0f);
    }
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_combine)
paged_decode_split_combine(KL_PARAMS_paged_decode_split_combine) {
    paged_decode__combine(workspace, output, num_seqs, num_q_heads, head_dim, num_splits);
}

/* paged_decode_split_combine_pdl: the same merge, launched with
 * programmatic_serialization (a programmatic dependent launch) right after
 * the partial kernel, whose blocks trigger griddepcontrol.launch_dependents
 * on entry. So this grid may be resident before the partial grid has
 * finished; griddepcontrol.wait blocks until the partial grid has completed
 * and its workspace writes are visible, before any workspace load (the
 * __ldg reads below come after it, so no stale line can have been cached).
 * Below sm_90 the launcher refuses at lookup; the wait compiles to nothing
 * there. */
extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_split_combine_pdl)
paged_decode_split_combine_pdl(KL_PARAMS_paged_decode_split_combine_pdl) {
    kl__griddep_wait();
    paged_decode__combine(workspace, output, num_seqs, num_q_heads, head_dim, num_splits);
}
