// A kernel handle crosses C++ translation units (issue 15, item 1): looked
// up in cross_tu_lookup_cc.cc (or the C file cross_tu_lookup.c) and
// launched here, and the other way round, with the recording backend. Each
// file has its own static kl_mla_q_rope_extract_batched_desc; a handle of
// another launcher, or one made through a header of another spec version,
// is still refused.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "klaunch/record_backend.h"
#include "tests/runtime/cross_tu.h"

namespace {

const kl_bf16 *const kQ = reinterpret_cast<const kl_bf16 *>(uintptr_t{0x1000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x2000});

class CrossTu : public ::testing::Test {
  protected:
    void SetUp() override {
        kl_record_backend_init(&rb, recs, 8);
        static const char meta[] =
            "klaunch-module 1\nfamily mla_prefill\nvariant deepseek_v4_flash\nconst MLA_HDIM 576\n";
        ASSERT_EQ(kl_module_load(&rb.base, meta, sizeof meta, &mod), KL_SUCCESS) << kl_last_error_message();
    }
    void TearDown() override { kl_module_unload(&mod); }
    kl_status launch_here(const kl_kernel *k) {
        return kl_mla_q_rope_extract_batched(k, kQ, kOut, 7, 16, 192, 128, 64, 3072, nullptr);
    }
    uint32_t u32_arg(size_t i, size_t offset) const {
        uint32_t v;
        std::memcpy(&v, recs[i].args + offset, sizeof v);
        return v;
    }

    kl_record recs[8];
    kl_record_backend rb;
    kl_module mod{};
};

TEST_F(CrossTu, TheDescriptorsOfTheThreeFilesSitAtThreeAddresses) {
    EXPECT_NE(kl_test_cc_rope_extract_desc(), &kl_mla_q_rope_extract_batched_desc);
    EXPECT_NE(kl_test_c_rope_extract_desc(), &kl_mla_q_rope_extract_batched_desc);
    EXPECT_NE(kl_test_c_rope_extract_desc(), kl_test_cc_rope_extract_desc());
}

TEST_F(CrossTu, AHandleLookedUpInAnotherCxxFileLaunchesHere) {
    kl_kernel k;
    ASSERT_EQ(kl_test_cc_get_rope_extract(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(launch_here(&k), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(rb.count, 1u);
    EXPECT_EQ(recs[0].grid[0], 28u);  // ceil_div(7 * 16 * 64, 256)
    EXPECT_EQ(recs[0].block[0], 256u);
    EXPECT_EQ(u32_arg(0, 16), 7u);
    EXPECT_EQ(u32_arg(0, 36), 3072u);
}

TEST_F(CrossTu, AHandleLookedUpHereLaunchesInAnotherCxxFile) {
    kl_kernel k;
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_test_cc_launch_rope_extract(&k, kQ, kOut), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(rb.count, 1u);
}

TEST_F(CrossTu, AHandleCrossesBetweenCAndCxxFiles) {
    kl_kernel from_c, from_cc;
    ASSERT_EQ(kl_test_c_get_rope_extract(&from_c, &mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_test_cc_get_rope_extract(&from_cc, &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kl_test_cc_launch_rope_extract(&from_c, kQ, kOut), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kl_test_c_launch_rope_extract(&from_cc, kQ, kOut), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(launch_here(&from_c), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(rb.count, 3u);
}

TEST_F(CrossTu, AHandleFromAnotherFileIsCheckedByManyThreadsAtOnce) {
    // The first check from this file remembers the other file's descriptor
    // in the handle (an atomic store); under --config=tsan a race there fails.
    kl_kernel k;
    ASSERT_EQ(kl_test_cc_get_rope_extract(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    std::atomic<int> passed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
        threads.emplace_back([&] {
            for (int i = 0; i < 2000; i++)
                if (kl_mla_q_rope_extract_batched_check(&k, kQ, kOut, 7, 16, 192, 128, 64, 3072) == KL_SUCCESS)
                    passed.fetch_add(1);
        });
    for (auto &t : threads) t.join();
    EXPECT_EQ(passed.load(), 4 * 2000);
}

TEST_F(CrossTu, AHandleOfAnotherLauncherIsStillRefused) {
    kl_kernel other;
    ASSERT_EQ(kl_mla_q_rope_writeback_batched_get(&other, &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kl_test_cc_launch_rope_extract(&other, kQ, kOut), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kl_last_error_message())
                  .find("kl_mla_q_rope_extract_batched: kernel handle was loaded for kl_mla_q_rope_writeback_batched "
                        "(entry mla_q_rope_writeback_batched), not for this launcher"),
              std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(rb.count, 0u);
}

TEST_F(CrossTu, AHandleMadeThroughAnotherVersionOfTheHeaderIsRefused) {
    // What another file compiled from an older generated header would hold:
    // the same launcher, another spec hash, one parameter moved.
    kl_kernel_desc older = kl_mla_q_rope_extract_batched_desc;
    older.spec_hash = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    kl_kernel k;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &older), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(launch_here(&k), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kl_last_error_message()).find("another version of this launcher's header"),
              std::string::npos)
        << kl_last_error_message();

    kl_param_info params[8];
    std::memcpy(params, older.params, sizeof params);
    std::swap(params[2].offset, params[3].offset);
    older = kl_mla_q_rope_extract_batched_desc;
    older.params = params;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &older), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(launch_here(&k), KL_ERROR_INVALID_ARGUMENT) << "a layout that differs is never packed by the other";
    EXPECT_EQ(rb.count, 0u);
}

}  // namespace
