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

/* mla_decode_attn_fp8_tma: MLA decode attention over a dense fp8 cache
 * (klaunch/mla_decode_layout.h's token) on Hopper's copy engine and
 * warpgroup tensor cores (sm_90a), the contract and schedule of
 * mla_decode_attn_fp8_mma.
 *
 * Why another shape than mla_decode_attn_bf16_tma's: a 64-row query tile
 * (the M of wgmma) wastes 3/4 of the tensor work on the common 16 rows
 * (h_q 16, s_q 1), which at fp8's rate of keys (1.76x bf16's for the same
 * bytes) would bound the kernel by the tensor cores, and the dequantised
 * tiles leave no shared memory for a second Q tile's worth. So the products
 * are transposed: a block takes 16 rows (the N of wgmma) and 64 keys (its
 * M):
 *   S^T [64 keys][16 rows] = K [64][D] Q^T          m64n16k16 x D / 16, A and B K-major
 *   O^T [DV][16]          += V^T [DV][64] P^T [64][16]   m64n16k16 x DV / 64 x 4, A M-major
 * Q is a 16-row box a slab (q_map box 64 x 16 x 1), so rows past R arrive
 * as zeros and are never written.
 *
 * Block = 2 warpgroups, 256 threads (255 registers each: no setmaxnreg).
 *   - Warpgroup 1 brings and dequantises: its thread 0 issues the Q boxes
 *     and one bulk copy (cp.async.bulk) per 32 tokens of a page (only the
 *     tokens below the length; none for a page outside [0, num_blocks))
 *     into two raw slots; all 128 threads turn each 32 raw tokens into the
 *     bf16 rows of a key tile in the 128-byte-swizzle layout (4 threads a
 *     token: one a 128-value scale block at D 576, half of one at D 320,
 *     two rope chunks each; fp32 e4m3 * scale, rounded to bf16, as the
 *     contract says), zeros for tokens that do not weigh; two key stages.
 *   - Warpgroup 0 computes: S^T of tile j + 1 is issued before the softmax
 *     of tile j; the softmax's row maxima go across its 4 warps through
 *     shared memory; P^T is paired by a shuffle (lane ^ 4) into K-major
 *     words of a 16-row slab; O^T (DV x 16 fp32: 64 registers at D 576)
 *     accumulates every tile.
 * Per 64-key tile (D 576): 36 + 32 products of m64n16k16, 170 KiB of shared
 * memory reads by them and 114 KiB by the dequantisation (41 read, 72
 * written), against 41 KiB of cache bytes.
 *
 * Shared memory (the spec's 288 D + 64 MLA_FP8_TOKEN_BYTES + 3840): two
 * key stages, Q, P^T, two raw slots of 32 tokens, the row maxima and sums,
 * the mbarriers, and 1 KiB to align the swizzle's 1024-byte pattern.
 * A programmatic dependent launch, as mla_decode_attn_bf16_tma.
 */

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>

#include "../common/kl_ptx_sm90.cuh"
#include "mla_decode_common.cuh"

