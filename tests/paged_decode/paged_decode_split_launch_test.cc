// CPU tests, through the recording backend, of the split-KV launchers
// (specs/paged_decode.yaml: paged_decode_split_{bf16,fp8,bf16_gqa,fp8_gqa},
// paged_decode_split_combine) and of the helpers in
// klaunch/paged_decode_split.h that meet them:
// - kl_paged_decode_gqa_applies(kernel, nq, nkv, hd) is true exactly when
//   the packed launcher's checks pass for that shape (the other arguments
//   valid), for the seed's packed launchers and the split ones, in every
//   loaded variant; and it never touches kl_last_error() or the callback;
// - kl_paged_decode_split_workspace_bytes() is exactly the size the
//   launchers accept (one byte less is refused);
// - the launch geometry the spec documents: grid (heads, num_seqs,
//   num_splits), block 256; combine grid (num_q_heads, num_seqs), block
//   128; num_seqs and num_splits reach the kernel, workspace_bytes does not.
// Modules are metadata texts (no GPU): any variant's constants can be loaded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "klaunch/record_backend.h"

namespace {

// Non-NULL stand-ins for device pointers (never dereferenced here).
kl_bf16 *const kQ = reinterpret_cast<kl_bf16 *>(uintptr_t{0x10000});
kl_bf16 *const kKb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x20000});
kl_bf16 *const kVb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x30000});
kl_fp8_e4m3 *const kK8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x40000});
kl_fp8_e4m3 *const kV8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x50000});
float *const kWs = reinterpret_cast<float *>(uintptr_t{0x60000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x70000});
int32_t *const kTables = reinterpret_cast<int32_t *>(uintptr_t{0x80000});
int32_t *const kLens = reinterpret_cast<int32_t *>(uintptr_t{0x90000});

std::string module_text(const std::string &variant, long long width, long long head_dim) {
    // No sha256 spec hash: metadata written by hand, not a stale fatbin.
    return "klaunch-module 1\nfamily paged_decode\nvariant " + variant + "\nspec_hash test\nsource_hash unknown\n" +
           "const DECODE_GQA_PACK_WIDTH " + std::to_string(width) + "\nconst DECODE_GQA_PACK_HEAD_DIM " +
           std::to_string(head_dim) + "\n";
}

class SplitLaunchTest : public ::testing::Test {
  protected:
    void SetUp() override { kl_record_backend_init(&rb_, records_, kCapacity); }
    void TearDown() override {
        for (kl_module &m : modules_) kl_module_unload(&m);
        kl_set_error_callback(nullptr, nullptr);
    }
    const kl_module *load(const std::string &variant, long long width, long long head_dim) {
        modules_.emplace_back();
        const std::string text = module_text(variant, width, head_dim);
        kl_module *m = &modules_.back();
        EXPECT_EQ(kl_module_load(&rb_.base, text.c_str(), text.size(), m), KL_SUCCESS) << kl_last_error_message();
        return m;
    }

    static constexpr size_t kCapacity = 8;
    kl_record records_[kCapacity];
    kl_record_backend rb_;
    std::deque<kl_module> modules_;  // kernels keep pointers to their module: no relocation
};

// The shapes a caller might probe: group sizes around the packed widths,
// head dims around 128, and zeros.
struct ShapeProbe {
    uint32_t nq, nkv, hd;
};
std::vector<ShapeProbe> probes() {
    std::vector<ShapeProbe> v;
    for (uint32_t nkv : {0u, 1u, 2u, 3u, 8u})
        for (uint32_t group : {0u, 1u, 2u, 4u, 8u, 16u})
            for (uint32_t extra : {0u, 1u})
                for (uint32_t hd : {0u, 64u, 127u, 128u, 129u, 256u}) v.push_back({nkv * group + extra, nkv, hd});
    return v;
}

