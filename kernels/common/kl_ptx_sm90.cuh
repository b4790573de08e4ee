/* kl_ptx_sm90.cuh - the sm_90a (Hopper) instructions of klaunch's kernels,
 * one wrapper each, as kernels/common/kl_ptx.cuh is for sm_80's: under the
 * CPU emulator (KL_EMULATOR) they are tests/emu/sm90_ptx_emu.h's emulation,
 * tested there against the PTX ISA (tests/emu/sm90_wgmma_test.cc,
 * sm90_mbarrier_test.cc, sm90_tma_test.cc). Besides wgmma (below): mbarrier
 * with transaction bytes, setmaxnreg, elect.sync, and the bulk copy engine
 * (cp.async.bulk{,.tensor} loads on an mbarrier, stores in bulk
 * async-groups, prefetch.tensormap), each where it is defined.
 *
 * wgmma.mma_async bf16 x bf16 -> fp32, both operands from shared memory
 * (descriptors), in the shapes the kernels use: m64n16k16, m64n32k16, m64n64k16,
 * m64n128k16 and m64n256k16, B K-major (imm-trans-b 0) or N-major (1), A
 * K-major or, in m64n16k16, M-major (kl__wgmma_bf16_ss_ta); and the RS form
 * (A from registers, kl__wgmma_bf16_rs) in m64n128k16 and m64n256k16 with B
 * N-major. Compiled by nvcc
 * only for the sm_90a target (`#if defined(__CUDA_ARCH_FEAT_SM90_ALL)`
 * around their use; launchers with `arch: sm_90a`).
 *
 * Shared-memory operands (PTX ISA, "Shared Memory Matrix Layout" and
 * "Matrix Descriptor Format") are all in the 128-byte swizzle layout here:
 * a tile is slabs of 64 bf16 (128 bytes) of the contiguous dimension; in a
 * slab, row r is the 128 bytes at r * 128 and its 16-byte chunk c sits at
 * chunk c ^ (r % 8). Slabs start at 1024-byte boundaries (the pattern
 * repeats every 8 rows), so the descriptors' base offset is 0. In the
 * ISA's canonical forms, with T = 8 bf16 per 16 bytes:
 *   K-major  ((8,m),(T,2k)):((8T,SBO),(1,T)): SBO = 1024 (the next 8 rows),
 *            LBO unused (1). A k16 step inside a slab is +32 bytes of the
 *            start address; the hardware applies the XOR to the address.
 *   MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): LBO = the stride between
 *            64-element slabs along M/N, SBO = 1024 (the next 8 rows of K).
 * Descriptor bits: 13-0 start address >> 4, 29-16 LBO >> 4, 45-32 SBO >> 4,
 * 51-49 base offset (0), 63-62 swizzle (1 = 128-byte).
 *
 * Accumulator fragment of m64nNk16 (f32): thread t of the warpgroup, warp
 * w = t / 32, g = (t % 32) / 4, q = t % 4; d[4i + 0], d[4i + 1] are row
 * 16w + g, columns 8i + 2q and 8i + 2q + 1; d[4i + 2], d[4i + 3] the same
 * columns of row 16w + g + 8 (i = 0 .. N/8 - 1).
 *
 * Ordering: shared memory written by ordinary stores or cp.async is read by
 * wgmma through the async proxy, so each writing thread runs
 * fence.proxy.async.shared::cta after its writes landed and before the
 * barrier that releases them; wgmma.fence before the first wgmma that
 * touches accumulators written by ordinary code; commit_group and
 * wait_group before the accumulators are read or written again.
 */
#ifndef KLAUNCH_KERNELS_COMMON_KL_PTX_SM90_CUH
#define KLAUNCH_KERNELS_COMMON_KL_PTX_SM90_CUH

#include <stdint.h>

/* A 128-byte-swizzle matrix descriptor for a shared-memory operand at byte
 * address `addr` (16-byte aligned; its slab 1024-byte aligned). Plain
 * arithmetic: the same under the emulator. */
static __device__ __forceinline__ uint64_t kl__wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)((lbo & 0x3ffffu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3ffffu) >> 4) << 32) | ((uint64_t)1 << 62);
}

#ifdef KL_EMULATOR
#include "tests/emu/sm90_ptx_emu.h"
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)

static __device__ __forceinline__ void kl__wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kl__wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* Waits until at most N of the warpgroup's committed wgmma groups are pending. */
template <int N>
static __device__ __forceinline__ void kl__wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* This thread's generic-proxy shared-memory writes (st.shared, landed
 * cp.async) become visible to the async proxy (wgmma) after the next barrier. */
