// The copy-engine launchers of issue 20, kl_mla_absorbed_attention_tma and
// kl_grouped_gemm_tma, from their own source on the CPU emulator (the bulk
// tensor copies and mbarrier transactions of tests/emu/sm90_tma.cc, wgmma
// with A from shared memory or from registers of tests/emu/sm90_wgmma.cc),
// through the generated launchers and the generated tensor-map builders on
// the emulated backend, both variants, against the float64 references of the
// GPU tests. Outputs start poisoned with guard elements around them.
//
// The persistent grids get fewer blocks than tiles (num_ctas 1, 2, 3, 5), so
// a block runs several work tiles: its ring of key tiles (or of A/B stages)
// wraps across them, Q is reloaded once both consumers release it, and a
// grouped GEMM's C staging buffers and their tensor stores alternate. Shapes:
// sequence lengths 1, 3, 17, 130, 200, 333 (odd key-tile counts, which the
// D 576 kernel pads with a masked tile; ragged last tiles, rows past seq_len
// in a 128-row D 320 tile), causal and not, batch 2, 3 heads, an output off a
// 4-byte boundary; GEMMs with ragged m, n_g and k_g edges (the engine's zero
// fill and clipped stores), k_g past the 4 stages, several groups.
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
#include "tests/mla_prefill/mla_tensor_core_emulated.h"

namespace {

class MlaCopyEngineEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
};

using mla_tc_emu::input;

// ---- kl_mla_absorbed_attention_tma ----

struct AttnCase {
    uint32_t batch, seq, heads;
    bool causal;
    uint32_t num_ctas;
    size_t out_lead;  // output elements off its 16-byte boundary
};

void attention(const kl_module *mod, uint32_t D, const AttnCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "D " << D << " batch " << c.batch << " seq " << c.seq << " heads " << c.heads
                                      << (c.causal ? " causal" : " full") << " num_ctas " << c.num_ctas
                                      << " out_lead " << c.out_lead);
    const uint32_t DV = D - 64;
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_tma_get(&k, mod));
    const size_t nq = (size_t)c.batch * c.seq * c.heads * D, nkv = (size_t)c.batch * c.seq * D;
    const std::vector<uint16_t> qh = emu_test::random_bf16(nq, seed, 1.0f), kvh = emu_test::random_bf16(nkv, seed + 1, 1.0f);
    auto q = input(qh, "q", 0), kv = input(kvh, "kv", 0);
    emu::Buffer<kl_bf16> out((size_t)c.batch * c.seq * c.heads * DV, emu::Access::kWrite, "output", 8, c.out_lead);
    kl_tensor_map qm, km;
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_tma_q_map_encode(&k, &qm, q->data(), D, c.heads, c.seq, c.batch, D,
                                                                (uint64_t)c.heads * D, (uint64_t)c.seq * c.heads * D));
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_tma_kv_map_encode(&k, &km, kv->data(), D, c.seq, c.batch, D,
                                                                 (uint64_t)c.seq * D));
    const float scale = 1.0f / std::sqrt((float)D);
    KL_EMU_ASSERT_OK(kl_mla_absorbed_attention_tma(&k, &qm, &km, out.data(), c.seq, c.batch, c.heads, D, DV, scale,
                                                   c.causal, c.num_ctas, nullptr));
    mla_tc_emu::expect_attention(
        out, mla_fast_ref::absorbed_attention(qh, kvh, c.batch, c.seq, c.heads, D, DV, scale, c.causal), c.seq,
        c.heads, DV);
    // The extent is tight: every output row is written (q and kv are reached
    // only through their tensor maps, which bound them).
    EXPECT_TRUE(emu_test::extents_reached("mla_absorbed_attention_tma"));
}

