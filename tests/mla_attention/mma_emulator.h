// mma_emulator.h - runs the tensor-core kernels of kernels/mla_prefill/ on the
// CPU, from their own source, to test their indexing without a GPU.
//
// Include this, define MLA_HDIM, then #include the kernel source (.cu). The
// kernel's headers are replaced: klaunch/mla_prefill.cuh and mla_mma.cuh are
// skipped (their include guards are defined here) and emu/cuda_bf16.h stands
// in for CUDA's. What the kernels use of CUDA is defined here:
//
// - every CUDA thread of a block is a fiber (ucontext), run cooperatively;
//   __syncthreads, named barriers (bar.sync id, n) and warp collectives
//   rendezvous through counting barriers, and a pass of the scheduler in
//   which no thread arrives anywhere is reported as a deadlock;
// - ldmatrix (.x4, .trans), mma.sync.m16n8k16.row.col bf16 -> fp32 and the
//   shuffles are computed from the PTX ISA's definitions (fragment tables of
//   "Matrix Fragments for mma.m16n8k16", ldmatrix's "each thread receives
//   row laneid/4, elements 2 (laneid % 4) and 2 (laneid % 4) + 1"),
//   independently of how the kernels use them;
// - shared memory is a byte array; every shared access is bounds-checked
//   against the launch's dynamic shared memory and alignment-checked;
//   cp.async is a checked 16-byte copy (its source must be 16-byte aligned
//   and inside a registered global buffer); global reads through the
//   helpers are checked against the registered buffers.
//
// A violation aborts the test binary with a message naming the thread and
// address (a GPU would fault or read garbage; here it is a clear failure).
//
// Blocks run one after another; within a block the schedule is round robin.
// This checks the kernels' arithmetic, layouts and barrier pairing, not
// their speed or races between unsynchronised threads.
#ifndef KLAUNCH_TESTS_MLA_ATTENTION_MMA_EMULATOR_H
#define KLAUNCH_TESTS_MLA_ATTENTION_MMA_EMULATOR_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#include "tests/mla_attention/emu/cuda_bf16.h"

// The kernel sources' own headers are skipped: this file defines what they would.
#define KLAUNCH_MLA_PREFILL_CUH 1
#define KLAUNCH_KERNELS_MLA_PREFILL_MLA_MMA_CUH 1

struct dim3 {
    uint32_t x, y, z;
};

namespace emu {

struct Barrier {
    uint32_t expected = 0, arrived = 0;
    uint64_t generation = 0;
};

struct Thread {
    ucontext_t ctx;
    std::vector<char> stack;
    uint32_t tid = 0;
    bool done = false;
};

struct Range {
    uintptr_t begin, end;
};

struct State {
    dim3 grid{1, 1, 1}, block{1, 1, 1}, block_idx{0, 0, 0};
    unsigned char *smem = nullptr;
    uint32_t dyn_smem = 0;
    std::vector<Thread> threads;
    ucontext_t scheduler;
    uint32_t current = 0;
    bool progress = false;
    Barrier block_barrier;
    Barrier named[16];
    std::vector<Barrier> warp_barriers;
    // Warp collective slots: per warp, per lane, up to 8 words in and 4 out.
    std::vector<uint32_t> slot_in, slot_out;
    std::function<void()> body;
    std::vector<Range> readable;  // global buffers the kernel may read
};

inline State &state() {
    static State s;
    return s;
}

[[noreturn]] inline void fail(const char *what, unsigned long long a = 0, unsigned long long b = 0) {
    State &s = state();
    fprintf(stderr,
            "EMULATOR: %s (%llu, %llu) in block (%u, %u, %u), thread %u\n", what, a, b, s.block_idx.x,
            s.block_idx.y, s.block_idx.z, s.threads.empty() ? 0u : s.threads[s.current].tid);
    fflush(stderr);
    abort();
}

inline void yield() {
    State &s = state();
    swapcontext(&s.threads[s.current].ctx, &s.scheduler);
}

inline void wait(Barrier &b, uint32_t expected) {
    State &s = state();
    if (b.expected == 0) b.expected = expected;
    if (b.expected != expected) fail("barrier used with two thread counts", b.expected, expected);
    s.progress = true;
    const uint64_t gen = b.generation;
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        b.generation++;
        return;
    }
    while (b.generation == gen) yield();
}

