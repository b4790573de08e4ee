// The emulator's own tests: each emulated instruction against hand-worked
// examples from its definition in the PTX ISA (shfl.sync, vote.sync,
// ldmatrix, mma.m16n8k16 fragments, cp.async groups, cvt of edge values),
// and each check against a kernel that breaks its rule (tests/emu/
// testdata/selftest_kernels.cu), reported with the thread and the address.
// Expected values are written out here from the ISA's tables and rules,
// never computed by the emulator's code, so a wrong emulation cannot agree
// with itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"
#include "tests/emu/emu_test_util.h"

namespace {

const void *image() { return kl_emu_image("emu_selftest_kernels", ""); }

uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#define EXPECT_CLEAN(f) EXPECT_TRUE((f).ok()) << (f).message

// ---- shfl.sync ---------------------------------------------------------------
// Lane l holds 3l + 1. Expected sources from the PTX ISA's shfl.sync
// pseudo-code with CUDA's c = ((32 - width) << 8) | clamp.

std::vector<uint32_t> shfl(uint32_t mode, int arg, int width) {
    emu::Buffer<uint32_t> out(32, emu::Access::kWrite, "out");
    const emu::Fault f = emu::run(image(), "emu_test_shfl", {1, 1, 1}, {32, 1, 1}, 0, out.data(), mode, arg, width);
    EXPECT_CLEAN(f);
    EXPECT_TRUE(out.guards_intact());
    return std::vector<uint32_t>(out.data(), out.data() + 32);
}
uint32_t v(uint32_t lane) { return 3 * lane + 1; }

TEST(EmuShfl, IdxBroadcastsTheSourceLane) {
    const auto r = shfl(0, 5, 32);
    for (uint32_t l = 0; l < 32; ++l) EXPECT_EQ(r[l], v(5)) << "lane " << l;
}
TEST(EmuShfl, IdxWithWidth8ReadsWithinTheSegment) {
    const auto r = shfl(0, 3, 8);
    EXPECT_EQ(r[0], v(3));
    EXPECT_EQ(r[10], v(11));
    EXPECT_EQ(r[31], v(27));
}
TEST(EmuShfl, UpKeepsTheOwnValueBelowDelta) {
    const auto r = shfl(1, 2, 32);
    EXPECT_EQ(r[0], v(0));
    EXPECT_EQ(r[1], v(1));
    EXPECT_EQ(r[5], v(3));
}
TEST(EmuShfl, UpDoesNotCrossIntoTheSegmentBelow) {
    const auto r = shfl(1, 1, 8);
    EXPECT_EQ(r[8], v(8));
    EXPECT_EQ(r[9], v(8));
}
TEST(EmuShfl, DownKeepsTheOwnValuePastTheSegmentEnd) {
    const auto r = shfl(2, 3, 16);
    EXPECT_EQ(r[12], v(15));
    EXPECT_EQ(r[13], v(13));
    EXPECT_EQ(r[20], v(23));
}
TEST(EmuShfl, XorSwapsPartners) {
    const auto r = shfl(3, 1, 32);
    EXPECT_EQ(r[6], v(7));
    EXPECT_EQ(r[7], v(6));
}
TEST(EmuShfl, XorWithWidthReadsEarlierSegmentsButNotLaterOnes) {
    // CUDA: lanes may read earlier width-groups, a later one gives the own value.
    const auto r = shfl(3, 8, 8);
    EXPECT_EQ(r[2], v(2));   // partner 10 is in a later group
    EXPECT_EQ(r[10], v(2));  // partner 2 is in an earlier group
}
TEST(EmuShfl, EightByteValuesMoveWhole) {
    emu::Buffer<double> out(32, emu::Access::kWrite, "out");
    EXPECT_CLEAN(emu::run(image(), "emu_test_shfl_double", {1, 1, 1}, {32, 1, 1}, 0, out.data()));
    EXPECT_EQ(out[4], 5.5);
    EXPECT_EQ(out[5], 4.5);
}

// ---- vote.sync -------------------------------------------------------------------

TEST(EmuVote, BallotAnyAll) {
    emu::Buffer<uint32_t> out(96, emu::Access::kWrite, "out"), pred(32, emu::Access::kRead, "pred");
    for (uint32_t l = 0; l < 32; ++l) pred[l] = l % 3 == 0;
    EXPECT_CLEAN(emu::run(image(), "emu_test_vote", {1, 1, 1}, {32, 1, 1}, 0, out.data(),
                          static_cast<const uint32_t *>(pred.data())));
    for (uint32_t l = 0; l < 32; ++l) {
        EXPECT_EQ(out[3 * l], 0x49249249u) << "lane " << l;  // bits 0, 3, ..., 30
        EXPECT_EQ(out[3 * l + 1], 1u);
        EXPECT_EQ(out[3 * l + 2], 0u);
    }
    for (uint32_t l = 0; l < 32; ++l) pred[l] = 1;
    EXPECT_CLEAN(emu::run(image(), "emu_test_vote", {1, 1, 1}, {32, 1, 1}, 0, out.data(),
                          static_cast<const uint32_t *>(pred.data())));
    EXPECT_EQ(out[0], 0xffffffffu);
    EXPECT_EQ(out[2], 1u);
}

// ---- ldmatrix ----------------------------------------------------------------------
// M[r][c] = (r << 8) | c. PTX ISA: lane L receives, of matrix j, row L / 4,
// elements 2 (L % 4) and 2 (L % 4) + 1, the first in the low half; .trans
// gives the same of the transposed matrix.

std::vector<uint32_t> ldmatrix(bool trans) {
    emu::Buffer<uint32_t> out(128, emu::Access::kWrite, "out");
    emu::Buffer<uint16_t> src(256, emu::Access::kRead, "src");
    for (uint32_t r = 0; r < 16; ++r)
        for (uint32_t c = 0; c < 16; ++c) src[r * 16 + c] = (uint16_t)((r << 8) | c);
    EXPECT_CLEAN(emu::run(image(), "emu_test_ldmatrix", {1, 1, 1}, {32, 1, 1}, 0, out.data(),
                          static_cast<const uint16_t *>(src.data()), (uint32_t)trans));
    return std::vector<uint32_t>(out.data(), out.data() + 128);
}

TEST(EmuLdmatrix, X4FragmentsOfLanes0And5) {
    const auto r = ldmatrix(false);
    EXPECT_EQ(r[0], 0x00010000u);  // lane 0, matrix 0: M[0][0], M[0][1]
    EXPECT_EQ(r[1], 0x08010800u);  // matrix 1: M[8][0], M[8][1]
    EXPECT_EQ(r[2], 0x00090008u);  // matrix 2: M[0][8], M[0][9]
    EXPECT_EQ(r[3], 0x08090808u);  // matrix 3: M[8][8], M[8][9]
    EXPECT_EQ(r[4 * 5], 0x01030102u);  // lane 5: M[1][2], M[1][3]
    EXPECT_EQ(r[4 * 31 + 3], 0x0F0F0F0Eu);  // lane 31, matrix 3: M[15][14], M[15][15]
}
TEST(EmuLdmatrix, X4TransFragmentsOfLanes0And5) {
    const auto r = ldmatrix(true);
    EXPECT_EQ(r[0], 0x01000000u);      // lane 0: M[0][0], M[1][0]
    EXPECT_EQ(r[4 * 5], 0x03010201u);  // lane 5: M[2][1], M[3][1]
    EXPECT_EQ(r[4 * 5 + 3], 0x0B090A09u);  // lane 5, matrix 3 (rows 8.., cols 8..): M[10][9], M[11][9]
}

// ---- movmatrix -----------------------------------------------------------------------
// PTX ISA: lane L holds row L / 4, elements 2 (L % 4) and 2 (L % 4) + 1 of
// an 8x8 b16 matrix and receives the same of its transpose.

TEST(EmuMovmatrix, TransGivesEachLaneItsRowOfTheTranspose) {
    emu::Buffer<uint32_t> out(32, emu::Access::kWrite, "out");
    EXPECT_CLEAN(emu::run(image(), "emu_test_movmatrix", {1, 1, 1}, {32, 1, 1}, 0, out.data()));
    EXPECT_EQ(out[0], 0x01000000u);  // lane 0: M[0][0], M[1][0]
    EXPECT_EQ(out[5], 0x03010201u);  // lane 5 (row 1 of M^T, cols 2, 3): M[2][1], M[3][1]
    EXPECT_EQ(out[31], 0x07070607u); // lane 31: M[6][7], M[7][7]
    for (uint32_t l = 0; l < 32; ++l) {
        const uint32_t r = 2 * (l % 4), c = l / 4;
        EXPECT_EQ(out[l], ((r << 8) | c) | ((((r + 1) << 8) | c) << 16)) << "lane " << l;
    }
}

// ---- mma.sync.m16n8k16 ----------------------------------------------------------------
// A[r][k] = 16 r + k, B[k][n] = 1 if k == n, 2 if k == n + 8, C = 0.5, so
// D[r][n] = 48 r + 3 n + 16.5. Registers placed by the ISA's fragment
// tables ("Matrix Fragments for mma.m16n8k16 with floating point type").

uint16_t to_b16(double x, bool f16) {
    // Small integers and halves: exact in both formats.
    if (x == 0) return 0;
    const int e = (int)std::floor(std::log2(std::fabs(x)));
    const double m = std::fabs(x) / std::ldexp(1.0, e) - 1.0;
    if (f16) return (uint16_t)(((e + 15) << 10) | (int)std::lround(m * 1024));
    return (uint16_t)(((e + 127) << 7) | (int)std::lround(m * 128));
}

std::vector<float> mma(bool f16) {
    auto A = [](uint32_t r, uint32_t k) { return 16.0 * r + k; };
    auto B = [](uint32_t k, uint32_t n) { return k == n ? 1.0 : k == n + 8 ? 2.0 : 0.0; };
    auto pack = [f16](double lo, double hi) { return (uint32_t)to_b16(lo, f16) | ((uint32_t)to_b16(hi, f16) << 16); };
    emu::Buffer<uint32_t> regs(320, emu::Access::kRead, "regs");
    for (uint32_t l = 0; l < 32; ++l) {
        const uint32_t g = l / 4, t = l % 4;
        uint32_t *r = &regs[10 * l];
        r[0] = pack(A(g, 2 * t), A(g, 2 * t + 1));
        r[1] = pack(A(g + 8, 2 * t), A(g + 8, 2 * t + 1));
        r[2] = pack(A(g, 2 * t + 8), A(g, 2 * t + 9));
        r[3] = pack(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9));
        r[4] = pack(B(2 * t, g), B(2 * t + 1, g));
        r[5] = pack(B(2 * t + 8, g), B(2 * t + 9, g));
        for (int i = 0; i < 4; ++i) r[6 + i] = fbits(0.5f);
    }
    emu::Buffer<float> d(128, emu::Access::kWrite, "d");
    EXPECT_CLEAN(emu::run(image(), "emu_test_mma", {1, 1, 1}, {32, 1, 1}, 0, d.data(),
                          static_cast<const uint32_t *>(regs.data()), (uint32_t)f16));
    return std::vector<float>(d.data(), d.data() + 128);
}