namespace mla_decode_attn_fp8_tma_ {

constexpr uint32_t D = MLA_HDIM;
constexpr uint32_t DV = MLA_HDIM - 64;
constexpr uint32_t TB = MLA_FP8_TOKEN_BYTES;
constexpr uint32_t NSLAB = D / 64;        /* 128-byte slabs of a key row: DV / 64 latent, 1 rope */
constexpr uint32_t NLAT = DV / 64;
constexpr uint32_t NR = 16;               /* query rows a block: the N of every product */
constexpr uint32_t BN = 64;               /* keys a tile */
constexpr uint32_t CT = 4, CB = BN / CT;  /* raw copies a tile, tokens a copy */
constexpr uint32_t NRAW = 4;              /* raw slots: NRAW - 1 copies in flight while one is converted */
constexpr uint32_t TPT = 128 / CB;        /* dequantising threads a token */
constexpr uint32_t THREADS = 256;
constexpr uint32_t SLAB = 64 * 128;       /* 64 key rows of one slab */
constexpr uint32_t TILE = NSLAB * SLAB;
constexpr uint32_t QSLAB = NR * 128;      /* 16 rows of one slab */
constexpr uint32_t RAW = CB * TB;
constexpr uint32_t ROPE_OFF = (DV + DV / 32u + 15u) & ~15u; /* kl_mla_decode_fp8_rope_offset */
constexpr uint32_t VPP = DV / TPT;        /* latent values a dequantising thread takes of its token */
constexpr uint32_t RPT = 8 / TPT;         /* rope chunks (of 8) a dequantising thread copies */

constexpr uint32_t OFF_K = 0;                           /* 2 stages */
constexpr uint32_t OFF_Q = OFF_K + 2 * TILE;
constexpr uint32_t OFF_P = OFF_Q + NSLAB * QSLAB;       /* P^T: 16 rows x 64 keys */
constexpr uint32_t OFF_RAW = OFF_P + QSLAB;             /* NRAW slots */
constexpr uint32_t OFF_MAX = OFF_RAW + NRAW * RAW;      /* float [4 warps][16 rows] */
constexpr uint32_t OFF_SUM = OFF_MAX + 256u;            /* float [4 warps][16 rows] */
constexpr uint32_t OFF_BAR = OFF_SUM + 256u;
constexpr uint32_t SMEM = OFF_BAR + 256u;

static_assert(TB % 16 == 0 && ROPE_OFF + 128u == TB, "an fp8 token: latent, scales, padding to 16 bytes, rope");
static_assert(VPP % 16 == 0 && 128 % VPP == 0 && RPT >= 1, "a thread's latent values: whole 16-byte groups within one scale block");
static_assert(NRAW * CB == 2 * 32, "the raw slots: the bytes of two 32-token copies");
static_assert(THREADS == KL_THREADS_mla_decode_attn_fp8_tma, "a compute warpgroup and a producer");
static_assert(SMEM + 1024 == KL_SHARED_BYTES_mla_decode_attn_fp8_tma,
              "the spec's shared_bytes: the layout above and 1 KiB to align it");
static_assert(KL_TMAP_mla_decode_attn_fp8_tma_q_map_BYTES == QSLAB, "a Q box is 16 rows of one slab");
static_assert(OFF_Q % 1024 == 0 && OFF_P % 1024 == 0 && QSLAB % 1024 == 0, "the swizzle's 1024-byte pattern");

/* mbarriers (index * 8 past OFF_BAR). */
enum : uint32_t {
    B_QFULL = 0,     /* count 1 + the Q boxes' bytes */
    B_QEMPTY = 1,    /* count 4: an elected lane of each compute warp, after the piece's last S */
    B_RAWFULL = 2,   /* [NRAW] count 1 + the copy's bytes */
    B_RAWEMPTY = 6,  /* [NRAW] count 128: every dequantising thread */
    B_KFULL = 10,    /* [2] count 128: every dequantising thread, after the tile's last copy */
    B_KEMPTY = 12,   /* [2] count 4: an elected lane of each compute warp, after the tile's P V */
    B_COUNT = 14
};
static_assert(B_COUNT * 8 <= 256, "the mbarriers fit their bytes");
enum : uint32_t { NB_MAX = 1, NB_P = 2, NB_SUM = 3 }; /* named barriers of the compute warpgroup (128) */

/* The page of a 64-key tile, or -1 when outside [0, num_blocks). */
__device__ __forceinline__ int32_t tile_page(const int32_t *table_row, uint32_t kb, uint32_t page_size,
                                             uint32_t num_blocks) {
    const int32_t pg = table_row[kb / page_size];
    return (pg >= 0 && (uint32_t)pg < num_blocks) ? pg : -1;
}

/* Two E4M3 (byte 0 low) as f16x2, exact. */
__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t x) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
    return (uint32_t)r.x | ((uint32_t)r.y << 16);
}

