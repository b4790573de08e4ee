// kl_saxpy_bf16 through klaunch's recording backend: what would reach
// cuLaunchKernel, and what is refused. Expectations come from
// specs/saxpy_bf16.yaml and the CUDA parameter layout (each argument at its
// natural alignment), not from the generated code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/record_backend.h"
#include "klaunch/saxpy_bf16.h"

namespace {

template <class T>
T At(const kl_record &r, size_t offset) {
    T v;
    std::memcpy(&v, r.args + offset, sizeof v);
    return v;
}

class SaxpyLaunch : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb_, recs_, 4); }
    void TearDown() override { kl_module_unload(&mod_); }

    // The variant's module metadata, from the generated header (what its
    // fatbin carries); the recording backend loads it in place of the fatbin.
    void Load(const char *variant) {
        ASSERT_EQ(KL_SUCCESS, kl_record_backend_load_variant(&rb_, kl_saxpy_bf16_variant_info, variant, &mod_))
            << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_saxpy_bf16_get(&k_, &mod_)) << kl_last_error_message();
    }

    kl_status Launch(float a, uint32_t n, uint32_t stride, uint32_t rows) {
        return kl_saxpy_bf16(&k_, x_, y_, a, n, stride, rows, stream_);
    }

    kl_record recs_[4];
    kl_record_backend rb_;
    kl_module mod_{};
    kl_kernel k_{};
    // Device addresses are never dereferenced by the recording backend.
    const kl_bf16 *x_ = reinterpret_cast<const kl_bf16 *>(uintptr_t{0x7f0000001000});
    kl_bf16 *y_ = reinterpret_cast<kl_bf16 *>(uintptr_t{0x7f0000802000});
    kl_stream stream_ = reinterpret_cast<kl_stream>(uintptr_t{0x5a5a});
};

// x, y (8 bytes each), a (f32), n, stride (u32): 28 bytes; rows is the grid's
// y extent and no kernel argument.
TEST_F(SaxpyLaunch, PacksArgumentsInKernelOrder) {
    Load("items4");
    ASSERT_EQ(KL_SUCCESS, Launch(2.5f, 5000, 5120, 3)) << kl_last_error_message();
    ASSERT_EQ(1u, rb_.count);
    const kl_record &r = recs_[0];
    EXPECT_STREQ("saxpy_bf16", r.entry);
    EXPECT_EQ(28u, r.arg_bytes);
    EXPECT_EQ(uintptr_t{0x7f0000001000}, At<uintptr_t>(r, 0));
    EXPECT_EQ(uintptr_t{0x7f0000802000}, At<uintptr_t>(r, 8));
    EXPECT_EQ(2.5f, At<float>(r, 16));
    EXPECT_EQ(5000u, At<uint32_t>(r, 20));
    EXPECT_EQ(5120u, At<uint32_t>(r, 24));
    EXPECT_EQ(stream_, r.stream);
    EXPECT_EQ(0u, r.shared_bytes);
}

// grid (ceil_div(n, 256 * SAXPY_ITEMS), rows), block 256.
TEST_F(SaxpyLaunch, GridCoversEachRowWithTheVariantsItemsPerThread) {
    Load("items4");
    ASSERT_EQ(KL_SUCCESS, Launch(1.0f, 5000, 5000, 7)) << kl_last_error_message();
    ASSERT_EQ(1u, rb_.count);
    EXPECT_EQ(5u, recs_[0].grid[0]);  // 5000 / 1024 = 4.9
    EXPECT_EQ(7u, recs_[0].grid[1]);
    EXPECT_EQ(1u, recs_[0].grid[2]);
    EXPECT_EQ(256u, recs_[0].block[0]);
    EXPECT_EQ(1u, recs_[0].block[1]);
    EXPECT_EQ(1u, recs_[0].block[2]);
    ASSERT_EQ(KL_SUCCESS, Launch(1.0f, 1024, 1024, 1)) << kl_last_error_message();
    EXPECT_EQ(1u, recs_[1].grid[0]);  // exactly one block's worth
}

TEST_F(SaxpyLaunch, Items8VariantHalvesTheGrid) {
    Load("items8");
    ASSERT_EQ(KL_SUCCESS, Launch(1.0f, 5000, 5000, 7)) << kl_last_error_message();
    ASSERT_EQ(1u, rb_.count);
    EXPECT_EQ(3u, recs_[0].grid[0]);  // 5000 / 2048 = 2.4
}

TEST_F(SaxpyLaunch, RefusesARowLongerThanItsStride) {
    Load("items4");
    EXPECT_EQ(KL_ERROR_PRECONDITION, Launch(1.0f, 5121, 5120, 3));
    EXPECT_EQ(0u, rb_.count);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(std::string::npos, msg.find("n <= stride")) << msg;
    EXPECT_NE(std::string::npos, msg.find("5121")) << msg;
    EXPECT_NE(std::string::npos, msg.find("specs/saxpy_bf16.yaml:")) << msg;
    // The boundary holds.
    EXPECT_EQ(KL_SUCCESS, Launch(1.0f, 5120, 5120, 3)) << kl_last_error_message();
    EXPECT_EQ(1u, rb_.count);
}

TEST_F(SaxpyLaunch, CheckMakesTheSameDecisionsAndLaunchesNothing) {
    Load("items4");
    EXPECT_EQ(KL_SUCCESS, kl_saxpy_bf16_check(&k_, x_, y_, 1.0f, 100, 100, 2));
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_saxpy_bf16_check(&k_, x_, y_, 1.0f, 101, 100, 2));
    EXPECT_EQ(0u, rb_.count);
}

TEST_F(SaxpyLaunch, RefusesNullPointersAndTooManyRows) {
    Load("items4");
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_saxpy_bf16(&k_, nullptr, y_, 1.0f, 10, 10, 1, stream_));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find(" x is NULL")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_saxpy_bf16(&k_, x_, nullptr, 1.0f, 10, 10, 1, stream_));
    EXPECT_EQ(KL_ERROR_GRID_LIMIT, Launch(1.0f, 10, 10, 65536));  // grid y <= 65535
    EXPECT_EQ(0u, rb_.count);
}

TEST_F(SaxpyLaunch, NoRowsOrEmptyRowsLaunchNothing) {
    Load("items4");
    EXPECT_EQ(KL_SUCCESS, Launch(1.0f, 10, 10, 0));
    EXPECT_EQ(KL_SUCCESS, Launch(1.0f, 0, 10, 4));
    EXPECT_EQ(0u, rb_.count);
}

TEST_F(SaxpyLaunch, RefusesAModuleOfAnotherFamily) {
    const char other[] = "klaunch-module 1\nfamily paged_decode\nvariant gqa4_d128\n";
    ASSERT_EQ(KL_SUCCESS, kl_module_load(&rb_.base, other, std::strlen(other), &mod_)) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_FAMILY_MISMATCH, kl_saxpy_bf16_get(&k_, &mod_));
    EXPECT_EQ(KL_ERROR_KERNEL_NOT_LOADED, Launch(1.0f, 10, 10, 1));
}

}  // namespace
