// The paged decode family's ten kernels from their own source on the CPU
// emulator (tests/emu, docs/EMULATOR.md), through the generated launchers
// and the emulated backend, in both variants (gqa4_d128, gqa8_d128):
//   paged_decode_attn_{bf16,fp8}{,_gqa}        the seed's four
//   paged_decode_split_{bf16,fp8}{,_gqa}       split-KV partials
//   paged_decode_split_combine{,_pdl}          their merge
// against the float64 reference and checks the GPU tests use
// (paged_decode_problem.h: fresh random problems, shuffled physical blocks,
// NaN wherever a kernel must not look; paged_decode_split_check.h: the
// workspace record by record). Outputs and workspaces start poisoned with
// guard elements; every access of the kernels is checked by the emulator
// (bounds of each buffer, read-only inputs, shared-memory races).
//
// Shapes: block sizes 1, 16, 64; lengths 0, 1, a block, a block + 1 and a
// longer one; sliding windows 0, shorter and longer than the lengths; fp8
// scales other than 1, cache strides larger than packed (odd ones too),
// K/V interleaved; padded q rows; odd head_dim and caches off alignment
// (the element-load paths). Sizes are small: the emulator runs a block's
// 256 threads as fibers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tests/emu/emu_test_util.h"
#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"
#include "tests/paged_decode/paged_decode_split_check.h"

namespace {

using emu::Access;
using paged_decode_problem::Case;
using paged_decode_problem::check_output;
using paged_decode_problem::kGuard;
using paged_decode_problem::lengths_around;
using paged_decode_problem::Problem;
using paged_decode_ref::Shape;

enum class Kind { kBf16, kFp8, kBf16Gqa, kFp8Gqa };
bool is_fp8(Kind k) { return k == Kind::kFp8 || k == Kind::kFp8Gqa; }
const char *kind_name(Kind k) {
    switch (k) {
    case Kind::kBf16: return "bf16";
    case Kind::kFp8: return "fp8";
    case Kind::kBf16Gqa: return "bf16_gqa";
    case Kind::kFp8Gqa: return "fp8_gqa";
    }
    return "?";
}

const kl_module *module_for(int width) {
    return emu_test::module("paged_decode", width == 4 ? "gqa4_d128" : "gqa8_d128");
}

template <class T>
std::unique_ptr<emu::Buffer<T>> input(const std::vector<T> &v, const char *name) {
    std::unique_ptr<emu::Buffer<T>> b(new emu::Buffer<T>(v.size(), Access::kRead, name));
    std::copy(v.begin(), v.end(), b->data());
    return b;
}

// A problem's inputs as emulated device memory, read-only.
struct EmuProblem {
    std::unique_ptr<emu::Buffer<kl_bf16>> q, kb, vb;
    std::unique_ptr<emu::Buffer<int32_t>> tables, lens;
    std::unique_ptr<emu::Buffer<kl_fp8_e4m3>> k8, v8;
    const kl_bf16 *kp_bf16 = nullptr, *vp_bf16 = nullptr;
    const kl_fp8_e4m3 *kp_fp8 = nullptr, *vp_fp8 = nullptr;

