/* Reference: tests/mla_prefill/mla_fast_reference.h (absorbed_attention, float64)
 * Tests:
 *   tests/mla_prefill/mla_mma_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_fast_test.cc (GPU)
 *   tests/mla_prefill/mla_fast_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_mma_emulated_test \
 *     //tests/mla_prefill:mla_fast_test \
 *     //tests/mla_prefill:mla_fast_launch_test
 */
#include "klaunch/mla_prefill.cuh"

/* mla_absorbed_attn_mma: absorbed MLA prefill attention on tensor cores.
 *
 *   q      [batch, seq_len, num_q_heads, D]      D = MLA_HDIM = kv_lora + 64
 *   kv     [batch, seq_len, D]                   the latent cache rows [kv_latent | k_rope]
 *   output [batch, seq_len, num_q_heads, kv_lora]
 *
 *   score(t, s) = (q[t, h, :] . kv[s, :]) * inv_sqrt_d     over all D columns
 *   output[t, h, :] = sum_s softmax_s(score(t, s)) * kv[s, 0 : kv_lora]
 * with s <= t when `causal` is nonzero. V is the kv_latent part of the same
 * cache rows, so a key tile in shared memory serves both products.
 *
 * Geometry: grid (ceil(seq_len / 64), num_q_heads, batch), block 256, the
 * spec's fixed dynamic shared memory. Block x takes query tile
 * gridDim.x - 1 - x, so the longest causal rows start first.
 *
 * A block owns 64 query rows of one head. Its 8 warps are 4 row groups x 2
 * halves: warp w takes rows 16 (w % 4) .. +16 and
 *   - for S = Q K^T, the keys of its half of each key tile (a key split,
 *     so no score is computed twice);
 *   - for O += P V, output columns of its half of kv_lora (a 16 x kv_lora/2
 *     fp32 accumulator: 128 registers for kv_lora 512).
 * The two warps of a row group exchange their row maxima, then their P
 * halves, through shared memory, meeting at a named barrier (64 threads);
 * both compute the same running max, so their rescaling agrees, and the
 * row sums of their halves are added at the end.
 *
 * Shared memory: the Q tile (64 x D), two key-tile buffers (BN x D; cp.async
 * loads tile j+1 while tile j is used), P (64 x BN bf16) and the exchange.
 * Rows of Q and K are D * 2 bytes (a multiple of 128) with the 16-byte
 * chunks of each 128-byte group XOR-swizzled by (row % 8), so every
 * ldmatrix (8 rows, one chunk column) hits 8 different bank groups. P rows
 * are padded by 16 bytes instead.
 *
 * The first QREG k-steps of each warp's Q fragments stay in registers for
 * the whole kernel (fewer shared-memory reads in S); the rest come from
 * shared memory each tile. Scores are scaled into log2 units once and
 * exponentiated with ex2; P is rounded to bf16 for the tensor cores and the
 * row sums add the rounded values, so the weights are normalised exactly as
 * they are applied. fp32 accumulation throughout; one bf16 rounding of the
 * output.
 */

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "mla_mma.cuh"

#define MLA_ABSORBED_ATTN_MMA_BM 64      /* query rows per block: the spec's grid x divides seq_len by it */
#define MLA_ABSORBED_ATTN_MMA_ROPE 64    /* trailing rope columns of a cache row; V is the kv_lora before them */
#define MLA_ABSORBED_ATTN_MMA_SMEM KL_SHARED_BYTES_mla_absorbed_attn_mma /* the spec's shared_bytes (klaunch/mla_prefill.cuh) */

/* Tile configuration per head width (-D overrides are for experiments).
 * BN, keys per tile: for 576-wide rows 32 keep the layout at 150 KiB,
 * within the 163 KiB of sm_80 as well as the 227 KiB of sm_90 and sm_100;
 * 320-wide rows afford 64. QREG, k-steps of Q held in registers, and
 * PVUNROLL, the unroll of the P V loop over 16-key steps: as much as fits
 * beside the output accumulators without spilling on any target
 * (nvcc -Xptxas -v; 576: 248-255 registers, 320: 226-243). */
