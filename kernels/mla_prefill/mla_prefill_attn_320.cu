/* Reference: tests/mla_prefill/mla_reference.h (attention, float64)
 * Tests:
 *   tests/mla_prefill/mla_compute_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_attention_test.cc (GPU)
 *   tests/mla_prefill/mla_prefill_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_compute_emulated_test \
 *     //tests/mla_prefill:mla_attention_test \
 *     //tests/mla_prefill:mla_prefill_launch_test
 */
#include "klaunch/mla_prefill.cuh"

/* mla_prefill_attn_320: absorbed MLA prefill attention (kernel contract, kernel 8).
 *
 *   q      [batch, seq_len, num_q_heads,  D]
 *   k, v   [batch, seq_len, num_kv_heads, D]
 *   output [batch, seq_len, num_q_heads,  D]      D = MLA_HDIM (320 or 576)
 *
 * Query head h reads KV head h / (num_q_heads / num_kv_heads); scores are
 * q.k * inv_sqrt_d, masked to s <= t when `causal` is nonzero.
 *
 * Geometry (the seed's): grid (num_q_heads, ceil(seq_len / MLA_BR), batch),
 * block 256. A block owns MLA_BR = 16 query rows of one head; each of its 8
 * warps owns 2 rows, and lane L holds the bf16 pairs L, L+32, ... of each
 * row's D columns (D / 64 pairs), as fp32. K and V rows of the block's KV
 * head pass through shared memory in tiles of MLA_ATTN_TK keys, loaded with
 * 16-byte accesses by the whole block and read conflict-free as 4-byte words.
 * Softmax is online, in the base-2 domain (log2(e) is folded into q); the
 * output is rounded to bf16 once.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "../common/kl_ptx.cuh"

#define MLA_BR 16 /* query rows per block: the seed's grid divides seq_len by it */

/* Keys per shared-memory tile: K and V tiles together stay under 48 KiB of
 * static shared memory (40 KiB for D = 320, 36 KiB for D = 576). */
#if MLA_HDIM <= 320
#define MLA_ATTN_TK 32
#else
#define MLA_ATTN_TK 16
#endif

static_assert(MLA_HDIM % 64 == 0, "each lane holds MLA_HDIM / 64 bf16 pairs of a row");
static_assert(MLA_BR == 2 * 8, "8 warps of 2 query rows each cover the row tile");
static_assert((MLA_ATTN_TK & (MLA_ATTN_TK - 1)) == 0 && MLA_ATTN_TK <= 32, "a tile's scores fit one per lane");

