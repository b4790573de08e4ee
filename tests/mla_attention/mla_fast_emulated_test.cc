// The tensor-core kernels mla_absorbed_attn_mma and grouped_gemm_mma, from
// their own source, run on the CPU by mma_emulator.h (fibers for threads;
// ldmatrix, mma.sync and shuffles computed from the PTX ISA's fragment
// definitions; every shared-memory access bounds- and alignment-checked),
// against the float64 references. No GPU needed: this pins the kernels'
// fragment layouts, swizzles, masks, pipelining and barrier pairing before
// a GPU ever runs them (tests/mla_attention/mla_fast_test.cc does that).
//
// Built twice (BUILD): MLA_HDIM 320 and 576, the two variants' head widths.
// Sizes are small (the emulator is ~10^5 times slower than a GPU) but cover
// one and several query tiles and key tiles, causal and not, batch > 1,
// ragged edges, odd strides and buffers off a 16-byte boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/mla_attention/mla_fast_reference.h"
#include "tests/mla_attention/mla_reference.h"

#include "tests/mla_attention/mma_emulator.h"

#ifndef MLA_HDIM
#error "build with -DMLA_HDIM=320 or 576 (the variant's head width)"
#endif
// The kernel sources, without their own #include lines (a genrule strips them).
#include "tests/mla_attention/emu_kernels.inc"

// The kernels' `extern __shared__` arrays: the emulated blocks' shared memory.
alignas(128) unsigned char mla_absorbed_attn_mma__smem[MLA_ABSORBED_ATTN_MMA_SMEM];
alignas(128) unsigned char grouped_gemm_mma__smem[GROUPED_GEMM_MMA_SMEM];

namespace {

constexpr uint16_t kPoison = 0xFFFF;  // a bf16 NaN
constexpr size_t kGuard = 8;          // poisoned elements around every output

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<uint16_t> out(n);
    for (uint16_t &x : out) x = emu::f32_to_bf16(dist(gen));
    return out;
}

// A host buffer the emulated kernel may read: `lead` elements before the data
// move it off a 16-byte boundary when odd.
struct Input {
    std::vector<uint16_t> storage;
    size_t lead;
    Input(const std::vector<uint16_t> &data, size_t lead_) : storage(data.size() + lead_ + 8, 0), lead(lead_) {
        std::memcpy(storage.data() + lead, data.data(), data.size() * 2);
        // 16-byte aligned storage start is what the lead is relative to
        emu::state().readable.push_back(emu::Range{(uintptr_t)(storage.data() + lead),
                                                   (uintptr_t)(storage.data() + lead + data.size())});
    }
    const __nv_bfloat16 *get() const { return reinterpret_cast<const __nv_bfloat16 *>(storage.data() + lead); }
};

// An output with kGuard poisoned elements on both sides.
struct Output {
    std::vector<uint16_t> storage;
    size_t n, lead;
    Output(size_t n_, size_t lead_) : storage(n_ + 2 * kGuard + lead_, kPoison), n(n_), lead(lead_ + kGuard) {}
    __nv_bfloat16 *get() { return reinterpret_cast<__nv_bfloat16 *>(storage.data() + lead); }
    uint16_t at(size_t i) const { return storage[lead + i]; }
    ::testing::AssertionResult guards_intact() const {
        for (size_t i = 0; i < storage.size(); ++i) {
            if (i >= lead && i < lead + n) continue;
            if (storage[i] != kPoison)
                return ::testing::AssertionFailure() << "a guard element was written (storage index " << i << ")";
        }
        return ::testing::AssertionSuccess();
    }
};

// Aligned host storage: std::vector<uint16_t> gives 16-byte alignment on glibc x86-64 for these sizes.
void require_aligned(const void *p) { ASSERT_EQ(0u, (uintptr_t)p % 16u) << "host buffers must start 16-byte aligned"; }

