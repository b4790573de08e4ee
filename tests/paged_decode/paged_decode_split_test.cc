// GPU tests of the split-KV (flash-decoding) launchers of the paged decode
// family (specs/paged_decode.yaml, klaunch/paged_decode_split.h):
//   paged_decode_split_bf16      paged_decode_split_fp8          (plain)
//   paged_decode_split_bf16_gqa  paged_decode_split_fp8_gqa      (GQA-packed)
//   paged_decode_split_bf16_gqa_mma  paged_decode_split_fp8_gqa_mma (tensor cores)
// each followed by paged_decode_split_combine, from the embedded fatbins of
// both variants (gqa4_d128, gqa8_d128).
//
// Each case draws a fresh random problem (paged_decode_problem.h: shuffled
// physical blocks, NaN wherever a kernel must not look) and runs it with
// several split counts: 1, 2, 7, 64 (more splits than cache blocks, so most
// are empty) and the choice of kl_paged_decode_num_splits for this GPU.
// Before every run the workspace (with guard floats after it) and the
// output (with guards on both sides) are NaN (all bits set). Checked:
// - the output against the float64 reference (paged_decode_reference.h)
//   as the seed kernels' tests check it: ||out - ref|| / ||ref|| < 1e-2,
//   every element within 1e-3 * max|ref| + 1e-2 * |ref|, exact zeros for
//   L == 0, the guards untouched;
// - the workspace against its documented contents, split by split, with
//   each split's positions computed here from the documented rule (whole
//   cache blocks, per = ceil_div(blocks, num_splits)): an empty split has
//   (m, l) = (-inf, 0) exactly and its acc row untouched (still NaN); a
//   non-empty one has m = the largest base-2 score of its positions, the
//   split's log-sum-exp m + log2(l) within a tolerance tight enough that a
//   missing or doubled position shows, and acc / l equal to the split's own
//   softmax-weighted mean of v (float64); nothing past the workspace is
//   written;
// - with q = 0 (every score 0) l must count the split's positions exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"
#include "tests/paged_decode/paged_decode_split_check.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
using paged_decode_problem::Case;
using paged_decode_problem::check_output;
using paged_decode_problem::kGuard;
using paged_decode_problem::lengths_around;
using paged_decode_problem::module_for;
using paged_decode_problem::Problem;
using paged_decode_problem::check_workspace;
using paged_decode_problem::kWsGuard;
using paged_decode_ref::Shape;

// ---- the device ----------------------------------------------------------------

// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT of the test's device.
uint32_t sm_count() {
    static uint32_t n = [] {
        kl_cuda_backend *cuda = kl_test::require_gpu();
        int v = 0;
        if (cuda->api.device_get_attribute(&v, 16, cuda->device) != 0 || v <= 0)
            throw std::runtime_error("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) failed");
        return static_cast<uint32_t>(v);
    }();
    return n;
}

// ---- cases --------------------------------------------------------------------------

enum class Kind { kBf16, kFp8, kBf16Gqa, kFp8Gqa, kBf16GqaMma, kFp8GqaMma };

bool is_fp8(Kind k) { return k == Kind::kFp8 || k == Kind::kFp8Gqa || k == Kind::kFp8GqaMma; }
bool is_packed(Kind k) { return k != Kind::kBf16 && k != Kind::kFp8; }

const char *kind_name(Kind k) {
    switch (k) {
    case Kind::kBf16:
        return "paged_decode_split_bf16";
    case Kind::kFp8:
        return "paged_decode_split_fp8";
    case Kind::kBf16Gqa:
        return "paged_decode_split_bf16_gqa";
    case Kind::kFp8Gqa:
        return "paged_decode_split_fp8_gqa";
    case Kind::kBf16GqaMma:
        return "paged_decode_split_bf16_gqa_mma";
    case Kind::kFp8GqaMma:
        return "paged_decode_split_fp8_gqa_mma";
    }
    return "?";
}

constexpr uint32_t kRule = 0;  // in a list of split counts: kl_paged_decode_num_splits' choice
const std::vector<uint32_t> kSplitCounts = {1, 2, 7, 64, kRule};

// The rule's choice for a case: the grid's x extent and the blocks that fit
// at once (one packed block an SM, two plain ones), as the header says.
uint32_t rule_splits(Kind kind, const Case &c) {
    int32_t max_len = 0;
    for (int32_t l : c.seq_lens) max_len = std::max(max_len, l);
    const bool packed = is_packed(kind);
    return kl_paged_decode_num_splits(static_cast<uint32_t>(c.seq_lens.size()),
                                      packed ? c.num_kv_heads : c.num_q_heads, static_cast<uint32_t>(max_len),
                                      c.sliding_window, c.block_size, packed ? sm_count() : 2 * sm_count());
}

