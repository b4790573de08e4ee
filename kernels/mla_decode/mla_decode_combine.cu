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
 * Grid (ceil(R / 4) * nch, batch), block 128, nch = min(DV / 64,
 * max(1, num_parts / (4 batch))) column chunks a row: warp w of block x
 * takes row 4 (x / nch) + w of sequence y and chunk x % nch of its 64-column
 * slabs (ceil(DV / 64 / nch) slabs a chunk), lane j columns 2j, 2j + 1 of
 * each (8-byte loads, coalesced over the warp); the lanes take the splits
 * j, j + 32, ... for the maximum and the weights. A batch with a few
 * splits a sequence gets a warp a whole row (one chunk: fewer, longer
 * warps, 6 us at batch 128 on an H100 where a warp a 64 columns took 9-12);
 * a sequence split ~130 ways gets its rows' slabs spread over 8 times the
 * warps. Loads in flight: a split's slabs together, or (one slab a warp)
 * 8 splits' at a time. A sequence with one
 * split exits at once. */

#include "mla_decode_common.cuh"

namespace mla_decode_combine_ {

constexpr uint32_t DV = MLA_HDIM - 64;
constexpr uint32_t NSL = DV / 64; /* 64-column slabs of a row */
static_assert(DV % 64 == 0, "a row is whole 64-column slabs");
static_assert(KL_THREADS_mla_decode_combine == 128 && KL_THREADS_mla_decode_combine_pdl == 128, "4 warps, a row each");

/* Two floats of a partial row: 8 bytes where the workspace allows it. */
__device__ __forceinline__ float2 load2(const float *o, bool vec) {
    return vec ? *reinterpret_cast<const float2 *>(o) : make_float2(o[0], o[1]);
}

__device__ __forceinline__ void combine(const int32_t *sched, const float *workspace, __nv_bfloat16 *out, float *lse,
                                        uint32_t batch, uint32_t s_q, uint32_t h_q, uint32_t head_dim,
                                        uint32_t num_parts) {
    if (head_dim != MLA_HDIM || blockDim.x != 128u) return; /* the launcher refuses these */
    const uint32_t rows = s_q * h_q;
    if (!mla_decode__sched_ok(sched, batch, num_parts)) {
        mla_decode__poison_all(out, lse, batch, rows, DV);
        return;
    }
    const uint32_t quads = (rows + 3u) / 4u, nch = gridDim.x / quads; /* the spec's grid: quads * nch */
    if (nch == 0u) return;
    const uint32_t spc = (NSL + nch - 1u) / nch; /* slabs a chunk */
    const uint32_t b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const uint32_t r = (blockIdx.x / nch) * 4u + warp, chunk = blockIdx.x % nch;
    const uint32_t s0 = chunk * spc, s1 = s0 + spc < NSL ? s0 + spc : NSL;
    const uint32_t n = (uint32_t)sched[mla_decode__splits_at(num_parts) + b];
    if (n <= 1u || r >= rows || s0 >= NSL) return;
    const uint32_t slot0 = (uint32_t)sched[mla_decode__base_at(num_parts, batch) + b];
    float *ws = const_cast<float *>(workspace);

    float m = -INFINITY;
    for (uint32_t k = lane; k < n; k += 32u) m = fmaxf(m, *mla_decode__ws_lse(ws, num_parts, slot0 + k, rows, DV, r));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));

    __nv_bfloat16 *orow = out + ((uint64_t)b * rows + r) * DV;
    const bool writes_lse = chunk == 0u && lane == 0u;
    const uint32_t ns = s1 - s0;
    if (m == -INFINITY) {
        for (uint32_t sl = s0; sl < s1; ++sl) {
            orow[64u * sl + 2u * lane] = __float2bfloat16_rn(0.0f);
            orow[64u * sl + 2u * lane + 1u] = __float2bfloat16_rn(0.0f);
        }
        if (writes_lse) lse[(uint64_t)b * rows + r] = -INFINITY;
        return;
    }
    /* 8-byte loads where the workspace is 8-byte aligned (rows are DV * 4
     * bytes apart, columns even), 4-byte stores where out is 4-byte aligned. */
    const bool vec_in = ((uintptr_t)workspace & 7u) == 0u, vec_out = ((uintptr_t)out & 3u) == 0u;
    float acc[NSL][2];
