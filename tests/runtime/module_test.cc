// Modules and kernel handles through the recording backend, whose image is
// the module metadata text of docs/DESIGN.md: parsing, kl_module_load_file,
// kl_module_const and kl_kernel_get.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

// What the generated .cuh of the MLA prefill family embeds for one variant
// (docs/DESIGN.md's format; constants from specs/mla_prefill.yaml).
const char kDeepseekMeta[] =
    "klaunch-module 1\n"
    "family mla_prefill\n"
    "variant deepseek_v4_flash\n"
    "spec_hash sha256:0123456789abcdef\n"
    "source_hash unknown\n"
    "const MLA_HDIM 576\n"
    "const MLA_V_HAS_ROPE 1\n";

const char *const kHdimOnly[] = {"MLA_HDIM"};
const char *const kRopeThenHdim[] = {"MLA_V_HAS_ROPE", "MLA_HDIM"};
const char *const kGqaWidth[] = {"DECODE_GQA_PACK_WIDTH"};

kl_kernel_desc make_desc(const char *launcher, const char *family, const char *const *consts, uint32_t n) {
    kl_kernel_desc d = {};
    d.launcher = launcher;
    d.entry = launcher;
    d.family = family;
    d.spec_file = "specs/test.yaml";
    d.spec_line = 7;
    d.spec_hash = "";
    d.const_names = consts;
    d.num_consts = n;
    return d;
}

class ModuleTest : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, records, 4); }
    kl_status load(const std::string &text) { return kl_module_load(&rb.base, text.data(), text.size(), &mod); }
    void TearDown() override { kl_module_unload(&mod); }

    kl_record records[4];
    kl_record_backend rb;
    kl_module mod{};
};

// ---- metadata parsing -------------------------------------------------------

TEST_F(ModuleTest, ParsesFamilyVariantHashesAndConstants) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.family, "mla_prefill");
    EXPECT_STREQ(mod.variant, "deepseek_v4_flash");
    EXPECT_STREQ(mod.spec_hash, "sha256:0123456789abcdef");
    EXPECT_STREQ(mod.source_hash, "unknown");
    ASSERT_EQ(mod.num_consts, 2u);
    EXPECT_STREQ(mod.const_names[0], "MLA_HDIM");
    EXPECT_EQ(mod.const_values[0], 576);
    EXPECT_STREQ(mod.const_names[1], "MLA_V_HAS_ROPE");
    EXPECT_EQ(mod.const_values[1], 1);
    EXPECT_EQ(mod.backend, &rb.base);
}

TEST_F(ModuleTest, ModuleConstLooksUpByName) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    int64_t v = -1;
    EXPECT_EQ(kl_module_const(&mod, "MLA_HDIM", &v), 1);
    EXPECT_EQ(v, 576);
    v = -1;
    EXPECT_EQ(kl_module_const(&mod, "DECODE_GQA_PACK_WIDTH", &v), 0);
    EXPECT_EQ(v, -1) << "a missing constant leaves the output alone";
}

TEST_F(ModuleTest, AcceptsNegativeConstantsAndUnknownKeys) {
    // Constants are decimal, as the generator writes them; hex and octal are
    // refused (module_info_strict_test).
    ASSERT_EQ(load("klaunch-module 1\nfamily f\nfuture_key whatever\nconst A -3\nconst B 64\n"), KL_SUCCESS)
        << kl_last_error_message();
    int64_t a = 0, b = 0;
    EXPECT_TRUE(kl_module_const(&mod, "A", &a));
    EXPECT_TRUE(kl_module_const(&mod, "B", &b));
    EXPECT_EQ(a, -3);
    EXPECT_EQ(b, 64);
}

TEST_F(ModuleTest, AcceptsTextWithItsTrailingNul) {
    // sizeof a string literal counts its NUL; the generated kl__module_info too.
    ASSERT_EQ(kl_module_load(&rb.base, kDeepseekMeta, sizeof kDeepseekMeta, &mod), KL_SUCCESS)
        << kl_last_error_message();
    EXPECT_STREQ(mod.variant, "deepseek_v4_flash");
}

TEST_F(ModuleTest, RejectsTextWithoutTheMagicLine) {
    EXPECT_EQ(load("family mla_prefill\nvariant deepseek_v4_flash\n"), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("klaunch-module 1"), std::string::npos)
        << kl_last_error_message();
}

TEST_F(ModuleTest, RejectsAnotherMetadataVersion) {
    EXPECT_EQ(load("klaunch-module 2\nfamily mla_prefill\n"), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("version 2"), std::string::npos) << kl_last_error_message();
}