TEST(EmuMma, Bf16AccumulatorFragmentsOfLanes5And31) {
    const auto d = mma(false);
    EXPECT_EQ(d[4 * 5 + 0], 70.5f);  // lane 5 (g 1, t 1): D[1][2]
    EXPECT_EQ(d[4 * 5 + 1], 73.5f);  // D[1][3]
    EXPECT_EQ(d[4 * 5 + 2], 454.5f); // D[9][2]
    EXPECT_EQ(d[4 * 5 + 3], 457.5f); // D[9][3]
    EXPECT_EQ(d[4 * 31 + 0], 370.5f);  // lane 31 (g 7, t 3): D[7][6]
    EXPECT_EQ(d[4 * 31 + 3], 757.5f);  // D[15][7]
    for (uint32_t l = 0; l < 32; ++l)
        for (uint32_t i = 0; i < 4; ++i) {
            const uint32_t row = l / 4 + (i < 2 ? 0 : 8), col = 2 * (l % 4) + (i & 1);
            EXPECT_EQ(d[4 * l + i], 48.0f * row + 3.0f * col + 16.5f) << "lane " << l << " d" << i;
        }
}
TEST(EmuMma, F16InputsGiveTheSameFragments) {
    const auto d = mma(true);
    EXPECT_EQ(d[4 * 5 + 0], 70.5f);
    EXPECT_EQ(d[4 * 31 + 3], 757.5f);
}