// ---- device copies of a problem ----------------------------------------------------------

struct DeviceProblem {
    DeviceBuffer<kl_bf16> q;
    DeviceBuffer<int32_t> tables, lens;
    std::unique_ptr<DeviceBuffer<kl_bf16>> kb, vb;
    std::unique_ptr<DeviceBuffer<kl_fp8_e4m3>> k8, v8;
    const kl_bf16 *kp_bf16 = nullptr, *vp_bf16 = nullptr;
    const kl_fp8_e4m3 *kp_fp8 = nullptr, *vp_fp8 = nullptr;

    DeviceProblem(const Problem &p, const Case &c, bool fp8) : q(p.q_bits), tables(p.tables), lens(p.lens) {
        if (!fp8) {
            kb.reset(new DeviceBuffer<kl_bf16>(p.k_bf16));
            vb.reset(new DeviceBuffer<kl_bf16>(p.v_bf16));
            kp_bf16 = kb->get() + c.misalign;
            vp_bf16 = vb->get() + c.misalign;
        } else if (c.interleaved) {
            k8.reset(new DeviceBuffer<kl_fp8_e4m3>(p.kv_fp8));
            kp_fp8 = k8->get() + c.misalign;
            vp_fp8 = kp_fp8 + p.block_elems;
        } else {
            k8.reset(new DeviceBuffer<kl_fp8_e4m3>(p.k_fp8));
            v8.reset(new DeviceBuffer<kl_fp8_e4m3>(p.v_fp8));
            kp_fp8 = k8->get() + c.misalign;
            vp_fp8 = v8->get() + c.misalign;
        }
    }
};

