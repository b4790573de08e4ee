/* Reference: tests/mla_decode/mla_decode_reference.h (attention, float64)
 * Tests:
 *   tests/mla_decode/mla_decode_emulated_test.cc (CPU emulator, through the generated builders)
 *   tests/mla_decode/mla_decode_test.cc (GPU: driver-encoded maps, float64 reference, a CUDA graph)
 *   tests/mla_decode/mla_decode_launch_test.cc (launcher and builders over the recording backend)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_decode:mla_decode_emulated_test \
 *     //tests/mla_decode:mla_decode_test \
 *     //tests/mla_decode:mla_decode_launch_test
 */
#include "klaunch/mla_decode.cuh"

/* mla_decode_attn_bf16_tma: MLA decode attention over a paged bf16 latent
 * cache on Hopper's copy engine and warpgroup tensor cores (sm_90a), the
 * contract and schedule of mla_decode_attn_bf16_mma.
 *
 *   q_map     q [batch][R = s_q * h_q][D] as (D, R, batch), box 64 x 64 x 1
 *   cache_map kv_cache [num_blocks][page_size][D] as (D, page_size, num_blocks), box 64 x 64 x 1
 *
 * A block takes the 64 rows 64 x .. + 63 of every piece of part y
 * (mla_decode_common.cuh). Rows past R arrive as zeros (the map's extent)
 * and are never written. Every box is 64 bf16 wide with the 128-byte
 * swizzle: the copy engine lays it out as one 8 KiB slab of the wgmma
 * layout, so a Q tile or a key tile of 64 positions is D / 64 boxes (9 at
 * D 576, 5 at D 320) and no thread touches the data on its way in. A key
 * tile is 64 positions of one page (page_size % 64 == 0): box coordinates
 * (64 slab, position % page_size, block_table[b][position / page_size]); a
 * page outside [0, num_blocks) is out of the map and arrives as zeros, and
 * its keys weigh 0.
 *
 * The design is mla_absorbed_attn_tma's D 576 seesaw (kernels/mla_prefill/,
 * docs/MLA_PREFILL.md), for both widths:
 *   - Block = 3 warpgroups. Warpgroup 2 is the producer (setmaxnreg.dec
 *     40): lane 0 of warp 0 copies Q and buffer 0's left half (V slabs
 *     0 .. HALF - 1), warp 1 buffer 0's right half (the other V slabs and
 *     the rope slab), warp 2 buffer 1's right half, warp 3 buffer 1's left
 *     half, each behind its own ready / free mbarriers.
 *   - Warpgroups 0 and 1 are the consumers (setmaxnreg.inc 232): they take
 *     a piece's key tiles in pairs, consumer 0 the even tile (buffer 0),
 *     consumer 1 the odd one (buffer 1), each computing the whole S
 *     (m64n64, Q and K from shared memory) of its tile; consumer 0 holds
 *     O's columns 0 .. DV / 2 - 1, consumer 1 the rest (m64n256 at D 576,
 *     m64n128 at D 320: 128 or 64 fp32 registers). Per pair: consumer 0's
 *     softmax publishes its running maximum m0; consumer 1's takes m1 =
 *     max(m0, its scores) and publishes m1; each applies its own P from
 *     registers to its columns (RS) and the other's P from shared memory
 *     (SS): consumer 0 rescales its P by exp2(m0 - m1) into buffer 0's
 *     rope slab (dead once its S is done), consumer 1 writes its P to a
 *     slab of its own. Consumer 0 issues the next pair's S before its last
 *     product of this pair completes.
 *   - A piece with an odd tile count is padded with a tile the producer
 *     does not load (its ready barriers are arrived without bytes): its S
 *     and the products that would read it are skipped, its keys weigh 0.
 *   - Positions past the length on the piece's last page are whatever the
 *     cache holds there (NaN, in the tests): their scores are masked, and
 *     before a consumer's P V reads such a tile each consumer zeroes those
 *     rows of the V slabs it reads (after the tile's S is done), so a
 *     weight of 0 never meets a NaN.
 *   - Online softmax in base 2 with masks only on tiles that need them
 *     (past a row's visible length: len - s_q + 1 + its token); the row
 *     sums in fp32; out and lse (natural log) of unsplit sequences, the
 *     split's normalised output and lse into its workspace slot otherwise.
 *   - A programmatic dependent launch: griddepcontrol.wait before the
 *     first global access, launch_dependents after it (the combine may get
 *     resident as soon as SMs free up).
 *
 * Shared memory (the spec's 384 D + 10368): Q, two key buffers, consumer
 * 1's P slab, 64 running maxima, 2 x 64 row sums, the mbarriers, and 1 KiB
 * to align the swizzle's 1024-byte pattern.
 */

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "../common/kl_ptx_sm90.cuh"
#include "mla_decode_common.cuh"