// ---- cp.async groups ----------------------------------------------------------------------

TEST(EmuCpAsync, DataLandsAtWaitGroupNotBefore) {
    emu::Buffer<uint32_t> before(32, emu::Access::kWrite, "before"), after(32, emu::Access::kWrite, "after");
    emu::Buffer<uint32_t> src(128, emu::Access::kRead, "src");
    for (uint32_t i = 0; i < 128; ++i) src[i] = 1000 + i;
    const emu::Fault cf = emu::run(image(), "emu_test_cp_async", {1, 1, 1}, {32, 1, 1}, 512, before.data(), after.data(),
                          static_cast<const void *>(src.data()));
    EXPECT_CLEAN(cf);
    for (uint32_t t = 0; t < 32; ++t) {
        EXPECT_EQ(before[t], 0xdeadbeefu) << "thread " << t;
        EXPECT_EQ(after[t], 1000 + 4 * t) << "thread " << t;
    }
}

// ---- conversions ------------------------------------------------------------------------------

std::vector<uint32_t> convert(uint32_t mode, const std::vector<uint32_t> &in, uint32_t n) {
    emu::Buffer<uint32_t> out(n, emu::Access::kWrite, "out"), src(in.size(), emu::Access::kRead, "in");
    for (size_t i = 0; i < in.size(); ++i) src[i] = in[i];
    EXPECT_CLEAN(emu::run(image(), "emu_test_convert", {1, 1, 1}, {32, 1, 1}, 0, out.data(),
                          static_cast<const uint32_t *>(src.data()), mode, n));
    return std::vector<uint32_t>(out.data(), out.data() + n);
}

