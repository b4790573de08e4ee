// The choosers' rules (spec `fallback:`) are the hand rules the project had
// before them (issue 45): with a rule-only table (TABLE_ONLY, no rows, so
// neither a caller's nor a future compiled-in table decides),
// kl_paged_decode_gqa_{bf16,fp8}_choose returns what the former
// kl_paged_decode_gqa_pick returned, with kl_paged_decode_num_splits and
// kl_paged_decode_persist_ctas as its tunables; kl_mla_decode_attn_*_choose
// what kl_mla_decode_pick returns, with kl_mla_decode_num_parts; the MLA
// prefill choosers docs/MLA_PREFILL.md's rule. Swept over shapes the
// launchers take, devices, what loads (an sm_90a image or not) and the
// caller's facts (aligned caches, persistent buffers), on the recording backend.
#include <gtest/gtest.h>

#include "klaunch/mla_decode.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/paged_decode.h"
#include "tests/choose/choose_test_util.h"

namespace {

using choose_test::Module;

// Asks for the rule alone: no rows, and the compiled-in table skipped.
const kl_choice_table kRuleOnly = {nullptr, 0u, nullptr, 0u, nullptr, KL_CHOICE_TABLE_ONLY};

// ---- the oracles -------------------------------------------------------------------
// The hand rules the project had before the chooser, kept here as the
// oracle for the spec's fallback: kl_paged_decode_gqa_pick (removed from
// klaunch/paged_decode_split.h, issue 45) and kl_mla_decode_pick (going
// from klaunch/mla_decode_layout.h). Written apart from the spec, so a
// change to either shows here.

// The former kl_paged_decode_gqa_path: the GQA-packed launchers of one cache type.
enum OraclePath {
    kOracleMmaSeed = 0,     // paged_decode_attn_*_gqa_mma
    kOracleMmaSplit = 1,    // paged_decode_split_*_gqa_mma at kl_paged_decode_num_splits
    kOracleMmaPersist = 2,  // paged_decode_persist_*_gqa_mma at kl_paged_decode_persist_ctas
    kOracleBulkSeed = 3,    // paged_decode_attn_*_gqa_bulk (never the rule's)
    kOracleBulkPersist = 4, // paged_decode_persist_*_gqa_bulk (never the rule's)
    kOracleTmaSeed = 5,     // paged_decode_attn_*_gqa_tma
    kOracleTmaPersist = 6   // paged_decode_persist_*_gqa_tma at kl_paged_decode_persist_ctas
};

// The former kl_paged_decode_gqa_pick. have_bulk: the copy-engine launchers
// load (sm_90a); aligned: the caches and the block stride's bytes are
// multiples of 16; persistent_ok: the caller keeps the persistent
// launchers' workspace and counters. Why this rule: specs/paged_decode.yaml.
OraclePath oracle_paged_decode_gqa_pick(uint32_t num_seqs, uint32_t num_kv_heads, uint32_t max_seq_len,
                                        uint32_t sliding_window, uint32_t block_size, uint32_t sm_count,
                                        bool have_bulk, bool aligned, bool persistent_ok) {
    if (have_bulk && aligned && block_size != 0u && block_size % 16u == 0u)
        return persistent_ok ? kOracleTmaPersist : kOracleTmaSeed;
    const uint32_t splits =
        kl_paged_decode_num_splits(num_seqs, num_kv_heads, max_seq_len, sliding_window, block_size, sm_count);
    if (splits <= 1u) return kOracleMmaSeed;
    return persistent_ok ? kOracleMmaPersist : kOracleMmaSplit;
}

// kl_mla_decode_pick's rule: the _tma launcher of the cache's type on sm_90
// where it loaded and page_size is a multiple of 64, else _mma.
kl_mla_decode_kind oracle_mla_decode_pick(int cc_major, int tma_loaded, uint32_t page_size, int fp8) {
    if (cc_major != 9 || !tma_loaded || page_size < 64u || page_size % 64u != 0u) return KL_MLA_DECODE_MMA;
    return fp8 ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_BF16_TMA;
}

static_assert(KL_PAGED_DECODE_GQA_BF16_MMA_SEED == (int)kOracleMmaSeed &&
                  KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT == (int)kOracleMmaSplit &&
                  KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST == (int)kOracleMmaPersist &&
                  KL_PAGED_DECODE_GQA_BF16_BULK_SEED == (int)kOracleBulkSeed &&
                  KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST == (int)kOracleBulkPersist &&
                  KL_PAGED_DECODE_GQA_BF16_TMA_SEED == (int)kOracleTmaSeed &&
                  KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST == (int)kOracleTmaPersist,
              "the bf16 operation lists its alternatives in the former kl_paged_decode_gqa_path's order "
              "(decode_bench's JSON _pick numbers)");
static_assert(KL_PAGED_DECODE_GQA_FP8_MMA_SEED == (int)kOracleMmaSeed &&
                  KL_PAGED_DECODE_GQA_FP8_MMA_SPLIT == (int)kOracleMmaSplit &&
                  KL_PAGED_DECODE_GQA_FP8_MMA_PERSIST == (int)kOracleMmaPersist &&
                  KL_PAGED_DECODE_GQA_FP8_BULK_SEED == (int)kOracleBulkSeed &&
                  KL_PAGED_DECODE_GQA_FP8_BULK_PERSIST == (int)kOracleBulkPersist &&
                  KL_PAGED_DECODE_GQA_FP8_TMA_SEED == (int)kOracleTmaSeed &&
                  KL_PAGED_DECODE_GQA_FP8_TMA_PERSIST == (int)kOracleTmaPersist,
              "and the fp8 one");
static_assert(KL_MLA_DECODE_ATTN_BF16_MMA == (int)KL_MLA_DECODE_MMA &&
                  KL_MLA_DECODE_ATTN_BF16_TMA == (int)KL_MLA_DECODE_BF16_TMA,
              "mla_decode_attn_bf16 lists its alternatives in kl_mla_decode_kind's order");

// Every handle of one operation's alternatives, from one module; a launcher
// whose kl_X_get fails (an sm_90a one without the image) is NULL.
template <typename Get>
const kl_kernel *get(kl_kernel *k, const kl_module *m, Get fn) {
    return fn(k, m) == KL_SUCCESS ? k : nullptr;
}

struct PagedBf16 {
    kl_kernel k[9];
    kl_paged_decode_gqa_bf16_kernels ks;
    explicit PagedBf16(const kl_module *m) {
        ks.mma_seed = get(&k[0], m, kl_paged_decode_attn_bf16_gqa_mma_get);
        ks.mma_split = get(&k[1], m, kl_paged_decode_split_bf16_gqa_mma_get);
        ks.mma_persist = get(&k[2], m, kl_paged_decode_persist_bf16_gqa_mma_get);
        ks.bulk_seed = get(&k[3], m, kl_paged_decode_attn_bf16_gqa_bulk_get);
        ks.bulk_persist = get(&k[4], m, kl_paged_decode_persist_bf16_gqa_bulk_get);
        ks.tma_seed = get(&k[5], m, kl_paged_decode_attn_bf16_gqa_tma_get);
        ks.tma_persist = get(&k[6], m, kl_paged_decode_persist_bf16_gqa_tma_get);
        ks.scalar_seed = get(&k[7], m, kl_paged_decode_attn_bf16_gqa_get);
        ks.scalar_split = get(&k[8], m, kl_paged_decode_split_bf16_gqa_get);
    }
};

struct PagedFp8 {
    kl_kernel k[9];
    kl_paged_decode_gqa_fp8_kernels ks;
    explicit PagedFp8(const kl_module *m) {
        ks.mma_seed = get(&k[0], m, kl_paged_decode_attn_fp8_gqa_mma_get);
        ks.mma_split = get(&k[1], m, kl_paged_decode_split_fp8_gqa_mma_get);
        ks.mma_persist = get(&k[2], m, kl_paged_decode_persist_fp8_gqa_mma_get);
        ks.bulk_seed = get(&k[3], m, kl_paged_decode_attn_fp8_gqa_bulk_get);
        ks.bulk_persist = get(&k[4], m, kl_paged_decode_persist_fp8_gqa_bulk_get);
        ks.tma_seed = get(&k[5], m, kl_paged_decode_attn_fp8_gqa_tma_get);
        ks.tma_persist = get(&k[6], m, kl_paged_decode_persist_fp8_gqa_tma_get);
        ks.scalar_seed = get(&k[7], m, kl_paged_decode_attn_fp8_gqa_get);
        ks.scalar_split = get(&k[8], m, kl_paged_decode_split_fp8_gqa_get);
    }
};

TEST(ChooserRule, PagedDecodeGqaIsTheFormerKlPagedDecodeGqaPick) {
    int compared = 0;
    for (const char *variant : {"gqa4_d128", "gqa8_d128"}) {
        const uint32_t width = variant[3] - '0';
        for (bool sm90a : {false, true}) {
            Module mod(kl_paged_decode_variant_info, variant, sm90a);
            PagedBf16 bf(mod.get());
            PagedFp8 f8(mod.get());
            ASSERT_EQ(bf.ks.tma_persist != nullptr, sm90a);
            for (uint32_t sms : {1u, 108u, 132u, 148u})
                for (uint32_t nkv : {1u, 2u, 8u})
                    for (uint32_t seqs : {1u, 2u, 3u, 7u, 16u, 32u, 33u, 200u, 1000u})
                        for (uint32_t len : {1u, 100u, 256u, 1000u, 4096u, 32768u, 100000u})
                            for (uint32_t bs : {1u, 8u, 16u, 32u, 48u})
                                for (uint32_t window : {0u, 512u})
                                    for (int facts = 0; facts < 4; facts++) {
                                        const bool aligned = facts & 1, persistent = facts & 2;
                                        kl_device dev = choose_test::h100();
                                        dev.sm_count = sms;
                                        const OraclePath want = oracle_paged_decode_gqa_pick(
                                            seqs, nkv, len, window, bs, sms, sm90a, aligned, persistent);
                                        const uint32_t splits = kl_paged_decode_num_splits(seqs, nkv, len, window, bs, sms);
                                        const uint32_t ctas = kl_paged_decode_persist_ctas(seqs, nkv, len, window, sms);
                                        kl_paged_decode_gqa_bf16_shape s{seqs, nkv * width, nkv, 128, bs, window, len, aligned, persistent};
                                        kl_paged_decode_gqa_fp8_shape s8{seqs, nkv * width, nkv, 128, bs, window,
                                                                          (uint64_t)bs * nkv * 128, len, aligned, persistent};
                                        const kl_paged_decode_gqa_bf16_choice c =
                                            kl_paged_decode_gqa_bf16_choose(&s, &dev, &kRuleOnly, KL_CHOICE_GRAPH, &bf.ks);
                                        const kl_paged_decode_gqa_fp8_choice c8 =
                                            kl_paged_decode_gqa_fp8_choose(&s8, &dev, &kRuleOnly, KL_CHOICE_EAGER, &f8.ks);
                                        SCOPED_TRACE(testing::Message() << variant << " sm90a " << sm90a << " sms " << sms << " nkv "
                                                                        << nkv << " seqs " << seqs << " len " << len << " bs " << bs
                                                                        << " window " << window << " aligned " << aligned
                                                                        << " persistent " << persistent);
                                        for (int fp8 = 0; fp8 < 2; fp8++) {
                                            const int alt = fp8 ? c8.alternative : c.alternative;
                                            const kl_choice_source src = fp8 ? c8.source : c.source;
                                            const uint32_t got_splits = fp8 ? c8.num_splits : c.num_splits;
                                            const uint32_t got_ctas = fp8 ? c8.num_ctas : c.num_ctas;
                                            ASSERT_EQ(src, KL_CHOICE_RULE);
                                            ASSERT_EQ(alt, (int)want) << (fp8 ? "fp8" : "bf16");
                                            EXPECT_EQ(got_splits, want == kOracleMmaSplit ? splits : 0u);
                                            const bool persist = want == kOracleMmaPersist || want == kOracleTmaPersist;
                                            EXPECT_EQ(got_ctas, persist ? ctas : 0u);
                                            compared++;
                                        }
                                    }
        }
    }
    EXPECT_GT(compared, 100000);
}

TEST(ChooserRule, MlaDecodeAttentionIsKlMlaDecodePicksRule) {
    int compared = 0;
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        const uint32_t d = variant[0] == 'm' ? 320 : 576;
        for (bool sm90a : {false, true}) {
            Module mod(kl_mla_decode_variant_info, variant, sm90a);
            kl_kernel k[4];
            kl_mla_decode_attn_bf16_kernels bf{get(&k[0], mod.get(), kl_mla_decode_attn_bf16_mma_get),
                                               get(&k[1], mod.get(), kl_mla_decode_attn_bf16_tma_get)};
            kl_mla_decode_attn_fp8_kernels f8{get(&k[2], mod.get(), kl_mla_decode_attn_fp8_mma_get),
                                              get(&k[3], mod.get(), kl_mla_decode_attn_fp8_tma_get)};
            ASSERT_EQ(bf.tma != nullptr, sm90a);
            for (uint32_t cc : {8u, 9u, 10u})
                for (uint32_t sms : {1u, 108u, 132u})
                    for (uint32_t page : {1u, 16u, 32u, 63u, 64u, 96u, 128u, 256u, 4096u, 65536u})
                        for (uint32_t s_q : {1u, 2u, 8u})
                            for (uint32_t h_q : {1u, 16u, 64u, 128u})
                                for (uint32_t batch : {1u, 7u, 132u, 4096u}) {
                                    kl_device dev{cc, 0, sms, 50ull << 20, 80ull << 30, 0};
                                    kl_mla_decode_attn_bf16_shape s{batch, s_q, h_q, d, page, 4096};
                                    kl_mla_decode_attn_fp8_shape s8{batch, s_q, h_q, d, page, 4096};
                                    const kl_mla_decode_attn_bf16_choice c =
                                        kl_mla_decode_attn_bf16_choose(&s, &dev, &kRuleOnly, KL_CHOICE_GRAPH, &bf);
                                    const kl_mla_decode_attn_fp8_choice c8 =
                                        kl_mla_decode_attn_fp8_choose(&s8, &dev, &kRuleOnly, KL_CHOICE_GRAPH, &f8);
                                    SCOPED_TRACE(testing::Message() << variant << " sm90a " << sm90a << " cc " << cc << " page "
                                                                    << page << " s_q " << s_q << " h_q " << h_q);
                                    const kl_mla_decode_kind want = oracle_mla_decode_pick((int)cc, sm90a, page, 0);
                                    const kl_mla_decode_kind want8 = oracle_mla_decode_pick((int)cc, sm90a, page, 1);
                                    ASSERT_EQ(c.source, KL_CHOICE_RULE);
                                    ASSERT_EQ(c8.source, KL_CHOICE_RULE);
                                    EXPECT_EQ(c.alternative, want == KL_MLA_DECODE_MMA ? KL_MLA_DECODE_ATTN_BF16_MMA
                                                                                       : KL_MLA_DECODE_ATTN_BF16_TMA);
                                    EXPECT_EQ(c8.alternative, want8 == KL_MLA_DECODE_MMA ? KL_MLA_DECODE_ATTN_FP8_MMA
                                                                                         : KL_MLA_DECODE_ATTN_FP8_TMA);
                                    EXPECT_EQ(c.num_parts, kl_mla_decode_num_parts(want, sms, s_q, h_q));
                                    EXPECT_EQ(c8.num_parts, kl_mla_decode_num_parts(want8, sms, s_q, h_q));
                                    compared += 2;
                                }
        }
    }
    EXPECT_GT(compared, 10000);
}

