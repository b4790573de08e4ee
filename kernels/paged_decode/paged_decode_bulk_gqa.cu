/* Reference: tests/paged_decode/paged_decode_reference.h (float64)
 * Tests:
 *   tests/paged_decode/paged_decode_bulk_emulated_test.cc (CPU emulator)
 *   tests/paged_decode/paged_decode_test.cc (GPU)
 *   tests/paged_decode/paged_decode_bulk_launch_test.cc (launchers, refusals)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/paged_decode:paged_decode_bulk_emulated_test \
 *     //tests/paged_decode:paged_decode_test \
 *     //tests/paged_decode:paged_decode_bulk_launch_test \
 *     //tests/paged_decode:sass_test
 */
#include "klaunch/paged_decode.cuh"

/* paged_decode_{attn,persist}_{bf16,fp8}_gqa_bulk (row copies) and
 * paged_decode_{attn,persist}_{bf16,fp8}_gqa_tma (tensor-map boxes)
 * (specs/paged_decode.yaml; not in the seed; sm_90a machine code only)
 *
 * The functions and numerics of paged_decode_attn_{bf16,fp8}_gqa_mma
 * (kernel-contract.md, kernels 11 and 12, on tensor cores:
 * paged_decode_mma.cuh) and of the persistent paged_decode_persist_*_gqa_mma
 * (same schedule, workspace records and counters), with the cache tiles
 * brought into a shared-memory ring by the bulk copy engine from producer
 * warps, completing on mbarriers: paged_decode_bulk.cuh says how.
 *
 * WHY (H200 figures of 2026-12-02 to -04; copy 4.19-4.23 TB/s, 132 SMs,
 * ~1.98 GHz: 16.1 bytes a cycle an SM). The _mma kernels keep every byte
 * in flight in the tensor-core warps' registers: one 8-warp block an SM at
 * 233-255 registers, 8 warps x 1 (bf16, 8 KiB) or 2 (fp8, 4 KiB) tiles
 * arriving while one is computed, and a warp issues its next loads only
 * between computing tiles. Measured: bf16 32 x 4096 0.969 of copy (0.954x
 * SDPA), fp8 0.775 of copy in fp8 bytes (1.60x bf16 tokens/s; ncu: DRAM
 * 64-68%, 35% of stalls on global-load scoreboards, a 4th register tile
 * did not help), 1 x 32768 0.725 (persistent). Here the consumers'
 * registers hold the one tile being computed; the bytes in flight are the
 * ring's, 16 x 8 KiB (bf16) or 32 x 4 KiB (fp8 rows) = 128 KiB per SM, 48
 * x 4 KiB (fp8 boxes) = 192 KiB, refilled as soon as a consumer releases a
 * slot.
 *
 * COUNTS per tile of 16 positions x 1 KV head (head dim 128, NH <= 8
 * query heads of the group; SASS of the sm_90a cubin, nvcc 13.0,
 * bench/decode/sass_count.py CUBIN KERNEL prints them):
 *   bytes: K + V 8192 (bf16) / 4096 (fp8), read once, from DRAM; due every
 *     508 / 254 cycles an SM at copy speed;
 *   FLOPs: 2 x 16 x 128 x NH x 2 = 8192 NH (S and P V): 0.5 NH a bf16
 *     byte, NH an fp8 byte (memory-bound by far); a consumer warp issues
 *     16 HMMA m16n8k16 for S and 8 (fp8) or 16 (bf16: p = hi + lo) for P V;
 *   consumer loop: 16 (bf16) / 8 (fp8) ld.shared.v4 a lane, 290-350 (bf16)
 *     / 335-375 (fp8) instructions: 1.1-1.4 / 2.6-2.9 thread instructions a
 *     cache byte against the 7.8 an SM can issue while memory keeps up;
 *     fp8 converts with 64 packed cvt a lane (F2FP.F16.E4M3.UNPACK_B);
 *   producer, rows (_bulk): 32 cp.async.bulk, one a lane, which ptxas
 *     issues one at a time through the uniform datapath (an ELECT / R2UR /
 *     UBLKCP loop of ~8 instructions an iteration): ~120-165 + 256
 *     instructions a tile, 32 copy-engine requests of 256 / 128 bytes;
 *   producer, boxes (_tma): 4 (bf16) / 2 (fp8) cp.async.bulk.tensor from
 *     lane 0, ~95-120 instructions a tile, 4 / 2 requests of 2 KiB;
 *   four producer warps take every fourth tile each, so a producer has
 *   2032 (bf16) / 1016 (fp8) cycles for its tile.
 * Registers: __launch_bounds__(384, 1) gives at most 168 a thread (12
 * warps: three share a sub-partition's 16384); ptxas -v: 123-168, no
 * spills (sass_test). Shared memory (dynamic, the spec's shared_bytes): a
 * ring of 16 (bf16) / 32 (fp8) slots of rows, 32 rows x 272 / 144 bytes
 * (139264 / 147456), or 16 / 48 slots of boxes, 8 / 4 KiB (131072 /
 * 196608, 1024-byte aligned, 1 KiB of slack); 2 mbarriers a slot; the merge scratch, 4160 bytes a query
 * head (8 warps x (128 + 2) floats); 512 bytes of schedule. One block an
 * SM.
 *
 * PERSISTENT (paged_decode_persist_*_gqa_{bulk,tma}): the schedule of
 * paged_decode_persist_gqa_mma.cu (block b takes tiles [floor(b T / nt),
 * floor((b + 1) T / nt)) of all units; whole units to the output, cut
 * units as records merged by the last arrival), with three changes for the
 * 1 x 32768 shape's ~11.5 us of latency chains (H200, 2026-12-02: the
 * launch, seq_lens -> block table -> K/V before an SM streams, each warp's
 * ramp, the block merge, the arrival and the last block's merge):
 *   - the producers stream the block's tiles across its pieces (they start
 *     the next unit's tiles while the consumers merge the last), so a
 *     block ramps once, not once a piece;
 *   - launched as a programmatic dependent launch (the spec's
 *     programmatic_serialization): it triggers its dependents on entry,
 *     sets up the ring and its mbarriers, and waits (griddepcontrol.wait)
 *     only before its first global access, so its launch and prologue run
 *     under the previous kernel's tail; and the first block-table entries
 *     are read speculatively while seq_lens arrive (paged_decode_bulk.cuh).
 *     Nothing before the wait touches global memory (the maps it prefetches
 *     are kernel parameters), so a launch of these on the workspace and
 *     counters the previous kernel is still using is safe: the wait returns
 *     once that kernel has completed, its last arrivals having reset every
 *     counter (emulated: the BackToBack* tests, where every access before a
 *     programmatic launch's wait is checked against the launch before);
 *   - the merge of a cut unit's records is one L2 round trip: each thread
 *     loads (m, l) and its accumulator elements of up to 16 records at
 *     once, independent loads, then combines (the _mma kernel's merge
 *     stages (m, l) first: two round trips).
 *
 * TRIED AND NOT KEPT (each measured in one run against the kept code; the
 * runs in full: git show 11e7d68:docs/PERFORMANCE.md):
 *   - Claimed shares (a fifth of the tiles taken from a ticket counter,
 *     for the per-SM spread of the blocks' ends): H200, 2026-12-04, bf16
 *     32 x 4096 0.758 of copy against 1.016. A cut piece stops the stream
 *     (the claim's round trip, the walk to the new share, the consumers'
 *     merge, record and arrival): ~9 us a piece, while the ring holds 16
 *     tiles. A claimed pool of the last eighth in larger chunks (H100,
 *     2026-12-06) still ran at 0.925x (bf16) and 0.79x (fp8) the static
 *     shares' speed; the read probe put that loss in the pieces, not the
 *     schedule.
 *   - A 24-slot bf16 box ring (192 KiB in flight): H200, 2026-12-04, 1.010
 *     of copy against 1.016 and the same per-SM spread, so the late SMs
 *     are short of memory bandwidth, not of bytes in flight.
 *   - Units KV head by KV head (a sequence's 8 heads read together at 128
 *     blocks): H200, 2026-12-04, within the runs' noise; sequence by
 *     sequence kept.
 *   - Heads 2 <-> 3 and 6 <-> 7 swapped in the schedule (against DRAM
 *     aliasing of the per-head rows): H100, 2026-12-06, bf16 B / A 1.008,
 *     slower; a shuffled block table already spreads the rows.
 *   - The grouped GEMM's pacing on these blocks (a producer waits for the
 *     others): H100, 2026-12-06, 1.01-1.16x slower: decode's slow SMs are
 *     slow on their own.
 *   - fp8 consumers taking two tiles a step (one max, one rescale): H100,
 *     2026-12-06, B / A 0.998 (fp8 is memory-bound on the H100), and 20x
 *     the `_mma` seed kernel's deviation (P rounded over 32 positions).
 *   - 32-bit and shift fast paths for the producer's divisions: H100,
 *     2026-12-06, no change (the ~0.9 us from the first tile found to the
 *     first copy is not the divisions).
 *   - Reading the cache head-major ([block, kv head, slot, d], timing
 *     only): H100, 2026-12-06, 0.998x: the token-major rows cost nothing.
 */

