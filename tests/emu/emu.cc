// emu.cc - the emulator's runtime: fibers and their scheduler, barriers and
// warp collectives, the memory checks behind every access of a kernel's
// code, cp.async groups, fault reports. API and overview: emu.h; manual:
// docs/EMULATOR.md.
//
// One file past 600 lines, on purpose: the scheduler, the happens-before
// clocks and the access checks share one state and its invariants (which
// fiber runs, which block is live), and splitting them would spread those
// invariants over several files' statics. Sections are marked.
//
// This file is compiled WITHOUT the kernels' instrumentation: its own
// accesses are the emulator's, never checked as the kernel's.
#include "tests/emu/emu.h"

// This file IS the instrumentation's runtime (the __tsan_* callbacks below);
// under a real sanitizer (--config=tsan / asan) it would clash with it.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#error "the CPU emulator does not build under --config=tsan or --config=asan: it defines the instrumentation callbacks itself (docs/EMULATOR.md)"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// Bounds of the section every emulated static __shared__ variable lives in
// (kernel_prelude.h); GNU ld defines these when the section exists, and
// they stay NULL otherwise.
extern "C" {
extern char __start_kl_emu_shared[] __attribute__((weak));
extern char __stop_kl_emu_shared[] __attribute__((weak));
}

namespace emu {
namespace {

// ============================================================================
// Fibers: a stack per emulated thread and a context switch.
// ============================================================================

#if defined(__x86_64__)
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *from and resumes `to` (a stack
// pointer saved the same way). No system call (swapcontext makes one per
// switch to save the signal mask, which dominated the emulator's run time).
extern "C" void kl_emu_switch(void **from, void *to);
asm(R"(
    .text
    .globl kl_emu_switch
    .type kl_emu_switch, @function
kl_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size kl_emu_switch, .-kl_emu_switch
)");
#endif

void fiber_entry();

struct Fiber {
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t ctx;
#endif
    unsigned char *stack_lo = nullptr;
    size_t stack_size = 0;
};

// ============================================================================
// State of the running launch and block.
// ============================================================================

constexpr uint16_t kNoThread = 0xFFFF;

// Per shared byte: the last writer and up to two readers since, each with
// the writer's/reader's own clock at the access.
struct Shadow {
    uint16_t w, r1, r2, written;
    uint32_t wc, r1c, r2c;
    // Asynchronous copies in flight over this byte (cp.async.bulk*): one
    // still to write it (no thread may touch it), or ones still to read it
    // (no thread may write it). async_begin/async_end.
    uint16_t async_writes, async_reads;
};

struct AsyncCopy {
    Access copy_does;  // kWrite: the copy writes the ranges; kRead: it reads them
    std::string what;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // shared-window [addr, addr + bytes)
};

struct Copy {
    uint32_t dst;
    const unsigned char *src;
    uint32_t bytes, src_bytes;
};

struct Waiting {
    bool waiting = false;
    uint64_t key = 0;
    std::function<std::string()> what;
};

struct ThreadState {
    Fiber fiber;
    bool done = false;
    bool griddep_waited = false;  // executed griddepcontrol.wait
    Waiting wait;
    std::vector<Copy> open_copies;
    std::vector<std::vector<Copy>> committed;
};

struct BarrierState {
    uint32_t count = 0, arrived = 0;
    uint64_t generation = 0;
    std::vector<uint32_t> members;
    const char *what = "";
};

struct CollectiveSlot {
    bool busy = false;
    uint32_t mask = 0, arrived = 0;
    uint64_t generation = 0;
    const char *op = nullptr;
    uint32_t in[32][16];
    uint32_t out[32][16];
};

struct WarpState {
    std::vector<CollectiveSlot> slots;
};

struct Buf {
    uintptr_t begin, end;
    Access allowed;
    std::string name;
};

// Byte ranges [begin, end) of global memory, adjacent and overlapping ones
// merged (a grid's reads or writes, for the PDL check).
class Ranges {
  public:
    void add(uintptr_t a, uintptr_t b) {
        auto it = m_.upper_bound(a);
        if (it != m_.begin()) {
            auto p = std::prev(it);
            if (p->second >= a) {
                if (p->second >= b) return;  // already held (the common case: a row read again)
                a = p->first;
                it = p;
            }
        }
        uintptr_t end = b;
        while (it != m_.end() && it->first <= end) {
            end = std::max(end, it->second);
            it = m_.erase(it);
        }
        m_[a] = end;
    }
    // The first byte of [a, b) held, if any.
    bool first_in(uintptr_t a, uintptr_t b, uintptr_t *at) const {
        auto it = m_.upper_bound(a);
        if (it != m_.begin() && std::prev(it)->second > a) {
            *at = a;
            return true;
        }
        if (it != m_.end() && it->first < b) {
            *at = it->first;
            return true;
        }
        return false;
    }
    void erase(uintptr_t a, uintptr_t b) {
        auto it = m_.upper_bound(a);
        if (it != m_.begin() && std::prev(it)->second > a) --it;
        std::vector<std::pair<uintptr_t, uintptr_t>> keep;
        while (it != m_.end() && it->first < b) {
            if (it->first < a) keep.emplace_back(it->first, a);
            if (it->second > b) keep.emplace_back(b, it->second);
            it = m_.erase(it);
        }
        for (const auto &k : keep) m_[k.first] = k.second;
    }
    void clear() { m_.clear(); }

  private:
    std::map<uintptr_t, uintptr_t> m_;  // begin -> end
};

// A grid's global accesses: reads and writes (an atomic is both), and its
// kernel, for reports.
struct GridAccesses {
    Ranges reads, writes;
    std::string kernel;
    void clear() {
        reads.clear();
        writes.clear();
        kernel.clear();
    }
    void erase(uintptr_t a, uintptr_t b) {
        reads.erase(a, b);
        writes.erase(a, b);
    }
};

struct State {
    // launch
    bool running = false;  // inside launch()
    Dim3 grid{1, 1, 1}, block{1, 1, 1}, block_idx{0, 0, 0};
    uint32_t nthreads = 0;
    void (*body)(const void *) = nullptr;
    const void *params = nullptr;
    const std::function<void()> *fn_body = nullptr;
    // shared memory
    uintptr_t sec_lo = 0, sec_size = 0;  // static __shared__ section
    unsigned char *dyn = nullptr;
    uint32_t dyn_size = 0, dyn_base = 0;
    std::vector<Shadow> shadow;  // indexed by shared-window address
    // threads
    std::vector<ThreadState> threads;
    unsigned char *stacks = nullptr;
    size_t stacks_bytes = 0, stack_bytes = 0;
    uint32_t stacks_count = 0;
    int current = -1;  // running fiber, -1: the scheduler
    Fiber scheduler;
    bool progress = false;
    // synchronisation
    std::vector<uint32_t> vc;  // nthreads x nthreads vector clocks
    std::map<uint64_t, BarrierState> barriers;
    std::vector<WarpState> warps;
    std::unordered_map<const void *, std::unique_ptr<BlockLocalBase>> locals;
    std::vector<void (*)(uint32_t)> exit_hooks;
    std::map<uint32_t, AsyncCopy> async_copies;  // in flight, by id
    uint32_t next_async = 1;
    // memory
    std::map<uintptr_t, Buf> buffers;
    // declared extents of the launch (set_declared_extents): checked while
    // `extents_armed`, kept after it for last_declared_extents()
    std::string extents_kernel;
    std::vector<DeclaredExtent> extents;
    bool extents_armed = false;
    // programmatic dependent launch (set_programmatic_launch; emu.h)
    bool next_programmatic = false;  // for the next launch
    GridDependency dep;              // the running (then the last) launch's
    bool block_triggered = false;    // the running block executed launch_dependents
    std::string grid_name;           // the running launch's kernel, for reports
    GridAccesses grid_acc;           // the running launch's global accesses
    std::vector<GridAccesses> in_flight;  // earlier grids that may still run beside it, newest last
    // outcome
    Fault fault;
    bool faulted = false;
};

State &S() {
    static State *s = new State();  // never destroyed: fibers may be abandoned mid-call
    return *s;
}

Options g_options;

uint32_t *clock_of(uint32_t t) { return &S().vc[(size_t)t * S().nthreads]; }

std::string dim_str(Dim3 d) {
    char b[64];
    snprintf(b, sizeof b, "(%u, %u, %u)", d.x, d.y, d.z);
    return b;
}

Dim3 tid_to_idx(uint32_t t) {
    const State &s = S();
    return Dim3{t % s.block.x, (t / s.block.x) % s.block.y, t / (s.block.x * s.block.y)};
}

std::string thread_str(uint32_t t) {
    char b[160];
    const Dim3 i = tid_to_idx(t);
    snprintf(b, sizeof b, "thread %u (threadIdx (%u, %u, %u), warp %u, lane %u) of block %s", t, i.x, i.y, i.z,
             t / 32u, t % 32u, dim_str(S().block_idx).c_str());
    return b;
}

// ============================================================================
// Faults
// ============================================================================

void switch_to_scheduler();

[[noreturn]] void raise_fault(FaultKind kind, uint32_t tid, uint64_t address, const std::string &what) {
    State &s = S();
    if (!s.faulted) {
        s.faulted = true;
        s.fault.kind = kind;
        s.fault.block = s.block_idx;
        s.fault.thread = tid;
        s.fault.address = address;
        s.fault.message = std::string("emulator: ") + fault_kind_name(kind) + ": " + what;
        if (s.current >= 0) s.fault.message += "; " + thread_str(tid);
    }
    if (s.current >= 0) {
        switch_to_scheduler();  // the scheduler abandons the block; never resumed
    }
    // Outside a fiber (launch setup): unwind by longjmp-free means is not
    // possible here, so the launch checks s.faulted after each setup step.
    // Reaching this point means a caller outside any launch misused the API.
    fprintf(stderr, "%s\n", s.fault.message.c_str());
    abort();
}

std::string vformat(const char *fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string r = vformat(fmt, ap);
    va_end(ap);
    return r;
}

uint32_t cur() { return (uint32_t)S().current; }

// ============================================================================
// Scheduler
// ============================================================================

void switch_to(Fiber &from, Fiber &to) {
#if defined(__x86_64__)
    kl_emu_switch(&from.sp, to.sp);
#else
    swapcontext(&from.ctx, &to.ctx);
#endif
}

void switch_to_scheduler() {
    State &s = S();
    ThreadState &t = s.threads[s.current];
    switch_to(t.fiber, s.scheduler);
}

void yield() { switch_to_scheduler(); }

void ensure_stacks(uint32_t n) {
    State &s = S();
    const size_t per = ((size_t)g_options.stack_bytes + 4095u) / 4096u * 4096u + 4096u;  // + a guard page
    if (s.stacks != nullptr && s.stacks_count >= n && s.stack_bytes == per) return;
    if (s.stacks != nullptr) munmap(s.stacks, s.stacks_bytes);
    s.stacks_bytes = per * n;
    void *m = mmap(nullptr, s.stacks_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "emulator: cannot map %zu bytes of fiber stacks\n", s.stacks_bytes);
        abort();
    }
    s.stacks = static_cast<unsigned char *>(m);
    s.stack_bytes = per;
    s.stacks_count = n;
    for (uint32_t i = 0; i < n; ++i) mprotect(s.stacks + (size_t)i * per, 4096, PROT_NONE);
}

void init_fiber(uint32_t t) {
    State &s = S();
    Fiber &f = s.threads[t].fiber;
    f.stack_lo = s.stacks + (size_t)t * s.stack_bytes + 4096u;
    f.stack_size = s.stack_bytes - 4096u;
#if defined(__x86_64__)
    // The frame kl_emu_switch pops: MXCSR/FPU control word, r15..rbp, then
    // the "return address" fiber_entry, 16-byte aligned as after a call.
    uintptr_t top = ((uintptr_t)(f.stack_lo + f.stack_size)) & ~(uintptr_t)15u;
    uintptr_t ret = top - 16u;
    uint64_t *frame = reinterpret_cast<uint64_t *>(ret - 56u);
    const uint32_t csr[2] = {0x1F80u, 0x037Fu};
    memcpy(&frame[0], csr, 8);
    for (int i = 1; i < 7; ++i) frame[i] = 0;
    *reinterpret_cast<uint64_t *>(ret) = (uint64_t)(uintptr_t)&fiber_entry;
    f.sp = frame;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack_lo;
    f.ctx.uc_stack.ss_size = f.stack_size;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
#endif
}

void finish_thread_copies(uint32_t t);

void fiber_entry() {
    State &s = S();
    if (s.fn_body != nullptr)
        (*s.fn_body)();
    else
        s.body(s.params);
    const uint32_t t = cur();
    for (void (*h)(uint32_t) : s.exit_hooks) h(t);
    finish_thread_copies(t);
    s.threads[t].done = true;
    s.progress = true;
    for (;;) switch_to_scheduler();  // never resumed
}

std::string deadlock_report(uint32_t *culprit, uint64_t *key) {
    State &s = S();
    // Group consecutive threads with the same state.
    std::string out;
    int first_waiting = -1;
    for (uint32_t t = 0; t < s.nthreads; ++t)
        if (!s.threads[t].done && s.threads[t].wait.waiting) {
            first_waiting = (int)t;
            break;
        }
    *key = first_waiting >= 0 ? s.threads[first_waiting].wait.key : 0;
    *culprit = 0;
    bool have_culprit = false;
    uint32_t t = 0;
    while (t < s.nthreads) {
        const ThreadState &a = s.threads[t];
        const std::string what = a.done ? std::string("exited") : a.wait.what ? "waits at " + a.wait.what() : "runs";
        uint32_t e = t + 1;
        while (e < s.nthreads) {
            const ThreadState &b = s.threads[e];
            const std::string w2 = b.done ? std::string("exited") : b.wait.what ? "waits at " + b.wait.what() : "runs";
            if (w2 != what) break;
            ++e;
        }
        if (!have_culprit && first_waiting >= 0 && (a.done || a.wait.key != *key)) {
            *culprit = t;
            have_culprit = true;
        }
        if (!out.empty()) out += "; ";
        out += e - t == 1 ? format("thread %u %s", t, what.c_str()) : format("threads %u-%u %s", t, e - 1, what.c_str());
        t = e;
    }
    if (!have_culprit && first_waiting >= 0) *culprit = (uint32_t)first_waiting;
    return out;
}

void reset_block_state() {
    State &s = S();
    const uint32_t n = s.nthreads;
    s.threads.clear();
    s.threads.resize(n);
    s.barriers.clear();
    s.warps.assign((n + 31u) / 32u, WarpState());
    s.vc.assign((size_t)n * n, 0u);
    for (uint32_t t = 0; t < n; ++t) clock_of(t)[t] = 1u;
    s.locals.clear();
    s.block_triggered = false;
    // Stale garbage, as a GPU would have it; and nothing written yet.
    if (s.sec_size) memset((void *)s.sec_lo, 0xA5, s.sec_size);
    if (s.dyn_size) memset(s.dyn, 0xA5, s.dyn_size);
    s.async_copies.clear();
    const Shadow none{kNoThread, kNoThread, kNoThread, 0, 0, 0, 0, 0, 0};
    s.shadow.assign((size_t)s.dyn_base + s.dyn_size, none);
}

// Runs every thread of the current block to completion, a fault or a deadlock.
void run_block() {
    State &s = S();
    reset_block_state();
    for (uint32_t t = 0; t < s.nthreads; ++t) init_fiber(t);
    for (;;) {
        bool alive = false;
        s.progress = false;
        for (uint32_t t = 0; t < s.nthreads && !s.faulted; ++t) {
            if (s.threads[t].done) continue;
            alive = true;
            s.current = (int)t;
            switch_to(s.scheduler, s.threads[t].fiber);
            s.current = -1;
        }
        if (s.faulted || !alive) break;
        if (!s.progress) {
            uint32_t culprit = 0;
            uint64_t key = 0;
            const std::string r = deadlock_report(&culprit, &key);
            s.faulted = true;
            s.fault.kind = FaultKind::kDeadlock;
            s.fault.block = s.block_idx;
            s.fault.thread = culprit;
            s.fault.address = key;
            s.fault.message = "emulator: deadlock: no thread of block " + dim_str(s.block_idx) +
                              " can go on (a barrier or collective some threads never reach): " + r;
            break;
        }
    }
    s.current = -1;
    s.locals.clear();
}

// ============================================================================
// Shared memory: bounds, alignment, happens-before
// ============================================================================

[[noreturn]] void shared_fault(FaultKind k, uint32_t tid, uint32_t addr, const std::string &what) {
    raise_fault(k, tid, addr, what);
}

std::string shared_layout() {
    const State &s = S();
    return format("static __shared__ [0, %lu), dynamic [%u, %u)", (unsigned long)s.sec_size, s.dyn_base,
                  s.dyn_base + s.dyn_size);
}

bool in_shared_window(uint32_t addr, uint32_t bytes) {
    const State &s = S();
    const uint64_t end = (uint64_t)addr + bytes;
    if (end <= s.sec_size) return true;
    return addr >= s.dyn_base && end <= (uint64_t)s.dyn_base + s.dyn_size;
}

unsigned char *window_ptr(uint32_t addr) {
    State &s = S();
    if (addr < s.sec_size) return reinterpret_cast<unsigned char *>(s.sec_lo) + addr;
    return s.dyn + (addr - s.dyn_base);
}

// The copy in flight over shared byte `b` that `writes_it` (or reads it), for reports.
const AsyncCopy *async_over(uint32_t b, bool writes_it) {
    for (const auto &kv : S().async_copies) {
        if ((kv.second.copy_does == Access::kWrite) != writes_it) continue;
        for (const auto &r : kv.second.ranges)
            if (b >= r.first && b - r.first < r.second) return &kv.second;
    }
    return nullptr;
}

[[noreturn]] void async_conflict(uint32_t tid, uint32_t b, uint32_t addr, uint32_t bytes, bool write,
                                 bool copy_writes) {
    const AsyncCopy *c = async_over(b, copy_writes);
    const std::string what = c ? c->what : std::string("an asynchronous copy");
    if (copy_writes)
        shared_fault(FaultKind::kSharedRace, tid, b,
                     format("%s of shared byte %u (access of %u bytes at %u) while %s is still writing it (its data "
                            "land when a wait on its mbarrier completes the phase)",
                            write ? "write" : "read", b, bytes, addr, what.c_str()));
    shared_fault(FaultKind::kSharedRace, tid, b,
                 format("write of shared byte %u (access of %u bytes at %u) while %s is still reading it (a "
                        "cp.async.bulk.wait_group.read of its group comes first)",
                        b, bytes, addr, what.c_str()));
}

void record_shared(uint32_t tid, uint32_t addr, uint32_t bytes, bool write) {
    State &s = S();
    if (!g_options.check_races && !g_options.check_uninitialised) return;
    const uint32_t *vc = clock_of(tid);
    const uint32_t mine = vc[tid];
    for (uint32_t i = 0; i < bytes; ++i) {
        Shadow &sh = s.shadow[addr + i];
        if (g_options.check_races && (sh.async_writes || (write && sh.async_reads)))
            async_conflict(tid, addr + i, addr, bytes, write, sh.async_writes != 0);
        if (!write) {
            if (g_options.check_uninitialised && !sh.written)
                shared_fault(FaultKind::kSharedUninitialised, tid, addr + i,
                             format("read of shared byte %u (access of %u bytes at %u), which no thread of the block "
                                    "has written",
                                    addr + i, bytes, addr));
            if (g_options.check_races && sh.w != kNoThread && sh.w != tid && vc[sh.w] < sh.wc)
                shared_fault(FaultKind::kSharedRace, tid, addr + i,
                             format("read of shared byte %u (access of %u bytes at %u) written by thread %u since the "
                                    "last barrier they both passed (a missing __syncthreads?)",
                                    addr + i, bytes, addr, (unsigned)sh.w));
            if (sh.r1 == tid) {
                sh.r1c = mine;
            } else {
                sh.r2 = sh.r1;
                sh.r2c = sh.r1c;
                sh.r1 = (uint16_t)tid;
                sh.r1c = mine;
            }
        } else {
            if (g_options.check_races) {
                if (sh.w != kNoThread && sh.w != tid && vc[sh.w] < sh.wc)
                    shared_fault(FaultKind::kSharedRace, tid, addr + i,
                                 format("write of shared byte %u (access of %u bytes at %u) also written by thread %u "
                                        "since the last barrier they both passed",
                                        addr + i, bytes, addr, (unsigned)sh.w));
                const uint16_t rs[2] = {sh.r1, sh.r2};
                const uint32_t rc[2] = {sh.r1c, sh.r2c};
                for (int k = 0; k < 2; ++k)
                    if (rs[k] != kNoThread && rs[k] != tid && vc[rs[k]] < rc[k])
                        shared_fault(FaultKind::kSharedRace, tid, addr + i,
                                     format("write of shared byte %u (access of %u bytes at %u) read by thread %u "
                                            "since the last barrier they both passed (a missing __syncthreads?)",
                                            addr + i, bytes, addr, (unsigned)rs[k]));
            }
            sh.w = (uint16_t)tid;
            sh.wc = mine;
            sh.written = 1;
            sh.r1 = sh.r2 = kNoThread;
        }
    }
}

unsigned char *shared_checked(uint32_t tid, uint32_t addr, uint32_t bytes, uint32_t align, bool read, bool write) {
    if (align > 1 && addr % align != 0u)
        shared_fault(FaultKind::kMisaligned, tid, addr,
                     format("shared access of %u bytes at address %u, which is not %u-byte aligned", bytes, addr, align));
    if (!in_shared_window(addr, bytes))
        shared_fault(FaultKind::kSharedOutOfBounds, tid, addr,
                     format("shared access of %u bytes at address %u outside the block's shared memory (%s)", bytes,
                            addr, shared_layout().c_str()));
    if (read) record_shared(tid, addr, bytes, false);
    if (write) record_shared(tid, addr, bytes, true);
    return window_ptr(addr);
}

// ============================================================================
// Global memory
// ============================================================================

// The declared extents of the pointers into buffer b: [a, a + n) must lie
// in one of their windows (none into b: nothing declared, nothing checked).
void extent_access(uint32_t tid, const Buf &b, uintptr_t a, size_t n, bool write) {
    State &s = S();
    const DeclaredExtent *first = nullptr;
    bool inside = false;
    for (DeclaredExtent &w : s.extents) {
        const uintptr_t base = (uintptr_t)w.base;
        if (base < b.begin || base >= b.end) continue;
        if (first == nullptr) first = &w;
        if (a >= base && a + n - base <= w.bytes()) {
            inside = true;
            w.reach = std::max<uint64_t>(w.reach, a + n - base);
        }
    }
    if (first == nullptr || inside) return;
    const uintptr_t base = (uintptr_t)first->base;
    const long long off = (long long)(a - base);
    raise_fault(FaultKind::kOutsideExtent, tid, a,
                format("kernel %s: %s of %zu bytes at '%s' + %lu, byte %lld of parameter %s, outside its declared "
                       "extent of %llu elements of %u bytes (%llu bytes: %s = %llu)",
                       s.extents_kernel.c_str(), write ? "store" : "load", n, b.name.c_str(),
                       (unsigned long)(a - b.begin), off, first->param.c_str(),
                       (unsigned long long)first->elements, (unsigned)first->elem_bytes,
                       (unsigned long long)first->bytes(), first->expr.c_str(),
                       (unsigned long long)first->elements));
}

// A registered buffer holding [a, a + n): checks its permission. False if none holds it.
bool buffer_access(uint32_t tid, uintptr_t a, size_t n, bool write) {
    State &s = S();
    auto it = s.buffers.upper_bound(a);
    if (it == s.buffers.begin()) return false;
    --it;
    const Buf &b = it->second;
    if (!(a >= b.begin && a + n <= b.end)) return false;
    if (write && b.allowed == Access::kRead)
        raise_fault(FaultKind::kReadOnlyWrite, tid, a,
                    format("store of %zu bytes to '%s' + %lu, a read-only buffer", n, b.name.c_str(),
                           (unsigned long)(a - b.begin)));
    if (!write && b.allowed == Access::kWrite)
        raise_fault(FaultKind::kReadOnlyWrite, tid, a,
                    format("load of %zu bytes from '%s' + %lu, a write-only buffer", n, b.name.c_str(),
                           (unsigned long)(a - b.begin)));
    if (s.extents_armed) extent_access(tid, b, a, n, write);
    return true;
}

// A global access (in a registered buffer) of the running grid: recorded for
// the launch after it, and, by a thread of a programmatic launch before its
// griddepcontrol.wait, checked against the grids still in flight (emu.h).
void pdl_access(uint32_t tid, uintptr_t a, size_t n, bool write) {
    State &s = S();
    if (s.dep.programmatic && !s.threads[tid].griddep_waited) {
        s.dep.early_accesses++;
        uintptr_t at = 0;
        bool meets_write = false;
        const GridAccesses *other = nullptr;
        for (auto g = s.in_flight.rbegin(); g != s.in_flight.rend() && other == nullptr; ++g) {
            meets_write = g->writes.first_in(a, a + n, &at);
            if (meets_write || (write && g->reads.first_in(a, a + n, &at))) other = &*g;
        }
        if (other != nullptr) {
            auto it = s.buffers.upper_bound(a);
            const Buf &b = std::prev(it)->second;  // buffer_access found it
            raise_fault(FaultKind::kPdlRace, tid, at,
                        format("kernel %s, a programmatic dependent launch: %s of %zu bytes at '%s' + %lu before "
                               "this thread's griddepcontrol.wait, and byte '%s' + %lu was %s by %s, still in flight "
                               "(launch_dependents lets this grid start before that one completes, and orders no "
                               "memory; only griddepcontrol.wait waits for its completion and its writes)",
                               s.grid_name.c_str(), write ? "store" : "load", n, b.name.c_str(),
                               (unsigned long)(a - b.begin), b.name.c_str(), (unsigned long)(at - b.begin),
                               meets_write ? "written" : "read", other->kernel.c_str()));
        }
    }
    if (!write)
        s.grid_acc.reads.add(a, a + n);
    else
        s.grid_acc.writes.add(a, a + n);
}

void global_checked(uint32_t tid, uintptr_t a, size_t n, size_t align, bool write) {
    State &s = S();
    const char *op = write ? "store" : "load";
    if (align > 1 && a % align != 0u)
        raise_fault(FaultKind::kMisaligned, tid, a,
                    format("global %s of %zu bytes at %#lx, which is not %zu-byte aligned", op, n, (unsigned long)a,
                           align));
    if (buffer_access(tid, a, n, write)) {
        pdl_access(tid, a, n, write);
        return;
    }
    // Near the block's shared memory or near a registered buffer: the nearer
    // one names the fault. Both are heap allocations, so an access just past
    // a buffer can lie within 4096 bytes of the shared memory too (regression:
    // EmuTmaOperands.MapOverrunningItsBufferFaultsNamingTheBuffer reported a
    // shared-memory fault wherever the heap put the two side by side).
    auto it = s.buffers.upper_bound(a);
    const Buf *below = it != s.buffers.begin() && a >= std::prev(it)->second.begin ? &std::prev(it)->second : nullptr;
    uint64_t to_buffer = UINT64_MAX;  // 0 for an access that starts inside a buffer and runs past its end
    if (below != nullptr) to_buffer = a >= below->end ? a - below->end : 0u;
    if (it != s.buffers.end()) to_buffer = std::min<uint64_t>(to_buffer, it->second.begin - a);
    if (s.dyn != nullptr && a + 4096 > (uintptr_t)s.dyn && a < (uintptr_t)s.dyn + s.dyn_size + 4096) {
        const uintptr_t lo = (uintptr_t)s.dyn, hi = lo + s.dyn_size;
        const uint64_t to_shared = a < lo ? lo - a : a - hi;
        if (to_shared < to_buffer)
            raise_fault(FaultKind::kSharedOutOfBounds, tid, a,
                        format("%s of %zu bytes at dynamic shared offset %ld, outside the %u bytes of the launch", op,
                               n, (long)(a - (uintptr_t)s.dyn), s.dyn_size));
    }
    // Name the nearest buffer when the access is just outside one.
    if (below != nullptr && a < below->end + 4096)
        raise_fault(FaultKind::kGlobalOutOfBounds, tid, a,
                    format("global %s of %zu bytes at '%s' + %lu, past its end (%lu bytes)", op, n, below->name.c_str(),
                           (unsigned long)(a - below->begin), (unsigned long)(below->end - below->begin)));
    if (it != s.buffers.end() && it->second.begin - a <= 4096)
        raise_fault(FaultKind::kGlobalOutOfBounds, tid, a,
                    format("global %s of %zu bytes at %lu bytes before '%s'", op, n,
                           (unsigned long)(it->second.begin - a), it->second.name.c_str()));
    if (s.stacks != nullptr && a >= (uintptr_t)s.stacks && a < (uintptr_t)s.stacks + s.stacks_bytes)
        raise_fault(FaultKind::kGlobalOutOfBounds, tid, a,
                    format("%s of %zu bytes at %#lx: the local memory (stack) of another thread", op, n,
                           (unsigned long)a));
    raise_fault(FaultKind::kGlobalOutOfBounds, tid, a,
                format("%s of %zu bytes at %#lx outside every registered buffer, the block's shared memory and the "
                       "thread's own stack",
                       op, n, (unsigned long)a));
}

// Every access of instrumented (kernel) code.
inline void on_access(uintptr_t a, size_t n, bool write, bool sized) {
    State &s = S();
    if (s.current < 0) return;  // static initialisation, or the emulator itself
    const Fiber &f = s.threads[s.current].fiber;
    if (a - (uintptr_t)f.stack_lo < f.stack_size) return;  // the thread's own locals
    const uint32_t tid = (uint32_t)s.current;
    const uint32_t align = sized && n > 1 ? (uint32_t)n : 1u;
    if (a - s.sec_lo < s.sec_size) {
        // Static __shared__ (the section holds every kernel's variables:
        // bounds are the section's, docs/EMULATOR.md).
        shared_checked(tid, (uint32_t)(a - s.sec_lo), (uint32_t)n, align, !write, write);
        return;
    }
    if (s.dyn_size && a - (uintptr_t)s.dyn < s.dyn_size) {
        shared_checked(tid, s.dyn_base + (uint32_t)(a - (uintptr_t)s.dyn), (uint32_t)n, align, !write, write);
        return;
    }
    global_checked(tid, a, n, align, write);
}

void finish_thread_copies(uint32_t t) {
    State &s = S();
    ThreadState &th = s.threads[t];
    for (auto &g : th.committed)
        for (const Copy &c : g) {
            unsigned char *d = shared_checked(t, c.dst, c.bytes, 1, false, true);
            memcpy(d, c.src, c.src_bytes);
            memset(d + c.src_bytes, 0, c.bytes - c.src_bytes);
        }
    th.committed.clear();
    for (const Copy &c : th.open_copies) {
        unsigned char *d = shared_checked(t, c.dst, c.bytes, 1, false, true);
        memcpy(d, c.src, c.src_bytes);
        memset(d + c.src_bytes, 0, c.bytes - c.src_bytes);
    }
    th.open_copies.clear();
}

void require_kernel(const char *what) {
    if (S().current < 0) {
        fprintf(stderr, "emulator: %s called outside a running kernel\n", what);
        abort();
    }
}

// Joins the clocks of `members` (a barrier completing): afterwards each
// member has seen everything every member did before it, and starts a new
// epoch of its own.
void join_clocks(const std::vector<uint32_t> &members) {
    State &s = S();
    const uint32_t n = s.nthreads;
    std::vector<uint32_t> m(n, 0u);
    for (uint32_t p : members) {
        const uint32_t *c = clock_of(p);
        for (uint32_t u = 0; u < n; ++u) m[u] = std::max(m[u], c[u]);
    }
    for (uint32_t p : members) {
        uint32_t *c = clock_of(p);
        memcpy(c, m.data(), n * sizeof(uint32_t));
        c[p] = m[p] + 1u;
    }
}

}  // namespace

// ============================================================================
// Public API
// ============================================================================

const char *fault_kind_name(FaultKind k) {
    switch (k) {
        case FaultKind::kNone: return "none";
        case FaultKind::kSharedOutOfBounds: return "shared memory out of bounds";
        case FaultKind::kMisaligned: return "misaligned access";
        case FaultKind::kSharedRace: return "shared memory race";
        case FaultKind::kSharedUninitialised: return "uninitialised shared memory";
        case FaultKind::kGlobalOutOfBounds: return "global memory out of bounds";
        case FaultKind::kReadOnlyWrite: return "access against a buffer's registration";
        case FaultKind::kDeadlock: return "deadlock";
        case FaultKind::kCollective: return "bad warp collective";
        case FaultKind::kUnsupported: return "not emulated";
        case FaultKind::kLaunch: return "bad launch";
        case FaultKind::kBadOperand: return "bad operand";
        case FaultKind::kOutsideExtent: return "outside declared extent";
        case FaultKind::kPdlRace: return "programmatic dependent launch race";
    }
    return "?";
}

void fault(FaultKind kind, uint64_t address, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const std::string what = vformat(fmt, ap);
    va_end(ap);
    raise_fault(kind, S().current >= 0 ? cur() : 0u, address, what);
}

Options &options() { return g_options; }

void register_buffer(const void *p, size_t bytes, Access allowed, const char *name) {
    if (bytes == 0) return;
    const uintptr_t a = (uintptr_t)p;
    S().buffers[a] = Buf{a, a + bytes, allowed, name ? name : "?"};
    for (GridAccesses &g : S().in_flight) g.erase(a, a + bytes);  // new memory: no earlier grid's work on it
}
void unregister_buffer(const void *p) {
    State &s = S();
    auto it = s.buffers.find((uintptr_t)p);
    if (it == s.buffers.end()) return;
    for (GridAccesses &g : s.in_flight) g.erase(it->second.begin, it->second.end);  // freed: its work is done
    s.buffers.erase(it);
}
void clear_buffers() { S().buffers.clear(); }

void set_declared_extents(const std::string &kernel, std::vector<DeclaredExtent> extents) {
    State &s = S();
    s.extents_kernel = kernel;
    s.extents = std::move(extents);
    for (DeclaredExtent &w : s.extents) w.reach = 0;
    s.extents_armed = true;
}

const std::vector<DeclaredExtent> &last_declared_extents() { return S().extents; }

void set_programmatic_launch(bool programmatic) { S().next_programmatic = programmatic; }
const GridDependency &last_grid_dependency() { return S().dep; }

void griddep_launch_dependents() {
    require_kernel("griddepcontrol.launch_dependents");
    State &s = S();
    if (!s.block_triggered) {  // the block's first: later ones have no further effect (PTX ISA)
        s.block_triggered = true;
        s.dep.blocks_triggered++;
    }
}

void griddep_wait() {
    require_kernel("griddepcontrol.wait");
    State &s = S();
    ThreadState &t = s.threads[cur()];
    if (!t.griddep_waited) {
        t.griddep_waited = true;
        s.dep.threads_waited++;
    }
    // Nothing to wait for: the grids before this one have run to completion.
}

namespace {
Fault launch_impl(Dim3 grid, Dim3 block, uint32_t dynamic_shared) {
    State &s = S();
    s.faulted = false;
    s.fault = Fault();
    // The launch's dependency (emu.h, programmatic dependent launch): a
    // plain launch begins after every grid before it has completed.
    s.dep = GridDependency();
    s.dep.programmatic = s.next_programmatic;
    s.next_programmatic = false;
    if (!s.dep.programmatic) s.in_flight.clear();
    s.grid_acc.clear();
    s.grid_name = s.extents_armed ? s.extents_kernel : std::string("the kernel");
    s.grid_acc.kernel = s.grid_name;
    const uint64_t n = (uint64_t)block.x * block.y * block.z;
    if (n == 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
        s.in_flight.clear();
        s.fault.kind = FaultKind::kLaunch;
        s.fault.message = format("emulator: bad launch: grid %s, block %s (1 to 1024 threads, no zero extent)",
                                 dim_str(grid).c_str(), dim_str(block).c_str());
        return s.fault;
    }
    s.running = true;
    s.grid = grid;
    s.block = block;
    s.nthreads = (uint32_t)n;
    s.sec_lo = (uintptr_t)__start_kl_emu_shared;
    s.sec_size = s.sec_lo ? (uintptr_t)__stop_kl_emu_shared - s.sec_lo : 0;
    s.dyn_base = (uint32_t)((s.sec_size + 1023u) / 1024u * 1024u);
    s.dyn_size = dynamic_shared;
    s.dyn = nullptr;
    if (dynamic_shared) {
        void *m = nullptr;
        if (posix_memalign(&m, 1024, dynamic_shared) != 0) abort();
        s.dyn = static_cast<unsigned char *>(m);
    }
    ensure_stacks(s.nthreads);
    for (uint32_t bz = 0; bz < grid.z && !s.faulted; ++bz)
        for (uint32_t by = 0; by < grid.y && !s.faulted; ++by)
            for (uint32_t bx = 0; bx < grid.x && !s.faulted; ++bx) {
                s.block_idx = Dim3{bx, by, bz};
                s.dep.blocks++;
                s.dep.threads += s.nthreads;
                run_block();
            }
    // What the next launch may still overlap: this grid, and, if it may
    // complete before the grids before it (programmatic, no thread waited),
    // theirs too. After a fault nothing (the test has failed).
    if (s.faulted || !(s.dep.programmatic && s.dep.threads_waited == 0)) s.in_flight.clear();
    if (!s.faulted) s.in_flight.push_back(std::move(s.grid_acc));
    s.grid_acc.clear();
    free(s.dyn);
    s.dyn = nullptr;
    s.dyn_size = 0;
    s.threads.clear();
    s.running = false;
    return s.fault;
}
}  // namespace

Fault launch(Dim3 grid, Dim3 block, uint32_t dynamic_shared, void (*body)(const void *), const void *params) {
    State &s = S();
    s.body = body;
    s.params = params;
    s.fn_body = nullptr;
    Fault f = launch_impl(grid, block, dynamic_shared);
    s.extents_armed = false;  // the windows were this launch's
    return f;
}

Fault launch(Dim3 grid, Dim3 block, uint32_t dynamic_shared, const std::function<void()> &body) {
    State &s = S();
    s.body = nullptr;
    s.params = nullptr;
    s.fn_body = &body;
    Fault f = launch_impl(grid, block, dynamic_shared);
    s.fn_body = nullptr;
    s.extents_armed = false;
    return f;
}

uint32_t thread() {
    require_kernel("emu::thread");
    return cur();
}
uint32_t lane() { return thread() & 31u; }
uint32_t warp() { return thread() >> 5; }
uint32_t block_threads() { return S().nthreads; }
Dim3 thread_idx() { return tid_to_idx(thread()); }
Dim3 block_idx() { return S().block_idx; }
Dim3 block_dim() { return S().block; }
Dim3 grid_dim() { return S().grid; }
bool in_kernel() { return S().current >= 0; }

uint32_t dynamic_base() { return S().dyn_base; }
uint32_t dynamic_size() { return S().dyn_size; }
unsigned char *dynamic_pointer() { return S().dyn; }

uint32_t to_shared(const void *p) {
    State &s = S();
    const uintptr_t a = (uintptr_t)p;
    if (a - s.sec_lo < s.sec_size || (s.sec_size && a == s.sec_lo + s.sec_size)) return (uint32_t)(a - s.sec_lo);
    if (s.dyn != nullptr && a - (uintptr_t)s.dyn <= s.dyn_size) return s.dyn_base + (uint32_t)(a - (uintptr_t)s.dyn);
    raise_fault(FaultKind::kSharedOutOfBounds, s.current >= 0 ? cur() : 0u, a,
                format("conversion to a shared address of %#lx, which is not in the block's shared memory",
                       (unsigned long)a));
}

unsigned char *shared_pointer(uint32_t addr) { return window_ptr(addr); }

bool is_shared(const void *p, uint32_t *addr) {
    State &s = S();
    const uintptr_t a = (uintptr_t)p;
    uint32_t w;
    if (a - s.sec_lo < s.sec_size)
        w = (uint32_t)(a - s.sec_lo);
    else if (s.dyn != nullptr && a - (uintptr_t)s.dyn < s.dyn_size)
        w = s.dyn_base + (uint32_t)(a - (uintptr_t)s.dyn);
    else
        return false;
    if (addr) *addr = w;
    return true;
}

unsigned char *shared(uint32_t addr, uint32_t bytes, uint32_t align, Access kind) {
    require_kernel("emu::shared");
    return shared_checked(cur(), addr, bytes, align, kind != Access::kWrite, kind != Access::kRead);
}

unsigned char *shared_as(uint32_t tid, uint32_t addr, uint32_t bytes, uint32_t align, Access kind) {
    require_kernel("emu::shared_as");
    return shared_checked(tid, addr, bytes, align, kind != Access::kWrite, kind != Access::kRead);
}

void check_global(const void *p, size_t bytes, size_t align, Access kind) {
    require_kernel("emu::check_global");
    if (kind != Access::kWrite) global_checked(cur(), (uintptr_t)p, bytes, align, false);
    if (kind != Access::kRead) global_checked(cur(), (uintptr_t)p, bytes, align, true);
}

const char *buffer_name(const void *p, size_t bytes) {
    const State &s = S();
    const uintptr_t a = (uintptr_t)p;
    auto it = s.buffers.upper_bound(a);
    if (it == s.buffers.begin()) return nullptr;
    --it;
    return a >= it->second.begin && bytes <= it->second.end - a ? it->second.name.c_str() : nullptr;
}

void wait_until(const std::function<bool()> &pred, const std::function<std::string()> &what) {
    require_kernel("emu::wait_until");
    State &s = S();
    s.progress = true;  // this thread ran code since it was last resumed
    if (pred()) return;
    ThreadState &t = s.threads[s.current];
    t.wait.waiting = true;
    t.wait.key = 0;
    t.wait.what = what;
    while (!pred()) yield();
    t.wait.waiting = false;
    t.wait.what = nullptr;
    s.progress = true;
}

void barrier(uint64_t key, uint32_t count, const char *what, const std::function<void()> &on_complete) {
    require_kernel("emu::barrier");
    State &s = S();
    const uint32_t me = cur();
    BarrierState &b = s.barriers[key];
    if (b.arrived == 0) {
        b.count = count;
        b.what = what;
    } else if (b.count != count) {
        raise_fault(FaultKind::kCollective, me, key,
                    format("%s: thread arrives expecting %u threads, others expect %u", what, count, b.count));
    }
    if (count == 0 || count > s.nthreads)
        raise_fault(FaultKind::kCollective, me, key,
                    format("%s for %u threads in a block of %u", what, count, s.nthreads));
    b.members.push_back(me);
    const uint64_t gen = b.generation;
    s.progress = true;
    if (++b.arrived == b.count) {
        if (on_complete) on_complete();
        join_clocks(b.members);
        b.members.clear();
        b.arrived = 0;
        b.generation++;
        return;
    }
    ThreadState &t = s.threads[me];
    t.wait.waiting = true;
    t.wait.key = key;
    t.wait.what = [&b, key]() { return format("%s (barrier %lu: %u of %u arrived)", b.what, (unsigned long)key, b.arrived, b.count); };
    while (b.generation == gen) yield();
    t.wait.waiting = false;
    t.wait.what = nullptr;
    s.progress = true;
}

void sync_release(SyncClock &c) {
    require_kernel("emu::sync_release");
    State &s = S();
    const uint32_t me = cur();
    uint32_t *vc = clock_of(me);
    if (c.clock.size() != s.nthreads) c.clock.assign(s.nthreads, 0u);
    for (uint32_t u = 0; u < s.nthreads; ++u) c.clock[u] = std::max(c.clock[u], vc[u]);
    vc[me]++;
}

void sync_acquire(const SyncClock &c) {
    require_kernel("emu::sync_acquire");
    State &s = S();
    uint32_t *vc = clock_of(cur());
    for (uint32_t u = 0; u < s.nthreads && u < c.clock.size(); ++u) vc[u] = std::max(vc[u], c.clock[u]);
}

void warp_collective(uint32_t mask, const char *op, const uint32_t *in, uint32_t n_in, uint32_t *out,
                     uint32_t n_out, const CollectiveFn &compute) {
    require_kernel("emu::warp_collective");
    State &s = S();
    const uint32_t me = cur(), w = me >> 5, l = me & 31u;
    const uint32_t warp_lanes = std::min(32u, s.nthreads - w * 32u);
    const uint32_t exist = warp_lanes == 32u ? 0xffffffffu : ((1u << warp_lanes) - 1u);
    if (!(mask >> l & 1u))
        raise_fault(FaultKind::kCollective, me, mask,
                    format("%s with member mask %#x, which does not include the calling lane %u", op, mask, l));
    if (mask & ~exist)
        raise_fault(FaultKind::kCollective, me, mask,
                    format("%s with member mask %#x naming lanes that do not exist (warp %u has %u)", op, mask, w,
                           warp_lanes));
    WarpState &ws = s.warps[w];
    CollectiveSlot *slot = nullptr;
    for (CollectiveSlot &c : ws.slots)
        if (c.busy && c.mask == mask) slot = &c;
    if (slot == nullptr) {
        for (CollectiveSlot &c : ws.slots)
            if (!c.busy) slot = &c;
        if (slot == nullptr) {
            ws.slots.emplace_back();
            slot = &ws.slots.back();
        }
        slot->busy = true;
        slot->mask = mask;
        slot->arrived = 0;
        slot->op = op;
    }
    if (strcmp(slot->op, op) != 0)
        raise_fault(FaultKind::kCollective, me, mask,
                    format("lanes of warp %u meet at different warp instructions with mask %#x: %s and %s", w, mask,
                           slot->op, op));
    if (slot->arrived >> l & 1u)
        raise_fault(FaultKind::kCollective, me, mask, format("%s: lane %u arrives twice", op, l));
    for (uint32_t i = 0; i < n_in; ++i) slot->in[l][i] = in[i];
    slot->arrived |= 1u << l;
    s.progress = true;
    const size_t index = (size_t)(slot - ws.slots.data());
    const uint64_t gen = slot->generation;
    if (slot->arrived == mask) {
        compute(slot->in, slot->out, mask);
        slot->busy = false;
        slot->generation++;
    } else {
        ThreadState &t = s.threads[me];
        t.wait.waiting = true;
        t.wait.key = 0x100000000ull | mask;
        t.wait.what = [w, index, op]() {
            const CollectiveSlot &c = S().warps[w].slots[index];
            return format("%s of warp %u (mask %#x, lanes arrived %#x)", op, w, c.mask, c.arrived);
        };
        while (ws.slots[index].generation == gen) yield();
        t.wait.waiting = false;
        t.wait.what = nullptr;
        s.progress = true;
    }
    const CollectiveSlot &done = ws.slots[index];
    for (uint32_t i = 0; i < n_out; ++i) out[i] = done.out[l][i];
}

BlockLocalBase *block_local_get(const void *key) {
    auto it = S().locals.find(key);
    return it == S().locals.end() ? nullptr : it->second.get();
}
void block_local_set(const void *key, BlockLocalBase *value) { S().locals[key].reset(value); }

void on_thread_exit(void (*fn)(uint32_t)) {
    auto &h = S().exit_hooks;
    if (std::find(h.begin(), h.end(), fn) == h.end()) h.push_back(fn);
}

bool on_own_stack(const void *p, size_t bytes) {
    require_kernel("emu::on_own_stack");
    const Fiber &f = S().threads[cur()].fiber;
    const uintptr_t a = (uintptr_t)p;
    return a >= (uintptr_t)f.stack_lo && a - (uintptr_t)f.stack_lo <= f.stack_size &&
           bytes <= f.stack_size - (a - (uintptr_t)f.stack_lo);
}

void sync_release_as(uint32_t tid, SyncClock &c) {
    require_kernel("emu::sync_release_as");
    State &s = S();
    uint32_t *vc = clock_of(tid);
    if (c.clock.size() != s.nthreads) c.clock.assign(s.nthreads, 0u);
    for (uint32_t u = 0; u < s.nthreads; ++u) c.clock[u] = std::max(c.clock[u], vc[u]);
    vc[tid]++;
}

uint32_t async_begin(Access copy_does, const std::string &what) {
    require_kernel("emu::async_begin");
    State &s = S();
    const uint32_t id = s.next_async++;
    AsyncCopy &c = s.async_copies[id];
    c.copy_does = copy_does == Access::kRead ? Access::kRead : Access::kWrite;
    c.what = what;
    return id;
}

void async_mark(uint32_t id, uint32_t addr, uint32_t bytes) {
    require_kernel("emu::async_mark");
    State &s = S();
    auto it = s.async_copies.find(id);
    if (it == s.async_copies.end()) abort();  // an extension's bug, not the kernel's
    AsyncCopy &c = it->second;
    const bool writes = c.copy_does == Access::kWrite;
    if (!in_shared_window(addr, bytes))
        raise_fault(FaultKind::kSharedOutOfBounds, cur(), addr,
                    format("%s: shared range [%u, %u) outside the block's shared memory (%s)", c.what.c_str(), addr,
                           addr + bytes, shared_layout().c_str()));
    for (uint32_t i = 0; i < bytes; ++i) {
        Shadow &sh = s.shadow[addr + i];
        // Two copies over one byte where either writes it: their order is the hardware's.
        if (sh.async_writes || (writes && sh.async_reads)) {
            const AsyncCopy *o = async_over(addr + i, sh.async_writes != 0);
            raise_fault(FaultKind::kSharedRace, cur(), addr + i,
                        format("%s over shared byte %u, which %s is still %s", c.what.c_str(), addr + i,
                               o ? o->what.c_str() : "another asynchronous copy",
                               sh.async_writes ? "writing" : "reading"));
        }
        if (writes)
            sh.async_writes++;
        else
            sh.async_reads++;
    }
    c.ranges.emplace_back(addr, bytes);
}

void async_end(uint32_t id) {
    require_kernel("emu::async_end");
    State &s = S();
    auto it = s.async_copies.find(id);
    if (it == s.async_copies.end()) return;
    const bool writes = it->second.copy_does == Access::kWrite;
    for (const auto &r : it->second.ranges)
        for (uint32_t i = 0; i < r.second; ++i) {
            Shadow &sh = s.shadow[r.first + i];
            if (writes)
                sh.async_writes--;
            else
                sh.async_reads--;
        }
    s.async_copies.erase(it);
}

void cp_async(uint32_t dst, const void *src, uint32_t bytes, uint32_t src_bytes) {
    require_kernel("cp.async");
    const uint32_t me = cur();
    if (bytes != 4 && bytes != 8 && bytes != 16)
        raise_fault(FaultKind::kUnsupported, me, dst, format("cp.async of %u bytes (4, 8 or 16)", bytes));
    if (src_bytes > bytes)
        raise_fault(FaultKind::kUnsupported, me, dst, format("cp.async src-size %u > cp-size %u", src_bytes, bytes));
    shared_checked(me, dst, bytes, bytes, false, false);  // bounds and alignment now, the write at completion
    if ((uintptr_t)src % bytes != 0)
        raise_fault(FaultKind::kMisaligned, me, (uintptr_t)src,
                    format("cp.async source %#lx is not %u-byte aligned", (unsigned long)(uintptr_t)src, bytes));
    if (src_bytes) global_checked(me, (uintptr_t)src, src_bytes, 1, false);
    S().threads[me].open_copies.push_back(Copy{dst, static_cast<const unsigned char *>(src), bytes, src_bytes});
}

void cp_async_commit() {
    require_kernel("cp.async.commit_group");
    ThreadState &t = S().threads[cur()];
    t.committed.push_back(std::move(t.open_copies));
    t.open_copies.clear();
}

void cp_async_wait(uint32_t pending) {
    require_kernel("cp.async.wait_group");
    const uint32_t me = cur();
    ThreadState &t = S().threads[me];
    while (t.committed.size() > pending) {
        for (const Copy &c : t.committed.front()) {
            unsigned char *d = shared_checked(me, c.dst, c.bytes, 1, false, true);
            memcpy(d, c.src, c.src_bytes);
            memset(d + c.src_bytes, 0, c.bytes - c.src_bytes);
        }
        t.committed.erase(t.committed.begin());
    }
}

}  // namespace emu

