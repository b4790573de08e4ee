/* Reference: tests/mla_prefill/mla_fast_reference.h (absorbed_attention, float64)
 * Tests:
 *   tests/mla_prefill/mla_wgmma_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_fast_test.cc (GPU)
 *   tests/mla_prefill/wgmma_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_wgmma_emulated_test \
 *     //tests/mla_prefill:mla_fast_test \
 *     //tests/mla_prefill:wgmma_launch_test \
 *     //tests/mla_prefill:wgmma_sass_test
 */
#include "klaunch/mla_prefill.cuh"

/* mla_absorbed_attn_wgmma: absorbed MLA prefill attention on Hopper's
 * warpgroup tensor cores (sm_90a: wgmma.mma_async, fp32 accumulators),
 * warp-specialised. The contract of mla_absorbed_attn_mma
 * (docs/MLA_PREFILL.md):
 *
 *   q      [batch, seq_len, num_q_heads, D]      D = MLA_HDIM = kv_lora + 64
 *   kv     [batch, seq_len, D]                   the latent cache rows [kv_latent | k_rope]
 *   output [batch, seq_len, num_q_heads, kv_lora]
 *   score(t, s) = (q[t, h, :] . kv[s, :]) * inv_sqrt_d, s <= t when causal
 *   output[t, h, :] = sum_s softmax_s(score(t, s)) * kv[s, 0 : kv_lora]
 *
 * The numbers (128 heads, S 4096, causal; tensor core 2048 bf16 FMA per
 * cycle per SM, shared memory 128 B per cycle per SM):
 *   D 576 (kv_lora 512): FLOPs 128 x S(S+1)/2 x 2 (576 + 512) = 2.34e12,
 *     4.5 ms at 0.65 of an 800 TFLOP/s matmul (the target). Per 64 x 64
 *     (query x key) tile: S 2.36 M FMA + P V 2.10 M FMA = 2176 cycles.
 *     Output 64 x 512 fp32 = 256 registers a thread for one warpgroup: two
 *     warpgroups must split it (64 x 256 each, 128 registers). Q tile 72 KiB,
 *     key tile 72 KiB: Q + 2 key tiles + P 8 KiB = 224 KiB of the 227 KiB a
 *     block gets, so two stages is all that fits.
 *   D 320 (kv_lora 256): 1.27e12 FLOPs. Output 64 x 256 fp32 = 128 registers:
 *     one warpgroup can own whole rows, so a block takes 128 query rows (one
 *     64-row tile per consumer) and each 40 KiB key tile serves both: Q 80
 *     KiB + 3 key tiles 120 KiB + 2 P slabs 16 KiB = 216 KiB.
 *   Key bytes per FLOP: the KV rows are shared by every head, so they come
 *   from L2 (9.4 MB of cache rows against 19.6 GB of tile reads at D 576):
 *   72 KiB per 2176 cycles, 34 B per cycle per SM at peak; half that per
 *   FLOP at D 320 with 128-row blocks.
 *   Shared-memory reads per 64 x 64 tile (D 576, keys split): S 2 x 36 x
 *   (2 + 1) KiB = 216 KiB, P V 2 x 4 x (2 + 8) KiB = 80 KiB: 2312 cycles, a
 *   little over the tensor core's 2176 (n32 products are shared-memory-
 *   bound); D 320 with whole rows: S 20 x (2 + 2) KiB, P V 4 x (2 + 8) KiB
 *   per consumer = 120 KiB per 64 x 64 tile, 960 cycles against 1152.
 *
 * Design from those numbers (MLA_WGMMA_QTILES, MLA_WGMMA_STAGES per variant):
 *   - Block = 3 warpgroups (384 threads): two consumers and a producer. The
 *     producer (setmaxnreg.dec 40) loads Q once and streams the key tiles
 *     through a ring of STAGES (2 at D 576, 3 at D 320) with cp.async 16
 *     bytes into the 128-byte swizzle layout (each thread 4 rows x D / 64
 *     chunks a tile, one address plus immediates), one cp.async group a tile;
 *     STAGES - 2 tiles behind its issue it waits for a group and arrives on
 *     that tile's `full` mbarrier (count 128); before reusing a stage it
 *     waits on its `empty` mbarrier (one elected lane of each consumer warp,
 *     count 8). The consumers (setmaxnreg.inc 232: 2 x 128 x 232 + 128 x 40
 *     = the 384 x 168 registers the block has) never issue a load or a
 *     block-wide barrier.
 *   - D 576 (QTILES 1): both consumers share one 64-row query tile. S is
 *     split by keys (consumer h: keys 32h .. 32h + 31 of each tile, m64n32k16,
 *     16 accumulators), O by columns (consumer h: 256 columns, m64n256k16),
 *     as in mla_absorbed_attn_mma: no score is computed twice, and the two
 *     meet twice a tile at a 256-thread named barrier (row maxima, then P).
 *   - D 320 (QTILES 2): each consumer owns 64 query rows of a 128-row block:
 *     S m64n64k16 (32 accumulators), O 64 x 256 (m64n256k16), its own
 *     softmax and P slab, a 128-thread named barrier between writing P and
 *     reading it; the two consumers never wait for each other, so one's
 *     softmax overlaps the other's products. A causal consumer of the
 *     block's first 64 rows passes the last key tile without computing.
 *   - One key tile serves as K (K-major B of S) and V (N-major B of P V,
 *     imm-trans-b 1, LBO = the 8 KiB between 64-column slabs). P goes to
 *     shared memory as bf16 (K-major A of P V); the row sums add the rounded
 *     values, so the weights are normalised exactly as they are applied.
 *   - Online softmax in base 2, masks only on tiles that need them; query
 *     blocks are scheduled longest (causal) first (block x takes block
 *     gridDim.x - 1 - x).
 *   Measured on the H200 (2026-12-02, 3db8e5d, bench/mla/run.sh): D 576
 *   363.7 TFLOP/s, D 320 483.8 (0.45 and 0.60 of torch's bf16 matmul,
 *   801.7); the D 576 profile (tensor pipe 38%, shared memory 67%, barrier
 *   and wait stalls first) is what mla_absorbed_attn_tma's seesaw answers.
 *
 * Any pointer alignment (2-byte): rows not 16-byte aligned are loaded
 * element by element. Registers, spills: docs/MLA_PREFILL.md.
 */

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "mla_mma.cuh"
#include "../common/kl_ptx_sm90.cuh"