/* 8 E4M3 (two words) times `scale`: fp32 products rounded to bf16, 4 words. */
__device__ __forceinline__ uint4 dequant8(uint32_t lo, uint32_t hi, float scale) {
    const uint32_t w[2] = {lo, hi};
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t h01 = e4m3x2_f16x2(w[i]), h23 = kl__cvt_f16x2_e4m3x2_hi(w[i]);
        const float2 fa = __half22float2(*reinterpret_cast<const __half2 *>(&h01));
        const float2 fb = __half22float2(*reinterpret_cast<const __half2 *>(&h23));
        const __nv_bfloat162 ra = __floats2bfloat162_rn(fa.x * scale, fa.y * scale);
        const __nv_bfloat162 rb = __floats2bfloat162_rn(fb.x * scale, fb.y * scale);
        out[2 * i] = *reinterpret_cast<const uint32_t *>(&ra);
        out[2 * i + 1] = *reinterpret_cast<const uint32_t *>(&rb);
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

/* Key row r, 16-byte chunk c (of 8 bf16) of slab s of a key tile: the 128-byte swizzle. */
__device__ __forceinline__ uint32_t k_chunk(uint32_t tile, uint32_t s, uint32_t r, uint32_t c) {
    return tile + s * SLAB + r * 128u + ((c ^ (r & 7u)) << 4);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}

}  // namespace mla_decode_attn_fp8_tma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_attn_fp8_tma, 1)
mla_decode_attn_fp8_tma(KL_PARAMS_mla_decode_attn_fp8_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace mla_decode_attn_fp8_tma_;
    KL_DYNAMIC_SHARED(mla_decode_attn_fp8_tma__smem, 16);

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
    const uint32_t row0 = blockIdx.x * NR;
    if (row0 >= rows) return;
    const uint64_t max_len = (uint64_t)max_blocks_per_seq * page_size;
    const mla_decode__part pt = mla_decode__load_part(sched, blockIdx.y);
    const bool vec_c = ((uintptr_t)kv_cache & 15u) == 0u; /* else the tokens are read from global memory directly */

    const uint32_t tid = threadIdx.x, wg = tid >> 7, tw = tid & 127u;
    const uint32_t sbase = ((uint32_t)__cvta_generic_to_shared(mla_decode_attn_fp8_tma__smem) + 1023u) & ~1023u;
    const uint32_t bar = sbase + OFF_BAR;
    auto mb = [bar](uint32_t i) { return bar + 8u * i; };

    if (tid == 0u) {
        kl__mbar_init(mb(B_QFULL), 1u);
        kl__mbar_init(mb(B_QEMPTY), 4u);
        for (uint32_t i = 0; i < NRAW; ++i) {
            kl__mbar_init(mb(B_RAWFULL + i), 1u);
            kl__mbar_init(mb(B_RAWEMPTY + i), 128u);
        }
        for (uint32_t i = 0; i < 2u; ++i) {
            kl__mbar_init(mb(B_KFULL + i), 128u);
            kl__mbar_init(mb(B_KEMPTY + i), 4u);
        }
        kl__fence_proxy_async_shared(); /* the initialised mbarriers, to the copy engine */
    }
    __syncthreads();

    mla_decode__piece pc;
    if (wg == 1u) {
        /* ---- producer: copies (thread 0 of the warpgroup) and dequantisation (all) ---- */
        const bool issuer = tw == 0u;
        /* This thread's token of a copy and its part of it: a warp takes 8 tokens x 4
         * parts, so its 16-byte shared-memory accesses spread over the banks (8 tokens
         * 656 bytes apart cover all 32 banks, 4 bytes apart in a part's groups; 8 rows
         * of a key tile, swizzled, 8 chunks); 8 parts x 4 tokens conflicted 4-way. */
        static_assert(CB == 16 && TPT == 8, "the warp mapping below: 2 x 8 tokens, 2 x 4 parts");
        const uint32_t tok = (tw & 7u) + 8u * ((tw >> 5) & 1u), part = ((tw & 31u) >> 3) + 4u * (tw >> 6);
        if (issuer) kl__prefetch_tensormap(&q_map);
        uint32_t n = 0, kt = 0, cx = 0; /* pieces with tiles, tiles, raw copies: this block's so far */
        for (uint32_t b = pt.bs; mla_decode__piece_at(pt, b, sched, lengths, batch, num_parts, max_len, pc); ++b) {
            const uint32_t ntiles = pc.t1 - pc.t0;
            if (ntiles == 0u) continue;
            const int32_t *table_row = block_table + (uint64_t)b * max_blocks_per_seq;
            const uint32_t nc = CT * ntiles;
            /* The pages of the piece's tiles, loaded two tiles before their use: a
             * table entry is an L2 round trip (shared memory leaves L1 little room),
             * which in the conversion's path cost more than the conversion. pg[0] is
             * the page of the tile converted now, pg[1] and pg[2] the next ones. */
            auto page_of = [&](uint32_t j) -> int32_t {
                return j < ntiles ? tile_page(table_row, (pc.t0 + j) * BN, page_size, num_blocks) : -1;
            };
            int32_t pg[3] = {page_of(0u), page_of(1u), page_of(2u)};
            /* Copy x of the piece: CB tokens from (t0 + x / CT) * 64 + CB (x % CT) on page
             * `page`; it moves the tokens below the length of a page in the table's range. */
            auto copy_tokens = [&](uint32_t x, int32_t page, uint32_t *kb) -> uint32_t {
                *kb = (pc.t0 + x / CT) * BN + CB * (x % CT);
                return (page >= 0 && *kb < pc.len) ? min(CB, pc.len - *kb) : 0u;
            };
            auto issue = [&](uint32_t x, uint32_t gx, int32_t page) { /* piece copy x, the block's copy gx */
                const uint32_t slot = gx % NRAW;
                if (gx >= NRAW) kl__mbar_wait(mb(B_RAWEMPTY + slot), ((gx - NRAW) / NRAW) & 1u); /* its last use */
                uint32_t kb;
                const uint32_t ntok = copy_tokens(x, page, &kb);
                const uint32_t bytes = vec_c ? ntok * TB : 0u;
                kl__mbar_arrive_expect_tx(mb(B_RAWFULL + slot), bytes);
                if (bytes > 0u) {
                    const uint8_t *src = kv_cache + ((uint64_t)(uint32_t)page * page_size + kb % page_size) * TB;
                    kl__bulk_load(sbase + OFF_RAW + slot * RAW, src, bytes, mb(B_RAWFULL + slot));
                }
            };
            static_assert(NRAW - 1u <= CT, "a copy issued ahead is in this tile or the next: pg[0] or pg[1]");
            if (issuer) {
                if (n > 0u) kl__mbar_wait(mb(B_QEMPTY), (n - 1u) & 1u); /* the last piece's S is done */
                kl__mbar_arrive_expect_tx(mb(B_QFULL), NSLAB * QSLAB);
#pragma unroll
                for (uint32_t sl = 0; sl < NSLAB; ++sl)
                    kl__tma_load_3d(sbase + OFF_Q + sl * QSLAB, &q_map, (int32_t)(64u * sl), (int32_t)row0,
                                    (int32_t)b, mb(B_QFULL));
                /* the first NRAW - 1 copies; the last one's slot frees as this thread converts */
                for (uint32_t x = 0; x + 1u < NRAW && x < nc; ++x) issue(x, cx + x, x / CT == 0u ? pg[0] : pg[1]);
            }
            for (uint32_t x = 0; x < nc; ++x, ++cx) {
                const uint32_t slot = cx % NRAW, h = x % CT, st = kt & 1u;
                if (h == 0u && x > 0u) { /* the next tile: shift the pages, load the one after */
                    pg[0] = pg[1];
                    pg[1] = pg[2];
                    pg[2] = page_of(x / CT + 2u);
                }
                if (h == 0u && kt >= 2u) kl__mbar_wait(mb(B_KEMPTY + st), ((kt - 2u) >> 1) & 1u);
                /* keep NRAW - 1 copies ahead of the one converted now */
                if (issuer && x + NRAW - 1u < nc)
                    issue(x + NRAW - 1u, cx + NRAW - 1u, (x + NRAW - 1u) / CT == x / CT ? pg[0] : pg[1]);
                kl__mbar_wait(mb(B_RAWFULL + slot), (cx / NRAW) & 1u);
                const int32_t page = pg[0];
                uint32_t kb;
                const uint32_t ntok = copy_tokens(x, page, &kb);
                const bool live = tok < ntok;
                const uint32_t raw = sbase + OFF_RAW + slot * RAW + tok * TB;
                const uint8_t *graw = live ? kv_cache + ((uint64_t)(uint32_t)page * page_size + kb % page_size + tok) * TB
                                           : nullptr;
                const uint32_t ktile = sbase + OFF_K + st * TILE, r = CB * h + tok;
                /* This thread's bytes first, all loads in flight together (each shared-memory
                 * access is an ordered asm statement: a load, then its use, a group at a time
                 * would serialise them), then the conversions, then the stores. */
                uint4 lat[VPP / 16u], rope[RPT];
                float scale = 0.0f;
                if (live && vec_c) {
#pragma unroll
                    for (uint32_t g = 0; g < VPP / 16u; ++g) lat[g] = kl__ld_shared_v4(raw + part * VPP + 16u * g);
#pragma unroll
                    for (uint32_t c = 0; c < RPT; ++c) rope[c] = kl__ld_shared_v4(raw + ROPE_OFF + 16u * (RPT * part + c));
                    scale = kl__ld_shared_f32(raw + DV + 4u * (part * VPP / 128u));
                } else if (live) { /* a cache off 16-byte alignment: byte loads from global memory */
                    auto load16 = [](const uint8_t *src) {
                        uint32_t ww[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                        for (uint32_t i = 0; i < 16u; ++i) ww[i >> 2] |= (uint32_t)src[i] << (8u * (i & 3u));
                        return make_uint4(ww[0], ww[1], ww[2], ww[3]);
                    };
#pragma unroll
                    for (uint32_t g = 0; g < VPP / 16u; ++g) lat[g] = load16(graw + part * VPP + 16u * g);
#pragma unroll
                    for (uint32_t c = 0; c < RPT; ++c) rope[c] = load16(graw + ROPE_OFF + 16u * (RPT * part + c));
                    const uint8_t *sp = graw + DV + 4u * (part * VPP / 128u);
                    scale = __uint_as_float((uint32_t)sp[0] | ((uint32_t)sp[1] << 8) | ((uint32_t)sp[2] << 16) |
                                            ((uint32_t)sp[3] << 24));
                } else {
#pragma unroll
                    for (uint32_t g = 0; g < VPP / 16u; ++g) lat[g] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
                    for (uint32_t c = 0; c < RPT; ++c) rope[c] = make_uint4(0u, 0u, 0u, 0u);
                }
                uint4 bf[VPP / 8u];
#pragma unroll
                for (uint32_t g = 0; g < VPP / 16u; ++g) {
                    bf[2u * g] = live ? dequant8(lat[g].x, lat[g].y, scale) : make_uint4(0u, 0u, 0u, 0u);
                    bf[2u * g + 1u] = live ? dequant8(lat[g].z, lat[g].w, scale) : make_uint4(0u, 0u, 0u, 0u);
                }
#pragma unroll
                for (uint32_t g = 0; g < VPP / 8u; ++g) { /* 8 latent values a chunk: value part * VPP + 8 g */
                    const uint32_t e = part * VPP + 8u * g;
                    kl__st_shared_v4(k_chunk(ktile, e / 64u, r, (e % 64u) / 8u), bf[g]);
                }
#pragma unroll
                for (uint32_t c = 0; c < RPT; ++c) kl__st_shared_v4(k_chunk(ktile, NLAT, r, RPT * part + c), rope[c]);
                kl__fence_proxy_async_shared(); /* these rows, to the tensor cores */
                kl__mbar_arrive(mb(B_RAWEMPTY + slot));
                if (h == CT - 1u) {
                    kl__mbar_arrive(mb(B_KFULL + st));
                    ++kt;
                }
            }
            ++n;
        }
        return;
    }

    /* ---- compute warpgroup ---- */
    const uint32_t w4 = tw >> 5, lane = tw & 31u, g = lane >> 2, q = lane & 3u;
    const float scale_log2 = softmax_scale * 1.4426950408889634f;
    const bool elected = kl__elect_one();
    /* this thread's rows of the 16 (the N index of its accumulators): 2q, 2q + 1, 2q + 8, 2q + 9 */
    uint32_t my_row[4];
#pragma unroll
    for (uint32_t ri = 0; ri < 4u; ++ri) my_row[ri] = 8u * (ri >> 1) + 2u * q + (ri & 1u);

    float o[NLAT][8];
    float s_cur[8], s_nxt[8];
    uint32_t n = 0, kt = 0;
    auto s_issue = [&](float (&s)[8], uint32_t st) {
        const uint32_t ktile = sbase + OFF_K + st * TILE;
#pragma unroll
        for (uint32_t ks = 0; ks < D / 16u; ++ks) {
            const uint32_t off = (ks / 4u) * SLAB + 32u * (ks % 4u), qoff = (ks / 4u) * QSLAB + 32u * (ks % 4u);
            kl__wgmma_bf16_ss<16, 0>(s, kl__wgmma_desc(ktile + off, 16u, 1024u),
                                     kl__wgmma_desc(sbase + OFF_Q + qoff, 16u, 1024u), ks == 0u ? 0u : 1u);
        }
    };

    for (uint32_t b = pt.bs; mla_decode__piece_at(pt, b, sched, lengths, batch, num_parts, max_len, pc); ++b) {
        const uint32_t ntiles = pc.t1 - pc.t0;
        const int32_t *table_row = block_table + (uint64_t)b * max_blocks_per_seq;
        uint32_t vis[4];
#pragma unroll
        for (uint32_t ri = 0; ri < 4u; ++ri) vis[ri] = mla_decode__visible(pc.len, row0 + my_row[ri], h_q, s_q);
#pragma unroll
        for (uint32_t mt = 0; mt < NLAT; ++mt)
#pragma unroll
            for (uint32_t e = 0; e < 8u; ++e) o[mt][e] = 0.0f;
        float m[4], l[4];
#pragma unroll
        for (uint32_t ri = 0; ri < 4u; ++ri) {
            m[ri] = -INFINITY;
            l[ri] = 0.0f;
        }
        if (ntiles > 0u) {
            kl__mbar_wait(mb(B_QFULL), n & 1u);
            kl__mbar_wait(mb(B_KFULL + (kt & 1u)), (kt >> 1) & 1u);
            kl__wgmma_fence();
            s_issue(s_cur, kt & 1u);
            kl__wgmma_commit();
            kl__wgmma_wait<0>();
            kl__wgmma_fence_operand(s_cur);
            /* this tile's page, and the next one's loaded a tile ahead (an L2 round trip) */
            int32_t pg_cur = tile_page(table_row, pc.t0 * BN, page_size, num_blocks), pg_next = -1;
            for (uint32_t j = 0; j < ntiles; ++j, ++kt) {
                const uint32_t st = kt & 1u;
                const uint32_t kb = (pc.t0 + j) * BN;
                if (j + 1u < ntiles) pg_next = tile_page(table_row, kb + BN, page_size, num_blocks);
                if (j + 1u < ntiles) { /* the next tile's S while this one's softmax runs */
                    kl__wgmma_fence_operand(s_nxt);
                    kl__mbar_wait(mb(B_KFULL + (st ^ 1u)), ((kt + 1u) >> 1) & 1u);
                    kl__wgmma_fence();
                    s_issue(s_nxt, st ^ 1u);
                    kl__wgmma_commit();
                }
                /* ---- mask, the rows' maxima over the tile's 64 keys (4 warps) ---- */
                const bool page_ok = pg_cur >= 0;
                float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
                for (uint32_t e = 0; e < 8u; ++e) {
                    const uint32_t ri = 2u * (e >> 2) + (e & 1u), key = kb + 16u * w4 + g + 8u * ((e >> 1) & 1u);
                    const float v = (page_ok && key < vis[ri]) ? s_cur[e] * scale_log2 : -INFINITY;
                    s_cur[e] = v;
                    mx[ri] = fmaxf(mx[ri], v);
                }
#pragma unroll
                for (uint32_t ri = 0; ri < 4u; ++ri) {
                    mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 4));
                    mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 8));
                    mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 16));
                }
                if (g == 0u)
