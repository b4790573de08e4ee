// kl_mla_absorbed_attention_tma and kl_grouped_gemm_tma (issue 20) and their
// tensor-map builders through the recording backend (no GPU). Expectations
// from specs/mla_prefill.yaml and the kernels' headers
// (kernels/mla_prefill/mla_absorbed_attn_tma.cu, grouped_gemm_tma.cu):
//
//   attention: grid min(num_ctas, ceil(seq_len / (64 * MLA_WGMMA_QTILES)) *
//     num_q_heads * batch), block 384, 231296 bytes of shared memory (D 576)
//     or 205952 (D 320); q_map bf16 rank 4, box (64, 1, 64, 1); kv_map rank
//     3, box (64, 64, 1); both 128-byte swizzle; parameters q_map 0, kv_map
//     128, output 256, then seq_len, batch, num_q_heads, head_dim, kv_lora,
//     inv_sqrt_d, causal (num_ctas sizes the grid only);
//   GEMM: grid min(num_ctas, ceil(n_g / 128) * ceil(m / 128) * g), block
//     384, 197760 bytes; a_map box (64, 1, 128), b_map (64, 128, 1), c_map
//     (64, 1, 64); maps at 0, 128, 256, then m, g, k_g, n_g.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

namespace {

// A module whose loaded image is sm_90a code (the launchers' `arch`), granting 227 KiB.
struct Harness {
    explicit Harness(const char *variant) {
        kl_record_backend_init(&rb, recs, 8);
        rb.device_arch = "sm_90a";
        rb.max_dynamic_shared = 227 * 1024;
        std::string text;
        for (const kl_variant_info *v = kl_mla_prefill_variant_info; v->name; ++v)
            if (std::strcmp(v->name, variant) == 0) text = std::string(v->module_info) + "cuda_arch 900a\n";
        status = kl_module_load(&rb.base, text.data(), text.size(), &mod);
        if (status == KL_SUCCESS) status = kl_mla_absorbed_attention_tma_get(&attn, &mod);
        if (status == KL_SUCCESS) status = kl_grouped_gemm_tma_get(&gemm, &mod);
    }
    ~Harness() { kl_module_unload(&mod); }
    kl_record recs[8];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel attn, gemm;
    kl_status status;
};

const kl_bf16 *at(uintptr_t v) { return reinterpret_cast<const kl_bf16 *>(v); }
kl_bf16 *out_at(uintptr_t v) { return reinterpret_cast<kl_bf16 *>(v); }

template <class T>
T arg_at(const kl_record &r, uint32_t offset) {
    T v;
    std::memcpy(&v, r.args + offset, sizeof v);
    return v;
}

constexpr uintptr_t kQ = 0x100000, kKv = 0x800000, kOut = 0x900000, kCnt = 0xa00000;

kl_status encode_attn(Harness &h, uint32_t D, uint32_t heads, uint32_t seq, uint32_t batch, kl_tensor_map *q,
                      kl_tensor_map *kv) {
    kl_status st = kl_mla_absorbed_attention_tma_q_map_encode(&h.attn, q, at(kQ), D, heads, seq, batch, D,
                                                               (uint64_t)heads * D, (uint64_t)seq * heads * D);
    if (st != KL_SUCCESS) return st;
    return kl_mla_absorbed_attention_tma_kv_map_encode(&h.attn, kv, at(kKv), D, seq, batch, D, (uint64_t)seq * D);
}

TEST(MlaCopyEngineLaunch, DescriptorsNeedSm90aAndOptInToTheirSharedMemory) {
    const kl_kernel_desc &a = kl_mla_absorbed_attention_tma_desc, &g = kl_grouped_gemm_tma_desc;
    EXPECT_STREQ("sm_90a", a.arch);
    EXPECT_STREQ("sm_90a", g.arch);
    EXPECT_STREQ("mla_absorbed_attn_tma", a.entry);
    EXPECT_STREQ("grouped_gemm_tma", g.entry);
    EXPECT_EQ(3u * 576u * 128u + 8192u + 256u + 512u + 128u + 1024u, a.max_dynamic_shared);  // 231296, D 576's
    EXPECT_EQ(6u * 32768u + 2u * 16384u + 256u + 1024u, g.max_dynamic_shared);  // 230656 of the 232448 an sm_90 block may opt in to
    ASSERT_EQ(10u, a.num_params) << "num_ctas sizes the grid only (launch_only)";
    EXPECT_EQ(KL_PARAM_TENSOR_MAP, a.params[0].kind);
    EXPECT_EQ(0u, a.params[0].offset);
    EXPECT_EQ(128u, a.params[1].offset);
    EXPECT_EQ(256u, a.params[2].offset);  // output
    EXPECT_EQ(264u, a.params[3].offset);  // seq_len
    EXPECT_EQ(268u, a.params[4].offset);  // batch: a kernel argument here
    EXPECT_EQ(292u, a.param_bytes);
    ASSERT_EQ(8u, g.num_params) << "num_ctas and num_counters are launch_only";
    EXPECT_EQ(256u, g.params[2].offset);  // c_map
    EXPECT_EQ(384u, g.params[3].offset);  // m
    EXPECT_EQ(400u, g.params[7].offset);  // counters
    EXPECT_EQ(408u, g.param_bytes);
}

TEST(MlaCopyEngineLaunch, AttentionLaunchesAPersistentGridOfAtMostNumCtasBlocks) {
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        SCOPED_TRACE(variant);
        Harness h(variant);
        ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
        const uint32_t D = std::strcmp(variant, "deepseek_v4_flash") == 0 ? 576 : 320, rows = D == 576 ? 64 : 128;
        kl_tensor_map q, kv;
        ASSERT_EQ(KL_SUCCESS, encode_attn(h, D, 16, 200, 3, &q, &kv)) << kl_last_error_message();
        const kl_stream stream = reinterpret_cast<kl_stream>(uintptr_t{0x5000});
        const uint32_t tiles = (200 + rows - 1) / rows * 16 * 3;  // 192 (D 576) or 96 (D 320)
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_tma(&h.attn, &q, &kv, out_at(kOut), 200, 3, 16, D, D - 64,
                                                            0.072f, true, 132, stream))
            << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_tma(&h.attn, &q, &kv, out_at(kOut), 200, 3, 16, D, D - 64,
                                                            0.072f, false, 7, stream))
            << kl_last_error_message();
        ASSERT_EQ(2u, h.rb.count);
        const kl_record &r = h.recs[0];
        EXPECT_STREQ("mla_absorbed_attn_tma", r.entry);
        EXPECT_EQ(tiles < 132u ? tiles : 132u, r.grid[0]);
        EXPECT_EQ(1u, r.grid[1]);
        EXPECT_EQ(1u, r.grid[2]);
        EXPECT_EQ(384u, r.block[0]);
        EXPECT_EQ(D == 576 ? 231296u : 205952u, r.shared_bytes);
        EXPECT_EQ(stream, r.stream);
        ASSERT_EQ(292u, r.arg_bytes);
        EXPECT_EQ(0, std::memcmp(r.args, q.opaque, 128)) << "q_map's 128 bytes at offset 0";
        EXPECT_EQ(0, std::memcmp(r.args + 128, kv.opaque, 128)) << "kv_map's at 128";
        EXPECT_EQ(kOut, arg_at<uintptr_t>(r, 256));
        EXPECT_EQ(200u, arg_at<uint32_t>(r, 264));
        EXPECT_EQ(3u, arg_at<uint32_t>(r, 268));
        EXPECT_EQ(16u, arg_at<uint32_t>(r, 272));
        EXPECT_EQ(D, arg_at<uint32_t>(r, 276));
        EXPECT_EQ(D - 64, arg_at<uint32_t>(r, 280));
        EXPECT_EQ(0.072f, arg_at<float>(r, 284));
        EXPECT_EQ(1u, arg_at<uint32_t>(r, 288));
        EXPECT_EQ(7u, h.recs[1].grid[0]);
        EXPECT_EQ(0u, arg_at<uint32_t>(h.recs[1], 288));

        // What the builders encoded (klaunch's reference encoding).
        kl_tensor_map_request got;
        ASSERT_TRUE(kl_tensor_map_reference_decode(r.args, &got));
        EXPECT_EQ(4u, got.rank);
        EXPECT_EQ(reinterpret_cast<const void *>(kQ), got.address);
        EXPECT_EQ(D, got.extent[0]);
        EXPECT_EQ(16u, got.extent[1]);
        EXPECT_EQ(200u, got.extent[2]);
        EXPECT_EQ(3u, got.extent[3]);
        EXPECT_EQ(2u * D, got.stride[0]) << "strides reach the driver in bytes";
        EXPECT_EQ(2u * 16 * D, got.stride[1]);
        EXPECT_EQ(2u * 200 * 16 * D, got.stride[2]);
        EXPECT_EQ(64u, got.box[0]);
        EXPECT_EQ(1u, got.box[1]);
        EXPECT_EQ(64u, got.box[2]);
        EXPECT_EQ(1u, got.box[3]);
        EXPECT_EQ(KL_TENSOR_MAP_SWIZZLE_128B, got.swizzle);
        EXPECT_EQ(KL_TENSOR_MAP_FILL_ZERO, got.oob_fill);
        ASSERT_TRUE(kl_tensor_map_reference_decode(r.args + 128, &got));
        EXPECT_EQ(3u, got.rank);
        EXPECT_EQ(64u, got.box[0]);
        EXPECT_EQ(64u, got.box[1]);
        EXPECT_EQ(1u, got.box[2]);
        EXPECT_EQ(2u * 200 * D, got.stride[1]);

        // No rows: an empty launch.
        ASSERT_EQ(KL_SUCCESS, kl_mla_absorbed_attention_tma(&h.attn, &q, &kv, out_at(kOut), 0, 3, 16, D, D - 64,
                                                            0.072f, true, 132, nullptr));
        EXPECT_EQ(2u, h.rb.count) << "seq_len 0 launched something";
    }
}

