/* Reference: tests/mla_prefill/mla_reference.h (grouped_gemm, float64)
 * Tests:
 *   tests/mla_prefill/mla_mma_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_fast_test.cc (GPU)
 *   tests/mla_prefill/mla_fast_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_mma_emulated_test \
 *     //tests/mla_prefill:mla_fast_test \
 *     //tests/mla_prefill:mla_fast_launch_test
 */
#include "klaunch/mla_prefill.cuh"

/* grouped_gemm_mma: g independent GEMMs on tensor cores, the contract of
 * grouped_gemm_mla (kernel contract, kernel 7) in 128 x 128 output tiles:
 *
 *   C[i, gi*n_g + j] = sum_k A[i*a_stride + gi*k_g + k] * B[(gi*n_g + j)*k_g + k]
 *
 * i.e. C_g = A_g B_g^T with A_g [m, k_g] (rows a_stride apart), B_g [n_g, k_g]
 * dense, C_g [m, n_g] (rows c_stride apart). Both operands are k-major, the
 * "row.col" layout mma.sync takes without transposes.
 *
 * Geometry: grid (ceil(n_g / 128), ceil(m / 128), g), block 256, the spec's
 * dynamic shared memory (4 stages of 128 x 32 A and B tiles, 64 KiB). Blocks
 * of one group and row tile run side by side, so A's rows and the group's B
 * come from L2 after the first read.
 *
 * 8 warps as 2 x 4, each 64 x 32 outputs: per 16-wide k-step 4 A and 2 B
 * ldmatrix.x4 feed 16 mma.m16n8k16 (fp32 accumulators, 64 per thread).
 * cp.async keeps 3 k-tiles in flight. Shared tiles have 64-byte rows; their
 * 16-byte chunks are XOR-swizzled by (row / 2) % 4 so that 8 consecutive
 * rows of one chunk column (one ldmatrix matrix) hit 8 different bank
 * groups. The epilogue stages the bf16 tile in shared memory and writes
 * 16-byte pieces of C rows.
 *
 * Any m, n_g, k_g and alignment: a 16-byte chunk that is misaligned or runs
 * past k_g is loaded element by element (zeros past the end), rows past m or
 * n_g are zeros, and an output piece that is misaligned or runs past n_g is
 * stored element by element.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#include "mla_mma.cuh"

#define GROUPED_GEMM_MMA_SMEM KL_SHARED_BYTES_grouped_gemm_mma /* the spec's shared_bytes (klaunch/mla_prefill.cuh) */

namespace grouped_gemm_mma_ {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 4, THREADS = 256;
constexpr uint32_t ROWB = BK * 2;                 /* bytes per shared tile row */
constexpr uint32_t TILE = BM * ROWB;              /* one operand's tile: 8 KiB */
constexpr uint32_t STAGE = 2 * TILE;              /* A then B */
constexpr uint32_t SMEM = STAGES * STAGE;
constexpr uint32_t CP = (BN + 8) * 2;             /* epilogue row pitch in bytes: +16 against bank conflicts */
static_assert(BM == BN, "A and B tiles share one loader");
static_assert(SMEM <= GROUPED_GEMM_MMA_SMEM, "the spec's shared_bytes must cover the stages");
static_assert(BM * CP <= SMEM, "the epilogue tile fits in the stages' memory");
static_assert(BM * (BK / 8) == 2 * THREADS, "each thread loads 2 chunks of each operand per stage");

/* One 16-byte chunk (8 bf16 at k .. k+7 of a row) into shared memory: `n`
 * valid elements (0..8) from `src`. */
__device__ __forceinline__ void load_chunk(uint32_t dst, const __nv_bfloat16 *src, uint32_t n) {
    if (n == 8u && (reinterpret_cast<uintptr_t>(src) & 15u) == 0u)
        kl__mma_cp16(dst, src);
    else if (n == 0u)
        kl__mma_st_shared_v4(dst, make_uint4(0u, 0u, 0u, 0u));
    else
        kl__mma_st_shared_v4(dst, kl__mma_load8_partial(src, n));
}

/* Swizzled byte offset of chunk c (0..3) of row r in a tile. */
__device__ __forceinline__ uint32_t swz(uint32_t r, uint32_t c) { return r * ROWB + ((c ^ ((r >> 1) & 3u)) << 4); }

}  // namespace grouped_gemm_mma_

