// The tensor-core GQA decode kernels (paged_decode_attn_{bf16,fp8}_gqa_mma,
// paged_decode_split_{bf16,fp8}_gqa_mma + paged_decode_split_combine) run
// on the CPU from their own source: the fiber emulator of
// tests/mla_attention/mma_emulator.h plus paged_decode_emu.h (mma.sync f16
// and bf16, the packed E4M3 cvt, shuffles, votes, byte permutes, checked
// loads, each from the PTX ISA's definition). No GPU needed: this pins the
// fragment layouts, dim and position permutations, masks, the table walk,
// both load paths and the split ranges before a GPU runs them
// (paged_decode_test / paged_decode_split_test do that on the GPU).
//
// Every launch goes through the generated launcher on the recording
// backend; the recorded grid, block and packed argument bytes are what the
// emulated kernel receives (unpacked at the spec's offsets, each size
// checked against the kernel parameter's type), so the launcher's packing
// and the kernel's parameters must agree.
//
// Inputs: paged_decode_problem.h's random problems (fresh per case,
// KL_TEST_SEED mixes in another seed; shuffled physical blocks, NaN
// wherever a kernel must not look), against the float64 reference, checked
// as the GPU tests check: ||out - ref|| / ||ref|| < 1e-2, every element
// within 1e-3 max|ref| + 1e-2 |ref|, zeros for length 0, guards untouched.
// Reads outside the inputs abort with the thread and address.
//
// Built twice (BUILD): DECODE_GQA_PACK_WIDTH 4 and 8 (the variants).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "klaunch/record_backend.h"
#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"

#include "tests/mla_attention/mma_emulator.h"
#include "tests/paged_decode/paged_decode_emu.h"

#ifndef DECODE_GQA_PACK_WIDTH
#error "build with -DDECODE_GQA_PACK_WIDTH=4 or 8 (the variant)"
#endif
#define DECODE_GQA_PACK_HEAD_DIM 128
// The kernel sources, without their #include lines (a genrule strips them).
#include "tests/paged_decode/emu_decode_mma_kernels.inc"

namespace {

using paged_decode_problem::Case;
using paged_decode_problem::kGuard;
using paged_decode_problem::kPoisonBf16;
using paged_decode_problem::lengths_around;
using paged_decode_problem::Problem;

constexpr int kWidth = DECODE_GQA_PACK_WIDTH;

// ---- the emulated backend: a recorded launch, run on the emulator ------------------

template <class T> T arg(const kl_record &r, size_t i) {
    if (r.desc->params[i].size != sizeof(T)) emu::fail("launcher and kernel disagree on a parameter's size", i);
    T v;
    std::memcpy(&v, r.args + r.desc->params[i].offset, sizeof(T));
    return v;
}

template <class... A, size_t... I>
void call(void (*kernel)(A...), const kl_record &r, std::index_sequence<I...>) {
    kernel(arg<A>(r, I)...);
}

// Runs the recorded launch's grid of `kernel` with its recorded arguments.
template <class... A> void run_recorded(void (*kernel)(A...), const kl_record &r) {
    ASSERT_EQ(r.desc->num_params, sizeof...(A)) << r.entry << ": the launcher packs another number of arguments";
    ASSERT_EQ(r.shared_bytes, 0u);
    static unsigned char smem[16];
    emu::launch(dim3{r.grid[0], r.grid[1], r.grid[2]}, dim3{r.block[0], r.block[1], r.block[2]}, smem, 0,
                [&] { call(kernel, r, std::index_sequence_for<A...>{}); });
}

std::string module_text() {
    return "klaunch-module 1\nfamily paged_decode\nvariant gqa" + std::to_string(kWidth) +
           "_d128\nspec_hash test\nsource_hash unknown\nconst DECODE_GQA_PACK_WIDTH " + std::to_string(kWidth) +
           "\nconst DECODE_GQA_PACK_HEAD_DIM 128\n";
}

class MmaEmulatedTest : public ::testing::Test {
  protected:
    void SetUp() override {
        kl_record_backend_init(&rb_, records_, 4);
        const std::string text = module_text();
        ASSERT_EQ(kl_module_load(&rb_.base, text.c_str(), text.size(), &mod_), KL_SUCCESS) << kl_last_error_message();
    }
    void TearDown() override {
        kl_module_unload(&mod_);
        emu::state().readable.clear();
    }

