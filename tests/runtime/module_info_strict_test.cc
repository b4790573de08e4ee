// Module metadata is read strictly (issue 15, item 3): what the generated
// .cuh writes (docs/DESIGN.md: "klaunch-module 1", then one "key value"
// line per field, constants as "const NAME <decimal int64>") is accepted,
// and every line this runtime would otherwise misread is
// KL_ERROR_MODULE_INFO naming the line: no silent truncation of a field, no
// octal, no saturated or wrapped number.
#include <gtest/gtest.h>

#include <string>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

class ModuleInfoStrict : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, records, 1); }
    void TearDown() override { kl_module_unload(&mod); }
    kl_status load(const std::string &text) { return kl_module_load(&rb.base, text.data(), text.size(), &mod); }
    std::string message() const { return kl_last_error_message(); }
    // The head of every text below: the lines the generator always writes.
    static std::string head() { return "klaunch-module 1\nfamily mla_prefill\nvariant v\n"; }
    void expect_refused(const std::string &text, const std::string &fragment) {
        EXPECT_EQ(load(text), KL_ERROR_MODULE_INFO) << "accepted:\n" << text;
        EXPECT_NE(message().find(fragment), std::string::npos) << message();
        EXPECT_EQ(mod.magic, 0u) << "a refused load leaves no module behind";
        kl_module_unload(&mod);
    }

    kl_record records[1];
    kl_record_backend rb;
    kl_module mod{};
};

TEST_F(ModuleInfoStrict, RejectsAConstantBeyondInt64InsteadOfSaturating) {
    // strtoll kept INT64_MAX for this (issue 15).
    expect_refused(head() + "const MLA_HDIM 99999999999999999999\n", "MLA_HDIM");
    expect_refused(head() + "const MLA_HDIM 9223372036854775808\n", "line 4");
    expect_refused(head() + "const MLA_HDIM -9223372036854775809\n", "not a decimal 64-bit integer");
}

TEST_F(ModuleInfoStrict, AcceptsTheInt64Extremes) {
    ASSERT_EQ(load(head() + "const A 9223372036854775807\nconst B -9223372036854775808\nconst C 0\nconst D -5\n"),
              KL_SUCCESS)
        << message();
    int64_t a = 0, b = 0, c = 1, d = 0;
    EXPECT_TRUE(kl_module_const(&mod, "A", &a));
    EXPECT_TRUE(kl_module_const(&mod, "B", &b));
    EXPECT_TRUE(kl_module_const(&mod, "C", &c));
    EXPECT_TRUE(kl_module_const(&mod, "D", &d));
    EXPECT_EQ(a, INT64_MAX);
    EXPECT_EQ(b, INT64_MIN);
    EXPECT_EQ(c, 0);
    EXPECT_EQ(d, -5);
}

TEST_F(ModuleInfoStrict, RejectsAConstantWithLeadingZerosInsteadOfReadingOctalOrZero) {
    // 576 behind 97 zeros was kept as 0, and 0576 as octal 382 (issue 15).
    expect_refused(head() + "const MLA_HDIM " + std::string(97, '0') + "576\n", "leading zeros");
    expect_refused(head() + "const MLA_HDIM 0576\n", "'0576'");
    expect_refused(head() + "const MLA_HDIM 00\n", "MLA_HDIM");
    expect_refused(head() + "const MLA_HDIM -0\n", "MLA_HDIM");
}

TEST_F(ModuleInfoStrict, RejectsNumbersTheGeneratorNeverWrites) {
    expect_refused(head() + "const MLA_HDIM 0x240\n", "'0x240'");
    expect_refused(head() + "const MLA_HDIM +576\n", "'+576'");
    expect_refused(head() + "const MLA_HDIM 576.0\n", "'576.0'");
    expect_refused(head() + "const MLA_HDIM -\n", "'-'");
}

TEST_F(ModuleInfoStrict, RejectsALineLongerThanItReadsInsteadOfCuttingIt) {
    // A 256-character line was cut to 255 and this one kept MLA_HDIM = 5.
    std::string line = "const MLA_HDIM 5";
    line += std::string(256 - line.size() - 2, ' ') + "76";
    ASSERT_EQ(line.size(), 256u);
    expect_refused(head() + line + "\n", "line 4 is 256 characters");
    // The limit holds for keys this runtime does not know, too.
    expect_refused(head() + "future_key " + std::string(300, 'x') + "\n", "at most 255");
}

TEST_F(ModuleInfoStrict, AcceptsALineOfExactly255Characters) {
    const std::string line = "future_key " + std::string(255 - 11, 'x');
    ASSERT_EQ(line.size(), 255u);
    EXPECT_EQ(load(head() + line + "\n"), KL_SUCCESS) << message();
}

