// The tensor-core GQA decode kernels (paged_decode_attn_{bf16,fp8}_gqa_mma,
// paged_decode_split_{bf16,fp8}_gqa_mma + paged_decode_split_combine) on
// the CPU emulator (tests/emu, docs/EMULATOR.md), from their own source,
// through the generated launchers and the emulated backend, in both
// variants (pack width 4 and 8). No GPU needed: this pins the fragment
// layouts, dim and position permutations, masks, the table walk, both load
// paths and the split ranges before a GPU runs them (paged_decode_test /
// paged_decode_split_test run the same launchers on the GPU).
//
// Inputs: paged_decode_problem.h's random problems (fresh per case,
// KL_TEST_SEED mixes in another seed; shuffled physical blocks, NaN
// wherever a kernel must not look), copied into registered read-only
// buffers (any read outside them, or a misaligned vector load, fails the
// launch with the thread and address); outputs and the workspace start
// poisoned (NaN) with guards. Checked against the float64 reference as the
// GPU tests check: ||out - ref|| / ||ref|| < 1e-2, every element within
// 1e-3 max|ref| + 1e-2 |ref|, zeros for length 0, guards untouched; the
// split workspace record by record as paged_decode_split_test checks it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tests/emu/emu_test_util.h"
#include "tests/paged_decode/paged_decode_emu_inputs.h"
#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"
#include "tests/paged_decode/paged_decode_split_check.h"

namespace {

using emu::Access;
using paged_decode_problem::Case;
using paged_decode_problem::kGuard;
using paged_decode_problem::kPoisonBf16;
using paged_decode_problem::lengths_around;
using paged_decode_problem::Problem;

class MmaEmulatedTest : public paged_decode_problem::PackWidthTest {
  protected:

    // One case: the seed-grid launcher (splits 0) or the split launcher +
    // combine; `ext` and `comb_ext`, if given, take the attention's (or the
    // partials') and the combine's reach of their declared extents.
    void run_case(bool fp8, const Case &c, uint32_t splits, emu_test::ExtentsReached *ext = nullptr,
                  emu_test::ExtentsReached *comb_ext = nullptr) {
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + (splits ? " split x" + std::to_string(splits) : " attn") +
                     ": " + paged_decode_problem::describe(c, fp8) + ", pack width " + std::to_string(width()));
        const Problem p = paged_decode_problem::build(fp8, c);
        const std::vector<double> ref = paged_decode_problem::reference(p);
        const paged_decode_ref::Shape &g = p.g;
        const paged_decode_problem::EmuInputs in(p, c, fp8);
        const kl_bf16 *kbp = in.kbp, *vbp = in.vbp;
        const kl_fp8_e4m3 *k8p = in.k8p, *v8p = in.v8p;
        const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
        emu::Buffer<kl_bf16> out(n_out, Access::kWrite, "output");
        const float inv = static_cast<float>(g.inv_sqrt_d);
        const kl_module *m = mod();
        ASSERT_NE(m, nullptr);
        kl_kernel k;
        if (splits == 0) {
            if (!fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_mma(
                    &k, in.q->data(), kbp, vbp, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, nullptr));
            } else {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_mma(
                    &k, in.q->data(), k8p, v8p, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, p.cache_stride, g.sliding_window, nullptr));
            }
            if (ext != nullptr) EXPECT_TRUE(ext->add());
        } else {
            const uint64_t ws_bytes =
                kl_paged_decode_split_workspace_bytes(g.num_seqs, g.num_q_heads, g.head_dim, splits);
            // kWsGuard poisoned floats after the workspace, inside the
            // registration: check_workspace reads them back.
            emu::Buffer<float> ws(ws_bytes / 4 + paged_decode_problem::kWsGuard, Access::kReadWrite, "workspace");
            if (!fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_split_bf16_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_split_bf16_gqa_mma(
                    &k, in.q->data(), kbp, vbp, ws.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, splits, ws_bytes, nullptr));
            } else {
                KL_EMU_ASSERT_OK(kl_paged_decode_split_fp8_gqa_mma_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_split_fp8_gqa_mma(
                    &k, in.q->data(), k8p, v8p, ws.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, p.cache_stride, g.sliding_window, splits, ws_bytes, nullptr));
            }
            if (ext != nullptr) EXPECT_TRUE(ext->add());
            EXPECT_TRUE(ws.guards_intact()) << "the partial kernel wrote past the workspace";
            // Record by record: empty splits (-inf, 0) with acc untouched,
            // m, the log-sum-exp and acc / l of the others (paged_decode_split_check.h).
            paged_decode_problem::check_workspace(p, c, splits, std::vector<float>(ws.data(), ws.data() + ws.size()));
            kl_kernel comb;
            KL_EMU_ASSERT_OK(kl_paged_decode_split_combine_get(&comb, m));
            KL_EMU_ASSERT_OK(kl_paged_decode_split_combine(&comb, ws.data(), out.data(), g.num_seqs, g.num_q_heads,
                                                           g.head_dim, splits, ws_bytes, nullptr));
            if (comb_ext != nullptr) EXPECT_TRUE(comb_ext->add());
        }
        EXPECT_TRUE(out.guards_intact()) << "a write landed outside the output";
        std::vector<kl_bf16> all(kGuard + n_out + kGuard, kl_bf16{kPoisonBf16});
        std::memcpy(all.data() + kGuard, out.data(), n_out * sizeof(kl_bf16));
        paged_decode_problem::check_output(p, ref, all);
    }
};

