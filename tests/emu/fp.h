// fp.h - the emulator's number formats: bf16, f16, fp8 E4M3 and E5M2 to and
// from float, as the PTX ISA's cvt defines them (round to nearest even;
// .satfinite: NaN stays NaN, |x| > MAX_NORM gives the sign-preserved
// MAX_NORM; canonical NaN results). Plain host C++, no emulator state: the
// CUDA stand-in headers (include/cuda_*.h), the PTX wrappers' emulation and
// the tests use the same functions.
//
// Narrowing picks the nearest code by value, ties to the even code: for
// these sign-magnitude formats consecutive codes are consecutive values and
// the even code is the one with an even mantissa, which is what round to
// nearest even means. Codes are searched, not computed from bit fields, so
// this file shares no arithmetic trick with a kernel that might share its
// mistake.
#ifndef KLAUNCH_TESTS_EMU_FP_H
#define KLAUNCH_TESTS_EMU_FP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace emu {
namespace fp {

inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// A binary format with `ebits` exponent and `mbits` mantissa bits, bias
// 2^(ebits-1) - 1. IEEE-like (inf at the all-ones exponent) unless `fn`
// (E4M3: no infinity, only S.1111.111 is NaN, MAX_NORM 448).
struct Format {
    int ebits, mbits;
    bool fn;
};
constexpr Format kBf16{8, 7, false};
constexpr Format kF16{5, 10, false};
constexpr Format kE4M3{4, 3, true};
constexpr Format kE5M2{5, 2, false};

// Value of a code (sign bit at ebits + mbits), NaN for NaN codes.
inline double decode(Format f, uint32_t code) {
    const uint32_t mmask = (1u << f.mbits) - 1u, emask = (1u << f.ebits) - 1u;
    const bool neg = (code >> (f.ebits + f.mbits)) & 1u;
    const uint32_t e = (code >> f.mbits) & emask, m = code & mmask;
    const int bias = (1 << (f.ebits - 1)) - 1;
    double v;
    if (f.fn) {
        if (e == emask && m == mmask) return NAN;
    } else if (e == emask) {
        return m ? NAN : (neg ? -INFINITY : INFINITY);
    }
    if (e == 0)
        v = ldexp((double)m, 1 - bias - f.mbits);
    else
        v = ldexp((double)(m | (1u << f.mbits)), (int)e - bias - f.mbits);
    return neg ? -v : v;
}

// Largest finite positive code.
inline uint32_t max_code(Format f) {
    const uint32_t emask = (1u << f.ebits) - 1u, mmask = (1u << f.mbits) - 1u;
    return f.fn ? ((emask << f.mbits) | (mmask - 1u)) : (((emask - 1u) << f.mbits) | mmask);
}
inline uint32_t canonical_nan(Format f) { return (1u << (f.ebits + f.mbits)) - 1u; }  // 0 1..1 1..1

enum class Overflow { kInfinity, kSatFinite, kNaN };

// Nearest code to x (round to nearest, ties to even). Overflow: kInfinity
// (IEEE: |x| >= MAX + ulp/2 rounds to inf), kSatFinite (|x| > MAX gives
// +-MAX, NaN stays NaN), kNaN (E4M3 without saturation: beyond MAX is NaN).
inline uint32_t encode(Format f, double x, Overflow ov) {
    const uint32_t sign = 1u << (f.ebits + f.mbits);
    if (isnan(x)) return canonical_nan(f);
    const uint32_t s = signbit(x) ? sign : 0u;
    const double a = fabs(x);
    const uint32_t top = max_code(f);
    const double maxv = decode(f, top);
    if (ov == Overflow::kSatFinite && a > maxv) return s | top;
    if (isinf(a)) return ov == Overflow::kInfinity ? (s | (top + 1u)) : canonical_nan(f) | s;
    // Binary search for the largest code with value <= a.
    uint32_t lo = 0, hi = top;
    if (a >= maxv) {
        lo = top;
    } else {
        while (lo < hi) {
            const uint32_t mid = (lo + hi + 1u) / 2u;
            if (decode(f, mid) <= a)
                lo = mid;
            else
                hi = mid - 1u;
        }
    }
    const double below = decode(f, lo);
    if (below == a) return s | lo;
    // The next code up: lo + 1, or past MAX the overflow value.
    double above;
    if (lo < top) {
        above = decode(f, lo + 1u);
    } else {
        // One ulp above MAX: the value an unbounded exponent would give.
        above = maxv + (maxv - decode(f, top - 1u));  // 480 for E4M3, 65536 for f16
    }
    uint32_t pick;
    if (a - below < above - a)
        pick = lo;
    else if (a - below > above - a)
        pick = lo + 1u;
    else
        pick = (lo & 1u) ? lo + 1u : lo;
    if (pick > top) {
        if (ov == Overflow::kInfinity) return s | (top + 1u);
        if (ov == Overflow::kSatFinite) return s | top;
        return s | canonical_nan(f);
    }
    return s | pick;
}

// ---- the conversions the kernels and tests name ---------------------------

inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }
inline uint16_t f32_to_bf16(float x) { return (uint16_t)encode(kBf16, (double)x, Overflow::kInfinity); }
inline float f16_to_f32(uint16_t h) { return (float)decode(kF16, h); }
inline uint16_t f32_to_f16(float x) { return (uint16_t)encode(kF16, (double)x, Overflow::kInfinity); }
// E4M3 -> f16 is exact (cvt.rn.f16x2.e4m3x2); NaN codes give the f16 canonical NaN.
inline uint16_t e4m3_to_f16(uint8_t c) {
    const double v = decode(kE4M3, c);
    return isnan(v) ? (uint16_t)canonical_nan(kF16) : (uint16_t)encode(kF16, v, Overflow::kInfinity);
}
inline float e4m3_to_f32(uint8_t c) { return (float)decode(kE4M3, c); }
inline uint8_t f32_to_e4m3_satfinite(float x) { return (uint8_t)encode(kE4M3, (double)x, Overflow::kSatFinite); }
inline uint8_t f32_to_e4m3_nosat(float x) { return (uint8_t)encode(kE4M3, (double)x, Overflow::kNaN); }
inline uint16_t e5m2_to_f16(uint8_t c) {
    const double v = decode(kE5M2, c);
    return isnan(v) ? (uint16_t)canonical_nan(kF16) : (uint16_t)encode(kF16, v, Overflow::kInfinity);
}
inline uint8_t f32_to_e5m2_satfinite(float x) { return (uint8_t)encode(kE5M2, (double)x, Overflow::kSatFinite); }
inline uint8_t f32_to_e5m2_nosat(float x) { return (uint8_t)encode(kE5M2, (double)x, Overflow::kInfinity); }

// a * b + c rounded once into format f (packed fma.rn.{f16,bf16}x2): the
// product of two values of <= 11-bit significands is exact in double; the
// sum is formed rounding toward zero with a sticky bit (round to odd), which
// keeps the later rounding to f exact.
inline double round_to_odd_sum(double p, double c) {
    const double s = p + c;
    if (isnan(s) || isinf(s)) return s;
    // Error of the sum (TwoSum): s + err == p + c exactly.
    const double bb = s - p;
    const double err = (p - (s - bb)) + (c - bb);
    if (err == 0.0) return s;
    // Truncate toward zero, then make the last bit odd.
    double t = s;
    if ((err > 0) != (s > 0)) t = nextafter(s, 0.0);
    uint64_t u;
    memcpy(&u, &t, 8);
    u |= 1u;
    memcpy(&t, &u, 8);
    return t;
}
inline uint16_t fma_rn(Format f, uint16_t a, uint16_t b, uint16_t c) {
    const double p = decode(f, a) * decode(f, b);
    return (uint16_t)encode(f, round_to_odd_sum(p, decode(f, c)), Overflow::kInfinity);
}

}  // namespace fp
}  // namespace emu

#endif  // KLAUNCH_TESTS_EMU_FP_H
