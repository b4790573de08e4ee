/* Stand-in for CUDA's <cuda_bf16.h> in a kernel compiled by the CPU
 * emulator (tests/emu): __nv_bfloat16, __nv_bfloat162 and the conversions
 * and packed arithmetic kernels use, each rounding as the PTX instruction it
 * stands for (round to nearest even, once; NaN results canonical:
 * tests/emu/fp.h). A name missing here fails to build the emulated kernel;
 * add it with a test in tests/emu/emu_instructions_test.cc. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_CUDA_BF16_H
#define KLAUNCH_TESTS_EMU_INCLUDE_CUDA_BF16_H

#include "cuda_fp16.h"
#include "tests/emu/fp.h"
#include "vector_types.h"

struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
};
struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
    __nv_bfloat162(__nv_bfloat162_raw r) : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
    operator __nv_bfloat162_raw() const { return __nv_bfloat162_raw{x.__x, y.__x}; }
};

namespace kl_emu_bf16 {
inline __nv_bfloat16 mk(uint16_t b) { return __nv_bfloat16(__nv_bfloat16_raw{b}); }
inline uint16_t op2(__nv_bfloat16 a, __nv_bfloat16 b, int op) {
    using namespace emu::fp;
    const double x = decode(kBf16, a.__x), y = decode(kBf16, b.__x);
    const double r = op == 0 ? round_to_odd_sum(x, y) : op == 1 ? round_to_odd_sum(x, -y) : x * y;
    return (uint16_t)encode(kBf16, r, Overflow::kInfinity);
}
}  // namespace kl_emu_bf16

inline float __bfloat162float(__nv_bfloat16 h) { return emu::fp::bf16_to_f32(h.__x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return kl_emu_bf16::mk(emu::fp::f32_to_bf16(f)); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    return __nv_bfloat162(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2(__bfloat162float(h.x), __bfloat162float(h.y)); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162(lo, hi); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return kl_emu_bf16::mk(kl_emu_bf16::op2(a, b, 0)); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return kl_emu_bf16::mk(kl_emu_bf16::op2(a, b, 1)); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return kl_emu_bf16::mk(kl_emu_bf16::op2(a, b, 2)); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return kl_emu_bf16::mk(emu::fp::fma_rn(emu::fp::kBf16, a.__x, b.__x, c.__x));
}
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return kl_emu_bf16::mk(b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

#endif
