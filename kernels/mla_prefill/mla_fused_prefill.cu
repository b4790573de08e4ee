/* Reference: tests/mla_prefill/mla_reference.h (fused_prefill, float64)
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

/* mla_fused_prefill: MLA prefill for one (head, query token) per block
 * (kernel contract, kernel 5).
 *
 *   q_abs[c]      = sum_d q_full[t, h*hd + d] * w_uk[h, d, c]             d < nope, c < kv_lora
 *   score(s)      = (q_abs . kv_latent[s] + q_rope[t, h] . k_rope[s]) * inv_sqrt_d,  s <= t
 *   o_lat         = sum_s softmax(score)[s] * kv_latent[s]
 *   v_out[t,h,e]  = sum_c o_lat[c] * w_uv[h, e, c]                         e < v_dim
 *
 * and, from the blocks of head 0, token t's cache rows as
 * mla_cache_assemble_batched writes them: k_cache_out[t] = [kv_latent[t] |
 * k_rope[t]], v_cache_out[t] = [kv_latent[t] | zeros] (MLA_V_HAS_ROPE 0) or
 * [kv_latent[t] | k_rope[t]] (MLA_V_HAS_ROPE 1); rows kv_lora + rope wide.
 *
 * Geometry (the seed's): grid (nq, seq_len), block 256.
 *   1. q_abs: 64 threads per 8-column chunk of w_uk's rows x 4 groups of d
 *      (16-byte loads), summed through shared memory.
 *   2. Attention: warp w takes keys w, w+8, ... <= t, MLA_FUSED_KB at a time;
 *      lane L holds the 8-column chunks L and L+32 of the latent row (so
 *      kv_lora <= MLA_FUSED_MAX_LORA, a launcher precondition) and the rope
 *      chunk L. Online softmax per warp in the base-2 domain; the 8 warps'
 *      states are merged through shared memory into o_lat.
 *   3. v_out: warp w takes rows e = w, w+8, ... of w_uv[h].
 * fp32 throughout, each output rounded to bf16 once.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "../common/kl_ptx.cuh"

/* Largest kv_lora: two 8-column chunks per lane. specs/mla_prefill.yaml has
 * the matching precondition. */
#define MLA_FUSED_MAX_LORA 512
#define MLA_FUSED_KB 8 /* keys a warp scores between two softmax updates */

static_assert(MLA_FUSED_MAX_LORA % 256 == 0, "whole 8-column chunks per lane");

__device__ __forceinline__ float mla_fused_prefill__bf16(unsigned short h) {
    return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ float mla_fused_prefill__exp2(float x) {
    return kl__ex2_approx_ftz(x);
}

/* Elements c0 .. c0+7 of a bf16 row of `len` elements as fp32, zeros past
 * the end. `vec`: the row is 16-byte aligned and c0 is a multiple of 8. */
__device__ __forceinline__ void mla_fused_prefill__load8(const unsigned short *row, uint32_t c0, uint32_t len,
                                                         bool vec, float (&f)[8]) {
    if (vec && c0 + 8u <= len) {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(row + c0));
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            f[2 * e] = __uint_as_float(w[e] << 16);
            f[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) f[e] = c0 + (uint32_t)e < len ? mla_fused_prefill__bf16(row[c0 + e]) : 0.0f;
    }
}

