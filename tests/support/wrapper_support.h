// Shared pieces of the wrapper tests: a recording backend with a loaded
// module, the seed's argument packing (KernelLaunch::arg_* with natural
// alignment) rebuilt independently of the generated code, and checks on
// refused launches (status, message, callback, nothing recorded).
#ifndef KLAUNCH_TESTS_SUPPORT_WRAPPER_SUPPORT_H
#define KLAUNCH_TESTS_SUPPORT_WRAPPER_SUPPORT_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace kltest {

// Distinctive fake device pointers: never dereferenced, only packed and
// compared. High and low halves both differ so a 4-byte pointer or a swap
// shows.
template <class T>
T *FakePtr(unsigned index) {
    return reinterpret_cast<T *>(static_cast<uintptr_t>(0x00007f0000000000ull +
                                                        (static_cast<uint64_t>(index) << 32) +
                                                        0x1000ull * index));
}

inline kl_stream FakeStream() { return reinterpret_cast<kl_stream>(static_cast<uintptr_t>(0x5eed0000cafe0ull)); }

// The seed's div_ceil.
inline uint64_t DivCeil(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Dim3 {
    uint64_t x, y, z;
};

// The seed's KernelLaunch argument builder, in the kernel's own layout:
// each argument at its natural alignment (pointers and u64 8, u32 and f32 4),
// bool as a u32 1/0. Padding is zero.
class SeedArgs {
  public:
    SeedArgs &Ptr(const void *p) { return Put(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)), 8); }
    SeedArgs &U32(uint32_t v) { return Put(v, 4); }
    SeedArgs &U64(uint64_t v) { return Put(v, 8); }
    SeedArgs &F32(float v) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        return Put(bits, 4);
    }
    SeedArgs &Bool(bool v) { return U32(v ? 1u : 0u); }
    const std::vector<unsigned char> &bytes() const { return bytes_; }

  private:
    SeedArgs &Put(uint64_t v, size_t size) {
        while (bytes_.size() % size != 0) bytes_.push_back(0);
        for (size_t i = 0; i < size; i++) bytes_.push_back(static_cast<unsigned char>(v >> (8 * i))); // little endian
        return *this;
    }
    std::vector<unsigned char> bytes_;
};

// Metadata text of a module as the kernel-side header writes it.
std::string ModuleText(const std::string &family, const std::string &variant,
                       const std::vector<std::pair<std::string, long long>> &consts);
std::string MlaPrefillModuleText(const std::string &variant); // mistral_small_4 or deepseek_v4_flash
std::string PagedDecodeModuleText(const std::string &variant); // gqa4_d128 or gqa8_d128

// A recording backend with room for a few launches. The record storage is
// filled with a pattern first, so bytes the backend leaves unwritten differ
// from the zero padding expected.
class RecordHarness {
  public:
    static constexpr size_t kCapacity = 4;
    RecordHarness();
    ~RecordHarness();
    RecordHarness(const RecordHarness &) = delete;
    RecordHarness &operator=(const RecordHarness &) = delete;

    // Loads a module from its metadata text; fails the test on error.
    const kl_module *Load(const std::string &text);
    kl_record_backend &backend() { return rb_; }
    size_t count() const { return rb_.count; }
    const kl_record &record(size_t i) const { return records_[i]; }
    void Clear();

  private:
    kl_record_backend rb_;
    kl_record records_[kCapacity];
    std::vector<kl_module *> modules_;
};

// Status comparison that prints names.
#define KL_EXPECT_STATUS(expected, actual) EXPECT_STREQ(kl_status_name(expected), kl_status_name(actual))
#define KL_ASSERT_STATUS(expected, actual) ASSERT_STREQ(kl_status_name(expected), kl_status_name(actual))

// The line of `fragments.back()` in spec `file`, searching from the line
// "- name: <launcher>" and, in turn, for each fragment; 0 if absent.
unsigned SpecLine(const std::string &file, const std::string &launcher, const std::vector<std::string> &fragments);
// "file:line" as error messages print it, with the line found by SpecLine.
std::string SpecRef(const std::string &file, const std::string &launcher, const std::vector<std::string> &fragments);

// Does `message` contain `ref` ("specs/x.yaml:42") not followed by a digit?
bool HasSpecRef(const std::string &message, const std::string &ref);

// What one refused call left behind.
struct Refusal {
    kl_status status;
    std::string message;          // kl_last_error_message() after the call
    int callbacks;                // error callback invocations during the call
    kl_status callback_status;    // what the callback received (last call)
    std::string callback_message;
    size_t records;               // backend records after the call
};

// Runs `call` with the backend cleared and an error callback installed, and
// returns what it left behind.
template <class Call>
Refusal Capture(RecordHarness &h, Call call);

