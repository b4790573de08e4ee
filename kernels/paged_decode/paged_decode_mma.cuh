/* paged_decode_mma.cuh - the tensor-core core of the GQA-packed decode
 * launchers *_gqa_mma (specs/paged_decode.yaml): the same function as
 * paged_decode__gqa_core (paged_decode_common.cuh), computed with
 * mma.sync.m16n8k16 (bf16 caches: bf16 operands; fp8 caches: f16 operands,
 * the E4M3 values converted two at a time with cvt.rn.f16x2.e4m3x2).
 * Tests: tests/paged_decode/ (GPU: paged_decode_mma_test; CPU emulator:
 * the *emulated* tests once tests/emu/ runs this family).
 *
 * WHY (counted from SASS, bench/decode/sass_count.py; H200 copy 4.3 TB/s /
 * 132 SMs / 1.98 GHz = 16.5 cache bytes per cycle per SM, against at most
 * 128 thread instructions issued per cycle: 7.8 instructions per byte is
 * the most a kernel can issue and keep up with memory):
 *   paged_decode_attn_fp8_gqa  (scalar core, 4 heads): 10.5 per byte
 *   paged_decode_attn_bf16_gqa (scalar core, 4 heads):  5.2 per byte
 * The scalar core spends 2 FFMA per head and element (q.k and p.v): with 4
 * heads that is 4 per fp8 byte before any conversion. Here one warp does
 * 16 positions x 128 dims x (up to 8 heads) in 24 HMMA, and the per-byte
 * work left is loads, conversions (fp8: 1 per 2 bytes) and byte permutes.
 * The loops' counts (2026-12-01, nvcc 13.0, the sm_90 cubin of gqa4_d128;
 * code behind a forward branch counted as if it ran, so upper bounds):
 *   bf16: 780 instructions for 2 tiles, 512 cache bytes a thread, 64 HMMA:
 *     1.52 a byte with both load arms counted;
 *   fp8: 1349 for 3 tiles, 384 bytes, 72 HMMA, 192 packed cvt: 3.51 a byte;
 * both well inside the budget, so memory (bytes in flight, load balance) is
 * what is left to limit them. Registers 255 (bf16) / 221 (fp8), no spills.
 *
 * LAYOUT (one warp, lane = 4 g + t, g = lane / 4 in 0..7, t = lane % 4)
 * A warp takes tiles of 16 positions [p0, p0 + 16), p0 a multiple of 16
 * (positions outside the range are masked); the block's 8 warps take tiles
 * p0 / 16 = w, w + 8, ... of the range, each with its own online softmax,
 * merged through shared memory at the end as in paged_decode__gqa_core.
 *
 *   S = Q K^T, m16n8k16 with M = query heads (rows >= NH are zero), N = 8
 *   positions (two n-tiles: p0 + n and p0 + 8 + n), K = head dims in 8
 *   steps. The head dim is permuted (a dot product does not care, as long
 *   as Q and K agree): in k-step j the fragment's dims 2t, 2t+1 are
 *   physical dims 32t + 4j + {0, 1} and 2t+8, 2t+9 are 32t + 4j + {2, 3}.
 *   So lane (g, t) needs, of the K row of position p0 + g (and p0 + 8 + g),
 *   the 32 contiguous dims [32t, 32t + 32): two 16-byte loads (fp8) or
 *   four (bf16), and Q[g][32t .. 32t + 32) (kept in registers).
 *   S's accumulator gives lane (g, t) head g at positions p0 + 2t, 2t + 1
 *   (n-tile 0) and p0 + 8 + 2t, 9 + 2t (n-tile 1).
 *
 *   O^T += V^T P^T, m16n8k16 with M = head dims (8 m-tiles), N = query
 *   heads (columns >= NH are zero), K = the 16 positions. P^T's B fragment
 *   (positions 2t, 2t+1 and 2t+8, 2t+9, head g) is exactly what S's
 *   accumulator left in lane (g, t): no shuffle. Rows of m-tile i are
 *   physical dims 16g + 2i (row g) and 16g + 2i + 1 (row g + 8), so lane
 *   (g, t) needs V[p0 + {2t, 2t+1, 2t+8, 2t+9}][16g .. 16g + 16): one
 *   16-byte load each (fp8) or two (bf16); the A fragment pairs two
 *   positions at one dim, which a byte permute (prmt) makes from the two
 *   loaded rows. O^T's accumulator holds heads 2t, 2t+1 at dims 16g..16g+15.
 *
 * Every K and V byte is loaded once, by one lane, with 16-byte loads on the
 * fast path. Softmax: scores in base 2 (s * inv_sqrt_d * log2 e in fp32
 * after the fp32 accumulation), a running max per head (the 4 lanes of a
 * head agree through 2 shuffles a tile), sums kept per lane and added at
 * the end, O rescaled only when some max grew (a vote).
 *
 * NUMERICS (docs: the spec's doc text). fp32 accumulation everywhere; two
 * roundings the scalar core does not make: P = 2^(s - m) in [0, 1] is
 * rounded before P.V, to f16 for fp8 caches (relative error <= 2^-11), and
 * for bf16 caches to a sum of two bf16 values (hi + lo, two MMAs: <=
 * 2^-16; one bf16 alone, 2^-8, showed in outputs near zero of long
 * sequences on the emulator); l sums the unrounded fp32 P. For fp8 caches Q is scaled by a power of two chosen from the
 * group's largest |q| (so max |q| lands in [2^14, 2^15)) and rounded to
 * f16, which keeps all of a bf16 value's bits unless it is below 2^-24 of
 * that maximum; the power of two is taken out of the fp32 scores again.
 * E4M3 -> f16 and bf16 operands are exact. The output is rounded to bf16
 * once, by the Out policy (paged_decode_common.cuh).
 *
 * PATHS. Fast: block_size % 16 == 0 (a tile lies in one cache block: one
 * block-table read per tile, prefetched one tile ahead of the loads that
 * use it), 16-byte aligned rows and 16 rows < 2^31 bytes (num_kv_heads <
 * 2^20 / ES). General: any block_size and alignment:
 * a table read per position and element-wide loads; slower, same results.
 *
 * Needs sm_80 (mma.sync bf16/f16). Before sm_89 there is no fp8 cvt; the
 * E4M3 bits are placed into an f16 instead (value / 256, exact:
 * PAGED_DECODE__SOFT_FP8 in paged_decode_common.cuh).
 */
