/* Reference: tests/mla_decode/mla_decode_reference.h (attention, float64)
 * Tests:
 *   tests/mla_decode/mla_decode_emulated_test.cc (CPU emulator, after each attention launcher)
 *   tests/mla_decode/mla_decode_test.cc (GPU)
 *   tests/mla_decode/mla_decode_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_decode:mla_decode_emulated_test \
 *     //tests/mla_decode:mla_decode_test \
 *     //tests/mla_decode:mla_decode_launch_test
 */
#include "klaunch/mla_decode.cuh"

/* mla_decode_combine, mla_decode_combine_pdl: the rows of the sequences the
 * schedule split, from their splits' workspace slots (klaunch/
 * mla_decode_layout.h). Split k of a row holds o_k (normalised by its own
 * sum) and lse_k; with M = max_k lse_k and w_k = exp(lse_k - M):
 *   out = sum_k w_k o_k / sum_k w_k,   lse = M + log(sum_k w_k)
 * and a split with lse_k = -inf weighs 0 (its o_k row is zeros, never NaN).
 * No split saw a position (M = -inf): zeros and -inf, as the attention
 * writes for such a row. fp32 throughout, one rounding to bf16.
 *
 * Grid (ceil(R / 8), batch), block 256: warp w takes row 8 x + w of
 * sequence y; lane j takes the splits j, j + 32, ... for the maximum and
 * the weights, then columns 4j .. 4j + 3 (+ 128 ...) of every split, 16
 * bytes a load. A sequence with one split exits at once. */

#include "mla_decode_common.cuh"

namespace mla_decode_combine_ {

constexpr uint32_t DV = MLA_HDIM - 64;
static_assert(DV % 128 == 0, "a lane takes 4 columns of each 128");

__device__ __forceinline__ void combine(const int32_t *sched, const float *workspace, __nv_bfloat16 *out, float *lse,
                                        uint32_t batch, uint32_t s_q, uint32_t h_q, uint32_t head_dim,
                                        uint32_t num_parts) {
    if (head_dim != MLA_HDIM || blockDim.x != 256u) return; /* the launcher refuses these */
    const uint32_t rows = s_q * h_q;
    if (!mla_decode__sched_ok(sched, batch, num_parts)) {
        mla_decode__poison_all(out, lse, batch, rows, DV);
        return;
    }
    const uint32_t b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const uint32_t r = blockIdx.x * 8u + warp;
    const uint32_t n = (uint32_t)sched[mla_decode__splits_at(num_parts) + b];
    if (n <= 1u || r >= rows) return;
    const uint32_t slot0 = (uint32_t)sched[mla_decode__base_at(num_parts, batch) + b];
    float *ws = const_cast<float *>(workspace);

    float m = -INFINITY;
    for (uint32_t k = lane; k < n; k += 32u) m = fmaxf(m, *mla_decode__ws_lse(ws, num_parts, slot0 + k, rows, DV, r));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));

    __nv_bfloat16 *orow = out + ((uint64_t)b * rows + r) * DV;
    if (m == -INFINITY) {
        for (uint32_t c = lane; c < DV; c += 32u) orow[c] = __float2bfloat16_rn(0.0f);
        if (lane == 0u) lse[(uint64_t)b * rows + r] = -INFINITY;
        return;
    }
    /* 16-byte loads where the workspace is 16-byte aligned (rows are DV * 4
     * bytes apart), 4-byte stores where out is 4-byte aligned (rows DV * 2). */
    const bool vec_in = ((uintptr_t)workspace & 15u) == 0u, vec_out = ((uintptr_t)out & 3u) == 0u;
    float acc[DV / 32];
#pragma unroll
    for (uint32_t i = 0; i < DV / 32; ++i) acc[i] = 0.0f;
    float wsum = 0.0f;
    for (uint32_t k = 0; k < n; ++k) {
        const float l = *mla_decode__ws_lse(ws, num_parts, slot0 + k, rows, DV, r);
        if (l == -INFINITY) continue;
        const float w = expf(l - m);
        wsum += w;
        const float *o = mla_decode__ws_o(ws, slot0 + k, rows, DV, r);
#pragma unroll
        for (uint32_t i = 0; i < DV / 128; ++i) {
            const uint32_t c = i * 128u + 4u * lane;
            float4 v;
            if (vec_in) {
                v = *reinterpret_cast<const float4 *>(o + c);
            } else {
                v.x = o[c];
                v.y = o[c + 1u];
                v.z = o[c + 2u];
                v.w = o[c + 3u];
            }
            acc[4 * i] = fmaf(w, v.x, acc[4 * i]);
            acc[4 * i + 1] = fmaf(w, v.y, acc[4 * i + 1]);
            acc[4 * i + 2] = fmaf(w, v.z, acc[4 * i + 2]);
            acc[4 * i + 3] = fmaf(w, v.w, acc[4 * i + 3]);
        }
    }
    const float inv = 1.0f / wsum; /* wsum >= 1: the maximum's own weight */
#pragma unroll
    for (uint32_t i = 0; i < DV / 128; ++i) {
        const uint32_t c = i * 128u + 4u * lane;
        uint16_t h[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) h[e] = mla_decode__bf16_bits(acc[4 * i + e] * inv);
        if (vec_out) {
            uint32_t *o32 = reinterpret_cast<uint32_t *>(orow + c);
            o32[0] = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
            o32[1] = (uint32_t)h[2] | ((uint32_t)h[3] << 16);
        } else {
            unsigned short *o16 = reinterpret_cast<unsigned short *>(orow + c);
#pragma unroll
            for (int e = 0; e < 4; ++e) o16[e] = h[e];
        }
    }
    if (lane == 0u) lse[(uint64_t)b * rows + r] = m + logf(wsum);
}

}  // namespace mla_decode_combine_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_combine)
mla_decode_combine(KL_PARAMS_mla_decode_combine) {
    mla_decode_combine_::combine(sched, workspace, out, lse, batch, s_q, h_q, head_dim, num_parts);
}

/* The same, as a programmatic dependent launch: griddepcontrol.wait (before
 * any global access) returns once the attention grid before it has
 * completed and its writes are visible. */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_combine_pdl)
mla_decode_combine_pdl(KL_PARAMS_mla_decode_combine_pdl) {
    kl__griddep_wait();
    mla_decode_combine_::combine(sched, workspace, out, lse, batch, s_q, h_q, head_dim, num_parts);
}