// Block sizes 1 (a table entry per position: the general path), 16 and 64
// (the fast path), lengths 0, 1, a block, a block + 1 and longer, windows
// none / shorter / longer than the sequences, q rows padded.
TEST_P(MmaEmulatedTest, Bf16MatchesReferenceAtEveryBlockSizeAndWindow) {
    uint32_t seed = 7000 + width();
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
            run_case(false, c, 0);
        }
}

// fp8: scales other than 1, cache_stride past the packed block (16-byte
// aligned: the fast path; odd: the general path), windows.
TEST_P(MmaEmulatedTest, Fp8MatchesReferenceWithScalesStridesAndWindows) {
    uint32_t seed = 7100 + width();
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
            run_case(true, c, 0);
        }
}

// Caches off a 16-byte boundary (the general path's element loads), fp8 K
// and V interleaved in one allocation (cache_stride twice a block).
TEST_P(MmaEmulatedTest, OffAlignmentAndInterleavedCaches) {
    uint32_t seed = 7200 + width();
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
        if (mis != 0) run_case(false, c, 0);
        run_case(true, c, 0);
    }
}

// Scores of several hundred (q up to 8, inv_sqrt_d 1, k_scale 2): 2^s
// overflows fp32 without the running max, which must follow the largest
// scores across tiles and warps; for fp8, q's power-of-two scaling is
// exercised at large magnitudes too.
TEST_P(MmaEmulatedTest, LargeScoresNeedTheRunningMax) {
    uint32_t seed = 7300 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 1;
        c.num_q_heads = width();
        c.seq_lens = lengths_around(16, {300});
        c.inv_sqrt_d = 1.0;
        c.q_amp = 8.0f;
        c.k_scale = 2.0f;
        c.seed = seed++;
        run_case(fp8, c, 0);
    }
}

// A long sequence (every warp takes several tiles, the prefetching table
// walker crosses many cache blocks) with a window that starts and ends
// mid-block.
TEST_P(MmaEmulatedTest, LongSequenceWithAMidBlockWindow) {
    uint32_t seed = 7400 + width();
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
            run_case(fp8, c, 0);
            c.seq_lens = {1999};
            c.sliding_window = 1500;
            c.seed = seed++;
            run_case(fp8, c, 0);
        }
}

// The split partials + combine: 3 splits over block size 1, 7 over 16
// with a window (more splits than some sequences have cache blocks: empty
// splits, whose records the combine must skip).
TEST_P(MmaEmulatedTest, SplitPartialsAndCombineMatchReference) {
    uint32_t seed = 7500 + width();
    for (bool fp8 : {false, true})
        for (uint32_t bs : {1u, 16u}) {
            const uint32_t splits = bs == 1 ? 3u : 7u;
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = 2 * width();
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {130});
            c.sliding_window = bs == 16 ? 100 : 0;
            c.cache_pad = fp8 && bs == 16 ? 16 : 0;
            c.k_scale = 0.7f;
            c.v_scale = 1.7f;
            c.seed = seed++;
            run_case(fp8, c, splits);
        }
}

// The declared extents are tight (issue 44): with no table slack and the
// last sequence the longest, its window reads its last table entry and its
// last query head's last column (a padded q row's tail is never read);
// every length is read, every output row written; the partials write (m, l)
// of every workspace row (empty splits too: 2 blocks in 3 splits), the last
// ending the workspace, and the combine reads the last one's l where its
// split is not empty (2 blocks in 2 splits).
TEST_P(MmaEmulatedTest, ExtentsAreTight) {
    emu_test::ExtentsReached combine("paged_decode_split_combine");
    uint32_t seed = 7600 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = {0, 5, 20};
        c.table_slack = 0;
        c.q_pad = 8;
        c.cache_pad = fp8 ? 16 : 0;
        c.seed = seed++;
        const std::string t = fp8 ? "fp8" : "bf16";
        emu_test::ExtentsReached attn("paged_decode_attn_" + t + "_gqa_mma"), split("paged_decode_split_" + t + "_gqa_mma");
        run_case(fp8, c, 0, &attn);
        run_case(fp8, c, 3, &split, &combine);
        run_case(fp8, c, 2, &split, &combine);
        EXPECT_TRUE(attn.all());
        EXPECT_TRUE(split.all());
    }
    EXPECT_TRUE(combine.all());
}

INSTANTIATE_TEST_SUITE_P(BothVariants, MmaEmulatedTest, ::testing::Values(4, 8),
                         paged_decode_problem::pack_width_name);

}  // namespace
