// The persistent GQA decode launchers (paged_decode_persist_{bf16,fp8}_gqa_mma)
// on the CPU emulator (tests/emu, docs/EMULATOR.md), from their own source,
// through the generated launchers and the emulated backend, in both
// variants (pack width 4 and 8).
//
// What is pinned here before a GPU runs them: the division of all tiles
// between the blocks (units cut between blocks, blocks inside one unit,
// blocks with no tile when num_ctas exceeds the tiles, empty sequences
// written as zeros), the record slots and the last-arrival merge, the
// counters' return to zero, the scan of more than 256 sequences, and the
// core's paths (block sizes 1 / 16 / 64, windows, fp8 scales and strides,
// caches off alignment, K and V interleaved).
//
// Inputs: paged_decode_problem.h's random problems (fresh per case, NaN
// wherever a kernel must not look), in registered read-only buffers;
// output and workspace poisoned (NaN) with guards; counters zeroed as the
// contract asks. Checked against the float64 reference as the GPU tests
// check (||out - ref|| / ||ref|| < 1e-2, every element within
// 1e-3 max|ref| + 1e-2 |ref|, zeros for length 0), plus: every counter is
// zero after the launch, and a second launch on the same workspace and
// counters gives the same output bit for bit. The emulator runs the blocks
// one after another in grid order (so the last arrival is always the
// highest block of a unit); the merge reads every record from the
// workspace in block order whichever block arrives last, so the result
// does not depend on that order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tests/emu/emu_test_util.h"
#include "tests/paged_decode/paged_decode_emu_inputs.h"
#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"

namespace {

using emu::Access;
using paged_decode_problem::Case;
using paged_decode_problem::kGuard;
using paged_decode_problem::kPoisonBf16;
using paged_decode_problem::lengths_around;
using paged_decode_problem::Problem;

// Tiles of 16 positions of one unit of sequence length len (the kernel's
// count: the window's tiles, one for an empty window), for the cases'
// descriptions of how the blocks divide them.
uint64_t unit_tiles(int32_t len, uint32_t window) {
    const uint32_t l = len > 0 ? static_cast<uint32_t>(len) : 0u;
    const uint32_t b = (window != 0 && l > window) ? l - window : 0u;
    return l > b ? (l - 1) / 16 - b / 16 + 1 : 1;
}

class PersistEmulatedTest : public paged_decode_problem::PackWidthTest {
  protected:

    // One case at num_ctas blocks; `twice`: launch again on the same
    // workspace and counters and compare the outputs bit for bit; `ext`, if
    // given, takes each launch's reach of its declared extents.
    void run_case(bool fp8, const Case &c, uint32_t num_ctas, bool twice = false,
                  emu_test::ExtentsReached *ext = nullptr) {
        uint64_t tiles = 0;
        for (int32_t len : c.seq_lens) tiles += unit_tiles(len, c.sliding_window) * c.num_kv_heads;
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + " persist, " + std::to_string(num_ctas) + " blocks over " +
                     std::to_string(tiles) + " tiles: " + paged_decode_problem::describe(c, fp8) + ", pack width " +
                     std::to_string(width()));
        const Problem p = paged_decode_problem::build(fp8, c);
        const std::vector<double> ref = paged_decode_problem::reference(p);
        const paged_decode_ref::Shape &g = p.g;
        const paged_decode_problem::EmuInputs in(p, c, fp8);
        const kl_bf16 *kbp = in.kbp, *vbp = in.vbp;
        const kl_fp8_e4m3 *k8p = in.k8p, *v8p = in.v8p;
        const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
        emu::Buffer<kl_bf16> out(n_out, Access::kWrite, "output");
        const uint64_t ws_bytes =
            kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(width()), g.head_dim, num_ctas);
        ASSERT_EQ(ws_bytes, 8ull * num_ctas * width() * (g.head_dim + 2));
        emu::Buffer<float> ws(ws_bytes / 4, Access::kReadWrite, "workspace");
        const uint64_t nc = kl_paged_decode_persist_counter_words(g.num_seqs, g.num_kv_heads);
        ASSERT_EQ(nc, static_cast<uint64_t>(g.num_seqs) * g.num_kv_heads);
        emu::Buffer<uint32_t> counters(nc, Access::kReadWrite, "counters");
        counters.fill_bytes(0);  // the contract: zero before the first launch
        const float inv = static_cast<float>(g.inv_sqrt_d);
        const kl_module *m = mod();
        ASSERT_NE(m, nullptr);
        kl_kernel k;
        auto launch = [&]() {
            if (!fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_mma(
                    &k, in.q->data(), kbp, vbp, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc, nullptr));
            } else {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_mma(
                    &k, in.q->data(), k8p, v8p, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, p.cache_stride, g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc,
                    nullptr));
            }
            if (ext != nullptr) EXPECT_TRUE(ext->add());
        };
        paged_decode_problem::check_emulated_launch(p, ref, out, ws, counters, nc, twice, launch);
    }
};