// Expects `check` (a kl_X_check call) and `launch` (the kl_X call) to both
// refuse with `status`, record nothing, report through the callback exactly
// once with the same status and message, and give a message containing every
// fragment (and `spec_ref` as file:line unless empty). The two messages must
// be equal.
template <class Check, class Launch>
void ExpectRefused(RecordHarness &h, Check check, Launch launch, kl_status status,
                   const std::vector<std::string> &fragments, const std::string &spec_ref);

// Coverage guard, not a behaviour check: the launcher's preconditions (from
// its descriptor) are exactly `tested`, in spec order, and it declares no
// dynamic shared memory. A precondition or shared memory added to a spec
// fails here until it has a test.
void ExpectTestedChecks(const kl_kernel_desc *desc, const std::vector<std::string> &tested);

// Expects the one record to be the seed's launch.
void ExpectSeedLaunch(const RecordHarness &h, const kl_kernel_desc *desc, const char *entry, Dim3 grid, Dim3 block,
                      const std::vector<unsigned char> &args);

// ---- template definitions --------------------------------------------------
struct CallbackLog {
    int calls = 0;
    kl_status status = KL_SUCCESS;
    std::string message;
};
void LogError(kl_status status, const char *message, void *user);

template <class Call>
Refusal Capture(RecordHarness &h, Call call) {
    CallbackLog log;
    h.Clear();
    kl_set_error_callback(LogError, &log);
    kl_status st = call();
    kl_set_error_callback(nullptr, nullptr);
    Refusal r;
    r.status = st;
    r.message = kl_last_error_message();
    r.callbacks = log.calls;
    r.callback_status = log.status;
    r.callback_message = log.message;
    r.records = h.count();
    return r;
}

void ExpectRefusal(const Refusal &r, kl_status status, const std::vector<std::string> &fragments,
                   const std::string &spec_ref, const char *which);

template <class Check, class Launch>
void ExpectRefused(RecordHarness &h, Check check, Launch launch, kl_status status,
                   const std::vector<std::string> &fragments, const std::string &spec_ref) {
    Refusal c = Capture(h, check);
    ExpectRefusal(c, status, fragments, spec_ref, "kl_X_check");
    Refusal l = Capture(h, launch);
    ExpectRefusal(l, status, fragments, spec_ref, "kl_X");
    EXPECT_EQ(c.message, l.message) << "kl_X_check and kl_X word the same refusal differently";
}

// ---- launcher fixtures (mla_prefill_launchers.h, paged_decode_launchers.h) ----
// A fixture L has kName, kEntry, Desc(), Get(), Check(), Launch() and the
// seed's SeedGrid(), SeedBlock(), SeedArgs().

// Gets L's kernel from `module`, runs kl_X_check (which must accept and record
// nothing) and kl_X, and expects the one record to be the seed's launch.
template <class L>
void ExpectLaunchesAsSeed(RecordHarness &h, const kl_module *module, const L &a) {
    kl_kernel k;
    KL_ASSERT_STATUS(KL_SUCCESS, L::Get(&k, module)) << kl_last_error_message();
    h.Clear();
    KL_ASSERT_STATUS(KL_SUCCESS, a.Check(&k)) << kl_last_error_message();
    ASSERT_EQ(0u, h.count()) << "kl_X_check launched something";
    KL_ASSERT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
    ExpectSeedLaunch(h, L::Desc(), L::kEntry, a.SeedGrid(), a.SeedBlock(), a.SeedArgs());
}

// Expects kl_X_check and kl_X with arguments `a` to refuse with `status` (see
// ExpectRefused); the message must also name the launcher, kl_<kName>.
template <class L>
void ExpectLauncherRefuses(RecordHarness &h, const kl_kernel *k, const L &a, kl_status status,
                           std::vector<std::string> fragments, const std::string &spec_ref) {
    fragments.insert(fragments.begin(), std::string("kl_") + L::kName + ":");
    ExpectRefused(h, [&] { return a.Check(k); }, [&] { return a.Launch(k, FakeStream()); }, status, fragments,
                  spec_ref);
}

// Expects kl_X_check and kl_X with arguments `a` to accept an empty grid:
// success, nothing recorded, no error reported.
template <class L>
void ExpectEmptyLaunch(RecordHarness &h, const kl_kernel *k, const L &a) {
    Refusal c = Capture(h, [&] { return a.Check(k); });
    KL_EXPECT_STATUS(KL_SUCCESS, c.status) << c.message;
    EXPECT_EQ(0, c.callbacks);
    Refusal l = Capture(h, [&] { return a.Launch(k, FakeStream()); });
    KL_EXPECT_STATUS(KL_SUCCESS, l.status) << l.message;
    EXPECT_EQ(0, l.callbacks);
    EXPECT_EQ(0u, l.records) << "an empty grid launched";
}

} // namespace kltest

#endif // KLAUNCH_TESTS_SUPPORT_WRAPPER_SUPPORT_H
