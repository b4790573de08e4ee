// sm90_mbarrier.cc - emulation of the sm_90 synchronisation instructions the
// warp-specialised kernels use, from the PTX ISA:
//   - mbarrier.init / arrive / arrive.expect_tx / try_wait.parity
//     ("Parallel Synchronization and Communication Instructions: mbarrier"):
//     a 64-bit object in shared memory with an expected arrival count, a
//     pending count, a transaction count (tx-count) and a phase; a phase
//     completes when its pending count and its tx-count are both zero, then
//     the phase advances and the pending count resets to the expected count.
//     try_wait.parity P is true once the phase of parity P has completed,
//     i.e. while the current phase's parity differs from P;
//   - cp.async.mbarrier.arrive.noinc ("cp.async.mbarrier.arrive"): an arrive
//     on the mbarrier once all of the thread's earlier cp.async copies are
//     done, counted against the expected count (.noinc);
//   - setmaxnreg.inc / .dec.sync.aligned.u32 ("setmaxnreg"): a warpgroup
//     collective; the count is a multiple of 8 in [24, 256]; .inc asks for at
//     least the current count and waits until the block's pool has the
//     registers, .dec gives back to at most the current count;
//   - elect.sync ("elect.sync"): one leader lane of membermask, the same one
//     for the same mask.
// What it makes observable (tests/emu/sm90_mbarrier_test.cc):
//   - a wait on a phase nobody completes is a deadlock fault naming the
//     mbarrier, its phase, pending and tx counts; an mbarrier used before its
//     init, or with more arrivals than its count in one phase, is a fault;
//   - happens-before: every arrive releases the arriving thread's memory
//     clock into the phase, a completed wait acquires the phase it waited
//     for, so a consumer that reads a stage without waiting on its mbarrier,
//     or a producer that overwrites one without waiting for its release, is
//     a shared-memory race (the race checker's);
//   - cp.async.mbarrier.arrive.noinc lands the thread's pending cp.async
//     copies at the arrive (as that thread's writes, before its release):
//     so their data are ordered for waiters of the phase and racy for
//     anyone else;
//   - setmaxnreg's rules (count range and step, all 128 threads alike, .inc
//     not lowering and .dec not raising the count), and an .inc the block's
//     registers cannot satisfy is a deadlock. The registers a warpgroup has
//     at entry are not known here (ptxas decides): the model takes the cap
//     that __launch_bounds__(threads, 1) gives, floor(65536 / threads) to a
//     multiple of 8, at most 255, and the pool is that times the threads.
//   - transactions (cp.async.bulk and cp.async.bulk.tensor loads,
//     tests/emu/sm90_tma.cc): a copy issued on an mbarrier is in flight
//     until a thread waits on that mbarrier for the phase in progress (a
//     wait on the phase before passes at once and lands nothing); the wait lands
//     every copy in flight on it, in issue order: its data are written as
//     its issuer's, released into the phase in progress as the issuer's
//     (sync_release_as), and its bytes are a complete_tx on that phase
//     (tx-count minus the bytes; the count may go negative, as the ISA
//     allows, when bytes complete before they are expected).
//     mbarrier.expect_tx adds to the tx-count without arriving. So a
//     consumer that reads a stage before its wait reads bytes still in
//     flight (a race fault naming the copy), or, when another thread's wait
//     landed them, bytes it is not ordered after (a race); a phase whose
//     tx-count never returns to zero is a deadlock naming the mbarrier and
//     its tx-count; a block whose threads all returned with a copy still in
//     flight (nobody waited on its mbarrier) faults.
// The mbarrier object's 8 bytes are bounds- and alignment-checked, but not
// recorded as memory accesses (they are atomic on the GPU).
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/sm90_async.h"
#include "tests/emu/sm90_ptx_emu.h"

