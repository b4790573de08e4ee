// kernel_prelude.h - the first include of every kernel translation unit the
// CPU emulator compiles (the unity file tests/emu/unity.py writes): it makes
// a CUDA kernel source host C++ whose CUDA names run on the emulator.
//
// - Every system header a kernel may include comes first, so that nothing
//   below changes them.
// - KL_EMULATOR and __CUDACC__ are defined; __CUDA_ARCH__ is KL_EMU_ARCH
//   (default 900: the sm_90 paths of `#if __CUDA_ARCH__` are the ones run,
//   and at 900 the sm_90a ones: __CUDA_ARCH_FEAT_SM90_ALL, __CUDA_ARCH_SPECIFIC__).
// - CUDA's qualifiers: __global__, __device__, __host__, __forceinline__
//   vanish; __shared__ variables become statics in the section
//   kl_emu_shared, which the emulator treats as the block's static shared
//   memory (poisoned at every block start, every access checked).
//   `extern __shared__` does not build ("conflicting specifiers"): declare
//   dynamic shared memory with KL_DYNAMIC_SHARED of kernels/common/kl_ptx.cuh.
// - threadIdx, blockIdx, blockDim, gridDim, warpSize; __syncthreads and its
//   reductions, __syncwarp, shuffles and votes, __ldg and the cache-hinted
//   loads and stores, atomics, bit and float intrinsics: each as CUDA
//   defines it, through intrinsics.h.
// - Raw inline PTX does not build: `asm`, `__asm__` and `__asm` expand to a
//   static_assert naming the rule. Kernels reach instructions through the
//   wrappers of kernels/common/kl_ptx.cuh, which the emulator implements
//   (kl_ptx_emu.h). A CUDA name not defined here fails to build as an
//   undeclared identifier: nothing runs with a guessed meaning.
#ifndef KLAUNCH_TESTS_EMU_KERNEL_PRELUDE_H
#define KLAUNCH_TESTS_EMU_KERNEL_PRELUDE_H

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "tests/emu/fp.h"
#include "tests/emu/intrinsics.h"

#define KL_EMULATOR 1
#define __CUDACC__ 1
#ifndef KL_EMU_ARCH
#define KL_EMU_ARCH 900
#endif
#define __CUDA_ARCH__ KL_EMU_ARCH
#if KL_EMU_ARCH == 900
/* At 900 the emulator runs the sm_90a image, the one an H100/H200 loads from
 * a fatbin that has it: the wgmma paths (kernels/common/kl_ptx_sm90.cuh,
 * tests/emu/sm90_*), and its metadata says cuda_arch 900a. */
#define __CUDA_ARCH_FEAT_SM90_ALL 1
#define __CUDA_ARCH_SPECIFIC__ 900
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
/* `extern __shared__ T x[];` cannot build here ("conflicting specifiers"):
 * use KL_DYNAMIC_SHARED (kernels/common/kl_ptx.cuh) for dynamic shared memory. */
#define __shared__ static __attribute__((section("kl_emu_shared"), used))
#define __constant__

#include "tests/emu/include/cuda_bf16.h"
#include "tests/emu/include/cuda_fp16.h"
#include "tests/emu/include/cuda_fp8.h"
#include "tests/emu/include/cuda_runtime.h"

// ---- built-in variables -------------------------------------------------------
#define threadIdx (::emu::cu::thread_idx())
#define blockIdx (::emu::cu::block_idx())
#define blockDim (::emu::cu::block_dim())
#define gridDim (::emu::cu::grid_dim())
#define warpSize 32

// ---- synchronisation ------------------------------------------------------------
inline void __syncthreads() { ::emu::cu::syncthreads(); }
inline int __syncthreads_count(int p) { return ::emu::cu::syncthreads_count(p); }
inline int __syncthreads_and(int p) { return ::emu::cu::syncthreads_and(p); }
inline int __syncthreads_or(int p) { return ::emu::cu::syncthreads_or(p); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::emu::cu::syncwarp(mask); }
inline void __threadfence() { ::emu::cu::fence(); }
inline void __threadfence_block() { ::emu::cu::fence(); }
inline void __threadfence_system() { ::emu::cu::fence(); }

