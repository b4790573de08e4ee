/* paged_decode_bulk.cuh - the copy-engine core of the GQA-packed decode
 * launchers *_gqa_bulk and *_gqa_tma (specs/paged_decode.yaml; kernels in
 * paged_decode_bulk_gqa.cu, which says why and what it costs): the
 * function and the numerics of the tensor-core core (paged_decode_mma.cuh),
 * with the cache tiles brought into shared memory by the bulk copy engine
 * instead of through the tensor-core warps' registers.
 *
 * BLOCK: 12 warps (384 threads). Warps 0-7 (threads 0-255) are the consumers:
 * the _mma core's warps, each with its own online softmax over the tiles
 * given to it, merged through shared memory at the end of a piece of work
 * (named barrier 1 of 256 threads; the block-wide barrier is never used
 * after the start). Warps 8-11 are the producers: each walks the same
 * pieces and tiles, looks the cache blocks up in the block table and
 * issues every fourth tile of 16 positions (three warps share a
 * sub-partition's registers either way, so 9 or 12 warps both leave 168
 * a thread): one cp.async.bulk per cache row (lane i: K row i for i < 16,
 * V row i - 16; head dim 128: 256 bytes bf16, 128 bytes fp8), completing
 * on the tile's `full` mbarrier, whose phase expects the bytes of the rows
 * it copies (arrive.expect_tx); or, for the _tma launchers, the tile's
 * tensor-map boxes from lane 0. Positions outside the window are not
 * copied as rows: the producer writes their rows as zeros (a NaN in an
 * unattended V row would reach the accumulators through 0 * NaN) and
 * fences them to the async proxy; boxes copy them and the consumers mask.
 *
 * WHY A ROW A COPY: kernel-contract.md lays a block out [block_size,
 * num_kv_heads, head_dim], so one KV head's rows of a cache block are
 * num_kv_heads * head_dim elements apart: contiguous per row, never per
 * block (only the whole block, every KV head, is one span). A row copy
 * serves every block size (1 included) and every stride whose rows are
 * 16-byte aligned; a tensor map's box gathers a tile's 16 strided rows in
 * one copy where a tile is 16 slots of one block (block_size % 16 == 0).
 *
 * RING: NSLOT tile slots (16 bf16, 32 fp8 rows, 48 fp8 boxes), each 16 K
 * rows then 16 V rows: for row copies rows RS = row bytes + 16 apart (272
 * / 144 bytes: the 16 bytes make the consumers' 16-byte reads
 * conflict-free, below), for the tensor maps boxes of 16 rows x 128 bytes
 * in the 128-byte swizzle (bf16: dims 0-63 and 64-127 of K, then of V;
 * fp8: K, then V). The block's tiles form one stream, k = 0, 1, ... over
 * all its pieces in order; tile k goes to slot k % NSLOT, to consumer warp
 * k % 8 and to producer warp 8 + k % 4, so each consumer warp owns NSLOT /
 * 8 slots (2 bf16, 4 or 6 fp8): 16 x 8 KiB or 32 x 4 KiB = 128 KiB, 48 x 4
 * KiB = 192 KiB of cache in flight per block, whatever the tensor-core
 * warps' registers. Slot s has two mbarriers: full (count 1: the
 * producer's arrive.expect_tx; phase k / NSLOT) and empty (count 1: lane 0
 * of the consuming warp once its lanes have read the tile into registers,
 * after __syncwarp); the producer waits on empty with the opposite parity
 * before it refills a slot (a fresh barrier passes that wait at once),
 * then fences the async proxy behind the readers' generic reads.
 *
 * CONSUMER READS (ld.shared.v4, a quarter-warp of 8 lanes a wavefront):
 * lane (g, t) reads K rows g, g + 8 and V rows 2t, 2t + 1, 2t + 8, 2t + 9
 * of the slot (the fragments of paged_decode_mma.cuh). With rows RS = 16
 * (mod 128) bytes apart a row adds its index to the 16-byte bank group
 * (8 groups in 128 bytes), and the lanes' chunks are chosen so that the 8
 * lanes of a quarter-warp hit 8 groups:
 *   bf16 K: chunks 2t + (c & 1) + 8 (c >> 1), c = 0..3 (dims 16t + (i &
 *     15) + 64 (i >> 4)): groups g + 2t + (c & 1); V: chunks g + 8c, c =
 *     0, 1 (dims 8g + (i & 7) + 64 (i >> 3)): groups 2t + g + row parity.
 *   fp8 K: chunks 2t + c, c = 0, 1 (dims 32t + i); V: chunk g (dims 16g +
 *     i): the _mma core's own dims.
 * Q is read with the same dims (paged_decode__bulk_dims), the output
 * written back where V's came from. In a box (128-byte rows) chunk c of row
 * r sits at c ^ (r % 8): the same lanes' groups are (2t ^ g) ^ (c & 1) for
 * K and (g ^ 2t) ^ (row & 1) for V, again 8 distinct ones.
 *
 * PATHS. Tensor maps (_tma launchers: block_size % 16 == 0, caches and
 * strides 16-byte aligned, as the builders require): a tile's 16 rows are
 * one box per 128 bytes of row, rows outside the window included (the
 * consumers zero their V words in registers). Row copies (_bulk): rows
 * 16-byte aligned (both cache pointers, block_stride's bytes:
 * cudaMalloc'd caches; fp8 cache_stride % 16 == 0) by the copy engine,
 * else through the producers' registers (element loads, st.shared.v4) and
 * lane 0 arrives on `full` without transaction bytes; same results,
 * slower.
 *
 * TABLE. The producer holds 64 block-table entries of the piece in two
 * registers a lane (entries cbase + lane and cbase + 32 + lane), looked up
 * with two shuffles a tile, and loads the next 32 when a tile's first page
 * passes cbase + 32: a load issued 32 pages (bs >= 16: 32 tiles) before
 * its first use. The first two chunks of the block's first piece are
 * loaded speculatively, before seq_lens arrive, at the piece the block
 * would have if every sequence held max_blocks_per_seq * block_size
 * positions (the block's own unit and a window from position 0 for the
 * seed grid); kept when the real piece starts at that page, else reloaded.
 */
