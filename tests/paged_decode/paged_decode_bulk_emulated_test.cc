// The copy-engine GQA decode launchers (paged_decode_attn_{bf16,fp8}_gqa_bulk,
// paged_decode_persist_{bf16,fp8}_gqa_bulk and their tensor-map twins
// paged_decode_{attn,persist}_{bf16,fp8}_gqa_tma) on the CPU emulator
// (tests/emu, docs/EMULATOR.md), from their own source, through the
// generated launchers and the emulated backend, in both variants (pack
// width 4 and 8).
//
// What is pinned here before a GPU runs them: the producer warp's row
// copies (cp.async.bulk on the emulated copy engine: sources and
// destinations 16-byte aligned, transaction bytes the mbarriers expect),
// the rows it zero-fills outside the window, its table chunks (two per
// lane, shuffled; the speculative first chunk kept or reloaded), the
// register path for caches off 16-byte alignment, the ring's slots and
// phases as the tile stream wraps (every case of 2000 positions passes the
// 16 or 32 slots several times), the consumers' reads of a slot only after
// its `full` phase and the producer's refill only after `empty` (the
// emulator's race checker and in-flight copies would fault otherwise), the
// bank-spread dims of the bf16 fragments, the _tma twins' boxes (rank-4
// tensor copies in the 128-byte swizzle through the generated builders'
// maps, rows outside the window masked in registers), and for the persistent
// launchers the schedule of paged_decode_persist_gqa_mma (units cut
// between blocks, blocks without tiles, the one-round-trip record merge,
// counters back to zero, a second launch bit for bit equal).
//
// Inputs: paged_decode_problem.h's random problems (fresh per case, NaN
// wherever a kernel must not look), in registered read-only buffers;
// output and workspace poisoned with guards; counters zeroed as the
// contract asks. Checked against the float64 reference as the GPU tests
// check (||out - ref|| / ||ref|| < 1e-2, every element within
// 1e-3 max|ref| + 1e-2 |ref|, zeros for length 0).
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

// num_ctas 0: the seed-grid launcher; else the persistent one at that
// grid. maps: the *_gqa_tma twin, its caches as tensor maps encoded by its
// generated builders (the emulated backend's reference encoding, which the
// emulated copy engine reads). ext, if given, takes each launch's reach of
// its declared extents.
class BulkEmulatedTest : public paged_decode_problem::PackWidthTest {
  protected:

