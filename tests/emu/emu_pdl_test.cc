// The emulator's model of a programmatic dependent launch (emu.h, section
// "programmatic dependent launch"; docs/EMULATOR.md): grids run one after
// another, and a programmatic launch's global accesses before its threads'
// griddepcontrol.wait are checked against every access of the grids still
// in flight, the overlap the GPU may run. The kernels here are callables
// (not instrumented): each global access is an explicit emu::check_global,
// as an emulated instruction makes it.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "tests/emu/emu.h"

namespace {

using emu::Access;
using emu::FaultKind;

// A grid of 2 blocks x 32 threads running body.
emu::Fault grid(const std::function<void()> &body, bool programmatic) {
    emu::set_programmatic_launch(programmatic);
    return emu::launch({2, 1, 1}, {32, 1, 1}, 0, body);
}

// Thread t of block b: word b * 32 + t of p (read or written).
std::function<void()> each_word(uint32_t *p, Access kind) {
    return [p, kind] { emu::check_global(p + emu::block_idx().x * 32u + emu::thread(), 4, 4, kind); };
}

struct Bufs {
    emu::Buffer<uint32_t> x{64, Access::kReadWrite, "x"};
    emu::Buffer<uint32_t> y{64, Access::kReadWrite, "y"};
};

TEST(EmuPdl, AnEarlyReadOfWhatTheGridBeforeWroteIsARaceNamingBoth) {
    Bufs b;
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kWrite), false).ok());
    const emu::Fault f = grid(each_word(b.x.data(), Access::kRead), true);
    EXPECT_EQ(f.kind, FaultKind::kPdlRace) << f.message;
    EXPECT_NE(f.message.find("load of 4 bytes at 'x' + 0 before this thread's griddepcontrol.wait"),
              std::string::npos)
        << f.message;
    EXPECT_NE(f.message.find("was written by"), std::string::npos) << f.message;
}

TEST(EmuPdl, TheSameReadAfterGriddepcontrolWaitIsClean) {
    Bufs b;
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kWrite), false).ok());
    const auto read = each_word(b.x.data(), Access::kRead);
    const emu::Fault f = grid(
        [&read] {
            emu::griddep_launch_dependents();
            emu::griddep_wait();
            read();
        },
        true);
    EXPECT_TRUE(f.ok()) << f.message;
    const emu::GridDependency &d = emu::last_grid_dependency();
    EXPECT_TRUE(d.programmatic);
    EXPECT_EQ(d.blocks, 2u);
    EXPECT_EQ(d.blocks_triggered, 2u);
    EXPECT_EQ(d.threads, 64u);
    EXPECT_EQ(d.threads_waited, 64u);
    EXPECT_EQ(d.early_accesses, 0u);
}

TEST(EmuPdl, AnEarlyWriteOfWhatTheGridBeforeReadIsARace) {
    Bufs b;
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kRead), false).ok());
    const emu::Fault f = grid(each_word(b.x.data(), Access::kWrite), true);
    EXPECT_EQ(f.kind, FaultKind::kPdlRace) << f.message;
    EXPECT_NE(f.message.find("was read by"), std::string::npos) << f.message;
}

TEST(EmuPdl, EarlyReadsOfWhatTheGridBeforeOnlyReadAndEarlyWritesOfOtherBytesAreClean) {
    Bufs b;
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kRead), false).ok());
    const auto rx = each_word(b.x.data(), Access::kRead), wy = each_word(b.y.data(), Access::kWrite);
    const emu::Fault f = grid(
        [&] {
            rx();
            wy();
        },
        true);
    EXPECT_TRUE(f.ok()) << f.message;
    EXPECT_EQ(emu::last_grid_dependency().early_accesses, 128u);
}

// launch_dependents lets the dependent start; it orders no memory, so a
// write before it is still not visible to the dependent before its wait.
TEST(EmuPdl, AWriteBeforeLaunchDependentsIsStillARaceForAnEarlyRead) {
    Bufs b;
    const auto wx = each_word(b.x.data(), Access::kWrite);
    ASSERT_TRUE(grid(
                    [&wx] {
                        wx();
                        emu::griddep_launch_dependents();
                    },
                    false)
                    .ok());
    EXPECT_EQ(emu::last_grid_dependency().blocks_triggered, 2u);
    EXPECT_EQ(grid(each_word(b.x.data(), Access::kRead), true).kind, FaultKind::kPdlRace);
}

TEST(EmuPdl, APlainLaunchWaitsForEverythingBeforeIt) {
    Bufs b;
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kWrite), false).ok());
    const emu::Fault f = grid(each_word(b.x.data(), Access::kReadWrite), false);
    EXPECT_TRUE(f.ok()) << f.message;
    EXPECT_FALSE(emu::last_grid_dependency().programmatic);
    EXPECT_EQ(emu::last_grid_dependency().early_accesses, 0u);
}

// A programmatic grid none of whose threads waits may complete before the
// grid before it: that one stays in flight for the next programmatic
// launch. One thread's wait is enough to end it (the grid completes after
// that thread, which returned from the wait after the earlier grid completed).
TEST(EmuPdl, AGridThatNeverWaitsLeavesTheOneBeforeItInFlight) {
    Bufs b;
    const auto nothing = [] {};
    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kWrite), false).ok());
    ASSERT_TRUE(grid(nothing, true).ok());
    EXPECT_EQ(grid(each_word(b.x.data(), Access::kRead), true).kind, FaultKind::kPdlRace);

    ASSERT_TRUE(grid(each_word(b.x.data(), Access::kWrite), false).ok());
    ASSERT_TRUE(grid(
                    [] {
                        if (emu::block_idx().x == 1u && emu::thread() == 5u) emu::griddep_wait();
                    },
                    true)
                    .ok());
    EXPECT_EQ(emu::last_grid_dependency().threads_waited, 1u);
    const emu::Fault f = grid(each_word(b.x.data(), Access::kRead), true);
    EXPECT_TRUE(f.ok()) << f.message;
}

// An allocation freed (unregistered) and a new one at the same address: no
// earlier grid's accesses are in flight on it.
TEST(EmuPdl, ANewBufferCarriesNoEarlierGridsAccesses) {
    const uint32_t *at = nullptr;
    {
        emu::Buffer<uint32_t> x(64, Access::kReadWrite, "x");
        at = x.data();
        ASSERT_TRUE(grid(each_word(x.data(), Access::kWrite), false).ok());
    }
    emu::register_buffer(at, 64 * sizeof(uint32_t), Access::kReadWrite, "x again");
    const emu::Fault f = grid(each_word(const_cast<uint32_t *>(at), Access::kRead), true);
    emu::unregister_buffer(at);
    EXPECT_TRUE(f.ok()) << f.message;
}

}  // namespace
