// The sm_90 emulation (tests/emu/sm90_wgmma.cc) against the PTX ISA:
// wgmma.mma_async m64nNk16 bf16 -> f32 with both operands in shared memory
// (and the RS form, A from registers, by the ISA's matrix-A fragment),
// in the 128-byte swizzle layouts, its descriptors, its accumulator
// fragment, commit/wait groups, and the rules (a warpgroup instruction;
// results only after wait_group). Kernels: testdata/sm90_kernels.cu.
//
// Operands are placed here from the ISA's description of the 128-byte
// swizzle ("Shared Memory Matrix Layout": rows of 128 bytes, the 16-byte
// chunk c of row r stored at chunk c ^ (r % 8), 8-row groups SBO apart,
// MN-major 64-element slabs LBO apart), expected products from the
// definition D = A B (+ C), and each thread's registers from the ISA's
// m64nNk16 accumulator figure (thread t: rows 16 (t / 32) + (t % 32) / 4
// and + 8, columns 8 i + 2 (t % 4) and + 1). None of it calls the
// emulator's own address arithmetic, so a wrong emulation cannot agree
// with itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"

namespace {

const void *image() { return kl_emu_image("sm90_test_kernels", ""); }

#define EXPECT_CLEAN(f) EXPECT_TRUE((f).ok()) << (f).message

// Small integers are exact in bf16: sign, exponent, 7 mantissa bits.
uint16_t bf16(int v) {
    const float f = (float)v;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

// A 128-byte-swizzled K-major slab: row r holds x[r][0..63]; element k at
// byte r * 128 + ((k / 8) ^ (r % 8)) * 16 + (k % 8) * 2 (rows past 8 follow
// at 128 bytes each: SBO 1024 between 8-row groups).
void put_k_major(std::vector<uint16_t> &img, uint32_t off, uint32_t rows, int (*x)(uint32_t, uint32_t)) {
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t k = 0; k < 64; ++k)
            img[(off + r * 128u + (((k / 8) ^ (r % 8)) * 16u) + (k % 8) * 2u) / 2] = bf16(x(r, k));
}
// MN-major: element (k, n) in slab n / 64 (slabs lbo apart), row k of the
// slab, chunk ((n % 64) / 8) ^ (k % 8), element n % 8.
void put_mn_major(std::vector<uint16_t> &img, uint32_t off, uint32_t lbo, uint32_t ks, uint32_t ns,
                  int (*x)(uint32_t, uint32_t)) {
    for (uint32_t k = 0; k < ks; ++k)
        for (uint32_t n = 0; n < ns; ++n)
            img[(off + (n / 64) * lbo + k * 128u + ((((n % 64) / 8) ^ (k % 8)) * 16u) + (n % 8) * 2u) / 2] =
                bf16(x(k, n));
}

int A(uint32_t r, uint32_t k) { return (int)((r * 7 + k * 3) % 11) - 5; }
int Bk(uint32_t n, uint32_t k) { return (int)((n * 5 + k) % 9) - 4; }   // K-major B: row n, column k
int Bmn(uint32_t k, uint32_t n) { return (int)((k * 3 + n * 2) % 7) - 3; }  // MN-major B: row k, column n

struct WgRun {
    emu::Fault f;
    std::vector<float> d, before;
};

WgRun wg_run(uint32_t shape, uint32_t n, const std::vector<uint16_t> &img, uint32_t a_off, uint32_t b_off,
        uint32_t b_step, uint32_t lbo, uint32_t steps, uint32_t accumulate, float init) {
    emu::Buffer<uint16_t> im(img.size(), emu::Access::kRead, "image");
    std::memcpy(im.data(), img.data(), img.size() * 2);
    emu::Buffer<float> d(128 * n / 2, emu::Access::kWrite, "d"), before(128, emu::Access::kWrite, "before");
    WgRun r;
    r.f = emu::run(image(), "emu_test_wgmma", {1, 1, 1}, {128, 1, 1}, (uint32_t)img.size() * 2 + 1024, d.data(),
                   before.data(), static_cast<const void *>(im.data()), (uint32_t)img.size() * 2, shape,
                   a_off, b_off, b_step, lbo, steps, accumulate, init);
    r.d.assign(d.data(), d.data() + 128 * n / 2);
    r.before.assign(before.data(), before.data() + 128);
    return r;
}

// The ISA's accumulator figure: register j of thread t.
void row_col(uint32_t t, uint32_t j, uint32_t *row, uint32_t *col) {
    *row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((j % 4) / 2);
    *col = 8 * (j / 4) + 2 * (t % 4) + (j % 2);
}

TEST(EmuWgmmaDesc, EncodesStartLboSboAndThe128ByteSwizzle) {
    emu::Buffer<uint64_t> out(3, emu::Access::kWrite, "out");
    EXPECT_CLEAN(emu::run(image(), "emu_test_wgmma_desc", {1, 1, 1}, {32, 1, 1}, 0, out.data()));
    // (0x400 >> 4) | (16 >> 4) << 16 | (1024 >> 4) << 32 | 1 << 62
    EXPECT_EQ(out[0], 0x4000004000010040ull);
    // 0x2420 >> 4 = 0x242; 8192 >> 4 = 0x200; 1024 >> 4 = 0x40
    EXPECT_EQ(out[1], 0x4000004002000242ull);
    // Every field's 14 bits: 0x3fff0 >> 4 = 0x3fff
    EXPECT_EQ(out[2], 0x40003fff3fff3fffull);
}

// m64n32k16, A and B K-major, A and B starting 32 bytes into their rows (the
// second k16 step of a 64-wide slab: the swizzle applies to the address),
// accumulating onto 0.5.
TEST(EmuWgmma, N32KMajorSecondKStepAccumulates) {
    std::vector<uint16_t> img(12288 / 2, 0);
    put_k_major(img, 0, 64, A);
    put_k_major(img, 8192, 32, Bk);
    const WgRun r = wg_run(0, 32, img, 32, 8192 + 32, 0, 16, 1, 1, 0.5f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    auto D = [](uint32_t row, uint32_t col) {
        double s = 0.5;
        for (uint32_t k = 16; k < 32; ++k) s += A(row, k) * Bk(col, k);
        return s;
    };
    // Fixed points of the figure: thread 0 holds D[0][0], D[0][1], D[8][0],
    // D[8][1]; thread 37 (warp 1, lane 5) D[17][2], D[17][3], D[25][2] and, in
    // register 4, D[17][10]; thread 127 in register 15 D[63][31].
    EXPECT_EQ(r.d[0], D(0, 0));
    EXPECT_EQ(r.d[1], D(0, 1));
    EXPECT_EQ(r.d[2], D(8, 0));
    EXPECT_EQ(r.d[3], D(8, 1));
    EXPECT_EQ(r.d[37 * 16 + 0], D(17, 2));
    EXPECT_EQ(r.d[37 * 16 + 1], D(17, 3));
    EXPECT_EQ(r.d[37 * 16 + 2], D(25, 2));
    EXPECT_EQ(r.d[37 * 16 + 4], D(17, 10));
    EXPECT_EQ(r.d[127 * 16 + 15], D(63, 31));
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 16; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            bad += r.d[t * 16 + j] != D(row, col);
        }
    EXPECT_EQ(bad, 0u);
}

// Two products into one accumulator in one group (k steps 0 and 1 of the
// slab, scale-d 0 then 1): D = A[:, 0:32] B[:, 0:32]^T; the initial 9 is
// dropped by the first product's scale-d = 0.
TEST(EmuWgmma, ChainedProductsAccumulateInIssueOrderAndScaleD0DropsC) {
    std::vector<uint16_t> img(12288 / 2, 0);
    put_k_major(img, 0, 64, A);
    put_k_major(img, 8192, 32, Bk);
    const WgRun r = wg_run(0, 32, img, 0, 8192, 32, 16, 2, 0, 9.0f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 16; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            double s = 0.0;
            for (uint32_t k = 0; k < 32; ++k) s += A(row, k) * Bk(col, k);
            bad += r.d[t * 16 + j] != s;
        }
    EXPECT_EQ(bad, 0u);
}

// m64n128k16 with B N-major (imm-trans-b 1): two 64-column slabs 4096 bytes
// apart (LBO), 16 k rows (two 8-row groups, SBO 1024).
TEST(EmuWgmma, N128NMajorBReadsSlabsLboApart) {
    std::vector<uint16_t> img((8192 + 8192) / 2, 0);
    put_k_major(img, 0, 64, A);
    put_mn_major(img, 8192, 4096, 16, 128, Bmn);
    const WgRun r = wg_run(1, 128, img, 0, 8192, 0, 4096, 1, 1, 0.0f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    auto D = [](uint32_t row, uint32_t col) {
        double s = 0.0;
        for (uint32_t k = 0; k < 16; ++k) s += A(row, k) * Bmn(k, col);
        return s;
    };
    EXPECT_EQ(r.d[0], D(0, 0));
    EXPECT_EQ(r.d[37 * 64 + 4 * 9 + 1], D(17, 8 * 9 + 2 + 1));  // register 37: column 75, in the second slab
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 64; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            bad += r.d[t * 64 + j] != D(row, col);
        }
    EXPECT_EQ(bad, 0u);
}

// m64n16k16 with A M-major (imm-trans-a 1): A[m][k] stored as an N-major
// operand is, with M for N, element m of row k of its one 64-element slab;
// its second k16 step (rows 16 .. 31: start + 16 rows of 128 bytes), B
// K-major (16 rows), accumulating onto 0.25.
int Amn(uint32_t k, uint32_t m) { return (int)((k * 5 + m * 3) % 13) - 6; }  // M-major A: row k, column m
TEST(EmuWgmma, N16MMajorAIsTheTransposeOfAnNMajorOperand) {
    std::vector<uint16_t> img(12288 / 2, 0);
    put_mn_major(img, 0, 8192, 32, 64, Amn);
    put_k_major(img, 8192, 16, Bk);
    const WgRun r = wg_run(3, 16, img, 16 * 128, 8192, 0, 8192, 1, 1, 0.25f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    auto D = [](uint32_t row, uint32_t col) {
        double s = 0.25;
        for (uint32_t k = 0; k < 16; ++k) s += Amn(16 + k, row) * Bk(col, k);
        return s;
    };
    // Thread 0's registers 0..3: D[0][0], D[0][1], D[8][0], D[8][1];
    // thread 127 register 7: D[63][15].
    EXPECT_EQ(r.d[0], D(0, 0));
    EXPECT_EQ(r.d[3], D(8, 1));
    EXPECT_EQ(r.d[127 * 8 + 7], D(63, 15));
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 8; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            bad += r.d[t * 8 + j] != D(row, col);
        }
    EXPECT_EQ(bad, 0u);
}

// m64n256k16, B N-major in four slabs, rows 16 .. 31 of them (the second
// k16 step: start + 16 rows of 128 bytes).
TEST(EmuWgmma, N256NMajorSecondKStep) {
    const uint32_t lbo = 4096;  // 32 k rows of 128 bytes per slab
    std::vector<uint16_t> img((8192 + 4 * lbo) / 2, 0);
    put_k_major(img, 0, 64, A);
    put_mn_major(img, 8192, lbo, 32, 256, Bmn);
    const WgRun r = wg_run(2, 256, img, 0, 8192 + 16 * 128, 0, lbo, 1, 0, 0.0f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 128; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            double s = 0.0;
            for (uint32_t k = 0; k < 16; ++k) s += A(row, k) * Bmn(16 + k, col);
            bad += r.d[t * 128 + j] != s;
        }
    EXPECT_EQ(bad, 0u);
}

// ---- the RS form: A from registers ----

// The ISA's matrix-A register fragment for .bf16 (m64nNk16, "Register
// Fragments"): register i of thread t holds two elements, the low half
// first: rows 16 (t / 32) + (t % 32) / 4, + 8 for registers 1 and 3;
// columns 2 (t % 4), + 8 for registers 2 and 3, and + 1 for the high half.
void a_row_k(uint32_t t, uint32_t i, uint32_t h, uint32_t *row, uint32_t *k) {
    *row = 16 * (t / 32) + (t % 32) / 4 + (i == 1 || i == 3 ? 8 : 0);
    *k = 2 * (t % 4) + (i >= 2 ? 8 : 0) + h;
}
// What emu_test_wgmma_rs's mode 0 puts in element h of register i of thread t.
int ra(uint32_t t, uint32_t i, uint32_t h) { return (int)((t * 8 + 2 * i + h) % 13) - 6; }

// Registers of an m64n256 result (d[t * 128 + j]) that differ from want(row, col), placed by the figure.
template <class F>
size_t n256_mismatches(const std::vector<float> &d, F want) {
    size_t bad = 0;
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t j = 0; j < 128; ++j) {
            uint32_t row, col;
            row_col(t, j, &row, &col);
            bad += d[t * 128 + j] != want(row, col);
        }
    return bad;
}

