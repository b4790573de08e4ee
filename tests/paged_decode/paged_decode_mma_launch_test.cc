// CPU tests, through the recording backend, of the tensor-core GQA
// launchers (specs/paged_decode.yaml: paged_decode_attn_{bf16,fp8}_gqa_mma,
// paged_decode_split_{bf16,fp8}_gqa_mma). The spec gives each the
// arguments, order, grid, block and preconditions of its scalar twin
// (paged_decode_attn_bf16_gqa etc.), so a caller can switch launchers
// without changing a call. Checked, for both variants' constants:
// - the same arguments launch the same grid, block, shared memory and
//   packed argument bytes as the twin, under the launcher's own entry;
// - the shapes the twin refuses (the other pack width, head dim 64, a
//   head more, a bad block size, q_stride too small, a short fp8
//   cache_stride, a short workspace) are refused with the same status,
//   and nothing is recorded;
// - kl_paged_decode_gqa_applies() answers for the *_mma handles as the
//   launchers' checks do.
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

kl_bf16 *const kQ = reinterpret_cast<kl_bf16 *>(uintptr_t{0x10000});
kl_bf16 *const kKb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x20000});
kl_bf16 *const kVb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x30000});
kl_fp8_e4m3 *const kK8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x40000});
kl_fp8_e4m3 *const kV8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x50000});
float *const kWs = reinterpret_cast<float *>(uintptr_t{0x60000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x70000});
int32_t *const kTables = reinterpret_cast<int32_t *>(uintptr_t{0x80000});
int32_t *const kLens = reinterpret_cast<int32_t *>(uintptr_t{0x90000});

std::string module_text(const std::string &variant, long long width) {
    return "klaunch-module 1\nfamily paged_decode\nvariant " + variant + "\nspec_hash test\nsource_hash unknown\n" +
           "const DECODE_GQA_PACK_WIDTH " + std::to_string(width) + "\nconst DECODE_GQA_PACK_HEAD_DIM 128\n";
}

// One call's arguments (the twin and the _mma launcher take the same ones).
struct Args {
    uint32_t mbps = 9, num_seqs = 5, nq = 0, nkv = 3, hd = 128, bs = 16;
    float inv = 0.125f, ks = 0.5f, vs = 2.0f;
    uint32_t q_stride = 0;
    uint64_t cache_stride = 0;
    uint32_t window = 0, splits = 7;
    uint64_t ws_bytes = 0;
};

class MmaLaunchTest : public ::testing::TestWithParam<int> {
  protected:
    void SetUp() override {
        kl_record_backend_init(&rb_, records_, kCapacity);
        const std::string text = module_text(GetParam() == 4 ? "gqa4_d128" : "gqa8_d128", GetParam());
        ASSERT_EQ(kl_module_load(&rb_.base, text.c_str(), text.size(), &mod_), KL_SUCCESS) << kl_last_error_message();
    }
    void TearDown() override { kl_module_unload(&mod_); }

    Args good() const {
        Args a;
        a.nq = a.nkv * static_cast<uint32_t>(GetParam());
        a.q_stride = a.nq * a.hd + 3;
        a.cache_stride = uint64_t{a.bs} * a.nkv * a.hd + 16;
        a.ws_bytes = kl_paged_decode_split_workspace_bytes(a.num_seqs, a.nq, a.hd, a.splits);
        return a;
    }

