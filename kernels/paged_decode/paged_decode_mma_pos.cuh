/* paged_decode_mma_pos.cuh - the copy-engine consumers' step (the *_gqa_bulk
 * and *_gqa_tma launchers, paged_decode_bulk.cuh): one tile of 16 positions
 * of a warp, as paged_decode__mma_step (paged_decode_mma.cuh) computes it,
 * with S's operands swapped so that no half of an MMA multiplies zeros.
 *
 * WHY (SASS of the sm_90a cubin, nvcc 13.0, bench/decode/sass_count.py,
 * before this step): paged_decode__mma_step computes S = Q K^T with M =
 * query heads, so rows 8-15 of every S MMA are zero (NH <= 8): 16 HMMA for
 * 16 positions, half of them on zeros, and ptxas rematerialised the zero
 * registers and copied Q into the accumulators' registers every tile (62
 * IMAD in the fp8 ring loop of 360 instructions, 24 HMMA). The fp8
 * `_tma` persistent kernel is the consumers' to pace (H200, 2026-12-04:
 * block ends within 1 us, 0.46 issued warps a scheduler). With this step
 * the fp8 ring loop is 286 instructions and 16 HMMA (328 and 24 with the
 * heads as rows), bf16 321 and 24 (342, 32); measured on the H200
 * (2026-12-05, decode_bench --ab against the heads-as-rows build) 0.4-0.5%
 * faster, so fp8's pace is not the instructions its consumers issue.
 *
 * LAYOUT (lane = 4 g + t, as paged_decode_mma.cuh):
 *   S^T = K Q^T, m16n8k16 with M = the tile's 16 positions, N = query heads
 *   (columns >= NH are zero: Q's B fragment is the _mma core's A fragment
 *   qa, rows g >= NH zero), K = head dims in 8 steps under the same dims
 *   permutation: K's A fragment is the _mma step's two B fragments side by
 *   side (the same registers). 8 HMMA, in two chains of 4 k-steps (half
 *   the dependent latency) added at the end. Lane (g, t) gets positions
 *   p0 + g, p0 + 8 + g of heads 2t, 2t + 1.
 *   Softmax per head over the 8 lanes of one t (3 shuffles a head: the
 *   lanes 4, 8, 16 apart); lane (g, t) keeps the running max and its share
 *   of the sum of heads 2t and 2t + 1, which are O^T's columns in that
 *   lane: the rescale needs no shuffle.
 *   P^T's B fragment for O^T += V^T P^T (positions 2t, 2t + 1 (+ 8), head
 *   g) is the transpose of what S^T left (positions g (+ 8), heads 2t,
 *   2t + 1), packed to 16 bits: one movmatrix.trans per 8 positions (two
 *   a tile; four for bf16's hi + lo). P.V is paged_decode__mma_step's.
 *
 * NUMERICS: paged_decode__mma_step's (P rounded to f16 for fp8 caches, to
 * hi + lo bf16 for bf16 ones; l sums the unrounded fp32 P); S's fp32
 * accumulation is two chains of 4 MMAs added once.
 */
#ifndef KLAUNCH_KERNELS_PAGED_DECODE_MMA_POS_CUH
#define KLAUNCH_KERNELS_PAGED_DECODE_MMA_POS_CUH

#include "paged_decode_mma.cuh"

/* A closure over the warp's state, as paged_decode__mma_step: qa, Q's
 * fragments (paged_decode__mma_q); o, O^T's accumulators; m[c], l[c]:
 * head 2t + c's running max and this lane's share of its sum. */