std::vector<float> rs_run(const std::vector<uint16_t> &img, uint32_t b_off, uint32_t lbo, uint32_t accumulate,
                          float init, uint32_t mode, emu::Fault *f) {
    emu::Buffer<uint16_t> im(img.size(), emu::Access::kRead, "image");
    std::memcpy(im.data(), img.data(), img.size() * 2);
    emu::Buffer<float> d(128 * 128, emu::Access::kWrite, "d");
    *f = emu::run(image(), "emu_test_wgmma_rs", {1, 1, 1}, {128, 1, 1}, (uint32_t)img.size() * 2 + 1024, d.data(),
                  static_cast<const void *>(im.data()), (uint32_t)img.size() * 2, b_off, lbo, accumulate, init, mode);
    return std::vector<float>(d.data(), d.data() + 128 * 128);
}

// m64n256k16 with A from registers placed by the figure, B N-major in four
// slabs: D = A B + 0.25.
TEST(EmuWgmmaRs, RegistersAreTheIsasMatrixAFragment) {
    const uint32_t lbo = 2048;  // 16 k rows of 128 bytes per slab
    std::vector<uint16_t> img(4 * lbo / 2, 0);
    put_mn_major(img, 0, lbo, 16, 256, Bmn);
    int A16[64][16];
    for (uint32_t t = 0; t < 128; ++t)
        for (uint32_t i = 0; i < 4; ++i)
            for (uint32_t h = 0; h < 2; ++h) {
                uint32_t row, k;
                a_row_k(t, i, h, &row, &k);
                A16[row][k] = ra(t, i, h);
            }
    // Fixed points: thread 0's register 0 is A[0][0..1], register 1 A[8][0..1],
    // register 2 A[0][8..9]; thread 37 (warp 1, lane 5: g 1, q 1) register 3
    // is A[25][10..11].
    EXPECT_EQ(A16[0][0], ra(0, 0, 0));
    EXPECT_EQ(A16[8][1], ra(0, 1, 1));
    EXPECT_EQ(A16[0][9], ra(0, 2, 1));
    EXPECT_EQ(A16[25][10], ra(37, 3, 0));
    emu::Fault f;
    const std::vector<float> d = rs_run(img, 0, lbo, 1, 0.25f, 0, &f);
    ASSERT_TRUE(f.ok()) << f.message;
    EXPECT_EQ(0u, n256_mismatches(d, [&](uint32_t row, uint32_t col) {
                  double s = 0.25;
                  for (uint32_t k = 0; k < 16; ++k) s += A16[row][k] * Bmn(k, col);
                  return s;
              }));
}