__device__ __forceinline__ bool mla_fused_prefill__aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0u;
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_fused_prefill)
mla_fused_prefill(KL_PARAMS_mla_fused_prefill) {
    constexpr int LC = MLA_FUSED_MAX_LORA / 256; /* latent chunks per lane */
    constexpr int KB = MLA_FUSED_KB;
    __shared__ float s_lat[MLA_FUSED_MAX_LORA];     /* q_abs, then o_lat */
    __shared__ float s_red[8][MLA_FUSED_MAX_LORA];  /* q_abs partials, then the warps' o */
    __shared__ float s_m[8], s_l[8];
    (void)num_kv_heads; /* 1 by precondition: every head attends over the one latent head */

    /* The launcher refuses these; a raw launch must still not index out of bounds. */
    if (kv_lora > (uint32_t)MLA_FUSED_MAX_LORA || hd != nope + rope || blockIdx.y >= seq_len) return;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t h = blockIdx.x, t = blockIdx.y;
    const unsigned short *lat = reinterpret_cast<const unsigned short *>(kv_latent);
    const unsigned short *kr = reinterpret_cast<const unsigned short *>(k_rope);

    /* Cache rows of token t: pure copies, so bits are moved, never converted. */
    if (h == 0u) {
        const uint32_t cache_dim = kv_lora + rope;
        unsigned short *kc = reinterpret_cast<unsigned short *>(k_cache_out) + (size_t)t * cache_dim;
        unsigned short *vc = reinterpret_cast<unsigned short *>(v_cache_out) + (size_t)t * cache_dim;
        for (uint32_t c = tid; c < cache_dim; c += 256u) {
            const bool is_lat = c < kv_lora;
            const unsigned short kbits = is_lat ? lat[(size_t)t * kv_lora + c] : kr[(size_t)t * rope + (c - kv_lora)];
            kc[c] = kbits;
            vc[c] = (is_lat || MLA_V_HAS_ROPE) ? kbits : (unsigned short)0u;
        }
    }

    /* 1. q_abs = q_nope . w_uk[h] */
    const unsigned short *qn = reinterpret_cast<const unsigned short *>(q_full) + (size_t)t * nq * hd + (size_t)h * hd;
    const unsigned short *wk = reinterpret_cast<const unsigned short *>(w_uk) + (size_t)h * nope * kv_lora;
    const bool vec_w = (kv_lora & 7u) == 0u && mla_fused_prefill__aligned16(w_uk) && mla_fused_prefill__aligned16(w_uv);
    if (vec_w) {
        const uint32_t cc = tid & 63u, dg = tid >> 6; /* 8-column chunk, group of d */
        const uint32_t c0 = cc * 8u;
        if (c0 < kv_lora) {
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (uint32_t d = dg; d < nope; d += 4u) {
                const float qd = mla_fused_prefill__bf16(qn[d]);
                float f[8];
                mla_fused_prefill__load8(wk + (size_t)d * kv_lora, c0, kv_lora, true, f);
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[e] = fmaf(qd, f[e], acc[e]);
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) s_red[dg][c0 + e] = acc[e];
        }
        __syncthreads();
        for (uint32_t c = tid; c < kv_lora; c += 256u) s_lat[c] = (s_red[0][c] + s_red[1][c]) + (s_red[2][c] + s_red[3][c]);
    } else {
        for (uint32_t c = tid; c < kv_lora; c += 256u) {
            float acc = 0.0f;
            for (uint32_t d = 0; d < nope; ++d)
                acc = fmaf(mla_fused_prefill__bf16(qn[d]), mla_fused_prefill__bf16(wk[(size_t)d * kv_lora + c]), acc);
            s_lat[c] = acc;
        }
    }
    __syncthreads();

    /* 2. Attention over keys 0..t; scores in log2 units. */
    const float qscale = inv_sqrt_d * 1.4426950408889634f;
    const bool vec_lat = (kv_lora & 7u) == 0u && mla_fused_prefill__aligned16(kv_latent);
    const bool vec_rope = (rope & 7u) == 0u && mla_fused_prefill__aligned16(k_rope) && mla_fused_prefill__aligned16(q_rope);
    const unsigned short *qr_row = reinterpret_cast<const unsigned short *>(q_rope) + ((size_t)t * nq + h) * rope;
    const uint32_t rope_chunks = (rope + 7u) / 8u;

    float qa[LC][8], o[LC][8], qr[8];
#pragma unroll
    for (int j = 0; j < LC; ++j) {
        const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            qa[j][e] = c0 + (uint32_t)e < kv_lora ? s_lat[c0 + e] * qscale : 0.0f;
            o[j][e] = 0.0f;
        }
    }
    mla_fused_prefill__load8(qr_row, 8u * lane, rope, vec_rope, qr);
#pragma unroll
    for (int e = 0; e < 8; ++e) qr[e] *= qscale;

    const uint32_t count = t >= warp ? (t - warp) / 8u + 1u : 0u; /* this warp's keys */
    float m = -INFINITY, l = 0.0f;
    for (uint32_t i0 = 0; i0 < count; i0 += (uint32_t)KB) {
        float part[KB];
#pragma unroll
        for (int k = 0; k < KB; ++k) {
            float d = 0.0f;
            if (i0 + (uint32_t)k < count) {
                const size_t s = warp + 8u * (i0 + (uint32_t)k);
#pragma unroll
                for (int j = 0; j < LC; ++j) {
                    const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
                    if (c0 < kv_lora) {
                        float f[8];
                        mla_fused_prefill__load8(lat + s * kv_lora, c0, kv_lora, vec_lat, f);
#pragma unroll
                        for (int e = 0; e < 8; ++e) d = fmaf(qa[j][e], f[e], d);
                    }
                }
                for (uint32_t rc = lane; rc < rope_chunks; rc += 32u) {
                    float f[8], qx[8];
                    mla_fused_prefill__load8(kr + s * rope, 8u * rc, rope, vec_rope, f);
                    if (rc == lane) {
#pragma unroll
                        for (int e = 0; e < 8; ++e) qx[e] = qr[e];
                    } else { /* rope > 256: the lane's further chunks come from memory */
                        mla_fused_prefill__load8(qr_row, 8u * rc, rope, vec_rope, qx);
#pragma unroll
                        for (int e = 0; e < 8; ++e) qx[e] *= qscale;
                    }
#pragma unroll
                    for (int e = 0; e < 8; ++e) d = fmaf(qx[e], f[e], d);
                }
            }
            part[k] = d;
        }

        /* Transposed warp sum: 3 halving steps leave key (lane % 8) in lane,
         * 2 more steps add the 4 lane groups. */
        float w4[4], w2[2];
        {
            const bool up = (lane & 4u) != 0u;
#pragma unroll
            for (int x = 0; x < 4; ++x)
                w4[x] = (up ? part[x + 4] : part[x]) + __shfl_xor_sync(0xffffffffu, up ? part[x] : part[x + 4], 4);
        }
        {
            const bool up = (lane & 2u) != 0u;
#pragma unroll
            for (int x = 0; x < 2; ++x)
                w2[x] = (up ? w4[x + 2] : w4[x]) + __shfl_xor_sync(0xffffffffu, up ? w4[x] : w4[x + 2], 2);
        }
        const bool up1 = (lane & 1u) != 0u;
        float sc = (up1 ? w2[1] : w2[0]) + __shfl_xor_sync(0xffffffffu, up1 ? w2[0] : w2[1], 1);
        sc += __shfl_xor_sync(0xffffffffu, sc, 8);
        sc += __shfl_xor_sync(0xffffffffu, sc, 16);
        const uint32_t kj = lane & (uint32_t)(KB - 1);
        sc = i0 + kj < count ? sc : -INFINITY;

        float mx = sc;
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m, mx); /* finite: key i0 is always valid */
        const float alpha = mla_fused_prefill__exp2(m - m_new);
        const float p = mla_fused_prefill__exp2(sc - m_new);
        l = l * alpha + (lane < (uint32_t)KB ? p : 0.0f); /* lanes 8..31 repeat lanes 0..7 */
        m = m_new;