namespace mla_decode_attn_bf16_tma_ {

constexpr uint32_t D = MLA_HDIM;
constexpr uint32_t DV = MLA_HDIM - 64;    /* kv_lora: output width */
constexpr uint32_t NV = DV / 2;           /* output columns a consumer */
constexpr uint32_t NSLAB = D / 64;        /* 128-byte slabs (one box each) of a Q or key row */
constexpr uint32_t HALF = NV / 64;        /* slabs 0 .. HALF - 1: consumer 0's V columns */
constexpr uint32_t BN = 64, THREADS = 384;
constexpr uint32_t SLAB = 64 * 128;       /* one box: 64 rows x 64 bf16 */
constexpr uint32_t TILE = NSLAB * SLAB;
constexpr uint32_t OFF_Q = 0;
constexpr uint32_t OFF_K = OFF_Q + TILE;
constexpr uint32_t OFF_P1 = OFF_K + 2 * TILE; /* consumer 1's P */
constexpr uint32_t OFF_M = OFF_P1 + SLAB;     /* float [64] running maxima */
constexpr uint32_t OFF_L = OFF_M + 256u;      /* float [2][64] row sums */
constexpr uint32_t OFF_BAR = OFF_L + 512u;    /* mbarriers, 8 bytes each */
constexpr uint32_t SMEM = OFF_BAR + 384u;

static_assert(DV == 512 || DV == 256, "the two widths");
static_assert(NV % 64 == 0 && 2 * HALF + 1 == NSLAB, "V is 2 HALF slabs, then the rope slab");
static_assert(THREADS == KL_THREADS_mla_decode_attn_bf16_tma, "two consumer warpgroups and a producer");
static_assert(SMEM + 1024 == KL_SHARED_BYTES_mla_decode_attn_bf16_tma,
              "the spec's shared_bytes: the layout above and 1 KiB to align it");
static_assert(KL_TMAP_mla_decode_attn_bf16_tma_cache_map_BYTES == SLAB &&
                  KL_TMAP_mla_decode_attn_bf16_tma_q_map_BYTES == SLAB,
              "one box is one 8 KiB slab");

/* mbarriers (index * 8 past OFF_BAR): Q full (the producer's expect_tx,
 * count 1) and Q empty (one elected lane of each consumer warp, 8); per key
 * buffer b: ready / free of its left half (slabs 0 .. HALF - 1) and right
 * half, the free counts 4 (the warps of the consumer that reads it last:
 * consumer 0 the left, consumer 1 the right); the pair's handoffs M0 (m0
 * published), M1, P0 (consumer 0's P in buffer 0's rope slab), P1, count 128. */
enum : uint32_t { B_QFULL = 0, B_QEMPTY = 1, B_RING = 2 };
enum : uint32_t { S_READY_L = 0, S_READY_R = 2, S_FREE_L = 4, S_FREE_R = 6, S_M0 = 8, S_M1 = 9, S_P0 = 10, S_P1 = 11 };
static_assert(B_RING + 12 <= 384 / 8, "the mbarriers fit their bytes");
/* Named barriers: 1 the consumers' row sums (256 threads), 2 + w consumer w's zeroed rows (128). */
enum : uint32_t { NB_SUMS = 1, NB_ZERO = 2 };

/* A key tile of a piece: its first position, the page it is on (or -1 when
 * the tile is padding or past the table), whether its keys can weigh, and
 * how many of its rows hold positions below the length. */
struct Tile {
    uint32_t kb, rows;
    int32_t page;
    bool live;
};

/* The table entry of tile j of a piece (-1 past the piece): loaded a pair
 * ahead of its use, since a table entry is an L2 round trip (shared memory
 * leaves L1 little room), which in the consumers' path stalled them. */
__device__ __forceinline__ int32_t page_at(const mla_decode__piece &pc, uint32_t j, const int32_t *table_row,
                                           uint32_t page_size) {
    return pc.t0 + j < pc.t1 ? table_row[(pc.t0 + j) * BN / page_size] : -1;
}

__device__ __forceinline__ Tile tile_of(const mla_decode__piece &pc, uint32_t j, int32_t page, uint32_t num_blocks) {
    Tile t;
    t.kb = (pc.t0 + j) * BN;
    t.page = -1;
    t.rows = 0u;
    t.live = false;
    if (pc.t0 + j < pc.t1) {
        t.page = page;
        t.live = t.page >= 0 && (uint32_t)t.page < num_blocks;
        t.rows = min(BN, pc.len - t.kb);
    }
    return t;
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
    for (uint32_t sl = 0; sl < NSLAB; ++sl) {
        if (sl < s0 || sl >= s1) continue;
#pragma unroll
        for (uint32_t kk = 0; kk < 4u; ++kk) {
            const uint64_t off = (sl * SLAB + kk * 32u) >> 4;
            kl__wgmma_bf16_ss<64, 0>(s, qd + off, kd + off, (first && sl == s0 && kk == 0u) ? 0u : 1u);
        }
    }
}

/* O += P V over the 64 keys of a tile: V N-major, NV columns (HALF slabs) from vbase. */
__device__ __forceinline__ void pv_rs(float (&o)[NV / 2], uint32_t (&p)[4][4], uint32_t vbase) {
#pragma unroll
    for (uint32_t kk = 0; kk < BN / 16u; ++kk)
        kl__wgmma_bf16_rs<NV, 1>(o, p[kk], kl__wgmma_desc(vbase + kk * 16u * 128u, SLAB, 1024u), 1u);
}
__device__ __forceinline__ void pv_ss(float (&o)[NV / 2], uint32_t p_slab, uint32_t vbase) {
#pragma unroll
    for (uint32_t kk = 0; kk < BN / 16u; ++kk)
        kl__wgmma_bf16_ss<NV, 1>(o, kl__wgmma_desc(p_slab + kk * 32u, 16u, 1024u),
                                 kl__wgmma_desc(vbase + kk * 16u * 128u, SLAB, 1024u), 1u);
}
/* After the wait_group that completes the products reading P: its registers are kept until here. */
__device__ __forceinline__ void fence_p(uint32_t (&p)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) kl__wgmma_fence_operand(p[kk]);
}
#endif