int A01(uint32_t r, uint32_t k) { return (int)((r * 5 + k * 3) % 3) - 1; }
int B01(uint32_t n, uint32_t k) { return (int)((n + 2 * k) % 4) - 1; }

// An m64n32 accumulator's first 16 columns, packed in pairs (registers 0-7
// into A registers 0-3), are the RS operand of the next product: D =
// S[:, 0:16] B, S = A B01^T (the S -> P step of attention, without softmax).
TEST(EmuWgmmaRs, AccumulatorPairsAreTheNextProductsAOperand) {
    const uint32_t lbo = 2048;
    std::vector<uint16_t> img((8192 + 4096 + 4 * lbo) / 2, 0);
    put_k_major(img, 0, 64, A01);
    put_k_major(img, 8192, 32, B01);
    put_mn_major(img, 12288, lbo, 16, 256, Bmn);
    emu::Fault f;
    const std::vector<float> d = rs_run(img, 12288, lbo, 0, 7.0f, 2, &f);
    ASSERT_TRUE(f.ok()) << f.message;
    EXPECT_EQ(0u, n256_mismatches(d, [](uint32_t row, uint32_t col) {
                  double s = 0.0;  // scale-d 0: the 7 is dropped
                  for (uint32_t c = 0; c < 16; ++c) {
                      double sc = 0.0;  // S[row][c], over the slab's first 16 k
                      for (uint32_t k = 0; k < 16; ++k) sc += A01(row, k) * B01(c, k);
                      s += sc * Bmn(c, col);
                  }
                  return s;
              }));
}