#include "paged_decode_bulk.cuh"

#if !defined(DECODE_GQA_PACK_WIDTH) || !defined(DECODE_GQA_PACK_HEAD_DIM)
#error "klaunch/paged_decode.cuh did not define the GQA pack constants; regenerate it from specs/paged_decode.yaml"
#endif

static_assert(KL_THREADS_paged_decode_attn_bf16_gqa_bulk == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_attn_fp8_gqa_bulk == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_persist_bf16_gqa_bulk == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_persist_fp8_gqa_bulk == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_attn_bf16_gqa_tma == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_attn_fp8_gqa_tma == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_persist_bf16_gqa_tma == PAGED_DECODE__BULK_THREADS &&
                  KL_THREADS_paged_decode_persist_fp8_gqa_tma == PAGED_DECODE__BULK_THREADS,
              "the bulk kernels run 8 consumer warps and a producer warp");
#define PAGED_DECODE__BULK_SMEM(FP8, TMAP) paged_decode__bulk_smem<FP8, TMAP, DECODE_GQA_PACK_WIDTH>::BYTES
static_assert(KL_SHARED_BYTES_paged_decode_attn_bf16_gqa_bulk == PAGED_DECODE__BULK_SMEM(false, false) &&
                  KL_SHARED_BYTES_paged_decode_persist_bf16_gqa_bulk == PAGED_DECODE__BULK_SMEM(false, false) &&
                  KL_SHARED_BYTES_paged_decode_attn_fp8_gqa_bulk == PAGED_DECODE__BULK_SMEM(true, false) &&
                  KL_SHARED_BYTES_paged_decode_persist_fp8_gqa_bulk == PAGED_DECODE__BULK_SMEM(true, false) &&
                  KL_SHARED_BYTES_paged_decode_attn_bf16_gqa_tma == PAGED_DECODE__BULK_SMEM(false, true) &&
                  KL_SHARED_BYTES_paged_decode_persist_bf16_gqa_tma == PAGED_DECODE__BULK_SMEM(false, true),
              "specs/paged_decode.yaml's shared_bytes is paged_decode_bulk.cuh's layout");