#pragma unroll
                    for (uint32_t ri = 0; ri < 4u; ++ri) kl__st_shared_f32(sbase + OFF_MAX + (w4 * NR + my_row[ri]) * 4u, mx[ri]);
                kl__bar_sync(NB_MAX, 128u);
                float alpha[4], mu[4];
#pragma unroll
                for (uint32_t ri = 0; ri < 4u; ++ri) {
                    float mn = m[ri];
#pragma unroll
                    for (uint32_t w = 0; w < 4u; ++w) mn = fmaxf(mn, kl__ld_shared_f32(sbase + OFF_MAX + (w * NR + my_row[ri]) * 4u));
                    mu[ri] = mn == -INFINITY ? 0.0f : mn; /* no visible key yet: keep exp2 finite */
                    alpha[ri] = kl__ex2_approx_ftz(m[ri] - mu[ri]);
                    m[ri] = mn;
                }
                /* ---- P^T: weights rounded to bf16, into K-major words (row, keys k, k + 1) ---- */
                float pv[8];
#pragma unroll
                for (uint32_t e = 0; e < 8u; ++e) {
                    const uint32_t ri = 2u * (e >> 2) + (e & 1u);
                    pv[e] = __bfloat162float(__float2bfloat16_rn(kl__ex2_approx_ftz(s_cur[e] - mu[ri])));
                }
