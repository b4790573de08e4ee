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
 * WHY (H200 figures of 2026-12-01 and -02, issue 10). Two schedules lose time
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
 * the unit's counter with an acquire-release add (paged_decode__persist_arrive).
 * The last arrival (old value == pieces - 1), whose add acquired every other
 * block's record, resets the counter to 0 for the next launch, and the block reads
 * the records with ld.global.cg (L2, never the non-coherent path: they
 * were written during this launch). No block waits for another, so the
 * schedule is correct under any order of the blocks (the emulator runs
 * them one after another).
 */

#include "paged_decode_mma.cuh"
#include "paged_decode_persist.cuh"

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
    paged_decode__persist_share sh; /* this block's tiles [sh.first, sh.stop) */
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

/* Scratch of the merge: one round's records, their (m, l) per head. */
#define PAGED_DECODE__MERGE_ROUND 32
template <int NH> struct paged_decode__merge_smem {
    float m[PAGED_DECODE__MERGE_ROUND][NH];
    float l[PAGED_DECODE__MERGE_ROUND][NH];
    uint32_t rec[PAGED_DECODE__MERGE_ROUND]; /* b * 2 + slot */
};

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
                                                                   uint32_t nb, const paged_decode__persist_share &sh,
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
    const uint32_t s0 = paged_decode__persist_slot0(su, b0, sh);
    for (uint32_t c = b0; c <= b1; c += PAGED_DECODE__MERGE_ROUND) {
        const uint32_t cnt = b1 - c + 1u < PAGED_DECODE__MERGE_ROUND ? b1 - c + 1u : PAGED_DECODE__MERGE_ROUND;
        for (uint32_t i = tid; i < cnt * (uint32_t)NH; i += PAGED_DECODE__THREADS) {
            const uint32_t j = i / (uint32_t)NH, hh = i % (uint32_t)NH, bb = c + j;
            const uint32_t rec = paged_decode__persist_record(bb, b0, s0);
            const uint64_t at = 2u * ((uint64_t)rec * NH + hh);
            ms.m[j][hh] = __ldcg(ml + at);
            ms.l[j][hh] = __ldcg(ml + at + 1u);
            if (hh == 0u) ms.rec[j] = rec;
        }
        __syncthreads();
        if (tid < ACTIVE) {
            float mc = -INFINITY;
            for (uint32_t j = 0; j < cnt; ++j) mc = fmaxf(mc, ms.m[j][h]);
            if (paged_decode__merge_rescale<V>(M, L, o, mc)) {
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
    const uint64_t total = paged_decode__persist_total<PAGED_DECODE__THREADS>(plan, seq_lens, num_seqs, num_kv_heads,
                                                                             sliding_window, max_blocks_per_seq,
                                                                             block_size);
    /* The tiles are divided among min(nb, total) blocks (blocks past them
     * have nothing to do); the records stay laid out for nb blocks. */
    paged_decode__persist_share sh;
    if (!paged_decode__persist_share_of(total, b, nb, sh)) return;

    /* The sequence holding tile `first`. */
    paged_decode__persist_find<PAGED_DECODE__THREADS>(plan, sh.first, seq_lens, num_seqs, num_kv_heads,
                                                      sliding_window, max_blocks_per_seq, block_size);

    if (tid == 0u) plan.sh = sh;
    for (;;) {
        __syncthreads(); /* plan written; the last piece's shared-memory reads done */
        if (plan.x >= plan.sh.stop) break;
        if (tid == 0u) {
            const uint32_t s = plan.seq;
            const paged_decode__persist_piece pc = paged_decode__persist_piece_of(
                plan.x, plan.sh.stop, plan.sh.first, plan.base, plan.tiles, plan.wbegin, plan.wend);
            const uint32_t kvh = pc.kvh;
            const uint64_t rec = ((uint64_t)b * 2u + pc.slot) * NH;
            plan.kvh = kvh;
            plan.su = pc.su;
            plan.ue = pc.ue;
            plan.xe = pc.xe;
            plan.pb = pc.pb;
            plan.pe = pc.pe;
            plan.whole = pc.whole;
            plan.orow = output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * 128u;
            plan.racc = workspace + rec * 128u;
            plan.rml = workspace + (uint64_t)nb * 2u * NH * 128u + rec * 2u;
        }
        __syncthreads();
        const uint32_t s = plan.seq, kvh = plan.kvh;
        const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
        paged_decode__mma_run<FP8, NH>(sm, q_grp, k_cache, v_cache,
                                       paged_decode__out_persist<const paged_decode__persist_plan *>{&plan, out_scale},
                                       block_tables + (uint64_t)s * max_blocks_per_seq, plan.pb, plan.pe, kvh,
                                       num_kv_heads, block_size, block_stride, score_scale);
        if (!plan.whole) {
            __threadfence(); /* this thread's record stores, before the arrival */
            __syncthreads();
            if (tid == 0u) {
                uint32_t b0, b1;
                paged_decode__persist_blocks_of(plan.su, plan.ue, plan.sh, &b0, &b1);
                plan.last =
                    paged_decode__persist_arrive(counters + (uint64_t)plan.seq * num_kv_heads + plan.kvh, b0, b1) ? 1u
                                                                                                              : 0u;
                plan.b0 = b0;
                plan.b1 = b1;
            }
            __syncthreads();
            if (plan.last) {
                /* Vector loads of the records when the workspace allows them (cudaMalloc's does). */
                if ((reinterpret_cast<uintptr_t>(workspace) & 15u) == 0u)
                    paged_decode__persist_merge<NH, true>(ms, workspace, plan.orow, nb, plan.sh, plan.su, plan.b0,
                                                          plan.b1);
                else
                    paged_decode__persist_merge<NH, false>(ms, workspace, plan.orow, nb, plan.sh, plan.su, plan.b0,
                                                           plan.b1);
            }
        }
        /* Thread 0 moves the plan on; the others read it after the barrier
         * at the loop's top (their reads of this piece's plan came before
         * the core's barriers). */
        if (tid == 0u) {
            const uint64_t xe = plan.xe;
            plan.x = xe;
            if (plan.kvh + 1u == num_kv_heads && xe < plan.sh.stop) {
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