static __device__ __forceinline__ void kl__fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Ties accumulator registers at this point (no code moves their reads or
 * writes across it): after a wait_group, before code that reads them. */
template <int N>
static __device__ __forceinline__ void kl__wgmma_fence_operand(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/* The same for the registers of an RS product's A operand: kept (not
 * reused by other values) until this point, e.g. after the wait_group that
 * completes the product reading them. */
template <int N>
static __device__ __forceinline__ void kl__wgmma_fence_operand(uint32_t (&a)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

/* d = A B + (accumulate ? d : 0), m64nNk16, A and B from shared memory. */
template <int N, int TRANS_B>
static __device__ __forceinline__ void kl__wgmma_bf16_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                                          uint32_t accumulate);

template <>
__device__ __forceinline__ void kl__wgmma_bf16_ss<16, 0>(float (&d)[8], uint64_t desc_a, uint64_t desc_b,
                                                         uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, "
        "0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

/* d = A B + (accumulate ? d : 0) with A M-major (imm-trans-a 1: the layout
 * of an N-major B, M for N; an A tile transposed in shared memory), B as
 * TRANS_B says. */
template <int N, int TRANS_B>
static __device__ __forceinline__ void kl__wgmma_bf16_ss_ta(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                                             uint32_t accumulate);

/* m64n16k16, A M-major, B K-major: 8 accumulators. */
template <>
__device__ __forceinline__ void kl__wgmma_bf16_ss_ta<16, 0>(float (&d)[8], uint64_t desc_a, uint64_t desc_b,
                                                            uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 1, "
        "0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void kl__wgmma_bf16_ss<32, 0>(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                                         uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void kl__wgmma_bf16_ss<64, 0>(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                         uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#define KL__WGMMA_ACC64(d, o)                                                                                     \
    "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]),            \
        "+f"(d[o + 6]), "+f"(d[o + 7]), "+f"(d[o + 8]), "+f"(d[o + 9]), "+f"(d[o + 10]), "+f"(d[o + 11]),     \
        "+f"(d[o + 12]), "+f"(d[o + 13]), "+f"(d[o + 14]), "+f"(d[o + 15]), "+f"(d[o + 16]), "+f"(d[o + 17]), \
        "+f"(d[o + 18]), "+f"(d[o + 19]), "+f"(d[o + 20]), "+f"(d[o + 21]), "+f"(d[o + 22]), "+f"(d[o + 23]), \
        "+f"(d[o + 24]), "+f"(d[o + 25]), "+f"(d[o + 26]), "+f"(d[o + 27]), "+f"(d[o + 28]), "+f"(d[o + 29]), \
        "+f"(d[o + 30]), "+f"(d[o + 31]), "+f"(d[o + 32]), "+f"(d[o + 33]), "+f"(d[o + 34]), "+f"(d[o + 35]), \
        "+f"(d[o + 36]), "+f"(d[o + 37]), "+f"(d[o + 38]), "+f"(d[o + 39]), "+f"(d[o + 40]), "+f"(d[o + 41]), \
        "+f"(d[o + 42]), "+f"(d[o + 43]), "+f"(d[o + 44]), "+f"(d[o + 45]), "+f"(d[o + 46]), "+f"(d[o + 47]), \
        "+f"(d[o + 48]), "+f"(d[o + 49]), "+f"(d[o + 50]), "+f"(d[o + 51]), "+f"(d[o + 52]), "+f"(d[o + 53]), \
        "+f"(d[o + 54]), "+f"(d[o + 55]), "+f"(d[o + 56]), "+f"(d[o + 57]), "+f"(d[o + 58]), "+f"(d[o + 59]), \
        "+f"(d[o + 60]), "+f"(d[o + 61]), "+f"(d[o + 62]), "+f"(d[o + 63])
/* m64n128k16: 64 accumulators; imm-trans-b as TRANS_B. */
#define KL__WGMMA_N128(TB)                                                                                          \
    template <>                                                                                                      \
    __device__ __forceinline__ void kl__wgmma_bf16_ss<128, TB>(float (&d)[64], uint64_t desc_a, uint64_t desc_b,   \
                                                               uint32_t accumulate) {                               \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                    \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"                                       \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
                     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "    \
                     "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "    \
                     "%56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, " #TB ";\n}\n"                  \
                     : KL__WGMMA_ACC64(d, 0)                                                                         \
                     : "l"(desc_a), "l"(desc_b), "r"(accumulate));                                                   \
    }
KL__WGMMA_N128(0)
KL__WGMMA_N128(1)
#undef KL__WGMMA_N128

/* The 128 accumulator operands of an m64n256 product, %0 .. %127. */
#define KL__WGMMA_D128                                                                                               \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, " \
    "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, " \
    "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, " \
    "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

/* m64n256k16, B N-major: 128 accumulators. */
template <>
__device__ __forceinline__ void kl__wgmma_bf16_ss<256, 1>(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                          uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" KL__WGMMA_D128 "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
        : KL__WGMMA_ACC64(d, 0), KL__WGMMA_ACC64(d, 64)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

/* d = A B + (accumulate ? d : 0), m64nNk16, A from registers (the RS form:
 * no A descriptor and no imm-trans-a; A is K-major in registers), B from
 * shared memory. `a` is this thread's fragment of the 64 x 16 A tile, two
 * bf16 per register (the lower-numbered element in the low 16 bits); the
 * ISA's "Register Fragments: matrix A" figure for .bf16: thread t of the
 * warpgroup, w = t / 32, g = (t % 32) / 4, q = t % 4:
 *   a[0] = (row 16w + g,     k 2q, 2q + 1)   a[1] = (row 16w + g + 8, k 2q, 2q + 1)
 *   a[2] = (row 16w + g,     k 2q + 8, + 9)  a[3] = (row 16w + g + 8, k 2q + 8, + 9)
 * which is the accumulator fragment of an m64n16 product (d[0..7] above)
 * packed in pairs: an S accumulator converts to the P operand in place,
 * columns 16k .. 16k + 15 of S being k step k's a[] from d[8k .. 8k + 7].
 * The registers must hold their values until a wait_group completes the
 * product (the instruction reads them asynchronously). */
template <int N, int TRANS_B>
static __device__ __forceinline__ void kl__wgmma_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                                          uint32_t accumulate);

/* m64n256k16, A from registers, B N-major: 128 accumulators. */
template <>
__device__ __forceinline__ void kl__wgmma_bf16_rs<256, 1>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b,
                                                          uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" KL__WGMMA_D128 "}, {%128, %129, %130, %131}, %132, p, "
        "1, 1, 1;\n}\n"
        : KL__WGMMA_ACC64(d, 0), KL__WGMMA_ACC64(d, 64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}
