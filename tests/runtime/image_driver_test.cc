// Damaged images never reach the driver (issue 15, item 2): through the CUDA
// backend on a fake driver (fake_driver.h), kl_module_load refuses each
// damaged cubin and fatbin of image_corpus.h with KL_ERROR_INVALID_IMAGE
// before cuModuleLoadData is called, while the intact ones reach it and
// load. Before the fix the backend checked only a cubin's section header
// table and a fatbin's total size, and most of these reached the driver.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/runtime/fake_driver.h"
#include "tests/runtime/image_corpus.h"

namespace {

using namespace kl_image_corpus;

class ImageDriver : public ::testing::Test {
  protected:
    void SetUp() override { kl_fake_driver::init(&cb); }
    kl_status load(const Bytes &b, kl_module *mod) {
        return kl_fake_driver::load_module(&cb, b.data(), b.size(), mod);
    }
    void expect_never_reaches_the_driver(const std::vector<Damage> &damages) {
        for (const Damage &d : damages) {
            kl_module mod;
            const int before = kl_fake_driver::state().module_loads;
            EXPECT_EQ(load(d.image, &mod), KL_ERROR_INVALID_IMAGE)
                << d.name << ": " << kl_status_name(kl_last_error()) << " " << kl_last_error_message();
            EXPECT_EQ(kl_fake_driver::state().module_loads, before) << d.name << " reached cuModuleLoadData";
            EXPECT_NE(std::string(kl_last_error_message()).find("kl_module_load: "), std::string::npos)
                << kl_last_error_message();
            kl_module_unload(&mod);
        }
    }
    kl_cuda_backend cb;
};

TEST_F(ImageDriver, TheIntactCubinAndFatbinReachTheDriverAndLoad) {
    for (const Bytes &b : {SyntheticCubin(), SyntheticFatbin()}) {
        kl_module mod;
        const int before = kl_fake_driver::state().module_loads;
        ASSERT_EQ(load(b, &mod), KL_SUCCESS) << kl_last_error_message();
        EXPECT_EQ(kl_fake_driver::state().module_loads, before + 1);
        EXPECT_STREQ(mod.family, "corpus");
        kl_module_unload(&mod);
    }
}

TEST_F(ImageDriver, DamagedCubinsNeverReachTheDriver) {
    expect_never_reaches_the_driver(CubinDamages(SyntheticCubin(), "synthetic cubin"));
}

TEST_F(ImageDriver, DamagedFatbinsNeverReachTheDriver) {
    expect_never_reaches_the_driver(FatbinDamages(SyntheticFatbin(), "synthetic fatbin"));
}

TEST_F(ImageDriver, ACubinCutByOneByteNeverReachesTheDriver) {
    // The case of issue 15: program headers sit at a cubin's end.
    Bytes b = SyntheticCubin();
    b.pop_back();
    kl_module mod;
    EXPECT_EQ(load(b, &mod), KL_ERROR_INVALID_IMAGE) << kl_last_error_message();
    EXPECT_EQ(kl_fake_driver::state().module_loads, 0);
}

}  // namespace
