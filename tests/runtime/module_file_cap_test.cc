// KL_MODULE_FILE_MAX_BYTES is overridable (issue 15, item 4): this binary's
// runtime is compiled with a cap of 2048 bytes (its own KLAUNCH_IMPLEMENTATION
// below), so a 2048-byte file loads and a 2049-byte one is refused unread.
#define KL_MODULE_FILE_MAX_BYTES 2048u
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string write_file(const std::string &name, const std::string &contents) {
    const char *dir = std::getenv("TEST_TMPDIR");
    const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return "";
    std::fwrite(contents.data(), 1, contents.size(), f);
    std::fclose(f);
    return path;
}

// Metadata text padded with blank lines to exactly `bytes`.
std::string module_text(size_t bytes) {
    std::string text = "klaunch-module 1\nfamily f\nvariant v\n";
    text.resize(bytes, '\n');
    return text;
}

TEST(ModuleFileCap, TheCapIsOverridableAndInclusive) {
    kl_record records[1];
    kl_record_backend rb;
    kl_record_backend_init(&rb, records, 1);
    kl_module mod;
    const std::string fits = write_file("fits.txt", module_text(2048));
    ASSERT_FALSE(fits.empty());
    EXPECT_EQ(kl_module_load_file(&rb.base, fits.c_str(), &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.variant, "v");
    kl_module_unload(&mod);

    const std::string over = write_file("over.txt", module_text(2049));
    ASSERT_FALSE(over.empty());
    EXPECT_EQ(kl_module_load_file(&rb.base, over.c_str(), &mod), KL_ERROR_FILE_IO);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("is 2049 bytes, more than KL_MODULE_FILE_MAX_BYTES (2048)"), std::string::npos) << msg;
    EXPECT_NE(msg.find(over), std::string::npos) << msg;
    std::remove(fits.c_str());
    std::remove(over.c_str());
}

// Issue 44, defect 4: a file of exactly the cap that no loader takes (its
// first byte NUL) is refused from its first block, naming the path and what
// is wrong; one a byte past the cap from stat, unread, whatever it holds.
TEST(ModuleFileCap, AFileOfTheCapsSizeStartingWithNulIsRefusedAsNoImageAndOnePastTheCapFromStat) {
    kl_record records[1];
    kl_record_backend rb;
    kl_record_backend_init(&rb, records, 1);
    kl_module mod;
    const std::string zeros = write_file("zeros.bin", std::string(2048, '\0'));
    ASSERT_FALSE(zeros.empty());
    EXPECT_EQ(kl_module_load_file(&rb.base, zeros.c_str(), &mod), KL_ERROR_INVALID_IMAGE);
    std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("'" + zeros + "' (2048 bytes) starts with a NUL byte"), std::string::npos) << msg;
    const std::string past = write_file("past.bin", std::string(2049, '\0'));
    ASSERT_FALSE(past.empty());
    EXPECT_EQ(kl_module_load_file(&rb.base, past.c_str(), &mod), KL_ERROR_FILE_IO);
    msg = kl_last_error_message();
    EXPECT_NE(msg.find("is 2049 bytes, more than KL_MODULE_FILE_MAX_BYTES (2048)"), std::string::npos) << msg;
    std::remove(zeros.c_str());
    std::remove(past.c_str());
}

}  // namespace