TEST(EmuCvt, E4m3x2ToF16x2EdgeValues) {
    // cvt.rn.f16x2.e4m3x2: low byte to the low half. E4M3: bias 7, 448 =
    // 1.75 * 2^8 is MAX_NORM, S.1111.111 is NaN, 0x01 = 2^-9 subnormal.
    const std::vector<uint32_t> in = {0x0000, 0x0080, 0x007E, 0x007F, 0x00FF, 0x0001, 0x0008, 0x0038, 0x00B8, 0x7E38};
    // Mode 0: the PTX wrapper; 4: cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2;
    // 5: the wrapper of the high half, the same pairs in bits 16-31 over other low bits.
    for (uint32_t mode : {0u, 4u, 5u}) {
        const auto r = convert(mode, in, (uint32_t)in.size());
        EXPECT_EQ(r[0], 0x00000000u) << "+0";
        EXPECT_EQ(r[1], 0x00008000u) << "-0";
        EXPECT_EQ(r[2], 0x00005F00u) << "448";
        EXPECT_EQ(r[3], 0x00007FFFu) << "NaN";
        EXPECT_EQ(r[4], 0x00007FFFu) << "-NaN";
        EXPECT_EQ(r[5], 0x00001800u) << "2^-9";
        EXPECT_EQ(r[6], 0x00002400u) << "2^-6";
        EXPECT_EQ(r[7], 0x00003C00u) << "1";
        EXPECT_EQ(r[8], 0x0000BC00u) << "-1";
        EXPECT_EQ(r[9], 0x5F003C00u) << "the high byte to the high half";
    }
}

TEST(EmuCvt, F32PairToE4m3x2SatfiniteAndRoundToNearestEven) {
    // cvt.rn.satfinite.e4m3x2.f32 d, a, b: a to d[15:8], b to d[7:0];
    // |x| > 448 gives +-448 (0x7E / 0xFE), NaN gives NaN.
    const std::vector<uint32_t> in = {
        fbits(448.0f), fbits(1.0f),        fbits(500.0f),  fbits(-1e9f),     fbits(INFINITY), fbits(-INFINITY),
        fbits(NAN),    fbits(-0.0f),       fbits(464.0f),  fbits(0x1p-10f),  fbits(1.0625f),  fbits(0x1.8p-9f),
        fbits(17.0f),  fbits(-17.0f),      fbits(0x1p-6f), fbits(0x1.cp-7f),
    };
    const auto r = convert(1, in, 8);
    EXPECT_EQ(r[0], 0x7E38u);  // 448, 1
    EXPECT_EQ(r[1], 0x7EFEu);  // saturated
    EXPECT_EQ(r[2], 0x7EFEu);  // +-inf saturate too
    EXPECT_EQ(r[3], 0x7F80u);  // NaN, -0
    EXPECT_EQ(r[4], 0x7E00u);  // 464 > 448; 2^-10 halfway to 2^-9 rounds to even 0
    EXPECT_EQ(r[5], 0x3802u);  // 1 + 1/16 halfway rounds to even 1.0; 1.5 * 2^-9 rounds to even 2^-8
    EXPECT_EQ(r[6], 0x58D8u);  // 17 halfway between 16 and 18 rounds to 16
    EXPECT_EQ(r[7], 0x0807u);  // 2^-6 min normal; 1.75 * 2^-7 = 7 * 2^-9 largest subnormal
}

TEST(EmuCvt, F32ToBf16RoundsToNearestEven) {
    const std::vector<uint32_t> in = {0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF,
                                      0x7FC00001, 0x80000000, 0x00010000};
    const auto r = convert(2, in, (uint32_t)in.size());
    EXPECT_EQ(r[0], 0x3F80u);
    EXPECT_EQ(r[1], 0x3F80u);  // halfway, even stays
    EXPECT_EQ(r[2], 0x3F82u);  // halfway, odd goes up
    EXPECT_EQ(r[3], 0x3F81u);  // past halfway
    EXPECT_EQ(r[4], 0x7F80u);  // max float rounds to inf
    EXPECT_EQ(r[5], 0x7FFFu);  // NaN: canonical
    EXPECT_EQ(r[6], 0x8000u);  // -0
    EXPECT_EQ(r[7], 0x0001u);  // a subnormal stays (no flush)
}