namespace mla_absorbed_attn_wgmma_ {

constexpr int D = MLA_HDIM;
constexpr int DV = MLA_HDIM - 64;          /* kv_lora: output width */
constexpr int QT = MLA_WGMMA_QTILES;       /* 64-row query tiles per block: 1 (D 576) or 2 (D 320) */
constexpr bool SPLIT = QT == 1;            /* one tile shared by both consumers (S by keys, O by columns) */
constexpr int BM = 64 * QT, BN = 64, THREADS = 384;
constexpr int STAGES = MLA_WGMMA_STAGES;   /* key-tile ring: 2 (D 576) or 3 (D 320) */
constexpr int LAG = STAGES - 2;            /* tiles the producer keeps in flight past the one it releases */
constexpr int NSLAB = D / 64;              /* 128-byte slabs of a Q or K row */
constexpr int WN = SPLIT ? DV / 2 : DV;    /* output columns per consumer warpgroup */
constexpr int NO = WN / 2;                 /* output accumulators per thread */
constexpr int VSLAB = WN / 64;             /* slabs of V per consumer */
constexpr int SN = SPLIT ? 32 : 64;        /* keys of S per consumer and tile */
constexpr int NS = SN / 2;                 /* S accumulators per thread */
constexpr uint32_t SLAB = 64 * 128;        /* one slab of a 64-row tile: 8 KiB */
constexpr uint32_t TILE = NSLAB * SLAB;    /* 64 rows of Q or K */
constexpr uint32_t OFF_Q = 0;
constexpr uint32_t OFF_K = OFF_Q + QT * TILE;
constexpr uint32_t OFF_P = OFF_K + STAGES * TILE;          /* P: one slab, or one per consumer */
constexpr uint32_t OFF_MAX = OFF_P + (SPLIT ? 1 : 2) * SLAB; /* SPLIT: float [2 warpgroups][64] */
constexpr uint32_t OFF_SUM = OFF_MAX + (SPLIT ? 2 * 64 * 4 : 0);
constexpr uint32_t OFF_BAR = OFF_SUM + (SPLIT ? 2 * 64 * 4 : 0); /* full[STAGES], empty[STAGES], q */
constexpr uint32_t SMEM = OFF_BAR + 128;

static_assert(QT == 1 || QT == 2, "one shared query tile or one per consumer");
static_assert(D % 64 == 0 && WN % 64 == 0, "rows and output halves are whole slabs");
static_assert(WN == 256 || WN == 128, "one m64n256 or m64n128 product per k16 step of P V");
static_assert(SPLIT || WN == 256, "a consumer owning whole rows holds 64 x 256 outputs (D 320)");
static_assert(THREADS == KL_THREADS_mla_absorbed_attn_wgmma, "two consumer warpgroups and a producer");
static_assert(STAGES >= 2 && (2 * STAGES + 1) * 8 <= 128, "the mbarriers fit their 128 bytes");
static_assert(SMEM + 1024 == KL_SHARED_BYTES_mla_absorbed_attn_wgmma,
              "the spec's shared_bytes: the layout above and 1 KiB to align it");

/* 64 rows of D bf16 (row r at src + r * stride) into the slab layout at
 * `dst`, by the producer's 128 threads; rows from `valid` on are zeros
 * (past seq_len: a zero V row times a zero weight stays zero, garbage could
 * be NaN). `vec`: rows 16-byte aligned. Thread t copies chunk t % 8 of rows
 * t / 8 + 16 i (i < 4) of every slab: its rows' swizzle (row % 8) is the
 * same for all four, so all of its destinations are one address plus
 * immediates. */
__device__ __forceinline__ void load_tile(uint32_t dst, const __nv_bfloat16 *src, size_t stride, uint32_t valid,
                                          bool vec, uint32_t pt) {
    const uint32_t c = pt & 7u, r = pt >> 3;
    const uint32_t to = dst + r * 128u + ((c ^ (r & 7u)) << 4);
    const __nv_bfloat16 *from = src + (size_t)r * stride + c * 8u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const bool ok = r + 16u * (uint32_t)i < valid;
        const __nv_bfloat16 *f0 = from + (size_t)(16 * i) * stride;
#pragma unroll
        for (int sl = 0; sl < NSLAB; ++sl) {
            const uint32_t t = to + (uint32_t)sl * SLAB + (uint32_t)i * 16u * 128u;
            const __nv_bfloat16 *f = f0 + sl * 64;
            if (!ok)
                kl__mma_st_shared_v4(t, make_uint4(0u, 0u, 0u, 0u));
            else if (vec)
                kl__mma_cp16(t, f);
            else
                kl__mma_st_shared_v4(t, kl__mma_load8_partial(f, 8u));
        }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
/* O += P V for one k16 step: one m64n256 (WN 256) or m64n128 (WN 128) product. */
__device__ __forceinline__ void pv_mma(float (&o)[128], uint64_t da, uint64_t dv) { kl__wgmma_bf16_ss<256, 1>(o, da, dv, 1u); }
__device__ __forceinline__ void pv_mma(float (&o)[64], uint64_t da, uint64_t dv) { kl__wgmma_bf16_ss<128, 1>(o, da, dv, 1u); }
#endif

}  // namespace mla_absorbed_attn_wgmma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_absorbed_attn_wgmma, 1)
mla_absorbed_attn_wgmma(KL_PARAMS_mla_absorbed_attn_wgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace mla_absorbed_attn_wgmma_;
    KL_DYNAMIC_SHARED(mla_absorbed_attn_wgmma__smem, 16);

    /* The launcher refuses these; a raw launch must still not touch memory it does not own. */
    if (head_dim != (uint32_t)D || kv_lora != (uint32_t)DV || seq_len == 0u || blockDim.x != (uint32_t)THREADS ||
        kl__mma_dynamic_smem_size() < SMEM + 1024u)
        return;
    const uint32_t tile = gridDim.x - 1u - blockIdx.x; /* longest causal rows first */
    const uint32_t q0 = tile * (uint32_t)BM;
    if (q0 >= seq_len) return;

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    const uint32_t hh = blockIdx.y, b = blockIdx.z;

    /* The swizzle pattern repeats every 1024 bytes of address: slabs start on such a boundary. */
    const uint32_t sbase = (kl__mma_smem_addr(mla_absorbed_attn_wgmma__smem) + 1023u) & ~1023u;
    const uint32_t full = sbase + OFF_BAR, empty = full + 8u * STAGES, qbar = empty + 8u * STAGES;
    const uint32_t kv_end = causal ? min(seq_len, q0 + (uint32_t)BM) : seq_len;
    const uint32_t ntiles = (kv_end + (uint32_t)BN - 1u) / (uint32_t)BN; /* every consumer passes every tile */

    if (tid == 0u) {
        for (uint32_t s = 0; s < (uint32_t)STAGES; ++s) {
            kl__mbar_init(full + 8u * s, 128u); /* each producer thread, once its part has landed */
            kl__mbar_init(empty + 8u * s, 8u);  /* one elected lane of each consumer warp */
        }
        kl__mbar_init(qbar, 128u);
    }
    __syncthreads();

    if (wg == 2u) {
        /* ---- producer: Q, then the key tiles through the ring, LAG stages in flight ---- */
        kl__setmaxnreg_dec<40>();
        const uint32_t pt = tid & 127u;
        const size_t q_row = (size_t)num_q_heads * D; /* elements between tokens of q */
        const bool vec = (((uintptr_t)q | (uintptr_t)kv) & 15u) == 0u; /* rows are D * 2 bytes apart */
        const __nv_bfloat16 *kvb = kv + (size_t)b * seq_len * D;
#pragma unroll
        for (int t = 0; t < QT; ++t) {
            const uint32_t r = q0 + 64u * (uint32_t)t;
            load_tile(sbase + OFF_Q + (uint32_t)t * TILE, q + ((size_t)b * seq_len + r) * q_row + (size_t)hh * D,
                      q_row, r < seq_len ? min(64u, seq_len - r) : 0u, vec, pt);
        }
        kl__mma_cp_commit();
        for (uint32_t j = 0; j < ntiles; ++j) {
            const uint32_t s = j % (uint32_t)STAGES, round = j / (uint32_t)STAGES;
            if (round > 0u) kl__mbar_wait(empty + 8u * s, (round - 1u) & 1u);
            const uint32_t kb = j * (uint32_t)BN;
            load_tile(sbase + OFF_K + s * TILE, kvb + (size_t)kb * D, (size_t)D, min((uint32_t)BN, seq_len - kb), vec,
                      pt);
            kl__mma_cp_commit();
            if (j == 0u) {
                kl__mma_cp_wait<1>(); /* Q (the group before tile 0) has landed */
                kl__mbar_arrive(qbar);
            }
            if (j + 1u > (uint32_t)LAG) { /* j >= LAG, without a warning when LAG is 0 */
                kl__mma_cp_wait<LAG>(); /* tile j - LAG has landed: release it */
                kl__mbar_arrive(full + 8u * ((j - (uint32_t)LAG) % (uint32_t)STAGES));
            }
        }
        kl__mma_cp_wait<0>();
        for (uint32_t j = ntiles > (uint32_t)LAG ? ntiles - (uint32_t)LAG : 0u; j < ntiles; ++j)
            kl__mbar_arrive(full + 8u * (j % (uint32_t)STAGES));
        return;
    }

    /* ---- consumers ---- */
    kl__setmaxnreg_inc<232>();
    const uint32_t tw = tid & 127u;
    const uint32_t w = tw >> 5, lane = tid & 31u, g = lane >> 2, tq = lane & 3u;
    const float scale_log2 = inv_sqrt_d * 1.4426950408889634f;
    const uint32_t r0 = w * 16u + g;                           /* this thread's rows of a 64-row tile: r0, r0 + 8 */
    const uint32_t qw = q0 + (SPLIT ? 0u : 64u * wg);          /* the first query row of this consumer's tile */
    const uint32_t key0 = SPLIT ? 32u * wg : 0u;               /* its first key of each key tile */
    const uint32_t my_tiles = SPLIT || !causal ? ntiles : (min(seq_len, qw + 64u) + (uint32_t)BN - 1u) / (uint32_t)BN;
    const uint32_t p_slab = sbase + OFF_P + (SPLIT ? 0u : wg * SLAB);
    const uint32_t bar_id = SPLIT ? 1u : 1u + wg;              /* named barriers (0 is __syncthreads) */
    const uint32_t bar_n = SPLIT ? 256u : 128u;                /* both consumers, or this one */

    float o[NO];
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

    kl__mbar_wait(qbar, 0u);
    for (uint32_t j = 0; j < ntiles; ++j) {
        const uint32_t kb = j * (uint32_t)BN, st = j % (uint32_t)STAGES;
        const uint32_t kbuf = sbase + OFF_K + st * TILE;
        kl__mbar_wait(full + 8u * st, (j / (uint32_t)STAGES) & 1u); /* tile j has landed */
        if (j < my_tiles) { /* (a causal consumer of the block's first rows needs one tile fewer) */
            kl__fence_proxy_async_shared(); /* the landed tile (and Q, the first time), visible to wgmma */

            /* ---- S = Q K^T: this consumer's keys of the tile ---- */
            float s[NS];
#pragma unroll
            for (int i = 0; i < NS; ++i) s[i] = 0.0f;
            kl__wgmma_fence_operand(s);
            kl__wgmma_fence();
            {
                /* Descriptors advance by adding (byte offset >> 4) to the start-address field
                 * (addresses stay under 2^18, so nothing carries out of it): two base descriptors and
                 * immediates. Fully unrolled: a rolled loop made ptxas insert warpgroup.arrive between
                 * the products (C7519). */
                const uint64_t qd = kl__wgmma_desc(sbase + OFF_Q + (SPLIT ? 0u : wg * TILE), 16u, 1024u);
                const uint64_t kd = kl__wgmma_desc(kbuf + key0 * 128u, 16u, 1024u);
#pragma unroll
                for (uint32_t sl = 0; sl < (uint32_t)NSLAB; ++sl) {
#pragma unroll
                    for (uint32_t kk = 0; kk < 4u; ++kk) {
                        const uint64_t off = (sl * SLAB + kk * 32u) >> 4;
                        kl__wgmma_bf16_ss<SN, 0>(s, qd + off, kd + off, (sl | kk) != 0u ? 1u : 0u);
                    }
                }
            }
            kl__wgmma_commit();
            kl__wgmma_wait<0>();
            kl__wgmma_fence_operand(s);

            /* ---- online softmax (log2 units); masks only where the tile needs it ---- */
            const bool need_mask = kb + (uint32_t)BN > seq_len || (causal && kb + (uint32_t)BN - 1u > qw);
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < NS / 4; ++i) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float v = s[4 * i + e] * scale_log2;
                    if (need_mask) {
                        const uint32_t key = kb + key0 + (uint32_t)(8 * i) + 2u * tq + (uint32_t)(e & 1);
                        const uint32_t qi = qw + r0 + (uint32_t)(8 * (e >> 1));
                        if (key >= seq_len || (causal && key > qi)) v = -INFINITY;
                    }
                    s[4 * i + e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            }
            if (SPLIT) { /* the other half's keys */
                if (tq == 0u) {
                    kl__mma_st_shared_f32(sbase + OFF_MAX + (wg * 64u + r0) * 4u, mx[0]);
                    kl__mma_st_shared_f32(sbase + OFF_MAX + (wg * 64u + r0 + 8u) * 4u, mx[1]);
                }
                kl__mma_bar_sync(bar_id, bar_n);
                mx[0] = fmaxf(mx[0], kl__mma_ld_shared_f32(sbase + OFF_MAX + ((wg ^ 1u) * 64u + r0) * 4u));
                mx[1] = fmaxf(mx[1], kl__mma_ld_shared_f32(sbase + OFF_MAX + ((wg ^ 1u) * 64u + r0 + 8u) * 4u));
            }

            float alpha[2], m_use[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float m_new = fmaxf(m_run[r], mx[r]);
                m_use[r] = m_new == -INFINITY ? 0.0f : m_new; /* no unmasked key yet: keep exp2 finite */
                alpha[r] = kl__mma_exp2(m_run[r] - m_use[r]);
                m_run[r] = m_new;
            }
            /* P (bf16) into its slab: row r, key k at chunk k / 8 ^ (r % 8), element k % 8. */
            float lsum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int i = 0; i < NS / 4; ++i) {
                const uint32_t w0 =
                    kl__mma_pack_bf16(kl__mma_exp2(s[4 * i] - m_use[0]), kl__mma_exp2(s[4 * i + 1] - m_use[0]));
                const uint32_t w1 =
                    kl__mma_pack_bf16(kl__mma_exp2(s[4 * i + 2] - m_use[1]), kl__mma_exp2(s[4 * i + 3] - m_use[1]));
                lsum[0] += kl__mma_bf16_lo(w0) + kl__mma_bf16_hi(w0);
                lsum[1] += kl__mma_bf16_lo(w1) + kl__mma_bf16_hi(w1);
                const uint32_t chunk = key0 / 8u + (uint32_t)i, within = 4u * tq; /* bytes of key 2tq in its chunk */
                kl__mma_st_shared_u32(p_slab + r0 * 128u + ((chunk ^ (r0 & 7u)) << 4) + within, w0);
                kl__mma_st_shared_u32(p_slab + (r0 + 8u) * 128u + ((chunk ^ ((r0 + 8u) & 7u)) << 4) + within, w1);
            }
            l_run[0] = l_run[0] * alpha[0] + lsum[0];
            l_run[1] = l_run[1] * alpha[1] + lsum[1];
            if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
                for (int i = 0; i < NO / 4; ++i) {
                    o[4 * i] *= alpha[0];
                    o[4 * i + 1] *= alpha[0];
                    o[4 * i + 2] *= alpha[1];
                    o[4 * i + 3] *= alpha[1];
                }
            }
            kl__fence_proxy_async_shared();  /* P's generic stores, for wgmma */
            kl__mma_bar_sync(bar_id, bar_n); /* all of P is written */

