/* Reference: tests/mla_prefill/mla_fast_reference.h (absorbed_attention, float64)
 * Tests:
 *   tests/mla_prefill/mla_copy_engine_emulated_test.cc (CPU emulator, through the generated builders)
 *   tests/mla_prefill/mla_copy_engine_test.cc (GPU: driver-encoded maps, float64 references)
 *   tests/mla_prefill/mla_copy_engine_launch_test.cc (launcher and builders over the recording backend)
 *   and mla_copy_engine_sass_test (sm_90a code: HGMMA in loops, UTMALDG, no LDL/STL)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_copy_engine_emulated_test \
 *     //tests/mla_prefill:mla_copy_engine_test \
 *     //tests/mla_prefill:mla_copy_engine_launch_test \
 *     //tests/mla_prefill:mla_copy_engine_sass_test
 */
#include "klaunch/mla_prefill.cuh"

/* mla_absorbed_attn_tma: mla_absorbed_attn_wgmma's contract (docs/MLA_PREFILL.md)
 * with every operand tile brought by the bulk tensor copy engine, P from
 * registers, and a persistent grid (issue 20):
 *
 *   q      [batch, seq_len, num_q_heads, D]   q_map: (D, heads, seq_len, batch), box 64 x 1 x 64 x 1
 *   kv     [batch, seq_len, D]                kv_map: (D, seq_len, batch), box 64 x 64 x 1
 *   output [batch, seq_len, num_q_heads, kv_lora]
 *   output[t, h, :] = sum_s softmax_s(q[t, h, :] . kv[s, :] * inv_sqrt_d) kv[s, 0 : kv_lora], s <= t when causal
 *
 * Every box is 64 bf16 wide with the 128-byte swizzle: the copy engine lays
 * it out as one 8 KiB slab of the wgmma layout (row r's 16-byte chunk c at
 * chunk c ^ (r % 8) of a 1024-byte-aligned slab), so a Q or key tile is
 * D / 64 boxes and no thread touches the data on its way in. Rows past
 * seq_len (and a box entirely past it) arrive as zeros.
 *
 * The numbers (128 heads, S 4096, causal; an H200 SM: 2048 bf16 FMA a cycle
 * on the tensor cores, 128 bytes a cycle of shared memory):
 *   D 576: 2.34e12 FLOPs. Per 64 x 64 tile: S 2.36 M FMA (1152 cycles) + P V
 *     2.10 M (1024): 2176 cycles. O is 64 x 512 fp32 = 256 registers a
 *     thread for one warpgroup, so the two consumers split it by columns
 *     (256 each, 128 registers). Shared memory: Q 72 KiB + 2 key buffers of
 *     72 KiB + the second P slab 8 KiB = 224 KiB + 1.4 KiB (maxima, sums,
 *     mbarriers) + 1 KiB alignment = 231296 bytes of the 232448 a block gets.
 *   D 320: 1.27e12 FLOPs. O 64 x 256 fp32 = 128 registers: a consumer owns
 *     64 whole rows, a block 128 (each 40 KiB key tile serves both); Q 80 KiB
 *     + 3 stages of 40 KiB = 200 KiB + 1152 = 205952 bytes.
 *   Shared-memory reads per 64 x 64 tile (one consumer's S m64n64k16: A 2 KiB
 *   + B 2 KiB per 32 tensor cycles, exactly the 128 B a cycle): D 576 with
 *   one consumer computing the whole S of a tile and P from registers for
 *   half of the P V products: S 36 x 4 KiB + P V 4 x (8 + 8 + 2) KiB = 216
 *   KiB, 1728 cycles against 2176 tensor cycles (the wgmma kernel's keys
 *   split into n32 halves needed 2368: shared-memory bound); D 320 per
 *   consumer: S 20 x 4 KiB + P V 4 x 8 KiB = 112 KiB, 896 cycles against 1152.
 *   Registers (consumers, setmaxnreg 232): O 128 + S 32 + P 2 x 16 (D 320:
 *   this tile's operand in flight and the next one's) + indices.
 *   Copies in flight: D 576 one 72 KiB key buffer while the other is in use,
 *   released and refilled in halves (slabs 0-3: V of consumer 0's columns;
 *   slabs 4-8: consumer 1's and the rope slab); D 320 up to 2 key tiles
 *   (80 KiB) ahead of the one in use. Each key tile is read from L2 by all
 *   128 heads' blocks (4.7 MB of cache rows at D 576 for 19.6 GB of tile reads).
 *
 * Design:
 *   - Block = 3 warpgroups (384 threads). Warpgroup 2 is the producer
 *     (setmaxnreg.dec 40): lane 0 of its warps issues cp.async.bulk.tensor
 *     copies, each with its mbarrier's expect_tx (one box = 8192 bytes), and
 *     waits for the consumers' releases; nothing else. Warpgroups 0 and 1 are
 *     the consumers (setmaxnreg.inc 232); they never load, and meet only at
 *     mbarriers (and, at D 576, one named barrier a tile for the row sums).
 *   - Persistent grid: block x takes work tiles x, x + gridDim.x, ... of the
 *     (row tile, head, batch) tiles ordered longest (causal) first: tile u
 *     is row tile nqt - 1 - u / (heads * batch), head u % heads, batch
 *     (u / heads) % batch. The ring runs on across a block's work tiles; Q is
 *     reloaded once both consumers release it (after their last S).
 *   - D 320 (MLA_WGMMA_QTILES 2, 3 stages): consumer w owns rows 64w .. 64w +
 *     63 of the 128-row tile (S m64n64k16, O m64n256k16). Per key tile j it
 *     issues S_{j+1} (into the one S accumulator: S_j is already P_j in
 *     registers), then P_j V_j with P_j from registers (RS), waits for S_{j+1},
 *     runs its softmax while P_j V_j runs, then waits for P_j V_j, rescales
 *     O and releases the stage. A causal consumer of the first 64 rows passes
 *     the block's last key tile without computing.
 *   - D 576 (MLA_WGMMA_QTILES 1, 2 key buffers): the consumers take key tiles
 *     in pairs, consumer 0 the even tile (buffer 0), consumer 1 the odd one
 *     (buffer 1), each computing the whole n64 S of its tile; consumer 0
 *     holds O's columns 0-255, consumer 1 256-511. Per pair: consumer 0's
 *     softmax (its running maximum m) publishes m0; consumer 1's softmax
 *     takes m1 = max(m0, its scores) and publishes m1; each applies its own P
 *     from registers to its columns (RS) and the other's P from shared
 *     memory (SS): consumer 0 rescales its P by exp2(m0 - m1) into the rope
 *     slab of buffer 0 (dead once its S is done), consumer 1 writes its P to
 *     a slab of its own. Consumer 0 issues the next pair's S before its last
 *     product of this pair completes. A causal or ragged tile count is padded
 *     to even with a tile whose keys are all masked.
 *   - Online softmax in base 2 with masks only on tiles that need them; the
 *     row sums in fp32 (D 320: of the bf16 weights as applied).
 *   Predicted before the first run (from the counts above; H200): D 576
 *   0.62-0.69 of the bf16 matmul rate, D 320 0.68-0.74; measured 0.74 and
 *   0.81 (2026-12-04): the seesaw and P from registers removed more of the
 *   serial time than counted. What bounds D 576 now (ncu, H100, 2026-12-06:
 *   tensor pipe active 67%, shared memory 57% of peak) and what would move
 *   it: docs/PERFORMANCE.md, "MLA prefill attention".
 *
 * The maps' addresses and strides are 16-byte aligned (the builders refuse
 * others); the output takes any 2-byte alignment. Registers, spills:
 * docs/MLA_PREFILL.md.
 */

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "mla_mma.cuh"
#include "../common/kl_ptx_sm90.cuh"