TEST(MlaCopyEngineLaunch, AttentionRefusesBadLaunchesBeforeTheBackend) {
    Harness h("deepseek_v4_flash");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, kv;
    ASSERT_EQ(KL_SUCCESS, encode_attn(h, 576, 16, 200, 1, &q, &kv));
    auto launch = [&](const kl_tensor_map *qm, const kl_tensor_map *km, uint32_t hd, uint32_t kvl, uint32_t heads,
                      uint32_t batch, uint32_t ctas) {
        return kl_mla_absorbed_attention_tma(&h.attn, qm, km, out_at(kOut), 200, batch, heads, hd, kvl, 0.07f, true,
                                             ctas, nullptr);
    };
    EXPECT_EQ(KL_ERROR_VARIANT_MISMATCH, launch(&q, &kv, 320, 256, 16, 1, 132)) << "another variant's head width";
    EXPECT_EQ(KL_ERROR_PRECONDITION, launch(&q, &kv, 576, 448, 16, 1, 132));
    EXPECT_EQ(KL_ERROR_PRECONDITION, launch(&q, &kv, 576, 512, 16, 1, 0));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("num_ctas >= 1")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION, launch(&q, &kv, 576, 512, 65536, 65536, 132)) << "2^34 tiles";
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("in 31 bits")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_mla_absorbed_attention_tma(&h.attn, &q, &kv, out_at(kOut), 2147483584u, 1, 1,
                                                                   576, 512, 0.07f, true, 132, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("signed 32-bit")) << kl_last_error_message();
    // The maps swapped: each is refused for the other's rank and box.
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, launch(&kv, &q, 576, 512, 16, 1, 132));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("tensor map q_map: ")) << kl_last_error_message();
    // A map of the same shape built for another launcher (the rope extract's box).
    kl_kernel rope;
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_get(&rope, &h.mod));
    kl_tensor_map foreign;
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_q_map_encode(&rope, &foreign, at(kQ), 64, 16, 100, 192, 3072));
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, launch(&q, &foreign, 576, 512, 16, 1, 132));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("tensor map kv_map: ")) << kl_last_error_message();
    kl_tensor_map blank;
    std::memset(&blank, 0, sizeof blank);
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, launch(&blank, &kv, 576, 512, 16, 1, 132));
    EXPECT_EQ(KL_ERROR_NULL_POINTER, launch(nullptr, &kv, 576, 512, 16, 1, 132));
    EXPECT_EQ(0u, h.rb.count) << "a refused launch recorded something";

    // The builders: Q 2 bytes off 16, and a cache whose rows are not a multiple of 16 bytes apart.
    kl_tensor_map m = q;
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_absorbed_attention_tma_q_map_encode(&h.attn, &m, at(kQ) + 1, 576, 16, 200,
                                                                             1, 576, 16 * 576, 200 * 16 * 576));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("is not 16-byte aligned")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_TENSOR_MAP,
              kl_mla_absorbed_attention_tma_kv_map_encode(&h.attn, &m, at(kKv), 576, 200, 1, 580, 200 * 580));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("is not a multiple of 16 bytes"))
        << kl_last_error_message();
    EXPECT_EQ(0, std::memcmp(&m, &q, sizeof m)) << "a refused encode changed the map";
}