    void run_case(bool fp8, const Case &c, uint32_t num_ctas, bool twice = false, bool maps = false,
                  emu_test::ExtentsReached *ext = nullptr) {
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + (num_ctas ? " persist" : " attn") + (maps ? " tma" : " bulk") +
                     (num_ctas ? " at " + std::to_string(num_ctas) + " blocks" : std::string()) + ": " +
                     paged_decode_problem::describe(c, fp8) + ", pack width " + std::to_string(width()));
        const Problem p = paged_decode_problem::build(fp8, c);
        const std::vector<double> ref = paged_decode_problem::reference(p);
        const paged_decode_ref::Shape &g = p.g;
        const paged_decode_problem::EmuInputs in(p, c, fp8);
        const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
        emu::Buffer<kl_bf16> out(n_out, Access::kWrite, "output");
        const uint64_t ws_bytes =
            kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(width()), g.head_dim, num_ctas ? num_ctas : 1);
        emu::Buffer<float> ws(ws_bytes / 4, Access::kReadWrite, "workspace");
        const uint64_t nc = kl_paged_decode_persist_counter_words(g.num_seqs, g.num_kv_heads);
        emu::Buffer<uint32_t> counters(nc ? nc : 1, Access::kReadWrite, "counters");
        counters.fill_bytes(0);  // the contract: zero before the first launch
        const float inv = static_cast<float>(g.inv_sqrt_d);
        const kl_module *m = mod();
        ASSERT_NE(m, nullptr);
        kl_kernel k;
        // The maps' 4-D view (d, kv head, slot, block) of each cache.
        const uint64_t block_stride = fp8 ? p.cache_stride : p.block_elems;
        kl_tensor_map km, vm;
        // Each map with its own parameter's builder (a map is tagged with it).
        auto encode = [&](auto kbuilder, auto vbuilder, const auto *kp, const auto *vp) {
            KL_EMU_ASSERT_OK(kbuilder(&k, &km, kp, g.head_dim, g.num_kv_heads, g.block_size, p.num_blocks, g.head_dim,
                                      uint64_t{g.num_kv_heads} * g.head_dim, block_stride));
            KL_EMU_ASSERT_OK(vbuilder(&k, &vm, vp, g.head_dim, g.num_kv_heads, g.block_size, p.num_blocks, g.head_dim,
                                     uint64_t{g.num_kv_heads} * g.head_dim, block_stride));
        };
        auto launch = [&]() {
            if (maps && num_ctas == 0 && !fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_tma_get(&k, m));
                encode(kl_paged_decode_attn_bf16_gqa_tma_k_map_encode, kl_paged_decode_attn_bf16_gqa_tma_v_map_encode, in.kbp, in.vbp);
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_tma(
                    &k, in.q->data(), &km, &vm, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, nullptr));
            } else if (maps && num_ctas == 0) {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_tma_get(&k, m));
                encode(kl_paged_decode_attn_fp8_gqa_tma_k_map_encode, kl_paged_decode_attn_fp8_gqa_tma_v_map_encode, in.k8p, in.v8p);
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_tma(
                    &k, in.q->data(), &km, &vm, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, g.sliding_window, nullptr));
            } else if (maps && !fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_tma_get(&k, m));
                encode(kl_paged_decode_persist_bf16_gqa_tma_k_map_encode, kl_paged_decode_persist_bf16_gqa_tma_v_map_encode, in.kbp, in.vbp);
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_tma(
                    &k, in.q->data(), &km, &vm, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                    g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc, nullptr));
            } else if (maps) {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_tma_get(&k, m));
                encode(kl_paged_decode_persist_fp8_gqa_tma_k_map_encode, kl_paged_decode_persist_fp8_gqa_tma_v_map_encode, in.k8p, in.v8p);
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_tma(
                    &k, in.q->data(), &km, &vm, out.data(), in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
                    g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                    g.q_stride, g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc, nullptr));
            } else if (num_ctas == 0 && !fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_bulk_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_bulk(
                    &k, in.q->data(), in.kbp, in.vbp, out.data(), in.tables->data(), in.lens->data(),
                    g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                    g.q_stride, g.sliding_window, nullptr));
            } else if (num_ctas == 0) {
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_bulk_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_bulk(
                    &k, in.q->data(), in.k8p, in.v8p, out.data(), in.tables->data(), in.lens->data(),
                    g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                    c.k_scale, c.v_scale, g.q_stride, p.cache_stride, g.sliding_window, nullptr));
            } else if (!fp8) {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_bulk_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_bulk(
                    &k, in.q->data(), in.kbp, in.vbp, out.data(), in.tables->data(), in.lens->data(),
                    g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                    g.q_stride, g.sliding_window, ws.data(), counters.data(), num_ctas, ws_bytes, nc, nullptr));
            } else {
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_bulk_get(&k, m));
                KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_bulk(
                    &k, in.q->data(), in.k8p, in.v8p, out.data(), in.tables->data(), in.lens->data(),
                    g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                    c.k_scale, c.v_scale, g.q_stride, p.cache_stride, g.sliding_window, ws.data(), counters.data(),
                    num_ctas, ws_bytes, nc, nullptr));
            }
            if (ext != nullptr) EXPECT_TRUE(ext->add());
        };
        paged_decode_problem::check_emulated_launch(p, ref, out, ws, counters, nc, twice, launch);
    }
};