    EmuProblem(const Problem &p, const Case &c, bool fp8)
        : q(input(p.q_bits, "q")), tables(input(p.tables, "block_tables")), lens(input(p.lens, "seq_lens")) {
        if (!fp8) {
            kb = input(p.k_bf16, "k_cache");
            vb = input(p.v_bf16, "v_cache");
            kp_bf16 = kb->data() + c.misalign;
            vp_bf16 = vb->data() + c.misalign;
        } else if (c.interleaved) {
            k8 = input(p.kv_fp8, "kv_cache");
            kp_fp8 = k8->data() + c.misalign;
            vp_fp8 = kp_fp8 + p.block_elems;
        } else {
            k8 = input(p.k_fp8, "k_cache");
            v8 = input(p.v_fp8, "v_cache");
            kp_fp8 = k8->data() + c.misalign;
            vp_fp8 = v8->data() + c.misalign;
        }
    }
};

std::string trace(Kind kind, int width, const Case &c) {
    return std::string(kind_name(kind)) + ": " + paged_decode_problem::describe(c, is_fp8(kind)) + ", module gqa" +
           std::to_string(width) + "_d128";
}

// ---- the seed's kernels ------------------------------------------------------------

// `ext`, if given, takes the launch's reach of its declared extents.
void run_seed(Kind kind, int width, const Case &c, emu_test::ExtentsReached *ext = nullptr) {
    SCOPED_TRACE(std::string("paged_decode_attn_") + trace(kind, width, c));
    const Problem p = paged_decode_problem::build(is_fp8(kind), c);
    const std::vector<double> ref = paged_decode_problem::reference(p);
    const Shape &g = p.g;
    const kl_module *mod = module_for(width);
    ASSERT_NE(mod, nullptr);
    const EmuProblem d(p, c, is_fp8(kind));
    emu::Buffer<kl_bf16> out((size_t)g.num_seqs * g.num_q_heads * g.head_dim, Access::kWrite, "output", kGuard);
    const float inv = (float)g.inv_sqrt_d;
    kl_kernel k;
    switch (kind) {
    case Kind::kBf16:
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_get(&k, mod));
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16(&k, d.q->data(), d.kp_bf16, d.vp_bf16, out.data(), d.tables->data(),
                                                   d.lens->data(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                                   g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                                                   g.sliding_window, nullptr));
        break;
    case Kind::kBf16Gqa:
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_get(&k, mod));
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_gqa(&k, d.q->data(), d.kp_bf16, d.vp_bf16, out.data(),
                                                       d.tables->data(), d.lens->data(), g.max_blocks_per_seq,
                                                       g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim,
                                                       g.block_size, inv, g.q_stride, g.sliding_window, nullptr));
        break;
    case Kind::kFp8:
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_get(&k, mod));
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8(&k, d.q->data(), d.kp_fp8, d.vp_fp8, out.data(), d.tables->data(),
                                                  d.lens->data(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                                  g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                                                  g.q_stride, p.cache_stride, g.sliding_window, nullptr));
        break;
    case Kind::kFp8Gqa:
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_get(&k, mod));
        KL_EMU_ASSERT_OK(kl_paged_decode_attn_fp8_gqa(&k, d.q->data(), d.kp_fp8, d.vp_fp8, out.data(), d.tables->data(),
                                                      d.lens->data(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                                      g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale,
                                                      c.v_scale, g.q_stride, p.cache_stride, g.sliding_window,
                                                      nullptr));
        break;
    }
    if (ext != nullptr) EXPECT_TRUE(ext->add());
    check_output(p, ref, out.with_guards());
}

// ---- split-KV partials and both combines -------------------------------------------------

