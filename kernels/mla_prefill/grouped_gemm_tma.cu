/* Reference: tests/mla_prefill/mla_reference.h (grouped_gemm, float64)
 * Tests:
 *   tests/mla_prefill/mla_copy_engine_emulated_test.cc (CPU emulator, through the generated builders)
 *   tests/mla_prefill/mla_copy_engine_test.cc (GPU: driver-encoded maps, float64 references)
 *   tests/mla_prefill/mla_copy_engine_launch_test.cc (launcher and builders over the recording backend)
 *   and mla_copy_engine_sass_test, mla_copy_engine_store_sass_test (sm_90a code: HGMMA and UTMALDG
 *   in loops, UTMASTG in the tile loop, no LDL/STL)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_copy_engine_emulated_test \
 *     //tests/mla_prefill:mla_copy_engine_test \
 *     //tests/mla_prefill:mla_copy_engine_launch_test \
 *     //tests/mla_prefill:mla_copy_engine_sass_test \
 *     //tests/mla_prefill:mla_copy_engine_store_sass_test
 */
#include "klaunch/mla_prefill.cuh"

/* grouped_gemm_tma: grouped_gemm_mla's contract (kernel contract, kernel 7)
 * with A and B brought and C taken away by the bulk tensor copy engine, on
 * a persistent grid (issue 20):
 *
 *   C[i, gi*n_g + j] = sum_k A[i*a_stride + gi*k_g + k] * B[(gi*n_g + j)*k_g + k]
 *
 *   a_map: A as (k_g, g, m), box 64 x 1 x 128 (128 rows of one group's 64 k)
 *   b_map: B as (k_g, n_g, g), box 64 x 128 x 1
 *   c_map: C as (n_g, g, m), box 64 x 1 x 64 (a consumer's 64 rows of 64 columns)
 * The group is a dimension of every map, so the engine zero-fills k past
 * k_g, rows past m and n_g, and clips every store at its group's edge: the
 * ragged edges need no code.
 *
 * The numbers (m 4096, g 128, bf16; an H200: 4227 GB/s copy, 132 SMs):
 *   k 128 / n 512 (q_nope @ w_uk): 68.7 GFLOP, bytes A 134 MB + B 17 MB + C
 *     537 MB = 688 MB: 163 us at the copy rate against 87 us of tensor work
 *     at 791 TFLOP/s: memory-bound, C's writes 78% of the bytes. Per 128 x
 *     128 tile: 64 KiB in (2 k-stages of 32 KiB), 32 KiB out, 2 x 512
 *     tensor cycles; at the SM's share of the copy rate (17.8 B a cycle at
 *     1.8 GHz) the tile's 96 KiB take 5500 cycles, so the tensor cores idle
 *     and only the bytes in flight matter: by Little's law 4227 GB/s x ~1 us
 *     / 132 SMs = 32 KB per SM.
 *   k 512 / n 128 (o_lat @ w_uv^T): the same FLOPs and bytes, A 537 MB: 8
 *     k-stages a tile, read-bound.
 *   The wgmma kernel (cp.async from 256 threads, 3 stages a tile, two blocks
 *   an SM) measured 0.52 of copy at k 128: a block's loads stop at its tile's
 *   end (2 k-steps), and its epilogue stores from registers.
 *
 * Design from those numbers:
 *   - Block = 3 warpgroups (384 threads), one an SM. Warpgroup 2's first
 *     thread is the producer: for every tile the block owns and every k-step
 *     it waits for a free stage, expects 32 KiB on its mbarrier and issues
 *     two tensor loads (A, B); the 6-stage ring (192 KiB) runs on across
 *     tiles, so the next tile's operands are in flight while this one is
 *     computed and stored. No other producer thread does anything.
 *   - Warpgroups 0 and 1 are the consumers: rows 64w .. 64w + 63 of the tile,
 *     m64n128k16 (64 fp32 registers a thread), 4 products a stage with the
 *     stage's release one stage behind (wait_group 1). Epilogue: bf16 into a
 *     128-byte-swizzle staging tile (two 64-column slabs, conflict-free
 *     stores), fence.proxy.async, a 128-thread named barrier, two tensor
 *     stores by the warpgroup's first thread; one staging buffer a
 *     consumer (cp.async.bulk.wait_group.read 0 before reuse: the last
 *     tile's store has had the whole of this tile's products to read it),
 *     so that the ring gets 6 stages: 4 (128 KiB) kept 0.75 (k 128) and
 *     0.89 (k 512) of copy, where k 512's A alone (64 KiB of each 128 KiB
 *     in flight) is what Little's law asks of an SM at 2 us of loaded DRAM
 *     latency.
 *   - Persistent grid: block x takes tiles x, x + gridDim.x, ... of the
 *     (n tile, group, m tile) tiles in chunks of 16 groups (tile_at): a row
 *     tile's A is read by neighbouring blocks at the same time, from L2,
 *     and the blocks at work write C's rows in runs of 16 groups, not one.
 *   - Held operands. The L2 carries more than DRAM: per tile 64 KiB (k 128)
 *     or 256 KiB (k 512) of A and B read from L2 against 40 or 160 KiB of
 *     DRAM traffic (an A or B tile is read by every tile that shares it).
 *     Where a run of tiles shares operands they are loaded once and held
 *     (plan_of): k_g <= 128 with 128 < n_g <= 512 (q_nope @ w_uk), A for a
 *     group's 128 rows across its n tiles (2 buffers of 32 KiB) and a 32
 *     KiB B slot per n tile holding that n tile of a group's B across the
 *     group's m tiles (slot j is refilled for the next group once the
 *     run's last tile of column j is done with it, ntn - 1 tiles before it
 *     is needed): nothing streams, a tile reads a quarter of an A tile
 *     from L2; n_g <= 128 with 128 < k_g <= 512 (o_lat @ w_uv^T), a
 *     group's B (one buffer of 128 KiB) across its m tiles, A streaming in
 *     4 stages of 16 KiB. There each block walks a contiguous run of tiles
 *     (balanced to within one tile, as on the ring) in group, m tile, n
 *     tile order, and the held buffers hand over on their own mbarriers.
 *     Other shapes take the 6-stage ring. H100, same run: 1.13x the ring
 *     at k 128, 1.03x at k 512 (2026-12-06, mla_bench --ab against the
 *     GROUPED_GEMM_TMA_NO_HELD build).
 *   - Paced blocks. On the held paths, where every run is the same number
 *     of units (whole strips, or tiles of held B), a producer begins unit
 *     u only once the blocks together have begun nb u units (counters,
 *     an argument; grouped_gemm_tma__pace below), so the blocks write C's
 *     rows together: k 128 measured 1.05x faster (H100, same run), at
 *     k 512 1.006x. Balancing the blocks' ends by stealing strips instead
 *     ended them together and gained nothing: the kernel is bound by DRAM,
 *     whose rate depends on where the bytes go, not on which SMs are busy.
 *   - Shared memory: 6 x 32 KiB stages (or the held split of the same
 *     bytes) + 2 x 16 KiB staging + 256 bytes of mbarriers + 1 KiB
 *     alignment = 230656 bytes (of 232448). Registers: 64 accumulators and
 *     indices (106 a thread, of the 168 the block's 384 threads allow; no
 *     setmaxnreg).
 *   Predicted before the first run (H200, the ring without held operands):
 *   k 128 0.80-0.90 of copy, k 512 0.90-1.00x torch.bmm; measured 0.74 and
 *   0.89x (2026-12-04): 128 KiB in flight did not give the copy rate, which
 *   sent the work to L2 (the held paths) and to DRAM's write pattern (the
 *   pacing). Figures today: docs/PERFORMANCE.md, "MLA prefill: attention
 *   and GEMM".
 *   Tried and not kept (each against the kept code in one run):
 *   - ping-pong consumers (each warpgroup a whole 128 x 128 tile, the two
 *     on alternate tiles, so one's epilogue runs beside the other's
 *     products): H200, 2026-12-04, 0.83x bmm at k 128 against 0.94x; a
 *     warpgroup's two m64 chains in series cost more than the shared
 *     epilogue it hid;
 *   - held A alone (B streaming, below) 0.80x the ring; odd blocks walking
 *     their held run backwards (neighbours meet on their shared group):
 *     fewer DRAM reads (169.8 -> 159.0 MB) but 0.971x; strips handed out
 *     in (m strip, group) order from one counter: 1.40x slower (a group's
 *     B loaded for every strip); L2 evict-first hints: 0.994-1.000 (all
 *     H100, 2026-12-06);
 *   - a dynamic tail (blocks that finish early steal strips from the
 *     slowest runs): the blocks ended together and the kernel was no
 *     faster (B / A 1.001, H100, 2026-12-06): see "Paced blocks";
 *   - a fifth A stage on the held-B path (k 512): 1.001; with 4 this
 *     shape reads at DRAM's rate (0.98 of copy, H100, 2026-12-06);
 *   - a 2-block cluster multicasting the shared A tile: not built (the
 *     emulator refuses clusters, so it could not be proven here).
 *
 * The maps' addresses and strides are 16-byte aligned (k_g, n_g, a_stride,
 * c_stride multiples of 8; the builders refuse others): grouped_gemm_wgmma
 * takes any. Resources: docs/MLA_PREFILL.md.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "mla_mma.cuh"
#include "../common/kl_ptx_sm90.cuh"

namespace grouped_gemm_tma_ {

constexpr int BM = 128, BN = 128, BK = 64, STAGES = 6, THREADS = 384;
constexpr uint32_t OPERAND = BM * 128;          /* one operand's stage: 128 rows of 128 bytes, 16 KiB */
constexpr uint32_t STAGE = 2 * OPERAND;         /* A then B */
constexpr uint32_t SLAB = 64 * 128;             /* a C box: 64 rows x 64 bf16 */
constexpr uint32_t STAGING = 2 * SLAB;          /* a consumer's 64 x 128 C tile */
constexpr uint32_t OFF_S = 0;
constexpr uint32_t OFF_C = OFF_S + STAGES * STAGE;      /* [consumer] staging tiles */
constexpr uint32_t OFF_BAR = OFF_C + 2 * STAGING;       /* the mbarriers of either path */
constexpr uint32_t BAR_BYTES = 256;
constexpr uint32_t SMEM = OFF_BAR + BAR_BYTES;

