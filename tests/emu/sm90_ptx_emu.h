// sm90_ptx_emu.h - the CPU emulator's kernels/common/kl_ptx_sm90.cuh: the
// same functions, each calling the emulation of its instruction
// (tests/emu/sm90_wgmma.cc, written from the PTX ISA's wgmma sections;
// sm90_mbarrier.cc and sm90_tma.cc, which say what they make observable).
// kl_ptx_sm90.cuh includes this instead of its asm when KL_EMULATOR is
// defined.
//
// What the emulation makes observable (tests/emu/sm90_wgmma_test.cc):
// - wgmma.mma_async is a warpgroup instruction: all 128 threads of a
//   warpgroup issue the same sequence (shape, transpose, descriptors,
//   scale-d), or the launch faults (kCollective); a block whose size is not
//   a whole number of warpgroups faults.
// - It is asynchronous: issuing saves the accumulator and fills it with NaN;
//   the product is computed, from shared memory as it is then, when a
//   wgmma.wait_group of the warpgroup (a barrier of its 128 threads)
//   completes its group. So an accumulator read before its wait reads NaN,
//   one written before its wait loses the write, and shared memory changed
//   before the wait changes the result: each shows in the output.
// - Successive products into one accumulator chain in issue order.
// - The RS form (A from registers) takes each thread's four A registers at
//   issue, places them by the ISA's matrix-A fragment, and faults
//   (kUnsupported) when a thread's registers hold other values by the time
//   the product completes (the ISA: they must not change until then).
// - A thread that returns with products not waited for faults.
// - fence.proxy.async and wgmma.fence are accepted and counted; the
//   emulator does not model the async proxy's visibility (races between
//   threads are the race checker's, through the barriers).
#ifndef KLAUNCH_TESTS_EMU_SM90_PTX_EMU_H
#define KLAUNCH_TESTS_EMU_SM90_PTX_EMU_H

#include <stdint.h>

// C linkage: the emulated unity file wraps the kernels (and so this header)
// in a namespace of their own; C names bind to the runtime's definitions
// whatever namespace declares them.
extern "C" {
void kl_emu_sm90_wgmma_bf16_ss(float *d, uint32_t n, uint32_t trans_b, uint64_t desc_a, uint64_t desc_b,
                               uint32_t accumulate);
void kl_emu_sm90_wgmma_bf16_rs(float *d, uint32_t n, uint32_t trans_b, const uint32_t *a, uint64_t desc_b,
                               uint32_t accumulate);
void kl_emu_sm90_wgmma_bf16_ss_ta(float *d, uint32_t n, uint32_t trans_b, uint64_t desc_a, uint64_t desc_b,
                                  uint32_t accumulate);
void kl_emu_sm90_wgmma_fence(void);
void kl_emu_sm90_wgmma_commit(void);
void kl_emu_sm90_wgmma_wait(uint32_t pending);
void kl_emu_sm90_fence_proxy_async(void);
// tests/emu/sm90_mbarrier.cc
void kl_emu_sm90_mbarrier_init(uint32_t addr, uint32_t count);
void kl_emu_sm90_mbarrier_arrive(uint32_t addr);
void kl_emu_sm90_mbarrier_arrive_expect_tx(uint32_t addr, uint32_t tx);
void kl_emu_sm90_mbarrier_wait_parity(uint32_t addr, uint32_t parity);
uint32_t kl_emu_sm90_mbarrier_phase(uint32_t addr);
void kl_emu_sm90_cp_async_mbarrier_arrive_noinc(uint32_t addr);
void kl_emu_sm90_setmaxnreg(uint32_t inc, uint32_t count);
uint32_t kl_emu_sm90_setmaxnreg_count(void);
uint32_t kl_emu_sm90_elect_sync(uint32_t mask);  // 1 in the elected lane
void kl_emu_sm90_mbarrier_expect_tx(uint32_t addr, uint32_t tx);
// tests/emu/sm90_tma.cc
void kl_emu_sm90_tma_load(uint32_t smem_dst, const void *tensor_map, uint32_t rank, const int32_t *coords,
                          uint32_t mbar);
void kl_emu_sm90_tma_store(const void *tensor_map, uint32_t rank, const int32_t *coords, uint32_t smem_src);
void kl_emu_sm90_bulk_load(uint32_t smem_dst, const void *gsrc, uint32_t bytes, uint32_t mbar);
void kl_emu_sm90_bulk_store(void *gdst, uint32_t smem_src, uint32_t bytes);
void kl_emu_sm90_bulk_commit(void);
void kl_emu_sm90_bulk_wait(uint32_t pending, uint32_t read_only);
void kl_emu_sm90_prefetch_tensormap(const void *tensor_map);
}

