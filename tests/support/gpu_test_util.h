// gpu_test_util.h - what a GPU kernel test needs besides GoogleTest.
//
// Depend on //tests/support:gpu_test_util; it also brings the one
// KLAUNCH_IMPLEMENTATION of the test binary (klaunch_impl.cc), so a test
// file only includes headers.
//
//     #include "tests/support/gpu_test_util.h"
//     #include "klaunch/paged_decode.h"
//
//     TEST_F(GpuTest, PagedDecodeMatchesReference) {   // skips without a GPU
//       kl_test::Module mod(bytes, size);              // a fatbin; throws on failure
//       kl_kernel k;
//       KL_ASSERT_OK(kl_paged_decode_attn_bf16_get(&k, mod));
//       kl_test::DeviceBuffer<kl_bf16> q(kl_test::to_bf16(q_host));
//       kl_test::DeviceBuffer<kl_bf16> out(n);
//       out.poison();                                  // NaN until written
//       KL_ASSERT_OK(kl_paged_decode_attn_bf16(&k, q.get(), ..., out.get(), ..., nullptr));
//       kl_test::synchronize();
//       EXPECT_TRUE(kl_test::all_close("out", out.download(), ref, 1e-2, 1e-2, 1e-2));
//     }
//
// What it holds:
// - gpu(): the process's kl_cuda_backend, initialised on first use (device 0,
//   or $KL_TEST_DEVICE); nullptr without a driver or GPU, and why_no_gpu()
//   says why. KL_TEST_REQUIRE_GPU() and the GpuTest fixture skip the test
//   then, with "no CUDA driver/GPU: <message>".
// - DeviceBuffer<T>, Module: RAII over device memory and loaded modules.
//   Their failures throw std::runtime_error with klaunch's message, which
//   GoogleTest reports as the test's failure.
// - bf16 and fp8 (OCP E4M3) <-> float, rounding to nearest even.
// - all_close (tolerance atol + rtol*|ref| per element, and a relative-norm
//   bound) and bitwise_equal; both print the first 10 mismatches.
#ifndef KLAUNCH_TESTS_SUPPORT_GPU_TEST_UTIL_H
#define KLAUNCH_TESTS_SUPPORT_GPU_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "klaunch/cuda_backend.h"
#include "klaunch/klaunch.h"

// Fails the test (fatally / not) when a klaunch call does not succeed, with
// the status name and the full message.
#define KL_ASSERT_OK(expr)                                                                     \
    do {                                                                                       \
        const kl_status kl_test_status_ = (expr);                                              \
        ASSERT_EQ(kl_test_status_, KL_SUCCESS)                                                 \
            << #expr << " returned " << kl_status_name(kl_test_status_) << ": "                \
            << kl_last_error_message();                                                        \
    } while (0)
#define KL_EXPECT_OK(expr)                                                                     \
    do {                                                                                       \
        const kl_status kl_test_status_ = (expr);                                              \
        EXPECT_EQ(kl_test_status_, KL_SUCCESS)                                                 \
            << #expr << " returned " << kl_status_name(kl_test_status_) << ": "                \
            << kl_last_error_message();                                                        \
    } while (0)

// Skips the calling test (or fixture SetUp) when there is no usable GPU.
#define KL_TEST_REQUIRE_GPU()                                                                  \
    do {                                                                                       \
        if (::kl_test::gpu() == nullptr)                                                       \
            GTEST_SKIP() << "no CUDA driver/GPU: " << ::kl_test::why_no_gpu();                 \
    } while (0)

