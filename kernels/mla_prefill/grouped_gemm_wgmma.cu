/* Reference: tests/mla_prefill/mla_reference.h (grouped_gemm, float64)
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

/* grouped_gemm_wgmma: grouped_gemm_mla's contract (kernel contract, kernel 7)
 * on Hopper's warpgroup tensor cores (sm_90a: wgmma.mma_async), in 128 x
 * 128 output tiles, warp-specialised:
 *
 *   C[i, gi*n_g + j] = sum_k A[i*a_stride + gi*k_g + k] * B[(gi*n_g + j)*k_g + k]
 *
 * C_g = A_g B_g^T, A_g [m, k_g] (rows a_stride apart), B_g [n_g, k_g] dense,
 * C_g [m, n_g] (rows c_stride apart); both operands K-major, as wgmma reads
 * them without a transpose. Reference and tests: tests/mla_prefill/ (the
 * emulated test against float64; the SASS test) and the GPU test.
 *
 * The numbers (m 4096, g 128; bf16):
 *   k 128 / n 512 (q_nope @ w_uk): 68.7 GFLOP; bytes A 134 MB + B 17 MB +
 *     C 537 MB = 688 MB. At the H200's ~4.25 TB/s copy rate that is 162 us,
 *     against 86 us of matrix work at 800 TFLOP/s: memory-bound, C writes
 *     dominate. Target: bytes / time >= 0.85 of copy (191 us).
 *   k 512 / n 128 (o_lat @ w_uv^T): the same FLOPs and 688 MB (A 537 MB).
 *   Per SM at 0.85 of copy: 688 MB / 132 / 191 us = 27 KB per us; with ~1.5
 *   us of DRAM latency that is >= 40 KiB of loads in flight per SM, all the
 *   time, epilogues included.
 *
 * What the first version (2 blocks per SM of 2 warpgroups, 3 cp.async stages
 * issued and waited by the consumers, one tile per block) measured: 0.52 of
 * copy at k 128, DRAM 44% busy, 24% occupancy; the loads stopped while a
 * block waited for its 2 k-steps and ran its epilogue.
 *
 * This design, from those numbers:
 *   - Block = 3 warpgroups (384 threads): warpgroups 0 and 1 consume (rows
 *     64w .. 64w + 63 of a tile: one m64n128k16 accumulator, 64 fp32
 *     registers a thread), warpgroup 2 produces. A block does TPB = 4
 *     consecutive m tiles of one (n tile, group): grid (ceil(n_g / 128),
 *     ceil(m / 512), g), 1024 blocks at n 128 and 4096 at n 512 (7.8 and 31
 *     waves of 132).
 *   - The producer streams (tile, k step) stages of A 128 x 64 + B 128 x 64
 *     (32 KiB) through a ring of STAGES = 4 (128 KiB: two whole k-128 tiles
 *     ahead) with cp.async 16 bytes into the 128-byte swizzle layout, each
 *     thread 16 chunks a stage, one cp.async group a stage; LAG = 2 stages
 *     behind its issue it waits for a group (cp.async.wait_group 2) and
 *     arrives on that stage's `full` mbarrier (count 128); it waits on the
 *     stage's `empty` mbarrier (one elected lane of each consumer warp,
 *     count 8) before reusing it. So loads keep flowing through the
 *     consumers' waits and epilogues: 3 stages (96 KiB) in flight per SM,
 *     over twice the 40 KiB needed.
 *     Measured first (2026-12-02, H200): completing each stage with
 *     cp.async.mbarrier.arrive.noinc instead ran at one stage in flight per
 *     SM (1.4 us a stage, the load latency: 1589 GB/s at k 128, 2036 at k
 *     512, against the old kernel's 2196 and 3383 in the same run), as if
 *     the arrive held the thread's later copies back.
 *   - Consumers: wait full, 4 wgmma m64n128k16 per stage (A and B
 *     descriptors advance 32 bytes per k16), one wgmma group kept in flight:
 *     the previous stage goes back as soon as its products are done. A
 *     stage is 1 M FMA: 512 cycles at 2048 FMA per cycle, reading 48 KiB of
 *     shared memory (96 B per cycle, under the 128 it delivers).
 *   - Epilogue per warpgroup, no block-wide barrier: accumulators -> bf16 in
 *     its own staging half (64 rows, pitch 272 bytes: the fragment's stores
 *     hit 32 banks), double-buffered so one named barrier of its 128
 *     threads a tile suffices, then 16-byte stores (a warp writes two full
 *     256-byte rows of C per instruction). The stores are fire-and-forget:
 *     the producer's loads for the next tiles are already in flight.
 *   - Shared memory: ring 128 KiB + staging 4 x 17 KiB + 8 mbarriers +
 *     1 KiB alignment = 197 KiB: one block per SM; registers: 384 threads
 *     under __launch_bounds__(384, 1) (168 a thread; the consumers need
 *     ~100, so no setmaxnreg).
 *   Predicted: k 128 from 0.52 to ~0.8 of copy (loads never pause; the
 *   limit becomes DRAM write + read throughput); k 512 from 0.84 to ~1.0x
 *   torch.bmm.
 *
 * Any m, n_g, k_g, strides and alignment: rows past m or n_g and k past k_g
 * are zeros in shared memory; a chunk whose source is not 16-byte aligned is
 * loaded element by element by the producer thread (before its arrive); an
 * output piece that is misaligned or runs past n_g is stored element by
 * element.
 *
 * Resources (nvcc 13.0 -Xptxas -v, sm_90a): see docs/MLA_PREFILL.md.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "mla_mma.cuh"
#include "../common/kl_ptx_sm90.cuh"

namespace grouped_gemm_wgmma_ {

constexpr int BM = 128, BN = 128, BK = 64, STAGES = 4, LAG = 2, TPB = 4, THREADS = 384;
constexpr uint32_t TILE = BM * 128;          /* one operand's stage: 128 rows of 128 bytes, 16 KiB */
constexpr uint32_t STAGE = 2 * TILE;         /* A then B */
constexpr uint32_t CP = BN * 2 + 16;         /* epilogue row pitch in bytes (+16: no bank conflicts) */
constexpr uint32_t HALF = 64 * CP;           /* one warpgroup's 64 rows of C, 17 KiB */
constexpr uint32_t OFF_C = STAGES * STAGE;   /* [warpgroup][buffer] staging tiles */
constexpr uint32_t OFF_BAR = OFF_C + 4 * HALF;
constexpr uint32_t SMEM = OFF_BAR + 2 * STAGES * 8;
static_assert(SMEM + 1024 == KL_SHARED_BYTES_grouped_gemm_wgmma,
              "the spec's shared_bytes: the ring, the staging tiles, the mbarriers and 1 KiB to align them");