// Every check of the packed launcher X for the shape, other arguments valid
// (q_stride and cache_stride large enough, block_size 16, 2 splits, enough
// workspace). Failures land in kl_last_error as usual.
kl_status check_packed(const kl_kernel *k, const char *which, ShapeProbe s) {
    const uint32_t q_stride = 1u << 20, bs = 16, seqs = 3, splits = 2;
    const uint64_t cache_stride = 1ull << 30, ws = 1ull << 40;
    const std::string w(which);
    if (w == "attn_bf16_gqa")
        return kl_paged_decode_attn_bf16_gqa_check(k, kQ, kKb, kVb, kOut, kTables, kLens, 4, seqs, s.nq, s.nkv, s.hd,
                                                   bs, 0.1f, q_stride, 0);
    if (w == "attn_fp8_gqa")
        return kl_paged_decode_attn_fp8_gqa_check(k, kQ, kK8, kV8, kOut, kTables, kLens, 4, seqs, s.nq, s.nkv, s.hd, bs,
                                                  0.1f, 1.0f, 1.0f, q_stride, cache_stride, 0);
    if (w == "split_bf16_gqa")
        return kl_paged_decode_split_bf16_gqa_check(k, kQ, kKb, kVb, kWs, kTables, kLens, 4, seqs, s.nq, s.nkv, s.hd,
                                                    bs, 0.1f, q_stride, 0, splits, ws);
    return kl_paged_decode_split_fp8_gqa_check(k, kQ, kK8, kV8, kWs, kTables, kLens, 4, seqs, s.nq, s.nkv, s.hd, bs,
                                               0.1f, 1.0f, 1.0f, q_stride, cache_stride, 0, splits, ws);
}

kl_status get_packed(kl_kernel *k, const kl_module *m, const char *which) {
    const std::string w(which);
    if (w == "attn_bf16_gqa") return kl_paged_decode_attn_bf16_gqa_get(k, m);
    if (w == "attn_fp8_gqa") return kl_paged_decode_attn_fp8_gqa_get(k, m);
    if (w == "split_bf16_gqa") return kl_paged_decode_split_bf16_gqa_get(k, m);
    return kl_paged_decode_split_fp8_gqa_get(k, m);
}

const char *const kPacked[] = {"attn_bf16_gqa", "attn_fp8_gqa", "split_bf16_gqa", "split_fp8_gqa"};

TEST_F(SplitLaunchTest, GqaAppliesExactlyWhenThePackedLauncherAcceptsTheShape) {
    struct V {
        const char *name;
        long long width, hd;
    };
    int agree_true = 0;
    for (V v : {V{"gqa4_d128", 4, 128}, V{"gqa8_d128", 8, 128}, V{"gqa2_d64", 2, 64}, V{"gqa16_d256", 16, 256}}) {
        const kl_module *m = load(v.name, v.width, v.hd);
        for (const char *which : kPacked) {
            kl_kernel k;
            ASSERT_EQ(get_packed(&k, m, which), KL_SUCCESS) << kl_last_error_message();
            for (ShapeProbe s : probes()) {
                const bool applies = kl_paged_decode_gqa_applies(&k, s.nq, s.nkv, s.hd);
                const kl_status st = check_packed(&k, which, s);
                EXPECT_EQ(applies, st == KL_SUCCESS)
                    << which << " in " << v.name << ": nq " << s.nq << ", nkv " << s.nkv << ", hd " << s.hd
                    << "; check says " << kl_status_name(st) << " " << (st ? kl_last_error_message() : "");
                // What the contract says the packed kernels need.
                const bool want = s.nq == s.nkv * v.width && s.hd == v.hd;
                EXPECT_EQ(applies, want) << which << " in " << v.name << ": nq " << s.nq << ", nkv " << s.nkv
                                         << ", hd " << s.hd;
                agree_true += applies;
            }
        }
    }
    EXPECT_GT(agree_true, 40);  // the probes do include shapes that fit
}