TEST_P(MlaCopyEngineEmulated, AttentionOneToken) { attention(mod(), hdim(), {1, 1, 1, true, 4, 0}, 51); }
TEST_P(MlaCopyEngineEmulated, AttentionThreeTokensCausal) { attention(mod(), hdim(), {1, 3, 2, true, 1, 0}, 52); }
// 4 work tiles on one block: Q reloaded, the ring running across them.
TEST_P(MlaCopyEngineEmulated, AttentionSeventeenBatch2OneBlock) { attention(mod(), hdim(), {2, 17, 2, false, 1, 0}, 53); }
TEST_P(MlaCopyEngineEmulated, Attention200CausalTwoBlocks) { attention(mod(), hdim(), {1, 200, 1, true, 2, 0}, 54); }
TEST_P(MlaCopyEngineEmulated, Attention200Full) { attention(mod(), hdim(), {1, 200, 1, false, 8, 0}, 55); }
// 6 key tiles: the ring wraps (and at D 576 the pairs' buffers turn over 3
// times); the output off a 4-byte boundary (2-byte stores).
TEST_P(MlaCopyEngineEmulated, Attention333RingWrapsCausal) { attention(mod(), hdim(), {1, 333, 1, true, 3, 1}, 56); }
TEST_P(MlaCopyEngineEmulated, Attention333RingWrapsFull) { attention(mod(), hdim(), {1, 333, 1, false, 1, 0}, 57); }
// Ragged everywhere: 3 key tiles (odd), heads and batches interleaved over 5 blocks.
TEST_P(MlaCopyEngineEmulated, Attention130CausalHeadsAndBatches) {
    attention(mod(), hdim(), {2, 130, 3, true, 5, 0}, 58);
}

// ---- kl_grouped_gemm_tma ----

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // strides g*k_g + a_pad, g*n_g + c_pad (multiples of 8)
    uint32_t num_ctas;
};

// ext, if given, takes the launch's reach of its declared extents.
void gemm(const kl_module *mod, const GemmCase &c, uint32_t seed, emu_test::ExtentsReached *ext = nullptr) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                      << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " num_ctas " << c.num_ctas);
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_tma_get(&k, mod));
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    const std::vector<uint16_t> ah = emu_test::random_bf16((size_t)c.m * a_stride, seed, 1.0f),
                                bh = emu_test::random_bf16((size_t)c.g * c.n_g * c.k_g, seed + 1, 1.0f);
    auto a = input(ah, "a", 0), b = input(bh, "b", 0);
    emu::Buffer<kl_bf16> out((size_t)c.m * c_stride, emu::Access::kWrite, "c");
    kl_tensor_map am, bm, cm;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_tma_a_map_encode(&k, &am, a->data(), c.k_g, c.g, c.m, c.k_g, a_stride));
    KL_EMU_ASSERT_OK(kl_grouped_gemm_tma_b_map_encode(&k, &bm, b->data(), c.k_g, c.n_g, c.g, c.k_g,
                                                      (uint64_t)c.n_g * c.k_g));
    KL_EMU_ASSERT_OK(kl_grouped_gemm_tma_c_map_encode(&k, &cm, out.data(), c.n_g, c.g, c.m, c.n_g, c_stride));
    // The pacing counters: zero before the launch, and again after it (the
    // launch's last producer resets them; the emulator's blocks run one
    // after another, so every pacing wait gives up at once).
    emu::Buffer<uint32_t> cnt(2, emu::Access::kReadWrite, "counters");
    cnt.data()[0] = cnt.data()[1] = 0u;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_tma(&k, &am, &bm, &cm, c.m, c.g, c.k_g, c.n_g, cnt.data(), c.num_ctas, 2, nullptr));
    if (ext != nullptr) EXPECT_TRUE(ext->add());
    EXPECT_EQ(0u, cnt.data()[0]) << "begun units, after the launch";
    EXPECT_EQ(0u, cnt.data()[1]) << "finished producers, after the launch";
    mla_tc_emu::expect_gemm(out, mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride), c.m, c.g, c.n_g,
                            c_stride);
}

// One tile, 8 x 8 of it inside the tensors: zero-filled loads, clipped stores.
TEST_P(MlaCopyEngineEmulated, GemmOneSmallTile) { gemm(mod(), {1, 1, 8, 8, 0, 0, 1}, 61); }
TEST_P(MlaCopyEngineEmulated, GemmAbsorptionShapeOneGroup) { gemm(mod(), {128, 1, 128, 128, 0, 0, 1}, 62); }
// k_g 200: 4 k-steps past a 4-stage ring's first round; n_g 72 of a 128-wide
// tile (the second C box is skipped), m 130 (a second m tile of 2 rows: its
// second consumer's rows are all past m), padded strides, 4 tiles on 3 blocks.
TEST_P(MlaCopyEngineEmulated, GemmKPastTheStagesRaggedEdges) { gemm(mod(), {130, 2, 200, 72, 8, 16, 3}, 63); }
// 18 tiles on 2 blocks: the ring wraps across tiles, each consumer's staging
// buffer is reused 9 times; n_g 136 (a second n tile of 8 columns).
TEST_P(MlaCopyEngineEmulated, GemmManyTilesPerBlock) { gemm(mod(), {300, 3, 40, 136, 0, 8, 2}, 64); }
// The o_lat @ w_uv^T shape in small: 8 k-steps a tile, 2 tiles on one block.
// It is also a paced shape (held B: n_g <= 128 < k_g <= 512, its 2 tiles
// one equal run a block), so the producer counts its units on counters[0]
// and its end on counters[1]: the counters' extent (2) is tight (A, B and C
// are reached only through their tensor maps). An unpaced shape touches no
// counter.
TEST_P(MlaCopyEngineEmulated, GemmLongK) {
    emu_test::ExtentsReached ext("grouped_gemm_tma");
    gemm(mod(), {64, 2, 512, 128, 0, 0, 1}, 65, &ext);
    EXPECT_TRUE(ext.all());
}

