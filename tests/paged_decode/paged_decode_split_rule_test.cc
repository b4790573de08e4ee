// CPU tests of the split-KV helpers in klaunch/paged_decode_split.h that
// need no kernel: kl_paged_decode_num_splits (the rule that chooses
// num_splits), kl_paged_decode_split_workspace_bytes, and the persistent
// launchers' kl_paged_decode_persist_ctas / _workspace_bytes /
// _counter_words.
//
// Expected values are worked out by hand from the rule as the header states
// it (window, cap, base = num_seqs * heads, the fraction
// B / (ceil_div(B, sm) * sm) of multiprocessor time a grid of B equal blocks
// keeps busy, the smallest S0 reaching 0.9 grown to the most splits in
// S0's waves, min(cap, waves * sm / base), else the best), with the
// arithmetic written next to each case; a sweep compares the function with
// a brute-force reading of the same rule in floating point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "klaunch/paged_decode_split.h"

namespace {

constexpr uint32_t kH200 = 132;  // multiprocessors of an H200 (SXM)

TEST(PagedDecodeNumSplits, KeepsTheSeedGridWhenItFillsTheGpu) {
    // 32 x 8 = 256 blocks on 132: 2 waves, 256 / 264 = 0.97 busy.
    EXPECT_EQ(kl_paged_decode_num_splits(32, 8, 4096, 0, 16, kH200), 1u);
    // 64 x 8 = 512 blocks: 4 waves, 512 / 528 = 0.97.
    EXPECT_EQ(kl_paged_decode_num_splits(64, 8, 32768, 0, 16, kH200), 1u);
    // 132 blocks: exactly one full wave.
    EXPECT_EQ(kl_paged_decode_num_splits(33, 4, 32768, 0, 16, kH200), 1u);
    // base >= 9 * sm_count: less than one idle wave in nine.
    EXPECT_EQ(kl_paged_decode_num_splits(9 * kH200, 1, 1u << 20, 0, 16, kH200), 1u);
}

TEST(PagedDecodeNumSplits, SplitsOneLongSequenceOverTheMultiprocessors) {
    // 1 x 8 blocks: 8S / 132 >= 0.9 first at S0 = 15 (120 / 132 = 0.909;
    // S = 14: 112 / 132 = 0.848), one wave; the most in one wave is
    // floor(132 / 8) = 16 (128 / 132 = 0.97). cap = min(64, 32768 / 256,
    // 32768 / 16) = 64. (The rule chose 15 before it grew S0 within its
    // waves; 15 measured 0.60 of copy on an H200, 16 has 128 / 120 of the
    // busy multiprocessors for the same bytes.)
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 0, 16, kH200), 16u);
    // 148 SMs: 8S >= 133.2 -> S0 = 17 (136 / 148 = 0.919), one wave; most in
    // one wave floor(148 / 8) = 18 (144 / 148). Was 17.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 0, 16, 148), 18u);
    // 170 SMs: 8S >= 153 -> S0 = 20 (160 / 170; 19: 152 / 170 = 0.894); most
    // in one wave floor(170 / 8) = 21 (168 / 170). Was 20.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 0, 16, 170), 21u);
    // Plain kernels, two blocks an SM: pass 264 slots and 32 query heads:
    // 32S / 264 >= 0.9 -> S = 8 (256 / 264 = 0.97; 7: 224 / 264 = 0.848);
    // floor(264 / 32) = 8 too.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 32, 32768, 0, 16, 2 * kH200), 8u);
}

TEST(PagedDecodeNumSplits, BalancesTheLastWaveOfALargerGrid) {
    // 140 blocks (> 132, < 9 * 132): S = 1: 140 / 264 = 0.53; 2: 280 / 396
    // = 0.71; 3: 420 / 528 = 0.80; 4: 560 / 660 = 0.85; 5: 700 / 792 = 0.88;
    // 6: 840 / 924 = 0.909, 7 waves; 7 would need 8 (980 > 924).
    EXPECT_EQ(kl_paged_decode_num_splits(140, 1, 4096, 0, 16, kH200), 6u);
    // 300 blocks: S = 1: 300 / 396 = 0.76; 2: 600 / 660 = 0.909, 5 waves;
    // 3 would need 7 (900 > 660).
    EXPECT_EQ(kl_paged_decode_num_splits(75, 4, 4096, 0, 16, kH200), 2u);
}

