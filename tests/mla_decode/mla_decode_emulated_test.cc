// Every attention launcher of the MLA decode family (specs/mla_decode.yaml)
// in a whole decode step on the CPU emulator (mla_decode_emu_harness.h:
// mla_decode_schedule, the attention, mla_decode_combine), from the
// kernels' own sources through the generated launchers, both variants,
// against the float64 reference: ragged lengths (0, 1, page - 1, page,
// page + 1 and a few thousand), s_q 1, 2, 4, 8 (causal among the tokens,
// lengths below s_q), h_q 8, 16, 64, 128, shuffled page tables, NaN in
// every page no table names and past every length, fp8 scales from 1e-3 to
// 1e3, part counts that split sequences and that do not.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/mla_decode/mla_decode_emu_harness.h"

namespace {

using mla_decode_emu::Attn;
using mla_decode_ref::Spec;

kl_status launch_bf16_mma(const kl_module *mod, const mla_decode_ref::Problem &p, const kl_bf16 *q, const void *cache,
                          const int32_t *table, const int32_t *lens, const int32_t *sched, kl_bf16 *out, float *lse,
                          float *ws, uint32_t parts, uint64_t words, uint64_t bytes) {
    kl_kernel k;
    kl_status st = kl_mla_decode_attn_bf16_mma_get(&k, mod);
    if (st != KL_SUCCESS) return st;
    return kl_mla_decode_attn_bf16_mma(&k, q, static_cast<const kl_bf16 *>(cache), table, lens, sched, out, lse, ws,
                                       p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks, p.scale, parts,
                                       words, bytes, nullptr);
}

kl_status launch_fp8_mma(const kl_module *mod, const mla_decode_ref::Problem &p, const kl_bf16 *q, const void *cache,
                         const int32_t *table, const int32_t *lens, const int32_t *sched, kl_bf16 *out, float *lse,
                         float *ws, uint32_t parts, uint64_t words, uint64_t bytes) {
    kl_kernel k;
    kl_status st = kl_mla_decode_attn_fp8_mma_get(&k, mod);
    if (st != KL_SUCCESS) return st;
    return kl_mla_decode_attn_fp8_mma(&k, q, static_cast<const uint8_t *>(cache), table, lens, sched, out, lse, ws,
                                      p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks, p.scale, parts, words,
                                      bytes, nullptr);
}

kl_status launch_bf16_tma(const kl_module *mod, const mla_decode_ref::Problem &p, const kl_bf16 *q, const void *cache,
                          const int32_t *table, const int32_t *lens, const int32_t *sched, kl_bf16 *out, float *lse,
                          float *ws, uint32_t parts, uint64_t words, uint64_t bytes) {
    kl_kernel k;
    kl_status st = kl_mla_decode_attn_bf16_tma_get(&k, mod);
    if (st != KL_SUCCESS) return st;
    const uint32_t R = p.rows();
    kl_tensor_map qm, cm;
    st = kl_mla_decode_attn_bf16_tma_q_map_encode(&k, &qm, q, p.D, R, p.batch, p.D, (uint64_t)R * p.D);
    if (st != KL_SUCCESS) return st;
    st = kl_mla_decode_attn_bf16_tma_cache_map_encode(&k, &cm, static_cast<const kl_bf16 *>(cache), p.D, p.page,
                                                      p.num_blocks, p.D, (uint64_t)p.page * p.D);
    if (st != KL_SUCCESS) return st;
    return kl_mla_decode_attn_bf16_tma(&k, &qm, &cm, table, lens, sched, out, lse, ws, p.batch, p.s_q, p.h_q, p.D,
                                       p.page, p.mbps, p.num_blocks, p.scale, parts, words, bytes, nullptr);
}

kl_status launch_fp8_tma(const kl_module *mod, const mla_decode_ref::Problem &p, const kl_bf16 *q, const void *cache,
                         const int32_t *table, const int32_t *lens, const int32_t *sched, kl_bf16 *out, float *lse,
                         float *ws, uint32_t parts, uint64_t words, uint64_t bytes) {
    kl_kernel k;
    kl_status st = kl_mla_decode_attn_fp8_tma_get(&k, mod);
    if (st != KL_SUCCESS) return st;
    const uint32_t R = p.rows();
    kl_tensor_map qm;
    st = kl_mla_decode_attn_fp8_tma_q_map_encode(&k, &qm, q, p.D, R, p.batch, p.D, (uint64_t)R * p.D);
    if (st != KL_SUCCESS) return st;
    return kl_mla_decode_attn_fp8_tma(&k, &qm, static_cast<const uint8_t *>(cache), table, lens, sched, out, lse, ws,
                                      p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks, p.scale, parts, words,
                                      bytes, nullptr);
}

}  // namespace

