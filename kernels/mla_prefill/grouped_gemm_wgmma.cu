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
 * 128 output tiles:
 *
 *   C[i, gi*n_g + j] = sum_k A[i*a_stride + gi*k_g + k] * B[(gi*n_g + j)*k_g + k]
 *
 * C_g = A_g B_g^T, A_g [m, k_g] (rows a_stride apart), B_g [n_g, k_g] dense,
 * C_g [m, n_g] (rows c_stride apart); both operands K-major, as wgmma reads
 * them without a transpose. Reference and tests: tests/mla_prefill/
 * (grouped_gemm_wgmma_test on the GPU against float64; the SASS test).
 *
 * The numbers (m 4096, g 128; bf16):
 *   k 128 / n 512 (q_nope @ w_uk): 68.7 GFLOP; bytes A 134 MB + B 17 MB +
 *     C 537 MB = 688 MB. At the H200's ~4.2 TB/s copy rate that is 164 us,
 *     against 86 us of matrix work at 800 TFLOP/s: memory-bound, C writes
 *     dominate. Target: bytes / time >= 0.85 of copy (193 us).
 *   k 512 / n 128 (o_lat @ w_uv^T): the same FLOPs and 688 MB (A 537 MB).
 *   Both are bound by moving each byte once: read A once from DRAM, B (17
 *   MB, one group 128 KB) from L2, write C once with full-line stores.
 *
 * Design from those numbers:
 *   - Block = 2 warpgroups (256 threads), tile 128 x 128 (warpgroup w owns
 *     rows 64w .. 64w + 63: one m64n128k16 accumulator, 64 fp32 registers a
 *     thread). Grid (ceil(n_g / 128), ceil(m / 128), g): the n tiles of one
 *     row tile are neighbours, so A's rows come from L2 after the first read.
 *   - K in steps of 64 (one 128-byte swizzle slab): a stage is A 128 x 64 +
 *     B 128 x 64 = 32 KiB; 3 stages = 96 KiB, so 2 blocks share an SM
 *     (registers: 256 threads x 128 = half the file each), and one block's
 *     epilogue overlaps the other's loads. At k 128 a tile has only 2 k
 *     steps, so that second block is what hides the load latency.
 *   - Loads: cp.async 16 bytes into the swizzle layout (no tensor map: a
 *     tensor map needs a spec type through every layer and a host-side
 *     encode; the bytes here are the same either way, and 16-byte cp.async
 *     from 256 threads keeps 96 KiB in flight per SM, about what the memory
 *     system needs at this bandwidth: 4.2 TB/s x ~2 us latency / 132 SMs =
 *     64 KiB).
 *   - Per stage and warpgroup: 4 wgmma m64n128k16 (A and B descriptors
 *     advance 32 bytes per k16). A stage is 8 such wgmmas, 1,048,576 FMAs:
 *     512 cycles at the tensor core's 2048 FMA per cycle, reading 48 KiB of
 *     shared memory (96 B per cycle, under the 128 it delivers). Matrix time
 *     is about half of memory time (86 against 164 us), so neither tensor
 *     nor shared-memory throughput limits this kernel; bytes do.
 *   - Epilogue: accumulators -> bf16 in shared memory (rows padded by 16
 *     bytes), then each thread stores 16-byte pieces: a warp writes two full
 *     256-byte rows of C per instruction (full 32-byte sectors).
 *
 * Measured on the H200 (2026-12-01, bench/mla/run.sh): 2204 GB/s at k
 * 128 (0.52 of copy), 3356 GB/s at k 512 (335 TFLOP/s, 0.83 of
 * torch.bmm). The profile at k 128: DRAM 44% busy, 24% occupancy (16
 * warps), i.e. the loads' latency is exposed between a block's 2 k-steps
 * and its epilogue. Tried:
 * 4 tiles per block with the stage ring running across them (1 block per
 * SM, 128 KiB of stages + an epilogue tile), predicted to hide that latency
 * (0.52 -> ~0.75 of copy); measured 1857 GB/s (0.44) and 240 TFLOP/s at k
 * 512: with one block per SM each stage's wgmma wait and barrier stall the
 * whole SM and nothing overlaps the epilogue, so it was reverted. Tried
 * next (H200, 2026-12-02): a producer warpgroup issuing cp.async behind
 * mbarriers while the consumers compute and store, 4 tiles a block: 1597
 * GB/s at k 128 with one producer warpgroup, 2117 with two, against this
 * kernel's 2193 (16 loading warps in 2 blocks). With cp.async the bytes in
 * flight an SM scale with the warps that issue the copies, so a producer
 * warpgroup cannot keep enough in flight; the bulk tensor copy engine (one
 * thread, no per-warp limit) can: grouped_gemm_tma.
 *
 * Any m, n_g, k_g, strides and alignment: rows past m or n_g and k past k_g
 * are zeros in shared memory; a chunk whose source is not 16-byte aligned is
 * loaded element by element; an output piece that is misaligned or runs
 * past n_g is stored element by element.
 *
 * Resources (nvcc 13.0 -Xptxas -v, sm_90a): see docs/MLA_PREFILL.md.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "mla_mma.cuh"