inline uint32_t tid() { return state().threads[state().current].tid; }
inline uint32_t lane() { return tid() & 31u; }
inline uint32_t warp() { return tid() >> 5; }

inline uint32_t *in_slot(uint32_t w, uint32_t l) { return &state().slot_in[(w * 32u + l) * 8u]; }
inline uint32_t *out_slot(uint32_t w, uint32_t l) { return &state().slot_out[(w * 32u + l) * 4u]; }

// Every lane deposits, the warp meets, each lane computes from all deposits,
// the warp meets again (so the slots can be reused).
template <class Deposit, class Compute>
void collective(uint32_t mask, Deposit deposit, Compute compute) {
    if (mask != 0xffffffffu) fail("warp collective with a partial mask", mask);
    const uint32_t w = warp();
    deposit(in_slot(w, lane()));
    wait(state().warp_barriers[w], 32u);
    compute(w, lane());
    wait(state().warp_barriers[w], 32u);
}

inline void check_smem(uint32_t addr, uint32_t bytes, uint32_t align) {
    State &s = state();
    if (addr % align != 0u) fail("misaligned shared memory access (address, alignment)", addr, align);
    if ((uint64_t)addr + bytes > s.dyn_smem) fail("shared memory access past the dynamic size (address, size)", addr, s.dyn_smem);
}

inline void check_global_read(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p;
    for (const Range &r : state().readable)
        if (a >= r.begin && a + bytes <= r.end) return;
    fail("global read outside every input buffer (address, bytes)", (unsigned long long)a, bytes);
}

inline void trampoline() {
    State &s = state();
    s.body();
    s.threads[s.current].done = true;
    s.progress = true;
}

// Runs `body` (the kernel call) as every thread of every block of `grid`.
inline void launch(dim3 grid, dim3 block, unsigned char *smem, uint32_t dyn_smem, std::function<void()> body) {
    State &s = state();
    const uint32_t n = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || n % 32u != 0u) fail("the emulator runs 1-D blocks of whole warps", n);
    s.grid = grid;
    s.block = block;
    s.smem = smem;
    s.dyn_smem = dyn_smem;
    s.body = body;
    for (uint32_t bz = 0; bz < grid.z; ++bz)
        for (uint32_t by = 0; by < grid.y; ++by)
            for (uint32_t bx = 0; bx < grid.x; ++bx) {
                s.block_idx = dim3{bx, by, bz};
                memset(smem, 0xA5, dyn_smem);  // stale garbage, as a GPU would have
                s.block_barrier = Barrier();
                for (Barrier &b : s.named) b = Barrier();
                s.warp_barriers.assign(n / 32u, Barrier());
                s.slot_in.assign(n * 8u, 0u);
                s.slot_out.assign(n * 4u, 0u);
                s.threads.clear();
                s.threads.resize(n);
                for (uint32_t t = 0; t < n; ++t) {
                    Thread &th = s.threads[t];
                    th.tid = t;
                    th.stack.resize(256 * 1024);
                    getcontext(&th.ctx);
                    th.ctx.uc_stack.ss_sp = th.stack.data();
                    th.ctx.uc_stack.ss_size = th.stack.size();
                    th.ctx.uc_link = &s.scheduler;
                    makecontext(&th.ctx, trampoline, 0);
                }
                for (;;) {
                    bool alive = false;
                    s.progress = false;
                    for (uint32_t t = 0; t < n; ++t) {
                        if (s.threads[t].done) continue;
                        alive = true;
                        s.current = t;
                        swapcontext(&s.scheduler, &s.threads[t].ctx);
                    }
                    if (!alive) break;
                    if (!s.progress) {
                        s.current = 0;
                        for (uint32_t t = 0; t < n; ++t)
                            if (s.threads[t].done) fail("deadlock: a thread exited while others wait at a barrier", t);
                        fail("deadlock: no thread reaches a barrier", s.block_barrier.arrived, s.block_barrier.expected);
                    }
                }
            }
    s.threads.clear();
}

inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint16_t half_of(uint32_t w, int hi) { return (uint16_t)(hi ? w >> 16 : w & 0xffffu); }

}  // namespace emu

// ---- what the kernel sources use of CUDA -------------------------------------

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)
#define threadIdx (dim3{::emu::tid(), 0u, 0u})
#define blockIdx (::emu::state().block_idx)
#define blockDim (::emu::state().block)
#define gridDim (::emu::state().grid)

