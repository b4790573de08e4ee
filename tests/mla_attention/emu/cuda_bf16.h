/* Stand-in for CUDA's <cuda_bf16.h> when a kernel source is compiled as host
 * C++ by tests/mla_attention/mma_emulator.h: only the types the kernel
 * sources name. Arithmetic on them is not provided (the kernels convert
 * through the kl__mma_* helpers, which the emulator defines). */
#ifndef KLAUNCH_TESTS_MLA_ATTENTION_EMU_CUDA_BF16_H
#define KLAUNCH_TESTS_MLA_ATTENTION_EMU_CUDA_BF16_H

#include <stdint.h>

struct __nv_bfloat16 {
    uint16_t bits;
};
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
struct uint4 {
    uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }

#endif
