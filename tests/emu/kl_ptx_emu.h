// kl_ptx_emu.h - the CPU emulator's kernels/common/kl_ptx.cuh: the same
// functions, each calling the emulation of its instruction (intrinsics.cc,
// written from the PTX ISA). kl_ptx.cuh includes this instead of its asm
// when KL_EMULATOR is defined (kernel_prelude.h defines it).
#ifndef KLAUNCH_TESTS_EMU_KL_PTX_EMU_H
#define KLAUNCH_TESTS_EMU_KL_PTX_EMU_H

#include <stdint.h>

#include "tests/emu/intrinsics.h"

#define KL_DYNAMIC_SHARED(NAME, ALIGN)                                                                   \
    unsigned char *const NAME = static_cast<unsigned char *>(::emu::cu::from_shared(::emu::cu::dynamic_smem_base())); \
    ::emu::cu::check_align(NAME, (ALIGN), 1, "dynamic shared memory base")

static inline void kl__cp_async_cg16(uint32_t dst, const void *src) { ::emu::cu::cp_async(dst, src, 16, 16); }
static inline void kl__cp_async_cg16_zfill(uint32_t dst, const void *src, uint32_t src_bytes) {
    ::emu::cu::cp_async(dst, src, 16, src_bytes);
}
template <int BYTES>
static inline void kl__cp_async_ca(uint32_t dst, const void *src) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async.ca copies 4, 8 or 16 bytes");
    ::emu::cu::cp_async(dst, src, BYTES, BYTES);
}
static inline void kl__cp_async_commit() { ::emu::cu::cp_async_commit(); }
template <int N>
static inline void kl__cp_async_wait() {
    static_assert(N >= 0, "cp.async.wait_group takes a count >= 0");
    ::emu::cu::cp_async_wait((uint32_t)N);
}

static inline void kl__st_shared_v4(uint32_t addr, uint4 v) { ::emu::cu::st_shared(addr, &v, 16); }
static inline void kl__st_shared_u32(uint32_t addr, uint32_t v) { ::emu::cu::st_shared(addr, &v, 4); }
static inline void kl__st_shared_f32(uint32_t addr, float v) { ::emu::cu::st_shared(addr, &v, 4); }
static inline uint4 kl__ld_shared_v4(uint32_t addr) {
    uint4 v;
    ::emu::cu::ld_shared(addr, &v, 16);
    return v;
}
static inline uint32_t kl__ld_shared_u32(uint32_t addr) {
    uint32_t v;
    ::emu::cu::ld_shared(addr, &v, 4);
    return v;
}
static inline float kl__ld_shared_f32(uint32_t addr) {
    float v;
    ::emu::cu::ld_shared(addr, &v, 4);
    return v;
}

static inline void kl__ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { ::emu::cu::ldmatrix(r, addr, 4, false); }
static inline void kl__ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { ::emu::cu::ldmatrix(r, addr, 4, true); }
static inline void kl__ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) { ::emu::cu::ldmatrix(r, addr, 2, false); }
static inline void kl__ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) { ::emu::cu::ldmatrix(r, addr, 2, true); }

static inline uint32_t kl__movmatrix_trans(uint32_t a) { return ::emu::cu::movmatrix_trans(a); }

static inline void kl__mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const float c0[4] = {c[0], c[1], c[2], c[3]};
    ::emu::cu::mma_m16n8k16_f32(::emu::cu::kMmaBf16, c, a, b0, b1, c0);
}
static inline void kl__mma_m16n8k16_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const float c0[4] = {c[0], c[1], c[2], c[3]};
    ::emu::cu::mma_m16n8k16_f32(::emu::cu::kMmaF16, c, a, b0, b1, c0);
}

static inline float kl__ex2_approx_ftz(float x) { return ::emu::cu::ex2_approx_ftz(x); }
static inline uint32_t kl__cvt_f16x2_e4m3x2(uint16_t a) { return ::emu::cu::cvt_f16x2_e4m3x2(a); }
static inline uint32_t kl__cvt_f16x2_e4m3x2_hi(uint32_t a) { return ::emu::cu::cvt_f16x2_e4m3x2((uint16_t)(a >> 16)); }
static inline uint16_t kl__cvt_e4m3x2_f32(float hi, float lo) { return ::emu::cu::cvt_e4m3x2_f32_satfinite(hi, lo); }

static inline void kl__bar_sync(uint32_t id, uint32_t threads) { ::emu::cu::bar_sync(id, threads); }
static inline uint32_t kl__dynamic_smem_size() { return ::emu::cu::dynamic_smem_size(); }
static inline uint64_t kl__globaltimer() { return ::emu::cu::globaltimer(); }
// The emulator runs one thread at a time: every atomic is sequentially consistent.
static inline uint32_t kl__atom_add_acq_rel_gpu(uint32_t *p, uint32_t v) { return atomicAdd(p, v); }
static inline void kl__griddep_launch_dependents() { ::emu::cu::griddep_launch_dependents(); }
static inline void kl__griddep_wait() { ::emu::cu::griddep_wait(); }

#endif  // KLAUNCH_TESTS_EMU_KL_PTX_EMU_H
