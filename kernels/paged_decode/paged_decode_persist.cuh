/* paged_decode_persist.cuh - the persistent schedule's pieces that the
 * persistent decode kernels share (paged_decode_persist_gqa_mma.cu,
 * paged_decode_bulk_gqa.cu; specs/paged_decode.yaml says how the blocks
 * divide the tiles): a unit's tiles, block b's first tile and the block of a
 * tile, the block-wide count of all tiles and the scan that finds the
 * sequence holding a block's first tile, and the L2 loads of the records.
 * The block-wide parts are templates on the block's THREADS (a multiple of
 * 32) and its plan, a shared-memory struct with the members they name
 * (red[THREADS / 32], seq, base, tiles, wbegin, wend, x).
 */
#ifndef KLAUNCH_KERNELS_PAGED_DECODE_PERSIST_CUH
#define KLAUNCH_KERNELS_PAGED_DECODE_PERSIST_CUH

#include "paged_decode_common.cuh"

/* A piece's result: the output rows (a unit covered whole) or the block's
 * partial record (a cut unit), as the plan says (read once the core is
 * done, after its barriers). */
template <class Plan> struct paged_decode__out_persist {
    Plan plan; /* a pointer to (or a value with operator-> to) whole, orow, racc, rml */
    float scale;
    __device__ __forceinline__ void put(uint32_t h, uint32_t d, uint32_t head_dim, float m, float l, float o) const {
        if (plan->whole) {
            plan->orow[h * head_dim + d] = __float2bfloat16_rn(l > 0.0f ? o * (scale / l) : 0.0f);
        } else {
            plan->racc[h * head_dim + d] = o * scale;
            if (d == 0u) {
                plan->rml[2u * h] = m;
                plan->rml[2u * h + 1u] = l;
            }
        }
    }
};

/* Sequence s's window [*wb, *we) and its tiles per unit (1 for none). */
static __device__ __forceinline__ uint32_t paged_decode__unit_tiles(const int32_t *seq_lens, uint32_t s,
                                                                    uint32_t sliding_window,
                                                                    uint32_t max_blocks_per_seq,
                                                                    uint32_t block_size, uint32_t *wb,
                                                                    uint32_t *we) {
    paged_decode__range(seq_lens[s], sliding_window, max_blocks_per_seq, block_size, wb, we);
    return *wb < *we ? (*we - 1u) / 16u - *wb / 16u + 1u : 1u;
}

/* The first tile of block b of nb: floor(b * total / nb) without overflow
 * (q = total / nb, r = total % nb; b <= nb <= 65535, so b * r < 2^32). */
static __device__ __forceinline__ uint64_t paged_decode__cta_first(uint32_t b, uint64_t q, uint32_t r, uint32_t nb) {
    return (uint64_t)b * q + (uint32_t)(b * r) / nb;
}

/* The block whose tiles hold tile x: the largest b < nb with first(b) <=
 * x. first(b) = floor(b T / nb) (T = q nb + r tiles, T >= nb), and
 * floor(b T / nb) <= x exactly when b T <= (x + 1) nb - 1, so b =
 * floor(((x + 1) nb - 1) / T): one division, where the binary search it
 * replaced (kept for x past 2^47, where (x + 1) nb could overflow) took
 * ~2 x 8 dependent ones on a cut piece's tail (with the cut piece's blocks
 * found at its start and one record slot: 1 x 32768 3.5-3.9% faster on the
 * H100, 2026-12-06, decode_bench --ab). */
static __device__ __forceinline__ uint32_t paged_decode__cta_of(uint64_t x, uint64_t q, uint32_t r, uint32_t nb) {
    if (x < (1ull << 47)) { /* nb <= 65535: (x + 1) nb < 2^63 */
        const uint64_t b = ((x + 1u) * nb - 1u) / (q * nb + r);
        return b < nb ? (uint32_t)b : nb - 1u;
    }
    uint32_t lo = 0, hi = nb - 1u;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo + 1u) / 2u;
        if (paged_decode__cta_first(mid, q, r, nb) <= x)
            lo = mid;
        else
            hi = mid - 1u;
    }
    return lo;
}