#ifndef KLAUNCH_KERNELS_PAGED_DECODE_MMA_CUH
#define KLAUNCH_KERNELS_PAGED_DECODE_MMA_CUH

#include "paged_decode_common.cuh"

/* ---- the instructions (kl_ptx.cuh: one wrapper each, emulated by tests/emu) -- */

/* d += a . b, m16n8k16, row.col, fp32 accumulators; F16 selects f16 inputs, else bf16. */
template <bool F16>
static __device__ __forceinline__ void paged_decode__mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    const uint32_t a[4] = {a0, a1, a2, a3};
    if constexpr (F16)
        kl__mma_m16n8k16_f16(d, a, b0, b1);
    else
        kl__mma_m16n8k16_bf16(d, a, b0, b1);
}

/* The two E4M3 values in bits 0-15 of x as f16x2 (byte 0 in the low half),
 * in units of 1 / PAGED_DECODE__FP8_UNIT: cvt.rn.f16x2.e4m3x2 (CUDA's
 * intrinsic is that one instruction on sm_89+), or before sm_89 the bits
 * placed into an f16 (value / 256, exact: paged_decode_common.cuh). */
static __device__ __forceinline__ uint32_t paged_decode__e4m3x2_f16x2(uint32_t x) {
#if !PAGED_DECODE__SOFT_FP8
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
    return (uint32_t)r.x | ((uint32_t)r.y << 16);
#else
    const uint32_t t = __byte_perm(x, 0u, 0x7170); /* [b0, 0, b1, 0] */
    return ((t & 0x007f007fu) << 7) | ((t & 0x00800080u) << 8);
#endif
}

/* The same of bits 16-31 of x: on sm_89+ ptxas reads the register's upper
 * half in place (no shift: kl__cvt_f16x2_e4m3x2_hi). */
static __device__ __forceinline__ uint32_t paged_decode__e4m3x2_f16x2_hi(uint32_t x) {
#if !PAGED_DECODE__SOFT_FP8
    return kl__cvt_f16x2_e4m3x2_hi(x);
#else
    return paged_decode__e4m3x2_f16x2(x >> 16);
#endif
}

/* Two floats as a packed pair of the MMA's input type (round to nearest
 * even), lo in bits 0-15. */