TEST(PagedDecodeNumSplits, TakesTheBusiestCountWhenNoneReaches90Percent) {
    // One block per split: S / 132 grows with S up to the cap of 64.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 1, 32768, 0, 16, kH200), 64u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 1, 1u << 30, 0, 16, kH200), KL_PAGED_DECODE_MAX_SPLITS);
    // 2 x 4 = 8 blocks, window 3000 -> cap 11 (3000 / 256): 88 / 132.
    EXPECT_EQ(kl_paged_decode_num_splits(2, 4, 3000, 0, 16, kH200), 11u);
}

TEST(PagedDecodeNumSplits, KeepsAtLeast256PositionsASplit) {
    // cap = window / 256.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 1000, 0, 16, kH200), 3u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 512, 0, 16, kH200), 2u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 511, 0, 16, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 255, 0, 16, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 1, 0, 16, kH200), 1u);
}

TEST(PagedDecodeNumSplits, SlidingWindowClipsTheWindow) {
    // window 1024 -> cap 4; window 4096 -> cap 16, 15 reaches 0.9 and 16
    // (128 blocks) is the most in its one wave (was 15).
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 1024, 16, kH200), 4u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 4096, 16, kH200), 16u);
    // A window longer than the sequence changes nothing.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 1000, 4096, 16, kH200), 3u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 1000, 1000, 16, kH200), 3u);
    // The same window over longer sequences: the same count (the time of a
    // windowed decode does not grow with the sequence).
    for (uint32_t len : {8192u, 16384u, 32768u, 1u << 20})
        EXPECT_EQ(kl_paged_decode_num_splits(1, 8, len, 4096, 16, kH200), 16u) << "length " << len;
}

TEST(PagedDecodeNumSplits, KeepsAtLeastOneCacheBlockASplit) {
    // cap = min(4096 / 256 = 16, ceil_div(4096, block_size)).
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 4096, 0, 1024, kH200), 4u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 4096, 0, 3000, kH200), 2u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 4096, 0, 4096, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 4096, 0, 1u << 31, kH200), 1u);
    // Block size 1 leaves the 256-position floor as the cap: 16, and 16 is
    // the most in one wave (was 15, the first to reach 0.9).
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 4096, 0, 1, kH200), 16u);
}

TEST(PagedDecodeNumSplits, DegenerateArgumentsGiveOneSplit) {
    EXPECT_EQ(kl_paged_decode_num_splits(0, 8, 32768, 0, 16, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 0, 32768, 0, 16, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 0, 0, 16, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 0, 0, kH200), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(1, 8, 32768, 0, 16, 0), 1u);
}

TEST(PagedDecodeNumSplits, NoOverflowAtTheLimits) {
    const uint32_t big = std::numeric_limits<uint32_t>::max();
    // base = (2^32 - 1)^2 >= 9 * sm_count.
    EXPECT_EQ(kl_paged_decode_num_splits(big, big, big, 0, 1, big), 1u);
    EXPECT_EQ(kl_paged_decode_num_splits(big, big, big, big, big, 1), 1u);
    // One block a split on 2^32 - 1 "SMs": S / sm grows with S up to 64.
    EXPECT_EQ(kl_paged_decode_num_splits(1, 1, big, 0, 1, big), 64u);
    // base = sm + 1 with sm near 2^32: S blocks over S + 1 waves' slots,
    // (S*sm + S) / ((S + 1)*sm), first >= 0.9 at S = 9 (8: 0.889); 10 would
    // need 11 waves (10*sm + 10 > 10*sm).
    EXPECT_EQ(kl_paged_decode_num_splits(big, 1, big, 0, 1, big - 1), 9u);
    // base = 8 * sm exactly: one split fills 8 waves.
    EXPECT_EQ(kl_paged_decode_num_splits(big, 8, big, 0, 1, big), 1u);
}

