/* kl_ptx.cuh - every PTX instruction klaunch's kernels issue by inline asm,
 * one small wrapper each. Kernels call these, never `asm` themselves: the
 * CPU emulator (tests/emu, docs/EMULATOR.md) replaces this header by its own
 * implementation of the same functions (tests/emu/kl_ptx_emu.h, selected by
 * KL_EMULATOR), so the kernels run there from their own source, and raw asm
 * in a kernel does not build there. A new instruction: add the wrapper here
 * and its emulation, with a test from the PTX ISA's definition, in
 * tests/emu (emu_instructions_test.cc).
 *
 * Shared-memory operands are 32-bit shared-window addresses
 * (__cvta_generic_to_shared). Everything is static inline behind one include
 * guard: a family is one translation unit. Include it relative to the
 * kernel: #include "../common/kl_ptx.cuh".
 */
#ifndef KLAUNCH_KERNELS_COMMON_KL_PTX_CUH
#define KLAUNCH_KERNELS_COMMON_KL_PTX_CUH

#ifdef KL_EMULATOR
#include "tests/emu/kl_ptx_emu.h"
#else

#include <stdint.h>

/* Dynamic shared memory of the launch, as `unsigned char NAME[]` aligned to
 * ALIGN bytes (the emulator cannot take `extern __shared__`). */
#define KL_DYNAMIC_SHARED(NAME, ALIGN) extern __shared__ __align__(ALIGN) unsigned char NAME[]

/* ---- cp.async (sm_80): global -> shared without a register round trip ---- */

/* 16 bytes, L1 bypassed (.cg). dst and src 16-byte aligned. */
static __device__ __forceinline__ void kl__cp_async_cg16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
/* 16 bytes of which the first src_bytes (0..16) are read, the rest zero-filled. */
static __device__ __forceinline__ void kl__cp_async_cg16_zfill(uint32_t dst, const void *src, uint32_t src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
/* BYTES = 4, 8 or 16 through L1 (.ca); both addresses BYTES-aligned. */
template <int BYTES>
static __device__ __forceinline__ void kl__cp_async_ca(uint32_t dst, const void *src) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async.ca copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src), "n"(BYTES) : "memory");
}
static __device__ __forceinline__ void kl__cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Waits until at most N of this thread's committed groups are in flight. */
template <int N>
static __device__ __forceinline__ void kl__cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- shared-window loads and stores ---- */

static __device__ __forceinline__ void kl__st_shared_v4(uint32_t addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}
static __device__ __forceinline__ void kl__st_shared_u32(uint32_t addr, uint32_t v) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
static __device__ __forceinline__ void kl__st_shared_f32(uint32_t addr, float v) {
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
static __device__ __forceinline__ uint4 kl__ld_shared_v4(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
static __device__ __forceinline__ uint32_t kl__ld_shared_u32(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
static __device__ __forceinline__ float kl__ld_shared_f32(uint32_t addr) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
    return v;
}

/* ---- ldmatrix (sm_75): 8x8 b16 matrices; lane L gives row L % 8 of matrix L / 8 ---- */

static __device__ __forceinline__ void kl__ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
static __device__ __forceinline__ void kl__ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
static __device__ __forceinline__ void kl__ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
static __device__ __forceinline__ void kl__ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}

/* ---- movmatrix (sm_75): an 8x8 b16 matrix in registers, transposed ---- */

/* Lane L holds row L / 4, columns 2 (L % 4) and 2 (L % 4) + 1 (the first in
 * the low half) of M; returns the same elements of M^T. */
static __device__ __forceinline__ uint32_t kl__movmatrix_trans(uint32_t a) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}

/* ---- mma.sync m16n8k16 (sm_80), fp32 accumulators: c += A * B ---- */

static __device__ __forceinline__ void kl__mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void kl__mma_m16n8k16_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                            uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- arithmetic and conversions ---- */

/* 2^x, subnormals flushed; 2^-inf = +0, which masked softmax scores rely on. */
static __device__ __forceinline__ float kl__ex2_approx_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
/* cvt.rn.f16x2.e4m3x2 (sm_89): two E4M3 (low byte -> low half) as f16x2, exact. */
static __device__ __forceinline__ uint32_t kl__cvt_f16x2_e4m3x2(uint16_t a) {
    uint32_t d;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(a));
    return d;
}
/* The same of bits 16-31 of a (byte 2 -> low half): the 32-bit register
 * split in place (mov.b32 {lo, hi}), so ptxas reads its upper half as the
 * operand (F2FP ... R.H1) where a shifted 16-bit value costs a shift. */
static __device__ __forceinline__ uint32_t kl__cvt_f16x2_e4m3x2_hi(uint32_t a) {
    uint32_t d;
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(d) : "r"(a));
    return d;
}
/* cvt.rn.satfinite.e4m3x2.f32 (sm_89): hi to the upper byte, lo to the lower;
 * |x| > 448 gives +-448, NaN stays NaN. */
static __device__ __forceinline__ uint16_t kl__cvt_e4m3x2_f32(float hi, float lo) {
    uint16_t d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}

/* ---- barriers, launch facts, programmatic dependent launch ---- */

/* Barrier `id` (1..15; 0 is __syncthreads) for `threads` threads, a multiple of 32. */
static __device__ __forceinline__ void kl__bar_sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/* Bytes of dynamic shared memory this launch has. */
static __device__ __forceinline__ uint32_t kl__dynamic_smem_size() {
    uint32_t v;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(v));
    return v;
}
/* *p += v at GPU scope with acquire-release semantics (one instruction where
 * __threadfence + atomicAdd + __threadfence are two SC fences and a relaxed
 * add): releases what this thread's program and the barriers before it
 * ordered ahead of it (cumulativity, PTX ISA memory model), acquires what
 * the releases it reads from published. Returns the old value. */
static __device__ __forceinline__ uint32_t kl__atom_add_acq_rel_gpu(uint32_t *p, uint32_t v) {
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
/* The GPU's global timer, nanoseconds (%globaltimer): for waits that give
 * up after a time, and the bench-only trace builds' stamps. */
static __device__ __forceinline__ uint64_t kl__globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}
/* griddepcontrol (sm_90): a no-op below sm_90 and without a dependent launch. */
static __device__ __forceinline__ void kl__griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void kl__griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#endif /* KL_EMULATOR */
#endif /* KLAUNCH_KERNELS_COMMON_KL_PTX_CUH */