#ifndef KLAUNCH_KERNELS_PAGED_DECODE_BULK_CUH
#define KLAUNCH_KERNELS_PAGED_DECODE_BULK_CUH

#include "paged_decode_mma.cuh"
#include "paged_decode_mma_pos.cuh"
#include "paged_decode_persist.cuh"
#include "../common/kl_ptx_sm90.cuh"

#define PAGED_DECODE__BULK_PRODUCERS 4 /* producer warps: 8 .. 11 */
#define PAGED_DECODE__BULK_THREADS 384 /* 8 consumer warps and the producers */
#define PAGED_DECODE__BULK_MERGE_BAR 1u /* the consumers' named barrier */

/* The fp8 box ring's slots: 48 x 4 KiB = 192 KiB in flight a block (the
 * bf16 rings and fp8 rows: 128 KiB; 48 rows slots of 144-byte rows would
 * not fit beside 8 heads' merge scratch). PAGED_DECODE_BULK_FP8_BOX_SLOTS
 * (bench/decode/ab.sh's build only, never the library's: the spec's
 * shared_bytes is the library's count) sets another count that fits the
 * launcher's shared memory, for decode_bench --ab's same-run A/B. */
#ifdef PAGED_DECODE_BULK_FP8_BOX_SLOTS
#define PAGED_DECODE__BULK_FP8_BOX_SLOTS ((uint32_t)(PAGED_DECODE_BULK_FP8_BOX_SLOTS))
#else
#define PAGED_DECODE__BULK_FP8_BOX_SLOTS 48u
#endif

/* PAGED_DECODE_TRACE (bench/decode/trace.sh's build only, never the
 * library's): a persistent block's timeline, for what a launch costs
 * beyond its bytes (docs/PERFORMANCE.md, paged decode's 1 x 32768).
 * Stamp i of block b: the global timer (ns) at paged_decode__trace[32 b
 * + i] and the SM's clock at [32 b + 16 + i]; paged_decode_bulk_gqa.cu
 * says what each i marks
 * ([32 b + 14]: the block's pieces; [32 b + 15]: 1 + its SM).
 * Elsewhere PAGED_DECODE__STAMP is nothing. */
#ifdef PAGED_DECODE_TRACE
#define PAGED_DECODE__TRACE_BLOCKS 1024u
__device__ unsigned long long paged_decode__trace[PAGED_DECODE__TRACE_BLOCKS * 32u];
#define PAGED_DECODE__STAMP(i)                                                                  \
    do {                                                                                        \
        const unsigned long long t_ = kl__globaltimer();                                       \
        if (blockIdx.x < PAGED_DECODE__TRACE_BLOCKS) {                                          \
            paged_decode__trace[blockIdx.x * 32u + (i)] = t_;                                   \
            paged_decode__trace[blockIdx.x * 32u + 16u + (i)] = (unsigned long long)clock64();  \
        }                                                                                       \
    } while (0)
#else
#define PAGED_DECODE__STAMP(i) \
    do {                       \
    } while (0)