static inline void kl__wgmma_fence() { kl_emu_sm90_wgmma_fence(); }
static inline void kl__wgmma_commit() { kl_emu_sm90_wgmma_commit(); }
template <int N>
static inline void kl__wgmma_wait() {
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
    kl_emu_sm90_wgmma_wait((uint32_t)N);
}
static inline void kl__fence_proxy_async_shared() { kl_emu_sm90_fence_proxy_async(); }
template <int N>
static inline void kl__wgmma_fence_operand(float (&)[N]) {}
template <int N>
static inline void kl__wgmma_fence_operand(uint32_t (&)[N]) {}

template <int N, int TRANS_B>
static inline void kl__wgmma_bf16_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, uint32_t accumulate) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "imm-trans-b is 0 or 1");
    kl_emu_sm90_wgmma_bf16_ss(d, (uint32_t)N, (uint32_t)TRANS_B, desc_a, desc_b, accumulate);
}

// The RS form: A from this thread's four registers (the ISA's matrix-A
// register fragment), read at issue and checked unchanged when the product
// completes (the hardware reads them asynchronously: a kernel that rewrites
// them before the wait_group computes with either value on a GPU).
template <int N, int TRANS_B>
static inline void kl__wgmma_bf16_ss_ta(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, uint32_t accumulate) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "imm-trans-b is 0 or 1");
    kl_emu_sm90_wgmma_bf16_ss_ta(d, (uint32_t)N, (uint32_t)TRANS_B, desc_a, desc_b, accumulate);
}

template <int N, int TRANS_B>
static inline void kl__wgmma_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, uint32_t accumulate) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "imm-trans-b is 0 or 1");
    kl_emu_sm90_wgmma_bf16_rs(d, (uint32_t)N, (uint32_t)TRANS_B, a, desc_b, accumulate);
}

// mbarrier, cp.async.mbarrier.arrive, setmaxnreg, elect.sync
// (tests/emu/sm90_mbarrier.cc says what each makes observable). A wait is
// blocking here (the GPU wrapper loops on try_wait): a phase nobody
// completes is the emulator's deadlock report, not a hang.
static inline void kl__mbar_init(uint32_t addr, uint32_t count) { kl_emu_sm90_mbarrier_init(addr, count); }
static inline void kl__mbar_arrive(uint32_t addr) { kl_emu_sm90_mbarrier_arrive(addr); }
static inline void kl__mbar_arrive_expect_tx(uint32_t addr, uint32_t tx) {
    kl_emu_sm90_mbarrier_arrive_expect_tx(addr, tx);
}
static inline void kl__mbar_wait(uint32_t addr, uint32_t parity) { kl_emu_sm90_mbarrier_wait_parity(addr, parity); }
static inline void kl__cp_async_mbar_arrive_noinc(uint32_t addr) { kl_emu_sm90_cp_async_mbarrier_arrive_noinc(addr); }
template <int N>
static inline void kl__setmaxnreg_inc() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    kl_emu_sm90_setmaxnreg(1u, (uint32_t)N);
}
template <int N>
static inline void kl__setmaxnreg_dec() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    kl_emu_sm90_setmaxnreg(0u, (uint32_t)N);
}
/* elect.sync over the full warp: true in one lane (the same lane every time). */
static inline bool kl__elect_one() { return kl_emu_sm90_elect_sync(0xffffffffu) != 0u; }
static inline void kl__mbar_expect_tx(uint32_t addr, uint32_t tx) { kl_emu_sm90_mbarrier_expect_tx(addr, tx); }

