// The tensor-core kernels mla_absorbed_attn_mma and grouped_gemm_mma, from
// their own source, on the CPU emulator (tests/emu: fibers for threads;
// ldmatrix, mma.sync and shuffles from the PTX ISA's fragment definitions;
// every shared and global access checked), launched through the generated
// launchers kl_mla_absorbed_attention_mma and kl_grouped_gemm_mma and the
// emulated backend, in both variants (head width 320 and 576), against the
// float64 references of the GPU test (tests/mla_prefill/mla_fast_test.cc).
//
// Sizes are small (the emulator is ~10^5 times slower than a GPU) but cover
// one and several query and key tiles, causal and not, batch > 1, ragged
// edges, odd strides and buffers off a 16-byte boundary. Outputs start
// poisoned (NaN) with guard elements around them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_fast_reference.h"
#include "tests/mla_prefill/mla_reference.h"

namespace {

using emu::Access;

class MlaMmaEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
};

// Input bits in a registered read-only buffer, `lead` elements off a 16-byte boundary when odd.
std::unique_ptr<emu::Buffer<kl_bf16>> input(const std::vector<uint16_t> &bits, const char *name, size_t lead) {
    std::unique_ptr<emu::Buffer<kl_bf16>> b(new emu::Buffer<kl_bf16>(bits.size(), Access::kRead, name, 8, lead));
    for (size_t i = 0; i < bits.size(); ++i) (*b)[i].bits = bits[i];
    return b;
}

// ---- absorbed attention --------------------------------------------------------

struct AttnCase {
    uint32_t batch, seq, heads;
    bool causal;
    size_t lead;
};

void run_attention(const kl_module *mod, uint32_t D, const AttnCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "D " << D << " batch " << c.batch << " seq " << c.seq << " heads " << c.heads
                                      << (c.causal ? " causal" : " full") << " lead " << c.lead);
    const uint32_t DV = D - 64;
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_mma_get(&k, mod));
    const size_t nq = (size_t)c.batch * c.seq * c.heads * D, nkv = (size_t)c.batch * c.seq * D;
    const std::vector<uint16_t> qh = emu_test::random_bf16(nq, seed, 1.0f), kvh = emu_test::random_bf16(nkv, seed + 1, 1.0f);
    auto q = input(qh, "q", c.lead), kv = input(kvh, "kv", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.batch * c.seq * c.heads * DV, Access::kWrite, "output", 8, c.lead);
    const float scale = 1.0f / std::sqrt((float)D);
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_mma(&k, q->data(), kv->data(), out.data(), c.seq, c.batch, c.heads, D,
                                                   DV, scale, c.causal, nullptr));
    const std::vector<double> ref = mla_fast_ref::absorbed_attention(qh, kvh, c.batch, c.seq, c.heads, D, DV, scale, c.causal);
    EXPECT_TRUE(emu_test::close(
        "out", [&](size_t i) { return emu_test::bf16(out[i].bits); }, ref, 1e-2, 1e-2, 1e-2, [&](size_t i) {
            std::ostringstream s;
            s << "[b " << i / DV / c.heads / c.seq << ", t " << i / DV / c.heads % c.seq << ", h " << i / DV % c.heads
              << ", col " << i % DV << "]";
            return s.str();
        }));
    EXPECT_TRUE(out.guards_intact());
}

TEST_P(MlaMmaEmulated, AttentionOneToken) { run_attention(mod(), hdim(), {1, 1, 1, true, 0}, 11); }
TEST_P(MlaMmaEmulated, AttentionThreeTokensTwoHeadsCausal) { run_attention(mod(), hdim(), {1, 3, 2, true, 0}, 12); }
TEST_P(MlaMmaEmulated, AttentionThreeTokensTwoHeadsFull) { run_attention(mod(), hdim(), {1, 3, 2, false, 0}, 13); }
TEST_P(MlaMmaEmulated, AttentionSeventeenThreeHeadsBatch2Full) { run_attention(mod(), hdim(), {2, 17, 3, false, 0}, 14); }
TEST_P(MlaMmaEmulated, AttentionTwoQueryTilesCausal) { run_attention(mod(), hdim(), {1, 70, 1, true, 0}, 15); }
TEST_P(MlaMmaEmulated, AttentionTwoQueryTilesFull) { run_attention(mod(), hdim(), {1, 70, 1, false, 0}, 16); }
TEST_P(MlaMmaEmulated, AttentionUnalignedBuffers) { run_attention(mod(), hdim(), {1, 5, 2, true, 1}, 17); }