namespace kl_test {

// ---- the process's CUDA backend ------------------------------------------

namespace detail {
struct GpuState {
    kl_cuda_backend cuda;
    kl_status status;
    std::string message;
};

// Initialised once, on first use, by whichever thread gets here first; never
// destroyed, so no test's teardown can run after the context is released.
inline GpuState &gpu_state() {
    static GpuState *state = [] {
        GpuState *s = new GpuState();
        const char *env = std::getenv("KL_TEST_DEVICE");
        const int ordinal = env != nullptr && *env != '\0' ? std::atoi(env) : 0;
        s->status = kl_cuda_backend_init(&s->cuda, ordinal);
        if (s->status != KL_SUCCESS) s->message = kl_last_error_message();
        return s;
    }();
    return *state;
}
}  // namespace detail

// The process's CUDA backend, or nullptr when there is no driver or GPU.
inline kl_cuda_backend *gpu() {
    detail::GpuState &s = detail::gpu_state();
    return s.status == KL_SUCCESS ? &s.cuda : nullptr;
}

// Why gpu() is nullptr: klaunch's message from kl_cuda_backend_init.
inline const std::string &why_no_gpu() { return detail::gpu_state().message; }

// Throws std::runtime_error("<what>: <klaunch message>") unless st is KL_SUCCESS.
inline void check(kl_status st, const std::string &what) {
    if (st != KL_SUCCESS) throw std::runtime_error(what + ": " + kl_last_error_message());
}

inline kl_cuda_backend *require_gpu() {
    kl_cuda_backend *cuda = gpu();
    if (cuda == nullptr)
        throw std::runtime_error("no CUDA driver/GPU (" + why_no_gpu() +
                                 "); call KL_TEST_REQUIRE_GPU() or use the GpuTest fixture first");
    return cuda;
}

// Waits for the device; a kernel fault (illegal address...) throws here.
inline void synchronize() { check(kl_cuda_synchronize(require_gpu()), "kl_cuda_synchronize"); }

// A fixture whose tests skip without a GPU; `cuda` is the process's backend.
class GpuTest : public ::testing::Test {
  protected:
    void SetUp() override {
        KL_TEST_REQUIRE_GPU();
        cuda = gpu();
    }
    kl_cuda_backend *cuda = nullptr;
};

// ---- device memory --------------------------------------------------------

// `count` elements of T in device memory, freed on destruction. Move-only.
template <class T>
class DeviceBuffer {
    static_assert(std::is_trivially_copyable<T>::value, "device buffers hold plain data");

  public:
    DeviceBuffer() = default;
    // Uninitialised: poison() it before a kernel writes it.
    explicit DeviceBuffer(size_t count) : count_(count) {
        check(kl_cuda_malloc(require_gpu(), &ptr_, count * sizeof(T)), "DeviceBuffer: allocation");
    }
    explicit DeviceBuffer(const std::vector<T> &host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() {
        if (ptr_ != nullptr) kl_cuda_free(gpu(), ptr_);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&other) noexcept : ptr_(other.ptr_), count_(other.count_) {
        other.ptr_ = nullptr;
        other.count_ = 0;
    }
    DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
        if (this != &other) {
            if (ptr_ != nullptr) kl_cuda_free(gpu(), ptr_);
            ptr_ = other.ptr_;
            count_ = other.count_;
            other.ptr_ = nullptr;
            other.count_ = 0;
        }
        return *this;
    }

    // The device pointer, typed for the launchers (const T* converts too).
    T *get() const { return static_cast<T *>(ptr_); }
    size_t size() const { return count_; }
    size_t bytes() const { return count_ * sizeof(T); }

    void upload(const T *host, size_t count) {
        if (count != count_)
            throw std::runtime_error("DeviceBuffer::upload: " + std::to_string(count) + " elements into a buffer of " +
                                     std::to_string(count_));
        check(kl_cuda_memcpy_htod(require_gpu(), ptr_, host, bytes()), "DeviceBuffer::upload");
    }
    void upload(const std::vector<T> &host) { upload(host.data(), host.size()); }

    std::vector<T> download() const {
        std::vector<T> host(count_);
        check(kl_cuda_memcpy_dtoh(require_gpu(), host.data(), ptr_, bytes()), "DeviceBuffer::download");
        return host;
    }

    // Fills every byte; the default 0xFF is NaN in f32, bf16, f16 and fp8
    // E4M3, and -1 in integers, so an element a kernel failed to write shows.
    void poison(unsigned char byte = 0xFF) {
        check(kl_cuda_memset_d8(require_gpu(), ptr_, byte, bytes()), "DeviceBuffer::poison");
    }