kl_status launch_partial(Kind kind, const kl_module *mod, const EmuProblem &d, const Problem &p, const Case &c,
                         float *ws, uint32_t splits, uint64_t ws_bytes) {
    const Shape &g = p.g;
    const float inv = (float)g.inv_sqrt_d;
    kl_kernel k;
    kl_status st;
    switch (kind) {
    case Kind::kBf16:
        if ((st = kl_paged_decode_split_bf16_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_bf16(&k, d.q->data(), d.kp_bf16, d.vp_bf16, ws, d.tables->data(), d.lens->data(),
                                          g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim,
                                          g.block_size, inv, g.q_stride, g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kBf16Gqa:
        if ((st = kl_paged_decode_split_bf16_gqa_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_bf16_gqa(&k, d.q->data(), d.kp_bf16, d.vp_bf16, ws, d.tables->data(),
                                              d.lens->data(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                              g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                                              g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kFp8:
        if ((st = kl_paged_decode_split_fp8_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_fp8(&k, d.q->data(), d.kp_fp8, d.vp_fp8, ws, d.tables->data(), d.lens->data(),
                                         g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim,
                                         g.block_size, inv, c.k_scale, c.v_scale, g.q_stride, p.cache_stride,
                                         g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kFp8Gqa:
        if ((st = kl_paged_decode_split_fp8_gqa_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_fp8_gqa(&k, d.q->data(), d.kp_fp8, d.vp_fp8, ws, d.tables->data(),
                                             d.lens->data(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                             g.num_kv_heads, g.head_dim, g.block_size, inv, c.k_scale, c.v_scale,
                                             g.q_stride, p.cache_stride, g.sliding_window, splits, ws_bytes, nullptr);
    }
    return KL_ERROR_INVALID_ARGUMENT;
}

// What a split run's launches reached of their declared extents.
struct SplitExtents {
    emu_test::ExtentsReached *partial, *combine, *combine_pdl;
};

void run_split(Kind kind, int width, const Case &c, const std::vector<uint32_t> &split_counts,
               const SplitExtents *ext = nullptr) {
    SCOPED_TRACE(std::string("paged_decode_split_") + trace(kind, width, c));
    const Problem p = paged_decode_problem::build(is_fp8(kind), c);
    const Shape &g = p.g;
    const std::vector<double> ref = paged_decode_problem::reference(p);
    const kl_module *mod = module_for(width);
    ASSERT_NE(mod, nullptr);
    const EmuProblem d(p, c, is_fp8(kind));
    kl_kernel combine, combine_pdl;
    KL_EMU_ASSERT_OK(kl_paged_decode_split_combine_get(&combine, mod));
    KL_EMU_ASSERT_OK(kl_paged_decode_split_combine_pdl_get(&combine_pdl, mod));
    for (uint32_t splits : split_counts) {
        SCOPED_TRACE("num_splits " + std::to_string(splits));
        const uint64_t ws_bytes = kl_paged_decode_split_workspace_bytes(g.num_seqs, g.num_q_heads, g.head_dim, splits);
        // The workspace with kWsGuard poisoned floats after it, inside the
        // registration: check_workspace reads them back.
        emu::Buffer<float> ws(ws_bytes / 4 + paged_decode_problem::kWsGuard, Access::kReadWrite, "workspace");
        const size_t n_out = (size_t)g.num_seqs * g.num_q_heads * g.head_dim;
        emu::Buffer<kl_bf16> out(n_out, Access::kWrite, "output", kGuard), out_pdl(n_out, Access::kWrite, "output", kGuard);
        KL_EMU_ASSERT_OK(launch_partial(kind, mod, d, p, c, ws.data(), splits, ws_bytes));
        if (ext != nullptr) EXPECT_TRUE(ext->partial->add());
        const std::vector<float> ws_after(ws.data(), ws.data() + ws.size());
        KL_EMU_ASSERT_OK(kl_paged_decode_split_combine(&combine, ws.data(), out.data(), g.num_seqs, g.num_q_heads,
                                                       g.head_dim, splits, ws_bytes, nullptr));
        if (ext != nullptr) EXPECT_TRUE(ext->combine->add());
        KL_EMU_ASSERT_OK(kl_paged_decode_split_combine_pdl(&combine_pdl, ws.data(), out_pdl.data(), g.num_seqs,
                                                           g.num_q_heads, g.head_dim, splits, ws_bytes, nullptr));
        if (ext != nullptr) EXPECT_TRUE(ext->combine_pdl->add());
        paged_decode_problem::check_workspace(p, c, splits, ws_after);
        check_output(p, ref, out.with_guards());
        check_output(p, ref, out_pdl.with_guards());
        if (::testing::Test::HasFailure()) return;
    }
}

// ---- cases -------------------------------------------------------------------------------

Case plain_case(uint32_t bs, std::vector<int32_t> lens, uint32_t seed) {
    Case c;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.block_size = bs;
    c.seq_lens = lens;
    c.seed = seed;
    return c;
}
Case gqa_case(int width, uint32_t bs, std::vector<int32_t> lens, uint32_t seed) {
    Case c = plain_case(bs, lens, seed);
    c.num_kv_heads = 1;
    c.num_q_heads = (uint32_t)width;
    return c;
}

// Seed kernels, bf16.
TEST(PagedDecodeEmulated, Bf16BlockSizes1_16_64) {
    run_seed(Kind::kBf16, 4, plain_case(1, lengths_around(1, {9}), 101));
    run_seed(Kind::kBf16, 4, plain_case(16, lengths_around(16, {45}), 102));
    run_seed(Kind::kBf16, 8, plain_case(64, lengths_around(64, {150}), 103));
}
TEST(PagedDecodeEmulated, Bf16SlidingWindowsShorterAndLonger) {
    Case c = plain_case(16, {0, 1, 16, 17, 40}, 104);
    c.sliding_window = 7;
    run_seed(Kind::kBf16, 4, c);
    c.sliding_window = 100;
    c.seed = 105;
    run_seed(Kind::kBf16, 8, c);
}
TEST(PagedDecodeEmulated, Bf16OddHeadDimPaddedQOffAlignmentCache) {
    Case c = plain_case(16, {0, 1, 17, 33}, 106);
    c.head_dim = 40;  // not a multiple of 8: element loads
    c.q_pad = 3;
    c.misalign = 1;
    run_seed(Kind::kBf16, 4, c);
}
// Seed kernels, fp8.
TEST(PagedDecodeEmulated, Fp8ScalesPaddedStrideInterleaved) {
    Case c = plain_case(16, lengths_around(16, {40}), 107);
    c.k_scale = 0.5f;
    c.v_scale = 1.75f;
    c.cache_pad = 24;
    c.interleaved = true;
    run_seed(Kind::kFp8, 4, c);
}
TEST(PagedDecodeEmulated, Fp8OddStrideBlockSize1AndWindow) {
    Case c = plain_case(1, {0, 1, 2, 11}, 108);
    c.k_scale = 2.0f;
    c.v_scale = 0.25f;
    c.cache_pad = 3;  // odd: element loads
    c.sliding_window = 5;
    run_seed(Kind::kFp8, 8, c);
}
TEST(PagedDecodeEmulated, Fp8BlockSize64OffAlignment) {
    Case c = plain_case(64, {0, 1, 64, 65, 130}, 109);
    c.misalign = 3;
    c.k_scale = 0.75f;
    run_seed(Kind::kFp8, 4, c);
}
// Seed kernels, GQA-packed, both variants.
TEST(PagedDecodeEmulated, Bf16GqaBothVariants) {
    for (int w : {4, 8}) {
        run_seed(Kind::kBf16Gqa, w, gqa_case(w, 16, lengths_around(16, {41}), 110 + w));
        Case c = gqa_case(w, 1, {0, 1, 2, 9}, 120 + w);
        c.sliding_window = 4;
        c.q_pad = 8;
        run_seed(Kind::kBf16Gqa, w, c);
    }
}
TEST(PagedDecodeEmulated, Bf16GqaBlockSize64AndOffAlignment) {
    Case c = gqa_case(4, 64, {0, 1, 64, 65, 100}, 130);
    c.misalign = 1;
    c.sliding_window = 70;
    run_seed(Kind::kBf16Gqa, 4, c);
}
TEST(PagedDecodeEmulated, Fp8GqaBothVariants) {
    for (int w : {4, 8}) {
        Case c = gqa_case(w, 16, lengths_around(16, {38}), 140 + w);
        c.k_scale = 0.5f;
        c.v_scale = 3.0f;
        c.cache_pad = 16;
        run_seed(Kind::kFp8Gqa, w, c);
    }
    Case c = gqa_case(8, 64, {0, 1, 65, 90}, 150);
    c.interleaved = true;
    c.misalign = 5;
    c.cache_pad = 5;
    c.sliding_window = 20;
    run_seed(Kind::kFp8Gqa, 8, c);
}

// The declared extents are tight (issue 44). With no table slack and the
// last sequence the longest, its window reads its last table entry and
// its last query head's last column (q's last row ends at num_q_heads *
// head_dim, not at q_stride: a padded row's tail is never read); every
// length is read and every output row written (zeros for a length 0). A
// split launch writes (m, l) of every workspace row, empty splits too, so
// the last sequence's last split's last head's l ends the workspace
// (num_seqs * num_splits * num_q_heads * (head_dim + 2) floats); the
// combines read it where that split is not empty, and write every output
// row.
TEST(PagedDecodeEmulated, ExtentsAreTight) {
    emu_test::ExtentsReached combine("paged_decode_split_combine"), combine_pdl("paged_decode_split_combine_pdl");
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa}) {
        const bool gqa = kind == Kind::kBf16Gqa || kind == Kind::kFp8Gqa;
        Case c = gqa ? gqa_case(4, 16, {0, 17, 40}, 250) : plain_case(16, {0, 17, 40}, 250);
        c.table_slack = 0;
        c.q_pad = 8;
        if (is_fp8(kind)) c.cache_pad = 8;
        emu_test::ExtentsReached seed(std::string("paged_decode_attn_") + kind_name(kind));
        run_seed(kind, 4, c, &seed);
        EXPECT_TRUE(seed.all());
        emu_test::ExtentsReached partial(std::string("paged_decode_split_") + kind_name(kind));
        const SplitExtents ext{&partial, &combine, &combine_pdl};
        // 3 blocks in 4 splits, the last one empty: the partial writes its
        // (m, l) all the same; in 2 splits the last is not empty, so the
        // combines read its l (they skip an empty split's).
        run_split(kind, 4, c, {4, 2}, &ext);
        EXPECT_TRUE(partial.all());
    }
    EXPECT_TRUE(combine.all());
    EXPECT_TRUE(combine_pdl.all());
}

// Split-KV partials + combine and combine_pdl.
TEST(PagedDecodeEmulated, SplitBf16) {
    run_split(Kind::kBf16, 4, plain_case(16, lengths_around(16, {70}), 201), {1, 3, 7});
    Case c = plain_case(1, {0, 1, 2, 13}, 202);
    c.sliding_window = 6;
    c.head_dim = 40;
    c.misalign = 1;
    run_split(Kind::kBf16, 8, c, {2, 16});
}
TEST(PagedDecodeEmulated, SplitFp8) {
    Case c = plain_case(16, lengths_around(16, {50}), 203);
    c.k_scale = 0.5f;
    c.v_scale = 1.5f;
    c.cache_pad = 8;
    c.interleaved = true;
    run_split(Kind::kFp8, 4, c, {1, 4});
    Case d = plain_case(64, {0, 1, 64, 65, 140}, 204);
    d.cache_pad = 3;
    d.sliding_window = 100;
    run_split(Kind::kFp8, 8, d, {3});
}
TEST(PagedDecodeEmulated, SplitBf16GqaBothVariants) {
    for (int w : {4, 8}) run_split(Kind::kBf16Gqa, w, gqa_case(w, 16, lengths_around(16, {60}), 210 + w), {1, 3});
    Case c = gqa_case(4, 1, {0, 1, 3, 12}, 220);
    c.sliding_window = 5;
    c.misalign = 1;
    run_split(Kind::kBf16Gqa, 4, c, {5});
}
TEST(PagedDecodeEmulated, SplitFp8GqaBothVariants) {
    for (int w : {4, 8}) {
        Case c = gqa_case(w, 16, lengths_around(16, {55}), 230 + w);
        c.k_scale = 1.25f;
        c.v_scale = 0.5f;
        c.cache_pad = 32;
        run_split(Kind::kFp8Gqa, w, c, {2, 7});
    }
    Case c = gqa_case(8, 64, {0, 1, 64, 65, 129}, 240);
    c.interleaved = true;
    c.cache_pad = 1;
    run_split(Kind::kFp8Gqa, 8, c, {1, 3});
}

}  // namespace