#ifndef MLA_ABSORBED_ATTN_MMA_BN
#if MLA_HDIM > 320
#define MLA_ABSORBED_ATTN_MMA_BN 32
#define MLA_ABSORBED_ATTN_MMA_QREG 8
#define MLA_ABSORBED_ATTN_MMA_PVUNROLL 1
#else
#define MLA_ABSORBED_ATTN_MMA_BN 64
#define MLA_ABSORBED_ATTN_MMA_QREG 20
#define MLA_ABSORBED_ATTN_MMA_PVUNROLL 2
#endif
#endif
#ifndef MLA_ABSORBED_ATTN_MMA_SUNROLL
#define MLA_ABSORBED_ATTN_MMA_SUNROLL 1 /* unroll of the loop over groups of 4 k-steps from shared memory */
#endif

namespace mla_absorbed_attn_mma_ {

constexpr int D = MLA_HDIM;
constexpr int DV = MLA_HDIM - MLA_ABSORBED_ATTN_MMA_ROPE; /* kv_lora: output width */
constexpr int BM = MLA_ABSORBED_ATTN_MMA_BM;
constexpr int BN = MLA_ABSORBED_ATTN_MMA_BN;
constexpr int KS = D / 16;          /* k-steps of S */
constexpr int NKW = BN / 2;         /* keys per warp in S */
constexpr int NTS = NKW / 8;        /* n8 tiles of a warp's scores */
constexpr int WN = DV / 2;          /* output columns per warp */
constexpr int NTO = WN / 8;         /* n8 tiles of a warp's output */
constexpr int SUNROLL = MLA_ABSORBED_ATTN_MMA_SUNROLL; /* unroll of the shared-memory k-step groups */
constexpr int PVUNROLL = MLA_ABSORBED_ATTN_MMA_PVUNROLL;
constexpr int QREG = MLA_ABSORBED_ATTN_MMA_QREG < KS ? MLA_ABSORBED_ATTN_MMA_QREG : KS;
constexpr uint32_t ROWB = D * 2;    /* bytes per Q or K row in shared memory */
constexpr uint32_t PP = (BN + 8) * 2; /* bytes per P row: +16 so 8 rows hit 8 bank groups */
constexpr uint32_t OFF_Q = 0;
constexpr uint32_t OFF_K = OFF_Q + BM * ROWB;
constexpr uint32_t KBUF = BN * ROWB;
constexpr uint32_t OFF_P = OFF_K + 2 * KBUF;
constexpr uint32_t OFF_MAX = OFF_P + BM * PP; /* float [2 halves][BM]: row maxima of the tile */
constexpr uint32_t OFF_SUM = OFF_MAX + 2 * BM * 4; /* float [2 halves][BM]: final row sums */
constexpr uint32_t SMEM = OFF_SUM + 2 * BM * 4;
constexpr int THREADS = 256;

static_assert(D % 64 == 0, "rows are whole 128-byte swizzle groups");
static_assert(DV % 32 == 0 && DV > 0, "each half of the output is whole pairs of n8 tiles");
static_assert(BN % 32 == 0, "each warp's half of a key tile is whole pairs of n8 tiles");
static_assert((BM * (D / 8)) % THREADS == 0 && (BN * (D / 8)) % THREADS == 0, "tile loads split evenly");
static_assert(BM == 4 * 16, "4 row groups of 16 rows");
static_assert(QREG % 4 == 0 && KS % 4 == 0, "k-steps go in swizzle groups of 4");
static_assert((WN / 8) % 8 == 0, "each half's output columns start a swizzle group");
static_assert(SMEM <= MLA_ABSORBED_ATTN_MMA_SMEM, "the spec's shared_bytes must cover the layout");
static_assert(OFF_K % 128 == 0 && KBUF % 128 == 0 && OFF_P % 16 == 0 && PP % 16 == 0, "ldmatrix rows are 16-byte aligned");

/* The Q tile: BM rows of D bf16 (row r at src + r * stride) into the
 * swizzled layout at `dst`; rows from `valid` on are zeros (queries past
 * seq_len). `vec`: every row starts 16-byte aligned. */
__device__ __forceinline__ void load_q_tile(uint32_t dst, const __nv_bfloat16 *src, size_t stride, uint32_t valid,
                                            bool vec) {
    constexpr int CH = D / 8; /* 16-byte chunks per row */
#pragma unroll
    for (int i = 0; i < BM * CH / THREADS; ++i) {
        const uint32_t idx = threadIdx.x + (uint32_t)(i * THREADS);
        const uint32_t r = idx / CH, c = idx % CH;
        const uint32_t to = dst + r * ROWB + ((c ^ (r & 7u)) << 4);
        const __nv_bfloat16 *from = src + (size_t)r * stride + c * 8u;
        if (r >= valid)
            kl__mma_st_shared_v4(to, make_uint4(0u, 0u, 0u, 0u));
        else if (vec)
            kl__mma_cp16(to, from);
        else
            kl__mma_st_shared_v4(to, kl__mma_load8_partial(from, 8u));
    }
}

constexpr int KCHUNKS = BN * (D / 8) / THREADS; /* 16-byte chunks per thread of a key tile */
static_assert(3 * KCHUNKS <= 32, "the swizzle of every chunk of a thread fits one word");

/* The row swizzle (row % 8) of each of this thread's key-tile chunks, 3 bits
 * each: a key tile's rows are dense, so chunk i of thread t is chunk
 * t + 256 i of the tile and only its swizzle needs the row. One register
 * instead of one per chunk held across the key loop. */
__device__ __forceinline__ uint32_t k_tile_swizzles(uint32_t tid) {
    uint32_t bits = 0u;
#pragma unroll
    for (int i = 0; i < KCHUNKS; ++i) bits |= (((tid + (uint32_t)(i * THREADS)) / (uint32_t)(D / 8)) & 7u) << (3 * i);
    return bits;
}

/* A key tile: BN dense rows of D bf16 from src into the swizzled layout at
 * `dst`. Chunks from `valid_chunks` on (rows past seq_len) are zeros: a
 * zero V row times a zero weight stays zero, garbage could be NaN. */
__device__ __forceinline__ void load_k_tile(uint32_t dst, const __nv_bfloat16 *src, uint32_t valid_chunks, bool vec,
                                            uint32_t tid, uint32_t swizzles) {
#pragma unroll
    for (int i = 0; i < KCHUNKS; ++i) {
        const uint32_t idx = tid + (uint32_t)(i * THREADS);
        const uint32_t to = dst + ((idx * 16u) ^ (((swizzles >> (3 * i)) & 7u) << 4));
        const __nv_bfloat16 *from = src + (size_t)idx * 8u;
        if (idx >= valid_chunks)
            kl__mma_st_shared_v4(to, make_uint4(0u, 0u, 0u, 0u));
        else if (vec)
            kl__mma_cp16(to, from);
        else
            kl__mma_st_shared_v4(to, kl__mma_load8_partial(from, 8u));
    }
}

}  // namespace mla_absorbed_attn_mma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_absorbed_attn_mma, 1)
mla_absorbed_attn_mma(KL_PARAMS_mla_absorbed_attn_mma) {
    using namespace mla_absorbed_attn_mma_;
    KL_DYNAMIC_SHARED(mla_absorbed_attn_mma__smem, 128);

    /* The launcher refuses these; a raw launch must still not touch memory it does not own. */
    if (head_dim != (uint32_t)D || kv_lora != (uint32_t)DV || seq_len == 0u || blockDim.x != (uint32_t)THREADS ||
        kl__mma_dynamic_smem_size() < SMEM)
        return;
    const uint32_t tile = gridDim.x - 1u - blockIdx.x;
    const uint32_t q0 = tile * (uint32_t)BM;
    if (q0 >= seq_len) return;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t g = lane >> 2, tig = lane & 3u;
    const uint32_t rg = warp & 3u, half = warp >> 2;
    const uint32_t h = blockIdx.y, b = blockIdx.z;
    const size_t q_row = (size_t)num_q_heads * D; /* elements between tokens of q */

    const uint32_t sbase = kl__mma_smem_addr(mla_absorbed_attn_mma__smem);
    const bool vec = (((uintptr_t)q | (uintptr_t)kv) & 15u) == 0u; /* rows are D * 2 bytes apart, a multiple of 16 */
    const __nv_bfloat16 *qtile = q + ((size_t)b * seq_len + q0) * q_row + (size_t)h * D;
    const __nv_bfloat16 *kvb = kv + (size_t)b * seq_len * D;

    const uint32_t kv_end = causal ? min(seq_len, q0 + (uint32_t)BM) : seq_len;
    const uint32_t ntiles = (kv_end + (uint32_t)BN - 1u) / (uint32_t)BN;

    const uint32_t kswz = k_tile_swizzles(tid);
    load_q_tile(sbase + OFF_Q, qtile, q_row, min((uint32_t)BM, seq_len - q0), vec);
    load_k_tile(sbase + OFF_K, kvb, min((uint32_t)BN, seq_len) * (uint32_t)(D / 8), vec, tid, kswz);
    kl__mma_cp_commit();

    /* Per-lane ldmatrix addressing. Lane L feeds row L % 8 of matrix L / 8;
     * every tile row base is a multiple of 8, so a row's swizzle is L % 8,
     * and logical chunk c of a row sits at chunk (c & ~7) | ((c & 7) ^ L % 8).
     * For an even chunk 2j + e (e = 0, 1) that is 8 (j / 4) + the lane's
     * sw[j % 4] below: 4 offsets per operand, the rest are immediates. */
    const uint32_t x7 = lane & 7u, mi = lane >> 3;
    /* A operands (Q, P): matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
    const uint32_t a_row = rg * 16u + x7 + ((mi & 1u) << 3);
    /* K as B (non-transposed): matrices (keys 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15). */
    const uint32_t k_row = half * (uint32_t)NKW + x7 + ((mi >> 1) << 3);
    /* V as B (transposed): matrices (keys 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
    const uint32_t v_row = x7 + ((mi & 1u) << 3);
    uint32_t a_sw[4], k_sw[4], v_sw[4];
#pragma unroll
    for (uint32_t jj = 0; jj < 4u; ++jj) {
        a_sw[jj] = ((2u * jj + (mi >> 1)) ^ x7) << 4;
        k_sw[jj] = ((2u * jj + (mi & 1u)) ^ x7) << 4;
        v_sw[jj] = ((2u * jj + (mi >> 1)) ^ x7) << 4;
    }
    const uint32_t q_addr = sbase + OFF_Q + a_row * ROWB;
    const uint32_t p_addr = sbase + OFF_P + a_row * PP + ((mi >> 1) << 4); /* + kk * 32 */
    const uint32_t v_col0 = half * (uint32_t)(WN / 8) * 16u;              /* this half's first output chunk, bytes */

    const float scale_log2 = inv_sqrt_d * 1.4426950408889634f;
    const uint32_t row0 = q0 + rg * 16u + g; /* query index of this lane's rows row0 and row0 + 8 */
    const uint32_t bar_id = 1u + rg;          /* the two warps of row group rg */
    const uint32_t red_row = rg * 16u + g;

    uint32_t qf[QREG > 0 ? QREG : 1][4];
    float o[NTO][4];
#pragma unroll
    for (int n = 0; n < NTO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

    for (uint32_t j = 0; j < ntiles; ++j) {
        const uint32_t kb = j * (uint32_t)BN;
        const uint32_t kbuf = sbase + OFF_K + (j & 1u) * KBUF;
        kl__mma_cp_wait<0>(); /* this thread's part of tile j (and Q) has landed */
        __syncthreads();      /* everyone's has; and every warp is done with tile j - 1's buffer */
        if (j + 1u < ntiles)
            load_k_tile(sbase + OFF_K + ((j + 1u) & 1u) * KBUF, kvb + (size_t)(kb + BN) * D,
                        min((uint32_t)BN, seq_len - kb - (uint32_t)BN) * (uint32_t)(D / 8), vec, tid, kswz);
        kl__mma_cp_commit();
        if (j == 0u) {
#pragma unroll
            for (int ks = 0; ks < QREG; ++ks) kl__mma_ldsm_x4(qf[ks], q_addr + (uint32_t)(ks / 4) * 128u + a_sw[ks % 4]);
        }

        /* ---- S = Q K^T for this warp's 16 rows and NKW keys ---- */
        float s[NTS][4];
#pragma unroll
        for (int n = 0; n < NTS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const uint32_t k_addr = kbuf + k_row * ROWB;
        /* k-steps whose Q fragments are in registers ... */
#pragma unroll
        for (int ks = 0; ks < QREG; ++ks) {
#pragma unroll
            for (int np = 0; np < NTS / 2; ++np) {
                uint32_t bk[4];
                kl__mma_ldsm_x4(bk, k_addr + (uint32_t)(16 * np) * ROWB + (uint32_t)(ks / 4) * 128u + k_sw[ks % 4]);
                kl__mma_bf16_16816(s[2 * np], qf[ks], bk[0], bk[1]);
                kl__mma_bf16_16816(s[2 * np + 1], qf[ks], bk[2], bk[3]);
            }
        }
        /* ... and the rest, from shared memory, 4 k-steps (one swizzle group) at a time. */
#pragma unroll SUNROLL
        for (int kg = QREG / 4; kg < KS / 4; ++kg) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                uint32_t a[4];
                kl__mma_ldsm_x4(a, q_addr + (uint32_t)kg * 128u + a_sw[e]);
#pragma unroll
                for (int np = 0; np < NTS / 2; ++np) {
                    uint32_t bk[4];
                    kl__mma_ldsm_x4(bk, k_addr + (uint32_t)(16 * np) * ROWB + (uint32_t)kg * 128u + k_sw[e]);
                    kl__mma_bf16_16816(s[2 * np], a, bk[0], bk[1]);
                    kl__mma_bf16_16816(s[2 * np + 1], a, bk[2], bk[3]);
                }
            }
        }

        /* ---- online softmax (log2 units); masks only where the tile needs it ---- */
        const bool need_mask = kb + (uint32_t)BN > seq_len || (causal && kb + (uint32_t)BN - 1u > q0);
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < NTS; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float v = s[n][e] * scale_log2;
                if (need_mask) {
                    const uint32_t key = kb + half * (uint32_t)NKW + (uint32_t)(8 * n) + 2u * tig + (uint32_t)(e & 1);
                    const uint32_t qi = row0 + (uint32_t)(8 * (e >> 1));
                    if (key >= seq_len || (causal && key > qi)) v = -INFINITY;
                }
                s[n][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
        if (tig == 0u) {
            kl__mma_st_shared_f32(sbase + OFF_MAX + (half * BM + red_row) * 4u, mx[0]);
            kl__mma_st_shared_f32(sbase + OFF_MAX + (half * BM + red_row + 8u) * 4u, mx[1]);
        }
        kl__mma_bar_sync(bar_id, 64u);
        mx[0] = fmaxf(mx[0], kl__mma_ld_shared_f32(sbase + OFF_MAX + ((half ^ 1u) * BM + red_row) * 4u));
        mx[1] = fmaxf(mx[1], kl__mma_ld_shared_f32(sbase + OFF_MAX + ((half ^ 1u) * BM + red_row + 8u) * 4u));

        float alpha[2], m_use[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float m_new = fmaxf(m_run[r], mx[r]);
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new; /* no unmasked key yet: keep exp2 finite */
            alpha[r] = kl__mma_exp2(m_run[r] - m_use[r]);
            m_run[r] = m_new;
        }
        float lsum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < NTS; ++n) {
            const uint32_t w0 = kl__mma_pack_bf16(kl__mma_exp2(s[n][0] - m_use[0]), kl__mma_exp2(s[n][1] - m_use[0]));
            const uint32_t w1 = kl__mma_pack_bf16(kl__mma_exp2(s[n][2] - m_use[1]), kl__mma_exp2(s[n][3] - m_use[1]));
            lsum[0] += kl__mma_bf16_lo(w0) + kl__mma_bf16_hi(w0);
            lsum[1] += kl__mma_bf16_lo(w1) + kl__mma_bf16_hi(w1);
            const uint32_t col = (half * (uint32_t)NKW + (uint32_t)(8 * n) + 2u * tig) * 2u;
            kl__mma_st_shared_u32(sbase + OFF_P + (rg * 16u + g) * PP + col, w0);
            kl__mma_st_shared_u32(sbase + OFF_P + (rg * 16u + g + 8u) * PP + col, w1);
        }
        l_run[0] = l_run[0] * alpha[0] + lsum[0];
        l_run[1] = l_run[1] * alpha[1] + lsum[1];
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int n = 0; n < NTO; ++n) {
                o[n][0] *= alpha[0];
                o[n][1] *= alpha[0];
                o[n][2] *= alpha[1];
                o[n][3] *= alpha[1];
            }
        }
        kl__mma_bar_sync(bar_id, 64u); /* both halves of P are written */

        /* ---- O += P V: V is columns [0, kv_lora) of the same key rows ---- */