#pragma unroll
                for (uint32_t ri = 0; ri < 4u; ++ri) l[ri] *= alpha[ri];
#pragma unroll
                for (uint32_t e = 0; e < 8u; ++e) l[2u * (e >> 2) + (e & 1u)] += pv[e];
                const bool even = (g & 1u) == 0u;
#pragma unroll
                for (uint32_t i = 0; i < 2u; ++i)
#pragma unroll
                    for (uint32_t kh = 0; kh < 2u; ++kh) {
                        /* e = 4i + 2kh + r2: key 16 w4 + g + 8 kh, row 8i + 2q + r2 */
                        const float r0v = pv[4u * i + 2u * kh], r1v = pv[4u * i + 2u * kh + 1u];
                        const float keep = even ? r0v : r1v, send = even ? r1v : r0v; /* selects: no runtime index */
                        const float recv = __shfl_xor_sync(0xffffffffu, send, 4);
                        const uint32_t row = 8u * i + 2u * q + (even ? 0u : 1u);
                        const uint32_t k0 = 16u * w4 + (g & ~1u) + 8u * kh; /* even key of the pair */
                        const uint32_t word = even ? pack_bf16(keep, recv) : pack_bf16(recv, keep);
                        kl__st_shared_u32(sbase + OFF_P + row * 128u + (((k0 / 8u) ^ (row & 7u)) << 4) + (k0 % 8u) * 2u,
                                          word);
                    }
                kl__fence_proxy_async_shared();
                /* O^T *= alpha per row (the N index: register e of an m tile is row 8 (e / 4) + 2q + e % 2) */
                if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f)) {
#pragma unroll
                    for (uint32_t mt = 0; mt < NLAT; ++mt)
#pragma unroll
                        for (uint32_t e = 0; e < 8u; ++e) o[mt][e] *= alpha[2u * (e >> 2) + (e & 1u)];
                }
                kl__bar_sync(NB_P, 128u); /* P^T is whole; the maxima were read */
                /* ---- O^T += V^T P^T: V^T is the tile's latent slabs read M-major ---- */
                const uint32_t ktile = sbase + OFF_K + st * TILE;
