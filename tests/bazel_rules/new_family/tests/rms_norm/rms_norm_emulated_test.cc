// rms_norm_bf16 (kernels/rms_norm) on the CPU emulator through its generated
// launcher, against a float64 reference: fresh random rows, odd sizes,
// outputs poisoned with guards, buffers off alignment; the spec's extents
// tight (the kernel touches the last element of x, w and y: every launcher
// with a computable extent needs such a test, //tests/emu:coverage_test);
// w NULL (nullable: true) as weights of 1; n past the spec's RMS_MAX_COLS
// refused before any launch (a precondition on a variant constant:
// KL_ERROR_VARIANT_MISMATCH).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "klaunch/rms_norm.h"
#include "tests/emu/emu_test_util.h"

namespace {

using emu::Access;

// y[r, i] = x[r, i] * w[i] / sqrt(mean(x[r, :]^2) + eps), in float64 (w
// empty: weights of 1).
std::vector<double> reference(const std::vector<uint16_t> &x, const std::vector<uint16_t> &w, uint32_t rows,
                              uint32_t n, double eps) {
    std::vector<double> y((size_t)rows * n);
    for (uint32_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (uint32_t i = 0; i < n; ++i) s += emu_test::bf16(x[(size_t)r * n + i]) * emu_test::bf16(x[(size_t)r * n + i]);
        const double inv = 1.0 / std::sqrt(s / n + eps);
        for (uint32_t i = 0; i < n; ++i)
            y[(size_t)r * n + i] = emu_test::bf16(x[(size_t)r * n + i]) * inv * (w.empty() ? 1.0 : emu_test::bf16(w[i]));
    }
    return y;
}

TEST(RmsNormEmulated, MatchesFloat64Reference) {
    const kl_module *mod = emu_test::module("rms_norm", "d1024");
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_rms_norm_bf16_get(&k, mod));
    // What the launches touch of the spec's extents (x, y: rows * n; w: n).
    emu_test::ExtentsReached ext("rms_norm_bf16");
    uint32_t seed = 7;
    struct Case { uint32_t rows, n; size_t lead; };
    for (const Case &c : {Case{1, 1, 0}, Case{3, 5, 1}, Case{2, 255, 0}, Case{1, 256, 3}, Case{5, 257, 0},
                          Case{2, 1000, 1}, Case{3, 1024, 0}}) {
        SCOPED_TRACE(::testing::Message() << c.rows << " rows of " << c.n << ", misaligned by " << c.lead);
        const size_t total = (size_t)c.rows * c.n;
        const std::vector<uint16_t> xh = emu_test::random_bf16(total, seed++, 2.0f), wh = emu_test::random_bf16(c.n, seed++, 1.0f);
        emu::Buffer<kl_bf16> x(total, Access::kRead, "x", 8, c.lead), w(c.n, Access::kRead, "w", 8, c.lead),
            y(total, Access::kWrite, "y", 8, c.lead);
        for (size_t i = 0; i < total; ++i) x[i].bits = xh[i];
        for (size_t i = 0; i < c.n; ++i) w[i].bits = wh[i];
        const float eps = 1e-5f;
        KL_EMU_ASSERT_OK(kl_rms_norm_bf16(&k, x.data(), w.data(), y.data(), c.n, eps, c.rows, nullptr));
        EXPECT_TRUE(ext.add());
        const std::vector<double> ref = reference(xh, wh, c.rows, c.n, eps);
        // bf16 output: one rounding (2^-8 relative) on top of fp32 sums.
        EXPECT_TRUE(emu_test::close("y", [&](size_t i) { return emu_test::bf16(y[i].bits); }, ref, 1e-3, 8e-3, 8e-3,
                                    [](size_t i) { return "[" + std::to_string(i) + "]"; }));
        EXPECT_TRUE(y.guards_intact());
    }
    // Every launch reads each row of x and w whole and writes each row of y:
    // the last element of each extent is touched.
    EXPECT_TRUE(ext.all());
}

TEST(RmsNormEmulated, NullWeightsAreOnes) {
    const kl_module *mod = emu_test::module("rms_norm", "d1024");
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_rms_norm_bf16_get(&k, mod));
    const uint32_t rows = 3, n = 300;
    const std::vector<uint16_t> xh = emu_test::random_bf16((size_t)rows * n, 21, 2.0f);
    emu::Buffer<kl_bf16> x((size_t)rows * n, Access::kRead, "x"), y((size_t)rows * n, Access::kWrite, "y");
    for (size_t i = 0; i < xh.size(); ++i) x[i].bits = xh[i];
    // w may be NULL (nullable: true): the launcher's NULL check skips it.
    KL_EMU_ASSERT_OK(kl_rms_norm_bf16(&k, x.data(), nullptr, y.data(), n, 1e-5f, rows, nullptr));
    const std::vector<double> ref = reference(xh, {}, rows, n, 1e-5);
    EXPECT_TRUE(emu_test::close("y", [&](size_t i) { return emu_test::bf16(y[i].bits); }, ref, 1e-3, 8e-3, 8e-3,
                                [](size_t i) { return "[" + std::to_string(i) + "]"; }));
    EXPECT_TRUE(y.guards_intact());
    // x and y are NULL-checked as ever.
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_rms_norm_bf16(&k, nullptr, nullptr, y.data(), n, 1e-5f, rows, nullptr));
}

TEST(RmsNormEmulated, RowsLongerThanTheVariantAllowsAreRefused) {
    const kl_module *mod = emu_test::module("rms_norm", "d1024");
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_rms_norm_bf16_get(&k, mod));
    emu::Buffer<kl_bf16> x(1025, Access::kRead, "x"), w(1025, Access::kRead, "w"), y(1025, Access::kWrite, "y");
    EXPECT_EQ(KL_ERROR_VARIANT_MISMATCH, kl_rms_norm_bf16(&k, x.data(), w.data(), y.data(), 1025, 1e-5f, 1, nullptr));
}

}  // namespace