#endif

/* The ring of one cache type (FP8: 1-byte elements) and copy kind: rows
 * (cp.async.bulk, one row a lane, rows RS apart) or, TMAP, boxes of the
 * tensor maps (cp.async.bulk.tensor: per tile and cache, the 16 rows as
 * boxes of 128 bytes x 16 rows in the 128-byte swizzle, 2 KiB each: bf16
 * dims 0-63 and 64-127, fp8 all 128; K's boxes then V's). */
template <bool FP8, bool TMAP = false> struct paged_decode__bulk_ring {
    static constexpr uint32_t ES = FP8 ? 1u : 2u;
    static constexpr uint32_t ROW = 128u * ES;    /* bytes of one KV head's row: head dim 128 */
    static constexpr uint32_t RS = ROW + 16u;     /* row pitch in a slot of rows: 16 (mod 128) */
    static constexpr uint32_t NSLOT = FP8 ? (TMAP ? PAGED_DECODE__BULK_FP8_BOX_SLOTS : 32u) : 16u;
    static constexpr uint32_t BOX = 2048u;        /* TMAP: 16 rows of 128 bytes */
    static constexpr uint32_t BOXES = ROW / 128u; /* TMAP: boxes per cache and tile */
    static constexpr uint32_t SLOT = TMAP ? 32u * ROW : 32u * RS; /* 16 K rows, 16 V rows */
    static constexpr uint32_t BYTES = NSLOT * SLOT;
    static constexpr uint32_t BARS = 16u * NSLOT; /* full[NSLOT], empty[NSLOT]: 8 bytes each */
    static constexpr uint32_t ALIGN = TMAP ? 1024u : 16u; /* the swizzle pattern's period */
    /* Arrivals a phase of a slot's full and empty mbarriers takes. Rows
     * copied as rows are written by every lane (st.shared for the register
     * path and for zero rows, cp.async.bulk otherwise) and read by every
     * lane: each arrives itself. One lane's arrive after __syncwarp would
     * order them too (a release is cumulative), but compute-sanitizer's
     * racecheck credits only the accessing thread's own arrive, and flagged
     * that handoff (53 hazards on the H200, 2026-12-04). Boxes are issued,
     * and their slots read, under lane 0's arrive alone (no hazard there). */
    static constexpr uint32_t ARRIVALS = TMAP ? 1u : 32u;
    static_assert(RS % 128u == 16u, "rows 16 bytes off the 128-byte bank period");
    static_assert(NSLOT % 8u == 0u, "each consumer warp owns whole slots");
    static_assert(!TMAP || SLOT == 2u * BOXES * BOX, "a TMAP slot is its boxes");
};

/* Dynamic shared memory of a bulk kernel: the ring, its mbarriers, the
 * consumers' merge scratch and PAGED_DECODE__BULK_MISC bytes of schedule,
 * from the first ALIGN-aligned address of the dynamic shared memory (TMAP:
 * 1024 bytes of slack for it; the spec's shared_bytes says the same:
 * paged_decode_bulk_gqa.cu checks). */
#define PAGED_DECODE__BULK_MISC 512u
template <bool FP8, bool TMAP, int NH> struct paged_decode__bulk_smem {
    using R = paged_decode__bulk_ring<FP8, TMAP>;
    static constexpr uint32_t SLACK = TMAP ? R::ALIGN : 0u;
    static constexpr uint32_t RING = 0u;
    static constexpr uint32_t BAR = RING + R::BYTES;
    static constexpr uint32_t MERGE = BAR + R::BARS;
    static constexpr uint32_t MISC = MERGE + (uint32_t)sizeof(paged_decode__gqa_smem<NH, 128>);
    static constexpr uint32_t BYTES = SLACK + MISC + PAGED_DECODE__BULK_MISC;
    static_assert(MERGE % 16u == 0u && MISC % 16u == 0u, "16-byte aligned parts");
};

/* The consumers' dims (paged_decode__mma_dims_linear's interface): bf16
 * takes the chunks above, fp8 the _mma core's. */
template <bool FP8> struct paged_decode__bulk_dims;
template <> struct paged_decode__bulk_dims<true> : paged_decode__mma_dims_linear {};
template <> struct paged_decode__bulk_dims<false> {
    static __device__ __forceinline__ constexpr uint32_t kbase(uint32_t t) { return 16u * t; }
    static __device__ __forceinline__ constexpr uint32_t koff(uint32_t i) { return (i & 15u) + 64u * (i >> 4); }
    static __device__ __forceinline__ constexpr uint32_t vbase(uint32_t g) { return 8u * g; }
    static __device__ __forceinline__ constexpr uint32_t voff(uint32_t i) { return (i & 7u) + 64u * (i >> 3); }
};