// The hardware reads A's registers until the product completes: a kernel that
// rewrites one between commit and wait faults, naming the thread.
TEST(EmuWgmmaRs, ARegisterChangedBeforeTheWaitFaults) {
    const uint32_t lbo = 2048;
    std::vector<uint16_t> img(4 * lbo / 2, 0);
    put_mn_major(img, 0, lbo, 16, 256, Bmn);
    emu::Fault f;
    rs_run(img, 0, lbo, 0, 0.0f, 1, &f);
    EXPECT_EQ(f.kind, emu::FaultKind::kUnsupported) << f.message;
    EXPECT_NE(f.message.find("changed its A registers before the product completed"), std::string::npos) << f.message;
}

// Between commit and wait the accumulator belongs to the tensor core: a read
// there sees no result (NaN in the emulation, so such a kernel's output fails).
TEST(EmuWgmma, AccumulatorReadBeforeItsWaitIsNaN) {
    std::vector<uint16_t> img(12288 / 2, 0);
    put_k_major(img, 0, 64, A);
    put_k_major(img, 8192, 32, Bk);
    const WgRun r = wg_run(0, 32, img, 0, 8192, 0, 16, 1, 1, 0.5f);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t t = 0; t < 128; ++t) EXPECT_TRUE(std::isnan(r.before[t])) << "thread " << t;
    EXPECT_FALSE(std::isnan(r.d[0]));
}