kl_status mla_decode_emu::launch_combine(bool pdl, const kl_module *mod, const mla_decode_ref::Problem &p,
                                         const int32_t *sched, const float *ws, kl_bf16 *out, float *lse,
                                         uint32_t parts, uint64_t words, uint64_t bytes) {
    kl_kernel k;
    kl_status st = pdl ? kl_mla_decode_combine_pdl_get(&k, mod) : kl_mla_decode_combine_get(&k, mod);
    if (st != KL_SUCCESS) return st;
    if (pdl)
        return kl_mla_decode_combine_pdl(&k, sched, ws, out, lse, p.batch, p.s_q, p.h_q, p.D, parts, words, bytes,
                                         nullptr);
    return kl_mla_decode_combine(&k, sched, ws, out, lse, p.batch, p.s_q, p.h_q, p.D, parts, words, bytes, nullptr);
}

kl_status mla_decode_emu::launch_attention(Attn a, const kl_module *mod, const mla_decode_ref::Problem &p,
                                           const kl_bf16 *q, const void *cache, const int32_t *table,
                                           const int32_t *lens, const int32_t *sched, kl_bf16 *out, float *lse,
                                           float *ws, uint32_t parts, uint64_t words, uint64_t bytes) {
    switch (a) {
    case Attn::kBf16Mma: return launch_bf16_mma(mod, p, q, cache, table, lens, sched, out, lse, ws, parts, words, bytes);
    case Attn::kFp8Mma: return launch_fp8_mma(mod, p, q, cache, table, lens, sched, out, lse, ws, parts, words, bytes);
    case Attn::kBf16Tma: return launch_bf16_tma(mod, p, q, cache, table, lens, sched, out, lse, ws, parts, words, bytes);
    case Attn::kFp8Tma: return launch_fp8_tma(mod, p, q, cache, table, lens, sched, out, lse, ws, parts, words, bytes);
    default: break;
    }
    ADD_FAILURE() << "no launcher " << attn_name(a) << " in this test";
    return KL_ERROR_INVALID_ARGUMENT;
}