// 18 groups: the tile order's first chunk of 16 groups and a short chunk of
// 2 (tile_at), 2 m tiles and 2 n tiles each (n_g 136), 72 tiles on 5 blocks:
// every (n tile, group, m tile) exactly once, none twice.
TEST_P(MlaCopyEngineEmulated, GemmGroupsPastOneChunkOfTheTileOrder) { gemm(mod(), {130, 18, 16, 136, 0, 8, 5}, 66); }

// Long k (8 k-steps a tile, past the 6-stage ring) and several tiles a
// block: the ring wraps inside every tile (see mla_copy_engine_test's
// GemmManyTilesABlockWithMoreKStepsThanTheRing, the H200 regression). n_g
// 136 (two n tiles) keeps it on the ring; n_g 72 takes the held-B path.
TEST_P(MlaCopyEngineEmulated, GemmManyTilesABlockWithMoreKStepsThanTheRing) {
    gemm(mod(), {300, 2, 456, 136, 8, 8, 2}, 67);
    gemm(mod(), {300, 2, 456, 72, 8, 8, 2}, 70);
}

// The held A and B path (k_g <= 128, 128 < n_g <= 512: a block's
// contiguous run of tiles in group, m tile, n tile order; one A tile held
// for a row strip's n tiles, one B slot per n tile holding the group's B
// across its m tiles; nothing streams). k_g 128 (two held k-steps), n_g 392
// (4 n tiles, the last of 8 columns), m 200 (a ragged second m tile): 24
// tiles on 5 blocks, so runs begin and end inside strips and groups, and a
// strip's A and a group's B are loaded by two blocks.
TEST_P(MlaCopyEngineEmulated, GemmHeldABStripsSplitBetweenBlocks) { gemm(mod(), {200, 3, 128, 392, 8, 8, 5}, 68); }
// 60 tiles on 2 blocks: 10 strips a block (both A buffers refilled 5 times),
// the B slots refilled at each of a run's groups, k_g 72 (the second k-step
// zero-filled past 72), padded strides.
TEST_P(MlaCopyEngineEmulated, GemmHeldABManyStripsABlock) { gemm(mod(), {520, 4, 72, 264, 8, 16, 2}, 69); }
// One block over 257 groups (m 1, n_g 136: 2 tiles a group, 514 on the
// block): each B slot is filled 257 times, past the 255 that the fill
// counts' bytes once held before carrying into the next slot's.
TEST_P(MlaCopyEngineEmulated, GemmHeldABOneBlockFillsASlotMoreThan255Times) {
    gemm(mod(), {1, 257, 8, 136, 0, 0, 1}, 73);
}
// k_g <= 128 past 4 n tiles (n_g 648: 6, the last of 8 columns) takes the
// ring: 2 groups, 2 m tiles, 24 tiles on 3 blocks.
TEST_P(MlaCopyEngineEmulated, GemmShortKWideNTakesTheRing) { gemm(mod(), {130, 2, 64, 648, 0, 8, 3}, 72); }

// The held-B path (n_g <= 128, 128 < k_g <= 512: a block's contiguous run
// of tiles, each group's m tiles in order, one B tile held for them while
// 4 A stages stream). k_g 328 (6 k-steps, the last zero-filled past 328),
// n_g 120, m 260 (3 m tiles, the last of 4 rows), 5 groups: 15 tiles on 3
// blocks, so each block reloads B inside its run and groups are split
// between blocks.
TEST_P(MlaCopyEngineEmulated, GemmHeldBStripsSplitBetweenBlocks) { gemm(mod(), {260, 5, 328, 120, 8, 8, 3}, 71); }

INSTANTIATE_TEST_SUITE_P(Variants, MlaCopyEngineEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

}  // namespace