template <bool FP8, int NH> struct paged_decode__mma_pos_step {
    const uint32_t (&qa)[8][2];
    float (&o)[8][4];
    float (&m)[2];
    float (&l)[2];
    const float &score_scale;
    const uint32_t &g, &t, &begin, &end;
    __device__ __forceinline__ void operator()(const paged_decode__mma_tile<FP8> &x, uint32_t tile) const {
        constexpr bool F16 = FP8; /* MMA input type: f16 for fp8 caches, bf16 for bf16 */
        const uint32_t p0 = tile * 16u;
        /* S^T, k-steps j = c (mod 2) in chain c. */
        float s[2][4];
#pragma unroll
        for (int c = 0; c < 2; ++c) s[c][0] = s[c][1] = s[c][2] = s[c][3] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            uint32_t a0, a1, a2, a3;
            if constexpr (FP8) {
                a0 = paged_decode__e4m3x2_f16x2(x.k[0][j]);
                a1 = paged_decode__e4m3x2_f16x2(x.k[1][j]);
                a2 = paged_decode__e4m3x2_f16x2_hi(x.k[0][j]);
                a3 = paged_decode__e4m3x2_f16x2_hi(x.k[1][j]);
            } else {
                a0 = x.k[0][2 * j];
                a1 = x.k[1][2 * j];
                a2 = x.k[0][2 * j + 1];
                a3 = x.k[1][2 * j + 1];
            }
            paged_decode__mma<F16>(s[j & 1], a0, a1, a2, a3, qa[j][0], qa[j][1]);
        }
        /* sc[r][c]: position p0 + g + 8r, head 2t + c. */
        float sc[2][2], mx[2] = {-INFINITY, -INFINITY};
        const bool interior = p0 >= begin && p0 + 16u <= end;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const uint32_t pos = p0 + g + 8u * (uint32_t)r;
            const bool in = interior || (pos >= begin && pos < end);
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const bool val = in && 2u * t + (uint32_t)c < (uint32_t)NH;
                sc[r][c] = val ? (s[0][2 * r + c] + s[1][2 * r + c]) * score_scale : -INFINITY;
                mx[c] = fmaxf(mx[c], sc[r][c]);
            }
        }
        float alpha[2], p[2][2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
#pragma unroll
            for (int o4 = 4; o4 < 32; o4 <<= 1) mx[c] = fmaxf(mx[c], __shfl_xor_sync(PAGED_DECODE__FULL, mx[c], o4));
            const float mn = fmaxf(m[c], mx[c]);
            const bool none = mn == -INFINITY; /* nothing seen yet for this head */
            alpha[c] = none ? 1.0f : paged_decode__exp2(m[c] - mn);
#pragma unroll
            for (int r = 0; r < 2; ++r) p[r][c] = none ? 0.0f : paged_decode__exp2(sc[r][c] - mn);
            l[c] = fmaf(l[c], alpha[c], p[0][c] + p[1][c]);
            m[c] = mn;
        }
        if (__any_sync(PAGED_DECODE__FULL, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                o[i][0] *= alpha[0];
                o[i][1] *= alpha[1];
                o[i][2] *= alpha[0];
                o[i][3] *= alpha[1];
            }
        }
        /* P^T's B fragments: rows r = 0, 1 (positions g + 8r, heads 2t, 2t + 1) transposed. */
        const uint32_t pb0 = kl__movmatrix_trans(paged_decode__pack2<F16>(p[0][0], p[0][1]));
        const uint32_t pb1 = kl__movmatrix_trans(paged_decode__pack2<F16>(p[1][0], p[1][1]));
        /* bf16: p = hi + lo, both bf16, as paged_decode__mma_step. */
        uint32_t pl0 = 0u, pl1 = 0u;
        if constexpr (!F16) {
            const uint32_t h0 = paged_decode__pack2<false>(p[0][0], p[0][1]);
            const uint32_t h1 = paged_decode__pack2<false>(p[1][0], p[1][1]);
            const float2 f0 = paged_decode__bf16x2_float2(h0), f1 = paged_decode__bf16x2_float2(h1);
            pl0 = kl__movmatrix_trans(paged_decode__pack2<false>(p[0][0] - f0.x, p[0][1] - f0.y));
            pl1 = kl__movmatrix_trans(paged_decode__pack2<false>(p[1][0] - f1.x, p[1][1] - f1.y));
        }
        paged_decode__mma_pv<FP8>(o, x, pb0, pb1, pl0, pl1);
    }
};

/* A warp's state after its last tile, into the block's merge scratch as
 * paged_decode__mma_leave leaves it: head h's (m, l) (l summed over the 8
 * lanes of its t here) and O^T's accumulators at dims vdim(g, .) of heads
 * 2t, 2t + 1. Every lane takes part. */
template <int NH, class Dims>
static __device__ __forceinline__ void paged_decode__mma_pos_leave(paged_decode__gqa_smem<NH, 128> &sm,
                                                                   uint32_t warp, uint32_t g, uint32_t t,
                                                                   const float (&m)[2], float (&l)[2],
                                                                   const float (&o)[8][4]) {
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int o4 = 4; o4 < 32; o4 <<= 1) l[c] += __shfl_xor_sync(PAGED_DECODE__FULL, l[c], o4);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const uint32_t h = 2u * t + (uint32_t)c;
        if (h < (uint32_t)NH && g == 0u) {
            sm.m[warp][h] = m[c];
            sm.l[warp][h] = l[c];
        }
    }
    paged_decode__mma_leave_acc<NH, Dims>(sm, warp, g, t, o);
}

#endif /* KLAUNCH_KERNELS_PAGED_DECODE_MMA_POS_CUH */
