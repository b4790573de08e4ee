// The sm_90 synchronisation emulation (tests/emu/sm90_mbarrier.cc) against
// the PTX ISA: mbarrier phases (a phase completes when its expected
// arrivals have arrived and its tx-count is zero; try_wait.parity P returns
// once the phase of parity P has completed), cp.async.mbarrier.arrive.noinc
// (the arrival waits for the thread's earlier cp.async copies and counts
// against the expected count), setmaxnreg's rules and register pool,
// elect.sync's one leader. Expected values are worked by hand from those
// definitions. Kernels: testdata/sm90_sync_kernels.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"

namespace {

const void *image() { return kl_emu_image("sm90_sync_test_kernels", ""); }

bool has(const emu::Fault &f, const char *text) { return f.message.find(text) != std::string::npos; }

struct MbarRun {
    emu::Fault f;
    std::vector<uint32_t> out;
};

MbarRun mbar(uint32_t threads, uint32_t count, uint32_t arrivers, uint32_t tx, uint32_t rounds, uint32_t last_parity,
             uint32_t uninit = 0) {
    emu::Buffer<uint32_t> out(threads, emu::Access::kWrite, "out");
    MbarRun r;
    r.f = emu::run(image(), "emu_test_mbarrier", {1, 1, 1}, {threads, 1, 1}, 16 + 4 * threads, out.data(), count,
                   arrivers, tx, rounds, last_parity, uninit);
    r.out.assign(out.data(), out.data() + threads);
    return r;
}

// 64 arrivals complete phase 0 (parity 0); after it every thread sees every
// other's word: out[t] = ((t + 1) % 64) * 3 + 1.
TEST(EmuMbarrier, PhaseCompletesWhenItsCountHasArrived) {
    const MbarRun r = mbar(64, 64, 64, 0, 1, 0);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t t = 0; t < 64; ++t) EXPECT_EQ(r.out[t], ((t + 1) % 64) * 3 + 1) << "thread " << t;
}

// Two rounds complete phases 0 and 1; the barrier is then in phase 2
// (parity 0): try_wait.parity 1 returns at once (phase 1 completed) and the
// words are round 1's: ((t + 1) % 64) * 3 + 101.
TEST(EmuMbarrier, ParityNamesTheLastCompletedPhaseOfThatParity) {
    const MbarRun r = mbar(64, 64, 64, 0, 2, 1);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t t = 0; t < 64; ++t) EXPECT_EQ(r.out[t], ((t + 1) % 64) * 3 + 101) << "thread " << t;
}

// ... and parity 0 then names phase 2, which nobody completes.
TEST(EmuMbarrier, WaitOnAPhaseNobodyCompletesIsADeadlock) {
    const MbarRun r = mbar(64, 64, 64, 0, 2, 0);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "mbarrier.try_wait.parity 0")) << r.f.message;
    EXPECT_TRUE(has(r.f, "phase 2 in progress: 64 of 64 arrivals pending")) << r.f.message;
}

// Count 64, 63 arrivals: phase 0 never completes.
TEST(EmuMbarrier, OneArrivalShortIsADeadlock) {
    const MbarRun r = mbar(64, 64, 63, 0, 1, 0);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "1 of 64 arrivals pending")) << r.f.message;
}

// arrive.expect_tx adds transaction bytes: with every arrival in but 64 x 16
// bytes expected and none completed, the phase stays open.
TEST(EmuMbarrier, ExpectedTransactionBytesHoldThePhase) {
    const MbarRun r = mbar(64, 64, 64, 16, 1, 0);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "0 of 64 arrivals pending, tx-count 1024")) << r.f.message;
}

// Count 32, 64 arrivals in one phase before anyone waits... phase 0 completes
// at the 32nd and phase 1 at the 64th (arrivals roll into the next phase),
// so waiting on parity 0 then works: the arrivals are not too many. With
// count 48 the 48th completes phase 0 and 16 stay in phase 1: a wait on
// parity 1 (rounds 1, so the kernel's last wait is on parity 1) deadlocks.
TEST(EmuMbarrier, ArrivalsPastTheCountGoToTheNextPhase) {
    const MbarRun r = mbar(64, 48, 64, 0, 1, 1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "phase 1 in progress: 32 of 48 arrivals pending")) << r.f.message;
}

TEST(EmuMbarrier, UseBeforeInitFaults) {
    const MbarRun r = mbar(32, 32, 32, 0, 1, 0, 1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kUnsupported) << r.f.message;
    EXPECT_TRUE(has(r.f, "never initialised")) << r.f.message;
}

struct RingRun {
    emu::Fault f;
    std::vector<uint32_t> out;
};