kl_status launch_partial(Kind kind, const kl_module *mod, const DeviceProblem &d, const Problem &p, const Case &c,
                         float *ws, uint32_t splits, uint64_t ws_bytes) {
    const Shape &g = p.g;
    const float inv = static_cast<float>(g.inv_sqrt_d);
    kl_kernel k;
    kl_status st;
    switch (kind) {
    case Kind::kBf16:
        if ((st = kl_paged_decode_split_bf16_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_bf16(&k, d.q.get(), d.kp_bf16, d.vp_bf16, ws, d.tables.get(), d.lens.get(),
                                          g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim,
                                          g.block_size, inv, g.q_stride, g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kBf16Gqa:
        if ((st = kl_paged_decode_split_bf16_gqa_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_bf16_gqa(&k, d.q.get(), d.kp_bf16, d.vp_bf16, ws, d.tables.get(), d.lens.get(),
                                              g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads,
                                              g.head_dim, g.block_size, inv, g.q_stride, g.sliding_window, splits,
                                              ws_bytes, nullptr);
    case Kind::kFp8:
        if ((st = kl_paged_decode_split_fp8_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_fp8(&k, d.q.get(), d.kp_fp8, d.vp_fp8, ws, d.tables.get(), d.lens.get(),
                                         g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim,
                                         g.block_size, inv, c.k_scale, c.v_scale, g.q_stride, p.cache_stride,
                                         g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kFp8Gqa:
        if ((st = kl_paged_decode_split_fp8_gqa_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_fp8_gqa(&k, d.q.get(), d.kp_fp8, d.vp_fp8, ws, d.tables.get(), d.lens.get(),
                                             g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads,
                                             g.head_dim, g.block_size, inv, c.k_scale, c.v_scale, g.q_stride,
                                             p.cache_stride, g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kBf16GqaMma:
        if ((st = kl_paged_decode_split_bf16_gqa_mma_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_bf16_gqa_mma(&k, d.q.get(), d.kp_bf16, d.vp_bf16, ws, d.tables.get(),
                                                  d.lens.get(), g.max_blocks_per_seq, g.num_seqs, g.num_q_heads,
                                                  g.num_kv_heads, g.head_dim, g.block_size, inv, g.q_stride,
                                                  g.sliding_window, splits, ws_bytes, nullptr);
    case Kind::kFp8GqaMma:
        if ((st = kl_paged_decode_split_fp8_gqa_mma_get(&k, mod)) != KL_SUCCESS) return st;
        return kl_paged_decode_split_fp8_gqa_mma(&k, d.q.get(), d.kp_fp8, d.vp_fp8, ws, d.tables.get(), d.lens.get(),
                                                 g.max_blocks_per_seq, g.num_seqs, g.num_q_heads, g.num_kv_heads,
                                                 g.head_dim, g.block_size, inv, c.k_scale, c.v_scale, g.q_stride,
                                                 p.cache_stride, g.sliding_window, splits, ws_bytes, nullptr);
    }
    return KL_ERROR_INVALID_ARGUMENT;
}

// ---- running a case ----------------------------------------------------------------------

void run_case(Kind kind, int width, const Case &c, const std::vector<uint32_t> &split_counts = kSplitCounts) {
    SCOPED_TRACE(std::string(kind_name(kind)) + ": " + paged_decode_problem::describe(c, is_fp8(kind)) +
                 ", module gqa" + std::to_string(width) + "_d128");
    const Problem p = paged_decode_problem::build(is_fp8(kind), c);
    const Shape &g = p.g;
    const std::vector<double> ref = paged_decode_problem::reference(p);
    const kl_module *mod = module_for(width);
    const DeviceProblem dev(p, c, is_fp8(kind));
    kl_kernel combine;
    KL_ASSERT_OK(kl_paged_decode_split_combine_get(&combine, mod));

    std::vector<uint32_t> counts;
    for (uint32_t s : split_counts) {
        const uint32_t n = s == kRule ? rule_splits(kind, c) : s;
        if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
    }
    for (uint32_t splits : counts) {
        SCOPED_TRACE("num_splits " + std::to_string(splits) + " (the rule's choice here: " +
                     std::to_string(rule_splits(kind, c)) + ", " + std::to_string(sm_count()) + " SMs)");
        const uint64_t ws_bytes = kl_paged_decode_split_workspace_bytes(g.num_seqs, g.num_q_heads, g.head_dim, splits);
        DeviceBuffer<float> ws(ws_bytes / 4 + kWsGuard);
        ws.poison();
        const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
        DeviceBuffer<kl_bf16> out(kGuard + n_out + kGuard);
        out.poison();

        const kl_status st = launch_partial(kind, mod, dev, p, c, ws.get(), splits, ws_bytes);
        ASSERT_EQ(st, KL_SUCCESS) << kl_last_error_message();
        KL_ASSERT_OK(kl_paged_decode_split_combine(&combine, ws.get(), out.get() + kGuard, g.num_seqs, g.num_q_heads,
                                                   g.head_dim, splits, ws_bytes, nullptr));
        kl_test::synchronize();

        check_workspace(p, c, splits, ws.download());
        check_output(p, ref, out.download());
        if (::testing::Test::HasFailure()) return;  // one failing split count says enough
    }
}

class PagedDecodeSplitTest : public kl_test::GpuTest {};

// ---- plain bf16 ----------------------------------------------------------------------

TEST_F(PagedDecodeSplitTest, Bf16MatchesReferenceAtEveryBlockSize) {
    uint32_t seed = 100;
    for (uint32_t bs : {1u, 16u, 64u}) {
        Case c;
        c.block_size = bs;
        c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 7, 300, 517});
        c.seed = seed++;
        run_case(Kind::kBf16, 8, c);
    }
}

TEST_F(PagedDecodeSplitTest, Bf16SlidingWindowSmallerAndLargerThanTheSequence) {
    uint32_t seed = 200;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {1u, 5u, 40u, 100000u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {3, 77, 300});
            c.sliding_window = sw;
            c.seed = seed++;
            run_case(Kind::kBf16, 8, c, {2, 7, kRule});
        }
}

TEST_F(PagedDecodeSplitTest, Bf16HeadDimsGroupSizesAndThePaddedElementPath) {
    // Multiples of 8 take the 16-byte path, the others the element path.
    struct Dims {
        uint32_t nq, nkv, d;
    };
    uint32_t seed = 300;
    for (Dims dm : {Dims{4, 4, 64}, Dims{6, 2, 256}, Dims{3, 1, 8}, Dims{5, 5, 40}, Dims{2, 1, 1}, Dims{2, 2, 255},
                    Dims{3, 3, 130}}) {
        Case c;
        c.num_q_heads = dm.nq;
        c.num_kv_heads = dm.nkv;
        c.head_dim = dm.d;
        c.seq_lens = lengths_around(16, {45, 129});
        c.sliding_window = seed % 2 ? 0 : 50;
        c.q_pad = 5;
        c.seed = seed++;
        run_case(Kind::kBf16, 8, c, {3, kRule});
    }
}

TEST_F(PagedDecodeSplitTest, Bf16OffAlignmentCacheAndPaddedQRows) {
    uint32_t seed = 400;
    for (uint32_t mis : {1u, 4u})
        for (uint32_t bs : {1u, 16u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {100});
            c.misalign = mis;
            c.q_pad = 7;
            c.seed = seed++;
            run_case(Kind::kBf16, 8, c, {2, 7});
        }
}

TEST_F(PagedDecodeSplitTest, PlainSplitKernelsMatchInTheGqa4Fatbin) {
    Case c;
    c.seq_lens = lengths_around(16, {250});
    c.sliding_window = 100;
    c.seed = 450;
    run_case(Kind::kBf16, 4, c, {3});
    c.k_scale = 0.5f;
    c.v_scale = 3.0f;
    c.seed = 451;
    run_case(Kind::kFp8, 4, c, {3});
}

// ---- plain fp8 ---------------------------------------------------------------------------

TEST_F(PagedDecodeSplitTest, Fp8MatchesReferenceWithScalesAndPaddedCacheStride) {
    uint32_t seed = 500;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint64_t pad : {uint64_t{0}, uint64_t{32}, uint64_t{3}}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 5, 260});
            c.cache_pad = pad;
            c.k_scale = 0.37f;
            c.v_scale = 2.5f;
            c.q_pad = 3;
            c.seed = seed++;
            run_case(Kind::kFp8, 8, c, pad == 0 ? kSplitCounts : std::vector<uint32_t>{2, 7});
        }
}

TEST_F(PagedDecodeSplitTest, Fp8SlidingWindowAndInterleavedKV) {
    uint32_t seed = 600;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {1u, 9u, 70u, 100000u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {3, 150});
            c.sliding_window = sw;
            c.cache_pad = 16;
            c.interleaved = sw == 70u;
            c.k_scale = 1.25f;
            c.v_scale = 0.75f;
            c.seed = seed++;
            run_case(Kind::kFp8, 8, c, {2, 7});
        }
}

TEST_F(PagedDecodeSplitTest, Fp8HeadDimsAndOffAlignmentCache) {
    struct Dims {
        uint32_t nq, nkv, d, mis;
    };
    uint32_t seed = 800;
    for (Dims dm : {Dims{6, 2, 256, 0}, Dims{3, 1, 16, 0}, Dims{2, 1, 5, 0}, Dims{8, 2, 128, 1}}) {
        Case c;
        c.num_q_heads = dm.nq;
        c.num_kv_heads = dm.nkv;
        c.head_dim = dm.d;
        c.seq_lens = lengths_around(16, {61});
        c.misalign = dm.mis;
        c.k_scale = 0.6f;
        c.v_scale = 1.1f;
        c.q_pad = 1;
        c.seed = seed++;
        run_case(Kind::kFp8, 8, c, {2, 7});
    }
}

// ---- GQA-packed ----------------------------------------------------------------------------

TEST_F(PagedDecodeSplitTest, Bf16GqaMatchesReferenceInBothVariants) {
    uint32_t seed = 900;
    for (Kind kind : {Kind::kBf16Gqa, Kind::kBf16GqaMma})
    for (int width : {4, 8})
        for (uint32_t bs : {1u, 16u, 64u})
            for (uint32_t sw : {0u, 7u, 100000u}) {
                Case c;
                c.num_kv_heads = bs == 16 ? 3 : 1;
                c.num_q_heads = c.num_kv_heads * width;
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 3, 211});
                c.sliding_window = sw;
                c.q_pad = sw == 7 ? 5 : 0;
                c.seed = seed++;
                run_case(kind, width, c, sw == 0 ? kSplitCounts : std::vector<uint32_t>{2, 7});
            }
}

TEST_F(PagedDecodeSplitTest, Bf16GqaOffAlignmentCache) {
    uint32_t seed = 1000;
    for (Kind kind : {Kind::kBf16Gqa, Kind::kBf16GqaMma})
    for (int width : {4, 8}) {
        Case c;
        c.num_kv_heads = 2;
        c.num_q_heads = 2 * width;
        c.seq_lens = lengths_around(16, {90});
        c.misalign = 1;
        c.sliding_window = 40;
        c.seed = seed++;
        run_case(kind, width, c, {2, 7});
    }
}

TEST_F(PagedDecodeSplitTest, Fp8GqaMatchesReferenceInBothVariants) {
    uint32_t seed = 1100;
    for (Kind kind : {Kind::kFp8Gqa, Kind::kFp8GqaMma})
    for (int width : {4, 8})
        for (uint32_t bs : {1u, 16u, 64u})
            for (uint64_t pad : {uint64_t{0}, uint64_t{8}, uint64_t{5}}) {
                Case c;
                c.num_kv_heads = bs == 64 ? 2 : 1;
                c.num_q_heads = c.num_kv_heads * width;
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 9, 190});
                c.sliding_window = pad == 8 ? 11 : 0;
                c.cache_pad = pad;
                c.k_scale = 0.45f;
                c.v_scale = 2.2f;
                c.q_pad = pad == 5 ? 2 : 0;
                c.seed = seed++;
                run_case(kind, width, c, pad == 0 ? kSplitCounts : std::vector<uint32_t>{2, 7});
            }
}

TEST_F(PagedDecodeSplitTest, Fp8GqaInterleavedAndOffAlignmentCache) {
    uint32_t seed = 1200;
    for (Kind kind : {Kind::kFp8Gqa, Kind::kFp8GqaMma})
    for (int width : {4, 8})
        for (uint32_t mis : {0u, 3u}) {
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = 2 * width;
            c.seq_lens = lengths_around(16, {123});
            c.interleaved = mis == 0;
            c.misalign = mis;
            c.k_scale = 1.5f;
            c.v_scale = 0.3f;
            c.seed = seed++;
            run_case(kind, width, c, {2, 7});
        }
}

// ---- every kernel: split ranges counted exactly -----------------------------------------

// q = 0 makes every score 0, so each split's l must equal its number of
// positions: a position dropped or read twice by the split arithmetic
// (block rounding, window start mid-block, trailing empty splits) shows as
// an integer off. The output is then the window's plain mean of v.
TEST_F(PagedDecodeSplitTest, EverySplitCountsItsPositionsExactly) {
    uint32_t seed = 1250;
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa, Kind::kBf16GqaMma, Kind::kFp8GqaMma})
        for (uint32_t bs : {1u, 16u, 64u})
            for (uint32_t sw : {0u, 13u, 200u}) {
                Case c;
                c.num_kv_heads = 2;
                c.num_q_heads = is_packed(kind) ? 16 : 4;
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) - 1, 333, 1000});
                c.sliding_window = sw;
                c.q_amp = 0.0f;
                c.k_scale = 0.5f;
                c.v_scale = 1.5f;
                c.seed = seed++;
                run_case(kind, 8, c, {1, 2, 3, 7, 64});
            }
}