            /* ---- O += P V: V is columns [0, kv_lora) of the same key rows, N-major ---- */
            kl__wgmma_fence_operand(o);
            kl__wgmma_fence();
            const uint32_t vbase = kbuf + (SPLIT ? wg * (uint32_t)VSLAB * SLAB : 0u);
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                const uint64_t da = kl__wgmma_desc(p_slab + (uint32_t)kk * 32u, 16u, 1024u);
                const uint64_t dv = kl__wgmma_desc(vbase + (uint32_t)kk * 16u * 128u, SLAB, 1024u);
                pv_mma(o, da, dv);
            }
            kl__wgmma_commit();
            kl__wgmma_wait<0>();
            kl__wgmma_fence_operand(o);
        }
        if (kl__elect_one()) kl__mbar_arrive(empty + 8u * st); /* this warp is done with tile j */
    }

    /* ---- normalise: the row sums of this thread's quad (and, SPLIT, of the other half) ---- */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    if (SPLIT) {
        if (tq == 0u) {
            kl__mma_st_shared_f32(sbase + OFF_SUM + (wg * 64u + r0) * 4u, l_run[0]);
            kl__mma_st_shared_f32(sbase + OFF_SUM + (wg * 64u + r0 + 8u) * 4u, l_run[1]);
        }
        kl__mma_bar_sync(bar_id, bar_n);
        l_run[0] += kl__mma_ld_shared_f32(sbase + OFF_SUM + ((wg ^ 1u) * 64u + r0) * 4u);
        l_run[1] += kl__mma_ld_shared_f32(sbase + OFF_SUM + ((wg ^ 1u) * 64u + r0 + 8u) * 4u);
    }

    const bool out4 = ((uintptr_t)output & 3u) == 0u; /* every pair below is at an even element offset */
    const uint32_t col0 = SPLIT ? wg * (uint32_t)WN : 0u;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const uint32_t qi = qw + r0 + (uint32_t)(8 * r);
        if (qi >= seq_len) continue;
        const float inv = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
        __nv_bfloat16 *orow = output + (((size_t)b * seq_len + qi) * num_q_heads + hh) * DV + col0 + 2u * tq;
#pragma unroll
        for (int i = 0; i < NO / 4; ++i) {
            const uint32_t wv = kl__mma_pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
            if (out4) {
                *reinterpret_cast<uint32_t *>(orow + 8 * i) = wv;
            } else {
                reinterpret_cast<unsigned short *>(orow)[8 * i] = (unsigned short)(wv & 0xffffu);
                reinterpret_cast<unsigned short *>(orow)[8 * i + 1] = (unsigned short)(wv >> 16);
            }
        }
    }
#else
    /* No wgmma on this target: kl_mla_absorbed_attention_wgmma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