TEST_F(SplitLaunchTest, GqaAppliesReportsNothing) {
    const kl_module *m = load("gqa8_d128", 8, 128);
    kl_kernel k;
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa_get(&k, m), KL_SUCCESS);
    // A known last error first.
    ASSERT_EQ(check_packed(&k, "split_bf16_gqa", {7, 1, 128}), KL_ERROR_VARIANT_MISMATCH);
    const std::string before = kl_last_error_message();
    int calls = 0;
    kl_set_error_callback([](kl_status, const char *, void *user) { ++*static_cast<int *>(user); }, &calls);
    for (ShapeProbe s : probes()) (void)kl_paged_decode_gqa_applies(&k, s.nq, s.nkv, s.hd);
    (void)kl_paged_decode_gqa_applies(nullptr, 8, 1, 128);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(kl_last_error(), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_EQ(std::string(kl_last_error_message()), before);
    // The check itself does report (the contrast the helper exists for).
    EXPECT_EQ(check_packed(&k, "split_bf16_gqa", {7, 1, 128}), KL_ERROR_VARIANT_MISMATCH);
    EXPECT_EQ(calls, 1);
}

TEST_F(SplitLaunchTest, GqaAppliesIsFalseWithoutAPackedKernel) {
    const kl_module *m = load("gqa8_d128", 8, 128);
    EXPECT_FALSE(kl_paged_decode_gqa_applies(nullptr, 8, 1, 128));
    kl_kernel zeroed;
    std::memset(&zeroed, 0, sizeof zeroed);
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&zeroed, 8, 1, 128));
    // Plain launchers carry no pack constants.
    kl_kernel plain, split_plain, combine;
    ASSERT_EQ(kl_paged_decode_attn_bf16_get(&plain, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_bf16_get(&split_plain, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine_get(&combine, m), KL_SUCCESS);
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&plain, 8, 1, 128));
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&split_plain, 8, 1, 128));
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&combine, 8, 1, 128));
    // A handle unloaded since (kl_kernel_get's magic cleared).
    kl_kernel packed;
    ASSERT_EQ(kl_paged_decode_attn_fp8_gqa_get(&packed, m), KL_SUCCESS);
    EXPECT_TRUE(kl_paged_decode_gqa_applies(&packed, 16, 2, 128));
    packed.magic = 0;
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&packed, 16, 2, 128));
}

TEST_F(SplitLaunchTest, GqaAppliesIsFalseWhereTheLauncherOverflows) {
    // Width 2^40: num_kv_heads * width needs more than 32 bits, and with
    // num_kv_heads near 2^32 more than 64, where the launcher reports
    // KL_ERROR_OVERFLOW.
    const kl_module *m = load("huge", 1ll << 40, 128);
    kl_kernel k;
    ASSERT_EQ(kl_paged_decode_attn_bf16_gqa_get(&k, m), KL_SUCCESS);
    for (uint32_t nkv : {1u, 3u, 0xffffffffu}) {
        const ShapeProbe s{0xffffffffu, nkv, 128};
        EXPECT_FALSE(kl_paged_decode_gqa_applies(&k, s.nq, s.nkv, s.hd)) << "nkv " << nkv;
        EXPECT_NE(check_packed(&k, "attn_bf16_gqa", s), KL_SUCCESS) << "nkv " << nkv;
    }
    // num_kv_heads 0: 0 query heads fit any width (an empty grid), as the check says.
    EXPECT_TRUE(kl_paged_decode_gqa_applies(&k, 0, 0, 128));
    EXPECT_EQ(check_packed(&k, "attn_bf16_gqa", {0, 0, 128}), KL_SUCCESS);
}

// ---- workspace size --------------------------------------------------------------

