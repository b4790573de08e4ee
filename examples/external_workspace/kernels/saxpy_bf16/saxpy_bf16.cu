#include "klaunch/saxpy_bf16.cuh"

/* saxpy_bf16: y = fma(a, x, y) over `rows` rows of n elements, row stride
 * `stride`; specs/saxpy_bf16.yaml says what the launcher checks.
 *
 * Grid (ceil_div(n, 256 * SAXPY_ITEMS), rows), block 256: a block covers
 * 256 * SAXPY_ITEMS consecutive elements of one row, element k of a thread
 * k * 256 apart, so each of a warp's loads is one contiguous run. */

extern "C" __global__ void __launch_bounds__(256)
saxpy_bf16(const __nv_bfloat16 *x, __nv_bfloat16 *y, float a, uint32_t n, uint32_t stride) {
    const uint64_t row = (uint64_t)blockIdx.y * stride;
    const uint64_t first = (uint64_t)blockIdx.x * (256u * SAXPY_ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < SAXPY_ITEMS; k++) {
        const uint64_t i = first + (uint64_t)k * 256u;
        if (i < n) {
            /* fmaf, not a * x + y left to contraction: the CPU reference
             * computes the same single rounding, so results are bit-exact. */
            const float v = fmaf(a, __bfloat162float(x[row + i]), __bfloat162float(y[row + i]));
            y[row + i] = __float2bfloat16_rn(v);
        }
    }
}