#pragma unroll
    for (uint32_t i = 0; i < NSL; ++i) acc[i][0] = acc[i][1] = 0.0f;
    float wsum = 0.0f;
    for (uint32_t k0 = 0; k0 < n; k0 += 32u) {
        /* this lane's split's weight; each split's from its lane by shuffle */
        const uint32_t kl = k0 + lane;
        const float lk = kl < n ? *mla_decode__ws_lse(ws, num_parts, slot0 + kl, rows, DV, r) : -INFINITY;
        const float wk = lk == -INFINITY ? 0.0f : expf(lk - m);
        wsum += wk;
        const uint32_t cnt = n - k0 < 32u ? n - k0 : 32u;
        if (ns == 1u) {
            /* one slab (a sequence split many ways): 8 splits' loads in flight at a time */
            for (uint32_t j0 = 0; j0 < cnt; j0 += 8u) {
                float w[8];
                float2 v[8];
#pragma unroll
                for (uint32_t j = 0; j < 8u; ++j) {
                    w[j] = __shfl_sync(0xffffffffu, wk, (j0 + j) & 31u);
                    v[j] = make_float2(0.0f, 0.0f);
                    if (j0 + j < cnt && w[j] != 0.0f) /* a split that saw nothing: its row is zeros */
                        v[j] = load2(mla_decode__ws_o(ws, slot0 + k0 + j0 + j, rows, DV, r) + 64u * s0 + 2u * lane,
                                     vec_in);
                }
#pragma unroll
                for (uint32_t j = 0; j < 8u; ++j) {
                    acc[0][0] = fmaf(w[j], v[j].x, acc[0][0]);
                    acc[0][1] = fmaf(w[j], v[j].y, acc[0][1]);
                }
            }
        } else {
            /* several slabs (few splits): a split's slabs' loads in flight together */
            for (uint32_t j = 0; j < cnt; ++j) {
                const float w = __shfl_sync(0xffffffffu, wk, j);
                if (w == 0.0f) continue;
                const float *o = mla_decode__ws_o(ws, slot0 + k0 + j, rows, DV, r) + 2u * lane;
                float2 v[NSL];
#pragma unroll
                for (uint32_t q = 0; q < NSL; ++q)
                    v[q] = q < ns ? load2(o + 64u * (s0 + q), vec_in) : make_float2(0.0f, 0.0f);
#pragma unroll
                for (uint32_t q = 0; q < NSL; ++q) {
                    acc[q][0] = fmaf(w, v[q].x, acc[q][0]);
                    acc[q][1] = fmaf(w, v[q].y, acc[q][1]);
                }
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) wsum += __shfl_xor_sync(0xffffffffu, wsum, o);
    const float inv = 1.0f / wsum; /* wsum >= 1: the maximum's own weight */
#pragma unroll
    for (uint32_t q = 0; q < NSL; ++q) {
        if (q >= ns) break;
        const uint32_t col = 64u * (s0 + q) + 2u * lane;
        const uint16_t h0 = mla_decode__bf16_bits(acc[q][0] * inv), h1 = mla_decode__bf16_bits(acc[q][1] * inv);
        if (vec_out) {
            *reinterpret_cast<uint32_t *>(orow + col) = (uint32_t)h0 | ((uint32_t)h1 << 16);
        } else {
            reinterpret_cast<unsigned short *>(orow)[col] = h0;
            reinterpret_cast<unsigned short *>(orow)[col + 1u] = h1;
        }
    }
    if (writes_lse) lse[(uint64_t)b * rows + r] = m + logf(wsum);
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