// The seed grid: block sizes 1 (16 pages a tile: the producer's chunks
// advance every other tile), 16 and 64; lengths 0, 1, a block, a block + 1
// and 2000 (125 tiles: the ring wraps); windows none / inside a tile /
// past the sequence; q rows padded.
TEST_P(BulkEmulatedTest, SeedGridMatchesReferenceAtEveryBlockSizeAndWindow) {
    uint32_t seed = 9000 + width();
    for (bool fp8 : {false, true})
        for (uint32_t bs : {1u, 16u, 64u}) {
            Case c;
            c.num_kv_heads = bs == 16 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * width();
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2000});
            c.sliding_window = bs == 1 ? 7 : (bs == 16 ? 0 : 100000);
            c.q_pad = bs == 1 ? 5 : 0;
            c.k_scale = 0.45f;
            c.v_scale = 2.2f;
            c.seed = seed++;
            run_case(fp8, c, 0);
        }
}

// fp8 cache strides past the packed block (16-byte aligned: the copy
// engine; 5: rows off 16 bytes, the producer's register path), K and V
// interleaved in one allocation, caches off alignment (register path) for
// both types, a mid-sequence window.
TEST_P(BulkEmulatedTest, SeedGridStridesAlignmentAndInterleavedCaches) {
    uint32_t seed = 9100 + width();
    for (uint64_t pad : {uint64_t{16}, uint64_t{5}}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = lengths_around(16, {77, 300});
        c.cache_pad = pad;
        c.sliding_window = pad == 16 ? 11 : 150;
        c.k_scale = 1.5f;
        c.v_scale = 0.3f;
        c.seed = seed++;
        run_case(true, c, 0);
    }
    for (uint32_t mis : {0u, 1u, 3u}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = lengths_around(16, {61});
        c.misalign = mis;
        c.interleaved = mis == 0;
        c.k_scale = 0.7f;
        c.v_scale = 1.9f;
        c.seed = seed++;
        if (mis != 0) run_case(false, c, 0);
        run_case(true, c, 0);
    }
}

// The persistent launchers: num_ctas 1 (one block, every unit whole, the
// stream across units), 5 and 13 (cut units, blocks inside one unit), 64
// (more blocks than tiles); block sizes 1, 16, 64; windows.
TEST_P(BulkEmulatedTest, PersistentMatchesReferenceAtEveryBlockSizeWindowAndGrid) {
    uint32_t seed = 9200 + width();
    const uint32_t ctas[] = {1, 5, 13, 64};
    int i = 0;
    for (bool fp8 : {false, true})
        for (uint32_t bs : {1u, 16u, 64u}) {
            Case c;
            c.num_kv_heads = bs == 16 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * width();
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 3, 150});
            c.sliding_window = bs == 64 ? 7 : 0;
            c.cache_pad = fp8 && bs == 16 ? 16 : 0;
            c.k_scale = 0.6f;
            c.v_scale = 1.7f;
            c.seed = seed++;
            run_case(fp8, c, ctas[i++ % 4]);
        }
}

// One long sequence cut into many blocks (the 1 x 32768 shape, smaller):
// 2000 positions and an empty sequence over 7 blocks (records of 7 blocks
// merged in one round), over 23 blocks (two rounds of 16 records), and a
// table with no slack, so the producer's speculative first chunks are the
// right ones (every sequence fills max_blocks_per_seq blocks); scores of
// several hundred (the merge rescales to the common maximum).
TEST_P(BulkEmulatedTest, PersistentLongSequenceCutIntoManyBlocks) {
    uint32_t seed = 9300 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 1;
        c.num_q_heads = width();
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
        run_case(fp8, c, 23);
        c.seq_lens = {1024, 1024};
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.sliding_window = 0;
        c.inv_sqrt_d = 0.0;
        c.q_amp = 1.0f;
        c.table_slack = 0;
        c.seed = seed++;
        run_case(fp8, c, 11);
    }
}

