// The tensor-core launchers through the recording backend (no GPU): the
// geometry the kernels are written for (docs/MLA_PREFILL.md, the kernels'
// headers), the dynamic shared memory they opt in to, the packed
// arguments, and the refusals.
//
//   kl_mla_absorbed_attention_mma: grid (ceil(seq_len / 64), num_q_heads,
//     batch), block 256, 153600 bytes of dynamic shared memory (the kernel's
//     layout for 576-wide rows, the larger variant) requested at _get;
//   kl_grouped_gemm_mma: grid (ceil(n_g / 128), ceil(m / 128), g), block 256,
//     65536 bytes (4 stages of 128 x 32 A and B tiles).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

namespace {

constexpr uint32_t kAttnShared = 153600, kGemmShared = 65536;

struct Harness {
    explicit Harness(uint32_t hdim) {
        kl_record_backend_init(&rb, recs, 8);
        const std::string text = "klaunch-module 1\nfamily mla_prefill\nvariant " +
                                 std::string(hdim == 576 ? "deepseek_v4_flash" : "mistral_small_4") +
                                 "\nspec_hash x\nconst MLA_HDIM " + std::to_string(hdim) + "\nconst MLA_V_HAS_ROPE " +
                                 (hdim == 576 ? "1" : "0") + "\n";
        status = kl_module_load(&rb.base, text.data(), text.size(), &mod);
    }
    ~Harness() { kl_module_unload(&mod); }
    kl_record recs[8];
    kl_record_backend rb;
    kl_module mod;
    kl_status status;
};

template <class T>
T arg_at(const kl_record &r, uint32_t offset) {
    T v;
    std::memcpy(&v, r.args + offset, sizeof v);
    return v;
}

kl_bf16 *fake(uintptr_t v) { return reinterpret_cast<kl_bf16 *>(v); }

TEST(MlaFastLaunch, DescriptorsOptInToTheirSharedMemory) {
    EXPECT_EQ(kAttnShared, kl_mla_absorbed_attention_mma_desc.max_dynamic_shared);
    EXPECT_EQ(kGemmShared, kl_grouped_gemm_mma_desc.max_dynamic_shared);
    EXPECT_STREQ("mla_absorbed_attn_mma", kl_mla_absorbed_attention_mma_desc.entry);
    EXPECT_STREQ("grouped_gemm_mma", kl_grouped_gemm_mma_desc.entry);
}

TEST(MlaFastLaunch, AttentionGeometryAndArguments) {
    for (uint32_t hdim : {320u, 576u}) {
        SCOPED_TRACE(hdim);
        Harness h(hdim);
        ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
        h.rb.max_dynamic_shared = 227 * 1024;  // what a device grants after the opt-in
        kl_kernel k;
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_mma_get(&k, &h.mod)) << kl_last_error_message();
        const kl_stream stream = reinterpret_cast<kl_stream>(uintptr_t{0x5000});
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_mma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 200, 3, 16,
                                                             hdim, hdim - 64, 0.072f, true, stream))
            << kl_last_error_message();
        ASSERT_EQ(1u, h.rb.count);
        const kl_record &r = h.recs[0];
        EXPECT_STREQ("mla_absorbed_attn_mma", r.entry);
        EXPECT_EQ(4u, r.grid[0]);  // ceil(200 / 64) query tiles
        EXPECT_EQ(16u, r.grid[1]); // heads
        EXPECT_EQ(3u, r.grid[2]);  // batch
        EXPECT_EQ(256u, r.block[0]);
        EXPECT_EQ(1u, r.block[1]);
        EXPECT_EQ(kAttnShared, r.shared_bytes);
        EXPECT_EQ(stream, r.stream);
        // (q, kv, output, seq_len, num_q_heads, head_dim, kv_lora, inv_sqrt_d, causal); batch is launch-only.
        ASSERT_EQ(48u, r.arg_bytes);
        EXPECT_EQ(uintptr_t{0x1000}, arg_at<uintptr_t>(r, 0));
        EXPECT_EQ(uintptr_t{0x2000}, arg_at<uintptr_t>(r, 8));
        EXPECT_EQ(uintptr_t{0x3000}, arg_at<uintptr_t>(r, 16));
        EXPECT_EQ(200u, arg_at<uint32_t>(r, 24));
        EXPECT_EQ(16u, arg_at<uint32_t>(r, 28));
        EXPECT_EQ(hdim, arg_at<uint32_t>(r, 32));
        EXPECT_EQ(hdim - 64, arg_at<uint32_t>(r, 36));
        EXPECT_EQ(0.072f, arg_at<float>(r, 40));
        EXPECT_EQ(1u, arg_at<uint32_t>(r, 44));
    }
}