namespace {

class MlaDecodeEmulated : public ::testing::TestWithParam<std::tuple<const char *, Attn>> {
  protected:
    const char *variant() const { return std::get<0>(GetParam()); }
    Attn attn() const { return std::get<1>(GetParam()); }
    const kl_module *mod() { return emu_test::module("mla_decode", variant()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
    Spec spec(std::vector<int32_t> lengths, uint32_t s_q, uint32_t h_q, uint32_t page, uint32_t seed) {
        Spec s;
        s.lengths = std::move(lengths);
        s.s_q = s_q;
        s.h_q = h_q;
        s.page = page;
        s.D = hdim();
        s.fp8 = mla_decode_emu::attn_fp8(attn());
        s.seed = seed;
        return s;
    }
    void run(const Spec &s, uint32_t parts, bool pdl = false, uint32_t misalign = 0,
             mla_decode_emu::StepExtents *ext = nullptr) {
        mla_decode_emu::run(attn(), mod(), mla_decode_ref::make(s), parts, pdl, misalign, ext);
    }
};

// Lengths 0, 1, page - 1, page, page + 1 and two pages and a bit in one
// batch, each split or not by 5 parts.
TEST_P(MlaDecodeEmulated, RaggedLengthsAroundAPage) { run(spec({0, 1, 63, 64, 65, 133}, 1, 16, 64, 1), 5); }

// One part: no sequence is split and the combine has nothing to do.
TEST_P(MlaDecodeEmulated, OnePartWritesEverySequenceItself) { run(spec({37, 0, 70}, 1, 8, 64, 2), 1); }

// Speculative tokens, causal among them; lengths below s_q leave the first
// tokens with nothing to see (zeros, lse -inf).
TEST_P(MlaDecodeEmulated, TwoTokensCausal) { run(spec({1, 2, 90}, 2, 8, 64, 3), 3); }
TEST_P(MlaDecodeEmulated, FourTokensCausal) { run(spec({3, 66}, 4, 8, 64, 4), 4); }
TEST_P(MlaDecodeEmulated, EightTokensCausal) { run(spec({5, 129}, 8, 8, 64, 5), 3); }

// Many heads: rows past one block of rows.
TEST_P(MlaDecodeEmulated, SixtyFourHeads) { run(spec({40, 100}, 1, 64, 64, 6), 2); }
TEST_P(MlaDecodeEmulated, HundredTwentyEightHeads) { run(spec({70}, 1, 128, 64, 7), 2); }

// A few thousand positions in one sequence, split 7 ways (the combine as a
// programmatic dependent launch, as the Hopper launchers chain it).
TEST_P(MlaDecodeEmulated, LongSequenceSplitSevenWays) { run(spec({2500}, 1, 8, 64, 8), 7, true); }

// One sequence split 20 ways: the combine spreads each row over column
// chunks (min(DV / 64, 20 / 4) of them: 5 at D 576, one past the slabs).
TEST_P(MlaDecodeEmulated, OneSequenceSplitTwentyWays) { run(spec({1300}, 1, 8, 64, 15), 20); }

// The declared extents are tight (issue 44), each buffer's last element
// touched by one of two steps (the combine as the Hopper launchers chain
// it, a programmatic dependent launch, after the _tma attentions):
//   whole pages, every page named, the last sequence the longest and, with
//   one part, not split: the attention reads the last block's last row of
//   the cache (the _mma and fp8 ones; the bf16 _tma reads it through its
//   map), the last sequence's last table entry, its last query row, and
//   writes the last rows of out and lse;
//   two parts, the cut inside the last sequence: the attention reads that
//   sequence's base slot (the schedule's last word it reads: 16 + 8 P + 2
//   batch), and its second split is slot 2 P - 3, the last the schedule
//   can number (at most P - 1 cuts, each making at most 2 slots), whose
//   last row's lse is the workspace's last float; the combine reads them
//   and writes the last rows of out and lse;
//   the schedule writes all of sched (its scratch included) in either.
TEST_P(MlaDecodeEmulated, ExtentsAreTight) {
    const bool pdl = attn() == Attn::kBf16Tma || attn() == Attn::kFp8Tma;
    mla_decode_emu::StepExtents ext(attn(), pdl);
    Spec whole = spec({64, 128}, 1, 8, 64, 16);
    whole.spare_pages = 0;
    whole.spare_table = 0;
    run(whole, 1, pdl, 0, &ext);
    Spec split = spec({64, 640}, 1, 8, 64, 17);
    split.spare_pages = 0;
    split.spare_table = 0;
    run(split, 2, pdl, 0, &ext);
    EXPECT_TRUE(ext.schedule.all());
    EXPECT_TRUE(ext.attention.all());
    EXPECT_TRUE(ext.combine.all());
}

// A part count larger than the work: empty parts.
TEST_P(MlaDecodeEmulated, MorePartsThanTiles) { run(spec({10, 3}, 1, 8, 64, 9), 9); }

// A page of 128 positions: two tiles a page.
TEST_P(MlaDecodeEmulated, PagesOf128) { run(spec({200, 127}, 1, 8, 128, 10), 3); }

const char *const kVariants[] = {"mistral_small_4", "deepseek_v4_flash"};

std::string name(const ::testing::TestParamInfo<std::tuple<const char *, Attn>> &i) {
    return std::string(std::get<0>(i.param)) + "_" + mla_decode_emu::attn_name(std::get<1>(i.param));
}

INSTANTIATE_TEST_SUITE_P(All, MlaDecodeEmulated,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(Attn::kBf16Mma, Attn::kFp8Mma, Attn::kBf16Tma,
                                                              Attn::kFp8Tma)),
                         name);

// ---- a cache off a 16-byte boundary: every launcher but the bf16 _tma one,
// whose tensor map needs 16 (its builder refuses others) ----

class MlaDecodeMisaligned : public MlaDecodeEmulated {};
TEST_P(MlaDecodeMisaligned, CacheTwoBytesOff) { run(spec({0, 70, 129}, 2, 8, 64, 14), 3, false, 2); }

INSTANTIATE_TEST_SUITE_P(Misaligned, MlaDecodeMisaligned,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(Attn::kBf16Mma, Attn::kFp8Mma, Attn::kFp8Tma)),
                         name);

// ---- the portable launchers alone: page sizes below the copy engine's 64 ----

class MlaDecodeMmaPages : public MlaDecodeEmulated {};

TEST_P(MlaDecodeMmaPages, PagesOf16) { run(spec({0, 15, 16, 17, 50}, 1, 16, 16, 11), 4); }
TEST_P(MlaDecodeMmaPages, PagesOf32) { run(spec({31, 32, 33, 97}, 2, 8, 32, 12), 3); }
TEST_P(MlaDecodeMmaPages, PagesOf1) { run(spec({5, 0, 3}, 1, 8, 1, 13), 2); }

INSTANTIATE_TEST_SUITE_P(Mma, MlaDecodeMmaPages,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(Attn::kBf16Mma, Attn::kFp8Mma)),
                         name);

}  // namespace