namespace emu {
namespace sm90 {
namespace {

constexpr uint32_t kWarpgroup = 128;
constexpr uint32_t kMaxCount = (1u << 20) - 1u;  // the ISA's expected-count and tx-count range

struct Transaction {
    uint32_t issuer, bytes;
    std::string what;
    std::function<void()> land;
};

struct Mbar {
    uint32_t count = 0, pending = 0, phase = 0;
    int64_t tx = 0;
    SyncClock current;     // releases of the phase in progress
    SyncClock done[2];     // the last completed phase of each parity
    std::vector<Transaction> in_flight;  // issued copies completing on it, in issue order
};

struct Regs {
    uint32_t regs = 0;                    // this warpgroup's count per thread
    uint32_t request[kWarpgroup] = {};    // what each thread asked for in the collective in progress
    uint32_t op[kWarpgroup] = {};         // 1 inc, 2 dec
    uint64_t generation = 0, applied = 0; // collectives completed / inc requests granted
};

struct State : BlockLocalBase {
    std::map<uint32_t, Mbar> mbar;
    Regs wg[8];
    bool regs_init = false;
    uint32_t exited = 0;
};

const char kKey = 0;
void on_exit(uint32_t tid);
State &state() {
    on_thread_exit(on_exit);  // kept once
    return block_local<State>(&kKey);
}

Mbar &object(uint32_t addr, const char *op, bool must_exist) {
    if (addr % 8u != 0u)
        fault(FaultKind::kMisaligned, addr, "%s: mbarrier address %#x is not 8-byte aligned", op, addr);
    if ((uint64_t)addr + 8u > (uint64_t)dynamic_base() + dynamic_size())
        fault(FaultKind::kSharedOutOfBounds, addr, "%s: mbarrier address %#x is outside the block's shared memory",
              op, addr);
    State &s = state();
    auto it = s.mbar.find(addr);
    if (it == s.mbar.end()) {
        if (must_exist)
            fault(FaultKind::kUnsupported, addr, "%s: the mbarrier at %#x was never initialised (mbarrier.init)", op,
                  addr);
        return s.mbar[addr];
    }
    return it->second;
}

void complete_if_done(Mbar &m) {
    if (m.pending != 0u || m.tx != 0) return;
    m.done[m.phase & 1u] = m.current;
    m.current = SyncClock();
    m.phase++;
    m.pending = m.count;
}

void check_tx_range(const Mbar &m, uint32_t addr, const char *op) {
    if (m.tx > (int64_t)kMaxCount || m.tx < -(int64_t)kMaxCount)
        fault(FaultKind::kUnsupported, addr, "%s: mbarrier %#x tx-count %lld is outside the ISA's [-(2^20 - 1), 2^20 - 1]",
              op, addr, (long long)m.tx);
}

// The copy engine finishes every copy in flight on `m`: data, release, complete_tx.
void land(Mbar &m, uint32_t addr) {
    std::vector<Transaction> done;
    done.swap(m.in_flight);
    for (Transaction &t : done) {
        t.land();
        sync_release_as(t.issuer, m.current);
        m.tx -= t.bytes;
        check_tx_range(m, addr, t.what.c_str());
        complete_if_done(m);
    }
}

void arrive(uint32_t addr, uint32_t tx, const char *op) {
    Mbar &m = object(addr, op, true);
    if (m.pending == 0u)
        fault(FaultKind::kCollective, addr,
              "%s: mbarrier %#x phase %u already has its %u arrivals and waits for %lld transaction bytes: one "
              "arrival too many",
              op, addr, m.phase, m.count, (long long)m.tx);
    sync_release(m.current);
    m.tx += tx;
    check_tx_range(m, addr, op);
    m.pending--;
    complete_if_done(m);
}

uint32_t entry_regs() {
    uint32_t r = (65536u / block_threads()) & ~7u;
    return r > 255u ? 255u : r;
}

uint32_t held() {
    uint32_t total = 0;
    const uint32_t n = block_threads() / kWarpgroup;
    for (uint32_t w = 0; w < n; ++w) total += state().wg[w].regs * kWarpgroup;
    return total;
}

// The last thread of the block returned: a copy still in flight was never waited for.
void on_exit(uint32_t) {
    BlockLocalBase *b = block_local_get(&kKey);
    if (b == nullptr) return;
    State &s = *static_cast<State *>(b);
    if (++s.exited < block_threads()) return;
    for (auto &kv : s.mbar)
        if (!kv.second.in_flight.empty()) {
            const Transaction &t = kv.second.in_flight.front();
            fault(FaultKind::kUnsupported, kv.first,
                  "the block's threads returned with %u copies still in flight on the mbarrier at %#x, the first %s "
                  "(%u bytes, issued by thread %u): nobody waited on that mbarrier",
                  (unsigned)kv.second.in_flight.size(), kv.first, t.what.c_str(), t.bytes, t.issuer);
        }
}

}  // namespace

void mbarrier_transaction(uint32_t addr, const char *op, uint32_t bytes, const std::string &what,
                          std::function<void()> land_data) {
    Mbar &m = object(addr, op, true);
    m.in_flight.push_back(Transaction{thread(), bytes, what, std::move(land_data)});
}

}  // namespace sm90
}  // namespace emu