TEST_F(SplitLaunchTest, LaunchersAcceptExactlyTheHelpersWorkspaceSize) {
    const kl_module *m = load("gqa8_d128", 8, 128);
    kl_kernel sb, s8, sbg, s8g, comb;
    ASSERT_EQ(kl_paged_decode_split_bf16_get(&sb, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_get(&s8, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa_get(&sbg, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_gqa_get(&s8g, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine_get(&comb, m), KL_SUCCESS);
    struct Case {
        uint32_t seqs, nkv, splits;
    };
    for (Case c : {Case{1, 1, 1}, Case{3, 2, 7}, Case{32, 4, 2}, Case{1, 8, 15}, Case{5, 1, 64}}) {
        const uint32_t nq = 8 * c.nkv, hd = 128, bs = 16, q_stride = nq * hd;
        const uint64_t cs = 16ull * c.nkv * hd;
        const uint64_t need = kl_paged_decode_split_workspace_bytes(c.seqs, nq, hd, c.splits);
        EXPECT_EQ(need, 4ull * c.seqs * c.splits * nq * (hd + 2));
        for (uint64_t bytes : {need, need - 1, need + 1}) {
            const kl_status want = bytes >= need ? KL_SUCCESS : KL_ERROR_PRECONDITION;
            SCOPED_TRACE("seqs " + std::to_string(c.seqs) + ", nkv " + std::to_string(c.nkv) + ", splits " +
                         std::to_string(c.splits) + ", bytes " + std::to_string(bytes));
            EXPECT_EQ(kl_paged_decode_split_bf16_check(&sb, kQ, kKb, kVb, kWs, kTables, kLens, 9, c.seqs, nq, c.nkv,
                                                       hd, bs, 0.1f, q_stride, 0, c.splits, bytes),
                      want);
            EXPECT_EQ(kl_paged_decode_split_fp8_check(&s8, kQ, kK8, kV8, kWs, kTables, kLens, 9, c.seqs, nq, c.nkv, hd,
                                                      bs, 0.1f, 1.0f, 1.0f, q_stride, cs, 0, c.splits, bytes),
                      want);
            EXPECT_EQ(kl_paged_decode_split_bf16_gqa_check(&sbg, kQ, kKb, kVb, kWs, kTables, kLens, 9, c.seqs, nq,
                                                           c.nkv, hd, bs, 0.1f, q_stride, 0, c.splits, bytes),
                      want);
            EXPECT_EQ(kl_paged_decode_split_fp8_gqa_check(&s8g, kQ, kK8, kV8, kWs, kTables, kLens, 9, c.seqs, nq,
                                                          c.nkv, hd, bs, 0.1f, 1.0f, 1.0f, q_stride, cs, 0, c.splits,
                                                          bytes),
                      want);
            EXPECT_EQ(kl_paged_decode_split_combine_check(&comb, kWs, kOut, c.seqs, nq, hd, c.splits, bytes), want);
            if (want != KL_SUCCESS) {
                const std::string msg = kl_last_error_message();
                EXPECT_NE(msg.find("kl_paged_decode_split_workspace_bytes"), std::string::npos) << msg;
            }
        }
    }
}

TEST_F(SplitLaunchTest, LaunchersRefuseZeroSplitsAndAnOverflowingWorkspaceFormula) {
    const kl_module *m = load("gqa4_d128", 4, 128);
    kl_kernel sbg, comb;
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa_get(&sbg, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine_get(&comb, m), KL_SUCCESS);
    EXPECT_EQ(kl_paged_decode_split_bf16_gqa(&sbg, kQ, kKb, kVb, kWs, kTables, kLens, 4, 2, 8, 2, 128, 16, 0.1f, 1024,
                                             0, 0, 1ull << 30, nullptr),
              KL_ERROR_PRECONDITION);
    EXPECT_NE(std::string(kl_last_error_message()).find("num_splits >= 1"), std::string::npos);
    EXPECT_EQ(kl_paged_decode_split_combine(&comb, kWs, kOut, 2, 8, 128, 0, 1ull << 30, nullptr),
              KL_ERROR_PRECONDITION);
    // 4 * num_seqs * num_splits * num_q_heads * (head_dim + 2) past 64 bits.
    EXPECT_EQ(kl_paged_decode_split_combine(&comb, kWs, kOut, 0xffffffffu, 0xffffffffu, 128, 65535, UINT64_MAX,
                                            nullptr),
              KL_ERROR_OVERFLOW);
    // More splits than a grid's z extent holds.
    EXPECT_EQ(kl_paged_decode_split_bf16_gqa(&sbg, kQ, kKb, kVb, kWs, kTables, kLens, 4, 1, 8, 2, 128, 16, 0.1f, 1024,
                                             0, 65536, UINT64_MAX, nullptr),
              KL_ERROR_GRID_LIMIT);
    EXPECT_EQ(rb_.count, 0u);
}

// ---- geometry and arguments ----------------------------------------------------------

// The kernel argument `name` of a record, as a u32/u64/pointer.
template <class T>
T arg(const kl_record &r, const char *name) {
    for (uint32_t i = 0; i < r.desc->num_params; i++) {
        if (std::strcmp(r.desc->params[i].name, name) == 0) {
            EXPECT_EQ(r.desc->params[i].size, sizeof(T)) << name;
            T v;
            std::memcpy(&v, r.args + r.desc->params[i].offset, sizeof v);
            return v;
        }
    }
    ADD_FAILURE() << "no kernel argument " << name << " in " << r.entry;
    return T();
}

std::vector<std::string> arg_names(const kl_kernel_desc *d) {
    std::vector<std::string> v;
    for (uint32_t i = 0; i < d->num_params; i++) v.push_back(d->params[i].name);
    return v;
}

TEST_F(SplitLaunchTest, GridIsHeadsBySequencesBySplits) {
    const kl_module *m = load("gqa8_d128", 8, 128);
    kl_kernel sb, s8, sbg, s8g, comb;
    ASSERT_EQ(kl_paged_decode_split_bf16_get(&sb, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_get(&s8, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa_get(&sbg, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_gqa_get(&s8g, m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine_get(&comb, m), KL_SUCCESS);
    const uint32_t seqs = 5, nkv = 3, nq = 24, hd = 128, splits = 7;
    const uint64_t ws = kl_paged_decode_split_workspace_bytes(seqs, nq, hd, splits);
    const uint64_t cs = 16ull * nkv * hd + 8;
    kl_stream stream = reinterpret_cast<kl_stream>(uintptr_t{0x1234});

    ASSERT_EQ(kl_paged_decode_split_bf16(&sb, kQ, kKb, kVb, kWs, kTables, kLens, 9, seqs, nq, nkv, hd, 16, 0.25f,
                                         nq * hd + 3, 40, splits, ws, stream),
              KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8(&s8, kQ, kK8, kV8, kWs, kTables, kLens, 9, seqs, nq, nkv, hd, 16, 0.25f, 0.5f,
                                        2.0f, nq * hd, cs, 0, splits, ws, stream),
              KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa(&sbg, kQ, kKb, kVb, kWs, kTables, kLens, 9, seqs, nq, nkv, hd, 16, 0.25f,
                                             nq * hd, 0, splits, ws, stream),
              KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_gqa(&s8g, kQ, kK8, kV8, kWs, kTables, kLens, 9, seqs, nq, nkv, hd, 16, 0.25f,
                                            0.5f, 2.0f, nq * hd, cs, 11, splits, ws, stream),
              KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine(&comb, kWs, kOut, seqs, nq, hd, splits, ws, stream), KL_SUCCESS);
    ASSERT_EQ(rb_.count, 5u);

    // Partial passes: x = query heads (plain) or KV heads (packed), y = sequences, z = splits.
    const uint32_t want_x[4] = {nq, nq, nkv, nkv};
    for (int i = 0; i < 4; i++) {
        const kl_record &r = records_[i];
        SCOPED_TRACE(r.entry);
        EXPECT_EQ(r.grid[0], want_x[i]);
        EXPECT_EQ(r.grid[1], seqs);
        EXPECT_EQ(r.grid[2], splits);
        EXPECT_EQ(r.block[0], 256u);
        EXPECT_EQ(r.block[1], 1u);
        EXPECT_EQ(r.block[2], 1u);
        EXPECT_EQ(r.shared_bytes, 0u);
        EXPECT_EQ(r.stream, stream);
        EXPECT_EQ(arg<float *>(r, "workspace"), kWs);
        EXPECT_EQ(arg<uint32_t>(r, "num_seqs"), seqs);
        EXPECT_EQ(arg<uint32_t>(r, "num_splits"), splits);
        EXPECT_EQ(arg<uint32_t>(r, "num_q_heads"), nq);
    }
    EXPECT_EQ(arg<uint32_t>(records_[0], "sliding_window"), 40u);
    EXPECT_EQ(arg<uint32_t>(records_[0], "q_stride"), nq * hd + 3);
    EXPECT_EQ(arg<uint64_t>(records_[3], "cache_stride"), cs);
    EXPECT_EQ(arg<uint32_t>(records_[3], "sliding_window"), 11u);

    // The seed's argument order with output -> workspace, num_seqs passed on,
    // num_splits appended; workspace_bytes stays on the host.
    const std::vector<std::string> bf16 = {"q", "k_cache", "v_cache", "workspace", "block_tables", "seq_lens",
                                           "max_blocks_per_seq", "num_seqs", "num_q_heads", "num_kv_heads",
                                           "head_dim", "block_size", "inv_sqrt_d", "q_stride", "sliding_window",
                                           "num_splits"};
    const std::vector<std::string> fp8 = {"q", "k_cache", "v_cache", "workspace", "block_tables", "seq_lens",
                                          "max_blocks_per_seq", "num_seqs", "num_q_heads", "num_kv_heads",
                                          "head_dim", "block_size", "inv_sqrt_d", "k_scale", "v_scale", "q_stride",
                                          "cache_stride", "sliding_window", "num_splits"};
    EXPECT_EQ(arg_names(records_[0].desc), bf16);
    EXPECT_EQ(arg_names(records_[1].desc), fp8);
    EXPECT_EQ(arg_names(records_[2].desc), bf16);
    EXPECT_EQ(arg_names(records_[3].desc), fp8);

    // Combine: one block per (query head, sequence), 128 threads.
    const kl_record &c = records_[4];
    EXPECT_EQ(c.grid[0], nq);
    EXPECT_EQ(c.grid[1], seqs);
    EXPECT_EQ(c.grid[2], 1u);
    EXPECT_EQ(c.block[0], 128u);
    EXPECT_EQ(arg_names(c.desc),
              (std::vector<std::string>{"workspace", "output", "num_seqs", "num_q_heads", "head_dim", "num_splits"}));
    EXPECT_EQ(arg<const float *>(c, "workspace"), kWs);
    EXPECT_EQ(arg<kl_bf16 *>(c, "output"), kOut);
    EXPECT_EQ(arg<uint32_t>(c, "num_splits"), splits);
}

TEST_F(SplitLaunchTest, PackedSplitLaunchersRefuseTheOtherVariantsShape) {
    const kl_module *m4 = load("gqa4_d128", 4, 128);
    kl_kernel k;
    ASSERT_EQ(kl_paged_decode_split_fp8_gqa_get(&k, m4), KL_SUCCESS);
    const uint64_t ws = kl_paged_decode_split_workspace_bytes(2, 16, 128, 3);
    EXPECT_EQ(kl_paged_decode_split_fp8_gqa(&k, kQ, kK8, kV8, kWs, kTables, kLens, 4, 2, 16, 2, 128, 16, 0.1f, 1.0f,
                                            1.0f, 16 * 128, 16 * 2 * 128, 0, 3, ws, nullptr),
              KL_ERROR_VARIANT_MISMATCH);
    EXPECT_NE(std::string(kl_last_error_message()).find("paged_decode_split_fp8"), std::string::npos);
    EXPECT_FALSE(kl_paged_decode_gqa_applies(&k, 16, 2, 128));
    EXPECT_TRUE(kl_paged_decode_gqa_applies(&k, 8, 2, 128));
    EXPECT_EQ(rb_.count, 0u);
}

}  // namespace