TEST(EmuEx2, ApproxFtzEdgeValues) {
    const std::vector<uint32_t> in = {fbits(0.0f), fbits(-INFINITY), fbits(INFINITY), fbits(10.0f),
                                      fbits(-127.0f), fbits(-126.0f), 0x00000001u, fbits(NAN)};
    const auto r = convert(3, in, (uint32_t)in.size());
    EXPECT_EQ(r[0], 0x3F800000u);
    EXPECT_EQ(r[1], 0x00000000u);  // 2^-inf = +0, what masked softmax scores rely on
    EXPECT_EQ(r[2], 0x7F800000u);
    EXPECT_EQ(r[3], fbits(1024.0f));
    EXPECT_EQ(r[4], 0x00000000u);  // 2^-127 is subnormal: flushed
    EXPECT_EQ(r[5], 0x00800000u);  // 2^-126, the smallest normal
    EXPECT_EQ(r[6], 0x3F800000u);  // a subnormal input is 0
    EXPECT_TRUE(std::isnan(bitsf(r[7])));
}

// ---- packed half arithmetic: rounded once ----------------------------------------------------

std::vector<uint32_t> half_math(uint32_t mode, const std::vector<uint32_t> &in) {
    const uint32_t n = (uint32_t)in.size() / 3;
    emu::Buffer<uint32_t> out(n, emu::Access::kWrite, "out"), src(in.size(), emu::Access::kRead, "in");
    for (size_t i = 0; i < in.size(); ++i) src[i] = in[i];
    EXPECT_CLEAN(emu::run(image(), "emu_test_half_math", {1, 1, 1}, {32, 1, 1}, 0, out.data(),
                          static_cast<const uint32_t *>(src.data()), mode, n));
    return std::vector<uint32_t>(out.data(), out.data() + n);
}

TEST(EmuHalf, F16FmaRoundsOnceNotThroughFloat) {
    // a = 1 + 2^-5 (0x3C20), b = 993 * 2^-21 (0x0FC2), c = 1 (0x3C00):
    // a * b + c = 1 + 2^-11 + 2^-26 exactly, just above the halfway point
    // 1 + 2^-11 between 0x3C00 and 0x3C01: rounded once it is 0x3C01. A
    // float fma first would round away the 2^-26 and tie to even 0x3C00.
    const auto r = half_math(0, {0x3C20, 0x0FC2, 0x3C00, 0x3C00, 0x3C00, 0x8000, 0x7BFF, 0x3C00, 0x7BFF});
    EXPECT_EQ(r[0], 0x3C01u);
    EXPECT_EQ(r[1], 0x3C00u);  // 1 * 1 + -0 = 1
    EXPECT_EQ(r[2], 0x7C00u);  // 65504 * 1 + 65504 overflows to +inf
}
TEST(EmuHalf, Bf16x2FmaAndMulRoundToNearestEven) {
    // Low halves: (1 + 2^-7)^2 + 0 = 1 + 2^-6 + 2^-14 -> 1 + 2^-6 (0x3F82).
    // High halves: (1 + 2^-7)^2 - 1 = 2^-6 (1 + 2^-8), halfway -> even 2^-6 (0x3C80).
    const uint32_t a = 0x3F813F81u, c = 0xBF800000u;
    EXPECT_EQ(half_math(1, {a, a, c})[0], 0x3C803F82u);
    EXPECT_EQ(half_math(2, {a, a, 0})[0], 0x3F823F82u);
}

// ---- atomics -------------------------------------------------------------------------------

TEST(EmuAtomics, GlobalAndSharedReadModifyWrite) {
    emu::Buffer<int> out(8, emu::Access::kReadWrite, "out");
    for (int i = 0; i < 8; ++i) out[i] = 0;
    out[4] = 7;
    EXPECT_CLEAN(emu::run(image(), "emu_test_atomics", {3, 1, 1}, {64, 1, 1}, 0, out.data()));
    // atom.acq_rel.gpu.global.add.u32 (kl__atom_add_acq_rel_gpu): returns the old value, stores old + 10.
    EXPECT_EQ(out[4], 37);
    std::vector<int> olds = {out[5], out[6], out[7]};
    std::sort(olds.begin(), olds.end());
    EXPECT_EQ(olds, (std::vector<int>{7, 17, 27}));
    EXPECT_EQ(out[0], 192);               // 3 blocks x 64 threads
    EXPECT_EQ(out[2], 2 * (31 * 32 / 2));  // the last block's shared sum of lanes
    EXPECT_EQ(out[3], 63);                 // the CAS found the block's maximum index and swapped in -5
    EXPECT_EQ(out[1], -5);
}