// ============================================================================
// The instrumentation's callbacks. A kernel translation unit is compiled with
// gcc's -fsanitize=thread, which calls these around every access to memory
// that can escape the function (globals, statics, pointers, address-taken
// locals); no ThreadSanitizer runtime is linked: these ARE the runtime.
// (-fsanitize=kernel-address was tried first: it leaves provably in-bounds
// accesses to static variables uninstrumented, so a race on a __shared__
// scalar went unseen.)
// ============================================================================

extern "C" {
#define KL_EMU_ACCESS(n)                                                                               \
    void __tsan_read##n(void *a) { emu::on_access((uintptr_t)a, n, false, true); }                      \
    void __tsan_write##n(void *a) { emu::on_access((uintptr_t)a, n, true, true); }                      \
    void __tsan_volatile_read##n(void *a) { emu::on_access((uintptr_t)a, n, false, true); }             \
    void __tsan_volatile_write##n(void *a) { emu::on_access((uintptr_t)a, n, true, true); }             \
    void __tsan_unaligned_read##n(void *a) { emu::on_access((uintptr_t)a, n, false, false); }           \
    void __tsan_unaligned_write##n(void *a) { emu::on_access((uintptr_t)a, n, true, false); }           \
    void __tsan_unaligned_volatile_read##n(void *a) { emu::on_access((uintptr_t)a, n, false, false); }  \
    void __tsan_unaligned_volatile_write##n(void *a) { emu::on_access((uintptr_t)a, n, true, false); }
KL_EMU_ACCESS(1)
KL_EMU_ACCESS(2)
KL_EMU_ACCESS(4)
KL_EMU_ACCESS(8)
KL_EMU_ACCESS(16)
#undef KL_EMU_ACCESS
void __tsan_read_range(void *a, unsigned long n) { emu::on_access((uintptr_t)a, n, false, false); }
void __tsan_write_range(void *a, unsigned long n) { emu::on_access((uintptr_t)a, n, true, false); }
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_read(void **) {}
void __tsan_vptr_update(void **, void *) {}
}