// ||out - ref|| / ||ref|| < 1e-2, each element within atol + 1e-2 |ref|, no NaN.
::testing::AssertionResult close(const char *what, const Output &out, const std::vector<double> &ref, double atol,
                                 const std::function<std::string(size_t)> &where) {
    double d2 = 0.0, r2 = 0.0;
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double o = emu::bf16_to_f32(out.at(i)), r = ref[i];
        const double d = std::fabs(o - r);
        if (!std::isfinite(o) || !(d <= atol + 1e-2 * std::fabs(r))) {
            if (bad < 10) first << "  " << what << where(i) << ": got " << o << ", want " << r << "\n";
            bad++;
        }
        if (std::isfinite(o)) d2 += d * d;
        r2 += r * r;
    }
    const double rel = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    if (bad == 0 && rel < 1e-2) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << bad << " of " << ref.size()
                                         << " elements off; relative norm error " << rel << "\n"
                                         << first.str();
}

// ---- absorbed attention --------------------------------------------------------

constexpr uint32_t D = MLA_HDIM, DV = MLA_HDIM - 64;
constexpr uint32_t kAttnSmem = MLA_ABSORBED_ATTN_MMA_SMEM;  // the spec's shared_bytes

struct AttnCase {
    uint32_t batch, seq, heads;
    bool causal;
    size_t lead;  // elements before each buffer (odd: unaligned pointers)
};

void run_attention(const AttnCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "D " << D << " batch " << c.batch << " seq " << c.seq << " heads " << c.heads
                                      << (c.causal ? " causal" : " full") << " lead " << c.lead);
    emu::state().readable.clear();
    const size_t nq = (size_t)c.batch * c.seq * c.heads * D, nkv = (size_t)c.batch * c.seq * D;
    const std::vector<uint16_t> qh = random_bf16(nq, seed, 1.0f), kvh = random_bf16(nkv, seed + 1, 1.0f);
    const Input q(qh, c.lead), kv(kvh, c.lead);
    if (c.lead == 0) {
        require_aligned(q.get());
        require_aligned(kv.get());
    }
    Output out((size_t)c.batch * c.seq * c.heads * DV, c.lead);
    const float scale = 1.0f / std::sqrt((float)D);
    const dim3 grid{(c.seq + 63u) / 64u, c.heads, c.batch};  // the spec's grid
    emu::launch(grid, dim3{256, 1, 1}, mla_absorbed_attn_mma__smem, kAttnSmem, [&] {
        mla_absorbed_attn_mma(q.get(), kv.get(), out.get(), c.seq, c.heads, D, DV, scale, c.causal ? 1u : 0u);
    });
    const std::vector<double> ref =
        mla_fast_ref::absorbed_attention(qh, kvh, c.batch, c.seq, c.heads, D, DV, scale, c.causal);
    EXPECT_TRUE(close("out", out, ref, 1e-2, [&](size_t i) {
        const size_t col = i % DV, h = i / DV % c.heads, t = i / DV / c.heads % c.seq, b = i / DV / c.heads / c.seq;
        std::ostringstream s;
        s << "[b " << b << ", t " << t << ", h " << h << ", col " << col << "]";
        return s.str();
    }));
    EXPECT_TRUE(out.guards_intact());
}

TEST(MlaAbsorbedAttnMmaEmulated, OneToken) { run_attention({1, 1, 1, true, 0}, 11); }
TEST(MlaAbsorbedAttnMmaEmulated, ThreeTokensTwoHeadsCausal) { run_attention({1, 3, 2, true, 0}, 12); }
TEST(MlaAbsorbedAttnMmaEmulated, ThreeTokensTwoHeadsFull) { run_attention({1, 3, 2, false, 0}, 13); }
TEST(MlaAbsorbedAttnMmaEmulated, Seventeen3HeadsBatch2Full) { run_attention({2, 17, 3, false, 0}, 14); }
TEST(MlaAbsorbedAttnMmaEmulated, TwoQueryTilesCausal) { run_attention({1, 70, 1, true, 0}, 15); }
TEST(MlaAbsorbedAttnMmaEmulated, TwoQueryTilesFull) { run_attention({1, 70, 1, false, 0}, 16); }
TEST(MlaAbsorbedAttnMmaEmulated, UnalignedBuffers) { run_attention({1, 5, 2, true, 1}, 17); }

