// Each paged decode launcher launches exactly as the seed's Rust launcher
// does: the kernel entry, grid (num_q_heads or, GQA-packed, num_kv_heads by
// num_seqs) and block, no shared memory, the caller's stream, and the
// parameter buffer of the seed's arg_* chain (num_seqs left out; fp8's u64
// cache_stride at an 8-byte boundary).
#include "tests/paged_decode/paged_decode_launchers.h"

namespace kltest {
namespace {

class PagedDecodeLaunch : public ::testing::Test {
  protected:
    RecordHarness h;
    const kl_module *gqa4 = h.Load(PagedDecodeModuleText("gqa4_d128"));
    const kl_module *gqa8 = h.Load(PagedDecodeModuleText("gqa8_d128"));

    template <class L>
    void ExpectInBothVariants(const L &a) {
        {
            SCOPED_TRACE("gqa4_d128");
            ExpectLaunchesAsSeed(h, gqa4, a);
        }
        {
            SCOPED_TRACE("gqa8_d128");
            ExpectLaunchesAsSeed(h, gqa8, a);
        }
    }
};

using PagedDecodeAttnBf16 = PagedDecodeLaunch;
using PagedDecodeAttnFp8 = PagedDecodeLaunch;
using PagedDecodeAttnBf16Gqa = PagedDecodeLaunch;
using PagedDecodeAttnFp8Gqa = PagedDecodeLaunch;

TEST_F(PagedDecodeAttnBf16, PacksArgumentsInSeedOrder) {
    DecodeBf16 a;
    EXPECT_EQ(6u * 8 + 8 * 4, a.SeedArgs().size());
    Dim3 g = a.SeedGrid();
    EXPECT_EQ(14u, g.x); // num_q_heads
    EXPECT_EQ(5u, g.y);  // num_seqs
    ExpectInBothVariants(a);
}

TEST_F(PagedDecodeAttnBf16, PacksSlidingWindowZeroAsWholeSequence) {
    DecodeBf16 a;
    a.sliding_window = 0;
    ExpectLaunchesAsSeed(h, gqa8, a);
}

// The seed's fp8 buffer: 6 pointers (48 bytes), 9 four-byte values (to 84),
// 4 bytes of padding, cache_stride at 88, sliding_window at 96: 100 bytes.
TEST_F(PagedDecodeAttnFp8, PacksArgumentsInSeedOrder) {
    DecodeFp8 a;
    EXPECT_EQ(100u, a.SeedArgs().size());
    ExpectInBothVariants(a);
}

TEST_F(PagedDecodeAttnFp8, AlignsCacheStrideToEightBytes) {
    DecodeFp8 a;
    ExpectLaunchesAsSeed(h, gqa4, a);
    ASSERT_EQ(1u, h.count());
    uint64_t stride;
    std::memcpy(&stride, h.record(0).args + 88, 8);
    EXPECT_EQ(0x123456789ull, stride);
    uint32_t window;
    std::memcpy(&window, h.record(0).args + 96, 4);
    EXPECT_EQ(13u, window);
}

TEST_F(PagedDecodeAttnBf16Gqa, PacksArgumentsInSeedOrder) {
    DecodeBf16Gqa a; // 16 query heads = 2 KV heads * 8
    Dim3 g = a.SeedGrid();
    EXPECT_EQ(2u, g.x); // num_kv_heads
    EXPECT_EQ(5u, g.y);
    ExpectLaunchesAsSeed(h, gqa8, a);
}

TEST_F(PagedDecodeAttnBf16Gqa, LaunchesOneBlockPerKvHeadInTheGqa4Variant) {
    DecodeBf16Gqa a;
    a.num_q_heads = 12; // 3 KV heads * 4
    a.num_kv_heads = 3;
    a.max_blocks_per_seq = 17;
    ExpectLaunchesAsSeed(h, gqa4, a);
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(3u, h.record(0).grid[0]);
}

TEST_F(PagedDecodeAttnFp8Gqa, PacksArgumentsInSeedOrder) {
    DecodeFp8Gqa a;
    EXPECT_EQ(100u, a.SeedArgs().size());
    EXPECT_EQ(2u, a.SeedGrid().x);
    ExpectLaunchesAsSeed(h, gqa8, a);
}

TEST_F(PagedDecodeAttnFp8Gqa, LaunchesOneBlockPerKvHeadInTheGqa4Variant) {
    DecodeFp8Gqa a;
    a.num_q_heads = 28; // 7 KV heads * 4
    a.num_kv_heads = 7;
    a.q_stride = 3593; // >= 28 * 128
    ExpectLaunchesAsSeed(h, gqa4, a);
}

// The plain and the packed kernel take the same arguments; only the entry and
// the grid's x extent differ.
TEST_F(PagedDecodeLaunch, PackedAndPlainBf16DifferOnlyInEntryAndGridX) {
    DecodeBf16 plain;
    DecodeBf16Gqa packed;
    plain.num_q_heads = packed.num_q_heads;
    plain.num_kv_heads = packed.num_kv_heads;
    plain.head_dim = packed.head_dim;
    plain.q_stride = packed.q_stride;
    kl_kernel kp, kg;
    KL_ASSERT_STATUS(KL_SUCCESS, DecodeBf16::Get(&kp, gqa8));
    KL_ASSERT_STATUS(KL_SUCCESS, DecodeBf16Gqa::Get(&kg, gqa8));
    h.Clear();
    KL_ASSERT_STATUS(KL_SUCCESS, plain.Launch(&kp, FakeStream()));
    KL_ASSERT_STATUS(KL_SUCCESS, packed.Launch(&kg, FakeStream()));
    ASSERT_EQ(2u, h.count());
    const kl_record &p = h.record(0), &g = h.record(1);
    EXPECT_STREQ("paged_decode_attn_bf16", p.entry);
    EXPECT_STREQ("paged_decode_attn_bf16_gqa", g.entry);
    EXPECT_EQ(16u, p.grid[0]);
    EXPECT_EQ(2u, g.grid[0]);
    EXPECT_EQ(p.grid[1], g.grid[1]);
    ASSERT_EQ(p.arg_bytes, g.arg_bytes);
    EXPECT_EQ(0, std::memcmp(p.args, g.args, p.arg_bytes));
}

} // namespace
} // namespace kltest