namespace mla_absorbed_attn_tma_ {

constexpr int D = MLA_HDIM;
constexpr int DV = MLA_HDIM - 64;          /* kv_lora: output width */
constexpr int QT = MLA_WGMMA_QTILES;       /* 64-row query tiles per block: 1 (D 576) or 2 (D 320) */
constexpr bool SEESAW = QT == 1;           /* D 576: alternate key tiles, O split by columns */
constexpr int BM = 64 * QT, BN = 64, THREADS = 384;
constexpr int STAGES = MLA_WGMMA_STAGES;   /* key buffers: 2 (D 576) or a ring of 3 (D 320) */
constexpr int NSLAB = D / 64;              /* 128-byte slabs (one box each) of a Q or key row */
constexpr int HALF = 4;                    /* D 576: slabs 0-3 (consumer 0's V columns) are the left half */
constexpr uint32_t SLAB = 64 * 128;        /* one box: 64 rows x 64 bf16 */
constexpr uint32_t TILE = NSLAB * SLAB;
constexpr uint32_t OFF_Q = 0;
constexpr uint32_t OFF_K = OFF_Q + QT * TILE;
constexpr uint32_t OFF_P1 = OFF_K + STAGES * TILE;           /* D 576: consumer 1's P */
constexpr uint32_t OFF_M = OFF_P1 + (SEESAW ? SLAB : 0u);    /* D 576: float [64] running maxima */
constexpr uint32_t OFF_L = OFF_M + (SEESAW ? 256u : 0u);     /* D 576: float [2][64] row sums */
constexpr uint32_t OFF_BAR = OFF_L + (SEESAW ? 512u : 0u);   /* mbarriers, 8 bytes each */
constexpr uint32_t SMEM = OFF_BAR + 128;
constexpr uint32_t BOX = KL_TMAP_mla_absorbed_attn_tma_kv_map_BYTES;

static_assert(QT == 1 || QT == 2, "one query tile shared by both consumers, or one each");
static_assert(SEESAW ? STAGES == 2 && DV == 512 : DV == 256, "the two designs: D 576 seesaw, D 320 rows");
static_assert(THREADS == KL_THREADS_mla_absorbed_attn_tma, "two consumer warpgroups and a producer");
static_assert(SMEM + 1024 == KL_SHARED_BYTES_mla_absorbed_attn_tma,
              "the spec's shared_bytes: the layout above and 1 KiB to align it");
static_assert(BOX == SLAB && KL_TMAP_mla_absorbed_attn_tma_q_map_BYTES == SLAB, "one box is one 8 KiB slab");
static_assert(KL_TMAP_mla_absorbed_attn_tma_kv_map_BOX1 == BN && KL_TMAP_mla_absorbed_attn_tma_q_map_BOX2 == 64,
              "boxes of 64 rows");

/* mbarriers (index * 8 past OFF_BAR). Both designs: Q full (the producer's
 * expect_tx, count 1) and Q empty (one elected lane of each consumer warp,
 * 8). D 320: full[s] (count 1) and empty[s] (8) per stage. D 576, per key
 * buffer b: ready / free of its left half (slabs 0-3) and right half (4-8),
 * the halves' free counts 4 (the warps of the consumer that reads it last:
 * consumer 0 the left, consumer 1 the right); the pair's handoffs M0 (m0
 * published), M1, P0 (consumer 0's P in buffer 0's rope slab), P1, count 128. */
enum : uint32_t { B_QFULL = 0, B_QEMPTY = 1, B_RING = 2 };
enum : uint32_t { S_READY_L = 0, S_READY_R = 2, S_FREE_L = 4, S_FREE_R = 6, S_M0 = 8, S_M1 = 9, S_P0 = 10, S_P1 = 11 };
static_assert(B_RING + (SEESAW ? 12 : 2 * STAGES) <= 16, "the mbarriers fit their 128 bytes");

struct Work {
    uint32_t q0, h, b, ntiles; /* first query row, head, batch, key tiles (D 576: even) */
};

/* Work tile u: longest causal rows first, then heads, then batches. */
__device__ __forceinline__ Work work_at(uint32_t u, uint32_t nqt, uint32_t heads, uint32_t per, uint32_t seq_len,
                                        bool causal) {
    Work w;
    const uint32_t qt = nqt - 1u - u / per, rem = u % per;
    w.q0 = qt * (uint32_t)BM;
    w.h = rem % heads;
    w.b = rem / heads;
    const uint32_t kv_end = causal ? min(seq_len, w.q0 + (uint32_t)BM) : seq_len;
    w.ntiles = (kv_end + (uint32_t)BN - 1u) / (uint32_t)BN;
    if (SEESAW) w.ntiles += w.ntiles & 1u;
    return w;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
/* S (+)= Q K^T over slabs [s0, s1) of a 64-row Q tile and a 64-key tile, m64n64k16. */
__device__ __forceinline__ void s_products(float (&s)[32], uint32_t qtile, uint32_t ktile, uint32_t s0, uint32_t s1,
                                           bool first) {
    /* Descriptors advance by (byte offset >> 4) in the start-address field;
     * fully unrolled (a rolled loop made ptxas put warpgroup.arrive between
     * the products, C7519). */
    const uint64_t qd = kl__wgmma_desc(qtile, 16u, 1024u), kd = kl__wgmma_desc(ktile, 16u, 1024u);
#pragma unroll
    for (uint32_t sl = 0; sl < (uint32_t)NSLAB; ++sl) {
        if (sl < s0 || sl >= s1) continue;
#pragma unroll
        for (uint32_t kk = 0; kk < 4u; ++kk) {
            const uint64_t off = (sl * SLAB + kk * 32u) >> 4;
            kl__wgmma_bf16_ss<64, 0>(s, qd + off, kd + off, (first && sl == s0 && kk == 0u) ? 0u : 1u);
        }
    }
}

/* O += P V over the 64 keys of a tile: V N-major, 256 columns (4 slabs) from vbase. */
__device__ __forceinline__ void pv_rs(float (&o)[128], uint32_t (&p)[4][4], uint32_t vbase) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
        kl__wgmma_bf16_rs<256, 1>(o, p[kk], kl__wgmma_desc(vbase + (uint32_t)kk * 16u * 128u, SLAB, 1024u), 1u);
}
/* After the wait_group that completes the products reading P: its registers are kept until here. */
__device__ __forceinline__ void fence_p(uint32_t (&p)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) kl__wgmma_fence_operand(p[kk]);
}