// ---- grouped GEMM --------------------------------------------------------------

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // strides are g*k_g + a_pad, g*n_g + c_pad
    size_t lead;
};

void run_gemm(const kl_module *mod, const GemmCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                      << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " lead " << c.lead);
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_mma_get(&k, mod));
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    const std::vector<uint16_t> ah = emu_test::random_bf16((size_t)c.m * a_stride, seed, 1.0f),
                                bh = emu_test::random_bf16((size_t)c.g * c.n_g * c.k_g, seed + 1, 1.0f);
    auto a = input(ah, "a", c.lead), b = input(bh, "b", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.m * c_stride, Access::kWrite, "c", 8, c.lead);
    KL_EMU_ASSERT_OK(kl_grouped_gemm_mma(&k, a->data(), b->data(), out.data(), c.m, c.g, c.k_g, c.n_g, a_stride,
                                         c_stride, nullptr));
    const std::vector<double> dense = mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride);
    // The reference is dense [m, g*n_g]; C's rows are c_stride apart and the
    // columns past g*n_g must stay poison.
    const size_t w = (size_t)c.g * c.n_g;
    size_t untouched_bad = 0;
    for (size_t i = 0; i < c.m; ++i)
        for (size_t j = w; j < c_stride; ++j) untouched_bad += out[i * c_stride + j].bits != 0xFFFF;
    EXPECT_EQ(0u, untouched_bad) << "columns of C outside the groups were written";
    EXPECT_TRUE(emu_test::close(
        "C", [&](size_t i) { return emu_test::bf16(out[(i / w) * c_stride + i % w].bits); }, dense, 1e-2, 1e-2, 1e-2,
        [&](size_t i) {
            std::ostringstream s;
            s << "[row " << i / w << ", group " << i % w / c.n_g << ", col " << i % w % c.n_g << "]";
            return s.str();
        }));
    EXPECT_TRUE(out.guards_intact());
}

TEST_P(MlaMmaEmulated, GemmOneTile) { run_gemm(mod(), {1, 1, 8, 8, 0, 0, 0}, 21); }
TEST_P(MlaMmaEmulated, GemmSeveralTilesAndKTiles) { run_gemm(mod(), {130, 2, 40, 136, 8, 16, 0}, 22); }
TEST_P(MlaMmaEmulated, GemmFullTileAbsorptionShape) { run_gemm(mod(), {128, 1, 128, 128, 0, 0, 0}, 23); }
TEST_P(MlaMmaEmulated, GemmTransposedAbsorptionShape) { run_gemm(mod(), {64, 2, 96, 32, 0, 0, 0}, 24); }
TEST_P(MlaMmaEmulated, GemmOddSizesUnaligned) { run_gemm(mod(), {37, 3, 13, 19, 1, 3, 1}, 25); }
// Aligned rows whose last 16-byte piece runs past n_g (or k_g): element-wise
// edges next to vector pieces; the columns past n_g stay poison.
TEST_P(MlaMmaEmulated, GemmRaggedEdgesAligned) { run_gemm(mod(), {3, 1, 12, 20, 4, 4, 0}, 26); }
TEST_P(MlaMmaEmulated, GemmRaggedEdgesAlignedTwoGroups) { run_gemm(mod(), {5, 2, 12, 20, 8, 8, 0}, 27); }

INSTANTIATE_TEST_SUITE_P(Variants, MlaMmaEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

}  // namespace