    template <class T> void readable(const std::vector<T> &v) {
        if (!v.empty())
            emu::state().readable.push_back(
                emu::Range{(uintptr_t)v.data(), (uintptr_t)v.data() + v.size() * sizeof(T)});
    }

    // One case through kernel kind (fp8 or bf16; splits 0: the seed-grid
    // launcher, else the split launcher + combine).
    void run_case(bool fp8, const Case &c, uint32_t splits) {
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + (splits ? " split x" + std::to_string(splits) : " attn") +
                     ": " + paged_decode_problem::describe(c, fp8) + ", pack width " + std::to_string(kWidth));
        const Problem p = paged_decode_problem::build(fp8, c);
        const std::vector<double> ref = paged_decode_problem::reference(p);
        const paged_decode_ref::Shape &g = p.g;
        emu::state().readable.clear();
        readable(p.q_bits);
        readable(p.tables);
        readable(p.lens);
        readable(p.k_bf16);
        readable(p.v_bf16);
        readable(p.k_fp8);
        readable(p.v_fp8);
        readable(p.kv_fp8);

        const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
        std::vector<kl_bf16> out(kGuard + n_out + kGuard, kl_bf16{kPoisonBf16});
        kl_bf16 *o = out.data() + kGuard;
        const kl_bf16 *kb = nullptr, *vb = nullptr;
        const kl_fp8_e4m3 *k8 = nullptr, *v8 = nullptr;
        if (!fp8) {
            kb = p.k_bf16.data() + c.misalign;
            vb = p.v_bf16.data() + c.misalign;
        } else if (c.interleaved) {
            k8 = p.kv_fp8.data() + c.misalign;
            v8 = k8 + p.block_elems;
        } else {
            k8 = p.k_fp8.data() + c.misalign;
            v8 = p.v_fp8.data() + c.misalign;
        }
        const float inv = static_cast<float>(g.inv_sqrt_d);
        kl_record_backend_clear(&rb_);
        kl_kernel k;
        if (splits == 0) {
            if (!fp8) {
                ASSERT_EQ(kl_paged_decode_attn_bf16_gqa_mma_get(&k, &mod_), KL_SUCCESS);
                ASSERT_EQ(kl_paged_decode_attn_bf16_gqa_mma(&k, p.q_bits.data(), kb, vb, o, p.tables.data(),
                                                            p.lens.data(), g.max_blocks_per_seq, g.num_seqs,
                                                            g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size,
                                                            inv, g.q_stride, g.sliding_window, nullptr),
                          KL_SUCCESS)
                    << kl_last_error_message();
                ASSERT_EQ(rb_.count, 1u);
                run_recorded(paged_decode_attn_bf16_gqa_mma, records_[0]);
            } else {
                ASSERT_EQ(kl_paged_decode_attn_fp8_gqa_mma_get(&k, &mod_), KL_SUCCESS);
                ASSERT_EQ(kl_paged_decode_attn_fp8_gqa_mma(&k, p.q_bits.data(), k8, v8, o, p.tables.data(),
                                                           p.lens.data(), g.max_blocks_per_seq, g.num_seqs,
                                                           g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                                                           c.k_scale, c.v_scale, g.q_stride, p.cache_stride,
                                                           g.sliding_window, nullptr),
                          KL_SUCCESS)
                    << kl_last_error_message();
                ASSERT_EQ(rb_.count, 1u);
                run_recorded(paged_decode_attn_fp8_gqa_mma, records_[0]);
            }
        } else {
            const uint64_t ws_bytes =
                kl_paged_decode_split_workspace_bytes(g.num_seqs, g.num_q_heads, g.head_dim, splits);
            std::vector<uint32_t> ws(ws_bytes / 4, 0xFFFFFFFFu);  // NaN: an unwritten record read shows
            float *wsp = reinterpret_cast<float *>(ws.data());
            if (!fp8) {
                ASSERT_EQ(kl_paged_decode_split_bf16_gqa_mma_get(&k, &mod_), KL_SUCCESS);
                ASSERT_EQ(kl_paged_decode_split_bf16_gqa_mma(&k, p.q_bits.data(), kb, vb, wsp, p.tables.data(),
                                                             p.lens.data(), g.max_blocks_per_seq, g.num_seqs,
                                                             g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size,
                                                             inv, g.q_stride, g.sliding_window, splits, ws_bytes,
                                                             nullptr),
                          KL_SUCCESS)
                    << kl_last_error_message();
                ASSERT_EQ(rb_.count, 1u);
                run_recorded(paged_decode_split_bf16_gqa_mma, records_[0]);
            } else {
                ASSERT_EQ(kl_paged_decode_split_fp8_gqa_mma_get(&k, &mod_), KL_SUCCESS);
                ASSERT_EQ(kl_paged_decode_split_fp8_gqa_mma(&k, p.q_bits.data(), k8, v8, wsp, p.tables.data(),
                                                            p.lens.data(), g.max_blocks_per_seq, g.num_seqs,
                                                            g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size,
                                                            inv, c.k_scale, c.v_scale, g.q_stride, p.cache_stride,
                                                            g.sliding_window, splits, ws_bytes, nullptr),
                          KL_SUCCESS)
                    << kl_last_error_message();
                ASSERT_EQ(rb_.count, 1u);
                run_recorded(paged_decode_split_fp8_gqa_mma, records_[0]);
            }
            readable(ws);
            kl_kernel comb;
            ASSERT_EQ(kl_paged_decode_split_combine_get(&comb, &mod_), KL_SUCCESS);
            ASSERT_EQ(kl_paged_decode_split_combine(&comb, wsp, o, g.num_seqs, g.num_q_heads, g.head_dim, splits,
                                                    ws_bytes, nullptr),
                      KL_SUCCESS)
                << kl_last_error_message();
            ASSERT_EQ(rb_.count, 2u);
            run_recorded(paged_decode_split_combine, records_[1]);
        }
        paged_decode_problem::check_output(p, ref, out);
    }