// ---- warp shuffles and votes (4- and 8-byte values) ---------------------------
namespace kl_emu_prelude {
template <class T>
inline T shfl(::emu::cu::ShflMode m, unsigned mask, T v, int b, int width, const char *name) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4- or 8-byte values");
    uint32_t w[2] = {0u, 0u};
    memcpy(w, &v, sizeof(T));
    w[0] = ::emu::cu::shfl(m, mask, w[0], b, width, name);
    if (sizeof(T) == 8) w[1] = ::emu::cu::shfl(m, mask, w[1], b, width, name);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}
}  // namespace kl_emu_prelude
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return kl_emu_prelude::shfl(::emu::cu::kShflIdx, mask, v, src, width, "__shfl_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return kl_emu_prelude::shfl(::emu::cu::kShflUp, mask, v, (int)delta, width, "__shfl_up_sync");
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return kl_emu_prelude::shfl(::emu::cu::kShflDown, mask, v, (int)delta, width, "__shfl_down_sync");
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return kl_emu_prelude::shfl(::emu::cu::kShflBfly, mask, v, lane_mask, width, "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) { return ::emu::cu::ballot(mask, pred, "__ballot_sync"); }
inline int __any_sync(unsigned mask, int pred) { return ::emu::cu::ballot(mask, pred, "__any_sync") != 0u; }
inline int __all_sync(unsigned mask, int pred) { return ::emu::cu::ballot(mask, pred, "__all_sync") == mask; }

// ---- global loads and stores with cache hints ----------------------------------
// The access itself is the kernel's (checked by the instrumentation); the
// alignment rule of the vector instruction is checked here as well, since a
// 16-byte struct copy may reach the checks as an unsized access.
#define KL_EMU__LOAD(name, what)                                            \
    template <class T>                                                      \
    inline T name(const T *p) {                                             \
        ::emu::cu::check_align(p, alignof(T), sizeof(T), what);             \
        return *p;                                                          \
    }
KL_EMU__LOAD(__ldg, "ld.global.nc")
KL_EMU__LOAD(__ldca, "ld.global.ca")
KL_EMU__LOAD(__ldcg, "ld.global.cg")
KL_EMU__LOAD(__ldcs, "ld.global.cs")
KL_EMU__LOAD(__ldlu, "ld.global.lu")
KL_EMU__LOAD(__ldcv, "ld.global.cv")
#undef KL_EMU__LOAD
#define KL_EMU__STORE(name, what)                                           \
    template <class T>                                                      \
    inline void name(T *p, T v) {                                           \
        ::emu::cu::check_align(p, alignof(T), sizeof(T), what);             \
        *p = v;                                                             \
    }
KL_EMU__STORE(__stwb, "st.global.wb")
KL_EMU__STORE(__stcg, "st.global.cg")
KL_EMU__STORE(__stcs, "st.global.cs")
KL_EMU__STORE(__stwt, "st.global.wt")
#undef KL_EMU__STORE

inline size_t __cvta_generic_to_shared(const void *p) { return ::emu::cu::to_shared(p); }
inline void *__cvta_shared_to_generic(size_t a) { return ::emu::cu::from_shared(a); }

// ---- atomics (on shared or global memory; executed whole, one thread at a time) --
namespace kl_emu_prelude {
template <class T, class F>
inline T atomic_rmw(T *p, F f, const char *what) {
    T *q = static_cast<T *>(::emu::cu::atomic_target(p, sizeof(T), what));
    T old;
    ::emu::cu::atomic_copy(&old, q, sizeof(T));
    const T nv = f(old);
    ::emu::cu::atomic_copy(q, &nv, sizeof(T));
    return old;
}
}  // namespace kl_emu_prelude
#define KL_EMU__ATOMIC(name, T, expr)                                                              \
    inline T name(T *p, T v) {                                                                     \
        return kl_emu_prelude::atomic_rmw(p, [v](T o) -> T { return expr; }, #name);               \
    }
KL_EMU__ATOMIC(atomicAdd, int, (int)((unsigned)o + (unsigned)v))
KL_EMU__ATOMIC(atomicAdd, unsigned int, o + v)
KL_EMU__ATOMIC(atomicAdd, unsigned long long, o + v)
KL_EMU__ATOMIC(atomicAdd, float, o + v)
KL_EMU__ATOMIC(atomicSub, int, (int)((unsigned)o - (unsigned)v))
KL_EMU__ATOMIC(atomicSub, unsigned int, o - v)
KL_EMU__ATOMIC(atomicInc, unsigned int, o >= v ? 0u : o + 1u)
KL_EMU__ATOMIC(atomicExch, int, ((void)o, v))
KL_EMU__ATOMIC(atomicExch, unsigned int, ((void)o, v))
KL_EMU__ATOMIC(atomicExch, float, ((void)o, v))
KL_EMU__ATOMIC(atomicMin, int, o < v ? o : v)
KL_EMU__ATOMIC(atomicMin, unsigned int, o < v ? o : v)
KL_EMU__ATOMIC(atomicMax, int, o > v ? o : v)
KL_EMU__ATOMIC(atomicMax, unsigned int, o > v ? o : v)
KL_EMU__ATOMIC(atomicAnd, int, o &v)
KL_EMU__ATOMIC(atomicAnd, unsigned int, o &v)
KL_EMU__ATOMIC(atomicOr, int, o | v)
KL_EMU__ATOMIC(atomicOr, unsigned int, o | v)
KL_EMU__ATOMIC(atomicXor, int, o ^ v)
KL_EMU__ATOMIC(atomicXor, unsigned int, o ^ v)
#undef KL_EMU__ATOMIC
inline int atomicCAS(int *p, int cmp, int v) {
    return kl_emu_prelude::atomic_rmw(p, [cmp, v](int o) { return o == cmp ? v : o; }, "atomicCAS");
}
inline unsigned int atomicCAS(unsigned int *p, unsigned int cmp, unsigned int v) {
    return kl_emu_prelude::atomic_rmw(p, [cmp, v](unsigned int o) { return o == cmp ? v : o; }, "atomicCAS");
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v) {
    return kl_emu_prelude::atomic_rmw(p, [cmp, v](unsigned long long o) { return o == cmp ? v : o; }, "atomicCAS");
}

// ---- bit and float intrinsics -----------------------------------------------------
inline float __uint_as_float(unsigned int u) { return ::emu::fp::bits_f32(u); }
inline unsigned int __float_as_uint(float f) { return ::emu::fp::f32_bits(f); }
inline float __int_as_float(int i) { return ::emu::fp::bits_f32((unsigned)i); }
inline int __float_as_int(float f) { return (int)::emu::fp::f32_bits(f); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
// prmt.b32 as CUDA's __byte_perm: result byte n is byte s[4n+2:4n] of the
// eight bytes {y, x} (x bytes 0..3, y bytes 4..7).
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= (unsigned int)((v >> (8u * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return r;
}
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)((v << (s & 31u)) >> 32);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)(v >> (s & 31u));
}
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float rsqrtf(float x) { return (float)(1.0 / sqrt((double)x)); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }

// CUDA's min/max overloads (integer and float, mixed signedness -> unsigned).
#define KL_EMU__MINMAX(T)                                  \
    inline T min(T a, T b) { return a < b ? a : b; }       \
    inline T max(T a, T b) { return a > b ? a : b; }
KL_EMU__MINMAX(int)
KL_EMU__MINMAX(unsigned int)
KL_EMU__MINMAX(long long)
KL_EMU__MINMAX(unsigned long long)
KL_EMU__MINMAX(long)
KL_EMU__MINMAX(unsigned long)
KL_EMU__MINMAX(float)
KL_EMU__MINMAX(double)
#undef KL_EMU__MINMAX
inline unsigned int min(int a, unsigned int b) { return min((unsigned int)a, b); }
inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned int)b); }
inline unsigned int max(int a, unsigned int b) { return max((unsigned int)a, b); }
inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned int)b); }

// ---- raw inline PTX is refused ---------------------------------------------------
#define asm static_assert(false, "klaunch emulator: raw asm in a kernel cannot be emulated; call (or add) a wrapper in kernels/common/kl_ptx.cuh, see docs/EMULATOR.md")
#define __asm__ asm
#define __asm asm

#endif  // KLAUNCH_TESTS_EMU_KERNEL_PRELUDE_H