extern "C" __global__ void __launch_bounds__(KL_THREADS_grouped_gemm_mma, 2)
grouped_gemm_mma(KL_PARAMS_grouped_gemm_mma) {
    using namespace grouped_gemm_mma_;
    KL_DYNAMIC_SHARED(grouped_gemm_mma__smem, 128);

    /* The launcher's grid never gets here with these; a raw launch must still not write out of bounds. */
    if (blockDim.x != (uint32_t)THREADS || kl__mma_dynamic_smem_size() < SMEM) return;
    const uint32_t n0 = blockIdx.x * (uint32_t)BN, m0 = blockIdx.y * (uint32_t)BM, gi = blockIdx.z;
    if (gi >= g || m0 >= m || n0 >= n_g) return;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t wm = warp >> 2, wn = warp & 3u; /* warp tile: rows 64 wm .. +64, columns 32 wn .. +32 */
    const uint32_t sbase = kl__mma_smem_addr(grouped_gemm_mma__smem);

    const __nv_bfloat16 *ag = a + (size_t)gi * k_g;               /* A_g row i at + i * a_stride */
    const __nv_bfloat16 *bg = b + (size_t)gi * n_g * k_g;         /* B_g row j at + j * k_g */
    const uint32_t ktiles = (k_g + (uint32_t)BK - 1u) / (uint32_t)BK;

    /* This thread's two chunks of each operand tile: rows lr and lr + 64, chunk lc. */
    const uint32_t lr = tid >> 2, lc = tid & 3u;
    const uint32_t a_rows_ok = m - m0, b_rows_ok = n_g - n0; /* rows of the tiles that exist (may exceed 128) */
    const __nv_bfloat16 *a_src0 = ag + (size_t)(m0 + lr) * a_stride + lc * 8u;
    const __nv_bfloat16 *b_src0 = bg + (size_t)(n0 + lr) * k_g + lc * 8u;
    const size_t a_half = (size_t)64 * a_stride, b_half = (size_t)64 * k_g; /* rows lr + 64 */
    const uint32_t d0 = swz(lr, lc), d1 = swz(lr + 64u, lc);

    auto load_stage = [&](uint32_t kt) {
        const uint32_t st = sbase + (kt % (uint32_t)STAGES) * STAGE;
        const uint32_t k = kt * (uint32_t)BK + lc * 8u;
        const uint32_t nk = k < k_g ? min(8u, k_g - k) : 0u;
        const size_t koff = (size_t)kt * BK;
        load_chunk(st + d0, a_src0 + koff, lr < a_rows_ok ? nk : 0u);
        load_chunk(st + d1, a_src0 + a_half + koff, lr + 64u < a_rows_ok ? nk : 0u);
        load_chunk(st + TILE + d0, b_src0 + koff, lr < b_rows_ok ? nk : 0u);
        load_chunk(st + TILE + d1, b_src0 + b_half + koff, lr + 64u < b_rows_ok ? nk : 0u);
    };

    /* ldmatrix addressing: lane L feeds row L % 8 of matrix L / 8. Row bases
     * are multiples of 16, so a row's swizzle (row / 2) % 4 is (L % 8) / 2. */
    const uint32_t x7 = lane & 7u, mi = lane >> 3, rsw = (x7 >> 1) & 3u;
    /* A: matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
    const uint32_t a_row = wm * 64u + x7 + ((mi & 1u) << 3);
    /* B: matrices (n 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15). */
    const uint32_t b_row = wn * 32u + x7 + ((mi >> 1) << 3);
    uint32_t a_off[2], b_off[2]; /* per 16-wide k-step kk of a tile */
#pragma unroll
    for (uint32_t kk = 0; kk < 2u; ++kk) {
        a_off[kk] = a_row * ROWB + (((2u * kk + (mi >> 1)) ^ rsw) << 4);
        b_off[kk] = TILE + b_row * ROWB + (((2u * kk + (mi & 1u)) ^ rsw) << 4);
    }

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if ((uint32_t)s < ktiles) load_stage((uint32_t)s);
        kl__mma_cp_commit();
    }
    for (uint32_t kt = 0; kt < ktiles; ++kt) {
        kl__mma_cp_wait<STAGES - 2>(); /* this thread's part of tile kt has landed */
        __syncthreads();               /* everyone's has; stage (kt - 1) % STAGES is free */
        if (kt + (uint32_t)STAGES - 1u < ktiles) load_stage(kt + (uint32_t)STAGES - 1u);
        kl__mma_cp_commit();

        const uint32_t st = sbase + (kt % (uint32_t)STAGES) * STAGE;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            uint32_t af[4][4], bf[2][4];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) kl__mma_ldsm_x4(af[mt], st + a_off[kk] + (uint32_t)(mt * 16) * ROWB);