/* The two bf16 of a little-endian 32-bit word as fp32 (bf16 is the top half of fp32). */
__device__ __forceinline__ float2 mla_prefill_attn_320__bf16x2(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__device__ __forceinline__ float mla_prefill_attn_320__bf16(unsigned short h) {
    return __uint_as_float((uint32_t)h << 16);
}

/* 2^x; 2^-inf = 0, which the masked scores rely on. */
__device__ __forceinline__ float mla_prefill_attn_320__exp2(float x) {
    return kl__ex2_approx_ftz(x);
}

/* Halving steps of the transposed warp sum below: lanes that differ in bit
 * N/2 swap the halves they do not keep. Template recursion, not a loop over
 * the step, so every index is a constant and v stays in registers. */
template <int N>
__device__ __forceinline__ float mla_prefill_attn_320__xsum_halve(const float (&v)[N], uint32_t lane) {
    if constexpr (N == 1) {
        return v[0];
    } else {
        constexpr int half = N / 2;
        const bool up = (lane & (uint32_t)half) != 0u;
        float w[half];
#pragma unroll
        for (int i = 0; i < half; ++i) {
            const float send = up ? v[i] : v[i + half];
            const float keep = up ? v[i + half] : v[i];
            w[i] = keep + __shfl_xor_sync(0xffffffffu, send, half);
        }
        return mla_prefill_attn_320__xsum_halve<half>(w, lane);
    }
}

/* Transposed warp sum of N per-lane values (N a power of two, <= 32):
 * lane L returns the sum over all 32 lanes of v[L % N], in
 * N - 1 + log2(32 / N) shuffles instead of 5 N. */
template <int N>
__device__ __forceinline__ float mla_prefill_attn_320__xsum(const float (&v)[N]) {
    float r = mla_prefill_attn_320__xsum_halve<N>(v, threadIdx.x & 31u);
#pragma unroll
    for (int off = N; off < 32; off *= 2) r += __shfl_xor_sync(0xffffffffu, r, off);
    return r;
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_prefill_attn_320)
mla_prefill_attn_320(KL_PARAMS_mla_prefill_attn_320) {
    constexpr int D = MLA_HDIM;
    constexpr int NP = D / 64;        /* bf16 pairs of a row per lane */
    constexpr int ROW_WORDS = D / 2;  /* 32-bit words per row */
    constexpr int ROW_CHUNKS = D / 8; /* 16-byte chunks per row */
    constexpr int TK = MLA_ATTN_TK;

    __shared__ __align__(16) uint32_t s_k[TK * ROW_WORDS];
    __shared__ __align__(16) uint32_t s_v[TK * ROW_WORDS];

    /* The launcher refuses these; a raw launch must still not read out of bounds. */
    if (head_dim != (uint32_t)D || num_kv_heads == 0u || num_q_heads % num_kv_heads != 0u) return;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t h = blockIdx.x, b = blockIdx.z, row0 = blockIdx.y * MLA_BR;
    const uint32_t kvh = h / (num_q_heads / num_kv_heads);
    const size_t q_row = (size_t)num_q_heads * D;   /* elements between tokens of q and output */
    const size_t kv_row = (size_t)num_kv_heads * D; /* ... of k and v */
    const unsigned short *kb =
        reinterpret_cast<const unsigned short *>(k) + (size_t)b * seq_len * kv_row + (size_t)kvh * D;
    const unsigned short *vb =
        reinterpret_cast<const unsigned short *>(v) + (size_t)b * seq_len * kv_row + (size_t)kvh * D;
    /* Rows are D * 2 bytes apart, a multiple of 16: the base decides alignment. */
    const bool vec = (((uintptr_t)k | (uintptr_t)v) & 15u) == 0u;

    const float qscale = inv_sqrt_d * 1.4426950408889634f; /* scores in log2 units */
    uint32_t r[2];
    bool valid[2];
    float qf[2][2 * NP], o[2][2 * NP], m[2], l[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        r[rr] = row0 + warp * 2u + (uint32_t)rr;
        valid[rr] = r[rr] < seq_len;
        const unsigned short *qrow = reinterpret_cast<const unsigned short *>(q) +
                                     ((size_t)b * seq_len + r[rr]) * q_row + (size_t)h * D;
#pragma unroll
        for (int i = 0; i < NP; ++i) {
            const uint32_t p = lane + 32u * (uint32_t)i;
            qf[rr][2 * i] = valid[rr] ? mla_prefill_attn_320__bf16(qrow[2 * p]) * qscale : 0.0f;
            qf[rr][2 * i + 1] = valid[rr] ? mla_prefill_attn_320__bf16(qrow[2 * p + 1]) * qscale : 0.0f;
            o[rr][2 * i] = 0.0f;
            o[rr][2 * i + 1] = 0.0f;
        }
        m[rr] = -INFINITY;
        l[rr] = 0.0f; /* per lane: the lane's own keys; summed over the warp at the end */
    }

    const uint32_t kv_end = causal ? min(seq_len, row0 + (uint32_t)MLA_BR) : seq_len;
    for (uint32_t s0 = 0; s0 < kv_end; s0 += (uint32_t)TK) {
        const uint32_t n = min((uint32_t)TK, kv_end - s0);
        __syncthreads(); /* the previous tile is consumed */
        for (uint32_t idx = tid; idx < (uint32_t)(TK * ROW_CHUNKS); idx += 256u) {
            const uint32_t j = idx / ROW_CHUNKS, c = idx % ROW_CHUNKS;
            uint4 kk = make_uint4(0u, 0u, 0u, 0u), vv = kk; /* rows past the tile's keys stay zero */
            if (j < n) {
                const size_t off = (size_t)(s0 + j) * kv_row + (size_t)c * 8u;
                if (vec) {
                    kk = __ldg(reinterpret_cast<const uint4 *>(kb + off));
                    vv = __ldg(reinterpret_cast<const uint4 *>(vb + off));
                } else {
                    uint32_t kw[4], vw[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        kw[e] = (uint32_t)kb[off + 2 * e] | ((uint32_t)kb[off + 2 * e + 1] << 16);
                        vw[e] = (uint32_t)vb[off + 2 * e] | ((uint32_t)vb[off + 2 * e + 1] << 16);
                    }
                    kk = make_uint4(kw[0], kw[1], kw[2], kw[3]);
                    vv = make_uint4(vw[0], vw[1], vw[2], vw[3]);
                }
            }
            reinterpret_cast<uint4 *>(s_k)[idx] = kk;
            reinterpret_cast<uint4 *>(s_v)[idx] = vv;
        }
        __syncthreads();

        /* Scores: partial dots of both rows with every key of the tile, then
         * one transposed reduction leaves key (lane % TK)'s score in lane. */
        float part[2][TK];
#pragma unroll
        for (int j = 0; j < TK; ++j) {
            float d0 = 0.0f, d1 = 0.0f;
#pragma unroll
            for (int i = 0; i < NP; ++i) {
                const float2 f = mla_prefill_attn_320__bf16x2(s_k[j * ROW_WORDS + (int)lane + 32 * i]);
                d0 = fmaf(qf[0][2 * i], f.x, fmaf(qf[0][2 * i + 1], f.y, d0));
                d1 = fmaf(qf[1][2 * i], f.x, fmaf(qf[1][2 * i + 1], f.y, d1));
            }
            part[0][j] = d0;
            part[1][j] = d1;
        }
        const uint32_t kj = lane & (uint32_t)(TK - 1);
        float pr[2];
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            float sc = mla_prefill_attn_320__xsum<TK>(part[rr]);
            const bool ok = kj < n && (!causal || s0 + kj <= r[rr]);
            sc = ok ? sc : -INFINITY;
            float mx = sc;
#pragma unroll
            for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m[rr], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* no key yet: keep exp2 finite */
            const float alpha = mla_prefill_attn_320__exp2(m[rr] - m_use);
            const float p = mla_prefill_attn_320__exp2(sc - m_use);
            /* With TK < 32 lanes TK..31 repeat lanes 0..TK-1: count each key once. */
            l[rr] = l[rr] * alpha + (lane < (uint32_t)TK ? p : 0.0f);
#pragma unroll
            for (int i = 0; i < 2 * NP; ++i) o[rr][i] *= alpha;
            m[rr] = m_new;
            pr[rr] = p;
        }

        for (uint32_t j = 0; j < n; ++j) {
            const float p0 = __shfl_sync(0xffffffffu, pr[0], (int)j);
            const float p1 = __shfl_sync(0xffffffffu, pr[1], (int)j);
#pragma unroll
            for (int i = 0; i < NP; ++i) {
                const float2 f = mla_prefill_attn_320__bf16x2(s_v[j * ROW_WORDS + lane + 32u * (uint32_t)i]);
                o[0][2 * i] = fmaf(p0, f.x, o[0][2 * i]);
                o[0][2 * i + 1] = fmaf(p0, f.y, o[0][2 * i + 1]);
                o[1][2 * i] = fmaf(p1, f.x, o[1][2 * i]);
                o[1][2 * i + 1] = fmaf(p1, f.y, o[1][2 * i + 1]);
            }
        }
    }

#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        float lsum = l[rr];
#pragma unroll
        for (int off = 16; off >= 1; off /= 2) lsum += __shfl_xor_sync(0xffffffffu, lsum, off);
        if (!valid[rr]) continue;
        const float inv = 1.0f / lsum;
        __nv_bfloat16 *orow = output + ((size_t)b * seq_len + r[rr]) * q_row + (size_t)h * D;
#pragma unroll
        for (int i = 0; i < NP; ++i) {
            const uint32_t p = lane + 32u * (uint32_t)i;
            orow[2 * p] = __float2bfloat16_rn(o[rr][2 * i] * inv);
            orow[2 * p + 1] = __float2bfloat16_rn(o[rr][2 * i + 1] * inv);
        }
    }
}