/* Where operands are held for the tiles that share them, the ring's 192
 * KiB are split anew:
 *   held B (n_g <= 128, 128 < k_g <= 512: a strip is one group's m tiles):
 *     1 B buffer of 8 k-steps (128 KiB), 4 A stages of 16 KiB streaming;
 *   held A and B (k_g <= 128, 128 < n_g <= 512: a strip is a group's 128
 *     rows across its n tiles): 2 A buffers of 2 k-steps (32 KiB, one a
 *     strip) and one B slot of 32 KiB per n tile, each holding its n tile
 *     of the current group's B across the group's m tiles; nothing streams.
 * (A held alone, B streaming in 8 stages, measured 0.80x the ring at k 128
 * on the H100, 2026-12-06: its contiguous runs put the blocks' B streams on
 * 132 groups where the ring's round robin kept 16 hot.) mbarriers:
 * full[nst], empty[nst] of the streamed stages, then held_full[2],
 * held_empty[2], then (held A and B) b_full[4], b_empty[4]. */
enum class Path : uint32_t { kRing, kHeldB, kHeldAB };
constexpr uint32_t HELD_A_K = 2, HELD_B_K = 8; /* k-steps a held buffer holds */
constexpr uint32_t RING_BYTES = STAGES * STAGE;
struct Plan {
    Path path;
    uint32_t nst;   /* stages of the ring (kRing: A and B, 32 KiB) or of the streamed operand (16 KiB) */
    uint32_t nheld; /* held buffers: 2 (A) or 1 (B) */
    uint32_t hbuf;  /* bytes of one held buffer (the streamed stages follow the held buffers) */
};
constexpr uint32_t HELD_AB_N = 4; /* n tiles (B slots) the held A and B path takes */
/* The held paths' shapes are also kl_grouped_gemm_tma_holds's
 * (include/klaunch/mla_prefill_grid.h: the grid gives them whole groups);
 * change both together. */
