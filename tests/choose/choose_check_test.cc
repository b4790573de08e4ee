// A chooser never returns a launcher that would refuse the shape: over a
// sweep of shapes (those the launchers take and odd ones: another pack
// width, head_dim, block or page size, a batch past the grid's limit, a
// length that overflows), the chosen alternative's kl_X_check passes with
// the choice's tunables, and a chooser says NONE only when every
// alternative's check fails. Then tables: one that times an alternative
// fastest picks it (source KL_CHOICE_TABLE) wherever it applies, and never
// picks one that does not. Recording backend, sm_90a image loaded.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "klaunch/mla_decode.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/paged_decode.h"
#include "tests/choose/choose_test_util.h"

namespace {

using choose_test::Module;

template <typename T>
T *addr(uintptr_t a) {
    return reinterpret_cast<T *>(a);
}

// The table of one shape cell: every alternative timed, `fast` fastest.
struct OneCell {
    kl_choice_device dev;
    std::vector<kl_choice_row> rows;
    kl_choice_table table;
    OneCell(const kl_device &d, const kl_choice_op &op, const std::vector<uint32_t> &keys,
            const std::vector<std::vector<uint32_t>> &tunables, uint32_t fast) {
        dev = kl_choice_device{"card", d.cc_major, d.cc_minor, d.sm_count, d.l2_bytes, kl_choice_mem_gib(d.mem_bytes), 0, ""};
        for (uint32_t a = 0; a < op.num_alternatives; a++) {
            kl_choice_row r{};
            r.device = 0;
            r.op = op.name;
            r.policy = KL_CHOICE_GRAPH;
            for (size_t k = 0; k < keys.size(); k++) r.keys[k] = keys[k];
            r.alternative = op.alternatives[a];
            r.time_ns = a == fast ? 1000u : 20000u + 1000u * a;
            for (size_t t = 0; t < tunables[a].size(); t++) r.tunables[t] = tunables[a][t];
            rows.push_back(r);
        }
        table = kl_choice_table{&dev, 1, rows.data(), rows.size(), nullptr, 0};
    }
};

// ---- paged decode, bf16 caches -------------------------------------------------

struct PagedCase {
    kl_kernel k[9];
    kl_paged_decode_gqa_bf16_kernels ks{};
    explicit PagedCase(const kl_module *m, bool all_load = true) {
        kl_status (*gets[9])(kl_kernel *, const kl_module *) = {
            kl_paged_decode_attn_bf16_gqa_mma_get, kl_paged_decode_split_bf16_gqa_mma_get,
            kl_paged_decode_persist_bf16_gqa_mma_get, kl_paged_decode_attn_bf16_gqa_bulk_get,
            kl_paged_decode_persist_bf16_gqa_bulk_get, kl_paged_decode_attn_bf16_gqa_tma_get,
            kl_paged_decode_persist_bf16_gqa_tma_get, kl_paged_decode_attn_bf16_gqa_get,
            kl_paged_decode_split_bf16_gqa_get};
        const kl_kernel **slots[9] = {&ks.mma_seed, &ks.mma_split, &ks.mma_persist, &ks.bulk_seed, &ks.bulk_persist,
                                      &ks.tma_seed, &ks.tma_persist, &ks.scalar_seed, &ks.scalar_split};
        for (int i = 0; i < 9; i++) {
            const kl_status st = gets[i](&k[i], m);
            if (all_load) {
                EXPECT_EQ(st, KL_SUCCESS) << i << ": " << kl_last_error_message();
            }
            *slots[i] = &k[i];
        }
    }
    // kl_X_check of alternative `alt` for shape `s`, the call's other
    // arguments valid (q_stride, buffers large enough, maps encoded).
    kl_status check(int alt, const kl_paged_decode_gqa_bf16_shape &s, uint32_t splits, uint32_t ctas) {
        const uint32_t bs = s.block_size, mbps = bs ? (s.max_seq_len + bs - 1) / bs + 1 : 1;
        const uint32_t qs = s.num_q_heads * s.head_dim;
        kl_bf16 *q = addr<kl_bf16>(0x10000), *kc = addr<kl_bf16>(0x20000), *vc = addr<kl_bf16>(0x30000),
                *out = addr<kl_bf16>(0x40000);
        float *ws = addr<float>(0x50000);
        int32_t *tab = addr<int32_t>(0x60000), *lens = addr<int32_t>(0x70000);
        uint32_t *cnt = addr<uint32_t>(0x80000);
        const uint64_t big = UINT64_MAX;
        kl_tensor_map km, vm;
        memset(&km, 0, sizeof km);
        memset(&vm, 0, sizeof vm);
        typedef kl_status (*Encode)(const kl_kernel *, kl_tensor_map *, const kl_bf16 *, uint64_t, uint64_t, uint64_t,
                                    uint64_t, uint64_t, uint64_t, uint64_t);
        auto enc = [&](Encode fk, Encode fv, const kl_kernel *kern) {
            const uint64_t nkv = s.num_kv_heads;
            (void)fk(kern, &km, kc, 128, nkv, bs, 4, 128, nkv * 128, (uint64_t)bs * nkv * 128);
            (void)fv(kern, &vm, vc, 128, nkv, bs, 4, 128, nkv * 128, (uint64_t)bs * nkv * 128);
        };
        switch (alt) {
        case KL_PAGED_DECODE_GQA_BF16_MMA_SEED:
            return kl_paged_decode_attn_bf16_gqa_mma_check(&k[0], q, kc, vc, out, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                           s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window);
        case KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT:
            return kl_paged_decode_split_bf16_gqa_mma_check(&k[1], q, kc, vc, ws, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                            s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window, splits, big);
        case KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST:
            return kl_paged_decode_persist_bf16_gqa_mma_check(&k[2], q, kc, vc, out, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                              s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window, ws, cnt,
                                                              ctas, big, big);
        case KL_PAGED_DECODE_GQA_BF16_BULK_SEED:
            return kl_paged_decode_attn_bf16_gqa_bulk_check(&k[3], q, kc, vc, out, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                            s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window);
        case KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST:
            return kl_paged_decode_persist_bf16_gqa_bulk_check(&k[4], q, kc, vc, out, tab, lens, mbps, s.num_seqs,
                                                               s.num_q_heads, s.num_kv_heads, s.head_dim, bs, 0.1f, qs,
                                                               s.sliding_window, ws, cnt, ctas, big, big);
        case KL_PAGED_DECODE_GQA_BF16_TMA_SEED:
            enc(kl_paged_decode_attn_bf16_gqa_tma_k_map_encode, kl_paged_decode_attn_bf16_gqa_tma_v_map_encode, &k[5]);
            return kl_paged_decode_attn_bf16_gqa_tma_check(&k[5], q, &km, &vm, out, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                           s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window);
        case KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST:
            enc(kl_paged_decode_persist_bf16_gqa_tma_k_map_encode, kl_paged_decode_persist_bf16_gqa_tma_v_map_encode, &k[6]);
            return kl_paged_decode_persist_bf16_gqa_tma_check(&k[6], q, &km, &vm, out, tab, lens, mbps, s.num_seqs,
                                                              s.num_q_heads, s.num_kv_heads, s.head_dim, bs, 0.1f, qs,
                                                              s.sliding_window, ws, cnt, ctas, big, big);
        case KL_PAGED_DECODE_GQA_BF16_SCALAR_SEED:
            return kl_paged_decode_attn_bf16_gqa_check(&k[7], q, kc, vc, out, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                       s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window);
        case KL_PAGED_DECODE_GQA_BF16_SCALAR_SPLIT:
            return kl_paged_decode_split_bf16_gqa_check(&k[8], q, kc, vc, ws, tab, lens, mbps, s.num_seqs, s.num_q_heads,
                                                        s.num_kv_heads, s.head_dim, bs, 0.1f, qs, s.sliding_window, splits, big);
        }
        return KL_ERROR_INVALID_ARGUMENT;
    }
};

std::vector<kl_paged_decode_gqa_bf16_shape> paged_shapes() {
    std::vector<kl_paged_decode_gqa_bf16_shape> out;
    for (uint32_t nkv : {1u, 8u})
        for (uint32_t nq_per : {4u, 8u, 7u})
            for (uint32_t hd : {128u, 64u})
                for (uint32_t bs : {0u, 1u, 16u, 24u, 32u})
                    for (uint32_t seqs : {1u, 3u, 33u, 70000u})
                        for (uint32_t len : {1u, 4096u, 32768u})
                            for (uint32_t window : {0u, 300u})
                                out.push_back({seqs, nkv * nq_per, nkv, hd, bs, window, len, true, true});
    return out;
}

TEST(ChooserChecks, PagedDecodeChoiceAlwaysPassesItsLaunchersCheck) {
    const kl_device dev = choose_test::h200();
    int chosen = 0, none = 0;
    for (const char *variant : {"gqa4_d128", "gqa8_d128"}) {
        Module mod(kl_paged_decode_variant_info, variant, true);
        PagedCase pc(mod.get());
        for (const auto &s : paged_shapes()) {
            SCOPED_TRACE(testing::Message() << variant << " seqs " << s.num_seqs << " nq " << s.num_q_heads << " nkv "
                                            << s.num_kv_heads << " hd " << s.head_dim << " bs " << s.block_size << " len "
                                            << s.max_seq_len << " window " << s.sliding_window);
            const kl_paged_decode_gqa_bf16_choice c =
                kl_paged_decode_gqa_bf16_choose(&s, &dev, nullptr, KL_CHOICE_GRAPH, &pc.ks);
            const uint32_t splits = kl_paged_decode_num_splits(s.num_seqs, s.num_kv_heads, s.max_seq_len,
                                                               s.sliding_window, s.block_size, dev.sm_count);
            const uint32_t ctas = kl_paged_decode_persist_ctas(s.num_seqs, s.num_kv_heads, s.max_seq_len,
                                                               s.sliding_window, dev.sm_count);
            bool any = false;
            for (int a = 0; a < KL_PAGED_DECODE_GQA_BF16_ALTERNATIVES; a++) any |= pc.check(a, s, splits, ctas) == KL_SUCCESS;
            if (c.alternative == KL_PAGED_DECODE_GQA_BF16_NONE) {
                EXPECT_FALSE(any) << "NONE although an alternative takes the shape";
                EXPECT_EQ(c.source, KL_CHOICE_NONE);
                none++;
                continue;
            }
            EXPECT_EQ(pc.check(c.alternative, s, c.num_splits, c.num_ctas), KL_SUCCESS)
                << kl_paged_decode_gqa_bf16_op.alternatives[c.alternative] << ": " << kl_last_error_message();
            chosen++;
            // A table that times each alternative fastest picks it where it applies.
            for (uint32_t fast = 0; fast < KL_PAGED_DECODE_GQA_BF16_ALTERNATIVES; fast++) {
                std::vector<std::vector<uint32_t>> tun(9, std::vector<uint32_t>{0, 0});
                tun[KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT][0] = tun[KL_PAGED_DECODE_GQA_BF16_SCALAR_SPLIT][0] = splits;
                for (int p : {KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST, KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST,
                              KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST})
                    tun[p][1] = ctas;
                OneCell cell(dev, kl_paged_decode_gqa_bf16_op,
                             {s.num_seqs, s.max_seq_len, s.num_q_heads, s.num_kv_heads, s.block_size}, tun, fast);
                const kl_paged_decode_gqa_bf16_choice t =
                    kl_paged_decode_gqa_bf16_choose(&s, &dev, &cell.table, KL_CHOICE_GRAPH, &pc.ks);
                ASSERT_EQ(t.source, KL_CHOICE_TABLE);
                ASSERT_NE(t.alternative, KL_PAGED_DECODE_GQA_BF16_NONE);
                EXPECT_EQ(pc.check(t.alternative, s, t.num_splits, t.num_ctas), KL_SUCCESS);
                if (pc.check((int)fast, s, splits, ctas) == KL_SUCCESS) {
                    EXPECT_EQ(t.alternative, (int)fast) << kl_paged_decode_gqa_bf16_op.alternatives[fast];
                } else {
                    EXPECT_NE(t.alternative, (int)fast);
                }
            }
        }
    }
    EXPECT_GT(chosen, 100);
    EXPECT_GT(none, 100);
}

TEST(ChooserChecks, AnUnavailableOrRefusedAlternativeIsNeverChosen) {
    // The table prefers _tma_persist; without its handle, with a handle of
    // another launcher, without aligned caches or persistent buffers, the
    // next fastest that applies is taken.
    const kl_device dev = choose_test::h100();
    Module mod(kl_paged_decode_variant_info, "gqa8_d128", true);
    PagedCase pc(mod.get());
    kl_paged_decode_gqa_bf16_shape s{32, 64, 8, 128, 16, 0, 4096, true, true};
    std::vector<std::vector<uint32_t>> tun(9, std::vector<uint32_t>{7, 100});
    OneCell cell(dev, kl_paged_decode_gqa_bf16_op, {32, 4096, 64, 8, 16}, tun, KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST);
    auto pick = [&](const kl_paged_decode_gqa_bf16_shape &sh, const kl_paged_decode_gqa_bf16_kernels &ks) {
        return kl_paged_decode_gqa_bf16_choose(&sh, &dev, &cell.table, KL_CHOICE_GRAPH, &ks);
    };
    kl_paged_decode_gqa_bf16_choice c = pick(s, pc.ks);
    EXPECT_EQ(c.alternative, KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST);
    EXPECT_EQ(c.num_ctas, 100u);  // the table's tunable, not the rule's
    EXPECT_EQ(c.num_splits, 0u);
    kl_paged_decode_gqa_bf16_kernels ks = pc.ks;
    ks.tma_persist = nullptr;
    EXPECT_EQ(pick(s, ks).alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);  // 20 us, the next
    ks.tma_persist = &pc.k[0];                                              // another launcher's handle
    EXPECT_EQ(pick(s, ks).alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    kl_paged_decode_gqa_bf16_shape unaligned = s;
    unaligned.aligned = false;
    EXPECT_EQ(pick(unaligned, pc.ks).alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    kl_paged_decode_gqa_bf16_shape no_buffers = s;
    no_buffers.persistent_ok = false;
    EXPECT_EQ(pick(no_buffers, pc.ks).alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    // The table's tunables are checked too: 0 persistent blocks is refused.
    std::vector<std::vector<uint32_t>> zero(9, std::vector<uint32_t>{0, 0});
    OneCell bad(dev, kl_paged_decode_gqa_bf16_op, {32, 4096, 64, 8, 16}, zero, KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST);
    const kl_paged_decode_gqa_bf16_choice z = kl_paged_decode_gqa_bf16_choose(&s, &dev, &bad.table, KL_CHOICE_GRAPH, &pc.ks);
    EXPECT_EQ(z.alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    EXPECT_EQ(z.source, KL_CHOICE_TABLE);
    // An unloaded module's handles are unavailable: nothing applies.
    Module other(kl_paged_decode_variant_info, "gqa4_d128", false);
    PagedCase stale(other.get(), false);
    kl_module_unload(const_cast<kl_module *>(other.get()));
    EXPECT_EQ(pick(s, stale.ks).alternative, KL_PAGED_DECODE_GQA_BF16_NONE);
}

// ---- MLA decode, bf16 cache ------------------------------------------------------

TEST(ChooserChecks, MlaDecodeChoiceAlwaysPassesItsLaunchersCheck) {
    const kl_device dev = choose_test::h200();
    int chosen = 0;
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        Module mod(kl_mla_decode_variant_info, variant, true);
        kl_kernel mma, tma;
        ASSERT_EQ(kl_mla_decode_attn_bf16_mma_get(&mma, mod.get()), KL_SUCCESS);
        ASSERT_EQ(kl_mla_decode_attn_bf16_tma_get(&tma, mod.get()), KL_SUCCESS) << kl_last_error_message();
        kl_mla_decode_attn_bf16_kernels ks{&mma, &tma};
        for (uint32_t d : {320u, 576u})
            for (uint32_t page : {0u, 1u, 64u, 100u, 128u, 70000u})
                for (uint32_t s_q : {0u, 1u, 8u, 9u})
                    for (uint32_t h_q : {1u, 16u, 128u, 129u})
                        for (uint32_t batch : {0u, 1u, 300u, 1u << 25}) {
                            kl_mla_decode_attn_bf16_shape s{batch, s_q, h_q, d, page, 2048};
                            const kl_mla_decode_attn_bf16_choice c =
                                kl_mla_decode_attn_bf16_choose(&s, &dev, nullptr, KL_CHOICE_GRAPH, &ks);
                            auto check = [&](int alt, uint32_t parts) {
                                kl_tensor_map qm, cm;
                                memset(&qm, 0, sizeof qm);
                                memset(&cm, 0, sizeof cm);
                                kl_bf16 *p = addr<kl_bf16>(0x10000);
                                int32_t *i = addr<int32_t>(0x20000);
                                float *f = addr<float>(0x30000);
                                if (alt == KL_MLA_DECODE_ATTN_BF16_MMA)
                                    return kl_mla_decode_attn_bf16_mma_check(&mma, p, p, i, i, i, p, f, f, batch, s_q, h_q, d,
                                                                            page, 4, 4, 0.1f, parts, UINT64_MAX, UINT64_MAX);
                                (void)kl_mla_decode_attn_bf16_tma_q_map_encode(&tma, &qm, p, d, (uint64_t)s_q * h_q + 1,
                                                                               batch + 1, d, ((uint64_t)s_q * h_q + 1) * d);
                                (void)kl_mla_decode_attn_bf16_tma_cache_map_encode(&tma, &cm, p, d, page + 1, 4, d,
                                                                                   (uint64_t)(page + 1) * d);
                                return kl_mla_decode_attn_bf16_tma_check(&tma, &qm, &cm, i, i, i, p, f, f, batch, s_q, h_q, d,
                                                                        page, 4, 4, 0.1f, parts, UINT64_MAX, UINT64_MAX);
                            };
                            SCOPED_TRACE(testing::Message() << variant << " d " << d << " page " << page << " s_q " << s_q
                                                            << " h_q " << h_q << " batch " << batch);
                            if (c.alternative == KL_MLA_DECODE_ATTN_BF16_NONE) {
                                EXPECT_NE(check(KL_MLA_DECODE_ATTN_BF16_MMA, kl_mla_decode_num_parts(KL_MLA_DECODE_MMA, 132, s_q, h_q)),
                                          KL_SUCCESS);
                                continue;
                            }
                            EXPECT_EQ(check(c.alternative, c.num_parts), KL_SUCCESS) << kl_last_error_message();
                            chosen++;
                        }
    }
    EXPECT_GT(chosen, 50);
}

// ---- MLA prefill attention --------------------------------------------------------

TEST(ChooserChecks, MlaPrefillChoiceAlwaysPassesItsLaunchersCheck) {
    const kl_device dev = choose_test::h100();
    int chosen = 0;
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        Module mod(kl_mla_prefill_variant_info, variant, true);
        kl_kernel k[3];
        ASSERT_EQ(kl_mla_absorbed_attention_mma_get(&k[0], mod.get()), KL_SUCCESS);
        ASSERT_EQ(kl_mla_absorbed_attention_wgmma_get(&k[1], mod.get()), KL_SUCCESS);
        ASSERT_EQ(kl_mla_absorbed_attention_tma_get(&k[2], mod.get()), KL_SUCCESS);
        kl_mla_absorbed_attention_kernels ks{&k[0], &k[1], &k[2]};
        for (uint32_t d : {320u, 576u})
            for (uint32_t lora : {256u, 512u})
                for (uint32_t seq : {0u, 1u, 4096u, 2147483600u})
                    for (uint32_t nq : {1u, 16u, 70000u})
                        for (uint32_t batch : {1u, 2u, 70000u})
                            for (bool aligned : {false, true}) {
                                kl_mla_absorbed_attention_shape s{batch, seq, nq, d, lora, aligned};
                                const kl_mla_absorbed_attention_choice c =
                                    kl_mla_absorbed_attention_choose(&s, &dev, nullptr, KL_CHOICE_EAGER, &ks);
                                kl_bf16 *p = addr<kl_bf16>(0x10000);
                                auto check = [&](int alt, uint32_t ctas) {
                                    if (alt == KL_MLA_ABSORBED_ATTENTION_MMA)
                                        return kl_mla_absorbed_attention_mma_check(&k[0], p, p, p, seq, batch, nq, d, lora, 0.1f, true);
                                    if (alt == KL_MLA_ABSORBED_ATTENTION_WGMMA)
                                        return kl_mla_absorbed_attention_wgmma_check(&k[1], p, p, p, seq, batch, nq, d, lora, 0.1f, true);
                                    // The maps' extents at least 1 (a map is never empty); the keys
                                    // exactly seq_len (the spec's {exact: seq_len}; 0 takes any map).
                                    kl_tensor_map qm, kvm;
                                    const uint32_t keys = seq ? seq : 1u;
                                    (void)kl_mla_absorbed_attention_tma_q_map_encode(&k[2], &qm, p, d, nq, seq + 1, batch, d,
                                                                                     (uint64_t)nq * d, (uint64_t)(seq + 1) * nq * d);
                                    (void)kl_mla_absorbed_attention_tma_kv_map_encode(&k[2], &kvm, p, d, keys, batch, d,
                                                                                      (uint64_t)keys * d);
                                    return kl_mla_absorbed_attention_tma_check(&k[2], &qm, &kvm, p, seq, batch, nq, d, lora, 0.1f,
                                                                               true, ctas);
                                };
                                SCOPED_TRACE(testing::Message() << variant << " d " << d << " seq " << seq << " nq " << nq
                                                                << " batch " << batch << " aligned " << aligned);
                                if (c.alternative == KL_MLA_ABSORBED_ATTENTION_NONE) {
                                    EXPECT_NE(check(KL_MLA_ABSORBED_ATTENTION_MMA, 0), KL_SUCCESS);
                                    EXPECT_NE(check(KL_MLA_ABSORBED_ATTENTION_WGMMA, 0), KL_SUCCESS);
                                    continue;
                                }
                                EXPECT_EQ(check(c.alternative, c.num_ctas), KL_SUCCESS) << kl_last_error_message();
                                chosen++;
                            }
    }
    EXPECT_GT(chosen, 50);
}

}  // namespace
