/* Stand-in for CUDA's <cuda_fp8.h> in a kernel compiled by the CPU emulator
 * (tests/emu): the fp8 storage types and the conversion functions kernels
 * use, as the PTX cvt instructions they stand for define them
 * (tests/emu/fp.h): E4M3 to f16 exact, NaN (S.1111.111) to the canonical
 * f16 NaN; to E4M3 round to nearest even, __NV_SATFINITE clamps |x| > 448
 * to +-448 and keeps NaN, __NV_NOSAT gives NaN beyond 448. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_CUDA_FP8_H
#define KLAUNCH_TESTS_EMU_INCLUDE_CUDA_FP8_H

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "tests/emu/fp.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;

struct __nv_fp8_e4m3 {
    __nv_fp8_storage_t __x;
};
struct __nv_fp8_e5m2 {
    __nv_fp8_storage_t __x;
};
struct __attribute__((aligned(2))) __nv_fp8x2_e4m3 {
    __nv_fp8x2_storage_t __x;
};

inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t k) {
    return __half_raw{k == __NV_E4M3 ? emu::fp::e4m3_to_f16(x) : emu::fp::e5m2_to_f16(x)};
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t k) {
    return __half2_raw{__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(x & 0xffu), k).x,
                       __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(x >> 8), k).x};
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
    if (k == __NV_E4M3) return s == __NV_SATFINITE ? emu::fp::f32_to_e4m3_satfinite(x) : emu::fp::f32_to_e4m3_nosat(x);
    return s == __NV_SATFINITE ? emu::fp::f32_to_e5m2_satfinite(x) : emu::fp::f32_to_e5m2_nosat(x);
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
    return (__nv_fp8x2_storage_t)(__nv_cvt_float_to_fp8(x.x, s, k) | (__nv_cvt_float_to_fp8(x.y, s, k) << 8));
}

#endif
