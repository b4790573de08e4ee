// The test helpers themselves: number formats (expected values from the
// formats' definitions: bf16 = the top half of an IEEE float; OCP E4M3 =
// bias 7, 3 mantissa bits, S.1111.111 NaN, max 448), the comparisons'
// verdicts and messages, and device buffers (skipped without a GPU).
#include "tests/support/gpu_test_util.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

using kl_test::bf16_to_float;
using kl_test::float_to_bf16;
using kl_test::float_to_fp8_e4m3;
using kl_test::fp8_e4m3_to_float;

kl_fp8_e4m3 fp8(uint8_t bits) {
    kl_fp8_e4m3 v;
    v.bits = bits;
    return v;
}
kl_bf16 bf16(uint16_t bits) {
    kl_bf16 v;
    v.bits = bits;
    return v;
}

TEST(Bf16, DecodesTheTopHalfOfAFloat) {
    EXPECT_EQ(bf16_to_float(bf16(0x3f80)), 1.0f);
    EXPECT_EQ(bf16_to_float(bf16(0xc000)), -2.0f);
    EXPECT_EQ(bf16_to_float(bf16(0x7f7f)), 3.3895313892515355e38f);  // largest finite
    EXPECT_TRUE(std::isinf(bf16_to_float(bf16(0x7f80))));
    EXPECT_TRUE(std::isnan(bf16_to_float(bf16(0x7fc0))));
}

TEST(Bf16, EncodesRoundingToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
    EXPECT_EQ(float_to_bf16(-2.0f).bits, 0xc000);
    // 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: to the even one.
    EXPECT_EQ(float_to_bf16(1.00390625f).bits, 0x3f80);
    // 1 + 3*2^-8 is halfway between 0x3f81 and 0x3f82: to the even one.
    EXPECT_EQ(float_to_bf16(1.01171875f).bits, 0x3f82);
    // Just above the half-way point rounds up.
    EXPECT_EQ(float_to_bf16(std::nextafter(1.00390625f, 2.0f)).bits, 0x3f81);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80) << "overflow gives inf";
    EXPECT_EQ(float_to_bf16(-0.0f).bits, 0x8000);
}

TEST(Bf16, KeepsNaNANaN) {
    // A NaN whose payload is only in the low half would round to inf without care.
    const float low_payload_nan = kl_test::bits_to_float(0x7f800001u);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(low_payload_nan))));
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Bf16, EveryFiniteValueRoundTrips) {
    for (uint32_t b = 0; b < 0x10000; b++) {
        const kl_bf16 v = bf16(static_cast<uint16_t>(b));
        const float f = bf16_to_float(v);
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16(f).bits, v.bits) << std::hex << b;
    }
}

TEST(Fp8E4m3, DecodesFromTheFormatsDefinition) {
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x00)), 0.0f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x01)), 0.001953125f);  // 2^-9, smallest subnormal
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x07)), 7 * 0.001953125f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x08)), 0.015625f);  // 2^-6, smallest normal
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x38)), 1.0f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x3c)), 1.5f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x40)), 2.0f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x77)), 240.0f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x78)), 256.0f);
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0x7e)), 448.0f);  // largest finite
    EXPECT_EQ(fp8_e4m3_to_float(fp8(0xb8)), -1.0f);
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(fp8(0x7f))));
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(fp8(0xff))));
    const float neg_zero = fp8_e4m3_to_float(fp8(0x80));
    EXPECT_EQ(neg_zero, 0.0f);
    EXPECT_TRUE(std::signbit(neg_zero));
}

TEST(Fp8E4m3, EncodesRoundingToNearestEven) {
    EXPECT_EQ(float_to_fp8_e4m3(1.0f).bits, 0x38);
    EXPECT_EQ(float_to_fp8_e4m3(-1.5f).bits, 0xbc);
    // 1.0625 is halfway between 1.0 (0x38) and 1.125 (0x39): to the even code.
    EXPECT_EQ(float_to_fp8_e4m3(1.0625f).bits, 0x38);
    // 1.1875 is halfway between 1.125 (0x39) and 1.25 (0x3a).
    EXPECT_EQ(float_to_fp8_e4m3(1.1875f).bits, 0x3a);
    // Subnormals: 2^-10 is half the smallest subnormal (to 0); 3*2^-10 is
    // halfway between codes 1 and 2 (to 2).
    EXPECT_EQ(float_to_fp8_e4m3(0.0009765625f).bits, 0x00);
    EXPECT_EQ(float_to_fp8_e4m3(0.0029296875f).bits, 0x02);
    // 7.5 * 2^-9 is halfway between the largest subnormal and the smallest normal.
    EXPECT_EQ(float_to_fp8_e4m3(7.5f * 0.001953125f).bits, 0x08);
    EXPECT_EQ(float_to_fp8_e4m3(-0.0f).bits, 0x80);
}