// Counters return to zero and a second launch reproduces the first bit for
// bit; caches off alignment (the register path) in the persistent kernel;
// more sequences than a block scans at once (384).
TEST_P(BulkEmulatedTest, PersistentCountersAlignmentAndManySequences) {
    uint32_t seed = 9400 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        c.seq_lens = {300, 45, 0, 129};
        c.misalign = fp8 ? 0 : 1;
        c.cache_pad = fp8 ? 5 : 0;
        c.k_scale = 0.6f;
        c.v_scale = 1.1f;
        c.seed = seed++;
        run_case(fp8, c, 9, true);
    }
    Case c;
    c.num_kv_heads = 1;
    c.num_q_heads = width();
    std::mt19937 gen(9500 + width());
    for (int i = 0; i < 400; i++) c.seq_lens.push_back(static_cast<int32_t>(gen() % 20u));
    c.seed = seed++;
    run_case(width() == 8, c, 5);
    // 3 KV heads of the 400 sequences over 7 blocks: blocks start in the
    // middle of a sequence's units past the first 384 sequences and walk on
    // across sequences (and, under a head-by-head order, tried 2026-12-04
    // and measured neutral, from one head to the next).
    c.num_kv_heads = 3;
    c.num_q_heads = 3 * width();
    c.seed = seed++;
    run_case(width() != 8, c, 7);
    // 383 sequences (one per thread of the 384 but the last): the one-pass
    // locate's scan crosses all twelve warps, and a block's first tile lies
    // in whichever thread's interval holds it (zero lengths between them).
    c.seq_lens.resize(383);
    for (auto &l : c.seq_lens) l = static_cast<int32_t>(gen() % 4u == 0u ? 0u : gen() % 40u);
    c.num_kv_heads = 3;
    c.num_q_heads = 3 * width();
    c.seed = seed++;
    run_case(width() == 8, c, 11);
    run_case(width() != 8, c, 11, false, true);
}

// Up to 32 sequences every warp finds the block's first tile on its own (a
// warp scan of one length a lane, no barrier); 33 take the block scan. At
// 32 and 33 sequences of random lengths (zeros among them) over 9 and 6
// blocks, the blocks start inside different sequences' units, in the last
// lane's sequence too, and walk on across sequences.
TEST_P(BulkEmulatedTest, PersistentFirstTileFoundByAWarpUpTo32SequencesAndByTheBlockPast) {
    uint32_t seed = 9700 + width();
    std::mt19937 gen(9710 + width());
    for (uint32_t n : {32u, 33u}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width();
        for (uint32_t i = 0; i < n; i++)
            c.seq_lens.push_back(static_cast<int32_t>(gen() % 5u == 0u ? 0u : 1u + gen() % 60u));
        c.seq_lens.back() = 45; /* the last lane's sequence holds tiles */
        c.seed = seed++;
        run_case(n == 32u, c, 9);
        run_case(n != 32u, c, 6, false, true);
    }
}

// One persistent copy-engine launch (maps: the _tma twin, its maps encoded
// by its builders) of problem p on the given output, workspace and counters.
void launch_persist(const kl_module *m, bool fp8, bool maps, const Problem &p, const Case &c,
                    const paged_decode_problem::EmuInputs &in, kl_bf16 *out, float *ws, uint64_t ws_bytes,
                    uint32_t *counters, uint64_t nc, uint32_t num_ctas) {
    const paged_decode_ref::Shape &g = p.g;
    const float inv = static_cast<float>(g.inv_sqrt_d);
    const uint64_t block_stride = fp8 ? p.cache_stride : p.block_elems;
    kl_kernel k;
    kl_tensor_map km, vm;
    auto encode = [&](auto kbuilder, auto vbuilder, const auto *kp, const auto *vp) {
        KL_EMU_ASSERT_OK(kbuilder(&k, &km, kp, g.head_dim, g.num_kv_heads, g.block_size, p.num_blocks, g.head_dim,
                                  uint64_t{g.num_kv_heads} * g.head_dim, block_stride));
        KL_EMU_ASSERT_OK(vbuilder(&k, &vm, vp, g.head_dim, g.num_kv_heads, g.block_size, p.num_blocks, g.head_dim,
                                  uint64_t{g.num_kv_heads} * g.head_dim, block_stride));
    };
    if (maps && !fp8) {
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_tma_get(&k, m));
        encode(kl_paged_decode_persist_bf16_gqa_tma_k_map_encode, kl_paged_decode_persist_bf16_gqa_tma_v_map_encode,
               in.kbp, in.vbp);
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_tma(
            &k, in.q->data(), &km, &vm, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq, g.num_seqs,
            g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride, g.sliding_window, ws, counters,
            num_ctas, ws_bytes, nc, nullptr));
    } else if (maps) {
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_tma_get(&k, m));
        encode(kl_paged_decode_persist_fp8_gqa_tma_k_map_encode, kl_paged_decode_persist_fp8_gqa_tma_v_map_encode,
               in.k8p, in.v8p);
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_tma(
            &k, in.q->data(), &km, &vm, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq, g.num_seqs,
            g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale, g.q_stride,
            g.sliding_window, ws, counters, num_ctas, ws_bytes, nc, nullptr));
    } else if (!fp8) {
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_bulk_get(&k, m));
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_bf16_gqa_bulk(
            &k, in.q->data(), in.kbp, in.vbp, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
            g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride, g.sliding_window, ws,
            counters, num_ctas, ws_bytes, nc, nullptr));
    } else {
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_bulk_get(&k, m));
        KL_EMU_ASSERT_OK(kl_paged_decode_persist_fp8_gqa_bulk(
            &k, in.q->data(), in.k8p, in.v8p, out, in.tables->data(), in.lens->data(), g.max_blocks_per_seq,
            g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
            g.q_stride, p.cache_stride, g.sliding_window, ws, counters, num_ctas, ws_bytes, nc, nullptr));
    }
}

