/* Reference: tests/mla_prefill/mla_reference.h (grouped_gemm, float64)
 * Tests:
 *   tests/mla_prefill/mla_compute_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_attention_test.cc (GPU)
 *   tests/mla_prefill/mla_prefill_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_compute_emulated_test \
 *     //tests/mla_prefill:mla_attention_test \
 *     //tests/mla_prefill:mla_prefill_launch_test
 */
#include "klaunch/mla_prefill.cuh"

/* grouped_gemm_mla: g independent GEMMs in one launch (kernel contract, kernel 7).
 *
 *   C[i, gi*n_g + j] = sum_k A[i*a_stride + gi*k_g + k] * B[(gi*n_g + j)*k_g + k]
 *
 * Geometry (the seed's): grid (m * g, ceil(n_g / 4)), block 256, 4 outputs
 * per block. blockIdx.x = gi * m + i, so that consecutively scheduled blocks
 * share a group and a y tile and read the same 4 rows of B from cache.
 * The 256 threads split k; each loads a piece of A's row once and uses it
 * for the 4 rows of B. 16-byte loads when every row is 16-byte aligned,
 * element loads otherwise. fp32 accumulation, one rounding to bf16.
 */

#include <cuda_bf16.h>
#include <stdint.h>

#define GROUPED_GEMM_MLA_N_PER_BLOCK 4 /* the seed's grid y is ceil(n_g / 4) */

__device__ __forceinline__ float grouped_gemm_mla__bf16(unsigned short h) {
    return __uint_as_float((uint32_t)h << 16);
}

/* Dot product of 8 bf16 pairs packed in two uint4. */
__device__ __forceinline__ float grouped_gemm_mla__dot8(uint4 a, uint4 b, float acc) {
    const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        acc = fmaf(__uint_as_float(aw[e] << 16), __uint_as_float(bw[e] << 16), acc);
        acc = fmaf(__uint_as_float(aw[e] & 0xffff0000u), __uint_as_float(bw[e] & 0xffff0000u), acc);
    }
    return acc;
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_grouped_gemm_mla)
grouped_gemm_mla(KL_PARAMS_grouped_gemm_mla) {
    constexpr int NB = GROUPED_GEMM_MLA_N_PER_BLOCK;
    __shared__ float s_part[8][NB];

    if (m == 0u) return;
    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t i = blockIdx.x % m, gi = blockIdx.x / m;
    const uint32_t n0 = blockIdx.y * (uint32_t)NB;
    if (gi >= g || n0 >= n_g) return; /* block-uniform */
    const uint32_t nout = min((uint32_t)NB, n_g - n0);

    const unsigned short *arow =
        reinterpret_cast<const unsigned short *>(a) + (size_t)i * a_stride + (size_t)gi * k_g;
    const unsigned short *brow =
        reinterpret_cast<const unsigned short *>(b) + ((size_t)gi * n_g + n0) * k_g; /* row j at j*k_g */
    /* B rows are k_g apart: with k_g % 8 == 0 the first row's alignment is every row's. */
    const bool vec = (k_g & 7u) == 0u && (((uintptr_t)arow | (uintptr_t)brow) & 15u) == 0u;

    float acc[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[j] = 0.0f;

    if (vec) {
        const uint4 *a4 = reinterpret_cast<const uint4 *>(arow);
        const uint4 *b4 = reinterpret_cast<const uint4 *>(brow);
        const uint32_t chunks = k_g / 8u, bstride = k_g / 8u;
        for (uint32_t ch = tid; ch < chunks; ch += 256u) {
            const uint4 av = __ldg(a4 + ch);
#pragma unroll
            for (int j = 0; j < NB; ++j)
                if ((uint32_t)j < nout) acc[j] = grouped_gemm_mla__dot8(av, __ldg(b4 + (size_t)j * bstride + ch), acc[j]);
        }
    } else {
        for (uint32_t kk = tid; kk < k_g; kk += 256u) {
            const float av = grouped_gemm_mla__bf16(arow[kk]);
#pragma unroll
            for (int j = 0; j < NB; ++j)
                if ((uint32_t)j < nout) acc[j] = fmaf(av, grouped_gemm_mla__bf16(brow[(size_t)j * k_g + kk]), acc[j]);
        }
    }

    /* Warp sums: 2 halving steps leave output (lane % 4) in lane, 3 more
     * steps add the 8 lane groups: 5 shuffles for the 4 sums. */
    {
        const bool up2 = (lane & 2u) != 0u;
        float w0 = (up2 ? acc[2] : acc[0]) + __shfl_xor_sync(0xffffffffu, up2 ? acc[0] : acc[2], 2);
        float w1 = (up2 ? acc[3] : acc[1]) + __shfl_xor_sync(0xffffffffu, up2 ? acc[1] : acc[3], 2);
        const bool up1 = (lane & 1u) != 0u;
        float r = (up1 ? w1 : w0) + __shfl_xor_sync(0xffffffffu, up1 ? w0 : w1, 1);
        r += __shfl_xor_sync(0xffffffffu, r, 4);
        r += __shfl_xor_sync(0xffffffffu, r, 8);
        r += __shfl_xor_sync(0xffffffffu, r, 16);
        if (lane < (uint32_t)NB) s_part[warp][lane] = r; /* lane j holds output j */
    }
    __syncthreads();
    if (tid < nout) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < 8; ++w) sum += s_part[w][tid];
        c[(size_t)i * c_stride + (size_t)gi * n_g + n0 + tid] = __float2bfloat16_rn(sum);
    }
}