    // Launches kind k (0 attn bf16, 1 attn fp8, 2 split bf16, 3 split fp8)
    // through the twin (mma false) or the tensor-core launcher.
    kl_status launch(int k, bool mma, const Args &a) {
        kl_kernel kern;
        kl_status st;
        switch (k) {
        case 0:
            st = mma ? kl_paged_decode_attn_bf16_gqa_mma_get(&kern, &mod_) : kl_paged_decode_attn_bf16_gqa_get(&kern, &mod_);
            if (st != KL_SUCCESS) return st;
            return mma ? kl_paged_decode_attn_bf16_gqa_mma(&kern, kQ, kKb, kVb, kOut, kTables, kLens, a.mbps, a.num_seqs,
                                                           a.nq, a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window, nullptr)
                       : kl_paged_decode_attn_bf16_gqa(&kern, kQ, kKb, kVb, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq,
                                                       a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window, nullptr);
        case 1:
            st = mma ? kl_paged_decode_attn_fp8_gqa_mma_get(&kern, &mod_) : kl_paged_decode_attn_fp8_gqa_get(&kern, &mod_);
            if (st != KL_SUCCESS) return st;
            return mma ? kl_paged_decode_attn_fp8_gqa_mma(&kern, kQ, kK8, kV8, kOut, kTables, kLens, a.mbps, a.num_seqs,
                                                          a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride,
                                                          a.cache_stride, a.window, nullptr)
                       : kl_paged_decode_attn_fp8_gqa(&kern, kQ, kK8, kV8, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq,
                                                      a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride, a.cache_stride,
                                                      a.window, nullptr);
        case 2:
            st = mma ? kl_paged_decode_split_bf16_gqa_mma_get(&kern, &mod_)
                     : kl_paged_decode_split_bf16_gqa_get(&kern, &mod_);
            if (st != KL_SUCCESS) return st;
            return mma ? kl_paged_decode_split_bf16_gqa_mma(&kern, kQ, kKb, kVb, kWs, kTables, kLens, a.mbps, a.num_seqs,
                                                            a.nq, a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window,
                                                            a.splits, a.ws_bytes, nullptr)
                       : kl_paged_decode_split_bf16_gqa(&kern, kQ, kKb, kVb, kWs, kTables, kLens, a.mbps, a.num_seqs,
                                                        a.nq, a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window, a.splits,
                                                        a.ws_bytes, nullptr);
        default:
            st = mma ? kl_paged_decode_split_fp8_gqa_mma_get(&kern, &mod_)
                     : kl_paged_decode_split_fp8_gqa_get(&kern, &mod_);
            if (st != KL_SUCCESS) return st;
            return mma ? kl_paged_decode_split_fp8_gqa_mma(&kern, kQ, kK8, kV8, kWs, kTables, kLens, a.mbps, a.num_seqs,
                                                           a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride,
                                                           a.cache_stride, a.window, a.splits, a.ws_bytes, nullptr)
                       : kl_paged_decode_split_fp8_gqa(&kern, kQ, kK8, kV8, kWs, kTables, kLens, a.mbps, a.num_seqs,
                                                       a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride,
                                                       a.cache_stride, a.window, a.splits, a.ws_bytes, nullptr);
        }
    }

    static constexpr size_t kCapacity = 4;
    kl_record records_[kCapacity];
    kl_record_backend rb_;
    kl_module mod_;
};

const char *const kTwin[] = {"paged_decode_attn_bf16_gqa", "paged_decode_attn_fp8_gqa",
                             "paged_decode_split_bf16_gqa", "paged_decode_split_fp8_gqa"};

