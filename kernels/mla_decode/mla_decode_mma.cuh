/* mla_decode_mma.cuh - the core of mla_decode_attn_bf16_mma and
 * mla_decode_attn_fp8_mma (the portable launchers: sm_80 PTX only,
 * cp.async, ldmatrix, mma.sync m16n8k16 bf16 with fp32 accumulators), one
 * template over the cache's element type.
 *
 * A block takes 16 query rows (row0 = 16 blockIdx.x of a sequence's
 * R = s_q * h_q) of every piece of part blockIdx.y (mla_decode_common.cuh).
 * Per piece: Q's 16 rows into shared memory once, then the piece's key
 * tiles in steps of 32 keys, double-buffered by cp.async (the fp8 kernel
 * double-buffers the raw tokens and dequantises each step into one bf16
 * buffer). 4 warps; per 32-key step, warp w
 *   - S: keys 8w .. 8w + 7 of the step against the 16 rows, all D columns
 *     (D / 16 mma k-steps, Q and K fragments by ldmatrix);
 *   - the step's row maxima across the 4 warps through shared memory, the
 *     weights rounded to bf16 into P (16 x 32);
 *   - O: output columns w DV / 4 .. + DV / 4 of the 16 rows, P (A) times
 *     V = the same key rows' first DV columns (B, ldmatrix.trans).
 * Keys a row may not see (past its visible length, or on a page outside
 * [0, num_blocks)) weigh 0, and their cache rows are zeros in shared memory
 * (zero-filled copies, never read), so no NaN of an unwritten row reaches
 * O. Row sums add the weights as rounded, so the output is normalised
 * exactly as applied; fp32 throughout, one rounding of the output.
 *
 * Shared memory (rows of Q and K are D * 2 bytes, the 16-byte chunks of
 * each 128 bytes XOR-swizzled by row % 8, so every ldmatrix hits 8 bank
 * groups): Q 16 rows; bf16: 2 key buffers of 32 rows; fp8: 1 bf16 buffer
 * and 2 raw buffers of 32 tokens; P 16 x (32 + 8) bf16; per-warp row
 * maxima and sums. That is the spec's shared_bytes
 * (160 D + 1792, or 96 D + 64 MLA_FP8_TOKEN_BYTES + 1792): under the 99 KiB
 * of sm_86, sm_89 and sm_120 at both widths.
 */
#ifndef KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_MMA_CUH
#define KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>

#include "mla_decode_common.cuh"