// ---- grouped GEMM --------------------------------------------------------------

constexpr uint32_t kGemmSmem = GROUPED_GEMM_MMA_SMEM;

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // strides are g*k_g + a_pad, g*n_g + c_pad
    size_t lead;
};

void run_gemm(const GemmCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                      << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " lead " << c.lead);
    emu::state().readable.clear();
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    const std::vector<uint16_t> ah = random_bf16((size_t)c.m * a_stride, seed, 1.0f),
                                bh = random_bf16((size_t)c.g * c.n_g * c.k_g, seed + 1, 1.0f);
    const Input a(ah, c.lead), b(bh, c.lead);
    Output out((size_t)c.m * c_stride, c.lead);
    const dim3 grid{(c.n_g + 127u) / 128u, (c.m + 127u) / 128u, c.g};  // the spec's grid
    emu::launch(grid, dim3{256, 1, 1}, grouped_gemm_mma__smem, kGemmSmem, [&] {
        grouped_gemm_mma(a.get(), b.get(), out.get(), c.m, c.g, c.k_g, c.n_g, a_stride, c_stride);
    });
    const std::vector<double> dense = mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride);
    // The reference is dense [m, g*n_g]; the kernel's C rows are c_stride apart
    // and the columns past g*n_g must stay poison.
    Output packed((size_t)c.m * c.g * c.n_g, 0);
    size_t untouched_bad = 0;
    for (size_t i = 0; i < c.m; ++i)
        for (size_t j = 0; j < c_stride; ++j) {
            if (j < (size_t)c.g * c.n_g)
                packed.storage[packed.lead + i * c.g * c.n_g + j] = out.at(i * c_stride + j);
            else if (out.at(i * c_stride + j) != kPoison)
                untouched_bad++;
        }
    EXPECT_EQ(0u, untouched_bad) << "columns of C outside the groups were written";
    EXPECT_TRUE(close("C", packed, dense, 1e-2, [&](size_t i) {
        const size_t row = i / (c.g * c.n_g), col = i % (c.g * c.n_g);
        std::ostringstream s;
        s << "[row " << row << ", group " << col / c.n_g << ", col " << col % c.n_g << "]";
        return s.str();
    }));
    EXPECT_TRUE(out.guards_intact());
}

TEST(GroupedGemmMmaEmulated, OneTile) { run_gemm({1, 1, 8, 8, 0, 0, 0}, 21); }
TEST(GroupedGemmMmaEmulated, SeveralTilesAndKTiles) { run_gemm({130, 2, 40, 136, 8, 16, 0}, 22); }
TEST(GroupedGemmMmaEmulated, FullTileAbsorptionShape) { run_gemm({128, 1, 128, 128, 0, 0, 0}, 23); }
TEST(GroupedGemmMmaEmulated, TransposedAbsorptionShape) { run_gemm({64, 2, 96, 32, 0, 0, 0}, 24); }
TEST(GroupedGemmMmaEmulated, OddSizesUnaligned) { run_gemm({37, 3, 13, 19, 1, 3, 1}, 25); }
// Aligned rows whose last 16-byte piece runs past n_g (or k_g): element-wise
// edges next to vector pieces; the columns past n_g are padding that must
// stay poison.
TEST(GroupedGemmMmaEmulated, RaggedEdgesAligned) { run_gemm({3, 1, 12, 20, 4, 4, 0}, 26); }
TEST(GroupedGemmMmaEmulated, RaggedEdgesAlignedTwoGroups) { run_gemm({5, 2, 12, 20, 8, 8, 0}, 27); }

}  // namespace