// Bulk and tensor copies (tests/emu/sm90_tma.cc says what each makes
// observable): loads complete on their mbarrier, stores in the issuing
// thread's bulk async-groups.
static inline void kl__tma_load_1d(uint32_t smem_dst, const void *tensor_map, int32_t c0, uint32_t mbar) {
    const int32_t c[1] = {c0};
    kl_emu_sm90_tma_load(smem_dst, tensor_map, 1u, c, mbar);
}
static inline void kl__tma_load_2d(uint32_t smem_dst, const void *tensor_map, int32_t c0, int32_t c1, uint32_t mbar) {
    const int32_t c[2] = {c0, c1};
    kl_emu_sm90_tma_load(smem_dst, tensor_map, 2u, c, mbar);
}
static inline void kl__tma_load_3d(uint32_t smem_dst, const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                   uint32_t mbar) {
    const int32_t c[3] = {c0, c1, c2};
    kl_emu_sm90_tma_load(smem_dst, tensor_map, 3u, c, mbar);
}
static inline void kl__tma_load_4d(uint32_t smem_dst, const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                   int32_t c3, uint32_t mbar) {
    const int32_t c[4] = {c0, c1, c2, c3};
    kl_emu_sm90_tma_load(smem_dst, tensor_map, 4u, c, mbar);
}
static inline void kl__tma_load_5d(uint32_t smem_dst, const void *tensor_map, int32_t c0, int32_t c1, int32_t c2,
                                   int32_t c3, int32_t c4, uint32_t mbar) {
    const int32_t c[5] = {c0, c1, c2, c3, c4};
    kl_emu_sm90_tma_load(smem_dst, tensor_map, 5u, c, mbar);
}
static inline void kl__tma_store_1d(const void *tensor_map, int32_t c0, uint32_t smem_src) {
    const int32_t c[1] = {c0};
    kl_emu_sm90_tma_store(tensor_map, 1u, c, smem_src);
}
static inline void kl__tma_store_2d(const void *tensor_map, int32_t c0, int32_t c1, uint32_t smem_src) {
    const int32_t c[2] = {c0, c1};
    kl_emu_sm90_tma_store(tensor_map, 2u, c, smem_src);
}
static inline void kl__tma_store_3d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2, uint32_t smem_src) {
    const int32_t c[3] = {c0, c1, c2};
    kl_emu_sm90_tma_store(tensor_map, 3u, c, smem_src);
}
static inline void kl__tma_store_4d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                    uint32_t smem_src) {
    const int32_t c[4] = {c0, c1, c2, c3};
    kl_emu_sm90_tma_store(tensor_map, 4u, c, smem_src);
}
static inline void kl__tma_store_5d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2, int32_t c3, int32_t c4,
                                    uint32_t smem_src) {
    const int32_t c[5] = {c0, c1, c2, c3, c4};
    kl_emu_sm90_tma_store(tensor_map, 5u, c, smem_src);
}
static inline void kl__bulk_load(uint32_t smem_dst, const void *gsrc, uint32_t bytes, uint32_t mbar) {
    kl_emu_sm90_bulk_load(smem_dst, gsrc, bytes, mbar);
}
static inline void kl__bulk_store(void *gdst, uint32_t smem_src, uint32_t bytes) {
    kl_emu_sm90_bulk_store(gdst, smem_src, bytes);
}
static inline void kl__bulk_commit_group() { kl_emu_sm90_bulk_commit(); }
template <int N>
static inline void kl__bulk_wait_group() {
    static_assert(N >= 0, "cp.async.bulk.wait_group takes a count >= 0");
    kl_emu_sm90_bulk_wait((uint32_t)N, 0u);
}
template <int N>
static inline void kl__bulk_wait_group_read() {
    static_assert(N >= 0, "cp.async.bulk.wait_group.read takes a count >= 0");
    kl_emu_sm90_bulk_wait((uint32_t)N, 1u);
}
static inline void kl__prefetch_tensormap(const void *tensor_map) { kl_emu_sm90_prefetch_tensormap(tensor_map); }

#endif  // KLAUNCH_TESTS_EMU_SM90_PTX_EMU_H