// The four persistent copy-engine launchers are programmatic dependent
// launches, so on the GPU two of them back to back on one stream overlap:
// the second's blocks may start once every block of the first has executed
// launch_dependents (at entry). Sharing workspace and counters is safe
// because nothing of the second touches global memory before its
// griddepcontrol.wait, which returns only once the first has completed
// (its last arrivals have put every counter back to zero) and its writes
// are visible. Here: a (lengths {100, 0, 37} at 4 blocks), b ({5, 90, 61}
// at 3 blocks: other cuts of other units), a again, back to back on one
// workspace and one set of counters with their own inputs and outputs; the
// emulator checks each launch's accesses before its wait against the one
// before (none, and every thread waits), and check_back_to_back each
// output against its reference and the counters against zero.
TEST_P(BulkEmulatedTest, BackToBackPdlLaunchesShareWorkspaceAndCountersTouchingNothingBeforeTheirWait) {
    uint32_t seed = 9900 + 10 * width();
    for (bool maps : {false, true})
        for (bool fp8 : {false, true}) {
            SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + (maps ? " tma" : " bulk") + ", pack width " +
                         std::to_string(width()));
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
            paged_decode_problem::check_back_to_back(a, b, out_a, out_b, ws, counters, nc, true, [&](int which) {
                if (which == 0)
                    launch_persist(m, fp8, maps, a, cs.first, in_a, out_a.data(), ws.data(), ws_bytes, counters.data(),
                                   nc, 4u);
                else
                    launch_persist(m, fp8, maps, b, cs.second, in_b, out_b.data(), ws.data(), ws_bytes, counters.data(),
                                   nc, 3u);
            });
        }
}

// The tensor-map twins (*_gqa_tma): block sizes 16 and 64 (a box is 16
// slots of one cache block), lengths around the block and 2000 (the ring
// wraps), windows that start and end inside a box (the rows outside are
// copied, NaN in these caches, and masked by the consumers), fp8 scales,
// a padded cache_stride (16-byte multiple) and K and V interleaved in one
// allocation (two maps into one buffer); the seed grid and the persistent
// schedule (cut units, a block of each, more blocks than tiles).
TEST_P(BulkEmulatedTest, TensorMapTwinsMatchReference) {
    uint32_t seed = 9600 + width();
    const uint32_t ctas[] = {0, 5, 0, 13, 0, 64, 0, 1};
    int i = 0;
    for (bool fp8 : {false, true})
        for (uint32_t bs : {16u, 64u})
            for (uint32_t sw : {0u, 37u}) {
                Case c;
                c.num_kv_heads = bs == 16 ? 2 : 1;
                c.num_q_heads = c.num_kv_heads * width();
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2000, 3 * static_cast<int32_t>(bs) + 5});
                c.sliding_window = sw;
                c.q_pad = sw ? 3 : 0;
                c.cache_pad = fp8 && sw ? 16 : 0;
                c.interleaved = fp8 && bs == 64 && sw == 0;
                c.k_scale = 0.45f;
                c.v_scale = 2.2f;
                c.seed = seed++;
                run_case(fp8, c, ctas[i % 8], false, true);
                run_case(fp8, c, ctas[(i + 1) % 8] ? ctas[(i + 1) % 8] : 7, i % 2 == 0, true);
                i++;
            }
}