inline uint32_t min(uint32_t a, uint32_t b) { return a < b ? a : b; }

inline void __syncthreads() { emu::wait(emu::state().block_barrier, emu::state().block.x); }

inline float __shfl_xor_sync(uint32_t mask, float v, int lane_mask) {
    float r = 0.0f;
    emu::collective(
        mask, [&](uint32_t *in) { memcpy(in, &v, 4); },
        [&](uint32_t w, uint32_t l) { memcpy(&r, emu::in_slot(w, l ^ (uint32_t)lane_mask), 4); });
    return r;
}

inline bool __any_sync(uint32_t mask, bool pred) {
    bool r = false;
    emu::collective(
        mask, [&](uint32_t *in) { in[0] = pred ? 1u : 0u; },
        [&](uint32_t w, uint32_t) {
            for (uint32_t l = 0; l < 32u; ++l) r = r || emu::in_slot(w, l)[0] != 0u;
        });
    return r;
}

// ---- the kl__mma_* helpers of kernels/mla_prefill/mla_mma.cuh ------------------

static inline uint32_t kl__mma_smem_addr(const void *p) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    if (c < emu::state().smem) emu::fail("shared pointer below the block's shared memory");
    return (uint32_t)(c - emu::state().smem);
}

static inline void kl__mma_cp16(uint32_t dst, const void *src) {
    emu::check_smem(dst, 16, 16);
    if ((uintptr_t)src % 16u != 0u) emu::fail("cp.async source not 16-byte aligned", (unsigned long long)(uintptr_t)src);
    emu::check_global_read(src, 16);
    memcpy(emu::state().smem + dst, src, 16);
}
static inline void kl__mma_cp_commit() {}
template <int N>
static inline void kl__mma_cp_wait() {}

static inline void kl__mma_st_shared_v4(uint32_t addr, uint4 v) {
    emu::check_smem(addr, 16, 16);
    memcpy(emu::state().smem + addr, &v, 16);
}
static inline void kl__mma_st_shared_u32(uint32_t addr, uint32_t v) {
    emu::check_smem(addr, 4, 4);
    memcpy(emu::state().smem + addr, &v, 4);
}
static inline uint4 kl__mma_ld_shared_v4(uint32_t addr) {
    emu::check_smem(addr, 16, 16);
    uint4 v;
    memcpy(&v, emu::state().smem + addr, 16);
    return v;
}
static inline float kl__mma_ld_shared_f32(uint32_t addr) {
    emu::check_smem(addr, 4, 4);
    float v;
    memcpy(&v, emu::state().smem + addr, 4);
    return v;
}
static inline void kl__mma_st_shared_f32(uint32_t addr, float v) {
    emu::check_smem(addr, 4, 4);
    memcpy(emu::state().smem + addr, &v, 4);
}

// ldmatrix .x4: lanes 8j .. 8j+7 give the row addresses of matrix j; lane L
// receives, of each matrix j, row L/4 elements 2(L%4), 2(L%4)+1 (.trans: of
// the transposed matrix), lower element in the low half of r[j].
static inline void emu_ldsm(uint32_t (&r)[4], uint32_t addr, bool trans) {
    emu::collective(
        0xffffffffu, [&](uint32_t *in) { in[0] = addr; },
        [&](uint32_t w, uint32_t l) {
            for (uint32_t j = 0; j < 4u; ++j) {
                uint16_t e[2];
                for (uint32_t k = 0; k < 2u; ++k) {
                    // element (row, col) of matrix j, stored row-major at the rows' addresses
                    const uint32_t row = trans ? 2u * (l % 4u) + k : l / 4u;
                    const uint32_t col = trans ? l / 4u : 2u * (l % 4u) + k;
                    const uint32_t a = emu::in_slot(w, 8u * j + row)[0];
                    emu::check_smem(a, 16, 16);
                    memcpy(&e[k], emu::state().smem + a + 2u * col, 2);
                }
                r[j] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
            }
        });
}
static inline void kl__mma_ldsm_x4(uint32_t (&r)[4], uint32_t addr) { emu_ldsm(r, addr, false); }
static inline void kl__mma_ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu_ldsm(r, addr, true); }

// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA fragment tables):
//   A: a_i at row g (i in 0,1,4,5) or g+8 (2,3,6,7), column 2t + (i&1) (+8 for i >= 4)
//   B: b_i at row (k) 2t + (i&1) (+8 for i >= 2), column g
//   C/D: c_i at row g (i < 2) or g+8, column 2t + (i&1)
// with g = lane/4, t = lane%4; register j holds elements 2j (low) and 2j+1.
static inline void kl__mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu::collective(
        0xffffffffu,
        [&](uint32_t *in) {
            for (int j = 0; j < 4; ++j) in[j] = a[j];
            in[4] = b0;
            in[5] = b1;
        },
        [&](uint32_t w, uint32_t l) {
            // Place every lane's elements by the tables above, then take this lane's outputs.
            float A[16][16], B[16][8];
            bool hasA[16][16] = {}, hasB[16][8] = {};
            for (uint32_t src = 0; src < 32u; ++src) {
                const uint32_t g = src / 4u, t = src % 4u;
                const uint32_t *in = emu::in_slot(w, src);
                for (uint32_t i = 0; i < 8u; ++i) {
                    const uint32_t r = (i < 2u || (i >= 4u && i < 6u)) ? g : g + 8u;
                    const uint32_t cc = 2u * t + (i & 1u) + (i >= 4u ? 8u : 0u);
                    A[r][cc] = emu::bf16_to_f32(emu::half_of(in[i / 2u], (int)(i & 1u)));
                    hasA[r][cc] = true;
                }
                for (uint32_t i = 0; i < 4u; ++i) {
                    const uint32_t k = 2u * t + (i & 1u) + (i >= 2u ? 8u : 0u);
                    B[k][g] = emu::bf16_to_f32(emu::half_of(in[4u + i / 2u], (int)(i & 1u)));
                    hasB[k][g] = true;
                }
            }
            for (uint32_t r = 0; r < 16u; ++r)
                for (uint32_t k = 0; k < 16u; ++k)
                    if (!hasA[r][k] || (r < 8u && !hasB[k][r])) emu::fail("fragment table leaves an element unset", r, k);
            const uint32_t g = l / 4u, t = l % 4u;
            for (uint32_t i = 0; i < 4u; ++i) {
                const uint32_t row = i < 2u ? g : g + 8u, col = 2u * t + (i & 1u);
                double acc = c[i];
                for (uint32_t k = 0; k < 16u; ++k) acc += (double)A[row][k] * (double)B[k][col];
                const float f = (float)acc;
                memcpy(&emu::out_slot(w, l)[i], &f, 4);
            }
        });
    for (int i = 0; i < 4; ++i) memcpy(&c[i], &emu::out_slot(emu::warp(), emu::lane())[i], 4);
}

static inline uint32_t kl__mma_pack_bf16(float lo, float hi) {
    return (uint32_t)emu::f32_to_bf16(lo) | ((uint32_t)emu::f32_to_bf16(hi) << 16);
}
static inline float kl__mma_bf16_lo(uint32_t w) { return emu::bf16_to_f32((uint16_t)(w & 0xffffu)); }
static inline float kl__mma_bf16_hi(uint32_t w) { return emu::bf16_to_f32((uint16_t)(w >> 16)); }
static inline float kl__mma_exp2(float x) { return exp2f(x); }

static inline void kl__mma_bar_sync(uint32_t id, uint32_t threads) {
    if (id == 0u || id >= 16u) emu::fail("named barrier id out of 1..15", id);
    if (threads % 32u != 0u) emu::fail("named barrier count not a multiple of 32", threads);
    emu::wait(emu::state().named[id], threads);
}

static inline uint32_t kl__mma_dynamic_smem_size() { return emu::state().dyn_smem; }

static inline uint4 kl__mma_load8_partial(const __nv_bfloat16 *src, uint32_t n) {
    if (n > 8u) emu::fail("load8_partial of more than 8 elements", n);
    if (n > 0u) emu::check_global_read(src, 2u * n);
    const unsigned short *s = reinterpret_cast<const unsigned short *>(src);
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    for (uint32_t e = 0; e < n; ++e) w[e >> 1] |= (uint32_t)s[e] << (16u * (e & 1u));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

#endif  // KLAUNCH_TESTS_MLA_ATTENTION_MMA_EMULATOR_H
