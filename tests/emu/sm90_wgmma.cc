// sm90_wgmma.cc - emulation of wgmma.mma_async (bf16 x bf16 -> f32, A and B
// from shared memory, or A from registers: the RS form), wgmma.fence / commit_group / wait_group and
// fence.proxy.async, from the PTX ISA ("Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Instructions": matrix descriptors, the 128-byte
// swizzle layouts, the m64nNk16 accumulator fragment). What it makes
// observable: tests/emu/sm90_ptx_emu.h. Its tests, from hand-worked values:
// tests/emu/sm90_wgmma_test.cc.
//
// Not instrumented (part of :kernel_runtime): it reads shared memory
// through emu::shared, so those reads are bounds-, alignment-, race- and
// initialisation-checked as the completing thread's.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/sm90_ptx_emu.h"

namespace emu {
namespace sm90 {
namespace {

constexpr uint32_t kWarpgroup = 128;
constexpr uint32_t kMaxWarpgroups = 8;  // 1024 threads

struct Op {
    uint32_t n = 0, trans_a = 0, trans_b = 0, accumulate = 0;
    bool rs = false;                         // A from registers (desc_a unused)
    uint64_t desc_a = 0, desc_b = 0;
    uint32_t a_regs[kWarpgroup][4] = {};     // RS: each thread's A registers at issue
    const uint32_t *a_ptr[kWarpgroup] = {};  // ... and where they live (checked unchanged at completion)
    uint32_t issued_by = 0;                  // threads that issued it
    float *ptr[kWarpgroup] = {};             // each thread's accumulator
    int prev[kWarpgroup];                    // the op whose result this one accumulates onto, or -1
    std::vector<float> in, out;              // [thread][n / 2]
};

struct Warpgroup {
    std::vector<Op> ops;                     // issued, in order; [done, ops.size()) pending
    size_t done = 0;
    std::vector<size_t> group_end;           // op count at each commit_group
    uint32_t issued[kWarpgroup] = {};        // ops issued by each thread
    uint32_t commits[kWarpgroup] = {};       // commit_groups by each thread
};

struct State : BlockLocalBase {
    Warpgroup wg[kMaxWarpgroups];
    uint64_t fences = 0, proxy_fences = 0;
};

const char kStateKey = 0;

void on_exit(uint32_t tid);

State &state() {
    on_thread_exit(on_exit);  // once per run: the emulator keeps each hook once
    return block_local<State>(&kStateKey);
}

// The calling thread's warpgroup and its index in it.
Warpgroup &my_warpgroup(uint32_t *lt) {
    const uint32_t t = thread(), threads = block_threads();
    if (threads % kWarpgroup != 0)
        fault(FaultKind::kCollective, t,
              "wgmma: the block has %u threads, not a whole number of 128-thread warpgroups", threads);
    *lt = t % kWarpgroup;
    return state().wg[t / kWarpgroup];
}

struct Desc {
    uint32_t start, lbo, sbo, base_offset, swizzle;
};

// The descriptor holds bits 17..4 of the start address: a shared window of
// at most 256 KiB, as a GPU block's is (227 KiB at most on sm_90). The
// emulated window can be larger: it holds the static __shared__ variables
// of every kernel of the family before the dynamic shared memory (113 KiB
// for mla_prefill), so the address is taken modulo 2^18 into the dynamic
// shared memory, where it is unique (that region is under 256 KiB); an
// address that falls in no candidate there is kept as it is.
uint32_t resolve(uint32_t addr_mod) {
    const uint64_t lo = dynamic_base(), hi = lo + dynamic_size();
    for (uint64_t a = addr_mod; a < hi + (1u << 18); a += 1u << 18)
        if (a >= lo && a < hi) return (uint32_t)a;
    return addr_mod;
}

Desc decode(uint64_t d) {
    Desc x;
    x.start = resolve((uint32_t)(d & 0x3fffu) << 4);
    x.lbo = (uint32_t)((d >> 16) & 0x3fffu) << 4;
    x.sbo = (uint32_t)((d >> 32) & 0x3fffu) << 4;
    x.base_offset = (uint32_t)((d >> 49) & 7u);
    x.swizzle = (uint32_t)(d >> 62);
    return x;
}

// 128-byte swizzle (Swizzle<3,4,3> on byte addresses): the 16-byte chunk
// bits [6:4] are XORed with bits [9:7], the row within the 1024-byte pattern.
uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

// Byte address of element (row, k) of a K-major operand: rows `row` of 8 at
// SBO, 128 bytes a row, 8 elements per 16-byte chunk ((8,m),(T,2k)):((8T,SBO),(1,T)).
uint32_t k_major(const Desc &d, uint32_t row, uint32_t k) {
    return swizzle128(d.start + (row / 8) * d.sbo + (row % 8) * 128u + (k / 8) * 16u + (k % 8) * 2u);
}
// Element (n, k) of an MN-major operand: n contiguous in 64-element slabs
// LBO apart, k rows 128 bytes apart in groups of 8 SBO apart
// ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)).
uint32_t mn_major(const Desc &d, uint32_t n, uint32_t k) {
    return swizzle128(d.start + (n / 64) * d.lbo + ((n % 64) / 8) * 16u + (n % 8) * 2u + (k % 8) * 128u +
                      (k / 8) * d.sbo);
}

float bf16_at(uint32_t addr) {
    uint16_t h;
    std::memcpy(&h, shared(addr, 2, 2, Access::kRead), 2);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void check_desc(const Desc &d, const char *which) {
    if (d.swizzle != 1)
        fault(FaultKind::kUnsupported, d.start,
              "wgmma: the %s descriptor's swizzle mode is %u; the emulator models the 128-byte swizzle (1) only",
              which, d.swizzle);
    if (d.base_offset != 0)
        fault(FaultKind::kUnsupported, d.start,
              "wgmma: the %s descriptor's base offset is %u; the emulator models patterns on 1024-byte "
              "boundaries (0) only",
              which, d.base_offset);
}

// Runs op i: D = A B (+ the accumulator it takes), into every thread's registers.
void execute(Warpgroup &w, size_t i) {
    Op &op = w.ops[i];
    if (op.issued_by != kWarpgroup)
        fault(FaultKind::kCollective, op.desc_a,
              "wgmma.mma_async executed by %u of the warpgroup's 128 threads (it is .sync.aligned)", op.issued_by);
    const Desc b = decode(op.desc_b);
    check_desc(b, "B");
    const uint32_t n = op.n;
    std::vector<float> A(64 * 16), B(16 * n);
    if (op.rs) {
        // The ISA's matrix-A register fragment (.bf16, m64nNk16): register i of
        // thread t holds rows 16 (t / 32) + (t % 32) / 4 (+ 8 for odd i) and
        // columns 2 (t % 4) (+ 8 for i >= 2), + 1 in its high half.
        for (uint32_t t = 0; t < kWarpgroup; ++t) {
            if (std::memcmp(op.a_ptr[t], op.a_regs[t], sizeof op.a_regs[t]) != 0)
                fault(FaultKind::kUnsupported, t,
                      "wgmma.mma_async (A from registers): thread %u of the warpgroup changed its A registers "
                      "before the product completed (the hardware reads them until wgmma.wait_group)",
                      t);
            const uint32_t wp = t / 32, g = (t % 32) / 4, q = t % 4;
            for (uint32_t i = 0; i < 4; ++i)
                for (uint32_t h = 0; h < 2; ++h) {
                    const uint32_t row = 16 * wp + g + 8 * (i & 1), k = 2 * q + 8 * (i >> 1) + h;
                    const uint32_t u = (op.a_regs[t][i] >> (16 * h)) << 16;
                    float f;
                    std::memcpy(&f, &u, 4);
                    A[row * 16 + k] = f;
                }
        }
    } else {
        const Desc a = decode(op.desc_a);
        check_desc(a, "A");
        // imm-trans-a 1: A is M-major, the layout of an N-major B with M for N.
        for (uint32_t r = 0; r < 64; ++r)
            for (uint32_t k = 0; k < 16; ++k) A[r * 16 + k] = bf16_at(op.trans_a ? mn_major(a, r, k) : k_major(a, r, k));
    }
    for (uint32_t k = 0; k < 16; ++k)
        for (uint32_t c = 0; c < n; ++c) B[k * n + c] = bf16_at(op.trans_b ? mn_major(b, c, k) : k_major(b, c, k));
    const uint32_t nf = n / 2;
    op.out.assign((size_t)kWarpgroup * nf, 0.0f);
    for (uint32_t t = 0; t < kWarpgroup; ++t) {
        const uint32_t wp = t / 32, g = (t % 32) / 4, q = t % 4;
        const float *in = op.prev[t] >= 0 ? &w.ops[(size_t)op.prev[t]].out[(size_t)t * nf] : &op.in[(size_t)t * nf];
        for (uint32_t j = 0; j < nf; ++j) {
            const uint32_t i8 = j / 4, e = j % 4;
            const uint32_t row = 16 * wp + g + 8 * (e >> 1), col = 8 * i8 + 2 * q + (e & 1);
            double s = 0.0;  // bf16 products are exact in fp32; the sum in double, rounded once
            for (uint32_t k = 0; k < 16; ++k) s += (double)A[row * 16 + k] * (double)B[k * n + col];
            const float acc = op.accumulate ? in[j] : 0.0f;
            op.out[(size_t)t * nf + j] = (float)((double)acc + s);
        }
        std::memcpy(op.ptr[t], &op.out[(size_t)t * nf], nf * sizeof(float));
    }
}

void on_exit(uint32_t tid) {
    BlockLocalBase *b = block_local_get(&kStateKey);
    if (b == nullptr) return;
    Warpgroup &w = static_cast<State *>(b)->wg[(tid / kWarpgroup) % kMaxWarpgroups];
    const uint32_t lt = tid % kWarpgroup;
    if (w.issued[lt] > w.done)
        fault(FaultKind::kUnsupported, tid,
              "wgmma: thread %u returned with %u wgmma.mma_async not completed by a wgmma.wait_group (their "
              "results are lost)",
              tid, (unsigned)(w.issued[lt] - w.done));
}

}  // namespace
}  // namespace sm90
}  // namespace emu

using namespace emu;
using namespace emu::sm90;

namespace {

// Issues one product of the calling thread (a: its A registers for the RS form, else null).
void issue(float *d, uint32_t n, uint32_t trans_a, uint32_t trans_b, uint64_t desc_a, const uint32_t *a,
           uint64_t desc_b, uint32_t accumulate) {
    uint32_t lt = 0;
    Warpgroup &w = my_warpgroup(&lt);
    const size_t idx = w.issued[lt]++;
    const bool rs = a != nullptr;
    if (idx == w.ops.size()) {
        w.ops.emplace_back();
        Op &op = w.ops.back();
        op.n = n;
        op.trans_a = trans_a;
        op.trans_b = trans_b;
        op.accumulate = accumulate != 0u;
        op.rs = rs;
        op.desc_a = desc_a;
        op.desc_b = desc_b;
        for (int &p : op.prev) p = -1;
        op.in.assign((size_t)kWarpgroup * (n / 2), 0.0f);
    }
    Op &op = w.ops[idx];
    if (op.n != n || op.trans_a != trans_a || op.trans_b != trans_b || op.rs != rs || op.desc_a != desc_a || op.desc_b != desc_b ||
        op.accumulate != (accumulate != 0u))
        fault(FaultKind::kCollective, desc_a,
              "wgmma.mma_async number %lu of the warpgroup differs between its threads (shape m64n%u vs m64n%u, "
              "A from %s vs %s, descriptors, transpose or scale-d): it is .sync.aligned",
              (unsigned long)idx, n, op.n, rs ? "registers" : "shared memory", op.rs ? "registers" : "shared memory");
    if (rs) {
        std::memcpy(op.a_regs[lt], a, sizeof op.a_regs[lt]);
        op.a_ptr[lt] = a;
    }
    op.ptr[lt] = d;
    op.issued_by++;
    // An accumulator still pending from an earlier op: this one adds onto that result.
    for (size_t j = idx; j-- > w.done;)
        if (w.ops[j].ptr[lt] == d) {
            op.prev[lt] = (int)j;
            break;
        }
    if (op.prev[lt] < 0) std::memcpy(&op.in[(size_t)lt * (n / 2)], d, (n / 2) * sizeof(float));
    // Until its wait_group the accumulator is the hardware's: reading it is an error.
    for (uint32_t j = 0; j < n / 2; ++j) d[j] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

extern "C" void kl_emu_sm90_wgmma_bf16_ss(float *d, uint32_t n, uint32_t trans_b, uint64_t desc_a, uint64_t desc_b,
                                          uint32_t accumulate) {
    issue(d, n, 0, trans_b, desc_a, nullptr, desc_b, accumulate);
}

extern "C" void kl_emu_sm90_wgmma_bf16_ss_ta(float *d, uint32_t n, uint32_t trans_b, uint64_t desc_a, uint64_t desc_b,
                                             uint32_t accumulate) {
    issue(d, n, 1, trans_b, desc_a, nullptr, desc_b, accumulate);
}

extern "C" void kl_emu_sm90_wgmma_bf16_rs(float *d, uint32_t n, uint32_t trans_b, const uint32_t *a, uint64_t desc_b,
                                          uint32_t accumulate) {
    issue(d, n, 0, trans_b, 0, a, desc_b, accumulate);
}

extern "C" void kl_emu_sm90_wgmma_fence(void) { state().fences++; }

extern "C" void kl_emu_sm90_wgmma_commit(void) {
    uint32_t lt = 0;
    Warpgroup &w = my_warpgroup(&lt);
    const uint32_t k = w.commits[lt]++;
    if (k == w.group_end.size())
        w.group_end.push_back(w.issued[lt]);
    else if (w.group_end[k] != w.issued[lt])
        fault(FaultKind::kCollective, k,
              "wgmma.commit_group number %u closes %u products in one thread and %lu in another", k, w.issued[lt],
              (unsigned long)w.group_end[k]);
}

extern "C" void kl_emu_sm90_wgmma_wait(uint32_t pending) {
    uint32_t lt = 0;
    Warpgroup &w = my_warpgroup(&lt);
    const uint32_t wg_index = thread() / kWarpgroup;
    const uint32_t my_commits = w.commits[lt];
    barrier(0x77676d6d61000000ull | wg_index, kWarpgroup, "wgmma.wait_group (all 128 threads of the warpgroup)",
            [&w, pending, my_commits]() {
                for (uint32_t t = 0; t < kWarpgroup; ++t)
                    if (w.commits[t] != my_commits)
                        fault(FaultKind::kCollective, t,
                              "wgmma.wait_group: threads of the warpgroup committed %u and %u groups", my_commits,
                              w.commits[t]);
                if (my_commits <= pending) return;
                const size_t end = w.group_end[my_commits - pending - 1];
                for (; w.done < end; ++w.done) execute(w, w.done);
            });
}

extern "C" void kl_emu_sm90_fence_proxy_async(void) { state().proxy_fences++; }