// wgmma is .sync.aligned over the warpgroup: half of it issuing and waiting
// never completes the wait (the other half is gone): a deadlock report.
TEST(EmuWgmma, HalfAWarpgroupWaitingIsADeadlock) {
    const emu::Fault f = emu::run(image(), "emu_test_wgmma_broken", {1, 1, 1}, {128, 1, 1}, 8192 + 1024, 64u, 0u);
    EXPECT_EQ(f.kind, emu::FaultKind::kDeadlock) << f.message;
    EXPECT_NE(f.message.find("wgmma.wait_group"), std::string::npos) << f.message;
}

// A block of 64 threads has no whole warpgroup.
TEST(EmuWgmma, BlockWithoutAWholeWarpgroupFaults) {
    const emu::Fault f = emu::run(image(), "emu_test_wgmma_broken", {1, 1, 1}, {64, 1, 1}, 8192 + 1024, 64u, 0u);
    EXPECT_EQ(f.kind, emu::FaultKind::kCollective) << f.message;
    EXPECT_NE(f.message.find("128-thread warpgroups"), std::string::npos) << f.message;
}

// Products never waited for are lost: a thread that returns with them faults.
TEST(EmuWgmma, ReturningBeforeTheWaitFaults) {
    const emu::Fault f = emu::run(image(), "emu_test_wgmma_broken", {1, 1, 1}, {128, 1, 1}, 8192 + 1024, 128u, 1u);
    EXPECT_EQ(f.kind, emu::FaultKind::kUnsupported) << f.message;
    EXPECT_NE(f.message.find("not completed by a wgmma.wait_group"), std::string::npos) << f.message;
}

}  // namespace