TEST(MlaCopyEngineLaunch, GemmLaunchesAPersistentGridOverAllGroupsTiles) {
    Harness h("deepseek_v4_flash");
    uint32_t *const cnt = reinterpret_cast<uint32_t *>(kCnt);
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    const uint32_t m = 4096, g = 128, k_g = 128, n_g = 512;
    kl_tensor_map am, bm, cm;
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_a_map_encode(&h.gemm, &am, at(kQ), k_g, g, m, k_g, g * k_g));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_b_map_encode(&h.gemm, &bm, at(kKv), k_g, n_g, g, k_g, n_g * k_g));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_c_map_encode(&h.gemm, &cm, out_at(kOut), n_g, g, m, n_g, g * n_g));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma(&h.gemm, &am, &bm, &cm, m, g, k_g, n_g, cnt, 132, 2, nullptr))
        << kl_last_error_message();
    // Another shape takes maps of its own: k_g and C's n_g and m are exact
    // extents (the spec's tensor_map extent).
    kl_tensor_map am2, bm2, cm2;
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_a_map_encode(&h.gemm, &am2, at(kQ), k_g, 3, 100, k_g, 3 * k_g));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_b_map_encode(&h.gemm, &bm2, at(kKv), k_g, 136, 3, k_g, 136 * k_g));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma_c_map_encode(&h.gemm, &cm2, out_at(kOut), 136, 3, 100, 136, 3 * 136));
    ASSERT_EQ(KL_SUCCESS, kl_grouped_gemm_tma(&h.gemm, &am2, &bm2, &cm2, 100, 3, k_g, 136, cnt, 132, 2, nullptr))
        << kl_last_error_message();
    ASSERT_EQ(2u, h.rb.count);
    EXPECT_EQ(132u, h.recs[0].grid[0]) << "4 x 32 x 128 tiles, 132 blocks";
    EXPECT_EQ(6u, h.recs[1].grid[0]) << "2 n tiles x 1 m tile x 3 groups";
    EXPECT_EQ(384u, h.recs[0].block[0]);
    EXPECT_EQ(6u * 32768u + 2u * 16384u + 256u + 1024u, h.recs[0].shared_bytes) << "6 stages, 2 staging tiles, mbarriers, alignment";
    ASSERT_EQ(408u, h.recs[0].arg_bytes) << "three maps, four u32, the counters' address";
    EXPECT_EQ(0, std::memcmp(h.recs[0].args + 256, cm.opaque, 128));
    EXPECT_EQ(m, arg_at<uint32_t>(h.recs[0], 384));
    EXPECT_EQ(g, arg_at<uint32_t>(h.recs[0], 388));
    EXPECT_EQ(k_g, arg_at<uint32_t>(h.recs[0], 392));
    EXPECT_EQ(n_g, arg_at<uint32_t>(h.recs[0], 396));
    EXPECT_EQ(kCnt, arg_at<uintptr_t>(h.recs[0], 400));
    kl_tensor_map_request got;
    ASSERT_TRUE(kl_tensor_map_reference_decode(h.recs[0].args, &got));
    EXPECT_EQ(k_g, got.extent[0]);
    EXPECT_EQ(g, got.extent[1]);
    EXPECT_EQ(m, got.extent[2]);
    EXPECT_EQ(2u * k_g, got.stride[0]) << "the group's columns";
    EXPECT_EQ(2u * g * k_g, got.stride[1]) << "A's rows";
    EXPECT_EQ(128u, got.box[2]);
    ASSERT_TRUE(kl_tensor_map_reference_decode(h.recs[0].args + 256, &got));
    EXPECT_EQ(n_g, got.extent[0]);
    EXPECT_EQ(64u, got.box[0]);
    EXPECT_EQ(1u, got.box[1]);
    EXPECT_EQ(64u, got.box[2]);

    // Refusals: no blocks, too many tiles, a map in another slot, counters a
    // word short, k_g whose group stride is not 16-byte aligned
    // (grouped_gemm_wgmma takes those).
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_grouped_gemm_tma(&h.gemm, &am, &bm, &cm, m, g, k_g, n_g, cnt, 0, 2, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_grouped_gemm_tma(&h.gemm, &am, &bm, &cm, 0x7fffff80u, 65536, k_g, 128, cnt, 132, 2, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("in 31 bits")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_grouped_gemm_tma(&h.gemm, &am, &bm, &cm, 2147483584u, 1, k_g, 128, cnt, 132, 2, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("signed 32-bit")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_grouped_gemm_tma(&h.gemm, &bm, &am, &cm, m, g, k_g, n_g, cnt, 132, 2, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("tensor map a_map: ")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_grouped_gemm_tma(&h.gemm, &am, &bm, &am, m, g, k_g, n_g, cnt, 132, 2, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("tensor map c_map: ")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_grouped_gemm_tma(&h.gemm, &am, &bm, &cm, m, g, k_g, n_g, cnt, 132, 1, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("2 zeroed pacing words")) << kl_last_error_message();
    EXPECT_EQ(2u, h.rb.count) << "a refused launch recorded something";
    kl_tensor_map m13 = am;
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_grouped_gemm_tma_a_map_encode(&h.gemm, &m13, at(kQ), 13, g, m, 13, g * 13));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("kl_grouped_gemm_tma_a_map_encode: tensor map a_map: "))
        << kl_last_error_message();
    EXPECT_EQ(0, std::memcmp(&m13, &am, sizeof am));
}

TEST(MlaCopyEngineLaunch, RefusesAModuleWhoseLoadedImageIsNotSm90a) {
    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_record_backend_init(&rb, recs, 1);
    rb.device_arch = "sm_90";
    ASSERT_EQ(KL_SUCCESS, kl_record_backend_load_variant(&rb, kl_mla_prefill_variant_info, "deepseek_v4_flash", &mod));
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_mla_absorbed_attention_tma_get(&k, &mod));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("sm_90a")) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_grouped_gemm_tma_get(&k, &mod));
    kl_module_unload(&mod);
}

}  // namespace