TEST(EmuForms, GlobaltimerReadsNanosecondsInOrder) {
    emu::Buffer<unsigned long long> out(2, emu::Access::kWrite, "out");
    EXPECT_CLEAN(emu::run(image(), "emu_test_globaltimer", {1, 1, 1}, {32, 1, 1}, 0, out.data()));
    EXPECT_GT(out[0], 0ull);
    EXPECT_LE(out[0], out[1]);
}

// ---- more instruction forms ------------------------------------------------------------------

TEST(EmuForms, ZeroFillCpAsyncLdmatrixX2BarRedScalarFp8) {
    emu::Buffer<uint32_t> out(75, emu::Access::kWrite, "out");
    emu::Buffer<uint16_t> src(8, emu::Access::kRead, "src");
    for (uint16_t i = 0; i < 8; ++i) src[i] = (uint16_t)(0x1100 + i);
    EXPECT_CLEAN(emu::run(image(), "emu_test_forms", {1, 1, 1}, {64, 1, 1}, 2048, out.data(),
                          static_cast<const uint16_t *>(src.data())));
    // cp.async ... 16, 6: source bytes 0..5 (elements 0x1100..0x1102), the rest zero.
    EXPECT_EQ(out[0], 0x11011100u);
    EXPECT_EQ(out[1], 0x00001102u);
    EXPECT_EQ(out[2], 0u);
    EXPECT_EQ(out[3], 0u);
    // ldmatrix.x2: lane 0 gets M[0][0..1] and M[8][0..1]; lane 13 (row 3, cols 2..3) M[3][2..3], M[11][2..3].
    EXPECT_EQ(out[4], 0x00010000u);
    EXPECT_EQ(out[5], 0x08010800u);
    EXPECT_EQ(out[4 + 26], 0x03030302u);
    EXPECT_EQ(out[5 + 26], 0x0B030B02u);
    EXPECT_EQ(out[68], 5u);  // __syncthreads_count(tid < 5)
    EXPECT_EQ(out[69], 1u);  // __syncthreads_and(tid < 64), 64 threads
    EXPECT_EQ(out[70], 1u);  // __syncthreads_or(tid == 3)
    EXPECT_EQ(out[71], 0x7Eu);  // 500 saturates to 448
    EXPECT_EQ(out[72], 0x7Fu);  // without saturation: NaN
    EXPECT_EQ(out[73], 0x1Du);  // 0.1 = 1.6 * 2^-4 -> 1.625 * 2^-4 (0 0011 101)
    EXPECT_EQ(out[74], 0x80u);  // -0
}

// ---- the extension API: wait_until, SyncClock, block_local ------------------------------------
// A producer/consumer handshake the way an mbarrier extension builds it:
// thread 31 writes shared memory, releases a clock and sets a flag; every
// other thread waits for the flag, acquires the clock and reads.

struct Flag : emu::BlockLocalBase {
    bool set = false;
    emu::SyncClock clock;
};
const char kFlagKey = 0;

emu::Fault handshake(bool acquire) {
    return emu::launch({2, 1, 1}, {32, 1, 1}, 64, [acquire] {
        Flag &f = emu::block_local<Flag>(&kFlagKey);
        if (emu::thread() == 31) {
            uint32_t v = 42;
            memcpy(emu::shared(emu::dynamic_base(), 4, 4, emu::Access::kWrite), &v, 4);
            emu::sync_release(f.clock);
            f.set = true;
            return;
        }
        emu::wait_until([&f] { return f.set; }, [] { return std::string("the flag"); });
        if (acquire) emu::sync_acquire(f.clock);
        uint32_t v = 0;
        memcpy(&v, emu::shared(emu::dynamic_base(), 4, 4, emu::Access::kRead), 4);
        if (v != 42) emu::fault(emu::FaultKind::kUnsupported, 0, "read %u", v);
    });
}

TEST(EmuExtensionApi, WaitUntilWithReleaseAndAcquireOrdersTheRead) { EXPECT_CLEAN(handshake(true)); }
TEST(EmuExtensionApi, WithoutTheAcquireTheReadIsARace) {
    const emu::Fault f = handshake(false);
    EXPECT_EQ(f.kind, emu::FaultKind::kSharedRace) << f.message;
    EXPECT_EQ(f.thread, 0u);
}
TEST(EmuExtensionApi, AWaitNobodyEndsIsADeadlockNamingIt) {
    const emu::Fault f = emu::launch({1, 1, 1}, {32, 1, 1}, 0, [] {
        if (emu::thread() == 4) emu::wait_until([] { return false; }, [] { return std::string("mbarrier 0x40 phase 0"); });
    });
    EXPECT_EQ(f.kind, emu::FaultKind::kDeadlock) << f.message;
    EXPECT_NE(f.message.find("thread 4 waits at mbarrier 0x40 phase 0"), std::string::npos) << f.message;
}

