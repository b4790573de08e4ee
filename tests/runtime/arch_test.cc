// The cuda_arch line of module metadata and launchers with `arch`
// (docs/DESIGN.md): a kernel whose work is in one target's machine code
// (sm_90a for wgmma) is refused at kl_kernel_get unless the module's loaded
// image is of that target, with a message naming the device's and the
// loaded image's architecture. Recording backend only: its "image" is the
// metadata text, so the line a fatbin's image would carry is written here.
#include <gtest/gtest.h>

#include <string>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

std::string meta(const char *arch_line) {
    return std::string("klaunch-module 1\nfamily mla_prefill\nvariant deepseek_v4_flash\n") + arch_line +
           "const MLA_HDIM 576\n";
}

kl_kernel_desc make_desc(const char *arch) {
    kl_kernel_desc d = {};
    d.launcher = "wg_attention";
    d.entry = "wg_attention_entry";
    d.family = "mla_prefill";
    d.spec_file = "specs/test.yaml";
    d.spec_line = 11;
    d.spec_hash = "";
    d.arch = arch;
    return d;
}

class ArchTest : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, records, 4); }
    void TearDown() override { kl_module_unload(&mod); }
    kl_status load(const std::string &text) { return kl_module_load(&rb.base, text.data(), text.size(), &mod); }

    kl_record records[4];
    kl_record_backend rb;
    kl_module mod{};
    kl_kernel k{};
};

TEST_F(ArchTest, ParsesCudaArchOfAnArchSpecificImage) {
    ASSERT_EQ(load(meta("cuda_arch 900a\n")), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.arch, "sm_90a");
}

TEST_F(ArchTest, ParsesCudaArchOfPlainAndFamilyImages) {
    ASSERT_EQ(load(meta("cuda_arch 1200\n")), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.arch, "sm_120");
    kl_module_unload(&mod);
    ASSERT_EQ(load(meta("cuda_arch 1000f\n")), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.arch, "sm_100f");
    kl_module_unload(&mod);
    ASSERT_EQ(load(meta("cuda_arch 800\n")), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.arch, "sm_80");
}

TEST_F(ArchTest, MetadataWithoutCudaArchLeavesItEmpty) {
    ASSERT_EQ(load(meta("")), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.arch, "");
}

TEST_F(ArchTest, RejectsAMalformedCudaArch) {
    for (const char *bad : {"cuda_arch 90a\n", "cuda_arch 900x\n", "cuda_arch sm_90a\n", "cuda_arch 905\n",
                            "cuda_arch 900af\n"}) {
        EXPECT_EQ(load(meta(bad)), KL_ERROR_MODULE_INFO) << bad;
        EXPECT_NE(std::string(kl_last_error_message()).find("cuda_arch"), std::string::npos) << kl_last_error_message();
        EXPECT_NE(mod.magic, KL__MODULE_MAGIC) << "a refused image leaves no module";
    }
}

TEST_F(ArchTest, KernelGetAcceptsTheLoadedImageOfItsArch) {
    ASSERT_EQ(load(meta("cuda_arch 900a\n")), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc d = make_desc("sm_90a");
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(k.magic, KL__KERNEL_MAGIC);
}

TEST_F(ArchTest, KernelGetRefusesAnotherTargetNamingTheDeviceAndTheLoadedImage) {
    rb.device_arch = "sm_100";
    ASSERT_EQ(load(meta("cuda_arch 1000\n")), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc d = make_desc("sm_90a");
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    const std::string msg = kl_last_error_message();
    EXPECT_EQ(msg,
              "KL_ERROR_UNSUPPORTED: kl_wg_attention_get: kernel wg_attention_entry needs sm_90a machine code, but on "
              "device sm_100 the driver loaded the sm_100 image of module mla_prefill/deepseek_v4_flash "
              "[specs/test.yaml:11]");
    EXPECT_NE(k.magic, KL__KERNEL_MAGIC) << "a refused lookup leaves no handle";
}

// sm_90 code on an sm_90 device is not sm_90a code: a fatbin built without
// the sm_90a target must not hand out its trap body.
TEST_F(ArchTest, KernelGetRefusesPlainSm90ForAnSm90aKernel) {
    rb.device_arch = "sm_90";
    ASSERT_EQ(load(meta("cuda_arch 900\n")), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc d = make_desc("sm_90a");
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kl_last_error_message()).find("loaded the sm_90 image"), std::string::npos)
        << kl_last_error_message();
}

TEST_F(ArchTest, KernelGetRefusesAnImageThatDoesNotSayItsTarget) {
    ASSERT_EQ(load(meta("")), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc d = make_desc("sm_90a");
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("no cuda_arch line"), std::string::npos) << msg;
    EXPECT_NE(msg.find("none (record backend)"), std::string::npos) << msg;
}

TEST_F(ArchTest, KernelWithoutArchLoadsFromAnyImage) {
    ASSERT_EQ(load(meta("cuda_arch 800\n")), KL_SUCCESS) << kl_last_error_message();
    const kl_kernel_desc d = make_desc(nullptr);
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_SUCCESS) << kl_last_error_message();
}

}  // namespace