#ifndef PAGED_DECODE_BULK_FP8_BOX_SLOTS
static_assert(KL_SHARED_BYTES_paged_decode_attn_fp8_gqa_tma == PAGED_DECODE__BULK_SMEM(true, true) &&
                  KL_SHARED_BYTES_paged_decode_persist_fp8_gqa_tma == PAGED_DECODE__BULK_SMEM(true, true),
              "specs/paged_decode.yaml's shared_bytes is paged_decode_bulk.cuh's layout");
#else /* bench/decode/ab.sh's build: another ring, within what the launcher gives */
static_assert(KL_SHARED_BYTES_paged_decode_attn_fp8_gqa_tma >= PAGED_DECODE__BULK_SMEM(true, true) &&
                  KL_SHARED_BYTES_paged_decode_persist_fp8_gqa_tma >= PAGED_DECODE__BULK_SMEM(true, true),
              "the A/B build's fp8 box ring fits the launcher's shared memory");
#endif
/* A map's box is what the producer copies: 16 slots of 128 bytes. */
static_assert(KL_TMAP_paged_decode_attn_bf16_gqa_tma_k_map_BYTES == paged_decode__bulk_ring<false, true>::BOX &&
                  KL_TMAP_paged_decode_attn_bf16_gqa_tma_v_map_BYTES == paged_decode__bulk_ring<false, true>::BOX &&
                  KL_TMAP_paged_decode_persist_bf16_gqa_tma_k_map_BYTES == paged_decode__bulk_ring<false, true>::BOX &&
                  KL_TMAP_paged_decode_persist_bf16_gqa_tma_v_map_BYTES == paged_decode__bulk_ring<false, true>::BOX &&
                  KL_TMAP_paged_decode_attn_fp8_gqa_tma_k_map_BYTES == paged_decode__bulk_ring<true, true>::BOX &&
                  KL_TMAP_paged_decode_attn_fp8_gqa_tma_v_map_BYTES == paged_decode__bulk_ring<true, true>::BOX &&
                  KL_TMAP_paged_decode_persist_fp8_gqa_tma_k_map_BYTES == paged_decode__bulk_ring<true, true>::BOX &&
                  KL_TMAP_paged_decode_persist_fp8_gqa_tma_v_map_BYTES == paged_decode__bulk_ring<true, true>::BOX &&
                  KL_TMAP_paged_decode_attn_bf16_gqa_tma_k_map_BOX0 == 64 &&
                  KL_TMAP_paged_decode_attn_bf16_gqa_tma_k_map_BOX2 == 16 &&
                  KL_TMAP_paged_decode_attn_fp8_gqa_tma_k_map_BOX0 == 128 &&
                  KL_TMAP_paged_decode_attn_fp8_gqa_tma_k_map_BOX2 == 16,
              "the maps' boxes are 128 bytes of a row x 16 slots (specs/paged_decode.yaml)");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)

/* What the persistent bulk block keeps in shared memory: the block scans'
 * scratch and their result (paged_decode_persist.cuh's plan members), the
 * last-arrival flag of a cut piece, and the consumers' schedule and
 * current piece (thread 0 moves them on between the consumers' barriers;
 * in registers they would cost the tensor-core warps 30 of the 168 a
 * thread of a 9-warp block gets: three warps share a sub-partition's
 * 16384). */