    kl_record records_[4];
    kl_record_backend rb_;
    kl_module mod_;
};

// Block sizes 1 (a table entry per position: the general path), 16 and 64
// (the fast path), lengths 0, 1, a block, a block + 1 and longer, windows
// none / shorter / longer than the sequences, q rows padded.
TEST_F(MmaEmulatedTest, Bf16MatchesReferenceAtEveryBlockSizeAndWindow) {
    uint32_t seed = 7000 + kWidth;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {0u, 7u, 100000u}) {
            Case c;
            c.num_kv_heads = bs == 16 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * kWidth;
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
TEST_F(MmaEmulatedTest, Fp8MatchesReferenceWithScalesStridesAndWindows) {
    uint32_t seed = 7100 + kWidth;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint64_t pad : {uint64_t{0}, uint64_t{16}, uint64_t{5}}) {
            Case c;
            c.num_kv_heads = bs == 64 ? 2 : 1;
            c.num_q_heads = c.num_kv_heads * kWidth;
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
TEST_F(MmaEmulatedTest, OffAlignmentAndInterleavedCaches) {
    uint32_t seed = 7200 + kWidth;
    for (uint32_t mis : {0u, 1u, 3u}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * kWidth;
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
TEST_F(MmaEmulatedTest, LargeScoresNeedTheRunningMax) {
    uint32_t seed = 7300 + kWidth;
    for (bool fp8 : {false, true}) {
        Case c;
        c.num_kv_heads = 1;
        c.num_q_heads = kWidth;
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
TEST_F(MmaEmulatedTest, LongSequenceWithAMidBlockWindow) {
    uint32_t seed = 7400 + kWidth;
    for (bool fp8 : {false, true})
        for (uint32_t bs : {16u, 64u}) {
            Case c;
            c.num_kv_heads = 1;
            c.num_q_heads = kWidth;
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
TEST_F(MmaEmulatedTest, SplitPartialsAndCombineMatchReference) {
    uint32_t seed = 7500 + kWidth;
    for (bool fp8 : {false, true})
        for (uint32_t bs : {1u, 16u}) {
            const uint32_t splits = bs == 1 ? 3u : 7u;
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = 2 * kWidth;
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

}  // namespace