TEST_P(MmaLaunchTest, LaunchesWhatItsScalarTwinLaunches) {
    for (int k = 0; k < 4; k++) {
        SCOPED_TRACE(kTwin[k]);
        kl_record_backend_clear(&rb_);
        const Args a = good();
        ASSERT_EQ(launch(k, false, a), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(launch(k, true, a), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(rb_.count, 2u);
        const kl_record &twin = records_[0], &mma = records_[1];
        EXPECT_EQ(std::string(mma.entry), std::string(kTwin[k]) + "_mma");
        const uint32_t z = k < 2 ? 1u : a.splits;
        EXPECT_EQ(mma.grid[0], a.nkv);
        EXPECT_EQ(mma.grid[1], a.num_seqs);
        EXPECT_EQ(mma.grid[2], z);
        EXPECT_EQ(mma.block[0], 256u);
        EXPECT_EQ(mma.block[1], 1u);
        EXPECT_EQ(mma.block[2], 1u);
        for (int i = 0; i < 3; i++) {
            EXPECT_EQ(mma.grid[i], twin.grid[i]);
            EXPECT_EQ(mma.block[i], twin.block[i]);
        }
        EXPECT_EQ(mma.shared_bytes, twin.shared_bytes);
        EXPECT_EQ(mma.attribute_flags, twin.attribute_flags);
        ASSERT_EQ(mma.arg_bytes, twin.arg_bytes);
        EXPECT_EQ(std::memcmp(mma.args, twin.args, mma.arg_bytes), 0) << "the packed arguments differ";
    }
}

TEST_P(MmaLaunchTest, RefusesWhatItsScalarTwinRefuses) {
    const int width = GetParam(), other = width == 4 ? 8 : 4;
    struct Bad {
        const char *why;
        void (*edit)(Args &, int other);
        bool fp8_only, split_only;
    };
    const Bad bads[] = {
        {"the other variant's pack width", [](Args &a, int o) { a.nq = a.nkv * static_cast<uint32_t>(o); }, false, false},
        {"head dim 64", [](Args &a, int) { a.hd = 64; }, false, false},
        {"one query head more", [](Args &a, int) { a.nq += 1; }, false, false},
        {"block size 0", [](Args &a, int) { a.bs = 0; }, false, false},
        {"q_stride below the heads", [](Args &a, int) { a.q_stride = a.nq * a.hd - 1; }, false, false},
        {"cache_stride below a block", [](Args &a, int) { a.cache_stride = uint64_t{a.bs} * a.nkv * a.hd - 1; }, true, false},
        {"no splits", [](Args &a, int) { a.splits = 0; }, false, true},
        {"workspace a byte short", [](Args &a, int) { a.ws_bytes -= 1; }, false, true},
    };
    for (const Bad &b : bads)
        for (int k = 0; k < 4; k++) {
            if ((b.fp8_only && k % 2 == 0) || (b.split_only && k < 2)) continue;
            SCOPED_TRACE(std::string(kTwin[k]) + ": " + b.why);
            Args a = good();
            b.edit(a, other);
            kl_record_backend_clear(&rb_);
            const kl_status twin = launch(k, false, a);
            const kl_status mma = launch(k, true, a);
            EXPECT_NE(twin, KL_SUCCESS);
            EXPECT_EQ(mma, twin) << kl_last_error_message();
            EXPECT_EQ(rb_.count, 0u) << "a refused launch was recorded";
        }
}

TEST_P(MmaLaunchTest, GqaAppliesAnswersForTheMmaHandles) {
    kl_kernel attn_bf16, attn_fp8, split_bf16, split_fp8;
    ASSERT_EQ(kl_paged_decode_attn_bf16_gqa_mma_get(&attn_bf16, &mod_), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_attn_fp8_gqa_mma_get(&attn_fp8, &mod_), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_bf16_gqa_mma_get(&split_bf16, &mod_), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_fp8_gqa_mma_get(&split_fp8, &mod_), KL_SUCCESS);
    const uint32_t w = static_cast<uint32_t>(GetParam());
    for (const kl_kernel *k : {&attn_bf16, &attn_fp8, &split_bf16, &split_fp8}) {
        EXPECT_TRUE(kl_paged_decode_gqa_applies(k, 8 * w, 8, 128));
        EXPECT_FALSE(kl_paged_decode_gqa_applies(k, 8 * w + 1, 8, 128));
        EXPECT_FALSE(kl_paged_decode_gqa_applies(k, 8 * w, 8, 64));
        EXPECT_FALSE(kl_paged_decode_gqa_applies(k, 8 * (12 - w), 8, 128));
    }
}

INSTANTIATE_TEST_SUITE_P(BothVariants, MmaLaunchTest, ::testing::Values(4, 8),
                         [](const ::testing::TestParamInfo<int> &i) { return "gqa" + std::to_string(i.param) + "_d128"; });

}  // namespace