TEST(Fp8E4m3, SaturatesTo448) {
    EXPECT_EQ(float_to_fp8_e4m3(448.0f).bits, 0x7e);
    EXPECT_EQ(float_to_fp8_e4m3(460.0f).bits, 0x7e);
    EXPECT_EQ(float_to_fp8_e4m3(1e9f).bits, 0x7e);
    EXPECT_EQ(float_to_fp8_e4m3(-1e9f).bits, 0xfe);
    EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::infinity()).bits, 0x7e);
    EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()).bits & 0x7f, 0x7f);
}

TEST(Fp8E4m3, EveryFiniteCodeRoundTrips) {
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f) continue;  // NaN
        ASSERT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(fp8(static_cast<uint8_t>(b)))).bits, b) << std::hex << b;
    }
}

// The code nearest to x by brute force over all finite codes; of two
// equally near, the one with an even mantissa. Saturates like the encoder.
int nearest_fp8_code(float x) {
    const double a = std::fabs(x) >= 448.0f ? std::copysign(448.0, x) : x;
    int best = -1;
    double best_d = 1e30;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f) continue;
        const double d = std::fabs(static_cast<double>(fp8_e4m3_to_float(fp8(static_cast<uint8_t>(b)))) - a);
        if (d < best_d || (d == best_d && (b & 1) == 0)) {
            best_d = d;
            best = b;
        }
    }
    return best;
}

TEST(Fp8E4m3, EncodesToTheNearestCode) {
    std::vector<float> xs;
    for (int i = -40000; i <= 40000; i++) xs.push_back(static_cast<float>(i) * 0.0125f);   // -500 .. 500
    for (int i = -2000; i <= 2000; i++) xs.push_back(static_cast<float>(i) * 0.00001f);    // subnormals
    for (float x : xs) {
        const int got = float_to_fp8_e4m3(x).bits, want = nearest_fp8_code(x);
        // Near zero +0 and -0 are equally near: compare values, not codes.
        ASSERT_EQ(fp8_e4m3_to_float(fp8(static_cast<uint8_t>(got))),
                  fp8_e4m3_to_float(fp8(static_cast<uint8_t>(want))))
            << "x = " << x << ": got code " << got << ", want " << want;
    }
}

TEST(AllClose, PassesWithinTolerance) {
    const std::vector<float> out = {1.0f, 2.001f, -3.0f};
    const std::vector<double> ref = {1.0, 2.0, -3.0};
    EXPECT_TRUE(kl_test::all_close("out", out, ref, 1e-2, 0.0, 1e-2));
}

TEST(AllClose, ListsTheFirstTenMismatchesAndCountsTheRest) {
    std::vector<float> out(100, 1.0f), ref(100, 1.0f);
    for (int i = 10; i < 25; i++) out[i] = 2.0f;
    const ::testing::AssertionResult r = kl_test::all_close("o", out, ref, 1e-3, 1e-3, 1.0);
    ASSERT_FALSE(r);
    const std::string msg = r.message();
    EXPECT_NE(msg.find("15 of 100"), std::string::npos) << msg;
    EXPECT_NE(msg.find("o[10]: got 2, want 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("o[19]"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("o[20]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("and 5 more"), std::string::npos) << msg;
}

TEST(AllClose, NaNNeverPasses) {
    const std::vector<float> out = {std::numeric_limits<float>::quiet_NaN()};
    const std::vector<float> ref = {0.0f};
    EXPECT_FALSE(kl_test::all_close("out", out, ref, 1e30, 1e30, 1e30));
}

TEST(AllClose, FailsOnTheRelativeNormEvenWhenEveryElementIsWithinTolerance) {
    const std::vector<float> out = {1.1f, 1.1f};
    const std::vector<float> ref = {1.0f, 1.0f};
    const ::testing::AssertionResult r = kl_test::all_close("out", out, ref, 0.2, 0.0, 0.05);
    ASSERT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find("||out - ref|| / ||ref||"), std::string::npos) << r.message();
}

