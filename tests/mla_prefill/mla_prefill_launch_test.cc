// Each MLA prefill launcher launches exactly as the seed's Rust launcher does:
// the kernel entry, grid and block (div_ceil included), no shared memory, the
// caller's stream, and the parameter buffer of the seed's arg_* chain.
#include "tests/mla_prefill/mla_prefill_launchers.h"

namespace kltest {
namespace {

class MlaPrefillLaunch : public ::testing::Test {
  protected:
    RecordHarness h;
    const kl_module *deepseek = h.Load(MlaPrefillModuleText("deepseek_v4_flash"));
    const kl_module *mistral = h.Load(MlaPrefillModuleText("mistral_small_4"));

    template <class L>
    void ExpectInBothVariants(const L &a) {
        {
            SCOPED_TRACE("deepseek_v4_flash");
            ExpectLaunchesAsSeed(h, deepseek, a);
        }
        {
            SCOPED_TRACE("mistral_small_4");
            ExpectLaunchesAsSeed(h, mistral, a);
        }
    }
    // Grid of one launch of `a` (0s when it did not record).
    template <class L>
    Dim3 GridOf(const L &a) {
        kl_kernel k;
        EXPECT_EQ(KL_SUCCESS, L::Get(&k, deepseek));
        h.Clear();
        EXPECT_EQ(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
        if (h.count() != 1) return {0, 0, 0};
        return {h.record(0).grid[0], h.record(0).grid[1], h.record(0).grid[2]};
    }
};

using MlaQRopeExtractBatched = MlaPrefillLaunch;
using MlaQRopeWritebackBatched = MlaPrefillLaunch;
using MlaKvAssembleBatched = MlaPrefillLaunch;
using MlaCacheAssembleBatched = MlaPrefillLaunch;
using MlaFusedPrefill = MlaPrefillLaunch;
using MlaQFinalAssembleBatched = MlaPrefillLaunch;
using GroupedGemmMla = MlaPrefillLaunch;
using MlaPrefillAttention320 = MlaPrefillLaunch;

TEST_F(MlaQRopeExtractBatched, PacksArgumentsInSeedOrder) {
    QRopeExtract a;
    EXPECT_EQ(8u, a.SeedGrid().x); // ceil(37*5*11 / 256) = ceil(2035 / 256)
    ExpectInBothVariants(a);
}

TEST_F(MlaQRopeExtractBatched, RoundsGridUpToWholeBlocksOf256) {
    QRopeExtract a;
    a.nq = 1;
    a.rope = 1;
    a.nope = 17; // hd 18 = nope + rope
    const uint32_t tokens[] = {1, 255, 256, 257, 512, 513};
    const uint64_t blocks[] = {1, 1, 1, 2, 2, 3};
    for (int i = 0; i < 6; i++) {
        a.num_tokens = tokens[i];
        Dim3 g = GridOf(a);
        EXPECT_EQ(blocks[i], g.x) << "num_tokens*nq*rope = " << tokens[i];
        EXPECT_EQ(1u, g.y);
        EXPECT_EQ(1u, g.z);
    }
}

// The seed multiplies in u32; 65536*256*256 = 2^32 would wrap there. The
// launcher evaluates in 64 bits (docs/DESIGN.md) and launches 2^24 blocks.
TEST_F(MlaQRopeExtractBatched, ComputesGridInSixtyFourBits) {
    QRopeExtract a;
    a.num_tokens = 65536;
    a.nq = 256;
    a.rope = 256;
    a.nope = 0;
    a.hd = 256;
    a.q_dim = 65536;
    EXPECT_EQ(16777216u, GridOf(a).x);
}

TEST_F(MlaQRopeWritebackBatched, PacksArgumentsInSeedOrder) {
    QRopeWriteback a;
    EXPECT_EQ(7u, a.SeedGrid().x); // ceil(41*3*13 / 256) = ceil(1599 / 256)
    ExpectInBothVariants(a);
}

TEST_F(MlaQRopeWritebackBatched, RoundsGridUpToWholeBlocksOf256) {
    QRopeWriteback a;
    a.nq = 2;
    a.rope = 128;
    a.nope = 64;
    a.hd = 192;
    a.q_dim = 384;
    const uint32_t tokens[] = {1, 2, 3};
    const uint64_t blocks[] = {1, 2, 3}; // 256 elements per token exactly
    for (int i = 0; i < 3; i++) {
        a.num_tokens = tokens[i];
        EXPECT_EQ(blocks[i], GridOf(a).x) << "num_tokens " << tokens[i];
    }
}

TEST_F(MlaKvAssembleBatched, PacksArgumentsInSeedOrderWithoutNumTokens) {
    KvAssemble a;
    EXPECT_EQ(4u * 8 + 6 * 4, a.SeedArgs().size());
    ExpectInBothVariants(a);
}

TEST_F(MlaKvAssembleBatched, LaunchesOneBlockRowPerTokenAndTwoRows) {
    KvAssemble a;
    a.num_tokens = 1000003;
    Dim3 g = GridOf(a);
    EXPECT_EQ(1000003u, g.x);
    EXPECT_EQ(2u, g.y);
    EXPECT_EQ(1u, g.z);
}

TEST_F(MlaCacheAssembleBatched, PacksArgumentsInSeedOrderWithoutNumTokens) {
    CacheAssemble a;
    EXPECT_EQ(4u * 8 + 3 * 4, a.SeedArgs().size());
    EXPECT_EQ(256u, a.SeedBlock().x); // max(28, 256)
    ExpectInBothVariants(a);
}

// The seed's block is mla_cache_dim.max(256): 256 threads up to 256, then one
// per cache element (deepseek_v4_flash's 576).
TEST_F(MlaCacheAssembleBatched, WidensBlockToMlaCacheDimAbove256) {
    const uint32_t lora[] = {192, 255, 256, 512, 960};
    const uint32_t dims[] = {256, 319, 320, 576, 1024};
    const uint64_t threads[] = {256, 319, 320, 576, 1024};
    for (int i = 0; i < 5; i++) {
        SCOPED_TRACE(dims[i]);
        CacheAssemble a;
        a.kv_lora = lora[i];
        a.rope = 64;
        a.mla_cache_dim = dims[i];
        EXPECT_EQ(threads[i], a.SeedBlock().x);
        ExpectLaunchesAsSeed(h, deepseek, a);
    }
    CacheAssemble small;
    small.kv_lora = 1;
    small.rope = 2;
    small.mla_cache_dim = 3;
    EXPECT_EQ(256u, small.SeedBlock().x);
    ExpectLaunchesAsSeed(h, deepseek, small);
}

TEST_F(MlaFusedPrefill, PacksArgumentsInSeedOrder) {
    FusedPrefill a;
    EXPECT_EQ(9u * 8 + 9 * 4, a.SeedArgs().size());
    ExpectInBothVariants(a);
}

TEST_F(MlaFusedPrefill, LaunchesOneBlockPerHeadAndQueryToken) {
    FusedPrefill a;
    a.nq = 128;
    a.seq_len = 65535;
    Dim3 g = GridOf(a);
    EXPECT_EQ(128u, g.x);
    EXPECT_EQ(65535u, g.y);
    EXPECT_EQ(1u, g.z);
}

TEST_F(MlaQFinalAssembleBatched, PacksArgumentsInSeedOrder) {
    QFinalAssemble a;
    EXPECT_EQ(2u, a.SeedGrid().x); // ceil(3*5*28 / 256) = ceil(420 / 256)
    ExpectInBothVariants(a);
}

TEST_F(MlaQFinalAssembleBatched, RoundsGridUpToWholeBlocksOf256) {
    QFinalAssemble a;
    a.nq = 1;
    a.kv_lora = 256;
    a.rope = 64;
    a.mla_cache_dim = 320;
    const uint32_t tokens[] = {1, 4, 5, 7};
    const uint64_t blocks[] = {2, 5, 7, 9}; // ceil(320 t / 256)
    for (int i = 0; i < 4; i++) {
        a.num_tokens = tokens[i];
        EXPECT_EQ(blocks[i], GridOf(a).x) << "num_tokens " << tokens[i];
    }
}

TEST_F(GroupedGemmMla, PacksArgumentsInSeedOrder) {
    GroupedGemm a;
    Dim3 g = a.SeedGrid();
    EXPECT_EQ(15u, g.x); // m * g
    EXPECT_EQ(3u, g.y);  // ceil(11 / 4)
    ExpectInBothVariants(a);
}

TEST_F(GroupedGemmMla, RoundsGridYUpToGroupsOfFourOutputs) {
    GroupedGemm a;
    a.g = 1;
    a.a_stride = 7;
    a.c_stride = 4096;
    const uint32_t n[] = {1, 4, 5, 8, 9, 4093};
    const uint64_t y[] = {1, 1, 2, 2, 3, 1024};
    for (int i = 0; i < 6; i++) {
        a.n_g = n[i];
        Dim3 grid = GridOf(a);
        EXPECT_EQ(y[i], grid.y) << "n_g " << n[i];
        EXPECT_EQ(3u, grid.x) << "m * g";
    }
}

TEST_F(MlaPrefillAttention320, PacksArgumentsInSeedOrderCausal) {
    PrefillAttention a;
    a.causal = true;
    Dim3 g = a.SeedGrid();
    EXPECT_EQ(14u, g.x);
    EXPECT_EQ(3u, g.y); // ceil(37 / 16)
    EXPECT_EQ(5u, g.z); // batch
    ExpectLaunchesAsSeed(h, deepseek, a);
    EXPECT_EQ(1u, h.record(0).args[4 * 8 + 5 * 4]) << "causal is a u32 1";
}

TEST_F(MlaPrefillAttention320, PacksCausalFalseAsZero) {
    PrefillAttention a;
    a.causal = false;
    ExpectLaunchesAsSeed(h, deepseek, a);
}

// Both forks keep the entry name mla_prefill_attn_320; the head dim is the
// variant's (320 for mistral_small_4, 576 for deepseek_v4_flash).
TEST_F(MlaPrefillAttention320, LaunchesEntryMlaPrefillAttn320InBothVariants) {
    PrefillAttention a;
    a.head_dim = 320;
    {
        SCOPED_TRACE("mistral_small_4, head_dim 320");
        ExpectLaunchesAsSeed(h, mistral, a);
    }
    a.head_dim = 576;
    a.causal = false;
    {
        SCOPED_TRACE("deepseek_v4_flash, head_dim 576");
        ExpectLaunchesAsSeed(h, deepseek, a);
    }
}

TEST_F(MlaPrefillAttention320, RoundsGridYUpToRowTilesOf16) {
    PrefillAttention a;
    const uint32_t seq[] = {1, 15, 16, 17, 32, 33, 1048560};
    const uint64_t y[] = {1, 1, 1, 2, 2, 3, 65535};
    for (int i = 0; i < 7; i++) {
        a.seq_len = seq[i];
        Dim3 g = GridOf(a);
        EXPECT_EQ(y[i], g.y) << "seq_len " << seq[i];
        EXPECT_EQ(14u, g.x);
        EXPECT_EQ(5u, g.z);
    }
}

// Launches go to the caller's stream, including the null (default) stream.
TEST_F(MlaPrefillLaunch, PassesTheNullStreamThrough) {
    GroupedGemm a;
    kl_kernel k;
    KL_ASSERT_STATUS(KL_SUCCESS, GroupedGemm::Get(&k, deepseek));
    h.Clear();
    KL_ASSERT_STATUS(KL_SUCCESS, a.Launch(&k, nullptr));
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(nullptr, h.record(0).stream);
}

// Each launch is its own record, in call order.
TEST_F(MlaPrefillLaunch, RecordsSuccessiveLaunchesInOrder) {
    QRopeExtract e;
    QRopeWriteback w;
    kl_kernel ke, kw;
    KL_ASSERT_STATUS(KL_SUCCESS, QRopeExtract::Get(&ke, deepseek));
    KL_ASSERT_STATUS(KL_SUCCESS, QRopeWriteback::Get(&kw, deepseek));
    h.Clear();
    KL_ASSERT_STATUS(KL_SUCCESS, e.Launch(&ke, FakeStream()));
    KL_ASSERT_STATUS(KL_SUCCESS, w.Launch(&kw, FakeStream()));
    ASSERT_EQ(2u, h.count());
    EXPECT_STREQ("mla_q_rope_extract_batched", h.record(0).entry);
    EXPECT_STREQ("mla_q_rope_writeback_batched", h.record(1).entry);
}

} // namespace
} // namespace kltest