// ---- negative tests: every rule reported with the thread and the address ------------------

struct FaultCase {
    emu::Fault f;
    std::vector<uint32_t> out;
};
FaultCase fault_case(uint32_t which, uint32_t threads = 32) {
    emu::Buffer<uint32_t> out(64, emu::Access::kWrite, "out"), in(32, emu::Access::kRead, "in");
    for (uint32_t i = 0; i < 32; ++i) in[i] = i;
    FaultCase c;
    c.f = emu::run(image(), "emu_test_fault", {1, 1, 1}, {threads, 1, 1}, 256, out.data(),
                   static_cast<const uint32_t *>(in.data()), which);
    c.out.assign(out.data(), out.data() + 64);
    return c;
}

TEST(EmuFault, ReadOfAnotherThreadsSharedWriteWithoutBarrierIsARace) {
    const FaultCase c = fault_case(0);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedRace) << c.f.message;
    EXPECT_EQ(c.f.thread, 1u);
    EXPECT_NE(c.f.message.find("written by thread 0"), std::string::npos) << c.f.message;
    EXPECT_NE(c.f.message.find("thread 1 (threadIdx (1, 0, 0)"), std::string::npos) << c.f.message;
}
TEST(EmuFault, TheSameWithSyncthreadsIsClean) {
    const FaultCase c = fault_case(1);
    EXPECT_CLEAN(c.f);
    EXPECT_EQ(c.out[0], 7u);
}
TEST(EmuFault, OverwritingWhatAnotherThreadReadWithoutBarrierIsARace) {
    const FaultCase c = fault_case(2);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedRace) << c.f.message;
    EXPECT_EQ(c.f.thread, 1u);
    EXPECT_NE(c.f.message.find("read by thread 0"), std::string::npos) << c.f.message;
}
TEST(EmuFault, DynamicSharedPastItsEnd) {
    const FaultCase c = fault_case(3);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedOutOfBounds) << c.f.message;
    EXPECT_EQ(c.f.thread, 2u);
    EXPECT_NE(c.f.message.find("offset 260"), std::string::npos) << c.f.message;
}
TEST(EmuFault, Misaligned16ByteSharedLoad) {
    const FaultCase c = fault_case(4);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kMisaligned) << c.f.message;
    EXPECT_EQ(c.f.thread, 3u);
    EXPECT_EQ(c.f.address % 16, 8u);
}
TEST(EmuFault, BarrierOneThreadNeverReachesIsADeadlock) {
    const FaultCase c = fault_case(5);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kDeadlock) << c.f.message;
    EXPECT_EQ(c.f.thread, 3u);
    EXPECT_EQ(c.f.address, 0u);  // barrier 0: __syncthreads
    EXPECT_NE(c.f.message.find("thread 3 exited"), std::string::npos) << c.f.message;
    EXPECT_NE(c.f.message.find("31 of 32 arrived"), std::string::npos) << c.f.message;
}
TEST(EmuFault, GlobalReadPastTheBuffer) {
    const FaultCase c = fault_case(6);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kGlobalOutOfBounds) << c.f.message;
    EXPECT_EQ(c.f.thread, 24u);
    EXPECT_NE(c.f.message.find("'in' + 128"), std::string::npos) << c.f.message;
}
TEST(EmuFault, StoreIntoAReadOnlyBuffer) {
    const FaultCase c = fault_case(7);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kReadOnlyWrite) << c.f.message;
    EXPECT_EQ(c.f.thread, 4u);
}
TEST(EmuFault, Misaligned16ByteGlobalLoad) {
    const FaultCase c = fault_case(8);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kMisaligned) << c.f.message;
    EXPECT_EQ(c.f.thread, 5u);
    EXPECT_EQ(c.f.address % 16, 4u);
}
TEST(EmuFault, ReadOfUnwrittenSharedMemory) {
    const FaultCase c = fault_case(9);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedUninitialised) << c.f.message;
    EXPECT_EQ(c.f.thread, 6u);
}
TEST(EmuFault, LanesAtDifferentShuffles) {
    const FaultCase c = fault_case(10);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kCollective) << c.f.message;
    EXPECT_EQ(c.f.thread, 7u);
}
TEST(EmuFault, ShuffleMaskWithoutTheCallingLane) {
    const FaultCase c = fault_case(11);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kCollective) << c.f.message;
    EXPECT_EQ(c.f.thread, 9u);
}
TEST(EmuFault, NamedBarrierHalfTheThreadsReach) {
    const FaultCase c = fault_case(12, 64);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kDeadlock) << c.f.message;
    EXPECT_EQ(c.f.thread, 32u);
    EXPECT_EQ(c.f.address, 1u);
}
TEST(EmuFault, SyncwarpOrdersLanesOfAWarp) {
    const FaultCase c = fault_case(14);
    EXPECT_CLEAN(c.f);
    EXPECT_EQ(c.out[0], 9u);
}
TEST(EmuFault, AShuffleIsNoMemoryBarrier) {
    const FaultCase c = fault_case(15);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedRace) << c.f.message;
    EXPECT_EQ(c.f.thread, 1u);
}
TEST(EmuFault, ReadingACpAsyncDestinationBeforeWaitGroup) {
    const FaultCase c = fault_case(13);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kSharedUninitialised) << c.f.message;
    EXPECT_EQ(c.f.thread, 0u);
}

}  // namespace