TEST(MlaFastLaunch, GemmGeometryAndArguments) {
    Harness h(576);
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    h.rb.max_dynamic_shared = 100 * 1024;
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_mma_get(&k, &h.mod)) << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_mma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 4096, 128, 128, 512,
                                              128 * 128, 128 * 512, nullptr))
        << kl_last_error_message();
    ASSERT_EQ(1u, h.rb.count);
    const kl_record &r = h.recs[0];
    EXPECT_EQ(4u, r.grid[0]);    // ceil(512 / 128) column tiles
    EXPECT_EQ(32u, r.grid[1]);   // ceil(4096 / 128) row tiles
    EXPECT_EQ(128u, r.grid[2]);  // groups
    EXPECT_EQ(256u, r.block[0]);
    EXPECT_EQ(kGemmShared, r.shared_bytes);
    ASSERT_EQ(48u, r.arg_bytes);
    EXPECT_EQ(4096u, arg_at<uint32_t>(r, 24));
    EXPECT_EQ(128u, arg_at<uint32_t>(r, 28));
    EXPECT_EQ(128u, arg_at<uint32_t>(r, 32));
    EXPECT_EQ(512u, arg_at<uint32_t>(r, 36));
    EXPECT_EQ(128u * 128u, arg_at<uint32_t>(r, 40));
    EXPECT_EQ(128u * 512u, arg_at<uint32_t>(r, 44));
    // Ragged: ceil of both.
    kl_record_backend_clear(&h.rb);
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_mma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 129, 3, 13, 257, 39, 771,
                                              nullptr));
    EXPECT_EQ(3u, h.recs[0].grid[0]);
    EXPECT_EQ(2u, h.recs[0].grid[1]);
    EXPECT_EQ(3u, h.recs[0].grid[2]);
}

// A function whose limit stayed at 48 KiB (a device that could not grant
// the opt-in) cannot take these launches.
TEST(MlaFastLaunch, RefusedWithoutTheOptIn) {
    Harness h(576);
    ASSERT_EQ(KL_SUCCESS, h.status);
    kl_kernel ka, kg;
    ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_mma_get(&ka, &h.mod));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_mma_get(&kg, &h.mod));
    EXPECT_EQ(KL_ERROR_SHARED_MEMORY_LIMIT, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 1, 1, 1,
                                                                          576, 512, 0.1f, true, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("153600"));
    EXPECT_EQ(KL_ERROR_SHARED_MEMORY_LIMIT,
              kl_grouped_gemm_mma(&kg, fake(16), fake(16), fake(16), 1, 1, 8, 8, 8, 8, nullptr));
    EXPECT_EQ(0u, h.rb.count);
}

TEST(MlaFastLaunch, Refusals) {
    Harness h(320);
    ASSERT_EQ(KL_SUCCESS, h.status);
    h.rb.max_dynamic_shared = 227 * 1024;
    kl_kernel ka, kg;
    ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_mma_get(&ka, &h.mod));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_mma_get(&kg, &h.mod));
    // The 576-wide kernel is the other variant.
    EXPECT_EQ(KL_ERROR_VARIANT_MISMATCH, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 4, 1, 1, 576,
                                                                       512, 0.1f, true, nullptr));
    // V is the first head_dim - 64 columns.
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 4, 1, 1, 320,
                                                                   320, 0.1f, true, nullptr));
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_mla_absorbed_attention_mma(&ka, nullptr, fake(16), fake(16), 4, 1, 1, 320,
                                                                   256, 0.1f, true, nullptr));
    // 65536 heads or batches exceed grid y / z.
    EXPECT_EQ(KL_ERROR_GRID_LIMIT, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 4, 1, 65536, 320,
                                                                 256, 0.1f, true, nullptr));
    EXPECT_EQ(KL_ERROR_GRID_LIMIT, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 4, 65536, 1, 320,
                                                                 256, 0.1f, true, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_grouped_gemm_mma(&kg, fake(16), fake(16), fake(16), 4, 2, 16, 16, 31, 32, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_grouped_gemm_mma(&kg, fake(16), fake(16), fake(16), 4, 2, 16, 16, 32, 31, nullptr));
    EXPECT_EQ(KL_ERROR_GRID_LIMIT,
              kl_grouped_gemm_mma(&kg, fake(16), fake(16), fake(16), 4, 65536, 1, 1, 65536, 65536, nullptr));
    EXPECT_EQ(0u, h.rb.count);
    // Empty launches succeed and record nothing.
    EXPECT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_mma(&ka, fake(16), fake(16), fake(16), 0, 1, 1, 320, 256, 0.1f,
                                                        true, nullptr));
    EXPECT_EQ(KL_SUCCESS, kl_grouped_gemm_mma(&kg, fake(16), fake(16), fake(16), 0, 2, 16, 16, 32, 32, nullptr));
    EXPECT_EQ(0u, h.rb.count);
}

}  // namespace
