// The sm_90a kernels mla_absorbed_attn_wgmma and grouped_gemm_wgmma, from
// their own source, on the CPU emulator (tests/emu; wgmma, its descriptors
// and wait groups from tests/emu/sm90_wgmma.cc, every shared and global
// access checked), through the generated launchers
// kl_mla_absorbed_attention_wgmma and kl_grouped_gemm_wgmma and the emulated
// backend (which runs the sm_90a image: cuda_arch 900a), in both variants,
// against the float64 references of the GPU test.
//
// The sizes the issue names: sequence lengths 1, 3, 17 and 200 (4 query and
// 4 key tiles of 64), causal and not, batch 2, buffers off a 16-byte
// boundary; GEMMs with ragged m, n_g and k_g edges (k_g past the 3 stages),
// odd strides. Outputs start poisoned with guard elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_fast_reference.h"
#include "tests/mla_prefill/mla_reference.h"

namespace {

using emu::Access;

class MlaWgmmaEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
};

std::unique_ptr<emu::Buffer<kl_bf16>> input(const std::vector<uint16_t> &bits, const char *name, size_t lead) {
    std::unique_ptr<emu::Buffer<kl_bf16>> b(new emu::Buffer<kl_bf16>(bits.size(), Access::kRead, name, 8, lead));
    for (size_t i = 0; i < bits.size(); ++i) (*b)[i].bits = bits[i];
    return b;
}

struct Attn {
    uint32_t batch, seq, heads;
    bool causal;
    size_t lead;
};

void attention(const kl_module *mod, uint32_t D, const Attn &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "D " << D << " batch " << c.batch << " seq " << c.seq << " heads " << c.heads
                                      << (c.causal ? " causal" : " full") << " lead " << c.lead);
    const uint32_t DV = D - 64;
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_wgmma_get(&k, mod));
    const size_t nq = (size_t)c.batch * c.seq * c.heads * D, nkv = (size_t)c.batch * c.seq * D;
    const std::vector<uint16_t> qh = emu_test::random_bf16(nq, seed, 1.0f), kvh = emu_test::random_bf16(nkv, seed + 1, 1.0f);
    auto q = input(qh, "q", c.lead), kv = input(kvh, "kv", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.batch * c.seq * c.heads * DV, Access::kWrite, "output", 8, c.lead);
    const float scale = 1.0f / std::sqrt((float)D);
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_wgmma(&k, q->data(), kv->data(), out.data(), c.seq, c.batch, c.heads,
                                                     D, DV, scale, c.causal, nullptr));
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

TEST_P(MlaWgmmaEmulated, AttentionOneToken) { attention(mod(), hdim(), {1, 1, 1, true, 0}, 31); }
TEST_P(MlaWgmmaEmulated, AttentionThreeTokensCausal) { attention(mod(), hdim(), {1, 3, 2, true, 0}, 32); }
TEST_P(MlaWgmmaEmulated, AttentionSeventeenBatch2Full) { attention(mod(), hdim(), {2, 17, 2, false, 0}, 33); }
TEST_P(MlaWgmmaEmulated, Attention200Causal) { attention(mod(), hdim(), {1, 200, 1, true, 0}, 34); }
TEST_P(MlaWgmmaEmulated, Attention200Full) { attention(mod(), hdim(), {1, 200, 1, false, 0}, 35); }
TEST_P(MlaWgmmaEmulated, AttentionUnalignedBuffers) { attention(mod(), hdim(), {1, 70, 1, true, 1}, 36); }
// 6 key tiles: the ring (4 stages at D 320, 2 at D 576) wraps, and the last
// query tiles of the causal case wait on tiles loaded in the ring's second round.
TEST_P(MlaWgmmaEmulated, Attention333RingWrapsCausal) { attention(mod(), hdim(), {1, 333, 1, true, 0}, 37); }
TEST_P(MlaWgmmaEmulated, Attention333RingWrapsFull) { attention(mod(), hdim(), {1, 333, 1, false, 1}, 38); }

struct Gemm {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // strides g*k_g + a_pad, g*n_g + c_pad
    size_t lead;
};

void gemm(const kl_module *mod, const Gemm &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                      << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " lead " << c.lead);
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_wgmma_get(&k, mod));
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    const std::vector<uint16_t> ah = emu_test::random_bf16((size_t)c.m * a_stride, seed, 1.0f),
                                bh = emu_test::random_bf16((size_t)c.g * c.n_g * c.k_g, seed + 1, 1.0f);
    auto a = input(ah, "a", c.lead), b = input(bh, "b", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.m * c_stride, Access::kWrite, "c", 8, c.lead);
    KL_EMU_ASSERT_OK(kl_grouped_gemm_wgmma(&k, a->data(), b->data(), out.data(), c.m, c.g, c.k_g, c.n_g, a_stride,
                                           c_stride, nullptr));
    const std::vector<double> dense = mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride);
    const size_t w = (size_t)c.g * c.n_g;
    size_t outside = 0;
    for (size_t i = 0; i < c.m; ++i)
        for (size_t j = w; j < c_stride; ++j) outside += out[i * c_stride + j].bits != 0xFFFF;
    EXPECT_EQ(0u, outside) << "columns of C outside the groups were written";
    EXPECT_TRUE(emu_test::close(
        "C", [&](size_t i) { return emu_test::bf16(out[(i / w) * c_stride + i % w].bits); }, dense, 1e-2, 1e-2, 1e-2,
        [&](size_t i) {
            std::ostringstream s;
            s << "[row " << i / w << ", group " << i % w / c.n_g << ", col " << i % w % c.n_g << "]";
            return s.str();
        }));
    EXPECT_TRUE(out.guards_intact());
}

TEST_P(MlaWgmmaEmulated, GemmOneTile) { gemm(mod(), {1, 1, 8, 8, 0, 0, 0}, 41); }
TEST_P(MlaWgmmaEmulated, GemmAbsorptionShapeOneGroup) { gemm(mod(), {128, 1, 128, 128, 0, 0, 0}, 42); }
TEST_P(MlaWgmmaEmulated, GemmKPastTheStagesRaggedEdges) { gemm(mod(), {130, 2, 200, 72, 8, 16, 0}, 43); }
TEST_P(MlaWgmmaEmulated, GemmOddSizesUnaligned) { gemm(mod(), {37, 3, 13, 19, 1, 3, 1}, 44); }
// 9 m tiles: blocks of 4, 4 and 1 tiles, each k step 64 of 200 (4 stages a
// tile, so the 4-stage ring wraps inside and across tiles), 2 ragged n tiles.
TEST_P(MlaWgmmaEmulated, GemmSeveralTilesPerBlockRingWraps) { gemm(mod(), {1100, 2, 200, 136, 0, 8, 0}, 45); }

INSTANTIATE_TEST_SUITE_P(Variants, MlaWgmmaEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

}  // namespace