/* Scales a 64 x 64 S fragment to log2 units, masks keys a row may not see
 * (all of a tile that cannot weigh), and returns the rows' maxima over the
 * quad. This thread's rows see vis[0], vis[1] positions; keys kb + 8i +
 * 2tq + (e & 1). */
__device__ __forceinline__ void scale_mask_max(float (&s)[32], float (&mx)[2], float scale_log2, const Tile &t,
                                               const uint32_t (&vis)[2], uint32_t tq) {
    const bool need_mask = !t.live || t.kb + BN > min(vis[0], vis[1]);
    mx[0] = mx[1] = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float v = s[4 * i + e] * scale_log2;
            if (need_mask) {
                const uint32_t key = t.kb + (uint32_t)(8 * i) + 2u * tq + (uint32_t)(e & 1);
                if (!t.live || key >= vis[e >> 1]) v = -INFINITY;
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

/* A running maximum that is still -inf (no visible key yet) subtracts as 0. */
__device__ __forceinline__ float finite_or_zero(float m) { return m == -INFINITY ? 0.0f : m; }

/* s = exp2(s - m) per row (in place, fp32); the rows' sums of this thread's part. */
__device__ __forceinline__ void exp_rows(float (&s)[32], const float (&m)[2], float (&sum)[2]) {
    const float mu[2] = {finite_or_zero(m[0]), finite_or_zero(m[1])};
    sum[0] = sum[1] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        s[i] = kl__ex2_approx_ftz(s[i] - mu[(i >> 1) & 1]);
        sum[(i >> 1) & 1] += s[i];
    }
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}

/* The S fragment as the RS operand of the four k16 steps of P V (the
 * m64n16 accumulator's registers pair into matrix A's fragment:
 * kl_ptx_sm90.cuh), each weight times scale[row]. */
__device__ __forceinline__ void pack_p(uint32_t (&p)[4][4], const float (&s)[32], const float (&scale)[2]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            p[kk][i] = pack_bf16(s[8 * kk + 2 * i] * scale[i & 1], s[8 * kk + 2 * i + 1] * scale[i & 1]);
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
            kl__st_shared_u32(slab + r * 128u + ((chunk ^ (r & 7u)) << 4) + 4u * tq, p[kk][i]);
        }
}