/* One piece of a block's work: the unit (seq, kvh), its positions [pb, pe)
 * in this block, their tiles t0 .. t0 + ntiles - 1 (tile t: positions 16t
 * .. 16t + 15), k0 their first index in the block's tile stream; whole: the
 * block holds the unit whole (else a cut unit: su, ue its tiles in the
 * launch's order, slot the block's record slot). */
struct paged_decode__bulk_piece {
    uint32_t seq, kvh, pb, pe, t0, ntiles, whole, slot;
    uint64_t k0, su, ue;
};

/* The seed grid's schedule: block (kvh, seq) = one whole piece. */
struct paged_decode__bulk_sched_seed {
    uint32_t seq, kvh, done;
    uint32_t max_blocks_per_seq, block_size, sliding_window;
    const int32_t *seq_lens;
    /* The page the producer guesses before seq_lens arrive. */
    __device__ __forceinline__ uint32_t guess_seq() const { return seq; }
    __device__ __forceinline__ uint32_t guess_page() const {
        const uint64_t cap = (uint64_t)max_blocks_per_seq * block_size;
        const uint64_t b = sliding_window != 0u && cap > sliding_window ? cap - sliding_window : 0u;
        return (uint32_t)(b / block_size);
    }
    __device__ __forceinline__ bool next(paged_decode__bulk_piece &p) {
        if (done) return false;
        done = 1u;
        uint32_t b, e;
        paged_decode__range(seq_lens[seq], sliding_window, max_blocks_per_seq, block_size, &b, &e);
        p.seq = seq;
        p.kvh = kvh;
        p.pb = b;
        p.pe = e;
        p.t0 = b / 16u;
        p.ntiles = b < e ? (e - 1u) / 16u - b / 16u + 1u : 0u;
        p.whole = 1u;
        p.slot = 0u;
        p.k0 = 0u;
        p.su = p.ue = 0u;
        return true;
    }
};

/* The persistent schedule (paged_decode_persist_gqa_mma.cu's, walked by
 * every thread on its own: no shared plan between pieces). Block b's tiles
 * [first, stop) of all units' tiles laid end to end (an empty unit counts
 * one tile and has no positions); x the next, at sequence seq whose units
 * start at tile base (tiles each, window [wbegin, wend)); k the stream
 * index of the next piece's first tile (tiles with positions only). */
struct paged_decode__bulk_sched_persist {
    paged_decode__persist_share sh;
    uint64_t x, base, k;
    uint32_t seq, tiles, wbegin, wend;
    uint32_t num_kv_heads, max_blocks_per_seq, block_size, sliding_window;
    const int32_t *seq_lens;
    __device__ __forceinline__ bool next(paged_decode__bulk_piece &p) {
        if (x >= sh.stop) return false;
        const paged_decode__persist_piece q = paged_decode__persist_piece_of(x, sh.stop, sh.first, base, tiles, wbegin, wend);
        p.seq = seq;
        p.kvh = q.kvh;
        p.su = q.su;
        p.ue = q.ue;
        p.whole = q.whole;
        p.slot = q.slot;
        p.pb = q.pb;
        p.pe = q.pe;
        p.t0 = q.t0;
        p.ntiles = q.ntiles;
        p.k0 = k;
        k += p.ntiles;
        x = q.xe;
        if (q.kvh + 1u == num_kv_heads && q.xe < sh.stop) {
            base += (uint64_t)tiles * num_kv_heads;
            seq += 1u;
            tiles = paged_decode__unit_tiles(seq_lens, seq, sliding_window, max_blocks_per_seq, block_size, &wbegin,
                                             &wend);
        }
        return true;
    }
};

/* ---- the producer -------------------------------------------------------------- */

/* How the producer moves a tile: rows by the copy engine (rows 16-byte
 * aligned), rows through the lanes' registers (any alignment), or the
 * tensor maps' boxes (block_size % 16 == 0: a tile is one cache block's 16
 * consecutive slots). */
enum class paged_decode__bulk_copy { kRows, kRegisters, kBoxes };