__device__ __forceinline__ Plan plan_of(uint32_t ntn, uint32_t ktiles) {
#ifndef GROUPED_GEMM_TMA_NO_HELD /* bench/mla/ab.sh's B build: every shape on the 6-stage ring */
    if (ntn >= 2u && ntn <= HELD_AB_N && ktiles >= 1u && ktiles <= HELD_A_K)
        return Plan{Path::kHeldAB, 0u, 2u, HELD_A_K * OPERAND};
    if (ntn == 1u && ktiles > HELD_A_K && ktiles <= HELD_B_K)
        return Plan{Path::kHeldB, (RING_BYTES - HELD_B_K * OPERAND) / OPERAND, 1u, HELD_B_K * OPERAND};
#endif
    return Plan{Path::kRing, (uint32_t)STAGES, 0u, 0u};
}
static_assert((RING_BYTES - HELD_B_K * OPERAND) / OPERAND == 4u, "4 A stages beside one B buffer");
static_assert(2 * STAGES * 8 <= BAR_BYTES && (2 * 4 + 2) * 8 <= BAR_BYTES && (4 + 2 * HELD_AB_N) * 8 <= BAR_BYTES,
              "the mbarriers fit their bytes");
static_assert(2u * HELD_A_K * OPERAND + HELD_AB_N * HELD_A_K * OPERAND == RING_BYTES,
              "two A buffers and four B slots are the ring's bytes");