#pragma unroll
            for (int np = 0; np < 2; ++np) kl__mma_ldsm_x4(bf[np], st + b_off[kk] + (uint32_t)(np * 16) * ROWB);
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
                    kl__mma_bf16_16816(acc[mt][nt], af[mt], bf[nt >> 1][2 * (nt & 1)], bf[nt >> 1][2 * (nt & 1) + 1]);
        }
    }
    kl__mma_cp_wait<0>();
    __syncthreads(); /* every warp is done with the stages: the epilogue reuses them */

    /* Accumulators -> bf16 tile [128][CP bytes]: c0, c1 at row g, columns
     * 2t, 2t+1 of each n8 tile, c2, c3 at row g + 8. */
    const uint32_t gq = lane >> 2, tq = lane & 3u;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const uint32_t row = wm * 64u + (uint32_t)(mt * 16) + gq, col = wn * 32u + (uint32_t)(nt * 8) + 2u * tq;
            kl__mma_st_shared_u32(sbase + row * CP + col * 2u, kl__mma_pack_bf16(acc[mt][nt][0], acc[mt][nt][1]));
            kl__mma_st_shared_u32(sbase + (row + 8u) * CP + col * 2u, kl__mma_pack_bf16(acc[mt][nt][2], acc[mt][nt][3]));
        }
    __syncthreads();

    /* 16 pieces of 8 outputs per tile row; a warp writes 2 rows of 256 bytes. */
    __nv_bfloat16 *cg = c + (size_t)gi * n_g;
#pragma unroll
    for (int i = 0; i < BM * (BN / 8) / THREADS; ++i) {
        const uint32_t idx = tid + (uint32_t)(i * THREADS);
        const uint32_t row = idx >> 4, piece = idx & 15u;
        const uint32_t gr = m0 + row, gc = n0 + piece * 8u;
        if (gr >= m || gc >= n_g) continue;
        const uint4 v = kl__mma_ld_shared_v4(sbase + row * CP + piece * 16u);
        __nv_bfloat16 *dst = cg + (size_t)gr * c_stride + gc;
        if (gc + 8u <= n_g && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0u) {
            *reinterpret_cast<uint4 *>(dst) = v;
        } else {
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
            unsigned short *d = reinterpret_cast<unsigned short *>(dst);
            const uint32_t n = min(8u, n_g - gc);
#pragma unroll
            for (uint32_t e = 0; e < 8u; ++e)
                if (e < n) d[e] = (unsigned short)(w[e >> 1] >> (16u * (e & 1u)));
        }
    }
}