// Block sizes 1 (the core's general path), 16 and 64 (fast path); lengths
// 0, 1, a block, a block + 1 and longer; windows none / shorter / longer;
// q rows padded. num_ctas cycles through 1 (one block does every unit
// whole), 5 and 13 (units cut between blocks, blocks inside one unit) and
// 64 (more blocks than tiles: some blocks have nothing to do).
TEST_P(PersistEmulatedTest, Bf16MatchesReferenceAtEveryBlockSizeWindowAndGrid) {
    uint32_t seed = 8000 + width();
    const uint32_t ctas[] = {1, 5, 13, 64};
    int i = 0;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {0u, 7u, 100000u}) {
            Case c;
            c.num_kv_heads = bs == 16 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * width();
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 3, 150});
            c.sliding_window = sw;
            c.q_pad = sw == 7 ? 5 : 0;
            c.seed = seed++;
            run_case(false, c, ctas[i++ % 4]);
        }
}

// fp8: scales other than 1, cache_stride past the packed block (16-byte
// aligned: fast path; odd: general path), windows.
TEST_P(PersistEmulatedTest, Fp8MatchesReferenceWithScalesStridesAndWindows) {
    uint32_t seed = 8100 + width();
    const uint32_t ctas[] = {3, 7, 1, 40};
    int i = 0;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint64_t pad : {uint64_t{0}, uint64_t{16}, uint64_t{5}}) {
            Case c;
            c.num_kv_heads = bs == 64 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * width();
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 9, 140});
            c.sliding_window = pad == 16 ? 11 : (pad == 5 ? 1000 : 0);
            c.cache_pad = pad;
            c.k_scale = 0.45f;
            c.v_scale = 2.2f;
            c.q_pad = pad == 5 ? 2 : 0;
            c.seed = seed++;
            run_case(true, c, ctas[i++ % 4]);
        }
}

// Caches off a 16-byte boundary (the general path), fp8 K and V interleaved.
TEST_P(PersistEmulatedTest, OffAlignmentAndInterleavedCaches) {
    uint32_t seed = 8200 + width();
    for (uint32_t mis : {0u, 1u, 3u}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = lengths_around(16, {77});
        c.misalign = mis;
        c.interleaved = mis == 0;
        c.sliding_window = mis == 1 ? 40 : 0;
        c.k_scale = 1.5f;
        c.v_scale = 0.3f;
        c.seed = seed++;
        if (mis != 0) run_case(false, c, 6);
        run_case(true, c, 4);
    }
}

// One long sequence cut into many pieces (the 1 x 32768 shape, smaller):
// 2000 positions (125 tiles) and an empty sequence over 7 blocks, so the
// long unit's records come from 7 blocks and the empty one is written whole;
// then a mid-block window. Scores of several hundred too: the merge must
// rescale records to the common maximum.
TEST_P(PersistEmulatedTest, LongSequenceCutIntoManyBlocks) {
    uint32_t seed = 8300 + width();
    for (bool fp8 : {false, true})
        for (uint32_t bs : {16u, 64u}) {
            Case c;
            c.num_kv_heads = 1;
            c.num_q_heads = width();
            c.block_size = bs;
            c.seq_lens = {2000, 0};
            c.k_scale = 0.9f;
            c.v_scale = 1.3f;
            c.seed = seed++;
            run_case(fp8, c, 7);
            c.seq_lens = {1999};
            c.sliding_window = 1500;
            c.inv_sqrt_d = 1.0;
            c.q_amp = 8.0f;
            c.k_scale = 2.0f;
            c.seed = seed++;
            run_case(fp8, c, 11);
        }
}

// Counters return to zero and a second launch reproduces the first bit for
// bit (the same workspace, poisoned again), for both cache types.
TEST_P(PersistEmulatedTest, CountersReturnToZeroAndASecondLaunchMatchesTheFirst) {
    uint32_t seed = 8400 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = {300, 45, 0, 129};
        c.k_scale = 0.6f;
        c.v_scale = 1.1f;
        c.seed = seed++;
        run_case(fp8, c, 9, true);
    }
}