static_assert(SMEM + 1024 == KL_SHARED_BYTES_grouped_gemm_tma, "the spec's shared_bytes: the layout and 1 KiB to align it");
static_assert(THREADS == KL_THREADS_grouped_gemm_tma, "two consumer warpgroups and a producer");
static_assert(KL_TMAP_grouped_gemm_tma_a_map_BYTES == OPERAND && KL_TMAP_grouped_gemm_tma_b_map_BYTES == OPERAND,
              "one box is one operand's stage");
static_assert(KL_TMAP_grouped_gemm_tma_c_map_BYTES == SLAB, "one C box is one staging slab");

struct Tile {
    uint32_t n0, m0, gi;
};

/* Tile u of the launch's ntn x ntm x g tiles: n tiles fastest, then groups
 * in chunks of GCHUNK, then m tiles, then the chunks. The blocks running at
 * one time (132 on an H200) so cover a few m tiles of GCHUNK neighbouring
 * groups: C's rows (all groups side by side) and A's are written and read
 * in runs of GCHUNK x n_g (or k_g) elements, not one group's 128 or 512,
 * while B's working set stays GCHUNK groups (2-8 MiB) for L2 to keep. */
constexpr uint32_t GCHUNK = 16;

__device__ __forceinline__ Tile tile_at(uint32_t u, uint32_t ntn, uint32_t ntm, uint32_t g) {
    Tile t;
    t.n0 = (u % ntn) * (uint32_t)BN;
    uint32_t rest = u / ntn;
    const uint32_t per_chunk = GCHUNK * ntm; /* tiles of a full chunk, per n tile */
    const uint32_t chunk = rest / per_chunk, gc0 = chunk * GCHUNK;
    const uint32_t gn = g - gc0 < GCHUNK ? g - gc0 : GCHUNK; /* groups in this chunk (the last may be short) */
    rest -= chunk * per_chunk;
    t.gi = gc0 + rest % gn;
    t.m0 = (rest / gn) * (uint32_t)BM;
    return t;
}

/* Tile u on the held-B and held A and B paths: groups in order, a
 * group's m tiles in order, a row strip's n tiles fastest, so a block's
 * consecutive tiles share A (a strip) and B (a group). */
__device__ __forceinline__ Tile tile_group_major(uint32_t u, uint32_t ntn, uint32_t ntm) {
    const uint32_t strip = u / ntn;
    return Tile{(u % ntn) * (uint32_t)BN, (strip % ntm) * (uint32_t)BM, strip / ntm};
}

/* The tiles a block walks: round robin (u = b, b + nb, ...) on the ring,
 * or on a held path its contiguous share [floor(b T / nb), floor((b + 1)
 * T / nb)), so that its consecutive tiles are a strip's and share the held
 * operand. nb <= T (the spec's grid). */
struct Walk {
    uint32_t u, stop, step;
};
__device__ __forceinline__ Walk walk_of(Path path, uint32_t total, uint32_t b, uint32_t nb) {
    if (path == Path::kRing) return Walk{b, total, nb};
#ifdef GROUPED_GEMM_TMA_ROTATE /* bench/mla/ab.sh's trace builds only: block b takes run b + ROTATE */
    b = (b + (uint32_t)(GROUPED_GEMM_TMA_ROTATE)) % nb;
#endif
    return Walk{(uint32_t)((uint64_t)b * total / nb), (uint32_t)((uint64_t)(b + 1u) * total / nb), 1u};
}
__device__ __forceinline__ Tile tile_of(Path path, uint32_t u, uint32_t ntn, uint32_t ntm, uint32_t g) {
    return path == Path::kHeldB || path == Path::kHeldAB ? tile_group_major(u, ntn, ntm) : tile_at(u, ntn, ntm, g);
}
/* The strip a tile belongs to: the tiles that share the held operand (A, where both are held). */
__device__ __forceinline__ uint64_t strip_of(Path path, const Tile &t) {
    return path == Path::kHeldB ? (uint64_t)t.gi : ((uint64_t)t.gi << 32) | t.m0;
}

}  // namespace grouped_gemm_tma_

