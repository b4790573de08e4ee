// The sm_90a launchers through the recording backend (no GPU): their
// geometry, shared memory and arguments (the kernels' headers:
// kernels/mla_prefill/mla_absorbed_attn_wgmma.cu, grouped_gemm_wgmma.cu),
// and the refusal at kl_X_get of a module whose loaded image is not sm_90a
// (`arch: sm_90a` in specs/mla_prefill.yaml, docs/DESIGN.md).
//
//   kl_mla_absorbed_attention_wgmma: grid (ceil(seq_len / 64), num_q_heads,
//     batch), block 256 (two warpgroups), 384 * MLA_HDIM + 10240 bytes of
//     dynamic shared memory (Q, two key tiles, P, row statistics, 1 KiB to
//     align the swizzle slabs): 231424 for 576, 133120 for 320; the
//     descriptor opts in to the larger;
//   kl_grouped_gemm_wgmma: grid (ceil(n_g / 128), ceil(m / 128), g), block
//     256, 99328 bytes (3 stages of 128 x 64 A and B tiles + 1 KiB).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

namespace {

struct Harness {
    // `arch_line`: the cuda_arch line of the image the "driver" loaded ("" for none).
    Harness(uint32_t hdim, const char *arch_line, const char *device_arch = nullptr) {
        kl_record_backend_init(&rb, recs, 8);
        rb.device_arch = device_arch;
        rb.max_dynamic_shared = 227 * 1024;  // what an H100/H200 grants after the opt-in
        const std::string text = "klaunch-module 1\nfamily mla_prefill\nvariant " +
                                 std::string(hdim == 576 ? "deepseek_v4_flash" : "mistral_small_4") + "\nspec_hash x\n" +
                                 arch_line + "const MLA_HDIM " + std::to_string(hdim) + "\nconst MLA_V_HAS_ROPE " +
                                 (hdim == 576 ? "1" : "0") + "\nconst MLA_WGMMA_QTILES " + (hdim == 576 ? "1" : "2") + "\nconst MLA_WGMMA_STAGES " + (hdim == 576 ? "2" : "3") + "\n";
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

TEST(WgmmaLaunch, DescriptorsNeedSm90aAndOptInToTheirSharedMemory) {
    EXPECT_STREQ("sm_90a", kl_mla_absorbed_attention_wgmma_desc.arch);
    EXPECT_STREQ("sm_90a", kl_grouped_gemm_wgmma_desc.arch);
    EXPECT_EQ(nullptr, kl_mla_absorbed_attention_mma_desc.arch) << "the mma.sync path runs on every target";
    EXPECT_EQ(128u * 576u * 3u + 8192u + 1024u + 1152u, kl_mla_absorbed_attention_wgmma_desc.max_dynamic_shared);
    EXPECT_EQ(99328u, kl_grouped_gemm_wgmma_desc.max_dynamic_shared);
    EXPECT_STREQ("mla_absorbed_attn_wgmma", kl_mla_absorbed_attention_wgmma_desc.entry);
    EXPECT_STREQ("grouped_gemm_wgmma", kl_grouped_gemm_wgmma_desc.entry);
}

TEST(WgmmaLaunch, AttentionGeometryAndArguments) {
    for (uint32_t hdim : {320u, 576u}) {
        SCOPED_TRACE(hdim);
        Harness h(hdim, "cuda_arch 900a\n");
        ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
        kl_kernel k;
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_wgmma_get(&k, &h.mod)) << kl_last_error_message();
        const kl_stream stream = reinterpret_cast<kl_stream>(uintptr_t{0x5000});
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_wgmma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 200, 3, 16,
                                                               hdim, hdim - 64, 0.072f, true, stream))
            << kl_last_error_message();
        ASSERT_EQ(1u, h.rb.count);
        const kl_record &r = h.recs[0];
        EXPECT_STREQ("mla_absorbed_attn_wgmma", r.entry);
        EXPECT_EQ(hdim == 576 ? 4u : 2u, r.grid[0]); // ceil(200 / 64) query tiles; ceil(200 / 128) blocks of 2 at D 320
        EXPECT_EQ(16u, r.grid[1]); // heads
        EXPECT_EQ(3u, r.grid[2]);  // batch
        EXPECT_EQ(384u, r.block[0]); // two consumer warpgroups and a producer
        // D 576: Q 64 rows, 2 key tiles, P, row statistics; D 320: Q 128 rows, 3 key tiles, 2 P slabs; mbarriers, alignment
        EXPECT_EQ(hdim == 576 ? 128u * 576u * 3u + 8192u + 1024u + 1152u : 128u * 320u * 5u + 16384u + 1152u, r.shared_bytes);
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

TEST(WgmmaLaunch, GemmGeometryAndArguments) {
    Harness h(576, "cuda_arch 900a\n");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_wgmma_get(&k, &h.mod)) << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_wgmma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 4096, 128, 128, 520,
                                                128 * 128, 128 * 520, nullptr))
        << kl_last_error_message();
    ASSERT_EQ(1u, h.rb.count);
    const kl_record &r = h.recs[0];
    EXPECT_EQ(5u, r.grid[0]);   // ceil(520 / 128)
    EXPECT_EQ(32u, r.grid[1]);  // 4096 / 128
    EXPECT_EQ(128u, r.grid[2]); // groups
    EXPECT_EQ(256u, r.block[0]);
    EXPECT_EQ(99328u, r.shared_bytes);
    ASSERT_EQ(48u, r.arg_bytes);
    EXPECT_EQ(4096u, arg_at<uint32_t>(r, 24));
    EXPECT_EQ(128u * 520u, arg_at<uint32_t>(r, 44));
}