#pragma unroll
        for (int j = 0; j < LC; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) o[j][e] *= alpha;

#pragma unroll
        for (int k = 0; k < KB; ++k) {
            if (i0 + (uint32_t)k < count) {
                const float pk = __shfl_sync(0xffffffffu, p, k);
                const size_t s = warp + 8u * (i0 + (uint32_t)k);
#pragma unroll
                for (int j = 0; j < LC; ++j) {
                    const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
                    if (c0 < kv_lora) {
                        float f[8];
                        mla_fused_prefill__load8(lat + s * kv_lora, c0, kv_lora, vec_lat, f);
#pragma unroll
                        for (int e = 0; e < 8; ++e) o[j][e] = fmaf(pk, f[e], o[j][e]);
                    }
                }
            }
        }
    }

    /* Merge the 8 warps' softmax states. A warp without keys has m = -inf,
     * l = 0 and o = 0; warp 0 always has key 0, so the maximum is finite. */
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    if (lane == 0u) {
        s_m[warp] = m;
        s_l[warp] = l;
    }
#pragma unroll
    for (int j = 0; j < LC; ++j) {
        const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (c0 + (uint32_t)e < kv_lora) s_red[warp][c0 + e] = o[j][e];
    }
    __syncthreads();
    float mmax = s_m[0];
#pragma unroll
    for (int w = 1; w < 8; ++w) mmax = fmaxf(mmax, s_m[w]);
    float wt[8], lsum = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
        wt[w] = mla_fused_prefill__exp2(s_m[w] - mmax);
        lsum = fmaf(wt[w], s_l[w], lsum);
    }
    const float inv_l = 1.0f / lsum;
    for (uint32_t c = tid; c < kv_lora; c += 256u) {
        float acc = 0.0f;
#pragma unroll
        for (int w = 0; w < 8; ++w) acc = fmaf(wt[w], s_red[w][c], acc);
        s_lat[c] = acc * inv_l;
    }
    __syncthreads();

    /* 3. v_out[t, h, e] = o_lat . w_uv[h, e] */
    float ol[LC][8];
#pragma unroll
    for (int j = 0; j < LC; ++j) {
        const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
#pragma unroll
        for (int e = 0; e < 8; ++e) ol[j][e] = c0 + (uint32_t)e < kv_lora ? s_lat[c0 + e] : 0.0f;
    }
    const unsigned short *wv = reinterpret_cast<const unsigned short *>(w_uv) + (size_t)h * v_dim * kv_lora;
    __nv_bfloat16 *vo = v_out + ((size_t)t * nq + h) * v_dim;
    for (uint32_t e = warp; e < v_dim; e += 8u) {
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < LC; ++j) {
            const uint32_t c0 = 8u * (lane + 32u * (uint32_t)j);
            if (c0 < kv_lora) {
                float f[8];
                mla_fused_prefill__load8(wv + (size_t)e * kv_lora, c0, kv_lora, vec_w, f);
#pragma unroll
                for (int x = 0; x < 8; ++x) acc = fmaf(ol[j][x], f[x], acc);
            }
        }
#pragma unroll
        for (int off = 16; off >= 1; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0u) vo[e] = __float2bfloat16_rn(acc);
    }
}