// The _mma persistent launchers are plain launches: two back to back on
// one stream run one after the other (the second starts once the first
// has completed, and it never triggers its dependents early, so a
// programmatic launch after it, a _bulk or _tma one, starts only as its
// blocks exit and waits for its completion before touching memory). Here:
// a (lengths {100, 0, 37} at 4 blocks), b ({5, 90, 61} at 3 blocks: other
// cuts of other units), a again, back to back on one workspace and one set
// of counters with their own inputs and outputs (check_back_to_back: each
// output against its reference, the counters back to zero, a's outputs
// bit for bit equal).
TEST_P(PersistEmulatedTest, BackToBackPlainLaunchesShareWorkspaceAndCountersWithDifferentInputs) {
    uint32_t seed = 8900 + 10 * width();
    for (bool fp8 : {false, true}) {
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + ", pack width " + std::to_string(width()));
        const std::pair<Case, Case> cs = paged_decode_problem::two_problems(static_cast<uint32_t>(width()), seed);
        seed += 2;
        const Problem a = paged_decode_problem::build(fp8, cs.first), b = paged_decode_problem::build(fp8, cs.second);
        const paged_decode_problem::EmuInputs in_a(a, cs.first, fp8), in_b(b, cs.second, fp8);
        emu::Buffer<kl_bf16> out_a(static_cast<size_t>(a.g.num_seqs) * a.g.num_q_heads * a.g.head_dim, Access::kWrite,
                                   "output a");
        emu::Buffer<kl_bf16> out_b(static_cast<size_t>(b.g.num_seqs) * b.g.num_q_heads * b.g.head_dim, Access::kWrite,
                                   "output b");
        const uint64_t ws_bytes = kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(width()), 128u, 4u);
        emu::Buffer<float> ws(ws_bytes / 4, Access::kReadWrite, "workspace");
        const uint64_t nc = kl_paged_decode_persist_counter_words(a.g.num_seqs, a.g.num_kv_heads);
        emu::Buffer<uint32_t> counters(nc, Access::kReadWrite, "counters");
        counters.fill_bytes(0);
        const kl_module *m = mod();
        ASSERT_NE(m, nullptr);
        paged_decode_problem::check_back_to_back(a, b, out_a, out_b, ws, counters, nc, false, [&](int which) {
            const Problem &p = which == 0 ? a : b;
            const Case &c = which == 0 ? cs.first : cs.second;
            const paged_decode_problem::EmuInputs &in = which == 0 ? in_a : in_b;
            kl_bf16 *out = which == 0 ? out_a.data() : out_b.data();
            const uint32_t num_ctas = which == 0 ? 4u : 3u;
            const paged_decode_ref::Shape &g = p.g;
            const float inv = static_cast<float>(g.inv_sqrt_d);
            kl_kernel k;
            if (!fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_mma(
                    &k, in.q->data(), in.kbp, in.vbp, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc, nullptr));
            } else {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_mma(
                    &k, in.q->data(), in.k8p, in.v8p, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, p.cache_stride, g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc,
                    nullptr));
            }
        });
    }
}

// More sequences than a block scans at once (256): the scan that finds a
// block's first sequence crosses chunks; short and empty sequences.
TEST_P(PersistEmulatedTest, MoreThan256Sequences) {
    Case c;
    c.num_kv_heads = 1;
    c.num_q_heads = width();
    std::mt19937 gen(8500 + width());
    for (int i = 0; i < 300; i++) c.seq_lens.push_back(static_cast<int32_t>(gen() % 20u));
    c.seed = 8501 + width();
    run_case(width() == 8, c, 5);
}

// The declared extents are tight (issue 44). Lengths {0, 5, 100} over 2
// KV heads are 18 tiles (units of 1, 1, 1, 1, 7, 7) on 4 blocks: the last
// block's first piece is the last unit cut at tile 13, so it writes record
// slot 0 of block num_ctas - 1, whose (m, l) of the last head end the
// workspace's declared extent (2 * PACK * (num_ctas * (head_dim + 2) - 1)
// floats: the last block never writes a slot-1 record, its last piece
// ending at the last tile), and the last unit's counter is used. With no
// table slack and the last sequence the longest, its last table entry and
// its last query head's last column are read (a padded q row's tail never
// is); every length is read, every output row written.
TEST_P(PersistEmulatedTest, ExtentsAreTight) {
    uint32_t seed = 8600 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = {0, 5, 100};
        c.table_slack = 0;
        c.q_pad = 8;
        c.cache_pad = fp8 ? 16 : 0;
        c.seed = seed++;
        emu_test::ExtentsReached ext(fp8 ? "paged_decode_persist_fp8_gqa_mma" : "paged_decode_persist_bf16_gqa_mma");
        run_case(fp8, c, 4, false, &ext);
        EXPECT_TRUE(ext.all());
    }
}

INSTANTIATE_TEST_SUITE_P(BothVariants, PersistEmulatedTest, ::testing::Values(4, 8),
                         paged_decode_problem::pack_width_name);

}  // namespace