using namespace emu;
using namespace emu::sm90;

extern "C" void kl_emu_sm90_mbarrier_init(uint32_t addr, uint32_t count) {
    if (count == 0u || count > kMaxCount)
        fault(FaultKind::kUnsupported, addr, "mbarrier.init: expected count %u is outside [1, 2^20 - 1]", count);
    Mbar &m = object(addr, "mbarrier.init", false);
    if (!m.in_flight.empty())
        fault(FaultKind::kUnsupported, addr,
              "mbarrier.init of the mbarrier at %#x while %u copies complete on it (the first %s)", addr,
              (unsigned)m.in_flight.size(), m.in_flight.front().what.c_str());
    m = Mbar();
    m.count = m.pending = count;
}

extern "C" void kl_emu_sm90_mbarrier_arrive(uint32_t addr) { arrive(addr, 0u, "mbarrier.arrive"); }

extern "C" void kl_emu_sm90_mbarrier_arrive_expect_tx(uint32_t addr, uint32_t tx) {
    arrive(addr, tx, "mbarrier.arrive.expect_tx");
}

extern "C" void kl_emu_sm90_mbarrier_expect_tx(uint32_t addr, uint32_t tx) {
    Mbar &m = object(addr, "mbarrier.expect_tx", true);
    m.tx += tx;
    check_tx_range(m, addr, "mbarrier.expect_tx");
}

extern "C" void kl_emu_sm90_mbarrier_wait_parity(uint32_t addr, uint32_t parity) {
    Mbar &m = object(addr, "mbarrier.try_wait.parity", true);
    parity &= 1u;
    // A wait on the parity of the phase before the one in progress passes at
    // once and lands nothing, as on the GPU: a waiter a whole ring ahead of
    // the producer (same parity, two rounds apart) reads stages still in
    // flight, or not yet issued. Otherwise copies issued while this thread
    // waits land at its next look. (Landing first, as this emulator once
    // did, completed the phase in progress and so turned such a waiter's
    // wait into the right one: it hid a grouped_gemm_tma ping-pong bug that
    // failed on an H200.)
    wait_until([&m, addr, parity]() {
                   if ((m.phase & 1u) != parity) return true;
                   land(m, addr);
                   return (m.phase & 1u) != parity;
               },
               [&m, addr, parity]() {
                   char b[300];
                   snprintf(b, sizeof b,
                            "mbarrier.try_wait.parity %u on the mbarrier at %#x (phase %u in progress: %u of %u "
                            "arrivals pending, tx-count %lld%s)",
                            parity, addr, m.phase, m.pending, m.count, (long long)m.tx,
                            m.tx > 0   ? ": transaction bytes expected that no copy in flight delivers"
                            : m.tx < 0 ? ": more transaction bytes completed than were expected"
                                       : "");
                   return std::string(b);
               });
    sync_acquire(m.done[parity]);
}

extern "C" uint32_t kl_emu_sm90_mbarrier_phase(uint32_t addr) {
    Mbar &m = object(addr, "mbarrier (test)", true);
    land(m, addr);
    return m.phase;
}