RingRun ring(uint32_t items, uint32_t stages, uint32_t skip_full, uint32_t skip_empty) {
    emu::Buffer<uint32_t> src(items * 128, emu::Access::kRead, "src"), dst(items * 128, emu::Access::kWrite, "dst");
    for (uint32_t i = 0; i < items * 128; ++i) src[i] = i * 2654435761u;
    RingRun r;
    r.f = emu::run(image(), "emu_test_mbarrier_ring", {1, 1, 1}, {64, 1, 1}, 256 + 512 * stages,
                   static_cast<void *>(dst.data()), static_cast<const void *>(src.data()), items, stages, skip_full,
                   skip_empty);
    r.out.assign(dst.data(), dst.data() + items * 128);
    return r;
}

// 7 items through 2 stages (each stage reused 3 or 4 times): dst == src.
TEST(EmuMbarrier, CpAsyncArriveNoincRingDeliversEveryItem) {
    const RingRun r = ring(7, 2, 0, 0);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 7 * 128; ++i) ASSERT_EQ(r.out[i], i * 2654435761u) << "word " << i;
}

TEST(EmuMbarrier, ConsumerReadingBeforeTheFullWaitIsARace) {
    const RingRun r = ring(3, 2, 1, 0);
    EXPECT_TRUE(r.f.kind == emu::FaultKind::kSharedRace || r.f.kind == emu::FaultKind::kSharedUninitialised)
        << emu::fault_kind_name(r.f.kind) << ": " << r.f.message;
}

TEST(EmuMbarrier, ProducerOverwritingBeforeTheEmptyWaitIsARace) {
    const RingRun r = ring(5, 2, 0, 1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
}

struct RegRun {
    emu::Fault f;
    std::vector<uint32_t> out;
};

RegRun regs(uint32_t threads, uint32_t inc, uint32_t dec, uint32_t split = 0) {
    emu::Buffer<uint32_t> out(threads, emu::Access::kWrite, "out");
    RegRun r;
    r.f = emu::run(image(), "emu_test_setmaxnreg", {1, 1, 1}, {threads, 1, 1}, 0, out.data(), inc, dec, split);
    r.out.assign(out.data(), out.data() + threads);
    return r;
}

// 384 threads at entry: floor(65536 / 384) = 170, to a multiple of 8: 168;
// the pool 168 x 384 = 64512 = 2 x 128 x 232 + 128 x 40.
TEST(EmuSetmaxnreg, ConsumersTakeWhatTheProducerGivesBack) {
    const RegRun r = regs(384, 232, 40);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t t = 0; t < 384; ++t) EXPECT_EQ(r.out[t], t < 256 ? 232u : 40u) << "thread " << t;
}

// 2 x 128 x 240 + 128 x 40 = 66560 > 64512: the increase never fits.
TEST(EmuSetmaxnreg, MoreThanThePoolIsADeadlock) {
    const RegRun r = regs(384, 240, 40);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "setmaxnreg.inc")) << r.f.message;
}

TEST(EmuSetmaxnreg, ThreadsOfAWarpgroupMustAgree) {
    const RegRun r = regs(384, 200, 40, 1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kCollective) << r.f.message;
}

// .dec may not raise: 168 at entry, dec to 176.
TEST(EmuSetmaxnreg, DecreaseAboveTheCurrentCountFaults) {
    const RegRun r = regs(384, 168, 176);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kUnsupported) << r.f.message;
    EXPECT_TRUE(has(r.f, "above")) << r.f.message;
}

TEST(EmuSetmaxnreg, CountOffTheEightStepFaults) {
    const RegRun r = regs(384, 236, 40);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kUnsupported) << r.f.message;
    EXPECT_TRUE(has(r.f, "multiple of 8")) << r.f.message;
}

// One lane per warp, the same lane both times.
TEST(EmuElectSync, OneLeaderPerWarpTheSameEachTime) {
    emu::Buffer<uint32_t> out(128, emu::Access::kWrite, "out");
    ASSERT_TRUE(emu::run(image(), "emu_test_elect", {1, 1, 1}, {64, 1, 1}, 0, out.data()).ok());
    for (uint32_t w = 0; w < 2; ++w) {
        uint32_t first = 0, second = 0, lead1 = 99, lead2 = 99;
        for (uint32_t l = 0; l < 32; ++l) {
            first += out[2 * (32 * w + l)];
            second += out[2 * (32 * w + l) + 1];
            if (out[2 * (32 * w + l)]) lead1 = l;
            if (out[2 * (32 * w + l) + 1]) lead2 = l;
        }
        EXPECT_EQ(first, 1u) << "warp " << w;
        EXPECT_EQ(second, 1u) << "warp " << w;
        EXPECT_EQ(lead1, lead2) << "warp " << w;
    }
}

}  // namespace