// An sm_80 image (a fatbin loaded on an A100, or one built without sm_90a)
// holds only the trap body: kl_X_get says which architecture it found.
TEST(WgmmaLaunch, GetRefusesAnImageOfAnotherTargetNamingBoth) {
    Harness h(576, "cuda_arch 800\n", "sm_80");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_mla_absorbed_attention_wgmma_get(&k, &h.mod));
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("kl_mla_absorbed_attention_wgmma_get"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs sm_90a machine code"), std::string::npos) << msg;
    EXPECT_NE(msg.find("on device sm_80 the driver loaded the sm_80 image"), std::string::npos) << msg;
    EXPECT_NE(msg.find("specs/mla_prefill.yaml:"), std::string::npos) << msg;
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_grouped_gemm_wgmma_get(&k, &h.mod));
    // The mma.sync path of the same module is fine.
    EXPECT_EQ(KL_SUCCESS, kl_grouped_gemm_mma_get(&k, &h.mod)) << kl_last_error_message();
}

// sm_100 cannot run sm_90a code; the driver loads the fatbin's sm_100 image.
TEST(WgmmaLaunch, GetRefusesBlackwellsImage) {
    Harness h(320, "cuda_arch 1000\n", "sm_100");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_grouped_gemm_wgmma_get(&k, &h.mod));
    EXPECT_NE(std::string(kl_last_error_message()).find("loaded the sm_100 image"), std::string::npos)
        << kl_last_error_message();
}

TEST(WgmmaLaunch, LauncherRefusesAnotherVariantsWidth) {
    Harness h(320, "cuda_arch 900a\n");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_wgmma_get(&k, &h.mod)) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_VARIANT_MISMATCH, kl_mla_absorbed_attention_wgmma(&k, fake(0x1000), fake(0x2000), fake(0x3000),
                                                                         8, 1, 1, 576, 512, 0.1f, false, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_mla_absorbed_attention_wgmma(&k, fake(0x1000), fake(0x2000), fake(0x3000), 8,
                                                                     1, 1, 320, 255, 0.1f, false, nullptr));
    EXPECT_EQ(0u, h.rb.count) << "a refused launch records nothing";
}

}  // namespace