/* m64n128k16, A from registers, B N-major: 64 accumulators. */
template <>
__device__ __forceinline__ void kl__wgmma_bf16_rs<128, 1>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                          uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
        "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
        "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
        "%56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : KL__WGMMA_ACC64(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}
#undef KL__WGMMA_ACC64
#undef KL__WGMMA_D128

/* ---- mbarrier (PTX ISA "mbarrier"), shared::cta, 64-bit objects ----
 * init: expected arrival count; arrive (release.cta); arrive.expect_tx adds
 * transaction bytes before arriving; wait loops on try_wait.parity until
 * the phase of that parity has completed (acquire.cta). */
static __device__ __forceinline__ void kl__mbar_init(uint32_t addr, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
static __device__ __forceinline__ void kl__mbar_arrive(uint32_t addr) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
static __device__ __forceinline__ void kl__mbar_arrive_expect_tx(uint32_t addr, uint32_t tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(tx) : "memory");
}
static __device__ __forceinline__ void kl__mbar_wait(uint32_t addr, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred p;\nKL_MBAR_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra KL_MBAR_WAIT_%=;\n}\n" ::"r"(addr),
        "r"(parity)
        : "memory");
}
/* An arrive on the mbarrier once every earlier cp.async of this thread has
 * landed; .noinc: it counts against the expected count given at init. */
static __device__ __forceinline__ void kl__cp_async_mbar_arrive_noinc(uint32_t addr) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
}
/* mbarrier.expect_tx: adds `tx` transaction bytes to the current phase
 * without arriving (arrive.expect_tx does both). */
static __device__ __forceinline__ void kl__mbar_expect_tx(uint32_t addr, uint32_t tx) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(tx) : "memory");
}