/* Producer warp 8 + j (j < PAGED_DECODE__BULK_PRODUCERS): the tiles k = j
 * (mod PRODUCERS) of every piece into the ring, in stream order (each
 * producer walks every tile, for the page walk and the table chunks, and
 * issues its own). k_cache /
 * v_cache: the caches (byte pointers to element 0; kRows, kRegisters);
 * k_map / v_map: their tensor maps (kBoxes: the 4-D view (d, kv head,
 * slot, block)); block_stride in elements; PAGE16: block_size % 16 == 0,
 * so a tile lies in one cache block, walked tile to tile without a
 * division (else each lane divides its position). spec_seq / spec_page:
 * the guess whose table chunks were loaded (cur, nxt).
 * Per tile (SASS, bench/decode/sass_count.py; paged_decode_bulk_gqa.cu's
 * COUNTS): kRows issues 32 cp.async.bulk,
 * which the compiler serialises through the uniform datapath (an
 * elect/R2UR/UBLKCP loop of one iteration a lane); kBoxes issues 4 (bf16)
 * or 2 (fp8) cp.async.bulk.tensor from lane 0. */
template <bool FP8, paged_decode__bulk_copy MODE, bool PAGE16, class Sched>
static __device__ __forceinline__ void paged_decode__bulk_produce_path(
    Sched sched, uint32_t ring, uint32_t bars, const unsigned char *k_cache, const unsigned char *v_cache,
    const void *k_map, const void *v_map, const int32_t *block_tables, uint32_t max_blocks_per_seq,
    uint32_t num_kv_heads, uint32_t block_size, uint64_t block_stride, uint32_t spec_seq, uint32_t spec_page,
    int32_t cur, int32_t nxt) {
    constexpr bool TMAP = MODE == paged_decode__bulk_copy::kBoxes;
    constexpr bool ENGINE = MODE != paged_decode__bulk_copy::kRegisters;
    static_assert(!TMAP || PAGE16, "a box is 16 slots of one cache block");
    using R = paged_decode__bulk_ring<FP8, TMAP>;
    static_assert(R::NSLOT % PAGED_DECODE__BULK_PRODUCERS == 0u, "a slot is always refilled by one producer");
    const uint32_t lane = threadIdx.x & 31u, r = lane & 15u, is_v = lane >> 4;
    const uint32_t pw = (threadIdx.x >> 5) - 8u; /* this producer: 0 .. PRODUCERS - 1 */
    const uint64_t row_bytes = (uint64_t)num_kv_heads * 128u * R::ES; /* between slots of a cache block */
    const uint64_t block_bytes = block_stride * R::ES;
    paged_decode__bulk_piece p;
    while (sched.next(p)) {
        if (p.ntiles == 0u) continue;
        const int32_t *table = block_tables + (uint64_t)p.seq * max_blocks_per_seq;
        const unsigned char *src_head =
            TMAP ? nullptr : (is_v ? v_cache : k_cache) + (uint64_t)p.kvh * R::ROW;
        /* The entries this piece may read: its pages, within the row. */
        const uint32_t npg = (p.pe - 1u) / block_size + 1u;
        auto chunk = [&](uint32_t base) -> int32_t {
            const uint32_t pg = base + lane;
            return pg < npg ? __ldg(table + pg) : 0;
        };
        uint32_t cbase = p.pb / block_size;
        if (p.seq != spec_seq || cbase != spec_page) {
            cur = chunk(cbase);
            nxt = chunk(cbase + 32u);
        }
        spec_seq = 0xffffffffu; /* the guess serves the first piece only */
        /* PAGE16: the page and first slot of tile t0, walked on by 16. */
        uint32_t tpage = 0u, tslot = 0u;
        if constexpr (PAGE16) {
            tpage = p.t0 * 16u / block_size;
            tslot = p.t0 * 16u - tpage * block_size;
        }
        const uint32_t dst_row = (is_v * 16u + r) * R::RS;
        for (uint32_t i = 0; i < p.ntiles; ++i) {
            const uint64_t k = p.k0 + i;
            const bool mine = (uint32_t)(k % PAGED_DECODE__BULK_PRODUCERS) == pw; /* warp-uniform */
            const uint32_t slot = (uint32_t)(k % R::NSLOT);
            const uint32_t full = bars + 8u * slot, empty = bars + 8u * (R::NSLOT + slot);
            const uint32_t p0 = (p.t0 + i) * 16u, pos = p0 + r;
            const bool interior = p0 >= p.pb && p0 + 16u <= p.pe; /* warp-uniform */
            const bool valid = interior || (pos >= p.pb && pos < p.pe);
            /* The tile's first page, then its rows' entries (at most 16
             * pages past it: within the 64 held once it is in cur). */
            uint32_t pg = 0u, in_page = 0u, tile_slot = 0u;
            if constexpr (PAGE16) {
                pg = tpage;
                tile_slot = tslot;
                in_page = tslot + r;
                tslot += 16u;
                if (tslot == block_size) {
                    tslot = 0u;
                    tpage += 1u;
                }
            }
            if (!mine) continue;
            if constexpr (!PAGE16) {
                pg = valid ? pos / block_size : cbase;
                in_page = pos - pg * block_size;
            }
            /* At most 16 pages a tile: PRODUCERS tiles move it at most 64 pages on. */
            const uint32_t pf = PAGE16 ? pg : (p0 > p.pb ? p0 : p.pb) / block_size;
            while (pf >= cbase + 32u) {
                cur = nxt;
                cbase += 32u;
                nxt = chunk(cbase + 32u);
            }
            const uint32_t off = (pg - cbase) & 63u; /* < 48 for a valid row */
            const int32_t e_cur = __shfl_sync(PAGED_DECODE__FULL, cur, off & 31u);
            const int32_t e_nxt = __shfl_sync(PAGED_DECODE__FULL, nxt, off & 31u);
            const int32_t blk = off < 32u ? e_cur : e_nxt;
            const uint32_t sbase = ring + slot * R::SLOT;

            kl__mbar_wait(empty, (uint32_t)((k / R::NSLOT) & 1u) ^ 1u); /* the slot's last reader is done */
            /* The readers read the slot through the generic proxy and the
             * copy below writes it through the async proxy: without a proxy
             * fence between them (PTX ISA, memory consistency model: proxy
             * fences) the copy's bytes may land before those reads are done.
             * Seen on the H100: a one-block _tma launch right after a
             * 132-block one (its tiles L2 hits, refilled within a few
             * hundred cycles) computed whole units from the next tiles'
             * bytes in 18 of 200 launches; with this fence 0 of 200
             * (paged_decode_test's PersistentBulkOneBlockRefillsNoSlotBeforeItIsRead). */
            if constexpr (ENGINE) kl__fence_proxy_async_shared();
            if constexpr (TMAP) {
                /* The 16 rows whole, positions outside the window too: the
                 * consumers mask them (their bytes may be anything). */
                (void)in_page;
                (void)valid;
                if (lane == 0u) {
                    kl__mbar_arrive_expect_tx(full, 2u * R::BOXES * R::BOX);
#pragma unroll
                    for (uint32_t h = 0; h < R::BOXES; ++h) {
                        const int32_t d0 = (int32_t)(h * 128u / R::ES);
                        kl__tma_load_4d(sbase + h * R::BOX, k_map, d0, (int32_t)p.kvh, (int32_t)tile_slot, blk, full);
                        kl__tma_load_4d(sbase + (R::BOXES + h) * R::BOX, v_map, d0, (int32_t)p.kvh,
                                        (int32_t)tile_slot, blk, full);
                    }
                    if (k == 0u) PAGED_DECODE__STAMP(5); /* the block's first copies issued */
                    PAGED_DECODE__STAMP(13);             /* this producer's last */
                }
                continue;
            }
            const unsigned char *src = src_head + (uint64_t)(int64_t)blk * block_bytes + (uint64_t)in_page * row_bytes;
            const uint32_t dst = sbase + dst_row;
            uint32_t live = PAGED_DECODE__FULL;
            if (!interior) { /* edge tile: rows outside the window are zeros */
                live = __ballot_sync(PAGED_DECODE__FULL, valid);
                if (!valid) {
#pragma unroll
                    for (uint32_t c = 0; c < R::ROW; c += 16u) kl__st_shared_v4(dst + c, make_uint4(0u, 0u, 0u, 0u));
                    if constexpr (ENGINE) kl__fence_proxy_async_shared(); /* the zeros, before later copies */
                }
            }
            if constexpr (ENGINE) {
                __syncwarp();
                /* R::ARRIVALS: every lane arrives, lane 0 with the phase's bytes. */
                if (lane == 0u)
                    kl__mbar_arrive_expect_tx(full, (uint32_t)__popc(live) * R::ROW);
                else
                    kl__mbar_arrive(full);
                if (valid) kl__bulk_load(dst, src, R::ROW, full);
            } else {
                if (valid) {
#pragma unroll
                    for (uint32_t c = 0; c < R::ROW; c += 16u) {
                        uint32_t w[4];
                        paged_decode__load_words<4, (int)R::ES, false>(w, src + c, true);
                        kl__st_shared_v4(dst + c, make_uint4(w[0], w[1], w[2], w[3]));
                    }
                }
                kl__mbar_arrive(full); /* R::ARRIVALS: every lane, after its own stores */
            }
        }
    }
}