template <bool F16> static __device__ __forceinline__ uint32_t paged_decode__pack2(float lo, float hi) {
    if constexpr (F16) {
        const __half2_raw r = __half2_raw(__floats2half2_rn(lo, hi));
        return (uint32_t)r.x | ((uint32_t)r.y << 16);
    } else {
        const __nv_bfloat162_raw r = __nv_bfloat162_raw(__floats2bfloat162_rn(lo, hi));
        return (uint32_t)r.x | ((uint32_t)r.y << 16);
    }
}

/* Both halves of a bf16x2 as floats (exact), low half in .x. */
static __device__ __forceinline__ float2 paged_decode__bf16x2_float2(uint32_t h) {
    return make_float2(__uint_as_float(h << 16), __uint_as_float(h & 0xffff0000u));
}


/* ---- loads ------------------------------------------------------------------ */

/* NW words from p: 16-byte loads when VEC (p 16-byte aligned), else loads
 * of ES bytes (the element size: any element-aligned p). Zeros when !valid. */
template <int NW, int ES, bool VEC>
static __device__ __forceinline__ void paged_decode__load_words(uint32_t (&w)[NW], const unsigned char *p,
                                                                bool valid) {
    static_assert(NW % 4 == 0, "whole 16-byte chunks");
    if (!valid) {
#pragma unroll
        for (int i = 0; i < NW; ++i) w[i] = 0u;
        return;
    }
    if constexpr (VEC) {
#pragma unroll
        for (int c = 0; c < NW / 4; ++c) {
            const uint4 t = __ldg(reinterpret_cast<const uint4 *>(p) + c);
            w[4 * c] = t.x;
            w[4 * c + 1] = t.y;
            w[4 * c + 2] = t.z;
            w[4 * c + 3] = t.w;
        }
    } else if constexpr (ES == 2) {
        const unsigned short *h = reinterpret_cast<const unsigned short *>(p);
#pragma unroll
        for (int i = 0; i < NW; ++i) w[i] = (uint32_t)__ldg(h + 2 * i) | ((uint32_t)__ldg(h + 2 * i + 1) << 16);
    } else {
#pragma unroll
        for (int i = 0; i < NW; ++i)
            w[i] = (uint32_t)__ldg(p + 4 * i) | ((uint32_t)__ldg(p + 4 * i + 1) << 8) |
                   ((uint32_t)__ldg(p + 4 * i + 2) << 16) | ((uint32_t)__ldg(p + 4 * i + 3) << 24);
    }
}

/* One tile's raw cache words of a lane: K of positions p0 + g, p0 + 8 + g
 * (dims 32t .. 32t + 31), V of positions p0 + 2t, 2t + 1, 2t + 8, 2t + 9
 * (dims 16g .. 16g + 15), as loaded. */
template <bool FP8> struct paged_decode__mma_tile {
    static constexpr int KW = FP8 ? 8 : 16; /* words of 32 dims */
    static constexpr int VW = FP8 ? 4 : 8;  /* words of 16 dims */
    uint32_t k[2][KW];
    uint32_t v[4][VW];
};

/* ---- the fragment layout, as pieces both cores share ------------------------ */

/* Which physical head dims a lane's fragment elements are. The products do
 * not care, as long as Q and K agree (kdim) and the output goes back where
 * V's dims came from (vdim): lane (g, t) holds K dims kdim(t, 0 .. 31) of
 * its two rows (k-step j: elements 4j, 4j + 1 are the fragment's dims 2t,
 * 2t + 1; 4j + 2, 4j + 3 are 2t + 8, 2t + 9) and V dims vdim(g, 0 .. 15) of
 * its four rows (m-tile i: element 2i is row g, 2i + 1 row g + 8), each
 * split as a lane's base plus an element's offset (kbase(t) + koff(i),
 * vbase(g) + voff(i)). The
 * register-load core takes contiguous runs (one lane's dims are one span of
 * global memory, read with 16-byte loads): */
struct paged_decode__mma_dims_linear {
    /* kdim(t, i) = kbase(t) + koff(i), vdim(g, i) = vbase(g) + voff(i) */
    static __device__ __forceinline__ constexpr uint32_t kbase(uint32_t t) { return 32u * t; }
    static __device__ __forceinline__ constexpr uint32_t koff(uint32_t i) { return i; }
    static __device__ __forceinline__ constexpr uint32_t vbase(uint32_t g) { return 16u * g; }
    static __device__ __forceinline__ constexpr uint32_t voff(uint32_t i) { return i; }
};

/* Whether a lane's 32 Q dims under Dims are 4 runs of 8 consecutive dims,
 * each starting at a multiple of 8 (both dims layouts here), so that a
 * 16-byte aligned Q row is read as 4 16-byte loads a lane. */