namespace mla_decode_mma_ {

constexpr uint32_t D = MLA_HDIM;
constexpr uint32_t DV = MLA_HDIM - 64; /* kv_lora */
constexpr uint32_t TB = MLA_FP8_TOKEN_BYTES;
constexpr uint32_t BM = 16, BN = 32, THREADS = 128;
constexpr uint32_t ROWB = D * 2;        /* bytes of a Q or bf16 key row */
constexpr uint32_t CH = D / 8;          /* its 16-byte chunks */
constexpr uint32_t KS = D / 16;         /* k-steps of S */
constexpr uint32_t WN = DV / 4;         /* output columns a warp */
constexpr uint32_t NTO = WN / 8;        /* n8 tiles of a warp's output */
constexpr uint32_t PP = (BN + 8) * 2;   /* bytes of a P row: +16, so 8 rows hit 8 bank groups */
constexpr uint32_t KBUF = BN * ROWB;
constexpr uint32_t RAWBUF = BN * TB;
constexpr uint32_t RAW_CH = TB / 16;    /* 16-byte chunks of an fp8 token */
constexpr uint32_t ROPE_OFF = (DV + DV / 32u + 15u) & ~15u; /* kl_mla_decode_fp8_rope_offset */

static_assert(D % 64 == 0 && DV % 128 == 0, "rows are whole 128-byte swizzle groups; a warp's columns whole n16 pairs");
static_assert(KS % 2 == 0, "K fragments come two k-steps a load");
static_assert(TB % 16 == 0 && ROPE_OFF + 128u == TB, "an fp8 token: latent, scales, padding to 16 bytes, rope");
static_assert(THREADS == KL_THREADS_mla_decode_attn_bf16_mma && THREADS == KL_THREADS_mla_decode_attn_fp8_mma,
              "4 warps");

template <bool FP8>
struct layout {
    static constexpr uint32_t OFF_Q = 0;
    static constexpr uint32_t OFF_K = OFF_Q + BM * ROWB;                       /* bf16 key buffers */
    static constexpr uint32_t OFF_RAW = OFF_K + (FP8 ? 1u : 2u) * KBUF;        /* fp8: raw token buffers */
    static constexpr uint32_t OFF_P = OFF_RAW + (FP8 ? 2u * RAWBUF : 0u);
    static constexpr uint32_t OFF_MAX = OFF_P + BM * PP;                      /* float [4 warps][16 rows] */
    static constexpr uint32_t OFF_SUM = OFF_MAX + 4u * BM * 4u;               /* float [4 warps][16 rows] */
    static constexpr uint32_t SMEM = OFF_SUM + 4u * BM * 4u;
};
static_assert(layout<false>::SMEM <= KL_SHARED_BYTES_mla_decode_attn_bf16_mma, "the spec's shared_bytes (bf16)");
static_assert(layout<true>::SMEM <= KL_SHARED_BYTES_mla_decode_attn_fp8_mma, "the spec's shared_bytes (fp8)");

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes from any address (the slow path of unaligned buffers). */
__device__ __forceinline__ uint4 load16_bytes(const uint8_t *src) {
    uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (uint32_t e = 0; e < 16u; ++e) w[e >> 2] |= (uint32_t)src[e] << (8u * (e & 3u));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* 16 bytes global -> shared: cp.async when aligned, zeros when !valid. */
__device__ __forceinline__ void copy16(uint32_t dst, const uint8_t *src, bool valid, bool vec) {
    if (!valid)
        kl__st_shared_v4(dst, make_uint4(0u, 0u, 0u, 0u));
    else if (vec)
        kl__cp_async_cg16(dst, src);
    else
        kl__st_shared_v4(dst, load16_bytes(src));
}

/* Row key of a step: its cache row's address, or null for a key that weighs 0. */
__device__ __forceinline__ const uint8_t *key_row(const uint8_t *cache, const int32_t *table_row, uint32_t key,
                                                  uint32_t len, uint32_t page_size, uint32_t num_blocks,
                                                  uint32_t row_bytes) {
    if (key >= len) return nullptr;
    const int32_t page = table_row[key / page_size];
    if (page < 0 || (uint32_t)page >= num_blocks) return nullptr;
    return cache + ((uint64_t)(uint32_t)page * page_size + key % page_size) * row_bytes;
}

/* Two E4M3 (byte 0 low) as f16x2, exact (E4M3 is a subset of f16): CUDA's
 * intrinsic is cvt.rn.f16x2.e4m3x2 on sm_89 and later, bit arithmetic before. */
__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t x) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
    return (uint32_t)r.x | ((uint32_t)r.y << 16);
}
/* The same of bits 16-31 (on sm_89+ read in place: kl__cvt_f16x2_e4m3x2_hi). */
__device__ __forceinline__ uint32_t e4m3x2_f16x2_hi(uint32_t x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return kl__cvt_f16x2_e4m3x2_hi(x);
#else
    return e4m3x2_f16x2(x >> 16);
#endif
}

/* Dequantises 8 E4M3 (two words) times `scale` into 8 bf16 (four words). */
__device__ __forceinline__ void dequant8(uint32_t lo, uint32_t hi, float scale, uint32_t (&out)[4]) {
    const uint32_t w[2] = {lo, hi};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t h01 = e4m3x2_f16x2(w[i]), h23 = e4m3x2_f16x2_hi(w[i]);
        const __half2 a = *reinterpret_cast<const __half2 *>(&h01), b = *reinterpret_cast<const __half2 *>(&h23);
        const float2 fa = __half22float2(a), fb = __half22float2(b);
        const __nv_bfloat162 ra = __floats2bfloat162_rn(fa.x * scale, fa.y * scale);
        const __nv_bfloat162 rb = __floats2bfloat162_rn(fb.x * scale, fb.y * scale);
        out[2 * i] = *reinterpret_cast<const uint32_t *>(&ra);
        out[2 * i + 1] = *reinterpret_cast<const uint32_t *>(&rb);
    }
}