/* Block b's share of the launch's `total` tiles: nt = min(nb, total)
 * blocks divide them (so each has at least one, and a unit's pieces are
 * the blocks b0 .. b1 holding its first and last tile); tiles [first,
 * stop) are b's. False for a block past nt, which has nothing to do. */
struct paged_decode__persist_share {
    uint64_t tq, first, stop;
    uint32_t tr, nt;
};
static __device__ __forceinline__ bool paged_decode__persist_share_of(uint64_t total, uint32_t b, uint32_t nb,
                                                                      paged_decode__persist_share &sh) {
    sh.nt = total < nb ? (uint32_t)total : nb;
    if (b >= sh.nt) return false;
    sh.tq = total / sh.nt;
    sh.tr = (uint32_t)(total % sh.nt);
    sh.first = paged_decode__cta_first(b, sh.tq, sh.tr, sh.nt);
    sh.stop = paged_decode__cta_first(b + 1u, sh.tq, sh.tr, sh.nt);
    return true;
}

/* The piece a block's tiles [x, stop) give it of the unit holding tile x,
 * in a sequence whose units start at tile base, tiles each, window [wb,
 * we): the unit's KV head and tiles [su, ue), where the piece ends (xe),
 * its positions [pb, pe), tiles t0 .. t0 + ntiles - 1 (tile t: positions
 * 16t .. 16t + 15), whether it is the whole unit, and its record slot (0
 * for the block's first piece, which begins at or before `first`). */
struct paged_decode__persist_piece {
    uint64_t su, ue, xe;
    uint32_t kvh, pb, pe, t0, ntiles, whole, slot;
};
static __device__ __forceinline__ paged_decode__persist_piece paged_decode__persist_piece_of(
    uint64_t x, uint64_t stop, uint64_t first, uint64_t base, uint32_t tiles, uint32_t wb, uint32_t we) {
    paged_decode__persist_piece p;
    p.kvh = (uint32_t)((x - base) / tiles);
    p.su = base + (uint64_t)p.kvh * tiles;
    p.ue = p.su + tiles;
    p.xe = p.ue < stop ? p.ue : stop;
    const uint32_t ta = (uint32_t)(x - p.su), tb = (uint32_t)(p.xe - p.su);
    p.whole = ta == 0u && tb == tiles ? 1u : 0u;
    p.slot = p.su <= first ? 0u : 1u;
    if (wb < we) {
        const uint32_t t0w = wb / 16u;
        const uint64_t lo = (uint64_t)(t0w + ta) * 16u, hi = (uint64_t)(t0w + tb) * 16u;
        p.pb = lo > wb ? (uint32_t)lo : wb;
        p.pe = hi < we ? (uint32_t)hi : we;
        p.t0 = t0w + ta;
        p.ntiles = tb - ta;
    } else {
        p.pb = p.pe = wb;
        p.t0 = wb / 16u;
        p.ntiles = 0u;
    }
    return p;
}

/* The blocks b0 .. b1 holding a unit's first and last tile (its tiles [su, ue)). */
static __device__ __forceinline__ void paged_decode__persist_blocks_of(uint64_t su, uint64_t ue,
                                                                       const paged_decode__persist_share &sh,
                                                                       uint32_t *b0, uint32_t *b1) {
    *b0 = paged_decode__cta_of(su, sh.tq, sh.tr, sh.nt);
    *b1 = paged_decode__cta_of(ue - 1u, sh.tq, sh.tr, sh.nt);
}

/* A cut unit's records (its tiles from su on, held by blocks b0 .. b1):
 * block bb's is record bb * 2 + its slot, and the slot is 0 for every bb
 * past b0 (the unit began before bb's first tile) and, for b0, 0 when the
 * unit begins at b0's first tile, else 1 (b0's second piece). The slot
 * once per unit, then the record per block without a division. */