__device__ __forceinline__ void scale_o(float (&o)[NV / 2], const float (&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (uint32_t i = 0; i < NV / 8; ++i) {
            o[4 * i] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
/* Zeroes rows [t.rows, 64) of slabs [s0, s1) of a key tile (positions past
 * the length), by the 128 threads of one consumer, then makes them visible
 * to its tensor-core reads. */
__device__ __forceinline__ void zero_stale(uint32_t ktile, uint32_t s0, uint32_t s1, const Tile &t, uint32_t tw,
                                           uint32_t wg) {
    const uint32_t first = t.rows, n = (BN - first) * 8u * (s1 - s0); /* 16-byte chunks */
    for (uint32_t i = tw; i < n; i += 128u) {
        const uint32_t sl = s0 + i / ((BN - first) * 8u), rem = i % ((BN - first) * 8u);
        kl__st_shared_v4(ktile + sl * SLAB + (first + rem / 8u) * 128u + (rem % 8u) * 16u, make_uint4(0u, 0u, 0u, 0u));
    }
    kl__fence_proxy_async_shared();
    kl__bar_sync(NB_ZERO + wg, 128u);
}
#endif

}  // namespace mla_decode_attn_bf16_tma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_attn_bf16_tma, 1)
mla_decode_attn_bf16_tma(KL_PARAMS_mla_decode_attn_bf16_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace mla_decode_attn_bf16_tma_;
    KL_DYNAMIC_SHARED(mla_decode_attn_bf16_tma__smem, 16);

    /* The launcher refuses these; a raw launch must still not touch memory it does not own. */
    if (head_dim != D || blockDim.x != THREADS || kl__dynamic_smem_size() < SMEM + 1024u || page_size == 0u ||
        page_size % BN != 0u)
        return;
    kl__griddep_wait(); /* the kernel before this one on the stream (the schedule) has completed */
    kl__griddep_launch_dependents();
    const uint32_t rows = s_q * h_q, num_parts = gridDim.y;
    if (!mla_decode__sched_ok(sched, batch, num_parts)) {
        if (blockIdx.y == 0u) mla_decode__poison_all(out, lse, batch, rows, DV);
        return;
    }
    const uint32_t row0 = blockIdx.x * 64u;
    if (row0 >= rows) return;
    const uint64_t max_len = (uint64_t)max_blocks_per_seq * page_size;
    const mla_decode__part pt = mla_decode__load_part(sched, blockIdx.y);

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    /* The swizzle pattern repeats every 1024 bytes of address: slabs start on such a boundary. */
    const uint32_t sbase = ((uint32_t)__cvta_generic_to_shared(mla_decode_attn_bf16_tma__smem) + 1023u) & ~1023u;
    const uint32_t bar = sbase + OFF_BAR;
    auto mb = [bar](uint32_t i) { return bar + 8u * i; };
    const uint32_t qfull = mb(B_QFULL), qempty = mb(B_QEMPTY);

    if (tid == 0u) {
        kl__mbar_init(qfull, 1u);
        kl__mbar_init(qempty, 8u);
        for (uint32_t b2 = 0; b2 < 2u; ++b2) {
            kl__mbar_init(mb(B_RING + S_READY_L + b2), 1u);
            kl__mbar_init(mb(B_RING + S_READY_R + b2), 1u);
            kl__mbar_init(mb(B_RING + S_FREE_L + b2), 4u);
            kl__mbar_init(mb(B_RING + S_FREE_R + b2), 4u);
        }
        for (uint32_t i = S_M0; i <= S_P1; ++i) kl__mbar_init(mb(B_RING + i), 128u);
        kl__fence_proxy_async_shared(); /* the initialised mbarriers, to the copy engine */
    }
    __syncthreads();

    mla_decode__piece pc;
    if (wg == 2u) {
        /* ---- producer: lane 0 of each warp issues copies; the rest leave ---- */
        kl__setmaxnreg_dec<40>();
        const uint32_t pw = (tid >> 5) & 3u;
        if ((tid & 31u) != 0u) return;
        /* warp 0: Q and buffer 0's left half; 1: buffer 0's right half; 2: buffer 1's right; 3: buffer 1's left */
        const uint32_t buf = pw >> 1, right = (pw == 1u || pw == 2u) ? 1u : 0u;
        const uint32_t sl0 = right ? HALF : 0u, sl1 = right ? NSLAB : HALF;
        const uint32_t ready = mb(B_RING + (right ? S_READY_R : S_READY_L) + buf);
        const uint32_t freed = mb(B_RING + (right ? S_FREE_R : S_FREE_L) + buf);
        const uint32_t dst = sbase + OFF_K + buf * TILE;
        if (pw == 0u) {
            kl__prefetch_tensormap(&q_map);
            kl__prefetch_tensormap(&cache_map);
        }
        uint32_t n = 0, c = 0; /* pieces with tiles, and pairs, loaded in this block */
        for (uint32_t b = pt.bs; mla_decode__piece_at(pt, b, sched, lengths, batch, num_parts, max_len, pc); ++b) {
            const uint32_t ntiles = pc.t1 - pc.t0;
            if (ntiles == 0u) continue;
            const int32_t *table_row = block_table + (uint64_t)b * max_blocks_per_seq;
            if (pw == 0u) {
                if (n > 0u) kl__mbar_wait(qempty, (n - 1u) & 1u); /* both consumers' last S of the last piece */
                kl__mbar_arrive_expect_tx(qfull, TILE);
#pragma unroll
                for (uint32_t sl = 0; sl < NSLAB; ++sl)
                    kl__tma_load_3d(sbase + OFF_Q + sl * SLAB, &q_map, (int32_t)(64u * sl), (int32_t)row0, (int32_t)b,
                                    qfull);
            }
            const uint32_t padded = ntiles + (ntiles & 1u);
            int32_t pg_next = page_at(pc, buf, table_row, page_size); /* a tile ahead of its copies */
            for (uint32_t j = buf; j < padded; j += 2u, ++c) {
                const int32_t pg = pg_next;
                pg_next = page_at(pc, j + 2u, table_row, page_size);
                if (c > 0u) kl__mbar_wait(freed, (c - 1u) & 1u);
                if (j < ntiles) {
                    const Tile t = tile_of(pc, j, pg, num_blocks);
                    kl__mbar_arrive_expect_tx(ready, (sl1 - sl0) * SLAB);
                    for (uint32_t sl = sl0; sl < sl1; ++sl)
                        kl__tma_load_3d(dst + sl * SLAB, &cache_map, (int32_t)(64u * sl), (int32_t)(t.kb % page_size),
                                        t.page, ready);
                } else {
                    kl__mbar_arrive(ready); /* the padding tile: nothing to wait for */
                }
            }
            ++n;
        }
        return;
    }

    /* ---- consumers ---- */
    kl__setmaxnreg_inc<232>();
    const uint32_t tw = tid & 127u;
    const uint32_t w4 = tw >> 5, lane = tid & 31u, tq = lane & 3u;
    const uint32_t r0 = w4 * 16u + (lane >> 2); /* this thread's rows of the 64-row tile: r0, r0 + 8 */
    const float scale_log2 = softmax_scale * 1.4426950408889634f;
    const bool elected = kl__elect_one();
    const float ones[2] = {1.0f, 1.0f};
    const uint32_t kbuf0 = sbase + OFF_K, kbuf1 = kbuf0 + TILE;
    const uint32_t p0_slab = kbuf0 + (NSLAB - 1u) * SLAB; /* buffer 0's rope slab */
    const uint32_t p1_slab = sbase + OFF_P1;
    const uint32_t my_v0 = wg * HALF, my_v1 = my_v0 + HALF; /* the V slabs this consumer reads */

    float o[NV / 2];
    float s[32];
    uint32_t p[4][4];
    uint32_t n = 0, c = 0; /* pieces with tiles, and pairs, passed in this block */

    for (uint32_t b = pt.bs; mla_decode__piece_at(pt, b, sched, lengths, batch, num_parts, max_len, pc); ++b) {
        const uint32_t ntiles = pc.t1 - pc.t0;
        const int32_t *table_row = block_table + (uint64_t)b * max_blocks_per_seq;
        const uint32_t vis[2] = {mla_decode__visible(pc.len, row0 + r0, h_q, s_q),
                                 mla_decode__visible(pc.len, row0 + r0 + 8u, h_q, s_q)};
#pragma unroll
        for (uint32_t i = 0; i < NV / 2; ++i) o[i] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

        if (ntiles > 0u) {
            kl__mbar_wait(qfull, n & 1u);
            const uint32_t npairs = (ntiles + 1u) / 2u;
            int32_t pg0 = page_at(pc, 0u, table_row, page_size), pg1 = page_at(pc, 1u, table_row, page_size);
            for (uint32_t i = 0; i < npairs; ++i, ++c) {
                const uint32_t ph = c & 1u;
                const Tile t0 = tile_of(pc, 2u * i, pg0, num_blocks);
                const Tile t1 = tile_of(pc, 2u * i + 1u, pg1, num_blocks);
                pg0 = page_at(pc, 2u * i + 2u, table_row, page_size); /* the next pair's, a pair ahead */
                pg1 = page_at(pc, 2u * i + 3u, table_row, page_size);
                const bool pad1 = 2u * i + 1u >= ntiles; /* tile 1 is padding: no data, nothing reads it */
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
                    scale_mask_max(s, mx, scale_log2, t0, vis, tq);
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        m0[r] = fmaxf(m[r], mx[r]);
                        alpha[r] = kl__ex2_approx_ftz(m[r] - finite_or_zero(m0[r]));
                    }
                    __syncwarp(); /* the quad's reads of the last pair's m1 before m0 replaces it */
                    if (tq == 0u) {
                        kl__st_shared_f32(sbase + OFF_M + r0 * 4u, m0[0]);
                        kl__st_shared_f32(sbase + OFF_M + (r0 + 8u) * 4u, m0[1]);
                    }
                    kl__mbar_arrive(mb(B_RING + S_M0)); /* m0 published */
                    exp_rows(s, m0, sum);
                    l[0] = l[0] * alpha[0] + sum[0];
                    l[1] = l[1] * alpha[1] + sum[1];
                    scale_o(o, alpha);
                    pack_p(p, s, ones);
                    if (t0.rows < BN) zero_stale(kbuf0, my_v0, my_v1, t0, tw, wg); /* its S is done */
                    /* O[:, 0:NV] += P0 V0 (left half of buffer 0), P0 from registers */
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    pv_rs(o, p, kbuf0);
                    kl__wgmma_commit();
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(o);
                    fence_p(p);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_L + 0)); /* buffer 0's left half */
                    /* m1 = max(m0, consumer 1's scores): P0 and O to that maximum */
                    kl__mbar_wait(mb(B_RING + S_M1), ph);
                    float scale[2];
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float m1 = kl__ld_shared_f32(sbase + OFF_M + (r0 + 8u * (uint32_t)r) * 4u);
                        scale[r] = kl__ex2_approx_ftz(finite_or_zero(m0[r]) - finite_or_zero(m1));
                        m[r] = m1;
                        l[r] *= scale[r];
                    }
                    pack_p(p, s, scale);
                    store_p(p0_slab, p, r0, tq); /* buffer 0's rope slab: its S is done */
                    kl__fence_proxy_async_shared();
                    kl__mbar_arrive(mb(B_RING + S_P0));
                    scale_o(o, scale);
                    /* O[:, 0:NV] += P1 V1 (left half of buffer 1), P1 from consumer 1's slab */
                    kl__mbar_wait(mb(B_RING + S_P1), ph);
                    if (!pad1 && t1.rows < BN) zero_stale(kbuf1, my_v0, my_v1, t1, tw, wg); /* consumer 1's S is done */
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    if (!pad1) pv_ss(o, p1_slab, kbuf1);
                    kl__wgmma_commit();
                    if (i + 1u < npairs) {
                        /* the next pair's S, its left half while P1 V1 runs */
                        kl__wgmma_fence_operand(s);
                        kl__mbar_wait(mb(B_RING + S_READY_L + 0), ph ^ 1u);
                        kl__wgmma_fence();
                        s_products(s, sbase + OFF_Q, kbuf0, 0, HALF, true);
                        kl__wgmma_commit();
                        kl__wgmma_wait<1>();
                        if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_L + 1)); /* buffer 1's left half, P1 read */
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
                    if (!pad1) s_products(s, sbase + OFF_Q, kbuf1, HALF, NSLAB, true);
                    kl__wgmma_commit();
                    kl__mbar_wait(mb(B_RING + S_READY_L + 1), ph);
                    kl__wgmma_fence();
                    if (!pad1) s_products(s, sbase + OFF_Q, kbuf1, 0, HALF, false);
                    kl__wgmma_commit();
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(s);
                    if (i + 1u == npairs && elected) kl__mbar_arrive(qempty);
                    float mx[2], sum[2], alpha[2], m1[2];
                    scale_mask_max(s, mx, scale_log2, t1, vis, tq); /* a padding tile is all -inf */
                    kl__mbar_wait(mb(B_RING + S_M0), ph);
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float m0 = kl__ld_shared_f32(sbase + OFF_M + (r0 + 8u * (uint32_t)r) * 4u);
                        m1[r] = fmaxf(m0, mx[r]); /* m0 >= m: consumer 0 started from this maximum */
                        alpha[r] = kl__ex2_approx_ftz(m[r] - finite_or_zero(m1[r]));
                        m[r] = m1[r];
                    }
                    __syncwarp(); /* the quad's reads of m0 (its rows are this warp's) before m1 replaces it */
                    if (tq == 0u) {
                        kl__st_shared_f32(sbase + OFF_M + r0 * 4u, m1[0]);
                        kl__st_shared_f32(sbase + OFF_M + (r0 + 8u) * 4u, m1[1]);
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
                    if (!pad1 && t1.rows < BN) zero_stale(kbuf1, my_v0, my_v1, t1, tw, wg); /* its S is done */
                    /* O[:, NV:DV] += P1 V1 (right half of buffer 1), P1 from registers */
                    kl__wgmma_fence_operand(o);
                    kl__wgmma_fence();
                    if (!pad1) pv_rs(o, p, kbuf1 + HALF * SLAB);
                    kl__wgmma_commit();
                    /* O[:, NV:DV] += P0 V0 (right half of buffer 0), P0 (at m1) from buffer 0's rope slab */
                    kl__mbar_wait(mb(B_RING + S_P0), ph);
                    if (t0.rows < BN) zero_stale(kbuf0, my_v0, my_v1, t0, tw, wg); /* consumer 0's S is done */
                    kl__wgmma_fence();
                    pv_ss(o, p0_slab, kbuf0 + HALF * SLAB);
                    kl__wgmma_commit();
                    kl__wgmma_wait<1>();
                    fence_p(p);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_R + 1)); /* buffer 1's right half */
                    kl__wgmma_wait<0>();
                    kl__wgmma_fence_operand(o);
                    if (elected) kl__mbar_arrive(mb(B_RING + S_FREE_R + 0)); /* buffer 0's right half, P0 read */
                }
            }
            ++n;
        }

        /* ---- the row sums of both consumers (both at the final maximum) ---- */
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        if (ntiles > 0u) {
            if (tq == 0u) {
                kl__st_shared_f32(sbase + OFF_L + (wg * 64u + r0) * 4u, l[0]);
                kl__st_shared_f32(sbase + OFF_L + (wg * 64u + r0 + 8u) * 4u, l[1]);
            }
            kl__bar_sync(NB_SUMS, 256u);
            l[0] += kl__ld_shared_f32(sbase + OFF_L + ((wg ^ 1u) * 64u + r0) * 4u);
            l[1] += kl__ld_shared_f32(sbase + OFF_L + ((wg ^ 1u) * 64u + r0 + 8u) * 4u);
        }
        /* ---- out and lse, or the split's slot: this consumer's NV columns ---- */
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const uint32_t row = row0 + r0 + 8u * (uint32_t)r;
            if (row >= rows) continue;
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            const uint32_t c0 = wg * NV + 2u * tq;
            if (pc.split) {
                float *w = mla_decode__ws_o(workspace, pc.slot, rows, DV, row) + c0;
                const bool ws8 = ((uintptr_t)workspace & 7u) == 0u; /* pairs sit at even float offsets */
#pragma unroll
                for (uint32_t i = 0; i < NV / 8; ++i) {
                    const float a = o[4 * i + 2 * r] * inv, e = o[4 * i + 2 * r + 1] * inv;
                    if (ws8) {
                        *reinterpret_cast<float2 *>(w + 8u * i) = make_float2(a, e);
                    } else {
                        w[8u * i] = a;
                        w[8u * i + 1u] = e;
                    }
                }
                if (wg == 0u && tq == 0u)
                    *mla_decode__ws_lse(workspace, num_parts, pc.slot, rows, DV, row) = mla_decode__lse(m[r], l[r]);
            } else {
                __nv_bfloat16 *orow = out + ((uint64_t)b * rows + row) * DV + c0;
                const bool out4 = ((uintptr_t)out & 3u) == 0u; /* pairs sit at even element offsets */
#pragma unroll
                for (uint32_t i = 0; i < NV / 8; ++i) {
                    const uint32_t wv = pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
                    if (out4) {
                        *reinterpret_cast<uint32_t *>(orow + 8u * i) = wv;
                    } else {
                        reinterpret_cast<unsigned short *>(orow)[8u * i] = (unsigned short)(wv & 0xffffu);
                        reinterpret_cast<unsigned short *>(orow)[8u * i + 1u] = (unsigned short)(wv >> 16);
                    }
                }
                if (wg == 0u && tq == 0u) lse[(uint64_t)b * rows + row] = mla_decode__lse(m[r], l[r]);
            }
        }
    }
#else
    /* No wgmma on this target: kl_mla_decode_attn_bf16_tma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