struct paged_decode__bulk_plan {
    uint64_t red[PAGED_DECODE__BULK_THREADS / 32];
    uint64_t base, x;
    uint32_t seq, tiles, wbegin, wend, last, more;
    uint32_t b0, b1, s0; /* a cut piece's blocks and b0's record slot */
    paged_decode__bulk_sched_persist sched;
    paged_decode__bulk_piece piece;
};

/* Where a piece's result goes (paged_decode__out_persist's plan, held by
 * value: in registers, where a pointer to it would put it in local memory). */
struct paged_decode__bulk_dest {
    uint32_t whole;
    __nv_bfloat16 *orow;
    float *racc, *rml;
    __device__ __forceinline__ const paged_decode__bulk_dest *operator->() const { return this; }
};

/* The cut unit's pieces are complete: merge its records of blocks b0 ..
 * b1 in block order into its NH output rows, by the 256 consumer threads
 * (V = NH * 128 / 256 elements each; s0: b0's record slot,
 * paged_decode__persist_slot0). One L2 round trip per 16 records: every thread issues the
 * (m, l) and accumulator loads of its head for 16 records at once (records
 * past b1 load b1's again and are masked), then combines them in block
 * order. */
template <int NH, bool VEC>
static __device__ __forceinline__ void paged_decode__bulk_merge_records(const float *workspace, __nv_bfloat16 *orow,
                                                                        uint32_t nb, uint32_t b0, uint32_t b1,
                                                                        uint32_t s0) {
    constexpr int V = NH * 128 / PAGED_DECODE__THREADS;
    constexpr int RB = 16;
    static_assert(V >= 1 && NH * 128 == V * PAGED_DECODE__THREADS, "the consumers split a unit's rows evenly");
    const float *acc = workspace;
    const float *ml = workspace + (uint64_t)nb * 2u * NH * 128u;
    const uint32_t e0 = threadIdx.x * (uint32_t)V, h = e0 / 128u, d = e0 % 128u;
    float o[V];
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = 0.0f;
    float M = -INFINITY, L = 0.0f;
    for (uint32_t c = b0; c <= b1; c += (uint32_t)RB) {
        float mj[RB], lj[RB], aj[RB][V];
#pragma unroll
        for (int j = 0; j < RB; ++j) {
            const uint32_t bb = c + (uint32_t)j <= b1 ? c + (uint32_t)j : b1;
            const uint32_t rec = paged_decode__persist_record(bb, b0, s0);
            const uint64_t at = (uint64_t)rec * NH + h;
            mj[j] = __ldcg(ml + 2u * at);
            lj[j] = __ldcg(ml + 2u * at + 1u);
            paged_decode__ldcg_v<V, VEC>(acc + at * 128u + d, aj[j]);
        }
        float mc = -INFINITY;
#pragma unroll
        for (int j = 0; j < RB; ++j) {
            if (c + (uint32_t)j > b1) mj[j] = -INFINITY; /* past the unit's records */
            mc = fmaxf(mc, mj[j]);
        }
        if (paged_decode__merge_rescale<V>(M, L, o, mc)) {
#pragma unroll
            for (int j = 0; j < RB; ++j) {
                const float f = mj[j] == -INFINITY ? 0.0f : paged_decode__exp2(mj[j] - M);
                L = fmaf(lj[j], f, L);
#pragma unroll
                for (int v = 0; v < V; ++v) o[v] = fmaf(aj[j][v], f, o[v]);
            }
        }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) orow[h * 128u + d + (uint32_t)v] = __float2bfloat16_rn(L > 0.0f ? o[v] / L : 0.0f);
}

/* Where a bulk kernel's parts lie in its dynamic shared memory (the
 * first ALIGN-aligned byte on): shared addresses and generic pointers. */
template <bool FP8, bool TMAP, int NH> struct paged_decode__bulk_parts {
    using L = paged_decode__bulk_smem<FP8, TMAP, NH>;
    uint32_t ring, bars;
    paged_decode__gqa_smem<NH, 128> *sm;
    unsigned char *misc;
    __device__ __forceinline__ explicit paged_decode__bulk_parts(unsigned char *smem) {
        constexpr uint32_t A = paged_decode__bulk_ring<FP8, TMAP>::ALIGN;
        const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem);
        const uint32_t base = (raw + A - 1u) & ~(A - 1u);
        unsigned char *g = smem + (base - raw);
        ring = base + L::RING;
        bars = base + L::BAR;
        sm = reinterpret_cast<paged_decode__gqa_smem<NH, 128> *>(g + L::MERGE);
        misc = g + L::MISC;
    }
};

/* The seed grid: block (kvh, seq) computes its unit whole. TMAP: the
 * caches come as the tensor maps k_map, v_map (k_cache, v_cache null). */
