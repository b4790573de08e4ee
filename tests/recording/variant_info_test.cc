// The generated kl_<family>_variant_info[] table, kl_record_backend_load_variant
// and the variant check of kl_X_get (issue 14: the recording-backend recipe
// asked for module metadata written by hand, and nothing compared it with
// the spec). Expected values are read from specs/paged_decode.yaml's
// variants: gqa4_d128 (DECODE_GQA_PACK_WIDTH 4, DECODE_GQA_PACK_HEAD_DIM 128)
// and gqa8_d128 (8, 128).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

namespace {

class VariantInfo : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, recs, 2); }
    void TearDown() override { kl_module_unload(&mod); }
    kl_status load_text(const std::string &text) { return kl_module_load(&rb.base, text.data(), text.size(), &mod); }
    std::string spec_hash() const { return kl_paged_decode_attn_bf16_desc.spec_hash; }

    kl_record recs[2];
    kl_record_backend rb;
    kl_module mod{};
    kl_kernel k;
};

TEST_F(VariantInfo, ListsTheSpecsVariantsInOrderThenEnds) {
    ASSERT_STREQ(kl_paged_decode_variant_info[0].name, "gqa4_d128");
    ASSERT_STREQ(kl_paged_decode_variant_info[1].name, "gqa8_d128");
    EXPECT_EQ(kl_paged_decode_variant_info[2].name, nullptr);
    EXPECT_EQ(kl_paged_decode_variant_info[2].module_info, nullptr);
}

TEST_F(VariantInfo, EachVariantLoadsWithTheSpecsConstants) {
    const int64_t width[] = {4, 8};
    for (int i = 0; i < 2; i++) {
        const kl_variant_info &v = kl_paged_decode_variant_info[i];
        ASSERT_EQ(kl_record_backend_load_variant(&rb, kl_paged_decode_variant_info, v.name, &mod), KL_SUCCESS)
            << kl_last_error_message();
        EXPECT_STREQ(mod.family, "paged_decode");
        EXPECT_STREQ(mod.variant, v.name);
        EXPECT_EQ(std::string(mod.spec_hash), spec_hash());
        int64_t w = 0, hd = 0;
        ASSERT_TRUE(kl_module_const(&mod, "DECODE_GQA_PACK_WIDTH", &w));
        ASSERT_TRUE(kl_module_const(&mod, "DECODE_GQA_PACK_HEAD_DIM", &hd));
        EXPECT_EQ(w, width[i]);
        EXPECT_EQ(hd, 128);
        EXPECT_EQ(mod.num_consts, 2u);
        EXPECT_EQ(kl_paged_decode_attn_bf16_gqa_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
        kl_module_unload(&mod);
    }
}

TEST_F(VariantInfo, AnUnknownNameIsRefusedNamingTheVariants) {
    EXPECT_EQ(kl_record_backend_load_variant(&rb, kl_paged_decode_variant_info, "gqa16_d128", &mod),
              KL_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(kl_last_error_message(),
                 "KL_ERROR_INVALID_ARGUMENT: kl_record_backend_load_variant: no variant 'gqa16_d128' in the table "
                 "(gqa4_d128, gqa8_d128)");
}

TEST_F(VariantInfo, AConstantTheSpecsVariantDoesNotDefineIsRefusedAtGet) {
    ASSERT_EQ(load_text("klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nconst DECODE_GQA_PACK_WIDTH 8\n"
                        "const DECODE_GQA_PACK_HEAD_DIM 128\nconst DECODE_EXTRA 1\n"),
              KL_SUCCESS);
    EXPECT_EQ(kl_paged_decode_attn_bf16_get(&k, &mod), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_NE(std::strstr(kl_last_error_message(),
                          "kl_paged_decode_attn_bf16_get: module paged_decode/gqa8_d128 defines constant DECODE_EXTRA, "
                          "which variant gqa8_d128 of specs/paged_decode.yaml does not"),
              nullptr)
        << kl_last_error_message();
    EXPECT_NE(k.magic, KL__KERNEL_MAGIC);
}

TEST_F(VariantInfo, AConstantWithAnotherValueThanTheSpecsIsRefusedAtGet) {
    // Before: accepted, and the launcher checked against the module's 4.
    ASSERT_EQ(load_text("klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nconst DECODE_GQA_PACK_WIDTH 4\n"
                        "const DECODE_GQA_PACK_HEAD_DIM 128\n"),
              KL_SUCCESS);
    EXPECT_EQ(kl_paged_decode_attn_bf16_gqa_get(&k, &mod), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_NE(std::strstr(kl_last_error_message(),
                          "module paged_decode/gqa8_d128 has DECODE_GQA_PACK_WIDTH = 4; variant gqa8_d128 of "
                          "specs/paged_decode.yaml has DECODE_GQA_PACK_WIDTH = 8"),
              nullptr)
        << kl_last_error_message();
}

TEST_F(VariantInfo, AStaleModuleIsStillReportedStale) {
    ASSERT_EQ(load_text("klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nspec_hash sha256:" +
                        std::string(64, 'a') + "\nconst DECODE_GQA_PACK_WIDTH 4\n"),
              KL_SUCCESS);
    EXPECT_EQ(kl_paged_decode_attn_bf16_get(&k, &mod), KL_ERROR_STALE_FATBIN) << kl_last_error_message();
}

TEST_F(VariantInfo, AVariantOfAnotherNameIsCheckedByWhatTheLauncherReads) {
    // A test's own variant (metadata text): allowed, as the wrapper tests use it.
    ASSERT_EQ(load_text("klaunch-module 1\nfamily paged_decode\nvariant gqa2_d64\nconst DECODE_GQA_PACK_WIDTH 2\n"
                        "const DECODE_GQA_PACK_HEAD_DIM 64\n"),
              KL_SUCCESS);
    EXPECT_EQ(kl_paged_decode_attn_bf16_gqa_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
}

}  // namespace