// ---- every kernel: a long sequence, large scores ------------------------------------------

TEST_F(PagedDecodeSplitTest, LongSequenceOf32768Positions) {
    // One KV head keeps the float64 reference quick in an unoptimised build.
    uint32_t seed = 1300;
    int i = 0;
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa, Kind::kBf16GqaMma, Kind::kFp8GqaMma}) {
        Case c;
        c.num_kv_heads = 1;
        c.num_q_heads = is_packed(kind) ? 8 : 3;
        c.block_size = i++ % 2 ? 64 : 16;
        c.seq_lens = {32768, 0};
        c.k_scale = 0.9f;
        c.v_scale = 1.3f;
        c.seed = seed++;
        run_case(kind, 8, c, {7, kRule});
        if (kind == Kind::kBf16 || kind == Kind::kFp8Gqa || kind == Kind::kBf16GqaMma || kind == Kind::kFp8GqaMma) {
            // A window that starts and ends mid-block.
            c.seq_lens = {32767};
            c.sliding_window = 20000;
            c.seed = seed++;
            run_case(kind, 8, c, {kRule});
        }
    }
}

TEST_F(PagedDecodeSplitTest, LargeScoresNeedTheRunningMaxAcrossSplits) {
    uint32_t seed = 1400;
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa, Kind::kBf16GqaMma, Kind::kFp8GqaMma}) {
        for (int width : {4, 8}) {
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = is_packed(kind) ? 2 * width : 6;
            c.seq_lens = lengths_around(16, {700});
            c.inv_sqrt_d = 1.0;
            c.q_amp = 8.0f;
            c.k_scale = 2.0f;
            c.seed = seed++;
            run_case(kind, width, c, {5, kRule});
        }
    }
}

// The rule's choice for a lone sequence on this GPU (one block per split
// per KV head, so it takes the most splits the cap allows: 16 for 4096
// positions) launches and matches.
TEST_F(PagedDecodeSplitTest, TheRulesChoiceForALoneSequence) {
    Case c;
    c.num_kv_heads = 2;
    c.num_q_heads = 16;
    c.seq_lens = {4096, 0};
    c.seed = 1500;
    EXPECT_GT(rule_splits(Kind::kBf16Gqa, c), 1u);
    run_case(Kind::kBf16Gqa, 8, c, {kRule});
    c.seed = 1501;
    run_case(Kind::kFp8Gqa, 8, c, {kRule});
    c.seed = 1502;
    run_case(Kind::kBf16GqaMma, 8, c, {kRule});
    c.seed = 1503;
    run_case(Kind::kFp8GqaMma, 8, c, {kRule});
}

}  // namespace