__device__ __forceinline__ void pv_ss(float (&o)[128], uint32_t p_slab, uint32_t vbase) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
        kl__wgmma_bf16_ss<256, 1>(o, kl__wgmma_desc(p_slab + (uint32_t)kk * 32u, 16u, 1024u),
                                  kl__wgmma_desc(vbase + (uint32_t)kk * 16u * 128u, SLAB, 1024u), 1u);
}
#endif

/* Scales a 64 x 64 S fragment to log2 units, masks keys past seq_len (and,
 * causal, past the row) when the tile needs it, and returns the rows' maxima
 * over the quad. Rows qr0 + r0 and + 8; keys kb + 8i + 2tq + (e & 1). */
__device__ __forceinline__ void scale_mask_max(float (&s)[32], float (&mx)[2], float scale_log2, uint32_t kb,
                                               uint32_t qrow, uint32_t seq_len, bool causal, uint32_t tq) {
    const bool need_mask = kb + (uint32_t)BN > seq_len || (causal && kb + (uint32_t)BN - 1u > qrow);
    mx[0] = mx[1] = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float v = s[4 * i + e] * scale_log2;
            if (need_mask) {
                const uint32_t key = kb + (uint32_t)(8 * i) + 2u * tq + (uint32_t)(e & 1);
                const uint32_t qi = qrow + (uint32_t)(8 * (e >> 1));
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
}

/* A running maximum that is still -inf (no unmasked key yet) subtracts as 0. */
__device__ __forceinline__ float finite_or_zero(float m) { return m == -INFINITY ? 0.0f : m; }

/* s = exp2(s - m) per row (in place, fp32); the rows' sums of this thread's part. */
__device__ __forceinline__ void exp_rows(float (&s)[32], const float (&m)[2], float (&sum)[2]) {
    const float mu[2] = {finite_or_zero(m[0]), finite_or_zero(m[1])};
    sum[0] = sum[1] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        s[i] = kl__mma_exp2(s[i] - mu[(i >> 1) & 1]);
        sum[(i >> 1) & 1] += s[i];
    }
}