/* Pacing (the held paths, where every block's run is the same number of
 * units: whole strips, or held B's tiles; the grids kl_grouped_gemm_tma_ctas
 * gives those shapes). A producer begins its unit u > 0 only once the
 * blocks together have begun nb u units, so they write C's rows within
 * about one unit of each other: C is [m, g, n], a group's row 1 KiB of a
 * 128 KiB row at k 128, and DRAM takes rows written together faster than
 * the same bytes spread over the whole of C (H100, same run: 1.05x at k
 * 128, the blocks' ends 242-250 us where they were 219-263; 2026-12-06,
 * mla_bench --ab against GROUPED_GEMM_TMA_NO_PACE). counters[0] counts
 * begun units, counters[1] finished producers (atomicInc wraps it to 0 at
 * the launch's last, which takes the launch's units back off counters[0]):
 * zero again after every launch. Only a pace: a wait gives up once
 * counters[0] stalls for GROUPED_GEMM_TMA__PACE_STALL_NS (a grid larger
 * than the GPU holds at once, whose resident blocks all end up waiting for
 * ones that cannot start) and its block runs on unpaced, so results never
 * depend on it.
 * On the emulator, whose blocks run one after another, every wait gives
 * up at once (the counting still runs). bench/mla/ab.sh's
 * GROUPED_GEMM_TMA_NO_PACE build leaves it out (the A/B of the pacing). */
#ifndef GROUPED_GEMM_TMA_NO_PACE
#define GROUPED_GEMM_TMA__PACE 1
/* A wait gives up once counters[0] has not moved for this long: ~3 units'
 * time (a strip at k 128 takes ~8 us on an H100), while paced blocks move
 * it every ~0.1 us (128 blocks). */
constexpr unsigned long long GROUPED_GEMM_TMA__PACE_STALL_NS = 20000ull;
/* Waits until counters[0] >= target; false (give up) when it stalls. */
static __device__ __noinline__ bool grouped_gemm_tma__pace(const uint32_t *counters, uint32_t target) {
#ifdef KL_EMULATOR
    (void)counters;
    (void)target;
    return false;
#else
    uint64_t seen_at = kl__globaltimer();
    uint32_t seen = *(const volatile uint32_t *)counters;
    while (seen < target) {
        __nanosleep(128);
        const uint64_t t = kl__globaltimer();
        const uint32_t now = *(const volatile uint32_t *)counters;
        if (now != seen) {
            seen = now;
            seen_at = t;
        } else if (t - seen_at > GROUPED_GEMM_TMA__PACE_STALL_NS) {
            return false;
        }
    }
    return true;
#endif
}
#endif

/* GROUPED_GEMM_TMA_TRACE (bench/mla/ab.sh's build only, never the
 * library's): block b stamps the global timer (ns) at entry
 * ([4 b]) and where each consumer warpgroup's last store has completed
 * ([4 b + 1 + wg]), and its SM ([4 b + 3]: 1 + %smid); mla_bench --ab with
 * such a build prints the blocks' ends (p10 / p50 / p90 / latest, and the
 * SMs and blocks that end earliest and latest). */
#ifdef GROUPED_GEMM_TMA_TRACE
__device__ unsigned long long grouped_gemm_tma__trace[4 * 1024];
#define GROUPED_GEMM_TMA__STAMP(i)                                                       \
    do {                                                                                 \
        if (blockIdx.x < 1024u) grouped_gemm_tma__trace[4u * blockIdx.x + (i)] = kl__globaltimer(); \
    } while (0)
#else
#define GROUPED_GEMM_TMA__STAMP(i) \
    do {                           \
    } while (0)
#endif

extern "C" __global__ void __launch_bounds__(KL_THREADS_grouped_gemm_tma, 1)
grouped_gemm_tma(KL_PARAMS_grouped_gemm_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace grouped_gemm_tma_;
    KL_DYNAMIC_SHARED(grouped_gemm_tma__smem, 16);

    /* The launcher's grid never gets here with these; a raw launch must still not write out of bounds. */
    if (blockDim.x != (uint32_t)THREADS || kl__mma_dynamic_smem_size() < SMEM + 1024u) return;
    const uint32_t ntn = (n_g + (uint32_t)BN - 1u) / (uint32_t)BN, ntm = (m + (uint32_t)BM - 1u) / (uint32_t)BM;
    const uint32_t total = ntn * ntm * g, ktiles = (k_g + (uint32_t)BK - 1u) / (uint32_t)BK;
    const Plan plan = plan_of(ntn, ktiles);
    const bool held = plan.path != Path::kRing, held_ab = plan.path == Path::kHeldAB; /* held A and B (else B alone) */

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    if (tid == 0u) GROUPED_GEMM_TMA__STAMP(0);
#ifdef GROUPED_GEMM_TMA_TRACE
    if (tid == 0u && blockIdx.x < 1024u) {
        uint32_t sm_;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));
        grouped_gemm_tma__trace[4u * blockIdx.x + 3u] = 1u + sm_;
    }
