// Statuses (the one X-macro list) and error reporting: the last message per
// thread and the error callback.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

std::vector<kl_status> all_statuses() {
    std::vector<kl_status> out;
    for (int s = 0; s < KL_STATUS_COUNT; s++) out.push_back(static_cast<kl_status>(s));
    return out;
}

TEST(Status, SuccessIsZeroSoCallersCanTestItAsFalse) {
    EXPECT_EQ(static_cast<int>(KL_SUCCESS), 0);
    EXPECT_STREQ(kl_status_name(KL_SUCCESS), "KL_SUCCESS");
}

TEST(Status, EveryStatusHasADistinctNameAndMessage) {
    std::set<std::string> names, messages;
    for (kl_status s : all_statuses()) {
        const std::string name = kl_status_name(s), message = kl_status_string(s);
        EXPECT_EQ(name.rfind("KL_", 0), 0u) << name;
        EXPECT_NE(name, "KL_UNKNOWN_STATUS") << "status " << s;
        EXPECT_FALSE(message.empty()) << name;
        EXPECT_NE(message, "unknown status") << name;
        EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
        EXPECT_TRUE(messages.insert(message).second) << "duplicate message for " << name << ": " << message;
    }
    EXPECT_EQ(names.size(), static_cast<size_t>(KL_STATUS_COUNT));
}

TEST(Status, NamesAreTheEnumeratorsSpelledOut) {
    // The X-macro stringifies each enumerator: spot-check across the list.
    EXPECT_STREQ(kl_status_name(KL_ERROR_GRID_LIMIT), "KL_ERROR_GRID_LIMIT");
    EXPECT_STREQ(kl_status_name(KL_ERROR_VARIANT_MISMATCH), "KL_ERROR_VARIANT_MISMATCH");
    EXPECT_STREQ(kl_status_name(KL_ERROR_NO_DRIVER), "KL_ERROR_NO_DRIVER");
    EXPECT_STREQ(kl_status_name(KL_ERROR_UNSUPPORTED), "KL_ERROR_UNSUPPORTED");
}

// The largest value of kl_status's C++ range ([dcl.enum]: the smallest
// bit-field holding every enumerator, here 0 ... 2^bits - 1): a value no
// status has, converted without undefined behaviour. static_cast of -1, as
// this test once did, is undefined in C++17 (UBSan: issue 15, item 8); C
// callers' -1 is covered by runtime_c99_test.
constexpr int largest_in_range() {
    int top = 1;
    while (top <= KL_STATUS_COUNT) top *= 2;
    return top - 1;
}

TEST(Status, ValuesOutsideTheListAreReportedAsUnknownWithoutAnOutOfRangeCast) {
    EXPECT_STREQ(kl_status_name(KL_STATUS_COUNT), "KL_UNKNOWN_STATUS");
    EXPECT_STREQ(kl_status_string(KL_STATUS_COUNT), "unknown status");
    static_assert(largest_in_range() >= KL_STATUS_COUNT, "in range, and no status");
    EXPECT_STREQ(kl_status_name(static_cast<kl_status>(largest_in_range())), "KL_UNKNOWN_STATUS");
    EXPECT_STREQ(kl_status_string(static_cast<kl_status>(largest_in_range())), "unknown status");
}

// A failure any build can produce: loading an empty image.
kl_status fail_once(kl_record_backend *rb) {
    kl_module mod;
    return kl_module_load(&rb->base, "", 0, &mod);
}

TEST(ErrorReporting, LastErrorKeepsTheStatusAndAMessageNamingIt) {
    kl_record_backend rb;
    kl_record_backend_init(&rb, nullptr, 0);
    ASSERT_EQ(fail_once(&rb), KL_ERROR_INVALID_IMAGE);
    EXPECT_EQ(kl_last_error(), KL_ERROR_INVALID_IMAGE);
    const std::string msg = kl_last_error_message();
    EXPECT_EQ(msg.rfind("KL_ERROR_INVALID_IMAGE: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("kl_module_load"), std::string::npos) << msg;
}

TEST(ErrorReporting, LastErrorIsKeptPerThread) {
    kl_record_backend rb;
    kl_record_backend_init(&rb, nullptr, 0);
    ASSERT_EQ(fail_once(&rb), KL_ERROR_INVALID_IMAGE);
    std::string other_message = "not run";
    kl_status other_status = KL_ERROR_DRIVER;
    std::thread t([&] {
        other_message = kl_last_error_message();
        other_status = kl_last_error();
    });
    t.join();
    EXPECT_EQ(other_message, "");
    EXPECT_EQ(other_status, KL_SUCCESS);
    EXPECT_EQ(kl_last_error(), KL_ERROR_INVALID_IMAGE);
}

struct Seen {
    int calls = 0;
    kl_status status = KL_SUCCESS;
    std::string message;
};

void remember(kl_status status, const char *message, void *user) {
    Seen *seen = static_cast<Seen *>(user);
    seen->calls++;
    seen->status = status;
    seen->message = message;
}

TEST(ErrorReporting, CallbackReceivesEveryFailureWithItsMessageAndUserPointer) {
    kl_record_backend rb;
    kl_record_backend_init(&rb, nullptr, 0);
    Seen seen;
    kl_set_error_callback(remember, &seen);
    EXPECT_EQ(fail_once(&rb), KL_ERROR_INVALID_IMAGE);
    kl_module mod;
    EXPECT_EQ(kl_module_load_file(&rb.base, "/nonexistent/klaunch/module.fatbin", &mod), KL_ERROR_FILE_IO);
    kl_set_error_callback(nullptr, nullptr);
    EXPECT_EQ(seen.calls, 2);
    EXPECT_EQ(seen.status, KL_ERROR_FILE_IO);
    EXPECT_EQ(seen.message, kl_last_error_message());
}

TEST(ErrorReporting, NoCallbackAfterItIsCleared) {
    kl_record_backend rb;
    kl_record_backend_init(&rb, nullptr, 0);
    Seen seen;
    kl_set_error_callback(remember, &seen);
    kl_set_error_callback(nullptr, nullptr);
    EXPECT_EQ(fail_once(&rb), KL_ERROR_INVALID_IMAGE);
    EXPECT_EQ(seen.calls, 0);
}

TEST(ErrorReporting, CallbackIsNotCalledOnSuccess) {
    kl_record_backend rb;
    kl_record_backend_init(&rb, nullptr, 0);
    Seen seen;
    kl_set_error_callback(remember, &seen);
    const char meta[] = "klaunch-module 1\nfamily f\n";
    kl_module mod;
    const kl_status st = kl_module_load(&rb.base, meta, sizeof meta - 1, &mod);
    kl_set_error_callback(nullptr, nullptr);
    ASSERT_EQ(st, KL_SUCCESS) << kl_last_error_message();
    kl_module_unload(&mod);
    EXPECT_EQ(seen.calls, 0);
}

}  // namespace