// kl_mla_decode_pick stays in klaunch/mla_decode_layout.h only while
// bench/mla_decode calls it: it must say what the chooser's rule says.
// Delete this test with the helper.
TEST(ChooserRule, DeprecatedKlMlaDecodePickIsTheOracle) {
    for (int cc : {7, 8, 9, 10})
        for (int loaded : {0, 1})
            for (uint32_t page : {0u, 1u, 32u, 63u, 64u, 65u, 96u, 128u, 256u, 65536u})
                for (int fp8 : {0, 1})
                    EXPECT_EQ(kl_mla_decode_pick(cc, loaded, page, fp8), oracle_mla_decode_pick(cc, loaded, page, fp8))
                        << "cc " << cc << " loaded " << loaded << " page " << page << " fp8 " << fp8;
}

TEST(ChooserRule, MlaPrefillIsTheDocumentedRule) {
    // docs/MLA_PREFILL.md: _tma where it loads and the operands are aligned,
    // else _wgmma where it loads, else _mma; num_ctas the SM count
    // (attention) and kl_grouped_gemm_tma_ctas (GEMM).
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        const uint32_t d = variant[0] == 'm' ? 320 : 576;
        for (bool sm90a : {false, true}) {
            Module mod(kl_mla_prefill_variant_info, variant, sm90a);
            kl_kernel k[6];
            kl_mla_absorbed_attention_kernels at{get(&k[0], mod.get(), kl_mla_absorbed_attention_mma_get),
                                                 get(&k[1], mod.get(), kl_mla_absorbed_attention_wgmma_get),
                                                 get(&k[2], mod.get(), kl_mla_absorbed_attention_tma_get)};
            kl_grouped_gemm_kernels gg{get(&k[3], mod.get(), kl_grouped_gemm_mma_get),
                                       get(&k[4], mod.get(), kl_grouped_gemm_wgmma_get),
                                       get(&k[5], mod.get(), kl_grouped_gemm_tma_get)};
            for (bool aligned : {false, true})
                for (uint32_t sms : {1u, 114u, 132u})
                    for (uint32_t seq : {1u, 63u, 4096u})
                        for (uint32_t m : {1u, 300u, 4096u})
                            for (uint32_t kn : {64u, 128u, 512u}) {
                                kl_device dev = choose_test::h200();
                                dev.sm_count = sms;
                                kl_mla_absorbed_attention_shape s{2, seq, 16, d, d - 64, aligned};
                                const kl_mla_absorbed_attention_choice c =
                                    kl_mla_absorbed_attention_choose(&s, &dev, &kRuleOnly, KL_CHOICE_EAGER, &at);
                                const int want = sm90a && aligned ? KL_MLA_ABSORBED_ATTENTION_TMA
                                                 : sm90a          ? KL_MLA_ABSORBED_ATTENTION_WGMMA
                                                                  : KL_MLA_ABSORBED_ATTENTION_MMA;
                                EXPECT_EQ(c.source, KL_CHOICE_RULE);
                                EXPECT_EQ(c.alternative, want) << variant << " sm90a " << sm90a << " aligned " << aligned;
                                EXPECT_EQ(c.num_ctas, want == KL_MLA_ABSORBED_ATTENTION_TMA ? sms : 0u);
                                kl_grouped_gemm_shape g{m, 128, kn, 640 - kn, aligned};
                                const kl_grouped_gemm_choice cg = kl_grouped_gemm_choose(&g, &dev, &kRuleOnly, KL_CHOICE_EAGER, &gg);
                                const int wantg = sm90a && aligned ? KL_GROUPED_GEMM_TMA
                                                  : sm90a          ? KL_GROUPED_GEMM_WGMMA
                                                                   : KL_GROUPED_GEMM_MMA;
                                EXPECT_EQ(cg.alternative, wantg);
                                EXPECT_EQ(cg.num_ctas, wantg == KL_GROUPED_GEMM_TMA
                                                           ? kl_grouped_gemm_tma_ctas(m, 128, kn, 640 - kn, sms)
                                                           : 0u);
                            }
        }
    }
}

