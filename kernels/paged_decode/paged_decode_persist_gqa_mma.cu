/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_persist_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_test.cc (GPU)
 *   tests/paged_decode/paged_decode_split_rule_test.cc (grid and workspace helpers)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_persist_emulated_test \
 *     //tests/paged_decode:paged_decode_test \
 *     //tests/paged_decode:paged_decode_split_rule_test \
 *     //tests/paged_decode:sass_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_persist_bf16_gqa_mma, paged_decode_persist_fp8_gqa_mma
 * (specs/paged_decode.yaml; not in the seed)
 *
 * The functions of paged_decode_attn_{bf16,fp8}_gqa_mma (same core,
 * paged_decode_mma.cuh, same numerics) on a persistent schedule: one launch
 * of num_ctas blocks (one per multiprocessor) for any batch.
 *
 * WHY (H200 figures, docs/PERFORMANCE.md, issue 10). Two schedules lose time
 * to the shape of the grid, not to the loop:
 *   - 1 x 32768 (8 KV heads, bf16, 128 MiB of K+V: 32.3 us at copy speed):
 *     split-KV partial + combine took 44.9 us, ~12 us over the kernel's own
 *     4.13 TB/s. The fixed part is the second launch (the combine waits for
 *     the whole partial grid, its memory flush, and its own start) and 128
 *     of 132 SMs busy.
 *   - 32 x 4096 (256 (seq, KV head) blocks on 132 SMs): 1.94 waves, the
 *     second of 124 blocks, each block's pipeline ramp twice per SM; 0.95x
 *     SDPA.
 * A thread-block cluster that merges its splits through distributed shared
 * memory was the other candidate. It removes the combine launch but not the
 * second wave, and the portable cluster is 8 blocks: one KV head's 16
 * splits (what fills 132 SMs at 8 KV heads) would still need a second
 * merge level. It would also need cluster barriers, mapa and
 * ld.shared::cluster in the emulator. The persistent schedule handles both
 * shapes in one launch with plain atomics: block b of nt = min(nb, T)
 * takes the tiles [floor(b T / nt), floor((b+1) T / nt)) of all T tiles
 * (16 positions each; blocks past nt exit at once;
 * units (seq, KV head) in order, an empty unit counts one tile so that
 * some block writes its zeros), so every SM gets the same bytes whatever
 * the batch. Its cost: a block scans seq_lens twice at its start (a block
 * reduction and a block scan, no more global round trips than the
 * split kernels' seq_lens read), and a unit cut between blocks is merged by
 * the block that arrives last (atomicAdd on the unit's counter), which
 * reads the unit's records (at most ceil(T_unit / (T / nt)) + 1 of them,
 * 17 at 1 x 32768: 35 KB from L2) before it writes the output.
 *
 * RECORDS. Block b writes at most two partial records: slot 0 for its first
 * piece when that piece is a cut unit, slot 1 for its last piece when that
 * is another cut unit (the pieces in between are whole units, written to
 * the output at once). A unit starting at tile su is block b's first piece
 * exactly when su <= first(b), so the merging block finds each record of
 * the unit from su alone, and merges them in block order: the output does
 * not depend on which block arrived last. Record r = (b * 2 + slot) * NH +
 * h: acc at workspace + r * 128, (m, l) at workspace + nb * 2 * NH * 128 +
 * 2 r, as paged_decode__out_partial writes them (base-2 m, dequantised acc).
 *
 * ORDER. Writers: every thread stores its part of the record, fences
 * (__threadfence), the block meets at a barrier, then thread 0 adds 1 to
 * the unit's counter. The last arrival (old value == pieces - 1) fences
 * again, resets the counter to 0 for the next launch, and the block reads
 * the records with ld.global.cg (L2, never the non-coherent path: they
 * were written during this launch). No block waits for another, so the
 * schedule is correct under any order of the blocks (the emulator runs
 * them one after another).
 */

#include "paged_decode_mma.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif

static_assert(KL_THREADS_paged_decode_persist_bf16_gqa_mma == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_persist_fp8_gqa_mma == PAGED_DECODE__THREADS,
              "the persistent kernels run the 256-thread core");

/* What the block's threads share about its schedule. Thread 0 writes it
 * between barriers; the core's registers are all taken (bf16: 255), so
 * nothing of the schedule stays live in registers across a piece. */
struct paged_decode__persist_plan {
    uint64_t first, stop, tq; /* this block's tiles [first, stop); total / nt */
    uint32_t tr, nt;          /* total % nt; nt = min(nb, total): the blocks with tiles */
    uint64_t x;               /* the next tile of this block */
    uint64_t base;            /* first tile of sequence seq's units */
    uint32_t seq, tiles, wbegin, wend; /* tiles: per unit of seq; its window */
    /* the current piece: unit (seq, kvh) from tile su to ue, this block's
     * part ending at xe, positions [pb, pe) */
    uint64_t su, ue, xe;
    uint32_t kvh, pb, pe, whole;
    __nv_bfloat16 *orow; /* the unit's NH output rows */
    float *racc, *rml;   /* this block's record for the piece */
    uint32_t last, b0, b1; /* the merge of a cut unit */
    uint64_t red[PAGED_DECODE__WARPS];
};

/* A piece's result: the output rows (a unit covered whole) or the block's
 * partial record (a cut unit), as the plan says (read once the core is
 * done, after its barriers). */
struct paged_decode__out_persist {
    const paged_decode__persist_plan *plan;
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

/* The block whose tiles hold tile x: the largest b < nb with first(b) <= x. */
static __device__ __forceinline__ uint32_t paged_decode__cta_of(uint64_t x, uint64_t q, uint32_t r, uint32_t nb) {
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

/* Block-wide sum of v (every thread gets it). Uses plan.red; ends with a barrier. */
static __device__ __forceinline__ uint64_t paged_decode__block_sum(paged_decode__persist_plan &plan, uint64_t v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(PAGED_DECODE__FULL, v, (uint32_t)o);
    const uint32_t warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31u) == 0u) plan.red[warp] = v;
    __syncthreads();
    uint64_t t = 0;
#pragma unroll
    for (int w = 0; w < PAGED_DECODE__WARPS; ++w) t += plan.red[w];
    __syncthreads();
    return t;
}

/* Scratch of the merge: one round's records, their (m, l) per head. */
#define PAGED_DECODE__MERGE_ROUND 32
template <int NH> struct paged_decode__merge_smem {
    float m[PAGED_DECODE__MERGE_ROUND][NH];
    float l[PAGED_DECODE__MERGE_ROUND][NH];
    uint32_t rec[PAGED_DECODE__MERGE_ROUND]; /* b * 2 + slot */
};

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

/* The cut unit (s, kvh) starting at tile su is complete: merge its records
 * of blocks b0 .. b1 in block order into its NH output rows.
 *
 * Latency first: this runs at the very end of the launch, after the unit's
 * last piece, so it is all tail. Each round stages up to 32 records' (m, l)
 * in shared memory with one load per thread (one L2 round trip), then each
 * thread merges V = NH * 128 / 256 consecutive elements of one head over
 * the round's records with loads that do not wait on each other (the
 * weights come from shared memory), so the round costs about two L2 round
 * trips whatever its record count. (A first version read m, l and then acc
 * record after record, two dependent L2 round trips per record and
 * element: about 13 us of tail at 1 x 32768, measured on the H200.) Every
 * record of a cut unit is complete (the core writes acc for every head and
 * element, zeros with m = -inf for none), so all of them are read; weights
 * 2^(m_j - M) are 0 for m_j = -inf. */
template <int NH, bool VEC>
static __device__ __forceinline__ void paged_decode__persist_merge(paged_decode__merge_smem<NH> &ms,
                                                                   const float *workspace, __nv_bfloat16 *orow,
                                                                   uint32_t nb, uint32_t nt, uint64_t q, uint32_t r,
                                                                   uint64_t su, uint32_t b0, uint32_t b1) {
    constexpr int V = NH * 128 >= 2 * PAGED_DECODE__THREADS ? NH * 128 / PAGED_DECODE__THREADS : 1;
    constexpr uint32_t ACTIVE = (uint32_t)(NH * 128 / V); /* threads with elements */
    static_assert(NH * 128 % V == 0 && ACTIVE <= PAGED_DECODE__THREADS, "elements split evenly");
    const float *acc = workspace;
    const float *ml = workspace + (uint64_t)nb * 2u * NH * 128u;
    const uint32_t tid = threadIdx.x;
    const uint32_t e0 = tid * (uint32_t)V, h = e0 / 128u, d = e0 % 128u;
    float o[V];
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = 0.0f;
    float M = -INFINITY, L = 0.0f;
    for (uint32_t c = b0; c <= b1; c += PAGED_DECODE__MERGE_ROUND) {
        const uint32_t cnt = b1 - c + 1u < PAGED_DECODE__MERGE_ROUND ? b1 - c + 1u : PAGED_DECODE__MERGE_ROUND;
        for (uint32_t i = tid; i < cnt * (uint32_t)NH; i += PAGED_DECODE__THREADS) {
            const uint32_t j = i / (uint32_t)NH, hh = i % (uint32_t)NH, bb = c + j;
            const uint32_t rec = bb * 2u + (su <= paged_decode__cta_first(bb, q, r, nt) ? 0u : 1u);
            const uint64_t at = 2u * ((uint64_t)rec * NH + hh);
            ms.m[j][hh] = __ldcg(ml + at);
            ms.l[j][hh] = __ldcg(ml + at + 1u);
            if (hh == 0u) ms.rec[j] = rec;
        }
        __syncthreads();
        if (tid < ACTIVE) {
            float mc = -INFINITY;
            for (uint32_t j = 0; j < cnt; ++j) mc = fmaxf(mc, ms.m[j][h]);
            const float mn = fmaxf(M, mc);
            if (mn != -INFINITY) {
                const float alpha = M == -INFINITY ? 0.0f : paged_decode__exp2(M - mn);
                L *= alpha;
#pragma unroll
                for (int v = 0; v < V; ++v) o[v] *= alpha;
                M = mn;
#pragma unroll 8
                for (uint32_t j = 0; j < cnt; ++j) {
                    const float mj = ms.m[j][h];
                    const float f = mj == -INFINITY ? 0.0f : paged_decode__exp2(mj - M);
                    float a[V];
                    paged_decode__ldcg_v<V, VEC>(acc + ((uint64_t)ms.rec[j] * NH + h) * 128u + d, a);
                    L = fmaf(ms.l[j][h], f, L);
#pragma unroll
                    for (int v = 0; v < V; ++v) o[v] = fmaf(a[v], f, o[v]);
                }
            }
        }
        __syncthreads(); /* the round's scratch is read before the next round writes it */
    }
    if (tid < ACTIVE) {
#pragma unroll
        for (int v = 0; v < V; ++v) orow[h * 128u + d + (uint32_t)v] = __float2bfloat16_rn(L > 0.0f ? o[v] / L : 0.0f);
    }
}

template <bool FP8, int NH>
static __device__ __forceinline__ void paged_decode__persist(
    paged_decode__gqa_smem<NH, 128> &sm, paged_decode__persist_plan &plan, paged_decode__merge_smem<NH> &ms,
    const __nv_bfloat16 *q,
    const void *k_cache, const void *v_cache, __nv_bfloat16 *output, const int32_t *block_tables,
    const int32_t *seq_lens, uint32_t max_blocks_per_seq, uint32_t num_seqs, uint32_t num_q_heads,
    uint32_t num_kv_heads, uint32_t block_size, uint32_t q_stride, uint32_t sliding_window, uint64_t block_stride,
    float score_scale, float out_scale, float *workspace, uint32_t *counters) {
    const uint32_t tid = threadIdx.x, b = blockIdx.x, nb = gridDim.x;
    if (num_seqs == 0u) return;

    /* All tiles: num_kv_heads units per sequence. */
    uint64_t mine = 0;
    for (uint32_t s = tid; s < num_seqs; s += PAGED_DECODE__THREADS) {
        uint32_t wb, we;
        mine += paged_decode__unit_tiles(seq_lens, s, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
    }
    const uint64_t total = paged_decode__block_sum(plan, mine) * num_kv_heads;
    /* The tiles are divided among nt = min(nb, total) blocks, so that each
     * of them has at least one (then a unit's pieces are the blocks b0 ..
     * b1 that hold its first and last tile, all of them); blocks past nt
     * have nothing to do. The records stay laid out for nb blocks. */
    const uint32_t nt = total < nb ? (uint32_t)total : nb;
    if (b >= nt) return;
    const uint64_t tq = total / nt;
    const uint32_t tr = (uint32_t)(total % nt);
    const uint64_t first = paged_decode__cta_first(b, tq, tr, nt);
    const uint64_t stop = paged_decode__cta_first(b + 1u, tq, tr, nt);

    /* The sequence holding tile `first`: a block scan of the sequences'
     * tiles, 256 sequences at a time. */
    if (tid == 0u) plan.seq = 0xffffffffu;
    uint64_t run = 0; /* tiles of the sequences before this chunk */
    for (uint32_t c = 0; c < num_seqs; c += PAGED_DECODE__THREADS) {
        const uint32_t s = c + tid;
        uint32_t wb = 0, we = 0, t = 0;
        if (s < num_seqs)
            t = paged_decode__unit_tiles(seq_lens, s, sliding_window, max_blocks_per_seq, block_size, &wb, &we);
        const uint64_t v = (uint64_t)t * num_kv_heads;
        uint64_t incl = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint64_t u = __shfl_up_sync(PAGED_DECODE__FULL, incl, (uint32_t)o);
            if ((tid & 31u) >= (uint32_t)o) incl += u;
        }
        const uint32_t warp = tid >> 5;
        if ((tid & 31u) == 31u) plan.red[warp] = incl;
        __syncthreads();
        uint64_t before = 0, chunk = 0;
#pragma unroll
        for (int w = 0; w < PAGED_DECODE__WARPS; ++w) {
            if ((uint32_t)w < warp) before += plan.red[w];
            chunk += plan.red[w];
        }
        const uint64_t lo = run + before + incl - v, hi = run + before + incl;
        if (v != 0u && lo <= first && first < hi) { /* one thread */
            plan.seq = s;
            plan.base = lo;
            plan.tiles = t;
            plan.wbegin = wb;
            plan.wend = we;
            plan.x = first;
        }
        run += chunk;
        __syncthreads();
        if (plan.seq != 0xffffffffu) break; /* uniform: read after the barrier */
    }

    if (tid == 0u) {
        plan.first = first;
        plan.stop = stop;
        plan.tq = tq;
        plan.tr = tr;
        plan.nt = nt;
    }
    for (;;) {
        __syncthreads(); /* plan written; the last piece's shared-memory reads done */
        if (plan.x >= plan.stop) break;
        if (tid == 0u) {
            const uint64_t x = plan.x, stp = plan.stop, base = plan.base;
            const uint32_t s = plan.seq, T = plan.tiles, wb = plan.wbegin, we = plan.wend;
            const uint32_t kvh = (uint32_t)((x - base) / T);
            const uint64_t su = base + (uint64_t)kvh * T, ue = su + T;
            const uint64_t xe = ue < stp ? ue : stp;
            const uint32_t ta = (uint32_t)(x - su), tb = (uint32_t)(xe - su);
            uint32_t pb = wb, pe = wb;
            if (wb < we) {
                const uint64_t t0 = wb / 16u;
                const uint64_t lo = (t0 + ta) * 16u, hi = (t0 + tb) * 16u;
                pb = lo > wb ? (uint32_t)lo : wb;
                pe = hi < we ? (uint32_t)hi : we;
            }
            const uint32_t slot = su <= plan.first ? 0u : 1u; /* the block's first piece: slot 0 */
            const uint64_t rec = ((uint64_t)b * 2u + slot) * NH;
            plan.kvh = kvh;
            plan.su = su;
            plan.ue = ue;
            plan.xe = xe;
            plan.pb = pb;
            plan.pe = pe;
            plan.whole = ta == 0u && tb == T ? 1u : 0u;
            plan.orow = output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * 128u;
            plan.racc = workspace + rec * 128u;
            plan.rml = workspace + (uint64_t)nb * 2u * NH * 128u + rec * 2u;
        }
        __syncthreads();
        const uint32_t s = plan.seq, kvh = plan.kvh;
        const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
        paged_decode__mma_run<FP8, NH>(sm, q_grp, k_cache, v_cache, paged_decode__out_persist{&plan, out_scale},
                                       block_tables + (uint64_t)s * max_blocks_per_seq, plan.pb, plan.pe, kvh,
                                       num_kv_heads, block_size, block_stride, score_scale);
        if (!plan.whole) {
            __threadfence(); /* this thread's record stores, before the arrival */
            __syncthreads();
            if (tid == 0u) {
                const uint32_t b0 = paged_decode__cta_of(plan.su, plan.tq, plan.tr, plan.nt);
                const uint32_t b1 = paged_decode__cta_of(plan.ue - 1u, plan.tq, plan.tr, plan.nt);
                uint32_t *cnt = counters + (uint64_t)plan.seq * num_kv_heads + plan.kvh;
                const uint32_t old = atomicAdd(cnt, 1u);
                const uint32_t last = old == b1 - b0 ? 1u : 0u;
                if (last) {
                    atomicExch(cnt, 0u); /* every piece has arrived: ready for the next launch */
                    __threadfence();     /* the other blocks' records, before ours are read */
                }
                plan.last = last;
                plan.b0 = b0;
                plan.b1 = b1;
            }
            __syncthreads();
            if (plan.last) {
                /* Vector loads of the records when the workspace allows them (cudaMalloc's does). */
                if ((reinterpret_cast<uintptr_t>(workspace) & 15u) == 0u)
                    paged_decode__persist_merge<NH, true>(ms, workspace, plan.orow, nb, plan.nt, plan.tq, plan.tr,
                                                          plan.su, plan.b0, plan.b1);
                else
                    paged_decode__persist_merge<NH, false>(ms, workspace, plan.orow, nb, plan.nt, plan.tq, plan.tr,
                                                           plan.su, plan.b0, plan.b1);
            }
        }
        /* Thread 0 moves the plan on; the others read it after the barrier
         * at the loop's top (their reads of this piece's plan came before
         * the core's barriers). */
        if (tid == 0u) {
            const uint64_t xe = plan.xe;
            plan.x = xe;
            if (plan.kvh + 1u == num_kv_heads && xe < plan.stop) {
                uint32_t nwb, nwe;
                const uint32_t s1 = plan.seq + 1u;
                plan.base += (uint64_t)plan.tiles * num_kv_heads;
                plan.seq = s1;
                plan.tiles =
                    paged_decode__unit_tiles(seq_lens, s1, sliding_window, max_blocks_per_seq, block_size, &nwb, &nwe);
                plan.wbegin = nwb;
                plan.wend = nwe;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_bf16_gqa_mma, 1)
paged_decode_persist_bf16_gqa_mma(KL_PARAMS_paged_decode_persist_bf16_gqa_mma) {
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    static_assert(DECODE_GQA_PACK_HEAD_DIM == 128, "the MMA layout is for head dim 128");
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    __shared__ paged_decode__persist_plan plan;
    __shared__ paged_decode__merge_smem<NH> ms;
    (void)num_ctas; /* the grid's x extent: gridDim.x */
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u) return;
    paged_decode__persist<false, NH>(sm, plan, ms, q, k_cache, v_cache, output, block_tables, seq_lens,
                                     max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
                                     sliding_window, (uint64_t)block_size * num_kv_heads * 128u,
                                     inv_sqrt_d * PAGED_DECODE__LOG2E, 1.0f, workspace, counters);
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_fp8_gqa_mma, 1)
paged_decode_persist_fp8_gqa_mma(KL_PARAMS_paged_decode_persist_fp8_gqa_mma) {
    constexpr int NH = DECODE_GQA_PACK_WIDTH;
    __shared__ paged_decode__gqa_smem<NH, 128> sm;
    __shared__ paged_decode__persist_plan plan;
    __shared__ paged_decode__merge_smem<NH> ms;
    (void)num_ctas;
    if (head_dim != 128u || num_q_heads != num_kv_heads * (uint32_t)NH || block_size == 0u) return;
    paged_decode__persist<true, NH>(sm, plan, ms, q, k_cache, v_cache, output, block_tables, seq_lens,
                                    max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
                                    sliding_window, cache_stride,
                                    inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E,
                                    v_scale * PAGED_DECODE__FP8_UNIT, workspace, counters);
}