template <bool FP8, bool TMAP, int NH>
static __device__ __forceinline__ void paged_decode__bulk_seed(
    unsigned char *smem, const __nv_bfloat16 *q, const void *k_cache, const void *v_cache, const void *k_map,
    const void *v_map, __nv_bfloat16 *output, const int32_t *block_tables, const int32_t *seq_lens,
    uint32_t max_blocks_per_seq, uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t block_size,
    uint32_t q_stride, uint32_t sliding_window, uint64_t block_stride, float score_scale, float out_scale) {
    const paged_decode__bulk_parts<FP8, TMAP, NH> at(smem);
    const uint32_t kvh = blockIdx.x, s = blockIdx.y;
    paged_decode__bulk_sched_seed sched{s, kvh, 0u, max_blocks_per_seq, block_size, sliding_window, seq_lens};
    paged_decode__bulk_init<FP8, TMAP>(at.bars);
    if ((threadIdx.x >> 5) >= 8u) {
        if (TMAP) {
            kl__prefetch_tensormap(k_map);
            kl__prefetch_tensormap(v_map);
        }
        int32_t cur, nxt;
        const uint32_t page = sched.guess_page();
        paged_decode__bulk_spec_chunks(block_tables, s, page, max_blocks_per_seq, &cur, &nxt);
        paged_decode__bulk_produce<FP8>(sched, at.ring, at.bars, reinterpret_cast<const unsigned char *>(k_cache),
                                        reinterpret_cast<const unsigned char *>(v_cache), k_map, v_map, block_tables,
                                        max_blocks_per_seq, num_kv_heads, block_size, block_stride,
                                        paged_decode__bulk_aligned<FP8>(k_cache, v_cache, block_stride), s, page, cur,
                                        nxt);
        return;
    }
    paged_decode__bulk_piece p;
    sched.next(p);
    const __nv_bfloat16 *q_grp = q + (uint64_t)s * q_stride + (uint64_t)kvh * NH * 128u;
    paged_decode__bulk_consume<FP8, TMAP, NH>(*at.sm, p, q_grp, at.ring, at.bars, score_scale);
    const paged_decode__out_bf16 out{output + ((uint64_t)s * num_q_heads + (uint64_t)kvh * NH) * 128u, out_scale};
    paged_decode__gqa_merge<NH, 128>(*at.sm, out, PAGED_DECODE__BULK_MERGE_BAR);
}

/* The persistent schedule (the file's opening comment). */
template <bool FP8, bool TMAP, int NH>
static __device__ __forceinline__ void paged_decode__bulk_persist(
    unsigned char *smem, const __nv_bfloat16 *q, const void *k_cache, const void *v_cache, const void *k_map,
    const void *v_map, __nv_bfloat16 *output, const int32_t *block_tables, const int32_t *seq_lens,
    uint32_t max_blocks_per_seq, uint32_t num_seqs, uint32_t num_q_heads, uint32_t num_kv_heads,
    uint32_t block_size, uint32_t q_stride, uint32_t sliding_window, uint64_t block_stride, float score_scale,
    float out_scale, float *workspace, uint32_t *counters) {
    static_assert(sizeof(paged_decode__bulk_plan) <= PAGED_DECODE__BULK_MISC, "the plan fits its bytes");
    const paged_decode__bulk_parts<FP8, TMAP, NH> at(smem);
    const uint32_t ring = at.ring, bars = at.bars;
    paged_decode__gqa_smem<NH, 128> &sm = *at.sm;
    paged_decode__bulk_plan &plan = *reinterpret_cast<paged_decode__bulk_plan *>(at.misc);
    const uint32_t tid = threadIdx.x, warp = tid >> 5, b = blockIdx.x, nb = gridDim.x;

    if (tid == 0u) PAGED_DECODE__STAMP(0); /* entry (PAGED_DECODE__STAMP: paged_decode_bulk.cuh) */
#ifdef PAGED_DECODE_TRACE
    if (tid == 0u) {
        uint32_t sm_;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));
        paged_decode__trace[b * 32u + 15u] = 1u + sm_;
    }