/* The S fragment as the RS operand of the four k16 steps of P V (the m64n16
 * accumulator's registers pair into matrix A's fragment: kl_ptx_sm90.cuh),
 * each weight times scale[row]. */
__device__ __forceinline__ void pack_p(uint32_t (&p)[4][4], const float (&s)[32], const float (&scale)[2]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            p[kk][i] = kl__mma_pack_bf16(s[8 * kk + 2 * i] * scale[i & 1], s[8 * kk + 2 * i + 1] * scale[i & 1]);
}

/* P (the registers above) into a K-major 128-byte-swizzle slab: row r, key
 * k at chunk k / 8 ^ r % 8. Register i of step kk holds keys 16kk + 8(i / 2)
 * + 2tq, + 1 of row r0 + 8(i % 2). */
__device__ __forceinline__ void store_p(uint32_t slab, const uint32_t (&p)[4][4], uint32_t r0, uint32_t tq) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t r = r0 + 8u * (uint32_t)(i & 1), chunk = 2u * (uint32_t)kk + (uint32_t)(i >> 1);
            kl__mma_st_shared_u32(slab + r * 128u + ((chunk ^ (r & 7u)) << 4) + 4u * tq, p[kk][i]);
        }
}

/* O's 64 x 256 fragment, normalised by 1 / l, into output columns col0 .. col0 + 255 of rows qrow (+ 8). */
__device__ __forceinline__ void store_o(const float (&o)[128], const float (&l)[2], __nv_bfloat16 *output,
                                        uint32_t qrow, uint32_t seq_len, size_t row_elems, uint32_t col0, uint32_t tq) {
    const bool out4 = ((uintptr_t)output & 3u) == 0u; /* every pair below is at an even element offset */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const uint32_t qi = qrow + (uint32_t)(8 * r);
        if (qi >= seq_len) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        __nv_bfloat16 *orow = output + (size_t)qi * row_elems + col0 + 2u * tq;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const uint32_t wv = kl__mma_pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
            if (out4) {
                *reinterpret_cast<uint32_t *>(orow + 8 * i) = wv;
            } else {
                reinterpret_cast<unsigned short *>(orow)[8 * i] = (unsigned short)(wv & 0xffffu);
                reinterpret_cast<unsigned short *>(orow)[8 * i + 1] = (unsigned short)(wv >> 16);
            }
        }
    }
}

