// emu.h - the CPU emulator of CUDA kernels: what a test and an emulator
// extension call. docs/EMULATOR.md is the manual; this is the reference.
//
// A kernel runs from its own source: every CUDA thread of a block is a fiber
// on one OS thread, scheduled round robin; a fiber runs until it blocks (a
// barrier, a warp collective, any emu::wait_until). Blocks run one after
// another. Every memory access of the kernel's own code is checked (the
// kernel translation unit is compiled with gcc -fsanitize=thread, whose
// callbacks land in emu.cc): a thread's stack, the block's shared memory
// (bounds, alignment, races between the block's threads), the registered
// global buffers (bounds, alignment, read-only), nothing else.
//
// A fault (out-of-bounds or misaligned access, a race on shared memory, a
// deadlock, a bad collective) ends the launch at once: launch() returns a
// Fault naming what, the thread, the block and the address, and the
// emulated backend (emu_backend.h) turns it into KL_ERROR_LAUNCH_FAILED with
// that message. Nothing aborts the test binary.
//
// For an extension (a new instruction: tests/emu/sm90*, kl_ptx_emu.h):
//   - thread(), lane(), warp(), block_idx(), ...   who is running;
//   - shared(addr, bytes, align, Access)          a checked host pointer to
//     shared-window address `addr` (races recorded for the current thread);
//   - check_global(p, bytes, align, Access)        a checked global access;
//   - wait_until(pred, what)                       block this thread until
//     pred() holds; takes part in deadlock detection (`what` is reported);
//   - warp_collective(...)                          lanes of a warp meet, the
//     last to arrive computes every lane's result;
//   - sync_release / sync_acquire                  happens-before edges
//     through a SyncClock (an mbarrier, an async-copy completion);
//   - async_begin / async_mark / async_end         shared bytes an
//     asynchronous copy will write or read (touching them is a race);
//   - block_local<T>(key)                          extension state per block;
//   - fault(kind, fmt, ...)                        report and end the launch.
//
// Launches run one after another. A programmatic dependent launch (PDL:
// set_programmatic_launch, which the emulated backend sets from the
// launcher's programmatic_serialization) is not overlapped with the launch
// before it; instead every global access its threads make before their
// griddepcontrol.wait is checked against every global access of the grids
// that may still be in flight (kPdlRace), which covers every overlap the
// GPU may run (section "programmatic dependent launch" below).
#ifndef KLAUNCH_TESTS_EMU_EMU_H
#define KLAUNCH_TESTS_EMU_EMU_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace emu {

struct Dim3 {
    uint32_t x, y, z;
};

// ---- faults ----------------------------------------------------------------

enum class FaultKind {
    kNone = 0,
    kSharedOutOfBounds,   // a shared access outside the block's shared memory
    kMisaligned,          // an access not aligned to its size (or an instruction's rule)
    kSharedRace,          // two threads touch a shared byte with no barrier between them
    kSharedUninitialised, // a read of a shared byte no thread of the block has written
    kGlobalOutOfBounds,   // an access outside every registered buffer
    kReadOnlyWrite,       // a store to a buffer registered read-only
    kDeadlock,            // no thread can go on (a barrier some threads never reach)
    kCollective,          // a warp collective used against its rules (mask, lanes, width)
    kUnsupported,         // an instruction form the emulator does not model
    kLaunch,              // the launch itself is malformed (block shape, shared size)
    kBadOperand,          // an operand the instruction cannot take (a tensor map that is not one)
    kOutsideExtent,       // an access through a pointer argument past its declared extent (spec `extent`)
    kPdlRace,             // a PDL grid's access before griddepcontrol.wait meets one of a grid still in flight
};
const char *fault_kind_name(FaultKind k);

struct Fault {
    FaultKind kind = FaultKind::kNone;
    std::string message;  // full text: what, which thread and block, which address
    Dim3 block{0, 0, 0};
    uint32_t thread = 0;       // linear thread index in the block (x fastest)
    uint64_t address = 0;      // the faulting address (shared-window or host), or a barrier id
    bool ok() const { return kind == FaultKind::kNone; }
};