#endif
    kl__griddep_launch_dependents();
    /* The maps are kernel parameters (no earlier kernel writes them): their
     * fetch overlaps the lengths' scan instead of following it (0.67 us
     * from the scan's end to the first copy on the H200's trace,
     * 2026-12-04; the gap stayed, so it was not the maps). */
    if (TMAP && tid == 8u * 32u) {
        kl__prefetch_tensormap(k_map);
        kl__prefetch_tensormap(v_map);
    }
    paged_decode__bulk_init<FP8, TMAP>(bars);
    if (tid == 0u) PAGED_DECODE__STAMP(1); /* the ring's mbarriers set up */
    /* Nothing above touches global memory: the previous kernel on the stream
     * may still run (it may be another launch on this workspace and these
     * counters). From here it has completed and its writes (caches, tables,
     * lengths, its counters' resets) are visible. */
    kl__griddep_wait();
    if (tid == 0u) PAGED_DECODE__STAMP(2);
    if (num_seqs == 0u) return;

    /* The producer's guess of its first piece: every sequence full
     * (max_blocks_per_seq * block_size positions, clipped to the window). */
    int32_t cur = 0, nxt = 0;
    uint32_t spec_seq = 0xffffffffu, spec_page = 0u;
    if (warp >= 8u) {
        const uint64_t cap = (uint64_t)max_blocks_per_seq * block_size;
        const uint64_t gb = sliding_window != 0u && cap > sliding_window ? cap - sliding_window : 0u;
        const uint64_t gt = cap > gb ? (cap - 1u) / 16u - gb / 16u + 1u : 1u; /* tiles per unit */
        const uint64_t total = gt * num_kv_heads * num_seqs;
        const uint32_t gnt = total < nb ? (uint32_t)total : nb;
        if (b < gnt && cap > gb) {
            const uint64_t x = paged_decode__cta_first(b, total / gnt, (uint32_t)(total % gnt), gnt);
            const uint64_t unit = x / gt, ta = x - unit * gt;
            const uint64_t lo = (gb / 16u + ta) * 16u;
            spec_seq = (uint32_t)(unit / num_kv_heads);
            spec_page = (uint32_t)((lo > gb ? lo : gb) / block_size);
            paged_decode__bulk_spec_chunks(block_tables, spec_seq, spec_page, max_blocks_per_seq, &cur, &nxt);
        }
    }

    /* All tiles, the block's share, and the sequence of its first tile. */
    paged_decode__persist_share sh;
    paged_decode__persist_first at0;
    if (!paged_decode__persist_locate<PAGED_DECODE__BULK_THREADS>(plan, seq_lens, num_seqs, num_kv_heads,
                                                                   sliding_window, max_blocks_per_seq, block_size,
                                                                   b, nb, sh, at0))
        return;
    paged_decode__bulk_sched_persist sched{sh,          at0.x,        at0.base,   0u,
                                           at0.seq,     at0.tiles,    at0.wbegin, at0.wend,
                                           num_kv_heads, max_blocks_per_seq, block_size, sliding_window,
                                           seq_lens};
    if (tid == 0u) PAGED_DECODE__STAMP(4); /* the block's first tile found */

    if (warp >= 8u) {
        paged_decode__bulk_produce<FP8>(sched, ring, bars, reinterpret_cast<const unsigned char *>(k_cache),
                                        reinterpret_cast<const unsigned char *>(v_cache), k_map, v_map, block_tables,
                                        max_blocks_per_seq, num_kv_heads, block_size, block_stride,
                                        paged_decode__bulk_aligned<FP8>(k_cache, v_cache, block_stride), spec_seq,
                                        spec_page, cur, nxt);
        return;
    }

    /* The consumers: thread 0 walks the schedule in shared memory. */
    if (tid == 0u) plan.sched = sched;
    const paged_decode__bulk_piece &p = plan.piece;
    for (;;) {
        if (tid == 0u) {
            plan.more = plan.sched.next(plan.piece) ? 1u : 0u;
            /* A cut piece's blocks and b0's record slot now, off the tail
             * between its last tile and its arrival (H100, 2026-12-06: the
             * latest block's arrival 2.2 -> 0.8 us on the trace). */
            if (plan.more && !plan.piece.whole) {
                paged_decode__persist_blocks_of(plan.piece.su, plan.piece.ue, sh, &plan.b0, &plan.b1);
                plan.s0 = paged_decode__persist_slot0(plan.piece.su, plan.b0, sh);
            }
        }
        kl__bar_sync(PAGED_DECODE__BULK_MERGE_BAR, PAGED_DECODE__THREADS);
        if (!plan.more) break;
#ifdef PAGED_DECODE_TRACE
        if (tid == 0u && ++paged_decode__trace[b * 32u + 14u] == 2u) PAGED_DECODE__STAMP(12); /* pieces; the 2nd begins */
#endif
        const __nv_bfloat16 *q_grp = q + (uint64_t)p.seq * q_stride + (uint64_t)p.kvh * NH * 128u;
        paged_decode__bulk_consume<FP8, TMAP, NH>(sm, p, q_grp, ring, bars, score_scale);
        if (tid == 0u) PAGED_DECODE__STAMP(7); /* warp 0's last tile of the piece computed */
        const uint64_t rec = ((uint64_t)b * 2u + p.slot) * NH;
        const paged_decode__bulk_dest dest{p.whole,
                                           output + ((uint64_t)p.seq * num_q_heads + (uint64_t)p.kvh * NH) * 128u,
                                           workspace + rec * 128u, workspace + (uint64_t)nb * 2u * NH * 128u + rec * 2u};
        paged_decode__gqa_merge<NH, 128>(sm, paged_decode__out_persist<paged_decode__bulk_dest>{dest, out_scale},
                                         PAGED_DECODE__BULK_MERGE_BAR);
        if (tid == 0u) PAGED_DECODE__STAMP(8); /* the piece's warps merged, its rows or record out */
        if (p.whole) {
            kl__bar_sync(PAGED_DECODE__BULK_MERGE_BAR, PAGED_DECODE__THREADS); /* sm and the piece read */
            continue;
        }
        /* A cut unit: the record is out; the last of its blocks to arrive
         * merges. The barrier orders every consumer's record stores before
         * thread 0's arrival, an acquire-release add that releases them all
         * (cumulativity, PTX ISA memory model): one MEMBAR.ALL.GPU in the
         * SASS where a __threadfence here and another in the last arrival
         * were two MEMBAR.SC.GPU (with the warp's locate, 1 x 32768 0.8%
         * faster on the H100, 2026-12-06, decode_bench --ab). */
        kl__bar_sync(PAGED_DECODE__BULK_MERGE_BAR, PAGED_DECODE__THREADS);
        const uint32_t b0 = plan.b0, b1 = plan.b1; /* every thread: the merge below reads them */
        if (tid == 0u) {
            plan.last = paged_decode__persist_arrive(counters + (uint64_t)p.seq * num_kv_heads + p.kvh, b0, b1) ? 1u : 0u;
        }
        kl__bar_sync(PAGED_DECODE__BULK_MERGE_BAR, PAGED_DECODE__THREADS);
        if (tid == 0u) PAGED_DECODE__STAMP(9); /* a cut piece's arrival counted */
        if (plan.last) {
            __nv_bfloat16 *orow = dest.orow;
            const uint32_t s0 = plan.s0;
            if ((reinterpret_cast<uintptr_t>(workspace) & 15u) == 0u)
                paged_decode__bulk_merge_records<NH, true>(workspace, orow, nb, b0, b1, s0);
            else
                paged_decode__bulk_merge_records<NH, false>(workspace, orow, nb, b0, b1, s0);
            if (tid == 0u) PAGED_DECODE__STAMP(10); /* the last arrival's merge done */
        }
        kl__bar_sync(PAGED_DECODE__BULK_MERGE_BAR, PAGED_DECODE__THREADS); /* the piece and the flag read */
    }
    if (tid == 0u) PAGED_DECODE__STAMP(11); /* the consumers' end */
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL || KL_EMULATOR */