TEST(AllClose, ComparesBf16AndFp8Outputs) {
    const std::vector<kl_bf16> out = kl_test::to_bf16({0.5f, 1.25f});
    const std::vector<kl_fp8_e4m3> out8 = kl_test::to_fp8_e4m3({0.5f, 1.25f});
    const std::vector<double> ref = {0.5, 1.25};
    EXPECT_TRUE(kl_test::all_close("bf16", out, ref, 0.0, 0.0, 0.0));
    EXPECT_TRUE(kl_test::all_close("fp8", out8, ref, 0.0, 0.0, 0.0));
}

TEST(AllClose, RefusesDifferentLengths) {
    EXPECT_FALSE(kl_test::all_close("out", std::vector<float>(3), std::vector<float>(4), 1.0, 1.0, 1.0));
}

TEST(BitwiseEqual, DistinguishesNegativeZeroAndPrintsHex) {
    const std::vector<kl_bf16> out = {bf16(0x0000), bf16(0x8000)};
    const std::vector<kl_bf16> ref = {bf16(0x0000), bf16(0x0000)};
    const ::testing::AssertionResult r = kl_test::bitwise_equal("q", out, ref);
    ASSERT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find("q[1]: got 0x8000, want 0x0000"), std::string::npos) << r.message();
    EXPECT_TRUE(kl_test::bitwise_equal("q", ref, ref));
}

TEST(RandomUniform, IsReproducibleAndInRange) {
    const std::vector<float> a = kl_test::random_uniform(1000, 7, -2.0f, 3.0f);
    EXPECT_EQ(a, kl_test::random_uniform(1000, 7, -2.0f, 3.0f));
    EXPECT_NE(a, kl_test::random_uniform(1000, 8, -2.0f, 3.0f));
    for (float x : a) {
        ASSERT_GE(x, -2.0f);
        ASSERT_LT(x, 3.0f);
    }
}

TEST(Gpu, IsNullExactlyWhenThereIsAReason) {
    if (kl_test::gpu() == nullptr)
        EXPECT_FALSE(kl_test::why_no_gpu().empty());
    else
        EXPECT_TRUE(kl_test::why_no_gpu().empty());
    EXPECT_EQ(kl_test::gpu(), kl_test::gpu()) << "one backend per process";
}

TEST(Gpu, RequireGpuSkipsWithTheReason) {
    KL_TEST_REQUIRE_GPU();
    SUCCEED();
}

TEST_F(GpuTest, DeviceBufferUploadsPoisonsAndDownloads) {
    const std::vector<float> host = kl_test::random_uniform(1001, 1);
    kl_test::DeviceBuffer<float> buf(host);
    EXPECT_EQ(buf.size(), 1001u);
    EXPECT_EQ(buf.bytes(), 1001u * sizeof(float));
    EXPECT_EQ(buf.download(), host);
    buf.poison();
    for (float x : buf.download()) ASSERT_TRUE(std::isnan(x));
    kl_test::DeviceBuffer<kl_bf16> b16(3);
    b16.poison();
    for (kl_bf16 x : b16.download()) ASSERT_TRUE(std::isnan(bf16_to_float(x)));
    kl_test::DeviceBuffer<kl_fp8_e4m3> b8(3);
    b8.poison();
    for (kl_fp8_e4m3 x : b8.download()) ASSERT_TRUE(std::isnan(fp8_e4m3_to_float(x)));
}

TEST_F(GpuTest, DeviceBufferMovesOwnership) {
    kl_test::DeviceBuffer<int32_t> a(std::vector<int32_t>{1, 2, 3});
    int32_t *p = a.get();
    kl_test::DeviceBuffer<int32_t> b(std::move(a));
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_EQ(b.get(), p);
    EXPECT_EQ(b.download(), (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(GpuTest, DeviceBufferUploadOfTheWrongSizeThrows) {
    kl_test::DeviceBuffer<float> buf(4);
    EXPECT_THROW(buf.upload(std::vector<float>(5)), std::runtime_error);
}

TEST_F(GpuTest, ModuleOfAMissingFileThrowsWithTheMessage) {
    try {
        kl_test::Module mod(std::string("/nonexistent/x.fatbin"));
        FAIL() << "no exception";
    } catch (const std::runtime_error &e) {
        EXPECT_NE(std::string(e.what()).find("KL_ERROR_FILE_IO"), std::string::npos) << e.what();
    }
}

}  // namespace
