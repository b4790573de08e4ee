// intrinsics.cc - the CUDA built-ins and PTX instructions an emulated kernel
// calls (intrinsics.h), each from its definition in the PTX ISA or the CUDA
// programming guide, independent of how any kernel uses it. Compiled
// without the kernels' instrumentation.
#include "tests/emu/intrinsics.h"

#include <math.h>
#include <string.h>

#include <chrono>
#include <string>

#include "tests/emu/emu.h"
#include "tests/emu/fp.h"

namespace emu {
namespace cu {

uint3 thread_idx() {
    const Dim3 d = emu::thread_idx();
    return uint3{d.x, d.y, d.z};
}
uint3 block_idx() {
    const Dim3 d = emu::block_idx();
    return uint3{d.x, d.y, d.z};
}
dim3 block_dim() {
    const Dim3 d = emu::block_dim();
    return dim3(d.x, d.y, d.z);
}
dim3 grid_dim() {
    const Dim3 d = emu::grid_dim();
    return dim3(d.x, d.y, d.z);
}

// ---- synchronisation --------------------------------------------------------

void syncthreads() { emu::barrier(0, emu::block_threads(), "__syncthreads"); }

namespace {
// bar.red: the last thread to arrive computes the result into the slot of
// this barrier generation's parity; the accumulator is free again at once.
struct BarRed : BlockLocalBase {
    std::vector<uint32_t> calls;  // per thread
    uint32_t acc_count = 0, acc_and = 1, acc_or = 0;
    uint32_t res_count[2] = {0, 0}, res_and[2] = {0, 0}, res_or[2] = {0, 0};
};
int bar_red(int pred, int which) {
    static const char key = 0;
    BarRed &r = emu::block_local<BarRed>(&key);
    if (r.calls.empty()) r.calls.assign(emu::block_threads(), 0u);
    const uint32_t me = emu::thread();
    const uint32_t slot = r.calls[me]++ & 1u;
    r.acc_count += pred != 0;
    r.acc_and &= pred != 0;
    r.acc_or |= pred != 0;
    emu::barrier(0, emu::block_threads(), "__syncthreads_count/and/or (bar.red)", [&r, slot]() {
        r.res_count[slot] = r.acc_count;
        r.res_and[slot] = r.acc_and;
        r.res_or[slot] = r.acc_or;
        r.acc_count = 0;
        r.acc_and = 1;
        r.acc_or = 0;
    });
    return which == 0 ? (int)r.res_count[slot] : which == 1 ? (int)r.res_and[slot] : (int)r.res_or[slot];
}
}  // namespace

int syncthreads_count(int pred) { return bar_red(pred, 0); }
int syncthreads_and(int pred) { return bar_red(pred, 1); }
int syncthreads_or(int pred) { return bar_red(pred, 2); }

void syncwarp(uint32_t mask) {
    const uint32_t l = emu::lane(), w = emu::warp();
    if (!(mask >> l & 1u))
        emu::fault(FaultKind::kCollective, mask, "__syncwarp with member mask %#x, which does not include the calling lane %u",
                   mask, l);
    // A barrier of the mask's lanes of this warp (joins their clocks: bar.warp.sync orders memory among them).
    emu::barrier((3ull << 40) | ((uint64_t)w << 32) | mask, (uint32_t)__builtin_popcount(mask), "__syncwarp");
}

void bar_sync(uint32_t id, uint32_t threads) {
    if (id >= 16u) emu::fault(FaultKind::kCollective, id, "bar.sync barrier id %u outside 0..15", id);
    if (threads == 0u || threads % 32u != 0u)
        emu::fault(FaultKind::kCollective, id, "bar.sync %u, %u: the thread count must be a nonzero multiple of 32", id,
                   threads);
    emu::barrier(id, threads, "bar.sync (named barrier)");
}

void fence() {}

// ---- warp collectives -----------------------------------------------------------

uint32_t shfl(ShflMode mode, uint32_t mask, uint32_t value, int b, int width, const char *name) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        emu::fault(FaultKind::kCollective, (uint64_t)width, "%s with width %d (a power of two, 1 to 32)", name, width);
    const uint32_t in[2] = {value, (uint32_t)b};
    uint32_t out = 0;
    const uint32_t segmask = (uint32_t)(32 - width);
    const uint32_t clamp = mode == kShflUp ? 0u : 0x1fu;
    emu::warp_collective(mask, name, in, 2, &out, 1, [=](const uint32_t (*ins)[16], uint32_t (*outs)[16], uint32_t m) {
        // PTX ISA, shfl.sync: c = ((32 - width) << 8) | clamp as CUDA builds it.
        for (uint32_t lane = 0; lane < 32u; ++lane) {
            if (!(m >> lane & 1u)) continue;
            const int bval = (int)ins[lane][1];
            const int max_lane = (int)((lane & segmask) | (clamp & ~segmask));
            const int min_lane = (int)(lane & segmask);
            int j = 0;
            bool pval = false;
            switch (mode) {
                case kShflUp:
                    j = (int)lane - bval;
                    pval = j >= max_lane;
                    break;
                case kShflDown:
                    j = (int)lane + bval;
                    pval = j <= max_lane;
                    break;
                case kShflBfly:
                    j = (int)(lane ^ (uint32_t)bval);
                    pval = j <= max_lane;
                    break;
                case kShflIdx:
                    j = min_lane | (int)((uint32_t)bval & 0x1fu & ~segmask);
                    pval = j <= max_lane;
                    break;
            }
            if (!pval) j = (int)lane;
            if (!(m >> j & 1u))
                emu::fault(FaultKind::kCollective, m,
                           "%s: lane %u reads lane %d, which is not in the member mask %#x (undefined value)", name,
                           lane, j, m);
            outs[lane][0] = ins[j][0];
        }
    });
    return out;
}

uint32_t ballot(uint32_t mask, int pred, const char *name) {
    const uint32_t in = pred != 0;
    uint32_t out = 0;
    emu::warp_collective(mask, name, &in, 1, &out, 1, [](const uint32_t (*ins)[16], uint32_t (*outs)[16], uint32_t m) {
        uint32_t bits = 0;
        for (uint32_t l = 0; l < 32u; ++l)
            if ((m >> l & 1u) && ins[l][0]) bits |= 1u << l;
        for (uint32_t l = 0; l < 32u; ++l) outs[l][0] = bits;
    });
    return out;
}

// ---- memory ----------------------------------------------------------------------

size_t to_shared(const void *p) { return emu::to_shared(p); }
void *from_shared(size_t addr) { return emu::shared_pointer((uint32_t)addr); }

void check_align(const void *p, size_t align, size_t bytes, const char *what) {
    if ((uintptr_t)p % align != 0)
        emu::fault(FaultKind::kMisaligned, (uintptr_t)p, "%s of %zu bytes at %p, which is not %zu-byte aligned", what,
                   bytes, p, align);
}

void *atomic_target(const void *p, size_t bytes, const char *what) {
    check_align(p, bytes, bytes, what);
    // In shared memory: bounds only (atomics do not race with each other;
    // docs/EMULATOR.md says what is not checked).
    uint32_t addr = 0;
    if (emu::is_shared(p, &addr)) {
        if (!emu::is_shared(static_cast<const unsigned char *>(p) + bytes - 1, nullptr))
            emu::fault(FaultKind::kSharedOutOfBounds, addr, "%s of %zu bytes at shared address %u past the end", what,
                       bytes, addr);
        return emu::shared_pointer(addr);
    }
    emu::check_global(p, bytes, bytes, Access::kReadWrite);
    return const_cast<void *>(p);
}

void atomic_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

// ---- PTX wrappers ------------------------------------------------------------------

void cp_async(uint32_t dst, const void *src, uint32_t bytes, uint32_t src_bytes) {
    emu::cp_async(dst, src, bytes, src_bytes);
}
void cp_async_commit() { emu::cp_async_commit(); }
void cp_async_wait(uint32_t pending) { emu::cp_async_wait(pending); }

void ld_shared(uint32_t addr, void *out, uint32_t bytes) {
    memcpy(out, emu::shared(addr, bytes, bytes, Access::kRead), bytes);
}
void st_shared(uint32_t addr, const void *in, uint32_t bytes) {
    memcpy(emu::shared(addr, bytes, bytes, Access::kWrite), in, bytes);
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 (PTX ISA): lanes
// 8j .. 8j+7 give the addresses of rows 0..7 of matrix j (16 bytes each,
// 16-byte aligned); lane L receives in r[j], of matrix j, row L/4 elements
// 2(L%4) and 2(L%4)+1 (lower element in the low half), or with .trans the
// same of the transposed matrix.
void ldmatrix(uint32_t *r, uint32_t addr, int num, bool trans) {
    if (num != 1 && num != 2 && num != 4) emu::cu::unsupported("ldmatrix with a matrix count other than 1, 2, 4");
    const uint32_t w = emu::warp();
    uint32_t out[4] = {0, 0, 0, 0};
    emu::warp_collective(0xffffffffu, trans ? "ldmatrix.trans" : "ldmatrix", &addr, 1, out, (uint32_t)num,
                         [=](const uint32_t (*ins)[16], uint32_t (*outs)[16], uint32_t) {
                             for (int j = 0; j < num; ++j)
                                 for (uint32_t row = 0; row < 8u; ++row) {
                                     const uint32_t src = 8u * (uint32_t)j + row;
                                     // Checked and recorded as the read of the lane that gave the address.
                                     emu::shared_as(w * 32u + src, ins[src][0], 16, 16, Access::kRead);
                                 }
                             for (uint32_t l = 0; l < 32u; ++l)
                                 for (int j = 0; j < num; ++j) {
                                     uint16_t e[2];
                                     for (uint32_t k = 0; k < 2u; ++k) {
                                         const uint32_t row = trans ? 2u * (l % 4u) + k : l / 4u;
                                         const uint32_t col = trans ? l / 4u : 2u * (l % 4u) + k;
                                         const uint32_t a = ins[8u * (uint32_t)j + row][0];
                                         memcpy(&e[k], emu::shared_pointer(a + 2u * col), 2);
                                     }
                                     outs[l][j] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
                                 }
                         });
    for (int j = 0; j < num; ++j) r[j] = out[j];
}

// movmatrix.sync.aligned.m8n8.trans.b16 (PTX ISA): lane L holds, of an 8x8
// matrix of 16-bit elements, row L / 4, elements 2 (L % 4) and 2 (L % 4) + 1
// (the first in the low half), and receives the same of the transposed
// matrix: M[2 (L % 4)][L / 4] low, M[2 (L % 4) + 1][L / 4] high.
uint32_t movmatrix_trans(uint32_t a) {
    uint32_t out = 0;
    emu::warp_collective(0xffffffffu, "movmatrix.trans", &a, 1, &out, 1,
                         [](const uint32_t (*ins)[16], uint32_t (*outs)[16], uint32_t) {
                             auto at = [&](uint32_t row, uint32_t col) -> uint32_t {
                                 const uint32_t w = ins[4u * row + col / 2u][0];
                                 return (col & 1u) ? w >> 16 : w & 0xffffu;
                             };
                             for (uint32_t l = 0; l < 32u; ++l) {
                                 const uint32_t r = 2u * (l % 4u), c = l / 4u;
                                 outs[l][0] = at(r, c) | (at(r + 1u, c) << 16);
                             }
                         });
    return out;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"), with
// groupID g = lane / 4 and threadID_in_group t = lane % 4:
//   A (16x16): a_i, i = 0..7, row g for i in {0,1,4,5} else g + 8, column
//              2t + (i & 1) + 8 for i >= 4; register i/2 holds a_i (i even:
//              low half);
//   B (16x8):  b_i, i = 0..3, row 2t + (i & 1) + 8 for i >= 2, column g;
//   C, D (16x8, f32): c_i row g for i < 2 else g + 8, column 2t + (i & 1).
// Products are exact in double and summed in double, rounded to f32 once.
void mma_m16n8k16_f32(MmaType type, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                      const float (&c)[4]) {
    uint32_t in[10];
    for (int j = 0; j < 4; ++j) in[j] = a[j];
    in[4] = b0;
    in[5] = b1;
    for (int j = 0; j < 4; ++j) memcpy(&in[6 + j], &c[j], 4);
    uint32_t out[4];
    emu::warp_collective(
        0xffffffffu, type == kMmaBf16 ? "mma.m16n8k16.bf16" : "mma.m16n8k16.f16", in, 10, out, 4,
        [type](const uint32_t (*ins)[16], uint32_t (*outs)[16], uint32_t) {
            auto value = [type](uint32_t word, uint32_t hi) -> double {
                const uint16_t h = (uint16_t)(hi ? word >> 16 : word & 0xffffu);
                return type == kMmaBf16 ? (double)fp::bf16_to_f32(h) : (double)fp::f16_to_f32(h);
            };
            double A[16][16], B[16][8], C[16][8];
            for (uint32_t src = 0; src < 32u; ++src) {
                const uint32_t g = src / 4u, t = src % 4u;
                for (uint32_t i = 0; i < 8u; ++i) {
                    const uint32_t row = (i < 2u || (i >= 4u && i < 6u)) ? g : g + 8u;
                    const uint32_t col = 2u * t + (i & 1u) + (i >= 4u ? 8u : 0u);
                    A[row][col] = value(ins[src][i / 2u], i & 1u);
                }
                for (uint32_t i = 0; i < 4u; ++i) {
                    const uint32_t k = 2u * t + (i & 1u) + (i >= 2u ? 8u : 0u);
                    B[k][g] = value(ins[src][4u + i / 2u], i & 1u);
                }
                for (uint32_t i = 0; i < 4u; ++i) {
                    float f;
                    memcpy(&f, &ins[src][6u + i], 4);
                    C[i < 2u ? g : g + 8u][2u * t + (i & 1u)] = f;
                }
            }
            for (uint32_t l = 0; l < 32u; ++l) {
                const uint32_t g = l / 4u, t = l % 4u;
                for (uint32_t i = 0; i < 4u; ++i) {
                    const uint32_t row = i < 2u ? g : g + 8u, col = 2u * t + (i & 1u);
                    double acc = C[row][col];
                    for (uint32_t k = 0; k < 16u; ++k) acc += A[row][k] * B[k][col];
                    const float f = (float)acc;
                    memcpy(&outs[l][i], &f, 4);
                }
            }
        });
    for (int i = 0; i < 4; ++i) memcpy(&d[i], &out[i], 4);
}

// ex2.approx.ftz.f32: 2^x; subnormal inputs and results flush to +-0
// (-inf gives +0, +inf gives +inf, NaN gives NaN). Computed exactly here;
// the GPU's is within 2 ulp, which no test may rely on either way.
float ex2_approx_ftz(float x) {
    if (isnan(x)) return fp::bits_f32(0x7fffffffu);
    if (fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    const float y = (float)exp2((double)x);
    if (fpclassify(y) == FP_SUBNORMAL) return 0.0f;
    return y;
}

uint32_t dynamic_smem_size() { return emu::dynamic_size(); }
uint32_t dynamic_smem_base() { return emu::dynamic_base(); }

// griddepcontrol.launch_dependents / .wait: the grids run to completion in
// launch order here, so the wait has nothing to wait for; both are noted
// for the check of a programmatic dependent launch's early accesses (emu.h).
void griddep_launch_dependents() { emu::griddep_launch_dependents(); }
void griddep_wait() { emu::griddep_wait(); }
uint64_t globaltimer() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// cvt.rn.f16x2.e4m3x2 d, a: the upper byte of a to the upper half of d, the
// lower byte to the lower half; every E4M3 value is exact in f16.
uint32_t cvt_f16x2_e4m3x2(uint16_t a) {
    return (uint32_t)fp::e4m3_to_f16((uint8_t)(a & 0xffu)) | ((uint32_t)fp::e4m3_to_f16((uint8_t)(a >> 8)) << 16);
}
// cvt.rn.satfinite.e4m3x2.f32 d, a, b: a to the upper byte, b to the lower.
uint16_t cvt_e4m3x2_f32_satfinite(float a, float b) {
    return (uint16_t)(((uint32_t)fp::f32_to_e4m3_satfinite(a) << 8) | fp::f32_to_e4m3_satfinite(b));
}

void unsupported(const char *what) { emu::fault(FaultKind::kUnsupported, 0, "%s", what); }

}  // namespace cu
}  // namespace emu