// Brute force in floating point: every S in [1, cap], fraction
// B / (ceil(B / sm) * sm), smallest S >= 0.9 then stepped up while the
// next count stays in the same number of waves, else the first maximum.
uint32_t rule_by_brute_force(uint32_t seqs, uint32_t heads, uint32_t len, uint32_t window, uint32_t bs, uint32_t sm) {
    if (seqs == 0 || heads == 0 || len == 0 || bs == 0 || sm == 0) return 1;
    const double w = (window != 0 && window < len) ? window : len;
    double cap = std::floor(w / 256.0);
    cap = std::min(cap, 64.0);
    cap = std::min(cap, std::ceil(w / bs));
    if (cap < 1) cap = 1;
    uint32_t best = 1;
    double best_frac = -1.0;
    for (uint32_t s = 1; s <= static_cast<uint32_t>(cap); s++) {
        const double blocks = static_cast<double>(seqs) * heads * s;
        const double frac = blocks / (std::ceil(blocks / sm) * sm);
        if (frac >= 0.9 - 1e-12) {
            const double waves = std::ceil(blocks / sm);
            uint32_t t = s;
            while (t + 1 <= static_cast<uint32_t>(cap) &&
                   std::ceil(static_cast<double>(seqs) * heads * (t + 1) / sm) == waves)
                t++;
            return t;
        }
        if (frac > best_frac + 1e-12) {
            best_frac = frac;
            best = s;
        }
    }
    return best;
}

TEST(PagedDecodeNumSplits, AgreesWithABruteForceReadingOfTheRule) {
    int checked = 0;
    for (uint32_t sm : {1u, 7u, 80u, 108u, 132u, 148u, 170u, 264u})
        for (uint32_t seqs : {1u, 2u, 3u, 5u, 16u, 31u, 64u, 200u})
            for (uint32_t heads : {1u, 2u, 4u, 8u, 32u})
                for (uint32_t len : {1u, 300u, 777u, 4096u, 10000u, 32768u, 500000u})
                    for (uint32_t window : {0u, 100u, 1500u, 4096u})
                        for (uint32_t bs : {1u, 16u, 64u, 999u}) {
                            const uint32_t got = kl_paged_decode_num_splits(seqs, heads, len, window, bs, sm);
                            ASSERT_EQ(got, rule_by_brute_force(seqs, heads, len, window, bs, sm))
                                << "seqs " << seqs << ", heads " << heads << ", len " << len << ", window "
                                << window << ", block_size " << bs << ", sm " << sm;
                            ASSERT_GE(got, 1u);
                            ASSERT_LE(got, KL_PAGED_DECODE_MAX_SPLITS);
                            checked++;
                        }
    EXPECT_GT(checked, 10000);
}

TEST(PagedDecodeSplitWorkspace, BytesFollowTheDocumentedFormula) {
    // 4 * num_seqs * num_splits * num_q_heads * (head_dim + 2)
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(32, 32, 128, 2), 4ull * 32 * 2 * 32 * 130);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(1, 8, 128, 15), 4ull * 15 * 8 * 130);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(1, 1, 1, 1), 12u);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(3, 5, 0, 7), 4ull * 3 * 7 * 5 * 2);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(0, 32, 128, 4), 0u);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(7, 32, 128, 0), 0u);
    // head_dim + 2 is taken in 64 bits.
    const uint32_t big = std::numeric_limits<uint32_t>::max();
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(1, 1, big, 1), 4ull * (static_cast<uint64_t>(big) + 2));
}

TEST(PagedDecodeSplitWorkspace, SaturatesInsteadOfOverflowing) {
    const uint32_t big = std::numeric_limits<uint32_t>::max();
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(big, big, big, big), UINT64_MAX);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(big, big, 1, 1), UINT64_MAX);
    // 4 * 2^31 * 2^30 * 2 = 2^64: one past the largest value.
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes(1u << 31, 1u << 30, 0, 1), UINT64_MAX);
    EXPECT_EQ(kl_paged_decode_split_workspace_bytes((1u << 31) - 1, 1u << 30, 0, 1), UINT64_MAX - ((1ull << 33) - 1));
}