template <bool FP8>
__device__ __forceinline__ void attention(const __nv_bfloat16 *q, const uint8_t *cache, const int32_t *block_table,
                                          const int32_t *lengths, const int32_t *sched, __nv_bfloat16 *out,
                                          float *lse, float *workspace, uint32_t batch, uint32_t s_q, uint32_t h_q,
                                          uint32_t head_dim, uint32_t page_size, uint32_t max_blocks_per_seq,
                                          uint32_t num_blocks, float softmax_scale, unsigned char *smem) {
    using L = layout<FP8>;
    const uint32_t rows = s_q * h_q, num_parts = gridDim.y;
    /* The launcher refuses these; a raw launch must still not touch memory it does not own. */
    if (head_dim != D || blockDim.x != THREADS || kl__dynamic_smem_size() < L::SMEM || page_size == 0u) return;
    if (!mla_decode__sched_ok(sched, batch, num_parts)) {
        if (blockIdx.y == 0u) mla_decode__poison_all(out, lse, batch, rows, DV);
        return;
    }
    const uint32_t row0 = blockIdx.x * BM;
    if (row0 >= rows) return;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t g = lane >> 2, tq = lane & 3u, x7 = lane & 7u;
    const uint32_t sbase = smem_addr(smem);
    const uint32_t row_bytes = FP8 ? TB : ROWB;
    const bool vec_q = ((uintptr_t)q & 15u) == 0u, vec_c = ((uintptr_t)cache & 15u) == 0u;
    const uint64_t max_len = (uint64_t)max_blocks_per_seq * page_size;
    const float scale_log2 = softmax_scale * 1.4426950408889634f;

    /* ldmatrix lanes: A (Q, P) rows and chunk halves; K's 8 keys of this warp; V's 16-key rows. */
    const uint32_t a_row = x7 + ((lane >> 3) & 1u) * 8u, a_half = lane >> 4;
    const uint32_t k_row = warp * 8u + x7, k_quarter = lane >> 3;
    const uint32_t v_row = x7 + ((lane >> 3) & 1u) * 8u, v_half = lane >> 4;
    /* This thread's share of a step's loads: key row tid / 4, chunks tid % 4, + 4, ... */
    const uint32_t ld_key = tid >> 2, ld_c0 = tid & 3u;

    const mla_decode__part pt = mla_decode__load_part(sched, blockIdx.y);
    mla_decode__piece pc;
    for (uint32_t b = pt.bs; mla_decode__piece_at(pt, b, sched, lengths, batch, num_parts, max_len, pc); ++b) {
        const int32_t *table_row = block_table + (uint64_t)b * max_blocks_per_seq;
        const uint32_t k_begin = pc.t0 * MLA_DECODE__TILE;
        const uint32_t k_end = min(pc.t1 * MLA_DECODE__TILE, pc.len);
        const uint32_t nsteps = k_end > k_begin ? (k_end - k_begin + BN - 1u) / BN : 0u;

        /* Q: rows past R are zeros. */
        {
            const __nv_bfloat16 *qs = q + ((uint64_t)b * rows + row0) * D;
            for (uint32_t i = tid; i < BM * CH; i += THREADS) {
                const uint32_t r = i / CH, c = i % CH;
                copy16(sbase + L::OFF_Q + r * ROWB + ((c ^ (r & 7u)) << 4),
                       reinterpret_cast<const uint8_t *>(qs + (uint64_t)r * D + c * 8u), row0 + r < rows, vec_q);
            }
        }
        /* A step's cache rows (raw tokens for fp8) into buffer `buf`; returns
         * which of this warp's 8 keys (8 warp .. + 7 of the step, loaded by
         * its own lanes) weigh: bit i for key 8 warp + i. */
        auto load_step = [&](uint32_t step, uint32_t buf) -> uint32_t {
            const uint32_t key = k_begin + step * BN + ld_key;
            const uint8_t *src = key < k_end ? key_row(cache, table_row, key, pc.len, page_size, num_blocks, row_bytes)
                                             : nullptr;
            if (FP8) {
                const uint32_t dst = sbase + L::OFF_RAW + buf * RAWBUF + ld_key * TB;
                for (uint32_t c = ld_c0; c < RAW_CH; c += 4u)
                    copy16(dst + c * 16u, src != nullptr ? src + c * 16u : src, src != nullptr, vec_c);
            } else {
                const uint32_t dst = sbase + L::OFF_K + buf * KBUF + ld_key * ROWB;
                for (uint32_t c = ld_c0; c < CH; c += 4u)
                    copy16(dst + ((c ^ (ld_key & 7u)) << 4), src != nullptr ? src + c * 16u : src, src != nullptr,
                           vec_c);
            }
            const uint32_t valid = __ballot_sync(0xffffffffu, src != nullptr); /* lanes 4i .. 4i + 3: key 8 warp + i */
            uint32_t bits = 0u;
#pragma unroll
            for (uint32_t i = 0; i < 8u; ++i) bits |= ((valid >> (4u * i)) & 1u) << i;
            return bits;
        };

        float o[NTO][4];
#pragma unroll
        for (uint32_t n = 0; n < NTO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
        float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
        /* visible positions of this lane's two rows */
        const uint32_t vis0 = mla_decode__visible(pc.len, row0 + g, h_q, s_q);
        const uint32_t vis1 = mla_decode__visible(pc.len, row0 + g + 8u, h_q, s_q);

        __syncthreads(); /* the last piece's readers of every buffer are done */
        uint32_t mask_next = nsteps > 0u ? load_step(0u, 0u) : 0u;
        kl__cp_async_commit();

        for (uint32_t j = 0; j < nsteps; ++j) {
            const uint32_t buf = j & 1u;
            const uint32_t kb = k_begin + j * BN;
            kl__cp_async_wait<0>();
            __syncthreads(); /* step j (and Q) landed everywhere; step j - 1's buffers are free */
            const uint32_t mask = mask_next; /* this warp's keys of step j */
            if (j + 1u < nsteps) mask_next = load_step(j + 1u, buf ^ 1u);
            kl__cp_async_commit();
            const uint32_t kbuf = sbase + L::OFF_K + (FP8 ? 0u : buf * KBUF);
            if (FP8) {
                /* raw step j -> bf16 key rows: thread tid / 4's row, 8-element groups tid % 4, + 4, ... */
                const uint32_t raw = sbase + L::OFF_RAW + buf * RAWBUF + ld_key * TB;
                const uint32_t dst = kbuf + ld_key * ROWB;
                const bool valid = (mask >> (ld_key & 7u)) & 1u; /* key ld_key is this warp's */
                /* Chunks ld_c0 + 4k: latent for k < DV / 32 (scale k / 4), rope after. All loads
                 * first (each shared-memory access is an ordered asm statement: a load and its
                 * use a chunk at a time would serialise them), then conversions and stores. */
                constexpr uint32_t NK = CH / 4u, NKL = DV / 32u;
                static_assert(CH % 4u == 0u && DV % 32u == 0u, "whole chunks a thread");
                uint32_t lat[NKL][2];
                uint4 rope[NK - NKL];
                float sc[NKL / 4u];
                if (valid) {
#pragma unroll
                    for (uint32_t k = 0; k < NKL; ++k) {
                        const uint32_t c = ld_c0 + 4u * k;
                        lat[k][0] = kl__ld_shared_u32(raw + c * 8u);
                        lat[k][1] = kl__ld_shared_u32(raw + c * 8u + 4u);
                    }
#pragma unroll
                    for (uint32_t k = NKL; k < NK; ++k) rope[k - NKL] = kl__ld_shared_v4(raw + ROPE_OFF + (ld_c0 + 4u * k - DV / 8u) * 16u);
#pragma unroll
                    for (uint32_t i = 0; i < NKL / 4u; ++i) sc[i] = kl__ld_shared_f32(raw + DV + 4u * i);
                }
#pragma unroll
                for (uint32_t k = 0; k < NK; ++k) {
                    const uint32_t c = ld_c0 + 4u * k;
                    uint4 v = make_uint4(0u, 0u, 0u, 0u);
                    if (valid) {
                        if (k < NKL) {
                            uint32_t r[4];
                            dequant8(lat[k][0], lat[k][1], sc[k / 4u], r);
                            v = make_uint4(r[0], r[1], r[2], r[3]);
                        } else {
                            v = rope[k - NKL];
                        }
                    }
                    kl__st_shared_v4(dst + ((c ^ (ld_key & 7u)) << 4), v);
                }
                __syncthreads(); /* the bf16 rows are written */
            }

            /* ---- S = Q K^T: 16 rows x this warp's 8 keys ---- */
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const uint32_t q_addr = sbase + L::OFF_Q + a_row * ROWB;
            const uint32_t k_addr = kbuf + k_row * ROWB;
#pragma unroll 6
            for (uint32_t ks = 0; ks < KS; ks += 2u) {
                uint32_t bk[4];
                kl__ldmatrix_x4(bk, k_addr + (((2u * ks + k_quarter) ^ x7) << 4));
#pragma unroll
                for (uint32_t e = 0; e < 2u; ++e) {
                    uint32_t a[4];
                    kl__ldmatrix_x4(a, q_addr + (((2u * (ks + e) + a_half) ^ x7) << 4));
                    kl__mma_m16n8k16_bf16(s, a, bk[2 * e], bk[2 * e + 1]);
                }
            }

            /* ---- mask, the step's row maxima over the 4 warps ---- */
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (uint32_t e = 0; e < 4u; ++e) {
                const uint32_t kk = 2u * tq + (e & 1u), key = kb + warp * 8u + kk;
                const bool ok = ((mask >> kk) & 1u) && key < ((e >> 1) ? vis1 : vis0);
                s[e] = ok ? s[e] * scale_log2 : -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], s[e]);
            }
#pragma unroll
            for (uint32_t r = 0; r < 2u; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            }
            if (tq == 0u) {
                kl__st_shared_f32(sbase + L::OFF_MAX + (warp * BM + g) * 4u, mx[0]);
                kl__st_shared_f32(sbase + L::OFF_MAX + (warp * BM + g + 8u) * 4u, mx[1]);
            }
            __syncthreads();
            float alpha[2], m_use[2];
#pragma unroll
            for (uint32_t r = 0; r < 2u; ++r) {
                float m = m_run[r];
#pragma unroll
                for (uint32_t w = 0; w < 4u; ++w) m = fmaxf(m, kl__ld_shared_f32(sbase + L::OFF_MAX + (w * BM + g + 8u * r) * 4u));
                m_use[r] = m == -INFINITY ? 0.0f : m; /* no visible key yet: keep exp2 finite */
                alpha[r] = kl__ex2_approx_ftz(m_run[r] - m_use[r]);
                m_run[r] = m;
            }
            const __nv_bfloat162 p0 = __floats2bfloat162_rn(kl__ex2_approx_ftz(s[0] - m_use[0]),
                                                            kl__ex2_approx_ftz(s[1] - m_use[0]));
            const __nv_bfloat162 p1 = __floats2bfloat162_rn(kl__ex2_approx_ftz(s[2] - m_use[1]),
                                                            kl__ex2_approx_ftz(s[3] - m_use[1]));
            l_run[0] = l_run[0] * alpha[0] + __low2float(p0) + __high2float(p0);
            l_run[1] = l_run[1] * alpha[1] + __low2float(p1) + __high2float(p1);
            const uint32_t pcol = (warp * 8u + 2u * tq) * 2u;
            kl__st_shared_u32(sbase + L::OFF_P + g * PP + pcol, *reinterpret_cast<const uint32_t *>(&p0));
            kl__st_shared_u32(sbase + L::OFF_P + (g + 8u) * PP + pcol, *reinterpret_cast<const uint32_t *>(&p1));
#pragma unroll
            for (uint32_t n = 0; n < NTO; ++n) {
                o[n][0] *= alpha[0];
                o[n][1] *= alpha[0];
                o[n][2] *= alpha[1];
                o[n][3] *= alpha[1];
            }
            __syncthreads(); /* P is whole */

            /* ---- O += P V over the step's 32 keys: this warp's WN columns ---- */
#pragma unroll
            for (uint32_t kk = 0; kk < BN / 16u; ++kk) {
                uint32_t a[4];
                kl__ldmatrix_x4(a, sbase + L::OFF_P + a_row * PP + (16u * kk + 8u * a_half) * 2u);
                const uint32_t vrow = kbuf + (16u * kk + v_row) * ROWB;
#pragma unroll
                for (uint32_t np = 0; np < NTO / 2u; ++np) {
                    const uint32_t chunk = warp * (WN / 8u) + 2u * np + v_half;
                    uint32_t bv[4];
                    kl__ldmatrix_x4_trans(bv, vrow + ((chunk ^ x7) << 4));
                    kl__mma_m16n8k16_bf16(o[2 * np], a, bv[0], bv[1]);
                    kl__mma_m16n8k16_bf16(o[2 * np + 1], a, bv[2], bv[3]);
                }
            }
        }
        kl__cp_async_wait<0>();

        /* ---- the rows' sums over the quad and the 4 warps ---- */
#pragma unroll
        for (uint32_t r = 0; r < 2u; ++r) {
            l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
            l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
        }
        if (tq == 0u) {
            kl__st_shared_f32(sbase + L::OFF_SUM + (warp * BM + g) * 4u, l_run[0]);
            kl__st_shared_f32(sbase + L::OFF_SUM + (warp * BM + g + 8u) * 4u, l_run[1]);
        }
        __syncthreads();
        float l[2] = {0.0f, 0.0f};
#pragma unroll
        for (uint32_t r = 0; r < 2u; ++r)
#pragma unroll
            for (uint32_t w = 0; w < 4u; ++w) l[r] += kl__ld_shared_f32(sbase + L::OFF_SUM + (w * BM + g + 8u * r) * 4u);

        /* ---- out and lse (or the split's slot) ---- */
#pragma unroll
        for (uint32_t r = 0; r < 2u; ++r) {
            const uint32_t row = row0 + g + 8u * r;
            if (row >= rows) continue;
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            const float row_lse = mla_decode__lse(m_run[r], l[r]);
            const uint32_t c0 = warp * WN + 2u * tq;
            if (pc.split) {
                float *ws = mla_decode__ws_o(workspace, pc.slot, rows, DV, row) + c0;
#pragma unroll
                for (uint32_t n = 0; n < NTO; ++n) {
                    ws[8u * n] = o[n][2 * r] * inv;
                    ws[8u * n + 1u] = o[n][2 * r + 1] * inv;
                }
                if (warp == 0u && tq == 0u) *mla_decode__ws_lse(workspace, num_parts, pc.slot, rows, DV, row) = row_lse;
            } else {
                unsigned short *orow = reinterpret_cast<unsigned short *>(out + ((uint64_t)b * rows + row) * DV + c0);
#pragma unroll
                for (uint32_t n = 0; n < NTO; ++n) {
                    orow[8u * n] = mla_decode__bf16_bits(o[n][2 * r] * inv);
                    orow[8u * n + 1u] = mla_decode__bf16_bits(o[n][2 * r + 1] * inv);
                }
                if (warp == 0u && tq == 0u) lse[(uint64_t)b * rows + row] = row_lse;
            }
        }
    }
}

}  // namespace mla_decode_mma_

#endif /* KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_MMA_CUH */
