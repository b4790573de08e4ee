/* Reference: tests/rms_norm/rms_norm_emulated_test.cc (float64)
 * Tests:
 *   tests/rms_norm/rms_norm_emulated_test.cc (CPU emulator)
 * Run them:
 *   ./bazelw test //tests/rms_norm:rms_norm_emulated_test
 */
#include "klaunch/rms_norm.cuh"

/* rms_norm_bf16: y[r, i] = x[r, i] * w[i] / sqrt(mean(x[r, :]^2) + eps), one
 * block per row, w[i] = 1 when w is NULL (the spec's nullable: true); it
 * touches x and y's rows * n elements and w's n, the spec's extents.
 * Written as README.md's "Adding a kernel" says. */
extern "C" __global__ void __launch_bounds__(KL_THREADS_rms_norm_bf16) rms_norm_bf16(KL_PARAMS_rms_norm_bf16) {
    __shared__ float part[KL_THREADS_rms_norm_bf16];
    const __nv_bfloat16 *row = x + (uint64_t)blockIdx.x * n;
    float s = 0.f;
    for (uint32_t i = threadIdx.x; i < n; i += KL_THREADS_rms_norm_bf16) {
        const float v = __bfloat162float(row[i]);
        s += v * v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = KL_THREADS_rms_norm_bf16 / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    const float inv = rsqrtf(part[0] / n + eps);
    for (uint32_t i = threadIdx.x; i < n; i += KL_THREADS_rms_norm_bf16)
        y[(uint64_t)blockIdx.x * n + i] =
            __float2bfloat16_rn(__bfloat162float(row[i]) * inv * (w != nullptr ? __bfloat162float(w[i]) : 1.0f));
}
