#include "klaunch/row_scale.cuh"

/* row_scale_f32: y[r*stride + i] = scale[r] * x[r*stride + i] for i < n;
 * grid (ceil_div(n, 256), rows), block 256 (row_scale.yaml). Built with
 *   nvcc -fatbin -DKL_VARIANT_plain -I build/include row_scale.cu
 * (the Makefile), which makes the generated header define the variant and
 * the module metadata that kl_module_load reads. */

extern "C" __global__ void __launch_bounds__(256)
row_scale_f32(const float *x, float *y, const float *scale, uint32_t n, uint32_t stride) {
    const uint64_t i = (uint64_t)blockIdx.x * 256u + threadIdx.x;
    if (i >= n) return;
    const uint64_t e = (uint64_t)blockIdx.y * stride + i;
    y[e] = scale[blockIdx.y] * x[e];
}