TEST(ChooserRule, NeverTouchesTheLastError) {
    Module mod(kl_paged_decode_variant_info, "gqa8_d128", false);
    PagedBf16 bf(mod.get());
    kl_device dev = choose_test::h100();
    // A refusal first, so that the last error is something to keep.
    EXPECT_NE(kl_paged_decode_attn_bf16_gqa_mma_check(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1,
                                                      8, 1, 128, 16, 1.0f, 1024, 0),
              KL_SUCCESS);
    const std::string before = kl_last_error_message();
    const kl_status status = kl_last_error();
    int calls = 0;
    kl_error_callback cb = [](kl_status, const char *, void *user) { ++*static_cast<int *>(user); };
    kl_set_error_callback(cb, &calls);
    // Shapes no launcher takes (wrong pack width, head_dim, block size 0,
    // an overflowing batch) and ones they do: nothing is reported.
    for (uint32_t nq : {8u, 64u, 65u})
        for (uint32_t hd : {64u, 128u})
            for (uint32_t bs : {0u, 16u})
                for (uint32_t seqs : {0u, 1u, 70000u, 0xffffffffu}) {
                    kl_paged_decode_gqa_bf16_shape s{seqs, nq, 8, hd, bs, 0, 0xffffffffu, true, true};
                    (void)kl_paged_decode_gqa_bf16_choose(&s, &dev, nullptr, KL_CHOICE_EAGER, &bf.ks);
                }
    kl_paged_decode_gqa_bf16_choice none = kl_paged_decode_gqa_bf16_choose(nullptr, &dev, nullptr, KL_CHOICE_EAGER, &bf.ks);
    EXPECT_EQ(none.alternative, KL_PAGED_DECODE_GQA_BF16_NONE);
    EXPECT_EQ(none.source, KL_CHOICE_NONE);
    kl_set_error_callback(nullptr, nullptr);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(kl_last_error(), status);
    EXPECT_EQ(before, kl_last_error_message());
}

}  // namespace