static __device__ __forceinline__ uint32_t paged_decode__persist_slot0(uint64_t su, uint32_t b0,
                                                                       const paged_decode__persist_share &sh) {
    return su <= paged_decode__cta_first(b0, sh.tq, sh.tr, sh.nt) ? 0u : 1u;
}
static __device__ __forceinline__ uint32_t paged_decode__persist_record(uint32_t bb, uint32_t b0, uint32_t s0) {
    return bb * 2u + (bb == b0 ? s0 : 0u);
}

/* A cut unit's arrival, by one thread after its block's record is out and
 * ordered before it (by the writers' own fences, or by a barrier with
 * them): the unit's blocks b0 .. b1 count on its counter with one
 * acquire-release add, which releases this block's record (cumulativity)
 * and, for the last to arrive, acquires every other block's (their adds
 * form the counter's release sequence). The last resets the counter for
 * the next launch and gets true; its block may read the records after a
 * barrier with this thread. */
static __device__ __forceinline__ bool paged_decode__persist_arrive(uint32_t *counter, uint32_t b0, uint32_t b1) {
    const bool last = kl__atom_add_acq_rel_gpu(counter, 1u) == b1 - b0;
    if (last) atomicExch(counter, 0u); /* every piece has arrived: ready for the next launch */
    return last;
}

/* Block-wide sum of v (every thread gets it). Uses plan.red; ends with a barrier. */
template <int THREADS, class Plan>
static __device__ __forceinline__ uint64_t paged_decode__block_sum(Plan &plan, uint64_t v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(PAGED_DECODE__FULL, v, (uint32_t)o);
    const uint32_t warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31u) == 0u) plan.red[warp] = v;
    __syncthreads();
    uint64_t t = 0;
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) t += plan.red[w];
    __syncthreads();
    return t;
}

/* All tiles of the launch: num_kv_heads units per sequence, each
 * paged_decode__unit_tiles of its sequence (every thread gets the sum). */
template <int THREADS, class Plan>
static __device__ __forceinline__ uint64_t paged_decode__persist_total(Plan &plan, const int32_t *seq_lens,
                                                                       uint32_t num_seqs, uint32_t num_kv_heads,
                                                                       uint32_t sliding_window,
                                                                       uint32_t max_blocks_per_seq,
                                                                       uint32_t block_size) {
    uint64_t mine = 0;
    for (uint32_t s = threadIdx.x; s < num_seqs; s += THREADS) {
        uint32_t wb, we;
        mine += paged_decode__unit_tiles(seq_lens, s, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
    }
    return paged_decode__block_sum<THREADS>(plan, mine) * num_kv_heads;
}

/* Block-wide exclusive prefix sum of v in thread order (every thread gets
 * its own and, in *sum, the block's total). Uses plan.red and one barrier:
 * the caller's next barrier must come before plan.red is written again. */
template <int THREADS, class Plan>
static __device__ __forceinline__ uint64_t paged_decode__block_scan(Plan &plan, uint64_t v, uint64_t *sum) {
    const uint32_t tid = threadIdx.x, warp = tid >> 5;
    uint64_t incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint64_t u = __shfl_up_sync(PAGED_DECODE__FULL, incl, (uint32_t)o);
        if ((tid & 31u) >= (uint32_t)o) incl += u;
    }
    if ((tid & 31u) == 31u) plan.red[warp] = incl;
    __syncthreads();
    uint64_t before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) {
        if ((uint32_t)w < warp) before += plan.red[w];
        all += plan.red[w];
    }
    *sum = all;
    return before + incl - v;
}

/* The thread whose sequence s holds tile `first` (its units' tiles [lo, lo
 * + v), t a unit) leaves it in plan (paged_decode__persist_find's members). */