TEST_F(ModuleTest, RejectsANonIntegerConstant) {
    EXPECT_EQ(load("klaunch-module 1\nfamily mla_prefill\nconst MLA_HDIM 57x6\n"), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("MLA_HDIM"), std::string::npos) << kl_last_error_message();
}

TEST_F(ModuleTest, RejectsAConstantWithoutValue) {
    EXPECT_EQ(load("klaunch-module 1\nfamily mla_prefill\nconst MLA_HDIM\n"), KL_ERROR_MODULE_INFO);
}

TEST_F(ModuleTest, RejectsMoreConstantsThanKlMaxConsts) {
    std::string text = "klaunch-module 1\nfamily f\n";
    for (int i = 0; i <= KL_MAX_CONSTS; i++) text += "const C" + std::to_string(i) + " " + std::to_string(i) + "\n";
    EXPECT_EQ(load(text), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("KL_MAX_CONSTS"), std::string::npos)
        << kl_last_error_message();
}

TEST_F(ModuleTest, AcceptsExactlyKlMaxConsts) {
    std::string text = "klaunch-module 1\nfamily f\n";
    for (int i = 0; i < KL_MAX_CONSTS; i++) text += "const C" + std::to_string(i) + " " + std::to_string(i) + "\n";
    ASSERT_EQ(load(text), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(mod.num_consts, static_cast<uint32_t>(KL_MAX_CONSTS));
}

TEST_F(ModuleTest, RejectsTextWithoutAFamily) {
    EXPECT_EQ(load("klaunch-module 1\nvariant deepseek_v4_flash\n"), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("family"), std::string::npos) << kl_last_error_message();
}

TEST_F(ModuleTest, RejectsAConstantNameTooLongToKeep) {
    // kl_module keeps 47 characters of a constant's name; a truncated name
    // could match another constant, so a longer one is refused.
    const std::string name(60, 'C');
    EXPECT_EQ(load("klaunch-module 1\nfamily f\nconst " + name + " 1\n"), KL_ERROR_MODULE_INFO);
}

TEST_F(ModuleTest, AFailedLoadLeavesTheModuleUnloaded) {
    ASSERT_EQ(load("klaunch-module 2\nfamily f\n"), KL_ERROR_MODULE_INFO);
    EXPECT_EQ(mod.handle, nullptr);
    EXPECT_EQ(mod.backend, nullptr);
    kl_kernel k;
    const kl_kernel_desc desc = make_desc("x", "f", nullptr, 0);
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_INVALID_ARGUMENT);
}

TEST_F(ModuleTest, RejectsAnEmptyImage) {
    EXPECT_EQ(kl_module_load(&rb.base, "", 0, &mod), KL_ERROR_INVALID_IMAGE);
    EXPECT_EQ(kl_module_load(&rb.base, nullptr, 10, &mod), KL_ERROR_INVALID_IMAGE);
}

TEST_F(ModuleTest, RecordBackendRejectsABinaryImage) {
    // What a fatbin starts with (its magic, then zeros): not metadata text.
    const unsigned char fatbin[] = {0x50, 0xed, 0x55, 0xba, 0x01, 0x00, 0x10, 0x00, 0x40, 0x00, 0x00, 0x00};
    EXPECT_EQ(kl_module_load(&rb.base, fatbin, sizeof fatbin, &mod), KL_ERROR_INVALID_IMAGE);
}

// ---- kl_module_load_file ------------------------------------------------------

std::string temp_file(const std::string &contents) {
    const char *dir = std::getenv("TEST_TMPDIR");
    std::string path = std::string(dir ? dir : "/tmp") + "/klaunch_module_XXXXXX";
    const int fd = mkstemp(&path[0]);
    if (fd < 0) return "";
    if (!contents.empty() && write(fd, contents.data(), contents.size()) != static_cast<ssize_t>(contents.size()))
        path = "";
    close(fd);
    return path;
}

TEST_F(ModuleTest, LoadFileOfAMissingFileIsFileIoNamingThePath) {
    EXPECT_EQ(kl_module_load_file(&rb.base, "/nonexistent/klaunch/paged_decode_gqa8_d128.fatbin", &mod),
              KL_ERROR_FILE_IO);
    EXPECT_NE(std::string(kl_last_error_message()).find("/nonexistent/klaunch/paged_decode_gqa8_d128.fatbin"),
              std::string::npos)
        << kl_last_error_message();
}