/* The producer's path for these caches. Row copies (k_map null): the copy
 * engine when the rows are 16-byte aligned (paged_decode__bulk_aligned),
 * the tile walk when block_size % 16 == 0. Boxes (k_map given): the
 * launcher has checked block_size % 16 == 0. */
template <bool FP8, class Sched>
static __device__ __forceinline__ void paged_decode__bulk_produce(Sched sched, uint32_t ring, uint32_t bars,
                                                                   const unsigned char *k_cache,
                                                                   const unsigned char *v_cache, const void *k_map,
                                                                   const void *v_map, const int32_t *block_tables,
                                                                   uint32_t max_blocks_per_seq, uint32_t num_kv_heads,
                                                                   uint32_t block_size, uint64_t block_stride,
                                                                   bool bulk, uint32_t spec_seq, uint32_t spec_page,
                                                                   int32_t cur, int32_t nxt) {
    using C = paged_decode__bulk_copy;
#define PAGED_DECODE__BULK_PRODUCE(M, P)                                                                         \
    paged_decode__bulk_produce_path<FP8, M, P>(sched, ring, bars, k_cache, v_cache, k_map, v_map, block_tables, \
                                               max_blocks_per_seq, num_kv_heads, block_size, block_stride,       \
                                               spec_seq, spec_page, cur, nxt)
    const bool page16 = block_size % 16u == 0u;
    if (k_map != nullptr) {
        if (page16) PAGED_DECODE__BULK_PRODUCE(C::kBoxes, true);
    } else if (bulk && page16)
        PAGED_DECODE__BULK_PRODUCE(C::kRows, true);
    else if (bulk)
        PAGED_DECODE__BULK_PRODUCE(C::kRows, false);
    else if (page16)
        PAGED_DECODE__BULK_PRODUCE(C::kRegisters, true);
    else
        PAGED_DECODE__BULK_PRODUCE(C::kRegisters, false);
#undef PAGED_DECODE__BULK_PRODUCE
}

