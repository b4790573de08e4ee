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
#include "tests/mla_prefill/mla_tensor_core_emulated.h"

namespace {

using mla_tc_emu::AttnCase;
using mla_tc_emu::GemmCase;

class MlaMmaEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
};

// ---- absorbed attention --------------------------------------------------------

void run_attention(const kl_module *mod, uint32_t D, const AttnCase &c, uint32_t seed) {
    mla_tc_emu::run_attention("mla_absorbed_attention_mma", kl_mla_absorbed_attention_mma_get, kl_mla_absorbed_attention_mma, mod, D, c, seed);
}

TEST_P(MlaMmaEmulated, AttentionOneToken) { run_attention(mod(), hdim(), {1, 1, 1, true, 0}, 11); }
TEST_P(MlaMmaEmulated, AttentionThreeTokensTwoHeadsCausal) { run_attention(mod(), hdim(), {1, 3, 2, true, 0}, 12); }
TEST_P(MlaMmaEmulated, AttentionThreeTokensTwoHeadsFull) { run_attention(mod(), hdim(), {1, 3, 2, false, 0}, 13); }
TEST_P(MlaMmaEmulated, AttentionSeventeenThreeHeadsBatch2Full) { run_attention(mod(), hdim(), {2, 17, 3, false, 0}, 14); }
TEST_P(MlaMmaEmulated, AttentionTwoQueryTilesCausal) { run_attention(mod(), hdim(), {1, 70, 1, true, 0}, 15); }
TEST_P(MlaMmaEmulated, AttentionTwoQueryTilesFull) { run_attention(mod(), hdim(), {1, 70, 1, false, 0}, 16); }
TEST_P(MlaMmaEmulated, AttentionUnalignedBuffers) { run_attention(mod(), hdim(), {1, 5, 2, true, 1}, 17); }

// ---- grouped GEMM --------------------------------------------------------------

void run_gemm(const kl_module *mod, const GemmCase &c, uint32_t seed) {
    mla_tc_emu::run_gemm("grouped_gemm_mma", kl_grouped_gemm_mma_get, kl_grouped_gemm_mma, mod, c, seed);
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