template <class Dims> static __device__ __forceinline__ constexpr bool paged_decode__q_runs_of_8() {
    for (uint32_t t = 0; t < 4u; ++t)
        if (Dims::kbase(t) % 8u != 0u) return false;
    for (uint32_t i = 0; i < 32u; ++i)
        if (Dims::koff(i) != Dims::koff(i & ~7u) + (i & 7u) || Dims::koff(i & ~7u) % 8u != 0u) return false;
    return true;
}

/* Q's A fragments for lane (g, t): qa[j][0] = Q[g][kdim(t, 4j + {0,1})],
 * qa[j][1] = Q[g][kdim(t, 4j + {2,3})] (rows g + 8 are zero, passed as 0).
 * F16 (fp8 caches): Q scaled by a power of two that puts the group's max |q|
 * in [2^14, 2^15) and rounded to f16; the power of two is taken out of
 * score_scale again (exact). Every lane of the warp takes part (a shuffle). */
template <bool F16, int NH, class Dims>
static __device__ __forceinline__ void paged_decode__mma_q(uint32_t (&qa)[8][2], const __nv_bfloat16 *__restrict__ q_grp,
                                                           uint32_t g, uint32_t t, bool head_lane, float &score_scale) {
    constexpr int HD = 128;
    const unsigned short *qb = reinterpret_cast<const unsigned short *>(q_grp) + g * HD + Dims::kbase(t);
    float qf[32];
    /* Q's rows 16-byte aligned (q and q_stride: warp-uniform): 4 vector
     * loads a lane; else 32 scalar ones. The scalar reads made the H200's
     * profile count 15 excess L2 sectors of 16 a consumer thread a piece
     * (~6% on top of the cache's own L2 traffic at 32 x 4096 bf16). */
    constexpr bool RUNS = paged_decode__q_runs_of_8<Dims>();
    if (RUNS && (reinterpret_cast<uintptr_t>(q_grp) & 15u) == 0u) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            uint4 w = make_uint4(0u, 0u, 0u, 0u);
            if (head_lane) w = *reinterpret_cast<const uint4 *>(qb + Dims::koff(8u * (uint32_t)r));
            const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                qf[8 * r + 2 * k] = paged_decode__bf16_bits(ws[k] & 0xffffu);
                qf[8 * r + 2 * k + 1] = paged_decode__bf16_bits(ws[k] >> 16);
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) qf[i] = head_lane ? paged_decode__bf16_bits(qb[Dims::koff((uint32_t)i)]) : 0.0f;
    }
    if constexpr (F16) {
        /* A power of two that puts the group's max |q| in [2^14, 2^15). */
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(qf[i]));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(PAGED_DECODE__FULL, amax, o));
        int e = (int)((__float_as_uint(amax) >> 23) & 0xffu); /* biased exponent */
        e = e < 14 ? 14 : (e > 254 ? 254 : e);                /* zero, tiny, inf/NaN: stay finite */
        const float qs = __uint_as_float((uint32_t)(268 - e) << 23); /* 2^(141 - e) = 2^14 / 2^(e - 127) */
#pragma unroll
        for (int i = 0; i < 32; ++i) qf[i] *= qs;
        score_scale /= qs; /* exact: a power of two */
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        qa[j][0] = paged_decode__pack2<F16>(qf[4 * j], qf[4 * j + 1]);
        qa[j][1] = paged_decode__pack2<F16>(qf[4 * j + 2], qf[4 * j + 3]);
    }
}

/* O^T += V^T P^T over 8 m-tiles of 16 dims, P^T's B fragments pb0, pb1
 * (positions 2t, 2t + 1 and 2t + 8, 2t + 9 of head g; bf16: the hi parts,
 * pl0, pl1 the lo parts) and the tile's V words (x.v). */
