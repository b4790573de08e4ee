/* Stand-in for CUDA's <cuda_fp16.h> in a kernel compiled by the CPU
 * emulator (tests/emu): __half, __half2 and the conversions and packed
 * arithmetic kernels use, each rounding as the PTX instruction it stands for
 * (round to nearest even, results rounded once: tests/emu/fp.h). A name
 * missing here fails to build the emulated kernel; add it with a test in
 * tests/emu/emu_instructions_test.cc. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_CUDA_FP16_H
#define KLAUNCH_TESTS_EMU_INCLUDE_CUDA_FP16_H

#include "tests/emu/fp.h"
#include "vector_types.h"

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};
struct __attribute__((aligned(2))) __half {
    unsigned short __x;
    __half() = default;
    constexpr __half(__half_raw r) : __x(r.x) {}
    operator __half_raw() const { return __half_raw{__x}; }
};
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
    __half2() = default;
    __half2(__half a, __half b) : x(a), y(b) {}
    __half2(__half2_raw r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

namespace kl_emu_fp16 {
inline __half mk(uint16_t b) { return __half(__half_raw{b}); }
inline uint16_t bits(__half h) { return h.__x; }
inline uint16_t op2(__half a, __half b, int op) {
    using namespace emu::fp;
    const double x = decode(kF16, bits(a)), y = decode(kF16, bits(b));
    const double r = op == 0 ? round_to_odd_sum(x, y) : op == 1 ? round_to_odd_sum(x, -y) : x * y;
    return (uint16_t)encode(kF16, r, Overflow::kInfinity);
}
}  // namespace kl_emu_fp16

inline float __half2float(__half h) { return emu::fp::f16_to_f32(h.__x); }
inline __half __float2half_rn(float f) { return kl_emu_fp16::mk(emu::fp::f32_to_f16(f)); }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float2 __half22float2(__half2 h) { return make_float2(__half2float(h.x), __half2float(h.y)); }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2(__float2half_rn(lo), __float2half_rn(hi)); }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline __half2 __halves2half2(__half lo, __half hi) { return __half2(lo, hi); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
inline __half __hadd(__half a, __half b) { return kl_emu_fp16::mk(kl_emu_fp16::op2(a, b, 0)); }
inline __half __hsub(__half a, __half b) { return kl_emu_fp16::mk(kl_emu_fp16::op2(a, b, 1)); }
inline __half __hmul(__half a, __half b) { return kl_emu_fp16::mk(kl_emu_fp16::op2(a, b, 2)); }
inline __half __hfma(__half a, __half b, __half c) {
    return kl_emu_fp16::mk(emu::fp::fma_rn(emu::fp::kF16, a.__x, b.__x, c.__x));
}
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
inline __half __ushort_as_half(unsigned short b) { return kl_emu_fp16::mk(b); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }

#endif
