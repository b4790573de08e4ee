// intrinsics.h - what an emulated kernel's CUDA names and PTX wrappers call:
// out-of-line functions of intrinsics.cc, compiled without the kernels'
// instrumentation (their memory accesses are the emulator's own and check
// the kernel's access explicitly). Included by kernel_prelude.h and
// kl_ptx_emu.h; an extension declares its own the same way.
#ifndef KLAUNCH_TESTS_EMU_INTRINSICS_H
#define KLAUNCH_TESTS_EMU_INTRINSICS_H

#include <stddef.h>
#include <stdint.h>

#include "tests/emu/include/vector_types.h"

namespace emu {
namespace cu {

// ---- built-in variables ----
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();

// ---- synchronisation ----
void syncthreads();
int syncthreads_count(int pred);  // bar.red.popc
int syncthreads_and(int pred);
int syncthreads_or(int pred);
void syncwarp(uint32_t mask);
void bar_sync(uint32_t id, uint32_t threads);  // bar.sync id, threads (named barrier)
void fence();                                  // membar/fence: an order point, nothing to do

// ---- warp collectives (PTX shfl.sync / vote.sync) ----
enum ShflMode { kShflIdx = 0, kShflUp = 1, kShflDown = 2, kShflBfly = 3 };
uint32_t shfl(ShflMode mode, uint32_t mask, uint32_t value, int lane_or_delta, int width, const char *name);
uint32_t ballot(uint32_t mask, int pred, const char *name);  // the lanes of `mask` whose pred holds

// ---- memory ----
size_t to_shared(const void *p);                                    // cvta.to.shared
void *from_shared(size_t addr);                                     // cvta.shared (generic of a window address)
void check_align(const void *p, size_t align, size_t bytes, const char *what);
// A checked host pointer for an atomic on a generic address (shared or global).
void *atomic_target(const void *p, size_t bytes, const char *what);
void atomic_copy(void *dst, const void *src, size_t bytes);  // the atomic's own (unchecked) access

// ---- PTX wrappers of kernels/common/kl_ptx.cuh ----
void cp_async(uint32_t dst, const void *src, uint32_t bytes, uint32_t src_bytes);
void cp_async_commit();
void cp_async_wait(uint32_t pending);
void ld_shared(uint32_t addr, void *out, uint32_t bytes);
void st_shared(uint32_t addr, const void *in, uint32_t bytes);
void ldmatrix(uint32_t *r, uint32_t addr, int num, bool trans);
uint32_t movmatrix_trans(uint32_t a);  // movmatrix.sync.aligned.m8n8.trans.b16
enum MmaType { kMmaBf16 = 0, kMmaF16 = 1 };
void mma_m16n8k16_f32(MmaType type, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                      const float (&c)[4]);
float ex2_approx_ftz(float x);
uint32_t dynamic_smem_size();
uint32_t dynamic_smem_base();  // shared-window address of the dynamic shared memory
void griddep_launch_dependents();
void griddep_wait();
uint64_t globaltimer();  // %globaltimer: the host's monotonic clock, nanoseconds
uint32_t cvt_f16x2_e4m3x2(uint16_t packed);
uint16_t cvt_e4m3x2_f32_satfinite(float a_hi, float b_lo);
[[noreturn]] void unsupported(const char *what);

}  // namespace cu
}  // namespace emu

#endif  // KLAUNCH_TESTS_EMU_INTRINSICS_H