template <bool FP8>
static __device__ __forceinline__ void paged_decode__mma_pv(float (&o)[8][4], const paged_decode__mma_tile<FP8> &x,
                                                            uint32_t pb0, uint32_t pb1, uint32_t pl0, uint32_t pl1) {
    constexpr bool F16 = FP8;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        uint32_t a0, a1, a2, a3;
        if constexpr (FP8) {
            const uint32_t sel = (i & 1) ? 0x7362u : 0x5140u; /* bytes 2,3 or 0,1 of both rows */
            const uint32_t lo = __byte_perm(x.v[0][i >> 1], x.v[1][i >> 1], sel);
            const uint32_t hi = __byte_perm(x.v[2][i >> 1], x.v[3][i >> 1], sel);
            a0 = paged_decode__e4m3x2_f16x2(lo);
            a1 = paged_decode__e4m3x2_f16x2_hi(lo);
            a2 = paged_decode__e4m3x2_f16x2(hi);
            a3 = paged_decode__e4m3x2_f16x2_hi(hi);
        } else {
            a0 = __byte_perm(x.v[0][i], x.v[1][i], 0x5410u);
            a1 = __byte_perm(x.v[0][i], x.v[1][i], 0x7632u);
            a2 = __byte_perm(x.v[2][i], x.v[3][i], 0x5410u);
            a3 = __byte_perm(x.v[2][i], x.v[3][i], 0x7632u);
        }
        paged_decode__mma<F16>(o[i], a0, a1, a2, a3, pb0, pb1);
        if constexpr (!F16) paged_decode__mma<false>(o[i], a0, a1, a2, a3, pl0, pl1);
    }
}

/* One tile of 16 positions [p0, p0 + 16) of a warp, its raw words in x (as
 * paged_decode__mma_tile lays them out: masked positions' V words zero):
 * S = Q K^T, the online softmax of head g over the positions in [begin,
 * end), O^T += V^T P^T. m, l: head g's running max and this lane's share of
 * its sum; o: O^T's accumulators. Every lane of the warp takes part. A
 * closure over the warp's state (what a lambda of the core would capture:
 * ptxas allocates the _mma cores' registers the same as for their own
 * lambda, which a function with these parameters did not). */
template <bool FP8, int NH> struct paged_decode__mma_step {
    const uint32_t (&qa)[8][2];
    float (&o)[8][4];
    float &m, &l;
    const float &score_scale;
    const bool &head_lane;
    const uint32_t &t, &begin, &end;
    __device__ __forceinline__ void operator()(const paged_decode__mma_tile<FP8> &x, uint32_t tile) const {
    constexpr bool F16 = FP8; /* MMA input type: f16 for fp8 caches, bf16 for bf16 */
    const uint32_t p0 = tile * 16u;
    /* S: two n-tiles of 8 positions. */
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            uint32_t b0, b1;
            if constexpr (FP8) {
                b0 = paged_decode__e4m3x2_f16x2(x.k[n][j]);
                b1 = paged_decode__e4m3x2_f16x2_hi(x.k[n][j]);
            } else {
                b0 = x.k[n][2 * j];
                b1 = x.k[n][2 * j + 1];
            }
            paged_decode__mma<F16>(s[n], qa[j][0], 0u, qa[j][1], 0u, b0, b1);
        }
    }
    /* Head g's scores at positions p0 + 8n + 2t + c (c = 0, 1). */
    float sc[2][2];
    float mx = -INFINITY;
    const bool interior = p0 >= begin && p0 + 16u <= end;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const uint32_t pos = p0 + 8u * (uint32_t)n + 2u * t + (uint32_t)c;
            const bool val = head_lane && (interior || (pos >= begin && pos < end));
            sc[n][c] = val ? s[n][c] * score_scale : -INFINITY;
            mx = fmaxf(mx, sc[n][c]);
        }
    mx = fmaxf(mx, __shfl_xor_sync(PAGED_DECODE__FULL, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(PAGED_DECODE__FULL, mx, 2));
    const float mn = fmaxf(m, mx);
    const bool none = mn == -INFINITY; /* nothing seen yet for this head */
    const float alpha = none ? 1.0f : paged_decode__exp2(m - mn);
    float p[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) p[n][c] = none ? 0.0f : paged_decode__exp2(sc[n][c] - mn);
    l = fmaf(l, alpha, (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]));
    m = mn;
    /* O's columns are heads 2t and 2t + 1: their alphas live in lanes 8t and 8t + 4. */
    if (__any_sync(PAGED_DECODE__FULL, alpha != 1.0f)) {
        const float a0 = __shfl_sync(PAGED_DECODE__FULL, alpha, 8u * t);
        const float a1 = __shfl_sync(PAGED_DECODE__FULL, alpha, 8u * t + 4u);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            o[i][0] *= a0;
            o[i][1] *= a1;
            o[i][2] *= a0;
            o[i][3] *= a1;
        }
    }
    const uint32_t pb0 = paged_decode__pack2<F16>(p[0][0], p[0][1]);
    const uint32_t pb1 = paged_decode__pack2<F16>(p[1][0], p[1][1]);
    /* bf16 keeps 8 bits of p: its rounding error would show in outputs
     * near zero. So p = hi + lo, both bf16 (16 bits together), and P.V
     * is two MMAs. f16's 11 bits are enough for fp8's 4-bit values. */
    uint32_t pl0 = 0u, pl1 = 0u;
    if constexpr (!F16) {
        const float2 h0 = paged_decode__bf16x2_float2(pb0), h1 = paged_decode__bf16x2_float2(pb1);
        pl0 = paged_decode__pack2<false>(p[0][0] - h0.x, p[0][1] - h0.y);
        pl1 = paged_decode__pack2<false>(p[1][0] - h1.x, p[1][1] - h1.y);
    }
    paged_decode__mma_pv<FP8>(o, x, pb0, pb1, pl0, pl1);
    }
};