/* ---- the consumers ------------------------------------------------------------- */

/* Consumer warp `warp`'s tiles of piece p: wait, read the tile into the
 * _mma core's registers, release the slot, compute. Leaves the warp's
 * state in sm (paged_decode__mma_leave). TMAP: the slot holds the maps'
 * boxes (row r's 16-byte chunk c at c ^ (r % 8)), whose rows outside the
 * window hold whatever the cache holds there: their V words are zeroed in
 * registers (their scores are masked by the step). */
template <bool FP8, bool TMAP, int NH>
static __device__ __forceinline__ void paged_decode__bulk_consume(paged_decode__gqa_smem<NH, 128> &sm,
                                                                   const paged_decode__bulk_piece &p,
                                                                   const __nv_bfloat16 *q_grp, uint32_t ring,
                                                                   uint32_t bars, float score_scale) {
    using R = paged_decode__bulk_ring<FP8, TMAP>;
    using Dims = paged_decode__bulk_dims<FP8>;
    using Tile = paged_decode__mma_tile<FP8>;
    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const bool head_lane = g < (uint32_t)NH;

    uint32_t qa[8][2];
    paged_decode__mma_q<FP8, NH, Dims>(qa, q_grp, g, t, head_lane, score_scale);
    float o[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    const uint32_t begin = p.pb, end = p.pe;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* heads 2t, 2t + 1 */
    const paged_decode__mma_pos_step<FP8, NH> step{qa, o, m, l, score_scale, g, t, begin, end};

    /* This lane's read addresses in a slot (bytes from the slot's start):
     * K rows g + 8u from its dims' first chunk, V rows 2t + (u & 1) +
     * 8 (u >> 1) at its dims' first chunk. A chunk c of the lane's K dims
     * is cc(c) = koff(16c / ES) * ES / 16 chunks further (bf16 0, 1, 8, 9;
     * fp8 0, 1), of its V dims cv(c) (bf16 0, 8). In TMAP boxes, chunk cc
     * is box cc / 8, and as 2t + cc % 8 < 8 its swizzled place is
     * (2t ^ row % 8) ^ (cc % 8): an XOR of 16 bytes. */
    uint32_t koff[2], voff[4];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const uint32_t row = g + 8u * (uint32_t)u;
        koff[u] = TMAP ? row * 128u + ((2u * t) ^ g) * 16u : row * R::RS + Dims::kbase(t) * R::ES;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const uint32_t row = 2u * t + (uint32_t)(u & 1) + 8u * (uint32_t)(u >> 1);
        voff[u] = TMAP ? R::BOXES * R::BOX + row * 128u + ((g ^ (2u * t)) ^ (uint32_t)(u & 1)) * 16u
                       : (16u + row) * R::RS + Dims::vbase(g) * R::ES;
    }

    /* The warp's first tile of the piece: the first stream index >= k0 that is warp mod 8. */
    const uint32_t skip = (warp - (uint32_t)(p.k0 & 7u)) & 7u;
    for (uint32_t i = skip; i < p.ntiles; i += 8u) {
        const uint64_t k = p.k0 + i;
        const uint32_t slot = (uint32_t)(k % R::NSLOT);
        const uint32_t s = ring + slot * R::SLOT;
        kl__mbar_wait(bars + 8u * slot, (uint32_t)((k / R::NSLOT) & 1u));
        if (lane == 0u && k == 0u) PAGED_DECODE__STAMP(6); /* warp 0: the block's first tile landed */
        Tile x;
        auto put = [](uint32_t *w, uint32_t at) {
            const uint4 v = kl__ld_shared_v4(at);
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        };
        constexpr uint32_t ES = R::ES;
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
            for (int c = 0; c < Tile::KW / 4; ++c) {
                const uint32_t cc = Dims::koff((uint32_t)c * 16u / ES) * ES / 16u;
                put(&x.k[u][4 * c],
                    TMAP ? s + (cc / 8u) * R::BOX + (koff[u] ^ ((cc % 8u) * 16u)) : s + koff[u] + cc * 16u);
            }
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int c = 0; c < Tile::VW / 4; ++c) {
                const uint32_t cv = Dims::voff((uint32_t)c * 16u / ES) * ES / 16u;
                put(&x.v[u][4 * c], TMAP ? s + voff[u] + (cv / 8u) * R::BOX : s + voff[u] + cv * 16u);
            }
        /* R::ARRIVALS: boxes, lane 0 once every lane has read the slot;
         * rows, every lane after its own reads. */
        if constexpr (TMAP) {
            __syncwarp();
            if (lane == 0u) kl__mbar_arrive(bars + 8u * (R::NSLOT + slot));
        } else {
            kl__mbar_arrive(bars + 8u * (R::NSLOT + slot));
        }
        const uint32_t p0 = (p.t0 + i) * 16u;
        if (TMAP && !(p0 >= begin && p0 + 16u <= end)) { /* an edge tile (warp-uniform) */
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const uint32_t pos = p0 + 2u * t + (uint32_t)(u & 1) + 8u * (uint32_t)(u >> 1);
                if (pos < begin || pos >= end) {
#pragma unroll
                    for (int w = 0; w < Tile::VW; ++w) x.v[u][w] = 0u;
                }
            }
        }
        step(x, p.t0 + i);
    }
    paged_decode__mma_pos_leave<NH, Dims>(sm, warp, g, t, m, l, o);
}