TEST_F(ModuleTest, LoadFileOfAnEmptyFileIsInvalidImage) {
    // What a fatbin built without a CUDA toolkit is (docs/DESIGN.md, Build).
    const std::string path = temp_file("");
    ASSERT_FALSE(path.empty());
    EXPECT_EQ(kl_module_load_file(&rb.base, path.c_str(), &mod), KL_ERROR_INVALID_IMAGE);
    std::remove(path.c_str());
}

TEST_F(ModuleTest, LoadFileReadsTheWholeFile) {
    const std::string path = temp_file(kDeepseekMeta);
    ASSERT_FALSE(path.empty());
    ASSERT_EQ(kl_module_load_file(&rb.base, path.c_str(), &mod), KL_SUCCESS) << kl_last_error_message();
    std::remove(path.c_str());
    EXPECT_STREQ(mod.variant, "deepseek_v4_flash");
    EXPECT_EQ(mod.num_consts, 2u);
}

// ---- kl_kernel_get ------------------------------------------------------------

TEST_F(ModuleTest, KernelGetRefusesAModuleOfAnotherFamily) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc desc = make_desc("paged_decode_attn_bf16", "paged_decode", nullptr, 0);
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_FAMILY_MISMATCH);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("mla_prefill"), std::string::npos) << msg;
    EXPECT_NE(msg.find("paged_decode"), std::string::npos) << msg;
    EXPECT_NE(k.magic, static_cast<uint32_t>(KL__KERNEL_MAGIC));
}

TEST_F(ModuleTest, KernelGetRefusesAVariantWithoutAConstantTheLauncherReads) {
    ASSERT_EQ(load("klaunch-module 1\nfamily paged_decode\nvariant odd\nconst DECODE_GQA_PACK_HEAD_DIM 128\n"),
              KL_SUCCESS)
        << kl_last_error_message();
    const kl_kernel_desc desc = make_desc("paged_decode_attn_bf16_gqa", "paged_decode", kGqaWidth, 1);
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_NE(std::string(kl_last_error_message()).find("DECODE_GQA_PACK_WIDTH"), std::string::npos)
        << kl_last_error_message();
}

TEST_F(ModuleTest, KernelGetReportsAMissingEntryNamingItAndTheLauncher) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    kl_kernel_desc desc = make_desc("mla_prefill_attention_320", "mla_prefill", kHdimOnly, 1);
    desc.entry = "mla_prefill_attn_320";
    rb.missing_entry = "mla_prefill_attn_320";
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_KERNEL_NOT_FOUND);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("kl_mla_prefill_attention_320"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'mla_prefill_attn_320'"), std::string::npos) << msg;
}

TEST_F(ModuleTest, KernelGetFillsConstantsInTheDescriptorsOrder) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    // The module lists MLA_HDIM first; the launcher reads them the other way round.
    const kl_kernel_desc desc = make_desc("mla_cache_assemble_batched", "mla_prefill", kRopeThenHdim, 2);
    kl_kernel k;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &desc), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(k.consts[0], 1);    // MLA_V_HAS_ROPE
    EXPECT_EQ(k.consts[1], 576);  // MLA_HDIM
}

TEST_F(ModuleTest, KernelGetTakesTheBackendsLimitsAndMarksTheHandleLoaded) {
    ASSERT_EQ(load(kDeepseekMeta), KL_SUCCESS) << kl_last_error_message();
    rb.max_threads = 640;
    rb.max_dynamic_shared = 12345;
    const kl_kernel_desc desc = make_desc("mla_q_final_assemble_batched", "mla_prefill", kHdimOnly, 1);
    kl_kernel k;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &desc), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(k.max_threads, 640u);
    EXPECT_EQ(k.max_dynamic_shared, 12345u);
    EXPECT_EQ(k.desc, &desc);
    EXPECT_EQ(k.module, &mod);
    EXPECT_EQ(k.backend, &rb.base);
    EXPECT_NE(k.fn, nullptr);
    EXPECT_TRUE(kl__kernel_ok(&k, &desc));
}

TEST_F(ModuleTest, KernelGetRefusesAnUnloadedModule) {
    const kl_kernel_desc desc = make_desc("mla_q_final_assemble_batched", "mla_prefill", nullptr, 0);
    kl_module never_loaded = {};
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &never_loaded, &desc), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_kernel_get(&k, nullptr, &desc), KL_ERROR_INVALID_ARGUMENT);
}

}  // namespace