/* O^T's accumulators of lane (g, t) into the merge scratch: dims vdim(g, .)
 * of heads 2t, 2t + 1 (those < NH). */
template <int NH, class Dims>
static __device__ __forceinline__ void paged_decode__mma_leave_acc(paged_decode__gqa_smem<NH, 128> &sm, uint32_t warp,
                                                                   uint32_t g, uint32_t t, const float (&o)[8][4]) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const uint32_t h = 2u * t + (uint32_t)c;
        if (h < (uint32_t)NH) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                sm.acc[warp][h][Dims::vbase(g) + Dims::voff(2u * (uint32_t)i)] = o[i][c];
                sm.acc[warp][h][Dims::vbase(g) + Dims::voff(2u * (uint32_t)i + 1u)] = o[i][2 + c];
            }
        }
    }
}

/* A warp's state after its last tile, into the block's merge scratch:
 * head g's (m, l) (l summed over its 4 lanes here) and O^T's accumulators
 * at dims vdim(g, .) of heads 2t, 2t + 1. Every lane takes part. */
template <int NH, class Dims>
static __device__ __forceinline__ void paged_decode__mma_leave(paged_decode__gqa_smem<NH, 128> &sm, uint32_t warp,
                                                               uint32_t g, uint32_t t, bool head_lane, float m,
                                                               float l, const float (&o)[8][4]) {
    l += __shfl_xor_sync(PAGED_DECODE__FULL, l, 1);
    l += __shfl_xor_sync(PAGED_DECODE__FULL, l, 2);
    if (head_lane && t == 0u) {
        sm.m[warp][g] = m;
        sm.l[warp][g] = l;
    }
    paged_decode__mma_leave_acc<NH, Dims>(sm, warp, g, t, o);
}

/* ---- the core ---------------------------------------------------------------- */

/* One (KV head, sequence or split) with its NH query heads, head dim 128,
 * positions [begin, end); NBUF tiles' loads in flight per warp (one being
 * computed, NBUF - 1 arriving). PAGE16: block_size % 16 == 0 and rows
 * 16-byte aligned (the fast path). q_grp: the group's first query head
 * (bf16, NH rows of 128). k_head / v_head: the cache's element kv_head * 128
 * (byte pointers); block_stride, row_stride in elements. score_scale:
 * inv_sqrt_d * log2 e (times k_scale * FP8_UNIT for fp8). Results go to
 * out.put per head and dim, as from paged_decode__gqa_core. */