TEST_F(ModuleInfoStrict, RejectsAHashTooLongForItsSlotInsteadOfCuttingIt) {
    // A long source_hash was cut to 79 characters (issue 15).
    expect_refused(head() + "source_hash sha256:" + std::string(100, 'a') + "\n", "source_hash");
    expect_refused(head() + "spec_hash sha256:" + std::string(73, 'b') + "\n", "at most 79 fit");
    // 79 characters fit.
    const std::string fits = "sha256:" + std::string(72, 'c');
    ASSERT_EQ(fits.size(), 79u);
    ASSERT_EQ(load(head() + "source_hash " + fits + "\n"), KL_SUCCESS) << message();
    EXPECT_EQ(std::string(mod.source_hash), fits);
}

TEST_F(ModuleInfoStrict, RejectsNamesTooLongForTheirSlots) {
    expect_refused("klaunch-module 1\nfamily " + std::string(64, 'f') + "\n", "family");
    expect_refused("klaunch-module 1\nfamily f\nvariant " + std::string(64, 'v') + "\n", "variant");
    expect_refused(head() + "const " + std::string(48, 'C') + " 1\n", "constant");
}

TEST_F(ModuleInfoStrict, RejectsExtraFieldsInsteadOfDroppingThem) {
    expect_refused("klaunch-module 1\nfamily mla_prefill extra\n", "has 3 fields; family takes 2");
    expect_refused(head() + "const MLA_HDIM 576 1\n", "const takes 3");
    expect_refused(head() + "source_hash my hash\n", "source_hash takes 2");
    expect_refused("klaunch-module 1 0\nfamily f\n", "klaunch-module takes 2");
}

TEST_F(ModuleInfoStrict, RejectsRepeatedKeysAndConstants) {
    expect_refused("klaunch-module 1\nfamily mla_prefill\nfamily paged_decode\n", "a second family line");
    expect_refused(head() + "variant w\n", "a second variant line");
    expect_refused(head() + "spec_hash a\nspec_hash b\n", "a second spec_hash line");
    expect_refused(head() + "const MLA_HDIM 576\nconst MLA_HDIM 320\n", "constant MLA_HDIM defined twice");
    expect_refused(head() + "klaunch-module 1\n", "a second klaunch-module line");
}

TEST_F(ModuleInfoStrict, RejectsNamesThatAreNotCIdentifiers) {
    expect_refused("klaunch-module 1\nfamily mla-prefill\n", "not a C identifier");
    expect_refused(head() + "const 1ABC 1\n", "constant name '1ABC'");
    expect_refused("klaunch-module 1\nfamily f\nvariant a.b\n", "variant 'a.b'");
}

TEST_F(ModuleInfoStrict, RejectsControlCharacters) {
    expect_refused(head() + "const MLA_HDIM 576\r\n", "control character (byte 0x0d");
    expect_refused("klaunch-module 1\nfamily\tf\n", "byte 0x09");
}

TEST_F(ModuleInfoStrict, RejectsTextThatDoesNotBeginWithTheMagicLine) {
    expect_refused("family mla_prefill\nklaunch-module 1\n", "line 1: 'family mla_prefill' before");
}

TEST_F(ModuleInfoStrict, AcceptsWhatTheGeneratorWrites) {
    // generated/klaunch/mla_prefill.cuh's kl__module_info, with its NUL.
    const char text[] =
        "klaunch-module 1\n"
        "family mla_prefill\n"
        "variant deepseek_v4_flash\n"
        "spec_hash sha256:04473e347cae768980fd8cab33d905d812a51009cb735da6083de889428718ba\n"
        "source_hash unknown\n"
        "const MLA_HDIM 576\n"
        "const MLA_V_HAS_ROPE 1\n";
    ASSERT_EQ(kl_module_load(&rb.base, text, sizeof text, &mod), KL_SUCCESS) << message();
    EXPECT_STREQ(mod.family, "mla_prefill");
    EXPECT_STREQ(mod.variant, "deepseek_v4_flash");
    EXPECT_STREQ(mod.spec_hash, "sha256:04473e347cae768980fd8cab33d905d812a51009cb735da6083de889428718ba");
    EXPECT_EQ(mod.num_consts, 2u);
    EXPECT_EQ(mod.const_values[0], 576);
    EXPECT_EQ(mod.const_values[1], 1);
}

TEST_F(ModuleInfoStrict, LeavesUnknownKeysAndBlankLinesForNewerRuntimes) {
    ASSERT_EQ(load(head() + "\nfuture_key a b c d\n   \nconst A 1\n"), KL_SUCCESS) << message();
    EXPECT_EQ(mod.num_consts, 1u);
}

}  // namespace