// The tensor-map persistent twins on one block (every unit whole, the ring
// streaming across 18 units of 0-14 tiles), the case in which the H100 run
// of 2026-12-06 saw the bf16 twin leave NaN (paged_decode_test's
// Bf16GqaMatchesReferenceInBothVariants, seed 1020: 3 KV heads, lengths
// 0, 1, 16, 17, 35, 211, block 16).
TEST_P(BulkEmulatedTest, TensorMapPersistentOneBlockEveryUnitWhole) {
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 3;
        c.num_q_heads = 3 * width();
        c.block_size = 16;
        c.seq_lens = {0, 1, 16, 17, 35, 211};
        c.k_scale = 0.8f;
        c.v_scale = 1.3f;
        c.seed = 1020;
        run_case(fp8, c, 1, true, true);
    }
}

// The tensor-map persistent twins on one long sequence cut into many
// blocks (records of 7 and 23 blocks), scores of several hundred.
TEST_P(BulkEmulatedTest, TensorMapPersistentLongSequence) {
    uint32_t seed = 9700 + width();
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 1;
        c.num_q_heads = width();
        c.seq_lens = {2000, 0};
        c.inv_sqrt_d = 1.0;
        c.q_amp = 8.0f;
        c.k_scale = 2.0f;
        c.v_scale = 0.7f;
        c.seed = seed++;
        run_case(fp8, c, 23, false, true);
        c.seq_lens = {1999};
        c.sliding_window = 1500;
        c.seed = seed++;
        run_case(fp8, c, 7, false, true);
    }
}

// The declared extents are tight (issue 44), for all eight launchers: with
// no table slack and the last sequence the longest, its last table entry
// and its last query head's last column are read (a padded q row's tail
// never is); every length is read, every output row written. The
// persistent ones at 4 blocks over the 18 tiles of lengths {0, 5, 100} x 2
// KV heads (units of 1, 1, 1, 1, 7, 7): the last block's first piece is
// the last unit, cut at tile 13, so it writes record slot 0 of block
// num_ctas - 1, whose (m, l) of the last head end the workspace's declared
// extent, and uses the last unit's counter (as
// paged_decode_persist_emulated_test's ExtentsAreTight).
TEST_P(BulkEmulatedTest, ExtentsAreTight) {
    uint32_t seed = 9800 + width();
    for (bool maps : {false, true})
        for (uint32_t num_ctas : {0u, 4u})
            for (bool fp8 : {false, true}) {
                Case c;
                c.num_kv_heads = 2;
                c.num_q_heads = 2 * width();
                c.seq_lens = {0, 5, 100};
                c.table_slack = 0;
                c.q_pad = 8;
                c.cache_pad = fp8 ? 16 : 0;
                c.seed = seed++;
                emu_test::ExtentsReached ext(std::string("paged_decode_") + (num_ctas ? "persist_" : "attn_") +
                                             (fp8 ? "fp8" : "bf16") + (maps ? "_gqa_tma" : "_gqa_bulk"));
                run_case(fp8, c, num_ctas, false, maps, &ext);
                EXPECT_TRUE(ext.all());
            }
}

INSTANTIATE_TEST_SUITE_P(BothVariants, BulkEmulatedTest, ::testing::Values(4, 8),
                         paged_decode_problem::pack_width_name);

}  // namespace