#endif
    /* The swizzle pattern repeats every 1024 bytes of address: stages start on such a boundary. */
    const uint32_t sbase = (kl__mma_smem_addr(grouped_gemm_tma__smem) + 1023u) & ~1023u;
    const uint32_t ring = sbase + OFF_S, streamed = ring + plan.nheld * plan.hbuf;
    /* Stage s of nst: full[s] (the producer's expect_tx) and empty[s] (an
     * elected lane of each consumer warp); held_full / held_empty hand
     * over the held buffers the same way. */
    const uint32_t full = sbase + OFF_BAR, empty = full + 8u * plan.nst;
    const uint32_t held_full = empty + 8u * plan.nst, held_empty = held_full + 16u;
    const uint32_t b_full = held_empty + 16u, b_empty = b_full + 8u * HELD_AB_N; /* held A and B */
    const uint32_t b_slots = ring + 2u * plan.hbuf; /* held A and B: slot j holds n tile j's B */
    /* Held A and B: tile u is its group's first use of B slot j in this
     * block's run when no tile ntn before it is of the group (first: the
     * run's first tile), its last use when none ntn after it is. */
    const uint32_t per_group = ntn * ntm;
    auto b_first_use = [&](uint32_t u, uint32_t first) {
        const uint32_t g0 = u / per_group * per_group;
        return u - (first > g0 ? first : g0) < ntn;
    };
    auto b_last_use = [&](uint32_t u, uint32_t stop) { return u + ntn >= stop || (u + ntn) / per_group != u / per_group; };

    if (tid == 0u) {
        for (uint32_t s = 0; s < plan.nst; ++s) {
            kl__mbar_init(full + 8u * s, 1u);
            kl__mbar_init(empty + 8u * s, 8u);
        }
        for (uint32_t h = 0; h < plan.nheld; ++h) {
            kl__mbar_init(held_full + 8u * h, 1u);
            kl__mbar_init(held_empty + 8u * h, 8u);
        }
        if (held_ab) {
            for (uint32_t j = 0; j < HELD_AB_N; ++j) {
                kl__mbar_init(b_full + 8u * j, 1u);
                kl__mbar_init(b_empty + 8u * j, 8u);
            }
        }
        kl__fence_proxy_async_shared(); /* the initialised mbarriers, to the copy engine */
    }
    __syncthreads();

    if (wg == 2u) {
        /* ---- producer: one thread keeps the ring full across the block's tiles ---- */
        if (tid != 256u) return;
        kl__prefetch_tensormap(&a_map);
        kl__prefetch_tensormap(&b_map);
        kl__prefetch_tensormap(&c_map);
        uint32_t c = 0;                             /* k-stages loaded by this block */
        uint32_t sh = 0;                            /* held: strips loaded */
        uint64_t strip = ~0ull;                     /* held: the last one */
        /* Held A and B, bit j of each: slot j filled before; the parity of its
         * fills (a byte count of them carried into the next slot's past 255). */
        uint32_t filled = 0, fill_par = 0;
        const Walk w0 = walk_of(plan.path, total, blockIdx.x, gridDim.x);
#ifdef GROUPED_GEMM_TMA__PACE
        /* Paced: a held path whose runs are equal whole units (see above; a
         * null counters, which the launcher's check cannot see, paces nothing);
         * waiting until one of this block's waits gives up. */
        const bool paced = held && counters != nullptr && total % (gridDim.x * ntn) == 0u;
        bool waiting = paced;
#endif
        for (Walk w = w0; w.u < w.stop; w.u += w.step) {
            const Tile t = tile_of(plan.path, w.u, ntn, ntm, g);
            if (held && strip_of(plan.path, t) != strip) {
                /* A new strip: its held operand into buffer sh % nheld, once
                 * the strip nheld back has released it. */
                const uint32_t h = sh % plan.nheld, use = sh / plan.nheld;
                if (use > 0u) kl__mbar_wait(held_empty + 8u * h, (use - 1u) & 1u);
#ifdef GROUPED_GEMM_TMA__PACE
                if (paced && held_ab) { /* held A and B: a unit is a strip */
                    if (waiting && sh > 0u) waiting = grouped_gemm_tma__pace(counters, gridDim.x * sh);
                    atomicAdd(&counters[0], 1u);
                }
#endif
                kl__mbar_arrive_expect_tx(held_full + 8u * h, ktiles * OPERAND);
                const uint32_t dst = ring + h * plan.hbuf;
                for (uint32_t kt = 0; kt < ktiles; ++kt) {
                    const int32_t k0 = (int32_t)(kt * (uint32_t)BK);
                    if (held_ab) /* A's strip (B's slots below) */
                        kl__tma_load_3d(dst + kt * OPERAND, &a_map, k0, (int32_t)t.gi, (int32_t)t.m0, held_full + 8u * h);
                    else
                        kl__tma_load_3d(dst + kt * OPERAND, &b_map, k0, (int32_t)t.n0, (int32_t)t.gi, held_full + 8u * h);
                }
                ++sh;
                strip = strip_of(plan.path, t);
            }
            if (held_ab) {
                /* This group's B of n tile j into slot j, once its last
                 * group's tiles are done with it; nothing streams. */
                const uint32_t j = t.n0 / (uint32_t)BN, bit = 1u << j;
                if (b_first_use(w.u, w0.u)) {
                    if (filled & bit) kl__mbar_wait(b_empty + 8u * j, ((fill_par >> j) & 1u) ^ 1u);
                    kl__mbar_arrive_expect_tx(b_full + 8u * j, ktiles * OPERAND);
                    for (uint32_t kt = 0; kt < ktiles; ++kt)
                        kl__tma_load_3d(b_slots + j * plan.hbuf + kt * OPERAND, &b_map, (int32_t)(kt * (uint32_t)BK),
                                        (int32_t)t.n0, (int32_t)t.gi, b_full + 8u * j);
                    filled |= bit;
                    fill_par ^= bit;
                }
                continue;
            }
#ifdef GROUPED_GEMM_TMA__PACE
            if (paced) { /* held B: a unit is a tile (the strip is the group) */
                if (waiting && w.u > w0.u) waiting = grouped_gemm_tma__pace(counters, gridDim.x * (w.u - w0.u));
                atomicAdd(&counters[0], 1u);
            }
#endif
            for (uint32_t kt = 0; kt < ktiles; ++kt, ++c) {
                const uint32_t s = c % plan.nst, round = c / plan.nst;
                const int32_t k0 = (int32_t)(kt * (uint32_t)BK);
                if (round > 0u) kl__mbar_wait(empty + 8u * s, (round - 1u) & 1u);
                if (!held) {
                    const uint32_t st = ring + s * STAGE;
                    kl__mbar_arrive_expect_tx(full + 8u * s, STAGE);
                    kl__tma_load_3d(st, &a_map, k0, (int32_t)t.gi, (int32_t)t.m0, full + 8u * s);
                    kl__tma_load_3d(st + OPERAND, &b_map, k0, (int32_t)t.n0, (int32_t)t.gi, full + 8u * s);
                } else { /* held B: A streams */
                    kl__mbar_arrive_expect_tx(full + 8u * s, OPERAND);
                    kl__tma_load_3d(streamed + s * OPERAND, &a_map, k0, (int32_t)t.gi, (int32_t)t.m0, full + 8u * s);
                }
            }
        }
#ifdef GROUPED_GEMM_TMA__PACE
        /* The launch's last producer takes its units back off counters[0] (atomicInc wraps counters[1] to 0 there). */
        if (paced && atomicInc(&counters[1], gridDim.x - 1u) == gridDim.x - 1u) atomicSub(&counters[0], total / ntn);
#endif
        return;
    }

    /* ---- consumers: rows 64 wg .. 64 wg + 63 of each tile ---- */
    const uint32_t tw = tid & 127u, w4 = tw >> 5, lane = tid & 31u, gq = lane >> 2, q = lane & 3u;
    const bool elected = kl__elect_one();
    const uint32_t rows = wg * 64u * 128u; /* this warpgroup's 64 rows of an A operand */
    float acc[64];
    uint32_t c = 0;             /* k-stages consumed */
    uint32_t sh = 0;            /* held: strips begun */
    uint64_t strip = ~0ull;     /* held: the current one */
    uint32_t fill_par = 0;      /* held A and B: bit j, the parity of slot j's fills waited for */
    const Walk w0 = walk_of(plan.path, total, blockIdx.x, gridDim.x);
    for (Walk w = w0; w.u < w.stop; w.u += w.step) {
        const Tile t = tile_of(plan.path, w.u, ntn, ntm, g);
        if (ktiles == 0u) {
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        }
        if (held && strip_of(plan.path, t) != strip) {
            /* The strip before is done with its held buffer (its last
             * tile's products were waited for): release it, then wait for
             * this strip's. */
            if (sh > 0u && elected) kl__mbar_arrive(held_empty + 8u * ((sh - 1u) % plan.nheld));
            kl__mbar_wait(held_full + 8u * (sh % plan.nheld), (sh / plan.nheld) & 1u);
            ++sh;
            strip = strip_of(plan.path, t);
        }
        const uint32_t hb = held ? ring + ((sh - 1u) % plan.nheld) * plan.hbuf : 0u; /* this strip's held buffer */
        const uint32_t j = t.n0 / (uint32_t)BN; /* held A and B: the B slot */
        if (held_ab && b_first_use(w.u, w0.u)) {
            kl__mbar_wait(b_full + 8u * j, (fill_par >> j) & 1u);
            fill_par ^= 1u << j;
        }
        uint32_t prev = 0;
        for (uint32_t kt = 0; kt < ktiles; ++kt, ++c) {
            const uint32_t s = held_ab ? 0u : c % plan.nst;
            if (!held_ab) kl__mbar_wait(full + 8u * s, (c / plan.nst) & 1u);
            uint32_t a_tile, b_tile;
            if (held_ab) {
                a_tile = hb + kt * OPERAND + rows;
                b_tile = b_slots + j * plan.hbuf + kt * OPERAND;
            } else if (!held) {
                a_tile = ring + s * STAGE + rows;
                b_tile = ring + s * STAGE + OPERAND;
            } else { /* held B */
                a_tile = streamed + s * OPERAND + rows;
                b_tile = hb + kt * OPERAND;
            }
            kl__wgmma_fence_operand(acc);
            kl__wgmma_fence();
#pragma unroll
            for (uint32_t kk = 0; kk < 4u; ++kk)
                kl__wgmma_bf16_ss<128, 0>(acc, kl__wgmma_desc(a_tile + kk * 32u, 16u, 1024u),
                                          kl__wgmma_desc(b_tile + kk * 32u, 16u, 1024u), (kt | kk) != 0u ? 1u : 0u);
            kl__wgmma_commit();
            if (kt > 0u && !held_ab) {
                kl__wgmma_wait<1>(); /* the stage before is read */
                if (elected) kl__mbar_arrive(empty + 8u * prev);
            }
            prev = s;
        }
        kl__wgmma_wait<0>(); /* unconditional: behind a branch, ptxas injected its own (C7517) */
        kl__wgmma_fence_operand(acc);
        if (held_ab) {
            /* Slot j's group is done with it in this run: release it for the next group's B. */
            if (elected && b_last_use(w.u, w.stop)) kl__mbar_arrive(b_empty + 8u * j);
        } else if (ktiles > 0u && elected) {
            kl__mbar_arrive(empty + 8u * prev);
        }

        /* ---- epilogue: bf16 into this consumer's staging buffer, two tensor stores ---- */
        const uint32_t stg = sbase + OFF_C + wg * STAGING;
        if (tw == 0u) kl__bulk_wait_group_read<0>(); /* the last tile's store has read this buffer */
        kl__mma_bar_sync(1u + wg, 128u);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const uint32_t slab = stg + (uint32_t)(i >> 3) * SLAB, chunk = (uint32_t)(i & 7);
            const uint32_t r = w4 * 16u + gq;
            kl__mma_st_shared_u32(slab + r * 128u + ((chunk ^ (r & 7u)) << 4) + 4u * q,
                                  kl__mma_pack_bf16(acc[4 * i], acc[4 * i + 1]));
            kl__mma_st_shared_u32(slab + (r + 8u) * 128u + ((chunk ^ ((r + 8u) & 7u)) << 4) + 4u * q,
                                  kl__mma_pack_bf16(acc[4 * i + 2], acc[4 * i + 3]));
        }
        kl__fence_proxy_async_shared(); /* the staging tile, to the copy engine */
        kl__mma_bar_sync(1u + wg, 128u);
        if (tw == 0u) {
            const uint32_t row = t.m0 + 64u * wg;
            if (row < m) {
                kl__tma_store_3d(&c_map, (int32_t)t.n0, (int32_t)t.gi, (int32_t)row, stg);
                if (t.n0 + 64u < n_g) kl__tma_store_3d(&c_map, (int32_t)(t.n0 + 64u), (int32_t)t.gi, (int32_t)row, stg + SLAB);
            }
            kl__bulk_commit_group();
        }
    }
    if (tw == 0u) kl__bulk_wait_group<0>(); /* the block's shared memory outlives its stores */
    if (tw == 0u) GROUPED_GEMM_TMA__STAMP(1u + wg);
#else
    /* No wgmma on this target: kl_grouped_gemm_tma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