  private:
    void *ptr_ = nullptr;
    size_t count_ = 0;
};

// ---- modules ----------------------------------------------------------------

// A module loaded on the process's backend, unloaded on destruction. Not
// movable: kernel handles keep a pointer to it.
class Module {
  public:
    Module(const void *image, size_t size) {
        check(kl_module_load(&require_gpu()->base, image, size, &mod_), "kl_module_load");
    }
    explicit Module(const std::string &path) {
        check(kl_module_load_file(&require_gpu()->base, path.c_str(), &mod_), "kl_module_load_file(" + path + ")");
    }
    ~Module() { kl_module_unload(&mod_); }
    Module(const Module &) = delete;
    Module &operator=(const Module &) = delete;

    const kl_module *get() const { return &mod_; }
    operator const kl_module *() const { return &mod_; }

  private:
    kl_module mod_{};
};

// ---- number formats ------------------------------------------------------------

inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// bf16 is the top half of an IEEE float.
inline float bf16_to_float(kl_bf16 v) { return bits_to_float(static_cast<uint32_t>(v.bits) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN; overflow gives inf.
inline kl_bf16 float_to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    kl_bf16 out;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        out.bits = static_cast<uint16_t>((u >> 16) | 0x0040u);
        return out;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    out.bits = static_cast<uint16_t>(u >> 16);
    return out;
}

// OCP FP8 E4M3 (__nv_fp8_e4m3): 1 sign, 4 exponent (bias 7), 3 mantissa
// bits; no infinities, S.1111.111 is NaN, the largest finite is 448.
inline float fp8_e4m3_to_float(kl_fp8_e4m3 v) {
    const int exponent = (v.bits >> 3) & 0xf, mantissa = v.bits & 7;
    float mag;
    if (exponent == 0xf && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
    if (exponent == 0)
        mag = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-9
    else
        mag = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
    return (v.bits & 0x80) ? -mag : mag;
}

// Round to nearest, ties to even; magnitudes from 448 up (and infinities)
// saturate to 448, as __nv_cvt_float_to_fp8(..., __NV_SATFINITE, __NV_E4M3).
inline kl_fp8_e4m3 float_to_fp8_e4m3(float f) {
    kl_fp8_e4m3 out;
    const uint8_t sign = (float_to_bits(f) >> 24) & 0x80;
    const float a = std::fabs(f);
    if (std::isnan(f)) {
        out.bits = static_cast<uint8_t>(sign | 0x7f);
    } else if (a >= 448.0f) {
        out.bits = static_cast<uint8_t>(sign | 0x7e);
    } else if (a < 0.015625f) {
        // Subnormal range (below 2^-6): the code is the count of 2^-9 steps;
        // a count of 8 is exactly the smallest normal, code 0x08.
        out.bits = static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.0f)));
    } else {
        int e2;
        const float m = std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
        int exponent = e2 - 1 + 7;
        int mantissa = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
        if (mantissa == 8) {
            mantissa = 0;
            exponent++;
        }
        out.bits = static_cast<uint8_t>(sign | (exponent << 3) | mantissa);
    }
    return out;
}

inline std::vector<kl_bf16> to_bf16(const std::vector<float> &v) {
    std::vector<kl_bf16> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = float_to_bf16(v[i]);
    return out;
}
inline std::vector<kl_fp8_e4m3> to_fp8_e4m3(const std::vector<float> &v) {
    std::vector<kl_fp8_e4m3> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = float_to_fp8_e4m3(v[i]);
    return out;
}

// Any element type as a double, for comparisons.
inline double to_double(float v) { return v; }
inline double to_double(double v) { return v; }
inline double to_double(int32_t v) { return v; }
inline double to_double(uint32_t v) { return v; }
inline double to_double(kl_bf16 v) { return bf16_to_float(v); }
inline double to_double(kl_fp8_e4m3 v) { return fp8_e4m3_to_float(v); }

