// saxpy_bf16 on the GPU, both variants, against a CPU reference that makes
// the same single fp32 rounding (fmaf) and the same bf16 rounding (to
// nearest, ties to even), so every element must match bit for bit. Elements
// between n and the row stride must keep their sentinel. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "klaunch/cuda_backend.h"
#include "klaunch/saxpy_bf16.h"
#include "saxpy_bf16_fatbins.h"

namespace {

// The process's CUDA backend, or nullptr (and why) without a driver or GPU.
kl_cuda_backend *Gpu(std::string *why) {
    static kl_cuda_backend cuda;
    static const kl_status status = kl_cuda_backend_init(&cuda, 0);
    static const std::string message = status == KL_SUCCESS ? "" : kl_last_error_message();
    *why = message;
    return status == KL_SUCCESS ? &cuda : nullptr;
}

float Bf16ToFloat(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// To nearest, ties to even (finite values only: the test makes no NaN).
uint16_t FloatToBf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

const uint16_t kSentinel = 0x7fa5;  // a NaN the kernel never writes

struct Variant {
    const char *name;
    const unsigned char *image;
    size_t size;
};

class SaxpyGpu : public ::testing::TestWithParam<Variant> {
  protected:
    void SetUp() override {
        std::string why;
        cuda_ = Gpu(&why);
        if (cuda_ == nullptr) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
        ASSERT_EQ(KL_SUCCESS, kl_module_load(&cuda_->base, GetParam().image, GetParam().size, &mod_))
            << kl_last_error_message();
        ASSERT_STREQ(GetParam().name, mod_.variant);
        ASSERT_EQ(KL_SUCCESS, kl_saxpy_bf16_get(&k_, &mod_)) << kl_last_error_message();
    }
    void TearDown() override { kl_module_unload(&mod_); }

    // Runs rows x n (row stride `stride`) on the GPU and compares with the CPU.
    void Check(float a, uint32_t n, uint32_t stride, uint32_t rows, uint32_t seed) {
        SCOPED_TRACE("n " + std::to_string(n) + ", stride " + std::to_string(stride) + ", rows " +
                     std::to_string(rows));
        const size_t count = static_cast<size_t>(stride) * rows;
        std::vector<uint16_t> x(count, kSentinel), y(count, kSentinel), want(count, kSentinel);
        std::mt19937 gen(seed);
        std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
        for (uint32_t r = 0; r < rows; r++) {
            for (uint32_t i = 0; i < n; i++) {
                const size_t e = static_cast<size_t>(r) * stride + i;
                x[e] = FloatToBf16(dist(gen));
                y[e] = FloatToBf16(dist(gen));
                want[e] = FloatToBf16(std::fma(a, Bf16ToFloat(x[e]), Bf16ToFloat(y[e])));
            }
        }
        void *dx = nullptr, *dy = nullptr;
        const size_t bytes = count * sizeof(uint16_t);
        ASSERT_EQ(KL_SUCCESS, kl_cuda_malloc(cuda_, &dx, bytes)) << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_cuda_malloc(cuda_, &dy, bytes)) << kl_last_error_message();
        std::vector<uint16_t> got(count);
        kl_status st = kl_cuda_memcpy_htod(cuda_, dx, x.data(), bytes);
        if (st == KL_SUCCESS) st = kl_cuda_memcpy_htod(cuda_, dy, y.data(), bytes);
        if (st == KL_SUCCESS)
            st = kl_saxpy_bf16(&k_, static_cast<const kl_bf16 *>(dx), static_cast<kl_bf16 *>(dy), a, n, stride, rows,
                               nullptr);
        if (st == KL_SUCCESS) st = kl_cuda_synchronize(cuda_);
        if (st == KL_SUCCESS) st = kl_cuda_memcpy_dtoh(cuda_, got.data(), dy, bytes);
        const std::string msg = kl_last_error_message();
        kl_cuda_free(cuda_, dx);
        kl_cuda_free(cuda_, dy);
        ASSERT_EQ(KL_SUCCESS, st) << msg;

        size_t bad = 0;
        for (size_t e = 0; e < count; e++) {
            if (got[e] != want[e]) {
                if (bad < 10)
                    ADD_FAILURE() << "y[row " << e / stride << ", " << e % stride << "]: got 0x" << std::hex << got[e]
                                  << ", want 0x" << want[e] << std::dec
                                  << (e % stride >= n ? " (past n: must be untouched)" : "");
                bad++;
            }
        }
        EXPECT_EQ(0u, bad) << bad << " of " << count << " elements differ";
    }

    kl_cuda_backend *cuda_ = nullptr;
    kl_module mod_{};
    kl_kernel k_{};
};

TEST_P(SaxpyGpu, MatchesTheCpuBitForBit) {
    // Odd sizes, one element, a block's worth and one more, several rows.
    Check(0.75f, 1, 1, 1, 1);
    Check(-1.5f, 7, 9, 3, 2);
    Check(2.0f, 733, 733, 2, 3);
    Check(0.3f, 1024, 1031, 4, 4);
    Check(0.3f, 1025, 1031, 4, 5);
    Check(-0.125f, 5000, 5003, 5, 6);
    Check(1.0f, 70000, 70001, 3, 7);
}

TEST_P(SaxpyGpu, NoRowsLeaveYUntouched) { Check(1.0f, 0, 16, 2, 8); }

INSTANTIATE_TEST_SUITE_P(Variants, SaxpyGpu,
                         ::testing::Values(Variant{"items4", kl_fatbin_saxpy_bf16_items4,
                                                   kl_fatbin_saxpy_bf16_items4_size},
                                           Variant{"items8", kl_fatbin_saxpy_bf16_items8,
                                                   kl_fatbin_saxpy_bf16_items8_size}),
                         [](const ::testing::TestParamInfo<Variant> &info) { return std::string(info.param.name); });

}  // namespace