#pragma unroll PVUNROLL
        for (int kk = 0; kk < BN / 16; ++kk) {
            uint32_t a[4];
            kl__mma_ldsm_x4(a, p_addr + (uint32_t)(kk * 32));
            const uint32_t vrow = kbuf + ((uint32_t)(16 * kk) + v_row) * ROWB;
#pragma unroll
            for (int np = 0; np < NTO / 2; ++np) {
                uint32_t bv[4];
                kl__mma_ldsm_x4_trans(bv, vrow + v_col0 + (uint32_t)(np / 4) * 128u + v_sw[np % 4]);
                kl__mma_bf16_16816(o[2 * np], a, bv[0], bv[1]);
                kl__mma_bf16_16816(o[2 * np + 1], a, bv[2], bv[3]);
            }
        }
    }

    /* ---- normalise: this half's row sums plus the other half's ---- */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    if (tig == 0u) {
        kl__mma_st_shared_f32(sbase + OFF_SUM + (half * BM + red_row) * 4u, l_run[0]);
        kl__mma_st_shared_f32(sbase + OFF_SUM + (half * BM + red_row + 8u) * 4u, l_run[1]);
    }
    kl__mma_bar_sync(bar_id, 64u);
    l_run[0] += kl__mma_ld_shared_f32(sbase + OFF_SUM + ((half ^ 1u) * BM + red_row) * 4u);
    l_run[1] += kl__mma_ld_shared_f32(sbase + OFF_SUM + ((half ^ 1u) * BM + red_row + 8u) * 4u);

    const bool out4 = ((uintptr_t)output & 3u) == 0u; /* every pair below is at an even element offset */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const uint32_t qi = row0 + (uint32_t)(8 * r);
        if (qi >= seq_len) continue;
        const float inv = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
        __nv_bfloat16 *orow = output + (((size_t)b * seq_len + qi) * num_q_heads + h) * DV + half * (uint32_t)WN + 2u * tig;
#pragma unroll
        for (int n = 0; n < NTO; ++n) {
            const uint32_t w = kl__mma_pack_bf16(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
            if (out4) {
                *reinterpret_cast<uint32_t *>(orow + 8 * n) = w;
            } else {
                reinterpret_cast<unsigned short *>(orow)[8 * n] = (unsigned short)(w & 0xffffu);
                reinterpret_cast<unsigned short *>(orow)[8 * n + 1] = (unsigned short)(w >> 16);
            }
        }
    }
}