// ---- declared extents --------------------------------------------------------
// emu_test_copy_extent copies n floats; its pointers are declared n
// elements each, in buffers 8 elements longer (so only the declared extent,
// not the allocation, can catch an overrun).

struct ExtentCase {
    emu::Fault f;
    std::vector<emu::DeclaredExtent> windows;
};
ExtentCase copy_extent(uint32_t n, uint32_t planted) {
    emu::Buffer<float> dst(n + 8, emu::Access::kReadWrite, "dst"), src(n + 8, emu::Access::kRead, "src");
    for (uint32_t i = 0; i < n + 8; ++i) src[i] = (float)i;
    std::vector<emu::DeclaredExtent> ws(2);
    ws[0].base = dst.data();
    ws[1].base = src.data();
    for (int i = 0; i < 2; ++i) {
        ws[i].elements = n;
        ws[i].elem_bytes = 4;
        ws[i].expr = "n";
    }
    ws[0].param = "dst";
    ws[1].param = "src";
    emu::set_declared_extents("emu_test_copy_extent", ws);
    ExtentCase c;
    c.f = emu::run(image(), "emu_test_copy_extent", {1, 1, 1}, {32, 1, 1}, 0, dst.data(),
                   static_cast<const float *>(src.data()), n, planted);
    c.windows = emu::last_declared_extents();
    return c;
}

TEST(EmuExtent, ACopyOfNElementsReachesTheLastOfEach) {
    const ExtentCase c = copy_extent(20, 0);
    EXPECT_CLEAN(c.f);
    ASSERT_EQ(c.windows.size(), 2u);
    EXPECT_EQ(c.windows[0].reach, 80u);  // dst[19] ends at byte 80
    EXPECT_EQ(c.windows[1].reach, 80u);
    EXPECT_TRUE(emu_test::windows_reached());
}
TEST(EmuExtent, APlantedReadOneElementPastTheExtentFaultsNamingIt) {
    const ExtentCase c = copy_extent(20, 1);
    EXPECT_EQ(c.f.kind, emu::FaultKind::kOutsideExtent) << c.f.message;
    EXPECT_EQ(c.f.thread, 0u);
    // src[20]: byte 80 of src, inside its 28-element buffer, past its 20 declared.
    EXPECT_NE(c.f.message.find("kernel emu_test_copy_extent: load of 4 bytes at 'src' + 80, byte 80 of parameter src, "
                               "outside its declared extent of 20 elements of 4 bytes (80 bytes: n = 20)"),
              std::string::npos)
        << c.f.message;
}
TEST(EmuExtent, AKernelThatStopsOneElementShortLeavesItsExtentUnreached) {
    // What a tightness test catches: the extent n is one element more than
    // the kernel touches.
    const ExtentCase c = copy_extent(20, 2);
    EXPECT_CLEAN(c.f);
    EXPECT_EQ(c.windows[0].reach, 76u);
    EXPECT_FALSE(emu_test::windows_reached());
}
TEST(EmuExtent, WindowsLastOneLaunch) {
    (void)copy_extent(20, 0);
    // A launch without windows set checks nothing declared (only the buffers).
    emu::Buffer<float> dst(28, emu::Access::kReadWrite, "dst"), src(28, emu::Access::kRead, "src");
    const emu::Fault f = emu::run(image(), "emu_test_copy_extent", {1, 1, 1}, {32, 1, 1}, 0, dst.data(),
                                  static_cast<const float *>(src.data()), 20u, 1u);
    EXPECT_CLEAN(f);
}
