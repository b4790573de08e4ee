// The stale-fatbin check of kl_kernel_get (include/klaunch/klaunch.h),
// through the recording backend: no GPU. A module whose metadata names
// another spec hash than the launcher's header is refused with
// KL_ERROR_STALE_FATBIN and a message naming both hashes, the module's
// family and variant, and how to rebuild. The hashes expected here are
// sha256sum's of the spec files (spec_hashes.h, a genrule), not the
// generator's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "klaunch/argtest.h"
#include "klaunch/record_backend.h"
#include "tests/arg_order/spec_hashes.h"

namespace {

// sha256 of the empty string: a well-formed hash of no spec of ours.
const char kOtherHash[] = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string metadata(const std::string &spec_hash_line) {
    return "klaunch-module 1\nfamily argtest\nvariant v1\n" + spec_hash_line + "source_hash unknown\n";
}

std::string stale_message(const char *launcher, const kl_kernel_desc &d, const std::string &module_hash) {
    return std::string("KL_ERROR_STALE_FATBIN: kl_") + launcher + "_get: module argtest/v1 was built from spec " +
           module_hash + ", this launcher's header from spec " + ARGTEST_SPEC_HASH + " [" + d.spec_file + ":" +
           std::to_string(d.spec_line) +
           "]: one of them is stale; rebuild both from the same spec: ./bazelw build //kernels:argtest (or "
           "./bazelw run //:generate)";
}

class StaleRecordTest : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb, recs, 4); }
    void TearDown() override { kl_module_unload(&mod); }
    void load(const std::string &text) {
        ASSERT_EQ(kl_module_load(&rb.base, text.data(), text.size(), &mod), KL_SUCCESS) << kl_last_error_message();
    }
    kl_record recs[4];
    kl_record_backend rb;
    kl_module mod{};
};

TEST_F(StaleRecordTest, TheHeaderCarriesTheHashOfItsSpecFile) {
    EXPECT_STREQ(kl_argtest_axpy_desc.spec_hash, ARGTEST_SPEC_HASH);
    EXPECT_STREQ(kl_argtest_fill_desc.spec_hash, ARGTEST_SPEC_HASH);
    EXPECT_STRNE(ARGTEST_SPEC_HASH, ARGTEST_STALE_SPEC_HASH);
}

TEST_F(StaleRecordTest, AModuleOfTheSameSpecLoads) {
    load(metadata(std::string("spec_hash ") + ARGTEST_SPEC_HASH + "\n"));
    kl_kernel axpy, fill;
    EXPECT_EQ(kl_argtest_axpy_get(&axpy, &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kl_argtest_fill_get(&fill, &mod), KL_SUCCESS) << kl_last_error_message();
}

TEST_F(StaleRecordTest, AModuleOfTheOlderSpecIsStale) {
    load(metadata(std::string("spec_hash ") + ARGTEST_STALE_SPEC_HASH + "\n"));
    kl_kernel k;
    EXPECT_EQ(kl_argtest_axpy_get(&k, &mod), KL_ERROR_STALE_FATBIN);
    EXPECT_EQ(kl_last_error_message(), stale_message("argtest_axpy", kl_argtest_axpy_desc, ARGTEST_STALE_SPEC_HASH));
    EXPECT_NE(k.magic, KL__KERNEL_MAGIC);  // the handle stays unloaded
    EXPECT_EQ(kl_argtest_fill_get(&k, &mod), KL_ERROR_STALE_FATBIN);
    EXPECT_EQ(kl_last_error_message(), stale_message("argtest_fill", kl_argtest_fill_desc, ARGTEST_STALE_SPEC_HASH));
}

TEST_F(StaleRecordTest, AnyOtherWellFormedHashIsStale) {
    load(metadata(std::string("spec_hash ") + kOtherHash + "\n"));
    kl_kernel k;
    EXPECT_EQ(kl_argtest_axpy_get(&k, &mod), KL_ERROR_STALE_FATBIN);
    EXPECT_EQ(kl_last_error_message(), stale_message("argtest_axpy", kl_argtest_axpy_desc, kOtherHash));
}

TEST_F(StaleRecordTest, StalenessIsReportedBeforeAMissingKernel) {
    rb.missing_entry = "argtest_axpy";
    load(metadata(std::string("spec_hash ") + ARGTEST_STALE_SPEC_HASH + "\n"));
    kl_kernel k;
    EXPECT_EQ(kl_argtest_axpy_get(&k, &mod), KL_ERROR_STALE_FATBIN);
}

TEST_F(StaleRecordTest, HandWrittenMetadataWithoutARealHashIsNotCompared) {
    // The documented rule (docs/ARG_ORDER.md): only "sha256:" and 64 hex
    // digits on both sides are compared; test metadata may carry a
    // placeholder or no hash at all.
    for (const std::string line : {"spec_hash sha256:test\n", "spec_hash x\n", "",
                                   "spec_hash sha256:0123456789abcdef\n"}) {
        SCOPED_TRACE(line);
        kl_module_unload(&mod);
        load(metadata(line));
        kl_kernel k;
        EXPECT_EQ(kl_argtest_axpy_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    }
    // One digit short of a hash is not one either.
    kl_module_unload(&mod);
    load(metadata(std::string("spec_hash ") + std::string(kOtherHash, sizeof kOtherHash - 2) + "\n"));
    kl_kernel k;
    EXPECT_EQ(kl_argtest_axpy_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
}

}  // namespace