template <bool FP8, int NH, int NBUF, bool PAGE16, class Out>
static __device__ __forceinline__ void paged_decode__mma_core(
    paged_decode__gqa_smem<NH, 128> &sm, const __nv_bfloat16 *__restrict__ q_grp,
    const unsigned char *__restrict__ k_head, const unsigned char *__restrict__ v_head, const Out &out,
    const int32_t *__restrict__ table, uint32_t begin, uint32_t end, uint32_t block_size, uint64_t block_stride,
    uint64_t row_stride, float score_scale) {
    constexpr int HD = 128;
    constexpr int ES = FP8 ? 1 : 2;
    constexpr bool F16 = FP8; /* MMA input type: f16 for fp8 caches, bf16 for bf16 */
    using Tile = paged_decode__mma_tile<FP8>;
    static_assert(NH >= 1 && NH <= 8, "the MMA's N dimension holds at most 8 query heads");
    static_assert(NBUF >= 2 && NBUF <= 4, "2 to 4 tiles in flight per warp");

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const bool head_lane = g < (uint32_t)NH; /* lanes whose S row (head g) is real */

    /* Q's A fragments: qa[j][0] = dims 32t + 4j + {0,1}, qa[j][1] = + {2,3},
     * head g (rows g + 8 are zero, passed as 0). */
    uint32_t qa[8][2];
    paged_decode__mma_q<F16, NH, paged_decode__mma_dims_linear>(qa, q_grp, g, t, head_lane, score_scale);

    float o[8][4]; /* O^T: m-tile i, (dim 16g + 2i | + 1) x (head 2t | 2t + 1) */
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* head g's running max and this lane's share of its sum */

    /* Tiles of the range: p0 = 16 * (tfirst + warp + 8 k). */
    const uint32_t tfirst = begin / 16u;
    const uint32_t tend = begin < end ? (end - 1u) / 16u + 1u : tfirst;
    uint32_t tnext = tfirst + warp; /* the next tile to load */
    const uint32_t kslot = g, vslot = 2u * t; /* positions' offsets in the tile: K g, g+8; V 2t, 2t+1, 2t+8, 2t+9 */
    const uint64_t kcol = 32u * t * ES, vcol = 16u * g * ES;

    /* Fast path: a tile lies in one cache block, so a lane's 6 rows are at
     * fixed offsets from the tile's first row: koffl / voffl (bytes, with
     * the lane's dims), and one table entry per tile, read by a walker one
     * tile (of this warp: 8 tiles, 128 positions) ahead of the loads. */
    uint32_t koffl[2], voffl[4]; /* < 16 rows: 32 bits (the fast path's condition) */
#pragma unroll
    for (int u = 0; u < 2; ++u) koffl[u] = (uint32_t)((kslot + 8u * (uint32_t)u) * row_stride * ES + kcol);
#pragma unroll
    for (int u = 0; u < 4; ++u)
        voffl[u] = (uint32_t)((vslot + (uint32_t)(u & 1) + 8u * (uint32_t)(u >> 1)) * row_stride * ES + vcol);
    uint32_t wpage = 0, wslot = 0, step_q = 0, step_r = 0; /* the walker: page and slot of tile tnext */
    int32_t wblock = 0;                                     /* table entry of tile tnext (0 past the range) */
    if constexpr (PAGE16) {
        wpage = (tnext * 16u) / block_size;
        wslot = tnext * 16u - wpage * block_size;
        step_q = 128u / block_size;
        step_r = 128u - step_q * block_size;
        wblock = tnext < tend ? __ldg(table + wpage) : 0;
    }

    /* Issues a tile's loads (zeros for masked positions: a NaN in a masked
     * V row would reach the accumulators through 0 * NaN). `tile` is
     * tnext: tiles are loaded in order. */
    auto load = [&](Tile &x, uint32_t tile) {
        const uint32_t p0 = tile * 16u;
        const bool live = tile < tend;
        if constexpr (PAGE16) {
            const uint64_t base = ((uint64_t)(int64_t)wblock * block_stride + (uint64_t)wslot * row_stride) * ES;
            const unsigned char *kt = k_head + base, *vt = v_head + base;
            /* Walk on to this warp's next tile and read its entry now: its
             * latency passes while this tile is in flight. */
            wpage += step_q;
            wslot += step_r;
            if (wslot >= block_size) {
                wslot -= block_size;
                wpage += 1u;
            }
            wblock = tile + 8u < tend ? __ldg(table + wpage) : 0;
            /* Interior tiles (warp-uniform) skip the per-position checks. */
            if (live && p0 >= begin && p0 + 16u <= end) {
#pragma unroll
                for (int u = 0; u < 2; ++u) paged_decode__load_words<Tile::KW, ES, true>(x.k[u], kt + koffl[u], true);
#pragma unroll
                for (int u = 0; u < 4; ++u) paged_decode__load_words<Tile::VW, ES, true>(x.v[u], vt + voffl[u], true);
            } else {
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    const uint32_t pos = p0 + kslot + 8u * (uint32_t)u;
                    paged_decode__load_words<Tile::KW, ES, true>(x.k[u], kt + koffl[u],
                                                                 live && pos >= begin && pos < end);
                }
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const uint32_t pos = p0 + vslot + (uint32_t)(u & 1) + 8u * (uint32_t)(u >> 1);
                    paged_decode__load_words<Tile::VW, ES, true>(x.v[u], vt + voffl[u],
                                                                 live && pos >= begin && pos < end);
                }
            }
        } else {
            /* General path: each position's own table entry and slot. */
            auto load_row = [&](auto &w, const unsigned char *head, uint32_t pos, uint64_t col) {
                const bool val = live && pos >= begin && pos < end;
                uint64_t off = 0;
                if (val) {
                    const uint32_t page = pos / block_size;
                    const int32_t blk = __ldg(table + page);
                    off = ((uint64_t)(int64_t)blk * block_stride + (uint64_t)(pos - page * block_size) * row_stride) *
                              ES +
                          col;
                }
                paged_decode__load_words<sizeof(w) / 4, ES, false>(w, head + off, val);
            };
#pragma unroll
            for (int u = 0; u < 2; ++u) load_row(x.k[u], k_head, p0 + kslot + 8u * (uint32_t)u, kcol);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                load_row(x.v[u], v_head, p0 + vslot + (uint32_t)(u & 1) + 8u * (uint32_t)(u >> 1), vcol);
        }
    };

    const paged_decode__mma_step<FP8, NH> compute{qa, o, m, l, score_scale, head_lane, t, begin, end};

    /* The pipeline: NBUF buffers in turn; before tile k is computed, the
     * loads of tiles k + 1 .. k + NBUF - 1 have been issued. The trip count
     * is warp-uniform (tiles are per warp), so every lane reaches every
     * shuffle and MMA. */
    Tile buf[NBUF];