#include "../common/kl_ptx_sm90.cuh"

#define GROUPED_GEMM_WGMMA_SMEM KL_SHARED_BYTES_grouped_gemm_wgmma /* the spec's shared_bytes (99328): the stages + 1 KiB to align them */

namespace grouped_gemm_wgmma_ {

constexpr int BM = 128, BN = 128, BK = 64, STAGES = 3, THREADS = 256;
constexpr uint32_t TILE = BM * 128;   /* one operand's stage: 128 rows of 128 bytes, 16 KiB */
constexpr uint32_t STAGE = 2 * TILE;  /* A then B */
constexpr uint32_t SMEM = STAGES * STAGE;
constexpr uint32_t CP = BN * 2 + 16;  /* epilogue row pitch in bytes */
static_assert(SMEM + 1024 == GROUPED_GEMM_WGMMA_SMEM, "the spec's shared_bytes is the stages and the alignment slack");
static_assert(BM * CP <= SMEM, "the epilogue tile fits in the stages' memory");
static_assert(BM == BN, "A and B stages share one loader");

/* Swizzled byte offset of 16-byte chunk c (0..7) of row r in a stage tile. */
__device__ __forceinline__ uint32_t swz(uint32_t r, uint32_t c) { return r * 128u + ((c ^ (r & 7u)) << 4); }

/* One 16-byte chunk (8 bf16 at k .. k+7 of a row): `n` valid elements. */
__device__ __forceinline__ void load_chunk(uint32_t dst, const __nv_bfloat16 *src, uint32_t n) {
    if (n == 8u && (reinterpret_cast<uintptr_t>(src) & 15u) == 0u)
        kl__mma_cp16(dst, src);
    else if (n == 0u)
        kl__mma_st_shared_v4(dst, make_uint4(0u, 0u, 0u, 0u));
    else
        kl__mma_st_shared_v4(dst, kl__mma_load8_partial(src, n));
}

}  // namespace grouped_gemm_wgmma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_grouped_gemm_wgmma, 2)
grouped_gemm_wgmma(KL_PARAMS_grouped_gemm_wgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    using namespace grouped_gemm_wgmma_;
    KL_DYNAMIC_SHARED(grouped_gemm_wgmma__smem, 16);

    /* The launcher's grid never gets here with these; a raw launch must still not write out of bounds. */
    if (blockDim.x != (uint32_t)THREADS || kl__mma_dynamic_smem_size() < SMEM + 1024u) return;
    const uint32_t n0 = blockIdx.x * (uint32_t)BN, m0 = blockIdx.y * (uint32_t)BM, gi = blockIdx.z;
    if (gi >= g || m0 >= m || n0 >= n_g) return;

    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    /* The swizzle pattern repeats every 1024 bytes of address: stages start on such a boundary. */
    const uint32_t sbase = (kl__mma_smem_addr(grouped_gemm_wgmma__smem) + 1023u) & ~1023u;

    const __nv_bfloat16 *ag = a + (size_t)gi * k_g;        /* A_g row i at + i * a_stride */
    const __nv_bfloat16 *bg = b + (size_t)gi * n_g * k_g;  /* B_g row j at + j * k_g */
    const uint32_t ktiles = (k_g + (uint32_t)BK - 1u) / (uint32_t)BK;

    /* Each thread loads 4 chunks of A and 4 of B per stage: rows lr + 32 i, chunk lc. */
    const uint32_t lr = tid >> 3, lc = tid & 7u;
    const uint32_t a_rows = m - m0, b_rows = n_g - n0; /* rows of the tiles that exist (may exceed 128) */

    auto load_stage = [&](uint32_t kt) {
        const uint32_t st = sbase + (kt % (uint32_t)STAGES) * STAGE;
        const uint32_t k = kt * (uint32_t)BK + lc * 8u;
        const uint32_t nk = k < k_g ? min(8u, k_g - k) : 0u;
#pragma unroll
        for (uint32_t i = 0; i < 4u; ++i) {
            const uint32_t r = lr + 32u * i;
            load_chunk(st + swz(r, lc), ag + (size_t)(m0 + r) * a_stride + k, r < a_rows ? nk : 0u);
            load_chunk(st + TILE + swz(r, lc), bg + (size_t)(n0 + r) * k_g + k, r < b_rows ? nk : 0u);
        }
    };

    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if ((uint32_t)s < ktiles) load_stage((uint32_t)s);
        kl__mma_cp_commit();
    }
    for (uint32_t kt = 0; kt < ktiles; ++kt) {
        kl__mma_cp_wait<STAGES - 2>(); /* this thread's part of stage kt has landed */
        kl__fence_proxy_async_shared();     /* ... and is visible to wgmma after the barrier */
        __syncthreads();                /* everyone's; every warpgroup is done with stage kt - 1 */
        if (kt + (uint32_t)STAGES - 1u < ktiles) load_stage(kt + (uint32_t)STAGES - 1u);
        kl__mma_cp_commit();

        const uint32_t st = sbase + (kt % (uint32_t)STAGES) * STAGE;
        const uint32_t a_tile = st + wg * 64u * 128u, b_tile = st + TILE;
        kl__wgmma_fence();
#pragma unroll
        for (uint32_t kk = 0; kk < 4u; ++kk)
            kl__wgmma_bf16_ss<128, 0>(acc, kl__wgmma_desc(a_tile + kk * 32u, 16u, 1024u),
                                 kl__wgmma_desc(b_tile + kk * 32u, 16u, 1024u), 1u);
        kl__wgmma_commit();
        kl__wgmma_wait<0>(); /* the stage may be overwritten after the next barrier */
    }
    kl__wgmma_fence_operand(acc);
    kl__mma_cp_wait<0>();
    __syncthreads(); /* every warpgroup is done with the stages: the epilogue reuses them */

    /* Accumulators -> bf16 tile [128][CP bytes] (the fragment layout in kernels/common/kl_ptx_sm90.cuh). */
    const uint32_t tw = tid & 127u, w = tw >> 5, gq = (tw & 31u) >> 2, q = tw & 3u;
    const uint32_t row = wg * 64u + w * 16u + gq;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const uint32_t col = (uint32_t)(8 * i) + 2u * q;
        kl__mma_st_shared_u32(sbase + row * CP + col * 2u, kl__mma_pack_bf16(acc[4 * i], acc[4 * i + 1]));
        kl__mma_st_shared_u32(sbase + (row + 8u) * CP + col * 2u, kl__mma_pack_bf16(acc[4 * i + 2], acc[4 * i + 3]));
    }
    __syncthreads();

    /* 16 pieces of 8 outputs per tile row; a warp writes 2 rows of 256 bytes. */
    __nv_bfloat16 *cg = c + (size_t)gi * n_g;
#pragma unroll
    for (int i = 0; i < BM * (BN / 8) / THREADS; ++i) {
        const uint32_t idx = tid + (uint32_t)(i * THREADS);
        const uint32_t r = idx >> 4, piece = idx & 15u;
        const uint32_t gr = m0 + r, gc = n0 + piece * 8u;
        if (gr >= m || gc >= n_g) continue;
        const uint4 v = kl__mma_ld_shared_v4(sbase + r * CP + piece * 16u);
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
#else
    /* No wgmma on this target: kl_grouped_gemm_wgmma_get refuses such a module (arch: sm_90a). */
    __trap();
#endif
}