#pragma unroll
                for (uint32_t mt = 0; mt < NLAT; ++mt) kl__wgmma_fence_operand(o[mt]);
                kl__wgmma_fence();
#pragma unroll
                for (uint32_t mt = 0; mt < NLAT; ++mt)
#pragma unroll
                    for (uint32_t kk = 0; kk < BN / 16u; ++kk)
                        kl__wgmma_bf16_ss_ta<16, 0>(o[mt], kl__wgmma_desc(ktile + mt * SLAB + kk * 16u * 128u, SLAB, 1024u),
                                                    kl__wgmma_desc(sbase + OFF_P + kk * 32u, 16u, 1024u), 1u);
                kl__wgmma_commit();
                kl__wgmma_wait<0>(); /* S of the next tile and this P V */
#pragma unroll
                for (uint32_t mt = 0; mt < NLAT; ++mt) kl__wgmma_fence_operand(o[mt]);
                if (elected) kl__mbar_arrive(mb(B_KEMPTY + st)); /* the stage is free */
                if (j + 1u < ntiles) {
                    kl__wgmma_fence_operand(s_nxt);
#pragma unroll
                    for (uint32_t e = 0; e < 8u; ++e) s_cur[e] = s_nxt[e];
                }
                pg_cur = pg_next;
            }
            if (elected) kl__mbar_arrive(mb(B_QEMPTY)); /* the piece's S are done */
            ++n;
        }
        /* ---- the rows' sums over the 64 keys' lanes and warps ---- */
