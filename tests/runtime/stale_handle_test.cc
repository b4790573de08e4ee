// A kernel handle dies with its module (issue 15, item 6): after
// kl_module_unload a launch, or a check, with a handle looked up in that
// module is refused with KL_ERROR_KERNEL_NOT_LOADED and reaches no backend,
// also when the same kl_module object has been loaded again since.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

namespace {

const kl_bf16 *const kQ = reinterpret_cast<const kl_bf16 *>(uintptr_t{0x1000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x2000});
const char kMeta[] = "klaunch-module 1\nfamily mla_prefill\nvariant deepseek_v4_flash\nconst MLA_HDIM 576\n";

class StaleHandle : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, recs, 4); }
    kl_status load(kl_module *m) { return kl_module_load(&rb.base, kMeta, sizeof kMeta, m); }
    static kl_status launch(const kl_kernel *k) {
        return kl_mla_q_rope_extract_batched(k, kQ, kOut, 7, 16, 192, 128, 64, 3072, nullptr);
    }
    static kl_status check(const kl_kernel *k) {
        return kl_mla_q_rope_extract_batched_check(k, kQ, kOut, 7, 16, 192, 128, 64, 3072);
    }
    static void expect_stale_message() {
        EXPECT_NE(std::string(kl_last_error_message())
                      .find("kl_mla_q_rope_extract_batched: kernel handle's module was unloaded"),
                  std::string::npos)
            << kl_last_error_message();
    }

    kl_record recs[4];
    kl_record_backend rb;
};

TEST_F(StaleHandle, ALaunchAfterKlModuleUnloadIsRefused) {
    kl_module mod;
    kl_kernel k;
    ASSERT_EQ(load(&mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(launch(&k), KL_SUCCESS) << kl_last_error_message();
    kl_module_unload(&mod);
    EXPECT_EQ(launch(&k), KL_ERROR_KERNEL_NOT_LOADED);
    expect_stale_message();
    EXPECT_EQ(check(&k), KL_ERROR_KERNEL_NOT_LOADED);
    EXPECT_EQ(rb.count, 1u) << "only the launch before the unload was recorded";
}

TEST_F(StaleHandle, AHandleStaysStaleWhenItsModuleObjectIsLoadedAgain) {
    kl_module mod;
    kl_kernel old_k, new_k;
    ASSERT_EQ(load(&mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&old_k, &mod), KL_SUCCESS) << kl_last_error_message();
    kl_module_unload(&mod);
    ASSERT_EQ(load(&mod), KL_SUCCESS) << kl_last_error_message();  // same object, a new load
    EXPECT_EQ(launch(&old_k), KL_ERROR_KERNEL_NOT_LOADED);
    expect_stale_message();
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&new_k, &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(launch(&new_k), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(rb.count, 1u);
    kl_module_unload(&mod);
}

TEST_F(StaleHandle, UnloadingOneModuleLeavesAnothersHandlesAlone) {
    kl_module a, b;
    kl_kernel ka, kb;
    ASSERT_EQ(load(&a), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(load(&b), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&ka, &a), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_mla_q_rope_extract_batched_get(&kb, &b), KL_SUCCESS) << kl_last_error_message();
    kl_module_unload(&a);
    EXPECT_EQ(launch(&ka), KL_ERROR_KERNEL_NOT_LOADED);
    EXPECT_EQ(launch(&kb), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(rb.count, 1u);
    kl_module_unload(&b);
}

TEST_F(StaleHandle, EveryLoadHasItsOwnId) {
    kl_module a, b;
    ASSERT_EQ(load(&a), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(load(&b), KL_SUCCESS) << kl_last_error_message();
    EXPECT_NE(a.load_id, 0u);
    EXPECT_NE(b.load_id, 0u);
    EXPECT_NE(a.load_id, b.load_id);
    kl_module_unload(&a);
    EXPECT_EQ(a.load_id, 0u);
    kl_module_unload(&b);
}

}  // namespace