template <class Plan>
static __device__ __forceinline__ void paged_decode__persist_hold(Plan &plan, uint64_t first, uint32_t s, uint64_t lo,
                                                                  uint64_t v, uint32_t t, uint32_t wb, uint32_t we) {
    if (v != 0u && lo <= first && first < lo + v) { /* one thread */
        plan.seq = s;
        plan.base = lo;
        plan.tiles = t;
        plan.wbegin = wb;
        plan.wend = we;
        plan.x = first;
    }
}

/* The sequence holding tile `first` (first < the total): a block scan of
 * the sequences' tiles, THREADS sequences at a time. Leaves in plan: seq,
 * base (the first tile of seq's units), tiles (per unit of seq), wbegin,
 * wend (its window) and x = first; ends with a barrier. */
template <int THREADS, class Plan>
static __device__ __forceinline__ void paged_decode__persist_find(Plan &plan, uint64_t first, const int32_t *seq_lens,
                                                                  uint32_t num_seqs, uint32_t num_kv_heads,
                                                                  uint32_t sliding_window,
                                                                  uint32_t max_blocks_per_seq, uint32_t block_size) {
    const uint32_t tid = threadIdx.x;
    if (tid == 0u) plan.seq = 0xffffffffu;
    uint64_t run = 0; /* tiles of the sequences before this chunk */
    for (uint32_t c = 0; c < num_seqs; c += (uint32_t)THREADS) {
        const uint32_t s = c + tid;
        uint32_t wb = 0, we = 0, t = 0;
        if (s < num_seqs)
            t = paged_decode__unit_tiles(seq_lens, s, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
        const uint64_t v = (uint64_t)t * num_kv_heads;
        uint64_t chunk;
        const uint64_t lo = run + paged_decode__block_scan<THREADS>(plan, v, &chunk);
        paged_decode__persist_hold(plan, first, s, lo, v, t, wb, we);
        run += chunk;
        __syncthreads();
        if (plan.seq != 0xffffffffu) break; /* uniform: read after the barrier */
    }
}

/* Where block b's tiles begin: tile x, at sequence seq, whose units start
 * at tile base, `tiles` each, window [wbegin, wend). */
struct paged_decode__persist_first {
    uint64_t x, base;
    uint32_t seq, tiles, wbegin, wend;
};

/* Block b's share and where it begins (in every thread's registers): false
 * for a block with nothing to do. Up to 32 sequences (a decode batch of 1
 * to 32), every warp on its own: a lane a length, a warp scan, a ballot
 * for the interval holding `first`; no barrier and no shared memory (the
 * block scan below took the H100's trace 0.35-0.4 us longer from entry to
 * the block's first tile found, 2026-12-06). Up to
 * THREADS sequences, one block pass: each thread reads one length once,
 * and one block scan gives both the total and the interval holding `first`
 * (two barriers). More sequences take paged_decode__persist_total, then
 * _find (two reads of seq_lens, four or more barriers: ~0.7 us more on the
 * H200's trace). The block paths use plan's words and end with a barrier
 * after every thread has read them. */
template <int THREADS, class Plan>
static __device__ __forceinline__ bool paged_decode__persist_locate(Plan &plan, const int32_t *seq_lens,
                                                                    uint32_t num_seqs, uint32_t num_kv_heads,
                                                                    uint32_t sliding_window,
                                                                    uint32_t max_blocks_per_seq, uint32_t block_size,
                                                                    uint32_t b, uint32_t nb,
                                                                    paged_decode__persist_share &sh,
                                                                    paged_decode__persist_first &at) {
    const uint32_t tid = threadIdx.x;
    if (num_seqs <= 32u) {
        const uint32_t lane = tid & 31u;
        uint32_t wb = 0, we = 0, t = 0;
        if (lane < num_seqs)
            t = paged_decode__unit_tiles(seq_lens, lane, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
        const uint64_t v = (uint64_t)t * num_kv_heads;
        uint64_t incl = v;
#pragma unroll
        for (uint32_t o = 1; o < 32u; o <<= 1) {
            const uint64_t u = __shfl_up_sync(PAGED_DECODE__FULL, incl, o);
            if (lane >= o) incl += u;
        }
        const uint64_t total = __shfl_sync(PAGED_DECODE__FULL, incl, 31u);
        if (!paged_decode__persist_share_of(total, b, nb, sh)) return false;
        const uint64_t lo = incl - v;
        const uint32_t hold = __ballot_sync(PAGED_DECODE__FULL, v != 0u && lo <= sh.first && sh.first < lo + v);
        const uint32_t src = hold != 0u ? (uint32_t)__ffs((int)hold) - 1u : 0u; /* one lane: the intervals tile [0, total) */
        at.x = sh.first;
        at.seq = src;
        at.base = __shfl_sync(PAGED_DECODE__FULL, lo, src);
        at.tiles = __shfl_sync(PAGED_DECODE__FULL, t, src);
        at.wbegin = __shfl_sync(PAGED_DECODE__FULL, wb, src);
        at.wend = __shfl_sync(PAGED_DECODE__FULL, we, src);
        return true;
    }
    if (num_seqs > (uint32_t)THREADS) {
        const uint64_t total = paged_decode__persist_total<THREADS>(plan, seq_lens, num_seqs, num_kv_heads,
                                                                    sliding_window, max_blocks_per_seq, block_size);
        if (!paged_decode__persist_share_of(total, b, nb, sh)) return false;
        paged_decode__persist_find<THREADS>(plan, sh.first, seq_lens, num_seqs, num_kv_heads, sliding_window,
                                            max_blocks_per_seq, block_size);
    } else {
        uint32_t wb = 0, we = 0, t = 0;
        if (tid < num_seqs)
            t = paged_decode__unit_tiles(seq_lens, tid, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
        const uint64_t v = (uint64_t)t * num_kv_heads;
        uint64_t total;
        const uint64_t lo = paged_decode__block_scan<THREADS>(plan, v, &total);
        if (!paged_decode__persist_share_of(total, b, nb, sh)) return false; /* uniform: every thread has total */
        paged_decode__persist_hold(plan, sh.first, tid, lo, v, t, wb, we);
        __syncthreads();
    }
    at.x = plan.x;
    at.seq = plan.seq;
    at.base = plan.base;
    at.tiles = plan.tiles;
    at.wbegin = plan.wbegin;
    at.wend = plan.wend;
    __syncthreads(); /* every thread has read the plan (the caller may reuse its words) */
    return true;
}

/* A record merge's running state (M, L, o) brought to the larger max of M
 * and mc (o and L rescaled by 2^(M - max), 0 while M is -inf); false, and
 * nothing changed, while both are -inf (no record with a position yet). */
template <int V>
static __device__ __forceinline__ bool paged_decode__merge_rescale(float &M, float &L, float (&o)[V], float mc) {
    const float mn = fmaxf(M, mc);
    if (mn == -INFINITY) return false;
    const float alpha = M == -INFINITY ? 0.0f : paged_decode__exp2(M - mn);
    L *= alpha;
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] *= alpha;
    M = mn;
    return true;
}

/* V consecutive floats from the L2 (ld.global.cg: written in this launch);
 * one vector load when VEC (p aligned to V floats). */
template <int V, bool VEC>
static __device__ __forceinline__ void paged_decode__ldcg_v(const float *p, float (&v)[V]) {
    if constexpr (!VEC) {
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = __ldcg(p + i);
    } else if constexpr (V == 4) {
        const float4 t = __ldcg(reinterpret_cast<const float4 *>(p));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else if constexpr (V == 2) {
        const float2 t = __ldcg(reinterpret_cast<const float2 *>(p));
        v[0] = t.x, v[1] = t.y;
    } else {
        static_assert(V == 1, "1, 2 or 4 floats");
        v[0] = __ldcg(p);
    }
}

#endif /* KLAUNCH_KERNELS_PAGED_DECODE_PERSIST_CUH */
