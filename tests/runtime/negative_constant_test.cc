// A negative variant constant is refused printing what the module says
// (issue 15, item 7): launch expressions are unsigned, so
// kl_mla_prefill_attention_320 refuses a module whose MLA_HDIM is -1 with
// KL_ERROR_OVERFLOW, and its message reads "MLA_HDIM = -1", not the
// 18446744073709551615 of the sign-extended value.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

namespace {

const kl_bf16 *const kIn = reinterpret_cast<const kl_bf16 *>(uintptr_t{0x1000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x2000});

class NegativeConstant : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, recs, 1); }
    void TearDown() override { kl_module_unload(&mod); }
    // Loads a module whose MLA_HDIM is `hdim` and runs the launcher's checks.
    kl_status check_with(const std::string &hdim, uint32_t head_dim) {
        const std::string text =
            "klaunch-module 1\nfamily mla_prefill\nvariant odd\nconst MLA_HDIM " + hdim + "\nconst MLA_V_HAS_ROPE 0\n";
        kl_module_unload(&mod);
        EXPECT_EQ(kl_module_load(&rb.base, text.data(), text.size(), &mod), KL_SUCCESS) << kl_last_error_message();
        EXPECT_EQ(kl_mla_prefill_attention_320_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
        return kl_mla_prefill_attention_320_check(&k, kIn, kIn, kIn, kOut, 16, 1, 8, 8, head_dim, 0.05f, false);
    }

    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod{};
    kl_kernel k;
};

TEST_F(NegativeConstant, IsRefusedPrintingTheModulesValue) {
    EXPECT_EQ(check_with("-1", 320), KL_ERROR_OVERFLOW);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("MLA_HDIM = -1"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("18446744073709551615"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reads MLA_HDIM, which is negative"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head_dim = 320"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[specs/mla_prefill.yaml:"), std::string::npos) << msg;
}

TEST_F(NegativeConstant, TheMostNegativeValuePrintsAsItself) {
    EXPECT_EQ(check_with("-9223372036854775808", 320), KL_ERROR_OVERFLOW);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("MLA_HDIM = -9223372036854775808"), std::string::npos) << msg;
}

TEST_F(NegativeConstant, APositiveMismatchStillPrintsBothValues) {
    EXPECT_EQ(check_with("576", 320), KL_ERROR_VARIANT_MISMATCH);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("(head_dim = 320, MLA_HDIM = 576)"), std::string::npos) << msg;
}

TEST_F(NegativeConstant, TheMatchingVariantPasses) {
    EXPECT_EQ(check_with("320", 320), KL_SUCCESS) << kl_last_error_message();
}

}  // namespace
