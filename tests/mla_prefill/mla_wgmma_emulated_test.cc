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
#include "tests/mla_prefill/mla_tensor_core_emulated.h"

namespace {

class MlaWgmmaEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
};

void attention(const kl_module *mod, uint32_t D, const mla_tc_emu::AttnCase &c, uint32_t seed) {
    mla_tc_emu::run_attention("mla_absorbed_attention_wgmma", kl_mla_absorbed_attention_wgmma_get, kl_mla_absorbed_attention_wgmma, mod, D, c, seed);
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

void gemm(const kl_module *mod, const mla_tc_emu::GemmCase &c, uint32_t seed) {
    mla_tc_emu::run_gemm("grouped_gemm_wgmma", kl_grouped_gemm_wgmma_get, kl_grouped_gemm_wgmma, mod, c, seed);
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
