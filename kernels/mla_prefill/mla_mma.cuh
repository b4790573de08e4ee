/* mla_mma.cuh - warp-level tensor-core helpers for the mla_prefill kernels
 * that run on tensor cores (mla_absorbed_attn_mma, grouped_gemm_mma).
 *
 * Only sm_80 PTX: cp.async, ldmatrix and mma.sync m16n8k16 bf16 with fp32
 * accumulation. No wgmma or TMA, so the same source compiles for sm_80,
 * sm_90, sm_100 and sm_120 without an arch-specific (sm_90a) target.
 *
 * Fragment layouts of mma.sync.m16n8k16.row.col (PTX ISA, "Matrix Fragments
 * for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
 *   A (16 x 16, row-major)  reg0 = A[g][2t, 2t+1]     reg1 = A[g+8][2t, 2t+1]
 *                           reg2 = A[g][2t+8, 2t+9]   reg3 = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, "col-major") reg0 = B[2t, 2t+1][g]     reg1 = B[2t+8, 2t+9][g]
 *   C (16 x 8, fp32)        c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
 * ldmatrix gives lane L of each 8x8 matrix row L / 4, columns 2(L % 4) and
 * 2(L % 4) + 1 of it (the transposed element pair with .trans), the lower
 * column in the low half: A and B fragments straight from shared memory.
 *
 * Kernels of a family are one translation unit, so everything here is
 * inline, behind one include guard, and named kl__mma_*.
 */
#ifndef KLAUNCH_KERNELS_MLA_PREFILL_MLA_MMA_CUH
#define KLAUNCH_KERNELS_MLA_PREFILL_MLA_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "../common/kl_ptx.cuh"

static __device__ __forceinline__ uint32_t kl__mma_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* The instructions themselves are the wrappers of kernels/common/kl_ptx.cuh
 * (which the CPU emulator replaces); these names keep the kernels' calls. */

/* 16 bytes global -> shared without a register round trip; L1 is bypassed
 * (.cg), the data is used once from shared memory. */
static __device__ __forceinline__ void kl__mma_cp16(uint32_t dst, const void *src) { kl__cp_async_cg16(dst, src); }
static __device__ __forceinline__ void kl__mma_cp_commit() { kl__cp_async_commit(); }
/* Waits until at most N of this thread's committed groups are in flight. */
template <int N>
static __device__ __forceinline__ void kl__mma_cp_wait() {
    kl__cp_async_wait<N>();
}

static __device__ __forceinline__ void kl__mma_st_shared_v4(uint32_t addr, uint4 v) { kl__st_shared_v4(addr, v); }
static __device__ __forceinline__ void kl__mma_st_shared_u32(uint32_t addr, uint32_t v) { kl__st_shared_u32(addr, v); }
static __device__ __forceinline__ uint4 kl__mma_ld_shared_v4(uint32_t addr) { return kl__ld_shared_v4(addr); }
static __device__ __forceinline__ float kl__mma_ld_shared_f32(uint32_t addr) { return kl__ld_shared_f32(addr); }
static __device__ __forceinline__ void kl__mma_st_shared_f32(uint32_t addr, float v) { kl__st_shared_f32(addr, v); }

/* Four 8x8 bf16 matrices; lane L gives the address of row L % 8 of matrix L / 8. */
static __device__ __forceinline__ void kl__mma_ldsm_x4(uint32_t (&r)[4], uint32_t addr) { kl__ldmatrix_x4(r, addr); }
static __device__ __forceinline__ void kl__mma_ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    kl__ldmatrix_x4_trans(r, addr);
}

/* c += A * B for one m16n8k16 tile: bf16 inputs, fp32 accumulators. */
static __device__ __forceinline__ void kl__mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                          uint32_t b1) {
    kl__mma_m16n8k16_bf16(c, a, b0, b1);
}

/* Two floats as a bf16 pair (round to nearest even), `lo` in the low half:
 * the element at the lower address or index. */
static __device__ __forceinline__ uint32_t kl__mma_pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}
static __device__ __forceinline__ float kl__mma_bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float kl__mma_bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/* 2^x; 2^-inf = +0, which masked scores rely on. */
static __device__ __forceinline__ float kl__mma_exp2(float x) { return kl__ex2_approx_ftz(x); }

/* Barrier `id` (1..15; 0 is __syncthreads) for `threads` threads, a multiple
 * of 32: the warps that share data wait for each other only. */
static __device__ __forceinline__ void kl__mma_bar_sync(uint32_t id, uint32_t threads) { kl__bar_sync(id, threads); }

/* Bytes of dynamic shared memory this launch has. */
static __device__ __forceinline__ uint32_t kl__mma_dynamic_smem_size() { return kl__dynamic_smem_size(); }

/* Up to 8 bf16 from any 2-byte aligned address, zeros past `n`: the slow
 * path for rows that are not 16-byte aligned or end inside the chunk. */
static __device__ __forceinline__ uint4 kl__mma_load8_partial(const __nv_bfloat16 *src, uint32_t n) {
    const unsigned short *s = reinterpret_cast<const unsigned short *>(src);
    uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (uint32_t e = 0; e < 8u; ++e)
        if (e < n) w[e >> 1] |= (uint32_t)s[e] << (16u * (e & 1u));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

#endif /* KLAUNCH_KERNELS_MLA_PREFILL_MLA_MMA_CUH */