// Reports a fault from inside a running kernel (an extension's check): the
// launch ends here and launch() returns it. Outside a launch it is kept and
// returned by the next launch. Never returns.
[[noreturn]] void fault(FaultKind kind, uint64_t address, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

// ---- global buffers ----------------------------------------------------------

enum class Access { kRead, kWrite, kReadWrite };

// Memory the kernel may touch, as a GPU allocation. `name` appears in
// reports. Registrations outlive launches until unregistered.
void register_buffer(const void *p, size_t bytes, Access allowed, const char *name);
void unregister_buffer(const void *p);
void clear_buffers();

// ---- declared extents (the spec's `extent`, handed over by the launch) --------

// One pointer argument of the launch and its declared extent: while the
// launch runs, an access to the registered buffer holding `base` must lie in
// [base, base + elements * elem_bytes) (or in the window of another pointer
// into the same buffer), else the launch faults (kOutsideExtent) naming the
// kernel, the buffer, the offset and the extent. After the launch `reach`
// is the end of the furthest access from base, in bytes (0: none touched),
// what a test of the extent's tightness compares with the extent.
struct DeclaredExtent {
    const void *base = nullptr;
    uint64_t elements = 0;
    uint32_t elem_bytes = 1;
    std::string param;  // the parameter's name
    std::string expr;   // the extent as the spec writes it
    uint64_t reach = 0;
    uint64_t bytes() const { return elements * elem_bytes; }
};
// The next launch's windows (emu_backend sets them from kl_launch.extents;
// a test of its own may too); `kernel` names the kernel in reports.
void set_declared_extents(const std::string &kernel, std::vector<DeclaredExtent> extents);
// The windows of the last launch, with their reach.
const std::vector<DeclaredExtent> &last_declared_extents();

// A registered host buffer of n elements of T with `guard` poisoned
// elements on each side (outside the registered range: a stray access is a
// fault, and guards_intact() checks what unchecked code may have written).
// The data starts 256-byte aligned plus `misalign` elements.
template <class T>
class Buffer {
  public:
    Buffer(size_t n, Access allowed, const char *name, size_t guard = 8, size_t misalign = 0)
        : n_(n), guard_(guard), lead_((guard + misalign) * sizeof(T)) {
        const size_t bytes = lead_ + (n + guard) * sizeof(T);
        storage_.reset(new unsigned char[bytes + 256]);
        base_ = storage_.get() + (256 - (uintptr_t)storage_.get() % 256) % 256;
        bytes_ = bytes;
        for (size_t i = 0; i < bytes; ++i) base_[i] = kPoisonByte;
        register_buffer(data(), n * sizeof(T), allowed, name);
    }
    ~Buffer() { unregister_buffer(data()); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    T *data() { return reinterpret_cast<T *>(base_ + lead_); }
    const T *data() const { return reinterpret_cast<const T *>(base_ + lead_); }
    T &operator[](size_t i) { return data()[i]; }
    const T &operator[](size_t i) const { return data()[i]; }
    size_t size() const { return n_; }
    void fill_bytes(unsigned char b) {
        unsigned char *p = base_ + lead_;
        for (size_t i = 0; i < n_ * sizeof(T); ++i) p[i] = b;
    }
    // The n elements with `guard` elements on each side, as they are now.
    std::vector<T> with_guards() const {
        const T *first = data() - guard_;
        return std::vector<T>(first, first + n_ + 2 * guard_);
    }
    // The guard bytes still hold the poison.
    bool guards_intact() const {
        for (size_t i = 0; i < bytes_; ++i) {
            if (i >= lead_ && i < lead_ + n_ * sizeof(T)) continue;
            if (i < lead_ - guard_ * sizeof(T)) continue;  // misalignment padding
            if (base_[i] != kPoisonByte) return false;
        }
        return true;
    }
    static constexpr unsigned char kPoisonByte = 0xFF;  // bf16/f16/f32 NaN, fp8 NaN

  private:
    size_t n_, guard_, lead_, bytes_ = 0;
    std::unique_ptr<unsigned char[]> storage_;
    unsigned char *base_ = nullptr;
};

// ---- launching ----------------------------------------------------------------

struct Options {
    bool check_races = true;          // shared-memory happens-before checks
    bool check_uninitialised = true;  // reads of never-written shared bytes
    uint32_t stack_bytes = 256 * 1024;
};
Options &options();

// `body(params)` is run by every thread of every block. `params` is handed
// through untouched (the emulated backend passes the packed argument bytes).
// `dynamic_shared` bytes of dynamic shared memory per block.
Fault launch(Dim3 grid, Dim3 block, uint32_t dynamic_shared, void (*body)(const void *), const void *params);
// The same with any callable (tests of the emulator itself).
Fault launch(Dim3 grid, Dim3 block, uint32_t dynamic_shared, const std::function<void()> &body);

// ---- programmatic dependent launch (PDL) -----------------------------------------
// On the GPU a launch with programmatic_serialization may start as soon as
// every block of the grid before it on the stream has executed
// griddepcontrol.launch_dependents or exited, and a thread's
// griddepcontrol.wait returns only once that grid has completed and its
// memory operations are visible; launch_dependents itself orders no memory.
// Here the grids run one after another, and the overlap is checked instead
// of run: while a programmatic launch runs, a global access (a registered
// buffer's) by a thread that has not executed griddepcontrol.wait faults
// (kPdlRace) if it touches a byte some grid still in flight wrote, or writes
// a byte one read (atomics count as both), since on the GPU the two may
// meet in either order and the earlier grid's writes need not be visible.
// Grids still in flight for a launch: the one before it, and, when that one
// was itself programmatic and none of its threads executed
// griddepcontrol.wait (so it may complete before its own predecessor), the
// ones in flight for it, and so on. A plain launch waits for everything
// before it. Registering or unregistering a buffer forgets what earlier
// grids did to its bytes (a freed allocation's work is done).

// The next launch is a programmatic dependent launch of the one before it.
void set_programmatic_launch(bool programmatic);
// What the last launch (or the running one) did about its dependency.
struct GridDependency {
    bool programmatic = false;      // launched as a programmatic dependent
    uint32_t blocks = 0;            // blocks run
    uint32_t blocks_triggered = 0;  // blocks that executed griddepcontrol.launch_dependents
    uint64_t threads = 0;           // threads run
    uint64_t threads_waited = 0;    // threads that executed griddepcontrol.wait
    uint64_t early_accesses = 0;    // a programmatic launch's global accesses before its threads' wait
};
const GridDependency &last_grid_dependency();
// griddepcontrol.launch_dependents / griddepcontrol.wait by the calling
// thread (kl_ptx_emu.h's kl__griddep_launch_dependents / kl__griddep_wait).
void griddep_launch_dependents();
void griddep_wait();

// ---- who is running (valid inside a launch) ------------------------------------

uint32_t thread();  // linear index in the block, x fastest
uint32_t lane();
uint32_t warp();
uint32_t block_threads();
Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
Dim3 grid_dim();
bool in_kernel();

// ---- shared memory -------------------------------------------------------------
// Shared-window addresses (what cvta.to.shared gives and ld.shared takes):
// the family's static __shared__ variables at [0, static size), the dynamic
// shared memory at [dynamic_base(), + dynamic_size()).

uint32_t dynamic_base();
uint32_t dynamic_size();
unsigned char *dynamic_pointer();      // generic pointer of the dynamic shared memory
uint32_t to_shared(const void *p);     // generic -> shared window; faults if not shared
bool is_shared(const void *p, uint32_t *addr);  // is p in the block's shared memory (its window address)
unsigned char *shared_pointer(uint32_t addr);  // shared window -> generic, unchecked (cvta.shared)
// Host pointer of [addr, addr + bytes): bounds- and alignment-checked, the
// access recorded for race detection as the current thread's.
unsigned char *shared(uint32_t addr, uint32_t bytes, uint32_t align, Access kind);
// A write into shared memory on behalf of thread `tid` (an async copy
// completing): recorded as that thread's.
unsigned char *shared_as(uint32_t tid, uint32_t addr, uint32_t bytes, uint32_t align, Access kind);

// ---- global memory ---------------------------------------------------------------

// Faults unless [p, p + bytes) lies in one registered buffer that allows `kind`
// and p is `align`-aligned.
void check_global(const void *p, size_t bytes, size_t align, Access kind);
// The name of the registered buffer holding all of [p, p + bytes), or
// nullptr (nothing checked, nothing recorded).
const char *buffer_name(const void *p, size_t bytes);

// ---- blocking and synchronisation ---------------------------------------------------

// Yields until pred() holds. `what` names the wait in a deadlock report
// ("mbarrier 0x40 phase 0"); it is read only when reporting.
void wait_until(const std::function<bool()> &pred, const std::function<std::string()> &what);
// A barrier of `count` threads keyed by `key` (per block): the calling thread
// arrives and waits for the others; memory is synchronised among them.
// `on_complete` (optional) runs once, in the last thread to arrive, before
// any thread leaves (a reduction's result).
void barrier(uint64_t key, uint32_t count, const char *what, const std::function<void()> &on_complete = nullptr);

// Happens-before through a sync object: release copies the calling thread's
// clock into `c` (joining), acquire joins `c` into the calling thread's.
struct SyncClock {
    std::vector<uint32_t> clock;
};
void sync_release(SyncClock &c);
void sync_acquire(const SyncClock &c);
// The same on behalf of thread `tid` (an asynchronous copy it issued
// completing while another thread runs): joins tid's clock into `c` and
// starts a new epoch of tid's.
void sync_release_as(uint32_t tid, SyncClock &c);

// ---- asynchronous copies in flight (cp.async.bulk*) ----------------------------------
// async_begin opens a copy that writes (kWrite) or reads (kRead) shared
// memory later; async_mark adds a shared range to it (bounds-checked; a
// range another copy in flight writes, or reads while this one writes, is
// a fault); until async_end, a thread's access to a range the copy will
// write, or its write to a range the copy will read, is a kSharedRace
// fault naming `what`. async_end comes before the copy's own shared
// accesses (shared_as) land.
uint32_t async_begin(Access copy_does, const std::string &what);
void async_mark(uint32_t id, uint32_t addr, uint32_t bytes);
void async_end(uint32_t id);

// [p, p + bytes) lies in the calling thread's own stack (its locals and
// by-value kernel parameters).
bool on_own_stack(const void *p, size_t bytes);

// Warp collective: every lane of `mask` (which must include the caller and
// be passed alike by all of them) deposits up to 16 words `in`; when the
// last one arrives, `compute(in_all, out_all)` runs once, with in_all[l] /
// out_all[l] the 16 words of lane l; each lane then gets its out_all row
// back in `out`. `op` names the instruction for reports; lanes meeting at
// different ops with the same mask is a fault.
using CollectiveFn = std::function<void(const uint32_t (*in)[16], uint32_t (*out)[16], uint32_t mask)>;
void warp_collective(uint32_t mask, const char *op, const uint32_t *in, uint32_t n_in, uint32_t *out,
                     uint32_t n_out, const CollectiveFn &compute);

// ---- extension state --------------------------------------------------------------

struct BlockLocalBase {
    virtual ~BlockLocalBase() {}
};
BlockLocalBase *block_local_get(const void *key);
void block_local_set(const void *key, BlockLocalBase *value);  // owned; freed at block end
// One T per block (created on first use in the block, destroyed when the block ends).
template <class T>
T &block_local(const void *key) {
    BlockLocalBase *b = block_local_get(key);
    if (b == nullptr) {
        b = new T();
        block_local_set(key, b);
    }
    return *static_cast<T *>(b);
}
// Per-thread hook run when a thread's kernel body returns (an extension
// that queues work per thread, e.g. cp.async, finishes it there).
void on_thread_exit(void (*fn)(uint32_t tid));

// ---- cp.async (per thread groups, completed at wait_group) -------------------------

void cp_async(uint32_t dst, const void *src, uint32_t bytes, uint32_t src_bytes);
void cp_async_commit();
void cp_async_wait(uint32_t pending);

}  // namespace emu

#endif  // KLAUNCH_TESTS_EMU_EMU_H