/* Rows 16-byte aligned, so the copy engine can move them (cp.async.bulk:
 * 16-byte aligned source, destination and size). */
template <bool FP8>
static __device__ __forceinline__ bool paged_decode__bulk_aligned(const void *k_cache, const void *v_cache,
                                                                  uint64_t block_stride) {
    constexpr uint32_t ES = FP8 ? 1u : 2u;
    return (((uintptr_t)k_cache | (uintptr_t)v_cache) & 15u) == 0u && (block_stride * ES) % 16u == 0u;
}

/* Initialises the ring's mbarriers (thread 0), visible to the copy engine,
 * then a block-wide barrier. */
template <bool FP8, bool TMAP> static __device__ __forceinline__ void paged_decode__bulk_init(uint32_t bars) {
    using R = paged_decode__bulk_ring<FP8, TMAP>;
    if (threadIdx.x == 0u) {
        for (uint32_t s = 0; s < 2u * R::NSLOT; ++s) kl__mbar_init(bars + 8u * s, R::ARRIVALS);
        kl__fence_proxy_async_shared();
    }
    __syncthreads();
}

/* The producer's first two table chunks, loaded before seq_lens arrive:
 * entries page .. page + 63 of sequence seq (within the row). */
static __device__ __forceinline__ void paged_decode__bulk_spec_chunks(const int32_t *block_tables, uint32_t seq,
                                                                      uint32_t page, uint32_t max_blocks_per_seq,
                                                                      int32_t *cur, int32_t *nxt) {
    const uint32_t lane = threadIdx.x & 31u;
    const int32_t *row = block_tables + (uint64_t)seq * max_blocks_per_seq;
    const uint32_t a = page + lane, b = page + 32u + lane;
    *cur = a < max_blocks_per_seq ? __ldg(row + a) : 0;
    *nxt = b < max_blocks_per_seq ? __ldg(row + b) : 0;
}

#endif /* KLAUNCH_KERNELS_PAGED_DECODE_BULK_CUH */