#pragma unroll
        for (uint32_t ri = 0; ri < 4u; ++ri) {
            l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 4);
            l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 8);
            l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 16);
        }
        if (g == 0u)
#pragma unroll
            for (uint32_t ri = 0; ri < 4u; ++ri) kl__st_shared_f32(sbase + OFF_SUM + (w4 * NR + my_row[ri]) * 4u, l[ri]);
        kl__bar_sync(NB_SUM, 128u);
        float lt[4];
#pragma unroll
        for (uint32_t ri = 0; ri < 4u; ++ri) {
            lt[ri] = 0.0f;
#pragma unroll
            for (uint32_t w = 0; w < 4u; ++w) lt[ri] += kl__ld_shared_f32(sbase + OFF_SUM + (w * NR + my_row[ri]) * 4u);
        }
        kl__bar_sync(NB_SUM, 128u); /* the sums were read: the next piece may write them */
        /* ---- out and lse, or the split's slot: O^T register e of m tile mt is column
         * 64 mt + 16 w4 + g + 8 ((e / 2) % 2) of row 8 (e / 4) + 2q + e % 2 ---- */
#pragma unroll
        for (uint32_t ri = 0; ri < 4u; ++ri) {
            const uint32_t row = row0 + my_row[ri];
            if (row >= rows) continue;
            const float inv = lt[ri] > 0.0f ? 1.0f / lt[ri] : 0.0f;
            const uint32_t i = ri >> 1, r2 = ri & 1u;
            if (pc.split) {
                float *w = mla_decode__ws_o(workspace, pc.slot, rows, DV, row);
#pragma unroll
                for (uint32_t mt = 0; mt < NLAT; ++mt)
#pragma unroll
                    for (uint32_t kh = 0; kh < 2u; ++kh)
                        w[64u * mt + 16u * w4 + g + 8u * kh] = o[mt][4u * i + 2u * kh + r2] * inv;
                if (w4 == 0u && g == 0u)
                    *mla_decode__ws_lse(workspace, num_parts, pc.slot, rows, DV, row) = mla_decode__lse(m[ri], lt[ri]);
            } else {
                unsigned short *orow = reinterpret_cast<unsigned short *>(out + ((uint64_t)b * rows + row) * DV);
#pragma unroll
                for (uint32_t mt = 0; mt < NLAT; ++mt)
#pragma unroll
                    for (uint32_t kh = 0; kh < 2u; ++kh)
                        orow[64u * mt + 16u * w4 + g + 8u * kh] = mla_decode__bf16_bits(o[mt][4u * i + 2u * kh + r2] * inv);
                if (w4 == 0u && g == 0u) lse[(uint64_t)b * rows + row] = mla_decode__lse(m[ri], lt[ri]);
            }
        }
    }
#else
    /* No wgmma on this target: kl_mla_decode_attn_fp8_tma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
