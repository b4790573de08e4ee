// kl_module_load_file refuses what it cannot read as a module file (issue 15,
// item 4): anything but a regular file (a directory asked for a 2^63-byte
// allocation, a FIFO blocked forever, /dev/zero read as "empty"), and a file
// larger than KL_MODULE_FILE_MAX_BYTES, before reading it; every message
// names the path. module_file_cap_test overrides the cap.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

std::string temp_dir() {
    const char *dir = std::getenv("TEST_TMPDIR");
    std::string path = std::string(dir ? dir : "/tmp") + "/klaunch_file_XXXXXX";
    return mkdtemp(&path[0]) ? path : "";
}

class ModuleFile : public ::testing::Test {
  protected:
    void SetUp() override {
        kl_record_backend_init(&rb, records, 1);
        dir = temp_dir();
        ASSERT_FALSE(dir.empty());
    }
    void TearDown() override { kl_module_unload(&mod); }
    // Refused with `status`, the message naming the path and `what`, and no
    // module left behind.
    void expect_refused(const std::string &path, kl_status status, const std::string &what) {
        EXPECT_EQ(kl_module_load_file(&rb.base, path.c_str(), &mod), status)
            << path << ": " << kl_status_name(kl_last_error()) << " " << kl_last_error_message();
        const std::string msg = kl_last_error_message();
        EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find(what), std::string::npos) << msg;
        EXPECT_EQ(mod.magic, 0u);
    }

    kl_record records[1];
    kl_record_backend rb;
    kl_module mod{};
    std::string dir;
};

TEST_F(ModuleFile, RefusesADirectoryNamingIt) {
    expect_refused(dir, KL_ERROR_FILE_IO, "is a directory, not a regular file");
}

TEST_F(ModuleFile, RefusesAFifoWithoutWaitingForAWriter) {
    const std::string fifo = dir + "/module.fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    // With no writer, a blocking open never returns: the test would time out.
    const auto start = std::chrono::steady_clock::now();
    expect_refused(fifo, KL_ERROR_FILE_IO, "is a FIFO");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    std::remove(fifo.c_str());
}

TEST_F(ModuleFile, RefusesDevZeroInsteadOfReadingItAsEmpty) {
    expect_refused("/dev/zero", KL_ERROR_FILE_IO, "is a character device");
    expect_refused("/dev/null", KL_ERROR_FILE_IO, "is a character device");
}

TEST_F(ModuleFile, RefusesASocket) {
    // A socket path must fit sockaddr_un's 108 bytes; TEST_TMPDIR is deeper.
    std::string short_dir = "/tmp/klsockXXXXXX";
    ASSERT_NE(mkdtemp(&short_dir[0]), nullptr);
    const std::string path = short_dir + "/s";
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof addr.sun_path);
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0) << std::strerror(errno);
    expect_refused(path, KL_ERROR_FILE_IO, "is a socket");
    close(fd);
    std::remove(path.c_str());
    rmdir(short_dir.c_str());
}

TEST_F(ModuleFile, RefusesAFileLargerThanTheCapBeforeReadingIt) {
    // A sparse file of 1 GiB + 1 byte: past the default cap, and read not at
    // all (reading it would take seconds and allocate 1 GiB).
    const std::string path = dir + "/huge.fatbin";
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(KL_MODULE_FILE_MAX_BYTES) + 1), 0) << std::strerror(errno);
    close(fd);
    const auto start = std::chrono::steady_clock::now();
    expect_refused(path, KL_ERROR_FILE_IO, "is 1073741825 bytes, more than KL_MODULE_FILE_MAX_BYTES (1073741824)");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    std::remove(path.c_str());
}

// Issue 44, defect 4: /proc/self/maps is a regular file to stat, of size 0,
// yet reads as text; it was refused as "empty (was the fatbin built without
// a CUDA toolkit?)", which is not what is wrong with it.
TEST_F(ModuleFile, RefusesAPseudoFileThatStatSizesAsZeroButHasContentNotAsEmpty) {
    struct stat sb;
    if (stat("/proc/self/maps", &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size != 0)
        GTEST_SKIP() << "no /proc/self/maps of size 0 here";
    expect_refused("/proc/self/maps", KL_ERROR_FILE_IO,
                   "is a file whose size stat gives as 0 but that has content (a procfs or sysfs file?), not a "
                   "module image");
    EXPECT_EQ(std::string(kl_last_error_message()).find("empty"), std::string::npos) << kl_last_error_message();
}

// Issue 44, defect 4: a file of exactly the cap is within it, but one that
// no loader takes (zeros) was read whole, 1 GiB in seconds, before being
// refused; its first block says enough. A sparse file of zeros the cap's size.
TEST_F(ModuleFile, RefusesAFileOfZerosTheCapsSizeFromItsFirstBlockWithoutReadingItWhole) {
    const std::string path = dir + "/zeros.fatbin";
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(KL_MODULE_FILE_MAX_BYTES)), 0) << std::strerror(errno);
    close(fd);
    const auto start = std::chrono::steady_clock::now();
    expect_refused(path, KL_ERROR_INVALID_IMAGE,
                   "(1073741824 bytes) starts with a NUL byte: not a fatbin (magic 0xBA55ED50), cubin (ELF), PTX or "
                   "module metadata text");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    std::remove(path.c_str());
}

TEST_F(ModuleFile, RefusesAnEmptyFileNamingIt) {
    const std::string path = dir + "/empty.fatbin";
    std::FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
    expect_refused(path, KL_ERROR_INVALID_IMAGE, "is empty");
    std::remove(path.c_str());
}

TEST_F(ModuleFile, RefusesAMissingFileNamingItAndWhy) {
    expect_refused(dir + "/missing.fatbin", KL_ERROR_FILE_IO, "No such file or directory");
}

TEST_F(ModuleFile, ReadsARegularFileThroughASymlink) {
    const std::string path = dir + "/m.txt", link = dir + "/link.txt";
    const std::string text = "klaunch-module 1\nfamily f\nvariant v\n";
    std::FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
    ASSERT_EQ(kl_module_load_file(&rb.base, link.c_str(), &mod), KL_SUCCESS) << kl_last_error_message();
    EXPECT_STREQ(mod.variant, "v");
    std::remove(link.c_str());
    std::remove(path.c_str());
}

}  // namespace
