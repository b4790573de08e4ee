// mla_decode_schedule on the CPU emulator, from its own source through its
// launcher: every word against the rule of klaunch/mla_decode_layout.h
// (mla_decode_reference.h's schedule), and, read the way the attention
// kernels read it, the split covering every key tile of every sequence
// once, every sequence without positions once, each split's slot once.
// Batches of 1, 1024 and 5000, all lengths 0, one long among many short,
// negative lengths, part counts from 1 to past the work.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_decode/mla_decode_reference.h"

namespace {

class MlaDecodeScheduleEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_decode", GetParam()); }

    // Runs the schedule and checks it; returns its words.
    std::vector<int32_t> run(const std::vector<int32_t> &lengths, uint32_t parts) {
        SCOPED_TRACE(::testing::Message() << "batch " << lengths.size() << " parts " << parts);
        const uint32_t B = (uint32_t)lengths.size();
        const uint64_t words = kl_mla_decode_schedule_words(B, parts);
        emu::Buffer<int32_t> lens(B, emu::Access::kRead, "lengths");
        std::memcpy(lens.data(), lengths.data(), B * 4u);
        emu::Buffer<int32_t> sched((size_t)words, emu::Access::kReadWrite, "sched");
        kl_kernel k;
        EXPECT_EQ(KL_SUCCESS, kl_mla_decode_schedule_get(&k, mod())) << kl_last_error_message();
        EXPECT_EQ(KL_SUCCESS, kl_mla_decode_schedule(&k, lens.data(), sched.data(), B, parts, words, nullptr))
            << kl_last_error_message();
        // The extents are tight: every length is read, every word of sched
        // written (the header's zeros, each part's 8 words, the sequences'
        // splits, base slots and offsets C_b, the last of which ends it).
        EXPECT_TRUE(emu_test::extents_reached("mla_decode_schedule"));
        EXPECT_TRUE(sched.guards_intact()) << "a write landed outside sched";
        std::vector<int32_t> got(sched.data(), sched.data() + words);
        const std::vector<int32_t> want = mla_decode_ref::schedule(lengths, parts);
        size_t wrong = 0;
        std::ostringstream first;
        for (size_t i = 0; i < want.size(); ++i)
            if (got[i] != want[i] && wrong++ < 8) first << "  word " << i << ": " << got[i] << ", want " << want[i] << "\n";
        EXPECT_EQ(0u, wrong) << "words differ from the rule's:\n" << first.str();
        covers_once(lengths, parts, got);
        return got;
    }

    // The parts' pieces, walked as the attention walks them, cover each
    // tile once; pieces of a split sequence take its slots base .. base + n - 1.
    static void covers_once(const std::vector<int32_t> &lengths, uint32_t P, const std::vector<int32_t> &w) {
        const uint32_t B = (uint32_t)lengths.size();
        const int32_t *splits = w.data() + 16 + 8 * P, *base = splits + B;
        std::vector<std::vector<int>> seen(B);
        std::vector<int> zero_seen(B, 0);
        std::vector<int> slot_seen(2 * (size_t)P + 1, 0);
        for (uint32_t b = 0; b < B; ++b) seen[b].assign(lengths[b] > 0 ? ((size_t)lengths[b] + 63) / 64 : 0, 0);
        for (uint32_t p = 0; p < P; ++p) {
            const int32_t *r = w.data() + 16 + 8 * p;
            const uint32_t bs = r[0], bt = r[1], es = r[2], et = r[3], split0 = r[4];
            for (uint32_t b = bs; b < B; ++b) {
                const uint32_t t0 = b == bs ? bt : 0;
                if (b > es || (b == es && t0 >= et)) break;
                const uint32_t tiles = (uint32_t)seen[b].size();
                const uint32_t t1 = b == es ? et : tiles;
                ASSERT_LE(t1, tiles) << "part " << p << " runs past sequence " << b;
                if (tiles == 0) zero_seen[b]++;
                for (uint32_t t = t0; t < t1; ++t) seen[b][t]++;
                if (splits[b] > 1) {
                    const uint32_t slot = base[b] + (b == bs ? split0 : 0);
                    ASSERT_LT(slot, slot_seen.size() - 1) << "part " << p << ": slot past 2 * parts";
                    ASSERT_LT(slot - base[b], (uint32_t)splits[b]) << "part " << p << ": split past the count";
                    slot_seen[slot]++;
                }
            }
        }
        for (uint32_t b = 0; b < B; ++b) {
            if (seen[b].empty()) EXPECT_EQ(1, zero_seen[b]) << "sequence " << b << " (no positions) taken " << zero_seen[b] << " times";
            for (size_t t = 0; t < seen[b].size(); ++t)
                ASSERT_EQ(1, seen[b][t]) << "tile " << t << " of sequence " << b << " taken " << seen[b][t] << " times";
        }
        for (size_t s = 0; s < (size_t)w[3]; ++s) EXPECT_EQ(1, slot_seen[s]) << "slot " << s;
        // At most P - 1 cuts fall inside sequences, each making at most 2
        // slots: slots 2 P - 2 and 2 P - 1 of the workspace's layout are
        // never used (its declared extent ends at slot 2 P - 3's lse rows).
        EXPECT_LE((uint32_t)w[3], 2 * (P - 1)) << "slots used";
    }
};

TEST_P(MlaDecodeScheduleEmulated, BatchOfOne) {
    run({0}, 1);
    run({1}, 4);
    run({32768}, 132);
    run({32768}, 1);
}

TEST_P(MlaDecodeScheduleEmulated, AllLengthsZero) {
    run(std::vector<int32_t>(7, 0), 3);
    run(std::vector<int32_t>(300, 0), 132);
}

TEST_P(MlaDecodeScheduleEmulated, NegativeLengthsCountAsZero) { run({-5, 100, -2147483647 - 1, 64}, 3); }

TEST_P(MlaDecodeScheduleEmulated, OneLongAmongManyShort) {
    std::vector<int32_t> l(200, 5);
    l[77] = 100000;
    const std::vector<int32_t> w = run(l, 132);
    // The long one is split: most parts work on it.
    EXPECT_GT(w[16 + 8 * 132 + 77], 50) << "splits of the long sequence";
}

TEST_P(MlaDecodeScheduleEmulated, BatchOf1024) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int32_t> d(0, 9000);
    std::vector<int32_t> l(1024);
    for (int32_t &x : l) x = d(gen);
    run(l, 132);
    run(l, 33);
    run(l, 1);
}

// Past the 4096 sequences whose offsets the cut search keeps in shared memory.
TEST_P(MlaDecodeScheduleEmulated, BatchOf5000SearchesTheGlobalCopy) {
    std::mt19937 gen(9);
    std::uniform_int_distribution<int32_t> d(0, 300);
    std::vector<int32_t> l(5000);
    for (int32_t &x : l) x = d(gen);
    run(l, 132);
}

TEST_P(MlaDecodeScheduleEmulated, MorePartsThanUnits) {
    run({1, 2}, 100);
    run({64, 64, 64}, 65535);
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaDecodeScheduleEmulated,
                         ::testing::Values("mistral_small_4", "deepseek_v4_flash"));

}  // namespace