static_assert(THREADS == KL_THREADS_grouped_gemm_wgmma, "two consumer warpgroups and a producer");
static_assert(BM == BN, "A and B stages share one loader");

/* Swizzled byte offset of 16-byte chunk c (0..7) of row r in a stage tile. */
__device__ __forceinline__ uint32_t swz(uint32_t r, uint32_t c) { return r * 128u + ((c ^ (r & 7u)) << 4); }

/* One 16-byte chunk (8 bf16 at k .. k+7 of a row): `n` valid elements. An
 * aligned source is a cp.async (zero-filled past n); a chunk past the edges
 * is stored as zeros and a misaligned one (odd pointers or strides) loaded
 * by the thread itself, all before the thread's arrive on the stage. */
__device__ __forceinline__ void load_chunk(uint32_t dst, const __nv_bfloat16 *src, uint32_t n) {
    if (n == 0u)
        kl__mma_st_shared_v4(dst, make_uint4(0u, 0u, 0u, 0u));
    else if ((reinterpret_cast<uintptr_t>(src) & 15u) == 0u)
        kl__cp_async_cg16_zfill(dst, src, n * 2u);
    else
        kl__mma_st_shared_v4(dst, kl__mma_load8_partial(src, n));
}

}  // namespace grouped_gemm_wgmma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_grouped_gemm_wgmma, 1)
grouped_gemm_wgmma(KL_PARAMS_grouped_gemm_wgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace grouped_gemm_wgmma_;
    KL_DYNAMIC_SHARED(grouped_gemm_wgmma__smem, 16);

    /* The launcher's grid never gets here with these; a raw launch must still not write out of bounds. */
    if (blockDim.x != (uint32_t)THREADS || kl__mma_dynamic_smem_size() < SMEM + 1024u) return;
    const uint32_t n0 = blockIdx.x * (uint32_t)BN, mt0 = blockIdx.y * (uint32_t)TPB, gi = blockIdx.z;
    if (gi >= g || mt0 * (uint32_t)BM >= m || n0 >= n_g) return;
    const uint32_t tiles = min((uint32_t)TPB, (m - mt0 * (uint32_t)BM + (uint32_t)BM - 1u) / (uint32_t)BM);

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    /* The swizzle pattern repeats every 1024 bytes of address: stages start on such a boundary. */
    const uint32_t sbase = (kl__mma_smem_addr(grouped_gemm_wgmma__smem) + 1023u) & ~1023u;
    const uint32_t full = sbase + OFF_BAR, empty = full + 8u * STAGES;
    const uint32_t ktiles = (k_g + (uint32_t)BK - 1u) / (uint32_t)BK;

    if (tid == 0u) {
        for (uint32_t s = 0; s < (uint32_t)STAGES; ++s) {
            kl__mbar_init(full + 8u * s, 128u); /* each producer thread, once its part has landed */
            kl__mbar_init(empty + 8u * s, 8u);  /* one elected lane of each consumer warp */
        }
    }
    __syncthreads();

    if (wg == 2u) {
        /* ---- producer: stage (tile, k step) after stage into the ring ---- */
        const __nv_bfloat16 *ag = a + (size_t)gi * k_g;       /* A_g row i at + i * a_stride */
        const __nv_bfloat16 *bg = b + (size_t)gi * n_g * k_g; /* B_g row j at + j * k_g */
        const uint32_t pt = tid & 127u, lr = pt >> 3, lc = pt & 7u; /* rows lr + 16 i, chunk lc */
        const uint32_t b_rows = n_g - n0;
        uint32_t it = 0;
        for (uint32_t t = 0; t < tiles; ++t) {
            const uint32_t m0 = (mt0 + t) * (uint32_t)BM, a_rows = m - m0;
            for (uint32_t kt = 0; kt < ktiles; ++kt, ++it) {
                const uint32_t s = it % (uint32_t)STAGES, round = it / (uint32_t)STAGES;
                if (round > 0u) kl__mbar_wait(empty + 8u * s, (round - 1u) & 1u);
                const uint32_t st = sbase + s * STAGE;
                const uint32_t k = kt * (uint32_t)BK + lc * 8u;
                const uint32_t nk = k < k_g ? min(8u, k_g - k) : 0u;
#pragma unroll
                for (uint32_t i = 0; i < 8u; ++i) {
                    const uint32_t r = lr + 16u * i;
                    load_chunk(st + swz(r, lc), ag + (size_t)(m0 + r) * a_stride + k, r < a_rows ? nk : 0u);
                    load_chunk(st + TILE + swz(r, lc), bg + (size_t)(n0 + r) * k_g + k, r < b_rows ? nk : 0u);
                }
                kl__mma_cp_commit();
                /* Stage it - LAG has landed (this thread's part): release it to the consumers. */
                if (it >= (uint32_t)LAG) {
                    kl__mma_cp_wait<LAG>();
                    kl__mbar_arrive(full + 8u * ((it - (uint32_t)LAG) % (uint32_t)STAGES));
                }
            }
        }
        kl__mma_cp_wait<0>();
        for (uint32_t j = it > (uint32_t)LAG ? it - (uint32_t)LAG : 0u; j < it; ++j)
            kl__mbar_arrive(full + 8u * (j % (uint32_t)STAGES));
        return;
    }

    /* ---- consumers: warpgroup wg owns rows 64 wg .. 64 wg + 63 of each tile ---- */
    const uint32_t tw = tid & 127u, w = tw >> 5, gq = (tw & 31u) >> 2, q = tw & 3u;
    const uint32_t row = w * 16u + gq; /* this thread's rows of the half: row, row + 8 */
    __nv_bfloat16 *cg = c + (size_t)gi * n_g;
    uint32_t it = 0;
    for (uint32_t t = 0; t < tiles; ++t) {
        const uint32_t m0 = (mt0 + t) * (uint32_t)BM;
        float acc[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        kl__wgmma_fence_operand(acc);
        for (uint32_t kt = 0; kt < ktiles; ++kt, ++it) {
            const uint32_t s = it % (uint32_t)STAGES;
            kl__mbar_wait(full + 8u * s, (it / (uint32_t)STAGES) & 1u);
            kl__fence_proxy_async_shared(); /* the stage's generic writes, for wgmma */
            const uint32_t st = sbase + s * STAGE;
            const uint32_t a_tile = st + wg * 64u * 128u, b_tile = st + TILE;
            kl__wgmma_fence();
#pragma unroll
            for (uint32_t kk = 0; kk < 4u; ++kk)
                kl__wgmma_bf16_ss<128, 0>(acc, kl__wgmma_desc(a_tile + kk * 32u, 16u, 1024u),
                                          kl__wgmma_desc(b_tile + kk * 32u, 16u, 1024u), 1u);
            kl__wgmma_commit();
            if (kt > 0u) {
                kl__wgmma_wait<1>(); /* the previous stage's products are done: hand it back */
                if (kl__elect_one()) kl__mbar_arrive(empty + 8u * ((it - 1u) % (uint32_t)STAGES));
            }
        }
        kl__wgmma_wait<0>();
        kl__wgmma_fence_operand(acc);
        if (ktiles > 0u && kl__elect_one()) kl__mbar_arrive(empty + 8u * ((it - 1u) % (uint32_t)STAGES));

        /* Accumulators -> bf16 in this warpgroup's staging half (buffer t % 2: the one written two
         * tiles ago was read before this warpgroup's barrier of the last tile). */
        const uint32_t stg = sbase + OFF_C + (wg * 2u + (t & 1u)) * HALF;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const uint32_t col = (uint32_t)(8 * i) + 2u * q;
            kl__mma_st_shared_u32(stg + row * CP + col * 2u, kl__mma_pack_bf16(acc[4 * i], acc[4 * i + 1]));
            kl__mma_st_shared_u32(stg + (row + 8u) * CP + col * 2u, kl__mma_pack_bf16(acc[4 * i + 2], acc[4 * i + 3]));
        }
        kl__mma_bar_sync(1u + wg, 128u);

        /* 16 pieces of 8 outputs per row; a warp writes 2 rows of 256 bytes per instruction. */
#pragma unroll
        for (int i = 0; i < 64 * (BN / 8) / 128; ++i) {
            const uint32_t idx = tw + (uint32_t)(i * 128);
            const uint32_t r = idx >> 4, piece = idx & 15u;
            const uint32_t gr = m0 + wg * 64u + r, gc = n0 + piece * 8u;
            if (gr >= m || gc >= n_g) continue;
            const uint4 v = kl__mma_ld_shared_v4(stg + r * CP + piece * 16u);
            __nv_bfloat16 *dst = cg + (size_t)gr * c_stride + gc;
            if (gc + 8u <= n_g && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0u) {
                *reinterpret_cast<uint4 *>(dst) = v;
            } else {
                const uint32_t wv[4] = {v.x, v.y, v.z, v.w};
                unsigned short *d = reinterpret_cast<unsigned short *>(dst);
                const uint32_t n = min(8u, n_g - gc);
#pragma unroll
                for (uint32_t e = 0; e < 8u; ++e)
                    if (e < n) d[e] = (unsigned short)(wv[e >> 1] >> (16u * (e & 1u)));
            }
        }
    }
#else
    /* No wgmma on this target: kl_grouped_gemm_wgmma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