/* The launchers refuse what these guards catch; a raw launch must still not
 * touch memory it does not own. */
#define PAGED_DECODE__BULK_GUARD(FP8, TMAP)                                                                \
    (blockDim.x != (uint32_t)PAGED_DECODE__BULK_THREADS ||                                                   \
     kl__dynamic_smem_size() < PAGED_DECODE__BULK_SMEM(FP8, TMAP) || head_dim != 128u ||                     \
     num_q_heads != num_kv_heads * (uint32_t)DECODE_GQA_PACK_WIDTH || block_size == 0u ||                    \
     (TMAP && block_size % 16u != 0u))
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
#define PAGED_DECODE__BULK_BODY(entry, ...)                                                                 \
    KL_DYNAMIC_SHARED(entry##__smem, 128);                                                                   \
    __VA_ARGS__
#else
#define PAGED_DECODE__BULK_BODY(entry, ...)                                                                 \
    __trap(); /* sm_90a machine code only: kl_<launcher>_get refuses other targets */
#endif

#define PAGED_DECODE__BF16_SCALES inv_sqrt_d * PAGED_DECODE__LOG2E, 1.0f
#define PAGED_DECODE__FP8_SCALES                                                                                \
    inv_sqrt_d * k_scale * PAGED_DECODE__FP8_UNIT * PAGED_DECODE__LOG2E, v_scale * PAGED_DECODE__FP8_UNIT
#define PAGED_DECODE__BF16_STRIDE (uint64_t)block_size * num_kv_heads * 128u

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_bf16_gqa_bulk, 1)
paged_decode_attn_bf16_gqa_bulk(KL_PARAMS_paged_decode_attn_bf16_gqa_bulk) {
    PAGED_DECODE__BULK_BODY(paged_decode_attn_bf16_gqa_bulk,
        if (PAGED_DECODE__BULK_GUARD(false, false)) return;
        paged_decode__bulk_seed<false, false, DECODE_GQA_PACK_WIDTH>(
            paged_decode_attn_bf16_gqa_bulk__smem, q, k_cache, v_cache, nullptr, nullptr, output, block_tables,
            seq_lens, max_blocks_per_seq, num_q_heads, num_kv_heads, block_size, q_stride, sliding_window,
            PAGED_DECODE__BF16_STRIDE, PAGED_DECODE__BF16_SCALES);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_fp8_gqa_bulk, 1)
paged_decode_attn_fp8_gqa_bulk(KL_PARAMS_paged_decode_attn_fp8_gqa_bulk) {
    PAGED_DECODE__BULK_BODY(paged_decode_attn_fp8_gqa_bulk,
        if (PAGED_DECODE__BULK_GUARD(true, false)) return;
        paged_decode__bulk_seed<true, false, DECODE_GQA_PACK_WIDTH>(
            paged_decode_attn_fp8_gqa_bulk__smem, q, k_cache, v_cache, nullptr, nullptr, output, block_tables,
            seq_lens, max_blocks_per_seq, num_q_heads, num_kv_heads, block_size, q_stride, sliding_window,
            cache_stride, PAGED_DECODE__FP8_SCALES);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_bf16_gqa_bulk, 1)
paged_decode_persist_bf16_gqa_bulk(KL_PARAMS_paged_decode_persist_bf16_gqa_bulk) {
    (void)num_ctas; /* the grid's x extent: gridDim.x */
    PAGED_DECODE__BULK_BODY(paged_decode_persist_bf16_gqa_bulk,
        if (PAGED_DECODE__BULK_GUARD(false, false)) return;
        paged_decode__bulk_persist<false, false, DECODE_GQA_PACK_WIDTH>(
            paged_decode_persist_bf16_gqa_bulk__smem, q, k_cache, v_cache, nullptr, nullptr, output, block_tables,
            seq_lens, max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
            sliding_window, PAGED_DECODE__BF16_STRIDE, PAGED_DECODE__BF16_SCALES, workspace, counters);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_fp8_gqa_bulk, 1)
paged_decode_persist_fp8_gqa_bulk(KL_PARAMS_paged_decode_persist_fp8_gqa_bulk) {
    (void)num_ctas;
    PAGED_DECODE__BULK_BODY(paged_decode_persist_fp8_gqa_bulk,
        if (PAGED_DECODE__BULK_GUARD(true, false)) return;
        paged_decode__bulk_persist<true, false, DECODE_GQA_PACK_WIDTH>(
            paged_decode_persist_fp8_gqa_bulk__smem, q, k_cache, v_cache, nullptr, nullptr, output, block_tables,
            seq_lens, max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
            sliding_window, cache_stride, PAGED_DECODE__FP8_SCALES, workspace, counters);)
}

/* The tensor-map twins: the caches as k_map, v_map (the 4-D views (d, kv
 * head, slot, block) with boxes of 128 bytes x 16 slots, 128-byte
 * swizzle); block_size % 16 == 0. */
extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_bf16_gqa_tma, 1)
paged_decode_attn_bf16_gqa_tma(KL_PARAMS_paged_decode_attn_bf16_gqa_tma) {
    PAGED_DECODE__BULK_BODY(paged_decode_attn_bf16_gqa_tma,
        if (PAGED_DECODE__BULK_GUARD(false, true)) return;
        paged_decode__bulk_seed<false, true, DECODE_GQA_PACK_WIDTH>(
            paged_decode_attn_bf16_gqa_tma__smem, q, nullptr, nullptr, &k_map, &v_map, output, block_tables,
            seq_lens, max_blocks_per_seq, num_q_heads, num_kv_heads, block_size, q_stride, sliding_window, 0u,
            PAGED_DECODE__BF16_SCALES);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_attn_fp8_gqa_tma, 1)
paged_decode_attn_fp8_gqa_tma(KL_PARAMS_paged_decode_attn_fp8_gqa_tma) {
    PAGED_DECODE__BULK_BODY(paged_decode_attn_fp8_gqa_tma,
        if (PAGED_DECODE__BULK_GUARD(true, true)) return;
        paged_decode__bulk_seed<true, true, DECODE_GQA_PACK_WIDTH>(
            paged_decode_attn_fp8_gqa_tma__smem, q, nullptr, nullptr, &k_map, &v_map, output, block_tables,
            seq_lens, max_blocks_per_seq, num_q_heads, num_kv_heads, block_size, q_stride, sliding_window, 0u,
            PAGED_DECODE__FP8_SCALES);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_bf16_gqa_tma, 1)
paged_decode_persist_bf16_gqa_tma(KL_PARAMS_paged_decode_persist_bf16_gqa_tma) {
    (void)num_ctas;
    PAGED_DECODE__BULK_BODY(paged_decode_persist_bf16_gqa_tma,
        if (PAGED_DECODE__BULK_GUARD(false, true)) return;
        paged_decode__bulk_persist<false, true, DECODE_GQA_PACK_WIDTH>(
            paged_decode_persist_bf16_gqa_tma__smem, q, nullptr, nullptr, &k_map, &v_map, output, block_tables,
            seq_lens, max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
            sliding_window, 0u, PAGED_DECODE__BF16_SCALES, workspace, counters);)
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_paged_decode_persist_fp8_gqa_tma, 1)
paged_decode_persist_fp8_gqa_tma(KL_PARAMS_paged_decode_persist_fp8_gqa_tma) {
    (void)num_ctas;
    PAGED_DECODE__BULK_BODY(paged_decode_persist_fp8_gqa_tma,
        if (PAGED_DECODE__BULK_GUARD(true, true)) return;
        paged_decode__bulk_persist<true, true, DECODE_GQA_PACK_WIDTH>(
            paged_decode_persist_fp8_gqa_tma__smem, q, nullptr, nullptr, &k_map, &v_map, output, block_tables,
            seq_lens, max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, block_size, q_stride,
            sliding_window, 0u, PAGED_DECODE__FP8_SCALES, workspace, counters);)
}