/* ---- bulk copies (PTX ISA "cp.async.bulk", "cp.async.bulk.tensor",
 * "cp.async.bulk.commit_group / wait_group", "prefetch") ----
 * Loads (global -> shared) complete on an mbarrier: their bytes are a
 * complete_tx on `mbar` (expect them with arrive.expect_tx / expect_tx),
 * and the data may be read once a wait on that phase returns. Stores
 * (shared -> global) are bulk async-groups of the issuing thread:
 * commit_group closes one, wait_group_read<N> returns once all but the N
 * most recent groups have read their shared source (it may be rewritten),
 * wait_group<N> once they have also written global memory. `tensor_map` is
 * the generic address of the `const __grid_constant__ CUtensorMap` kernel
 * parameter (or of a map in global memory), coordinates in elements,
 * innermost first; shared addresses are 128-byte aligned (16 for the
 * non-tensor copies, whose size is a multiple of 16). Shared memory the
 * threads wrote is handed to a store after kl__fence_proxy_async_shared and
 * a barrier. */
#define KL__TMA_MAP(m) "l"((uint64_t)(uintptr_t)(m))
static __device__ __forceinline__ void kl__tma_load_1d(uint32_t smem_dst, const void *tensor_map, int32_t c0,
                                                       uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], "
                 "[%3];\n" ::"r"(smem_dst),
                 KL__TMA_MAP(tensor_map), "r"(c0), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_load_2d(uint32_t smem_dst, const void *tensor_map, int32_t c0,
                                                       int32_t c1, uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];\n" ::"r"(smem_dst),
                 KL__TMA_MAP(tensor_map), "r"(c0), "r"(c1), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_load_3d(uint32_t smem_dst, const void *tensor_map, int32_t c0,
                                                       int32_t c1, int32_t c2, uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4}], [%5];\n" ::"r"(smem_dst),
                 KL__TMA_MAP(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_load_4d(uint32_t smem_dst, const void *tensor_map, int32_t c0,
                                                       int32_t c1, int32_t c2, int32_t c3, uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4, %5}], [%6];\n" ::"r"(smem_dst),
                 KL__TMA_MAP(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_load_5d(uint32_t smem_dst, const void *tensor_map, int32_t c0,
                                                       int32_t c1, int32_t c2, int32_t c3, int32_t c4,
                                                       uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4, %5, %6}], [%7];\n" ::"r"(smem_dst),
                 KL__TMA_MAP(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_store_1d(const void *tensor_map, int32_t c0, uint32_t smem_src) {
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%1}], [%2];\n" ::KL__TMA_MAP(
                     tensor_map),
                 "r"(c0), "r"(smem_src)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_store_2d(const void *tensor_map, int32_t c0, int32_t c1,
                                                        uint32_t smem_src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::KL__TMA_MAP(
                     tensor_map),
                 "r"(c0), "r"(c1), "r"(smem_src)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_store_3d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                                        uint32_t smem_src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::KL__TMA_MAP(
                     tensor_map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(smem_src)
                 : "memory");
}
static __device__ __forceinline__ void kl__tma_store_4d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                                        int32_t c3, uint32_t smem_src) {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::KL__TMA_MAP(
            tensor_map),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_src)
        : "memory");
}
static __device__ __forceinline__ void kl__tma_store_5d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                                        int32_t c3, int32_t c4, uint32_t smem_src) {
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];\n" ::KL__TMA_MAP(
            tensor_map),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_src)
        : "memory");
}
#undef KL__TMA_MAP
static __device__ __forceinline__ void kl__bulk_load(uint32_t smem_dst, const void *gsrc, uint32_t bytes,
                                                     uint32_t mbar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_dst),
                 "l"(gsrc), "r"(bytes), "r"(mbar)
                 : "memory");
}
static __device__ __forceinline__ void kl__bulk_store(void *gdst, uint32_t smem_src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gdst), "r"(smem_src),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void kl__bulk_commit_group() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void kl__bulk_wait_group() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
template <int N>
static __device__ __forceinline__ void kl__bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* Brings the tensor map at `tensor_map` into the copy engine's cache (a
 * hint; its bytes must be a valid map). */
static __device__ __forceinline__ void kl__prefetch_tensormap(const void *tensor_map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)(uintptr_t)tensor_map) : "memory");
}
/* setmaxnreg (warpgroup-wide): effective only with a register cap at entry
 * (__launch_bounds__(threads, 1)) and each role one branch. */
template <int N>
static __device__ __forceinline__ void kl__setmaxnreg_inc() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
static __device__ __forceinline__ void kl__setmaxnreg_dec() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
/* elect.sync over the full warp: true in exactly one lane. */
static __device__ __forceinline__ bool kl__elect_one() {
    uint32_t pred = 0;
    asm volatile(
        "{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(pred));
    return pred != 0u;
}

#endif /* KL_EMULATOR / __CUDA_ARCH_FEAT_SM90_ALL */
#endif /* KLAUNCH_KERNELS_COMMON_KL_PTX_SM90_CUH */