#pragma unroll
    for (int b = 0; b < NBUF - 1; ++b) {
        load(buf[b], tnext);
        tnext += 8u;
    }
    uint32_t tcur = tfirst + warp;
    while (tcur < tend) {
#pragma unroll
        for (int b = 0; b < NBUF; ++b) {
            if (tcur >= tend) break;
            load(buf[(b + NBUF - 1) % NBUF], tnext);
            tnext += 8u;
            compute(buf[b], tcur);
            tcur += 8u;
        }
    }

    /* Head g's sum over its 4 lanes; then the block merge. */
    paged_decode__mma_leave<NH, paged_decode__mma_dims_linear>(sm, warp, g, t, head_lane, m, l, o);
    paged_decode__gqa_merge<NH, HD>(sm, out);
}

#define PAGED_DECODE__MMA_NBUF_BF16 2
#define PAGED_DECODE__MMA_NBUF_FP8 3

/* What every *_gqa_mma kernel does once it has its (begin, end): the
 * head's pointers, the path (fast when block_size % 16 == 0 and the rows
 * are 16-byte aligned: both cache pointers, and block_stride's bytes), and
 * the core. Tiles in flight per warp on the fast path: 2 for bf16 (8 KiB
 * each, 255 registers), 3 for fp8 (4 KiB each, 221 registers; 4, at 251,
 * measured 1.5% slower on the H200, 2026-12-01: 82.6 against 81.4 us at
 * 32 x 4096, ncu's long-scoreboard stalls 35.8% against 35.1%, so the
 * stall is not the pipeline's depth). */
template <bool FP8, int NH, class Out>
static __device__ __forceinline__ void paged_decode__mma_run(
    paged_decode__gqa_smem<NH, 128> &sm, const __nv_bfloat16 *q_grp, const void *k_cache,
    const void *v_cache, const Out &out, const int32_t *table, uint32_t begin, uint32_t end, uint32_t kvh,
    uint32_t num_kv_heads, uint32_t block_size, uint64_t block_stride, float score_scale) {
    constexpr int ES = FP8 ? 1 : 2;
    const uint64_t row_stride = (uint64_t)num_kv_heads * 128u;
    const unsigned char *k_head = reinterpret_cast<const unsigned char *>(k_cache) + (uint64_t)kvh * 128u * ES;
    const unsigned char *v_head = reinterpret_cast<const unsigned char *>(v_cache) + (uint64_t)kvh * 128u * ES;
    const bool fast = block_size % 16u == 0u && ((block_stride * ES) % 16u) == 0u &&
                      ((((uintptr_t)k_cache) | ((uintptr_t)v_cache)) & 15u) == 0u &&
                      row_stride * ES * 16u < (1ull << 31); /* the lane's row offsets fit 32 bits */
    constexpr int NBUF = FP8 ? PAGED_DECODE__MMA_NBUF_FP8 : PAGED_DECODE__MMA_NBUF_BF16;
    if (fast)
        paged_decode__mma_core<FP8, NH, NBUF, true>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                    block_stride, row_stride, score_scale);
    else
        paged_decode__mma_core<FP8, NH, 2, false>(sm, q_grp, k_head, v_head, out, table, begin, end, block_size,
                                                  block_stride, row_stride, score_scale);
}

#endif /* KLAUNCH_KERNELS_PAGED_DECODE_MMA_CUH */
