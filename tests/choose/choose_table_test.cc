// Choice tables (klaunch/choose.h): the text format read as strictly as
// module metadata (every refusal KL_ERROR_CHOICE_TABLE naming FILE:LINE and
// what is wrong, the table left empty; no crash on garbage), written back
// by kl_choice_table_write and read again unchanged; the lookup's device
// key and log2 buckets; the chooser falling back to its rule when no table
// row matches (another card, policy, exact key or an operation's other
// alternative set).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "klaunch/paged_decode.h"
#include "tests/choose/choose_test_util.h"

namespace {

using choose_test::Module;

const std::string kHeader = "klaunch-choices 1\n";
const std::string kDevice = "device h100 cc 9.0 sms 132 l2 52428800 mem_gib 79 bw_gbs 3350 name NVIDIA_H100_80GB_HBM3\n";
const std::string kKeys = "num_seqs=32 max_seq_len=4096 num_q_heads=64 num_kv_heads=8 block_size=16";

std::string row(const std::string &alt_and_rest, const std::string &keys = kKeys, const std::string &policy = "graph") {
    return "row h100 paged_decode_gqa_bf16 " + policy + " " + keys + " " + alt_and_rest + "\n";
}

kl_status load(const std::string &text, kl_choice_table *t) {
    return kl_choice_table_load_text(text.data(), text.size(), "h100.choices", kl_paged_decode_operations, t);
}

struct Refusal {
    const char *name;
    std::string text;
    const char *message;  // the whole of kl_last_error_message()
};

TEST(ChoiceTableFile, RefusesEachMalformedFileNamingItsLine) {
    const Refusal cases[] = {
        {"empty", "", "KL_ERROR_CHOICE_TABLE: h100.choices:1: empty: not a choice table (its first line is 'klaunch-choices 1')"},
        {"not a table", "hello\n", "KL_ERROR_CHOICE_TABLE: h100.choices:1: not a choice table: the first line is 'klaunch-choices 1'"},
        {"bad version", "klaunch-choices 2\nend\n", "KL_ERROR_CHOICE_TABLE: h100.choices:1: table version 2; this runtime reads 1"},
        {"truncated before end", kHeader + kDevice + row("alt=mma_seed us=10.5"),
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: ends without its 'end' line (truncated?)"},
        {"truncated mid-line", kHeader + kDevice + "row h100 paged_decode_gqa_bf16 gra",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: the last line has no line end (truncated?)"},
        {"unknown alternative", kHeader + kDevice + row("alt=mma_fast us=10.5") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: operation paged_decode_gqa_bf16 has no alternative 'mma_fast'"},
        {"unknown operation", kHeader + kDevice + "row h100 paged_decode_gqa_bf32 graph alt=mma_seed us=1\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: unknown operation 'paged_decode_gqa_bf32'"},
        {"unknown device key", kHeader + "device h100 cc 9.0 sms 132 l2 52428800 mem_gib 79 clock_mhz 1980\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: device 'h100': unknown key 'clock_mhz' (a device key is cc, sms, l2 and "
         "mem_gib; bw_gbs and name are recorded)"},
        {"device key incomplete", kHeader + "device h100 cc 9.0 sms 132 mem_gib 79\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: device 'h100' lacks l2 (a device key is cc, sms, l2 and mem_gib)"},
        {"undeclared device", kHeader + row("alt=mma_seed us=10.5") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: row of unknown device 'h100' (declare it first: device h100 cc ... sms ... "
         "l2 ... mem_gib ...)"},
        {"two devices, one key", kHeader + kDevice + "device other cc 9.0 sms 132 l2 52428800 mem_gib 79\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: device 'other' has the key of device 'h100' (cc, sms, l2, mem_gib)"},
        {"duplicate entry", kHeader + kDevice + "# two times for one cell\n" + row("alt=mma_seed us=10.5") +
                                row("us=11 alt=mma_seed") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:5: duplicate row: line 4 times mma_seed at the same shape, device and policy"},
        {"non-numeric time", kHeader + kDevice + row("alt=mma_seed us=fast") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: us='fast' is not a time in microseconds (digits, at most 3 after a point)"},
        {"time with an exponent", kHeader + kDevice + row("alt=mma_seed us=1e3") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: us='1e3' is not a time in microseconds (digits, at most 3 after a point)"},
        {"negative time", kHeader + kDevice + row("alt=mma_seed us=-1.0") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: us='-1.0' is not a time in microseconds (digits, at most 3 after a point)"},
        {"key missing", kHeader + kDevice + row("alt=mma_seed us=1", "num_seqs=32 max_seq_len=4096") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: row without key num_q_heads=VALUE"},
        {"key with a leading zero", kHeader + kDevice +
                                        row("alt=mma_seed us=1", "num_seqs=032 max_seq_len=4096 num_q_heads=64 num_kv_heads=8 block_size=16") +
                                        "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: num_seqs='032' is not a decimal u32 (no leading zeros)"},
        {"key past 32 bits", kHeader + kDevice +
                                 row("alt=mma_seed us=1", "num_seqs=4294967296 max_seq_len=4096 num_q_heads=64 num_kv_heads=8 block_size=16") +
                                 "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: num_seqs='4294967296' is not a decimal u32 (no leading zeros)"},
        {"tunable missing", kHeader + kDevice + row("alt=mma_split us=1") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: row of mma_split without its tunable num_splits=VALUE"},
        {"another alternative's tunable", kHeader + kDevice + row("alt=mma_seed us=1 num_splits=4") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: 'num_splits' is no key of operation paged_decode_gqa_bf16 nor a tunable of its "
         "alternative mma_seed"},
        {"bad policy", kHeader + kDevice + row("alt=mma_seed us=1", kKeys, "lazy") + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: policy 'lazy' is not eager or graph"},
        {"control character", kHeader + kDevice + "row h100\tpaged_decode_gqa_bf16\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:3: a control character (byte 0x09 at column 9)"},
        {"NUL byte", kHeader + std::string("dev\0ce\n", 7) + "end\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: a control character (byte 0x00 at column 4)"},
        {"line too long", kHeader + "# " + std::string(1100, 'x') + "\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: the line is 1102 characters; at most 1023 are read"},
        {"text after end", kHeader + "end\n" + kDevice, "KL_ERROR_CHOICE_TABLE: h100.choices:3: text after the 'end' line"},
        {"unknown line", kHeader + "rows h100\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: unknown line 'rows' (expected device, row or end)"},
        {"bad cc", kHeader + "device h100 cc 90 sms 132 l2 1 mem_gib 79\nend\n",
         "KL_ERROR_CHOICE_TABLE: h100.choices:2: device 'h100': cc '90' is not MAJOR.MINOR (e.g. 9.0)"},
    };
    for (const Refusal &c : cases) {
        kl_choice_table t;
        memset(&t, 0xab, sizeof t);
        EXPECT_EQ(load(c.text, &t), KL_ERROR_CHOICE_TABLE) << c.name;
        EXPECT_EQ(std::string(kl_last_error_message()), c.message) << c.name;
        EXPECT_EQ(t.num_rows, 0u) << c.name;
        EXPECT_EQ(t.storage, nullptr) << c.name;
    }
}

TEST(ChoiceTableFile, ReadsWhatItWritesAndKeepsEveryField) {
    const std::string text = kHeader + kDevice + "device h200 cc 9.0 sms 132 l2 62914560 mem_gib 140\n" +
                             row("alt=mma_split us=30.125 num_splits=16") + row("alt=tma_persist us=25 num_ctas=128") +
                             "row h200 paged_decode_gqa_fp8 eager num_seqs=1 max_seq_len=32768 num_q_heads=32 num_kv_heads=8 "
                             "block_size=16 alt=mma_seed us=0.001\n" +
                             "end\n";
    kl_choice_table t;
    ASSERT_EQ(load(text, &t), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(t.num_devices, 2u);
    ASSERT_EQ(t.num_rows, 3u);
    EXPECT_STREQ(t.devices[0].name, "NVIDIA_H100_80GB_HBM3");
    EXPECT_EQ(t.devices[0].bandwidth_gbs, 3350u);
    EXPECT_EQ(t.devices[1].l2_bytes, 62914560u);
    EXPECT_EQ(t.rows[0].time_ns, 30125u);
    EXPECT_EQ(t.rows[0].tunables[0], 16u);
    EXPECT_EQ(t.rows[1].tunables[1], 128u);
    EXPECT_EQ(t.rows[2].time_ns, 1u);
    EXPECT_EQ(t.rows[2].policy, (uint32_t)KL_CHOICE_EAGER);
    EXPECT_EQ(t.rows[1].line, 5u);
    char *buf = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    ASSERT_EQ(kl_choice_table_write(f, &t, kl_paged_decode_operations), KL_SUCCESS);
    fclose(f);
    const std::string written(buf, size);
    free(buf);
    EXPECT_EQ(written, kHeader + kDevice + "device h200 cc 9.0 sms 132 l2 62914560 mem_gib 140\n" +
                           row("alt=mma_split us=30.125 num_splits=16") + row("alt=tma_persist us=25.000 num_ctas=128") +
                           "row h200 paged_decode_gqa_fp8 eager num_seqs=1 max_seq_len=32768 num_q_heads=32 num_kv_heads=8 "
                           "block_size=16 alt=mma_seed us=0.001\nend\n");
    kl_choice_table again;
    ASSERT_EQ(load(written, &again), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(again.num_rows, t.num_rows);
    for (size_t i = 0; i < t.num_rows; i++) {
        EXPECT_EQ(again.rows[i].time_ns, t.rows[i].time_ns);
        EXPECT_STREQ(again.rows[i].alternative, t.rows[i].alternative);
        EXPECT_EQ(0, memcmp(again.rows[i].keys, t.rows[i].keys, sizeof t.rows[i].keys));
    }
    kl_choice_table_free(&again);
    kl_choice_table_free(&t);
    EXPECT_EQ(t.num_rows, 0u);
    kl_choice_table_free(&t);  // twice: nothing left to free
}

TEST(ChoiceTableFile, LoadFileRefusesWhatIsNotARegularFile) {
    kl_choice_table t;
    EXPECT_EQ(kl_choice_table_load_file("/nonexistent/h100.choices", kl_paged_decode_operations, &t), KL_ERROR_FILE_IO);
    EXPECT_EQ(kl_choice_table_load_file("/tmp", kl_paged_decode_operations, &t), KL_ERROR_FILE_IO);
    EXPECT_EQ(kl_choice_table_load_file(nullptr, kl_paged_decode_operations, &t), KL_ERROR_INVALID_ARGUMENT);
    const std::string path = testing::TempDir() + "/ok.choices";
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = kHeader + kDevice + row("alt=mma_seed us=3") + "end\n";
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
    ASSERT_EQ(kl_choice_table_load_file(path.c_str(), kl_paged_decode_operations, &t), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(t.num_rows, 1u);
    kl_choice_table_free(&t);
}

TEST(ChoiceTableFile, GarbageNeverCrashes) {
    // Mutations of a good table (bytes flipped, cut, duplicated): each is
    // read or refused, never misread into a crash (run under ASan in CI).
    const std::string good = kHeader + kDevice + row("alt=mma_split us=30.125 num_splits=16") +
                             row("alt=tma_persist us=25 num_ctas=128") + "end\n";
    std::mt19937 rng(45);
    int refused = 0;
    for (int i = 0; i < 20000; i++) {
        std::string s = good;
        const int edits = 1 + (int)(rng() % 4);
        for (int e = 0; e < edits; e++) {
            const size_t at = rng() % s.size();
            switch (rng() % 4) {
            case 0: s[at] = (char)(rng() % 256); break;
            case 1: s.erase(at, rng() % 8); break;
            case 2: s.insert(at, s.substr(rng() % s.size(), rng() % 16)); break;
            default: s.resize(at); break;
            }
            if (s.empty()) s = "x";
        }
        kl_choice_table t;
        const kl_status st = load(s, &t);
        ASSERT_TRUE(st == KL_SUCCESS || st == KL_ERROR_CHOICE_TABLE) << st;
        if (st != KL_SUCCESS) {
            refused++;
            ASSERT_EQ(std::string(kl_last_error_message()).rfind("KL_ERROR_CHOICE_TABLE: h100.choices:", 0), 0u);
        }
        kl_choice_table_free(&t);
    }
    EXPECT_GT(refused, 15000);
}

// ---- the lookup -----------------------------------------------------------------

struct Kernels {
    Module mod{kl_paged_decode_variant_info, "gqa8_d128", true};
    kl_kernel seed, split;
    kl_paged_decode_gqa_bf16_kernels ks{};
    Kernels() {
        EXPECT_EQ(kl_paged_decode_attn_bf16_gqa_mma_get(&seed, mod.get()), KL_SUCCESS);
        EXPECT_EQ(kl_paged_decode_split_bf16_gqa_mma_get(&split, mod.get()), KL_SUCCESS);
        ks.mma_seed = &seed;
        ks.mma_split = &split;
    }
};

// A table whose grid of num_seqs x max_seq_len times mma_split fastest at
// num_seqs 1 and mma_seed elsewhere, with the split count telling the cell.
kl_choice_table grid_table(kl_choice_table *t) {
    std::string text = kHeader + kDevice;
    for (uint32_t seqs : {1u, 8u, 64u})
        for (uint32_t len : {1024u, 16384u}) {
            const std::string keys = "num_seqs=" + std::to_string(seqs) + " max_seq_len=" + std::to_string(len) +
                                     " num_q_heads=64 num_kv_heads=8 block_size=16";
            text += row(std::string("alt=mma_seed us=") + (seqs == 1 ? "50" : "10"), keys);
            text += row("alt=mma_split us=20 num_splits=" + std::to_string(seqs * 100 + len / 1024), keys);
        }
    text += "end\n";
    EXPECT_EQ(load(text, t), KL_SUCCESS) << kl_last_error_message();
    return *t;
}

TEST(ChoiceLookup, TakesTheCellNearestInLog2PerKey) {
    Kernels k;
    kl_choice_table t;
    grid_table(&t);
    const kl_device dev = choose_test::h100();
    struct {
        uint32_t seqs, len, want_splits;  // 0: mma_seed
    } cases[] = {
        {1, 1024, 101},   {1, 16384, 116},  {1, 1, 101},      {0, 4096, 101},  // below the smallest: the smallest
        {1, 4096, 101},   {1, 4097, 116},                                       // 4096^2 = 1024 * 16384: a tie goes down
        {2, 1024, 101},   {3, 1024, 0},                                         // 3^2 > 1 * 8: nearer 8
        {1, 1u << 31, 116}, {1, 0xffffffffu, 116},                             // past the largest: the largest
    };
    for (const auto &c : cases) {
        kl_paged_decode_gqa_bf16_shape s{c.seqs, 64, 8, 128, 16, 0, c.len, false, false};
        const kl_paged_decode_gqa_bf16_choice ch = kl_paged_decode_gqa_bf16_choose(&s, &dev, &t, KL_CHOICE_GRAPH, &k.ks);
        SCOPED_TRACE(testing::Message() << c.seqs << " x " << c.len);
        if (c.seqs == 0) {
            // num_seqs 0 goes to the smallest tabled count, 1
            EXPECT_EQ(ch.source, KL_CHOICE_TABLE);
        }
        EXPECT_EQ(ch.source, KL_CHOICE_TABLE);
        if (c.want_splits == 0) {
            EXPECT_EQ(ch.alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
        } else {
            EXPECT_EQ(ch.alternative, KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT);
            EXPECT_EQ(ch.num_splits, c.want_splits);
        }
    }
    kl_choice_table_free(&t);
}

TEST(ChoiceLookup, FallsBackToTheRuleWhereNoRowMatches) {
    Kernels k;
    kl_choice_table t;
    grid_table(&t);
    // TABLE_ONLY: the compiled-in H100 and H200 tables would otherwise
    // answer where this one has no cell (the test after this one).
    t.flags = KL_CHOICE_TABLE_ONLY;
    kl_paged_decode_gqa_bf16_shape s{1, 64, 8, 128, 16, 0, 32768, false, false};
    const kl_device h100 = choose_test::h100();
    auto choose = [&](const kl_paged_decode_gqa_bf16_shape &sh, const kl_device &d, kl_choice_policy p) {
        return kl_paged_decode_gqa_bf16_choose(&sh, &d, &t, p, &k.ks);
    };
    EXPECT_EQ(choose(s, h100, KL_CHOICE_GRAPH).source, KL_CHOICE_TABLE);
    // Another card: H200, H100 PCIe (114 SMs), another memory size, cc 9.1.
    kl_device other[4] = {choose_test::h200(), h100, h100, h100};
    other[1].sm_count = 114;
    other[2].mem_bytes = 94ull << 30;
    other[3].cc_minor = 1;
    for (const kl_device &d : other) {
        const kl_paged_decode_gqa_bf16_choice c = choose(s, d, KL_CHOICE_GRAPH);
        EXPECT_EQ(c.source, KL_CHOICE_RULE);
        const uint32_t splits = kl_paged_decode_num_splits(1, 8, 32768, 0, 16, d.sm_count);
        EXPECT_EQ(c.alternative, splits > 1 ? KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT : KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    }
    // The same memory within half a GiB is the same key.
    kl_device near = h100;
    near.mem_bytes += 100u << 20;
    EXPECT_EQ(choose(s, near, KL_CHOICE_GRAPH).source, KL_CHOICE_TABLE);
    // Eager launches were not timed; nor an exact key's other value.
    EXPECT_EQ(choose(s, h100, KL_CHOICE_EAGER).source, KL_CHOICE_RULE);
    kl_paged_decode_gqa_bf16_shape bs32 = s;
    bs32.block_size = 32;
    EXPECT_EQ(choose(bs32, h100, KL_CHOICE_GRAPH).source, KL_CHOICE_RULE);
    // A cell whose alternatives are all unavailable: the rule.
    kl_paged_decode_gqa_bf16_kernels none = k.ks;
    none.mma_seed = none.mma_split = nullptr;
    EXPECT_EQ(kl_paged_decode_gqa_bf16_choose(&s, &h100, &t, KL_CHOICE_GRAPH, &none).source, KL_CHOICE_NONE);
    // The fp8 operation's table has no rows here.
    Module mod(kl_paged_decode_variant_info, "gqa8_d128", false);
    kl_kernel f8;
    ASSERT_EQ(kl_paged_decode_attn_fp8_gqa_mma_get(&f8, mod.get()), KL_SUCCESS);
    kl_paged_decode_gqa_fp8_kernels ks8{};
    ks8.mma_seed = &f8;
    kl_paged_decode_gqa_fp8_shape s8{1, 64, 8, 128, 16, 0, 16 * 8 * 128, 32768, false, false};
    EXPECT_EQ(kl_paged_decode_gqa_fp8_choose(&s8, &h100, &t, KL_CHOICE_GRAPH, &ks8).source, KL_CHOICE_RULE);
    // Without the flag the compiled-in table answers where this one has no cell.
    t.flags = 0;
    EXPECT_EQ(choose(s, h100, KL_CHOICE_EAGER).source, KL_CHOICE_BUILTIN);
    kl_choice_table_free(&t);
}

// The compiled-in tables (tools/tune/tables): one device each for the H100
// SXM and the H200; a card of another key gets the rule.
TEST(ChoiceLookup, CompiledInTablesServeTheirCardsOnly) {
    Kernels k;
    const kl_choice_table *b = kl_choice_builtin_table();
    ASSERT_EQ(b->num_devices, 2u);
    EXPECT_GT(b->num_rows, 0u);
    kl_paged_decode_gqa_bf16_shape s{32, 64, 8, 128, 16, 0, 4096, false, false};
    const kl_device h100 = choose_test::h100();
    kl_device pcie = h100;
    pcie.sm_count = 114;
    EXPECT_EQ(kl_paged_decode_gqa_bf16_choose(&s, &h100, nullptr, KL_CHOICE_GRAPH, &k.ks).source, KL_CHOICE_BUILTIN);
    EXPECT_EQ(kl_paged_decode_gqa_bf16_choose(&s, &pcie, nullptr, KL_CHOICE_GRAPH, &k.ks).source, KL_CHOICE_RULE);
    const kl_choice_table rule_only = {nullptr, 0u, nullptr, 0u, nullptr, KL_CHOICE_TABLE_ONLY};
    EXPECT_EQ(kl_paged_decode_gqa_bf16_choose(&s, &h100, &rule_only, KL_CHOICE_GRAPH, &k.ks).source, KL_CHOICE_RULE);
}

}  // namespace