// ---- the persistent launchers' grid and workspace (kl_paged_decode_persist_*) ----

TEST(PagedDecodePersistCtas, AlignsUnitsToBlocksWhenThatKeeps90PercentBusy) {
    // 1 x 32768, 8 KV heads: 8 units <= 132, 8 * floor(132 / 8) = 128 (97%).
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 8, 32768, 0, kH200), 128u);
    // 32 x 4096: 256 units, k = ceil(256 / 132) = 2, ceil(256 / 2) = 128 (97%).
    EXPECT_EQ(kl_paged_decode_persist_ctas(32, 8, 4096, 0, kH200), 128u);
    // 132 units: one a block.
    EXPECT_EQ(kl_paged_decode_persist_ctas(33, 4, 4096, 0, kH200), 132u);
    // 1 unit: 1 * 132.
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 1, 32768, 0, kH200), 132u);
}

TEST(PagedDecodePersistCtas, CutsUnitsRatherThanIdleTheSms) {
    // 320 units: k = 3, ceil(320 / 3) = 107, 107 / 132 = 0.81 < 0.9 -> 132.
    EXPECT_EQ(kl_paged_decode_persist_ctas(40, 8, 4096, 0, kH200), 132u);
    // 70 units: 70 * floor(132 / 70) = 70, 0.53 -> 132.
    EXPECT_EQ(kl_paged_decode_persist_ctas(70, 1, 4096, 0, kH200), 132u);
    // 2000 units: k = 16, ceil(2000 / 16) = 125, 125 / 132 = 0.947 -> 125.
    EXPECT_EQ(kl_paged_decode_persist_ctas(250, 8, 512, 0, kH200), 125u);
}

TEST(PagedDecodePersistCtas, NeverMoreBlocksThanTiles) {
    // 1 x 100 positions, 8 KV heads: 8 * ceil(100 / 16) = 56 tiles < 128.
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 8, 100, 0, kH200), 56u);
    // A window of 32 over 32768: 8 * 2 = 16 tiles.
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 8, 32768, 32, kH200), 16u);
    // Empty sequences count one tile each: 3 units.
    EXPECT_EQ(kl_paged_decode_persist_ctas(3, 1, 0, 0, kH200), 3u);
}

TEST(PagedDecodePersistCtas, DegenerateAndLimitArguments) {
    EXPECT_EQ(kl_paged_decode_persist_ctas(0, 0, 0, 0, 0), 1u);
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 8, 32768, 0, 0), 1u);
    // The launchers take at most 65535 blocks.
    EXPECT_EQ(kl_paged_decode_persist_ctas(1, 1, 1u << 30, 0, 1u << 20), 65535u);
    EXPECT_EQ(kl_paged_decode_persist_ctas(UINT32_MAX, UINT32_MAX, UINT32_MAX, 0, kH200), 132u);
}

TEST(PagedDecodePersistWorkspace, TwoRecordsPerBlockAndOneCounterPerUnit) {
    // 8 * 132 * 4 * (128 + 2) = 549120 bytes.
    EXPECT_EQ(kl_paged_decode_persist_workspace_bytes(4, 128, 132), 549120u);
    EXPECT_EQ(kl_paged_decode_persist_workspace_bytes(8, 128, 1), 8u * 8u * 130u);
    EXPECT_EQ(kl_paged_decode_persist_workspace_bytes(UINT32_MAX, UINT32_MAX, UINT32_MAX), UINT64_MAX);
    EXPECT_EQ(kl_paged_decode_persist_counter_words(32, 8), 256u);
    EXPECT_EQ(kl_paged_decode_persist_counter_words(UINT32_MAX, UINT32_MAX), uint64_t{UINT32_MAX} * UINT32_MAX);
}

}  // namespace