__device__ __forceinline__ void scale_o(float (&o)[128], const float (&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            o[4 * i] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
    }
}

}  // namespace mla_absorbed_attn_tma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_absorbed_attn_tma, 1)
mla_absorbed_attn_tma(KL_PARAMS_mla_absorbed_attn_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace mla_absorbed_attn_tma_;
    KL_DYNAMIC_SHARED(mla_absorbed_attn_tma__smem, 16);

    /* The launcher refuses these; a raw launch must still not touch memory it does not own. */
    if (head_dim != (uint32_t)D || kv_lora != (uint32_t)DV || seq_len == 0u || blockDim.x != (uint32_t)THREADS ||
        kl__mma_dynamic_smem_size() < SMEM + 1024u)
        return;
    const uint32_t nqt = (seq_len + (uint32_t)BM - 1u) / (uint32_t)BM, per = num_q_heads * batch;
    const uint32_t total = nqt * per;

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    /* The swizzle pattern repeats every 1024 bytes of address: slabs start on such a boundary. */
    const uint32_t sbase = (kl__mma_smem_addr(mla_absorbed_attn_tma__smem) + 1023u) & ~1023u;
    const uint32_t bar = sbase + OFF_BAR;
    auto mb = [bar](uint32_t i) { return bar + 8u * i; };
    const uint32_t qfull = mb(B_QFULL), qempty = mb(B_QEMPTY);

    if (tid == 0u) {
        kl__mbar_init(qfull, 1u);
        kl__mbar_init(qempty, 8u);
        if (SEESAW) {
            for (uint32_t b2 = 0; b2 < 2u; ++b2) {
                kl__mbar_init(mb(B_RING + S_READY_L + b2), 1u);
                kl__mbar_init(mb(B_RING + S_READY_R + b2), 1u);
                kl__mbar_init(mb(B_RING + S_FREE_L + b2), 4u);
                kl__mbar_init(mb(B_RING + S_FREE_R + b2), 4u);
            }
            for (uint32_t i = S_M0; i <= S_P1; ++i) kl__mbar_init(mb(B_RING + i), 128u);
        } else {
            for (uint32_t s = 0; s < (uint32_t)STAGES; ++s) {
                kl__mbar_init(mb(B_RING + s), 1u);                   /* full: the producer's expect_tx */
                kl__mbar_init(mb(B_RING + STAGES + s), 8u);          /* empty: an elected lane of each consumer warp */
            }
        }
        kl__fence_proxy_async_shared(); /* the initialised mbarriers, to the copy engine */
    }
    __syncthreads();

    if (wg == 2u) {
        /* ---- producer: lane 0 of each warp issues copies; the rest leave ---- */
        kl__setmaxnreg_dec<40>();
        const uint32_t pw = (tid >> 5) & 3u;
        if ((tid & 31u) != 0u || (!SEESAW && pw != 0u)) return;
        /* D 320: warp 0 streams Q and the ring. D 576: warp 0 Q and buffer 0's
         * left half, warp 1 buffer 0's right half, warp 2 buffer 1's right
         * half, warp 3 buffer 1's left half (each waits only for its own half). */
        const uint32_t buf = pw >> 1, right = (pw == 1u || pw == 2u) ? 1u : 0u;
        const uint32_t sl0 = right ? (uint32_t)HALF : 0u, sl1 = right ? (uint32_t)NSLAB : (uint32_t)HALF;
        if (pw == 0u) {
            kl__prefetch_tensormap(&q_map);
            kl__prefetch_tensormap(&kv_map);
        }
        uint32_t n = 0, c = 0; /* work tiles, and key tiles (D 576: pairs) loaded in this block */
        for (uint32_t u = blockIdx.x; u < total; u += gridDim.x, ++n) {
            const Work w = work_at(u, nqt, num_q_heads, per, seq_len, causal);
            if (pw == 0u) {
                if (n > 0u) kl__mbar_wait(qempty, (n - 1u) & 1u); /* both consumers' last S of the previous tile */
                kl__mbar_arrive_expect_tx(qfull, (uint32_t)QT * TILE);
#pragma unroll
                for (int t = 0; t < QT; ++t)
#pragma unroll
                    for (int sl = 0; sl < NSLAB; ++sl)
                        kl__tma_load_4d(sbase + OFF_Q + (uint32_t)t * TILE + (uint32_t)sl * SLAB, &q_map, 64 * sl,
                                        (int32_t)w.h, (int32_t)(w.q0 + 64u * (uint32_t)t), (int32_t)w.b, qfull);
            }
            if (SEESAW) {
                const uint32_t ready = mb(B_RING + (right ? S_READY_R : S_READY_L) + buf);
                const uint32_t freed = mb(B_RING + (right ? S_FREE_R : S_FREE_L) + buf);
                const uint32_t dst = sbase + OFF_K + buf * TILE;
                for (uint32_t j = buf; j < w.ntiles; j += 2u, ++c) {
                    if (c > 0u) kl__mbar_wait(freed, (c - 1u) & 1u);
                    kl__mbar_arrive_expect_tx(ready, (sl1 - sl0) * SLAB);
                    for (uint32_t sl = sl0; sl < sl1; ++sl)
                        kl__tma_load_3d(dst + sl * SLAB, &kv_map, (int32_t)(64u * sl), (int32_t)(j * (uint32_t)BN),
                                        (int32_t)w.b, ready);
                }
            } else {
                for (uint32_t j = 0; j < w.ntiles; ++j, ++c) {
                    const uint32_t s = c % (uint32_t)STAGES, round = c / (uint32_t)STAGES;
                    if (round > 0u) kl__mbar_wait(mb(B_RING + STAGES + s), (round - 1u) & 1u);
                    kl__mbar_arrive_expect_tx(mb(B_RING + s), TILE);
#pragma unroll
                    for (int sl = 0; sl < NSLAB; ++sl)
                        kl__tma_load_3d(sbase + OFF_K + s * TILE + (uint32_t)sl * SLAB, &kv_map, 64 * sl,
                                        (int32_t)(j * (uint32_t)BN), (int32_t)w.b, mb(B_RING + s));
                }
            }
        }
        return;
    }

    /* ---- consumers ---- */
    kl__setmaxnreg_inc<232>();
    const uint32_t tw = tid & 127u;
    const uint32_t w4 = tw >> 5, lane = tid & 31u, g = lane >> 2, tq = lane & 3u;
    const uint32_t r0 = w4 * 16u + g; /* this thread's rows of a 64-row tile: r0, r0 + 8 */
    const float scale_log2 = inv_sqrt_d * 1.4426950408889634f;
    const bool elected = kl__elect_one();
    const float ones[2] = {1.0f, 1.0f};

    float o[128];
    float s[32];
    uint32_t p[4][4];
    uint32_t n = 0, c = 0; /* work tiles, key tiles (D 576: pairs) passed in this block */

    for (uint32_t u = blockIdx.x; u < total; u += gridDim.x, ++n) {
        const Work w = work_at(u, nqt, num_q_heads, per, seq_len, causal);
#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
        kl__mbar_wait(qfull, n & 1u);

        if (SEESAW) {
            /* ---- D 576: consumer wg takes the tiles 2i + wg, O's columns 256 wg .. + 255 ---- */
            const uint32_t kbuf0 = sbase + OFF_K, kbuf1 = kbuf0 + TILE;
            const uint32_t p0_slab = kbuf0 + (uint32_t)(NSLAB - 1) * SLAB; /* buffer 0's rope slab */
            const uint32_t p1_slab = sbase + OFF_P1;
            const uint32_t npairs = w.ntiles / 2u;
            for (uint32_t i = 0; i < npairs; ++i, ++c) {
                const uint32_t ph = c & 1u;
                const uint32_t kb = (2u * i + wg) * (uint32_t)BN; /* this consumer's key tile */
                if (wg == 0u) {
                    if (i == 0u) { /* later pairs' S was issued at the end of the pair before */
                        kl__wgmma_fence_operand(s);
                        kl__mbar_wait(mb(B_RING + S_READY_L + 0), ph);
                        kl__wgmma_fence(); /* each fence after its wait: no branch between it and the products */
                        s_products(s, sbase + OFF_Q, kbuf0, 0, HALF, true);
                        kl__wgmma_commit();
                        kl__mbar_wait(mb(B_RING + S_READY_R + 0), ph);
                        kl__wgmma_fence();
                        s_products(s, sbase + OFF_Q, kbuf0, HALF, NSLAB, false);
                        kl__wgmma_commit();
                        kl__wgmma_wait<0>();
                        kl__wgmma_fence_operand(s);
                    }
                    if (i + 1u == npairs && elected) kl__mbar_arrive(qempty); /* its last S is done */
                    float mx[2], sum[2], alpha[2], m0[2];
                    scale_mask_max(s, mx, scale_log2, kb, w.q0 + r0, seq_len, causal, tq);
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        m0[r] = fmaxf(m[r], mx[r]);
                        alpha[r] = kl__mma_exp2(m[r] - finite_or_zero(m0[r]));
                    }
                    __syncwarp(); /* the quad's reads of the last pair's m1 before m0 replaces it */
                    if (tq == 0u) {
                        kl__mma_st_shared_f32(sbase + OFF_M + r0 * 4u, m0[0]);
                        kl__mma_st_shared_f32(sbase + OFF_M + (r0 + 8u) * 4u, m0[1]);
                    }
                    kl__mbar_arrive(mb(B_RING + S_M0)); /* m0 published */
                    exp_rows(s, m0, sum);
                    l[0] = l[0] * alpha[0] + sum[0];
                    l[1] = l[1] * alpha[1] + sum[1];
                    scale_o(o, alpha);
                    pack_p(p, s, ones);
                    /* O[:, 0:256] += P0 V0 (left half of buffer 0), P0 from registers */
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    pv_rs(o, p, kbuf0);
                    kl__wgmma_commit();
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(o);
                    fence_p(p);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_L + 0)); /* buffer 0's slabs 0-3 */
                    /* m1 = max(m0, consumer 1's scores): P0 and O to that maximum */
                    kl__mbar_wait(mb(B_RING + S_M1), ph);
                    float scale[2];
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float m1 = kl__mma_ld_shared_f32(sbase + OFF_M + (r0 + 8u * (uint32_t)r) * 4u);
                        scale[r] = kl__mma_exp2(finite_or_zero(m0[r]) - finite_or_zero(m1));
                        m[r] = m1;
                        l[r] *= scale[r];
                    }
                    pack_p(p, s, scale);
                    store_p(p0_slab, p, r0, tq); /* buffer 0's rope slab: its S is done */
                    kl__fence_proxy_async_shared();
                    kl__mbar_arrive(mb(B_RING + S_P0));
                    scale_o(o, scale);
                    /* O[:, 0:256] += P1 V1 (left half of buffer 1), P1 from consumer 1's slab */
                    kl__mbar_wait(mb(B_RING + S_P1), ph);
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    pv_ss(o, p1_slab, kbuf1);
                    kl__wgmma_commit();
                    if (i + 1u < npairs) {
                        /* the next pair's S, its left half while P1 V1 runs */
                        kl__wgmma_fence_operand(s);
                        kl__mbar_wait(mb(B_RING + S_READY_L + 0), ph ^ 1u);
                        kl__wgmma_fence();
                        s_products(s, sbase + OFF_Q, kbuf0, 0, HALF, true);
                        kl__wgmma_commit();
                        kl__wgmma_wait<1>();
                        if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_L + 1)); /* buffer 1's slabs 0-3, P1 read */
                        kl__mbar_wait(mb(B_RING + S_READY_R + 0), ph ^ 1u);
                        kl__wgmma_fence();
                        s_products(s, sbase + OFF_Q, kbuf0, HALF, NSLAB, false);
                        kl__wgmma_commit();
                        kl__wgmma_wait<0>();
                        kl__wgmma_fence_operand(s);
                    } else {
                        kl__wgmma_wait<0>();
                        if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_L + 1));
                    }
                    kl__wgmma_fence_operand(o);
                } else {
                    /* consumer 1: S of the odd tile, right half first (its own release comes first) */
                    kl__wgmma_fence_operand(s);
                    kl__mbar_wait(mb(B_RING + S_READY_R + 1), ph);
                    kl__wgmma_fence();
                    s_products(s, sbase + OFF_Q, kbuf1, HALF, NSLAB, true);
                    kl__wgmma_commit();
                    kl__mbar_wait(mb(B_RING + S_READY_L + 1), ph);
                    kl__wgmma_fence();
                    s_products(s, sbase + OFF_Q, kbuf1, 0, HALF, false);
                    kl__wgmma_commit();
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(s);
                    if (i + 1u == npairs && elected) kl__mbar_arrive(qempty);
                    float mx[2], sum[2], alpha[2], m1[2];
                    scale_mask_max(s, mx, scale_log2, kb, w.q0 + r0, seq_len, causal, tq);
                    kl__mbar_wait(mb(B_RING + S_M0), ph);
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float m0 = kl__mma_ld_shared_f32(sbase + OFF_M + (r0 + 8u * (uint32_t)r) * 4u);
                        m1[r] = fmaxf(m0, mx[r]); /* m0 >= m: consumer 0 started from this maximum */
                        alpha[r] = kl__mma_exp2(m[r] - finite_or_zero(m1[r]));
                        m[r] = m1[r];
                    }
                    __syncwarp(); /* the quad's reads of m0 (its rows are this warp's) before m1 replaces it */
                    if (tq == 0u) {
                        kl__mma_st_shared_f32(sbase + OFF_M + r0 * 4u, m1[0]);
                        kl__mma_st_shared_f32(sbase + OFF_M + (r0 + 8u) * 4u, m1[1]);
                    }
                    kl__mbar_arrive(mb(B_RING + S_M1));
                    exp_rows(s, m1, sum);
                    l[0] = l[0] * alpha[0] + sum[0];
                    l[1] = l[1] * alpha[1] + sum[1];
                    scale_o(o, alpha);
                    pack_p(p, s, ones);
                    /* P1 to consumer 0 first (its slab is free: consumer 0's last read of it
                     * released buffer 1's left half, which this pair's S waited for) */
                    store_p(p1_slab, p, r0, tq);
                    kl__fence_proxy_async_shared();
                    kl__mbar_arrive(mb(B_RING + S_P1));
                    /* O[:, 256:512] += P1 V1 (right half of buffer 1), P1 from registers */
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    pv_rs(o, p, kbuf1 + (uint32_t)HALF * SLAB);
                    kl__wgmma_commit();
                    /* O[:, 256:512] += P0 V0 (right half of buffer 0), P0 (at m1) from buffer 0's rope slab */
                    kl__mbar_wait(mb(B_RING + S_P0), ph);
                    kl__wgmma_fence();
                    pv_ss(o, p0_slab, kbuf0 + (uint32_t)HALF * SLAB);
                    kl__wgmma_commit();
                    kl__wgmma_wait<1>();
                    fence_p(p);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_R + 1)); /* buffer 1's slabs 4-8 */
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(o);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_R + 0)); /* buffer 0's slabs 4-8, P0 read */
                }
            }
            /* ---- the row sums of both consumers (both at the final maximum) ---- */
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            }
            if (tq == 0u) {
                kl__mma_st_shared_f32(sbase + OFF_L + (wg * 64u + r0) * 4u, l[0]);
                kl__mma_st_shared_f32(sbase + OFF_L + (wg * 64u + r0 + 8u) * 4u, l[1]);
            }
            kl__mma_bar_sync(2u, 256u);
            l[0] += kl__mma_ld_shared_f32(sbase + OFF_L + ((wg ^ 1u) * 64u + r0) * 4u);
            l[1] += kl__mma_ld_shared_f32(sbase + OFF_L + ((wg ^ 1u) * 64u + r0 + 8u) * 4u);
            store_o(o, l, output + ((size_t)w.b * seq_len * num_q_heads + w.h) * DV, w.q0 + r0, seq_len,
                    (size_t)num_q_heads * DV, wg * 256u, tq);
        } else {
            /* ---- D 320: consumer wg owns rows qw .. qw + 63 ---- */
            const uint32_t qw = w.q0 + 64u * wg, qrow = qw + r0, qtile = sbase + OFF_Q + wg * TILE;
            const uint32_t mine = qw >= seq_len ? 0u
                                  : causal      ? (min(seq_len, qw + 64u) + (uint32_t)BN - 1u) / (uint32_t)BN
                                                : w.ntiles;
            /* The ring cursor: key tile j's stage st and the parity ph of its round. */
            uint32_t st = c % (uint32_t)STAGES, ph = (c / (uint32_t)STAGES) & 1u;
            auto advance = [](uint32_t &a, uint32_t &b) {
                if (++a == (uint32_t)STAGES) {
                    a = 0u;
                    b ^= 1u;
                }
            };
            auto kbuf = [sbase](uint32_t stage) { return sbase + OFF_K + stage * TILE; };
            if (mine > 0u) {
                kl__wgmma_fence_operand(s);
                kl__mbar_wait(mb(B_RING + st), ph);
                kl__wgmma_fence();
                s_products(s, qtile, kbuf(st), 0, NSLAB, true);
                kl__wgmma_commit();
                kl__wgmma_wait<0>();
                kl__wgmma_fence_operand(s);
                if (mine == 1u && elected) kl__mbar_arrive(qempty);
                float mx[2], sum[2];
                scale_mask_max(s, mx, scale_log2, 0u, qrow, seq_len, causal, tq);
                m[0] = mx[0];
                m[1] = mx[1];
                exp_rows(s, m, sum);
                pack_p(p, s, ones);
                /* the row sums of the weights as applied (bf16) */
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                    for (int i = 0; i < 4; ++i) l[i & 1] += kl__mma_bf16_lo(p[kk][i]) + kl__mma_bf16_hi(p[kk][i]);
            }
            /* Key tiles j < mine - 1: S_{j+1} and P_j V_j in flight together, the
             * softmax of S_{j+1} (fp32, in s) while P_j V_j runs; P_{j+1} replaces P_j
             * in the operand registers once P_j V_j is done. Straight-line: a wgmma
             * issue behind a branch made ptxas serialise them (C7514). */
#pragma unroll 1
            for (uint32_t j = 0; j + 1u < mine; ++j) {
                uint32_t st1 = st, ph1 = ph;
                advance(st1, ph1);
                kl__wgmma_fence_operand(o);
                kl__mbar_wait(mb(B_RING + st1), ph1);
                kl__wgmma_fence();
                s_products(s, qtile, kbuf(st1), 0, NSLAB, true); /* S_{j+1}: s is free (S_j is P_j) */
                kl__wgmma_commit();
                pv_rs(o, p, kbuf(st)); /* O += P_j V_j, P_j from registers */
                kl__wgmma_commit();
                kl__wgmma_wait<1>(); /* S_{j+1} */
                kl__wgmma_fence_operand(s);
                if (j + 2u == mine && elected) kl__mbar_arrive(qempty); /* its last S is done */
                float mx[2], sum[2], alpha[2];
                scale_mask_max(s, mx, scale_log2, (j + 1u) * (uint32_t)BN, qrow, seq_len, causal, tq);
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const float mn = fmaxf(m[r], mx[r]);
                    alpha[r] = kl__mma_exp2(m[r] - finite_or_zero(mn));
                    m[r] = mn;
                }
                exp_rows(s, m, sum);
                kl__wgmma_wait<0>(); /* P_j V_j */
                kl__wgmma_fence_operand(o);
                fence_p(p);
                if (elected) kl__mbar_arrive(mb(B_RING + STAGES + st)); /* this warp is done with tile j */
                pack_p(p, s, ones);
                float ls[2] = {0.0f, 0.0f};
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                    for (int i = 0; i < 4; ++i) ls[i & 1] += kl__mma_bf16_lo(p[kk][i]) + kl__mma_bf16_hi(p[kk][i]);
                l[0] = l[0] * alpha[0] + ls[0];
                l[1] = l[1] * alpha[1] + ls[1];
                scale_o(o, alpha);
                st = st1;
                ph = ph1;
            }
            if (mine > 0u) { /* the last tile: P V only */
                kl__wgmma_fence_operand(o);
                kl__wgmma_fence();
                pv_rs(o, p, kbuf(st));
                kl__wgmma_commit();
                kl__wgmma_wait<0>();
                kl__wgmma_fence_operand(o);
                fence_p(p);
                if (elected) kl__mbar_arrive(mb(B_RING + STAGES + st));
                advance(st, ph);
            }
            /* tiles the producer loaded for the other consumer's rows: pass them on */
            for (uint32_t jj = mine; jj < w.ntiles; ++jj) {
                kl__mbar_wait(mb(B_RING + st), ph);
                if (elected) kl__mbar_arrive(mb(B_RING + STAGES + st));
                advance(st, ph);
            }
            if (mine == 0u && elected) kl__mbar_arrive(qempty);
            c += w.ntiles;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            }
            if (mine > 0u)
                store_o(o, l, output + ((size_t)w.b * seq_len * num_q_heads + w.h) * DV, qrow, seq_len,
                        (size_t)num_q_heads * DV, 0u, tq);
        }
    }
#else
    /* No wgmma on this target: kl_mla_absorbed_attention_tma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