extern "C" void kl_emu_sm90_cp_async_mbarrier_arrive_noinc(uint32_t addr) {
    object(addr, "cp.async.mbarrier.arrive.noinc", true);
    // Every earlier cp.async of this thread, committed or not, lands now.
    cp_async_commit();
    cp_async_wait(0u);
    arrive(addr, 0u, "cp.async.mbarrier.arrive.noinc");
}

extern "C" void kl_emu_sm90_setmaxnreg(uint32_t inc, uint32_t count) {
    const char *op = inc ? "setmaxnreg.inc" : "setmaxnreg.dec";
    const uint32_t t = thread(), threads = block_threads();
    if (threads % kWarpgroup != 0u)
        fault(FaultKind::kCollective, t, "%s: the block has %u threads, not a whole number of warpgroups", op,
              threads);
    if (count % 8u != 0u || count < 24u || count > 256u)
        fault(FaultKind::kUnsupported, count, "%s: register count %u is not a multiple of 8 in [24, 256]", op, count);
    State &s = state();
    if (!s.regs_init) {
        for (uint32_t w = 0; w < threads / kWarpgroup; ++w) s.wg[w].regs = entry_regs();
        s.regs_init = true;
    }
    const uint32_t w = t / kWarpgroup, lt = t % kWarpgroup;
    Regs &r = s.wg[w];
    r.request[lt] = count;
    r.op[lt] = inc ? 1u : 2u;
    const uint64_t gen = r.generation;
    barrier(0x7365746d61780000ull | w, kWarpgroup, "setmaxnreg (all 128 threads of the warpgroup)", [&r, op, w]() {
        for (uint32_t i = 1; i < kWarpgroup; ++i)
            if (r.request[i] != r.request[0] || r.op[i] != r.op[0])
                fault(FaultKind::kCollective, w * kWarpgroup + i,
                      "%s: threads of warpgroup %u ask for different counts or directions (%u and %u): it is "
                      ".sync.aligned",
                      op, w, r.request[0], r.request[i]);
        const uint32_t want = r.request[0];
        if (r.op[0] == 1u && want < r.regs)
            fault(FaultKind::kUnsupported, w * kWarpgroup, "setmaxnreg.inc to %u below warpgroup %u's current %u",
                  want, w, r.regs);
        if (r.op[0] == 2u && want > r.regs)
            fault(FaultKind::kUnsupported, w * kWarpgroup, "setmaxnreg.dec to %u above warpgroup %u's current %u",
                  want, w, r.regs);
        if (r.op[0] == 2u) r.regs = want;
        r.generation++;
    });
    if (!inc) return;
    // .inc: granted once the block's pool (what it had at entry) has room.
    const uint32_t pool = entry_regs() * threads;
    wait_until(
        [&r, gen, count, pool]() { return r.applied > gen || held() - r.regs * kWarpgroup + count * kWarpgroup <= pool; },
        [w, count, pool]() {
            char b[200];
            snprintf(b, sizeof b, "setmaxnreg.inc of warpgroup %u to %u registers (the block holds %u of its %u)", w,
                     count, held(), pool);
            return std::string(b);
        });
    if (r.applied <= gen) {
        r.regs = count;
        r.applied = gen + 1;
    }
}

extern "C" uint32_t kl_emu_sm90_setmaxnreg_count(void) {
    State &s = state();
    return s.regs_init ? s.wg[thread() / kWarpgroup].regs : entry_regs();
}

extern "C" uint32_t kl_emu_sm90_elect_sync(uint32_t mask) {
    uint32_t in[1] = {0}, out[1] = {0};
    warp_collective(mask, "elect.sync", in, 1, out, 1, [](const uint32_t (*)[16], uint32_t (*o)[16], uint32_t m) {
        const uint32_t leader = (uint32_t)__builtin_ctz(m);  // the ISA: one lane, the same for the same mask
        for (uint32_t l = 0; l < 32; ++l) o[l][0] = leader;
    });
    return out[0] == lane() ? 1u : 0u;
}