template <class T>
std::vector<float> to_float(const std::vector<T> &v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = static_cast<float>(to_double(v[i]));
    return out;
}

// n values uniform in [lo, hi), the same for the same seed on one platform.
inline std::vector<float> random_uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> out(n);
    for (float &x : out) x = dist(gen);
    return out;
}

// ---- comparisons ---------------------------------------------------------------

// Every element within atol + rtol*|ref| and ||out - ref|| / ||ref|| <=
// max_rel_norm (||out - ref|| itself when ref is all zeros). NaN or inf in
// out never passes. The failure lists the first 10 mismatches.
template <class Out, class Ref>
::testing::AssertionResult all_close(const char *what, const Out *out, const Ref *ref, size_t n, double atol,
                                     double rtol, double max_rel_norm) {
    std::ostringstream first;
    size_t bad = 0;
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double o = to_double(out[i]), r = to_double(ref[i]);
        const double d = std::fabs(o - r);
        const double tol = atol + rtol * std::fabs(r);
        if (!std::isfinite(o) || !(d <= tol)) {
            if (bad < 10)
                first << "  " << what << "[" << i << "]: got " << o << ", want " << r << " (|diff| " << d
                      << " > " << tol << ")\n";
            bad++;
        }
        if (std::isfinite(o)) diff2 += d * d;
        ref2 += r * r;
    }
    const double rel = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    if (bad == 0 && rel <= max_rel_norm) return ::testing::AssertionSuccess();
    std::ostringstream msg;
    msg << what << ": " << bad << " of " << n << " elements outside atol " << atol << " + rtol " << rtol
        << " * |ref|; ||out - ref|| / ||ref|| = " << rel << " (limit " << max_rel_norm << ")\n"
        << first.str();
    if (bad > 10) msg << "  ... and " << (bad - 10) << " more\n";
    return ::testing::AssertionFailure() << msg.str();
}

template <class Out, class Ref>
::testing::AssertionResult all_close(const char *what, const std::vector<Out> &out, const std::vector<Ref> &ref,
                                     double atol, double rtol, double max_rel_norm) {
    if (out.size() != ref.size())
        return ::testing::AssertionFailure()
               << what << ": " << out.size() << " elements, the reference has " << ref.size();
    return all_close(what, out.data(), ref.data(), out.size(), atol, rtol, max_rel_norm);
}

namespace detail {
template <class T>
std::string hex_bytes(const T &v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof b);
    std::string s = "0x";
    char two[3];
    for (size_t i = sizeof b; i-- > 0;) {  // most significant first (little-endian host)
        std::snprintf(two, sizeof two, "%02x", b[i]);
        s += two;
    }
    return s;
}
}  // namespace detail

// For data movement: every element's bytes equal. Lists the first 10
// differing elements in hex.
template <class T>
::testing::AssertionResult bitwise_equal(const char *what, const T *out, const T *ref, size_t n) {
    std::ostringstream first;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::memcmp(&out[i], &ref[i], sizeof(T)) != 0) {
            if (bad < 10)
                first << "  " << what << "[" << i << "]: got " << detail::hex_bytes(out[i]) << ", want "
                      << detail::hex_bytes(ref[i]) << "\n";
            bad++;
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    std::ostringstream msg;
    msg << what << ": " << bad << " of " << n << " elements differ\n" << first.str();
    if (bad > 10) msg << "  ... and " << (bad - 10) << " more\n";
    return ::testing::AssertionFailure() << msg.str();
}

template <class T>
::testing::AssertionResult bitwise_equal(const char *what, const std::vector<T> &out, const std::vector<T> &ref) {
    if (out.size() != ref.size())
        return ::testing::AssertionFailure()
               << what << ": " << out.size() << " elements, the reference has " << ref.size();
    return bitwise_equal(what, out.data(), ref.data(), out.size());
}

}  // namespace kl_test

// GpuTest at global scope too, for TEST_F(GpuTest, ...).
using kl_test::GpuTest;

#endif  // KLAUNCH_TESTS_SUPPORT_GPU_TEST_UTIL_H
