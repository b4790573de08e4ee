// The MLA decode launchers through the recording backend (no GPU): the
// geometry the kernels are written for (specs/mla_decode.yaml and the
// kernels' headers), the packed arguments, the launch attributes, every
// refusal with its status; the sizes of klaunch/mla_decode_layout.h, from
// their documented formulas; and the rule of kl_mla_decode_attn_*_choose.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"
#include "klaunch/record_backend.h"

namespace {

struct Harness {
    explicit Harness(const char *variant) {
        kl_record_backend_init(&rb, recs, 8);
        rb.max_dynamic_shared = 227 * 1024;
        status = kl_record_backend_load_variant(&rb, kl_mla_decode_variant_info, variant, &mod);
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

template <class T = kl_bf16>
T *fake(uintptr_t v) {
    return reinterpret_cast<T *>(v);
}

// A valid step's shape: batch 5, s_q 2, h_q 24 (48 rows), page 64.
struct Shape {
    uint32_t batch = 5, s_q = 2, h_q = 24, D = 576, page = 64, mbps = 10, num_blocks = 60, parts = 7;
    uint64_t words() const { return kl_mla_decode_schedule_words(batch, parts); }
    uint64_t bytes() const { return kl_mla_decode_workspace_bytes(parts, s_q, h_q, D); }
};

kl_status bf16_mma(const kl_kernel *k, const Shape &s, uint64_t words, uint64_t bytes) {
    return kl_mla_decode_attn_bf16_mma(k, fake(0x1000), fake(0x2000), fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                       fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                       fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D, s.page, s.mbps,
                                       s.num_blocks, 0.0417f, s.parts, words, bytes, nullptr);
}

TEST(MlaDecodeLaunch, ScheduleIsOneBlockOf512) {
    Harness h("deepseek_v4_flash");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_schedule_get(&k, &h.mod)) << kl_last_error_message();
    const uint64_t words = kl_mla_decode_schedule_words(1024, 132);
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_schedule(&k, fake<int32_t>(0x1000), fake<int32_t>(0x2000), 1024, 132, words,
                                                 nullptr))
        << kl_last_error_message();
    ASSERT_EQ(1u, h.rb.count);
    EXPECT_EQ(1u, h.recs[0].grid[0]);
    EXPECT_EQ(512u, h.recs[0].block[0]);
    EXPECT_EQ(0u, h.recs[0].attribute_flags);
    EXPECT_EQ(1024u, arg_at<uint32_t>(h.recs[0], 16));
    EXPECT_EQ(132u, arg_at<uint32_t>(h.recs[0], 20));
    // One word short of the layout's size.
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_mla_decode_schedule(&k, fake<int32_t>(0x1000), fake<int32_t>(0x2000), 1024,
                                                            132, words - 1, nullptr));
    EXPECT_NE(nullptr, std::strstr(kl_last_error_message(), "kl_mla_decode_schedule_words"))
        << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_mla_decode_schedule(&k, fake<int32_t>(0x1000), fake<int32_t>(0x2000), 0, 132, words, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_mla_decode_schedule(&k, fake<int32_t>(0x1000), fake<int32_t>(0x2000), 10, 0, words, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION, kl_mla_decode_schedule(&k, fake<int32_t>(0x1000), fake<int32_t>(0x2000), 10,
                                                            65536, kl_mla_decode_schedule_words(10, 65536), nullptr));
    EXPECT_EQ(KL_ERROR_NULL_POINTER,
              kl_mla_decode_schedule(&k, nullptr, fake<int32_t>(0x2000), 10, 4, words, nullptr));
    EXPECT_EQ(1u, h.rb.count) << "a refused launch recorded something";
}

TEST(MlaDecodeLaunch, MmaAttentionGeometryAndArguments) {
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        SCOPED_TRACE(variant);
        Harness h(variant);
        ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
        Shape s;
        s.D = std::string(variant) == "deepseek_v4_flash" ? 576 : 320;
        kl_kernel k;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_mma_get(&k, &h.mod)) << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, bf16_mma(&k, s, s.words(), s.bytes())) << kl_last_error_message();
        ASSERT_EQ(1u, h.rb.count);
        const kl_record &r = h.recs[0];
        EXPECT_EQ(3u, r.grid[0]);  // ceil(48 rows / 16)
        EXPECT_EQ(7u, r.grid[1]);  // parts
        EXPECT_EQ(128u, r.block[0]);
        EXPECT_EQ(160u * s.D + 1792u, r.shared_bytes);
        EXPECT_LE(r.shared_bytes, 99u * 1024u) << "fits the 99 KiB of sm_86, sm_89, sm_120";
        // (q, kv_cache, block_table, lengths, sched, out, lse, workspace: 8 pointers), then
        // batch, s_q, h_q, head_dim, page_size, max_blocks_per_seq, num_blocks, softmax_scale.
        ASSERT_EQ(96u, r.arg_bytes);
        EXPECT_EQ(0x1000u, arg_at<uintptr_t>(r, 0));
        EXPECT_EQ(0x8000u, arg_at<uintptr_t>(r, 56));
        EXPECT_EQ(5u, arg_at<uint32_t>(r, 64));
        EXPECT_EQ(2u, arg_at<uint32_t>(r, 68));
        EXPECT_EQ(24u, arg_at<uint32_t>(r, 72));
        EXPECT_EQ(s.D, arg_at<uint32_t>(r, 76));
        EXPECT_EQ(64u, arg_at<uint32_t>(r, 80));
        EXPECT_EQ(10u, arg_at<uint32_t>(r, 84));
        EXPECT_EQ(60u, arg_at<uint32_t>(r, 88));
        EXPECT_EQ(0.0417f, arg_at<float>(r, 92));

        kl_kernel k8;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_mma_get(&k8, &h.mod)) << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_mma(&k8, fake(0x1000), fake<uint8_t>(0x2000),
                                                         fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                                         fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                                         fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D, s.page,
                                                         s.mbps, s.num_blocks, 0.0417f, s.parts, s.words(),
                                                         s.bytes(), nullptr))
            << kl_last_error_message();
        ASSERT_EQ(2u, h.rb.count);
        EXPECT_EQ(96u * s.D + 64u * kl_mla_decode_fp8_token_bytes(s.D - 64) + 1792u, h.recs[1].shared_bytes);
        EXPECT_LE(h.recs[1].shared_bytes, 99u * 1024u);
    }
}

TEST(MlaDecodeLaunch, AttentionRefusesWhatTheKernelCannotDo) {
    Harness h("deepseek_v4_flash");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_mma_get(&k, &h.mod)) << kl_last_error_message();
    const Shape good;
    struct Bad {
        const char *what;
        Shape s;
        int64_t words_delta, bytes_delta;
        kl_status want;
    };
    Shape d320 = good, sq0 = good, sq9 = good, hq0 = good, hq129 = good, pg0 = good, b0 = good, parts0 = good,
          parts_big = good, mb0 = good;
    d320.D = 320;
    sq0.s_q = 0;
    sq9.s_q = 9;
    hq0.h_q = 0;
    hq129.h_q = 129;
    pg0.page = 0;
    b0.batch = 0;
    parts0.parts = 0;
    parts_big.parts = 65536;
    mb0.num_blocks = 0;
    const Bad bad[] = {
        {"head_dim of the other variant", d320, 0, 0, KL_ERROR_VARIANT_MISMATCH},
        {"s_q 0", sq0, 0, 0, KL_ERROR_PRECONDITION},
        {"s_q 9", sq9, 0, 0, KL_ERROR_PRECONDITION},
        {"h_q 0", hq0, 0, 0, KL_ERROR_PRECONDITION},
        {"h_q 129", hq129, 0, 0, KL_ERROR_PRECONDITION},
        {"page 0", pg0, 0, 0, KL_ERROR_PRECONDITION},
        {"batch 0", b0, 0, 0, KL_ERROR_PRECONDITION},
        {"no cache blocks", mb0, 0, 0, KL_ERROR_PRECONDITION},
        {"sched one word short", good, -1, 0, KL_ERROR_PRECONDITION},
        {"workspace one byte short", good, 0, -1, KL_ERROR_PRECONDITION},
        {"0 parts", parts0, 0, 0, KL_ERROR_PRECONDITION},
        {"65536 parts", parts_big, 0, 0, KL_ERROR_GRID_LIMIT},
    };
    for (const Bad &b : bad) {
        SCOPED_TRACE(b.what);
        const uint64_t words = b.s.words() + (uint64_t)b.words_delta, bytes = b.s.bytes() + (uint64_t)b.bytes_delta;
        const size_t before = h.rb.count;
        EXPECT_EQ(b.want, bf16_mma(&k, b.s, words, bytes)) << kl_last_error_message();
        EXPECT_EQ(before, h.rb.count) << "launched";
    }
}

// A sched or workspace one short is a size error of that buffer (the spec's
// `buffer:` key), its message naming the buffer, the size given and the size
// needed, for every launcher that takes them.
TEST(MlaDecodeLaunch, SchedOrWorkspaceOneShortIsASizeErrorNamingThatBuffer) {
    Harness h("mistral_small_4");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel k;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_mma_get(&k, &h.mod)) << kl_last_error_message();
    Shape s;
    s.D = 320;
    const std::string words = std::to_string(s.words()), bytes = std::to_string(s.bytes());
    EXPECT_EQ(KL_ERROR_PRECONDITION, bf16_mma(&k, s, s.words() - 1, s.bytes()));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message())
                                     .find("sched is too small: sched_words = " + std::to_string(s.words() - 1) +
                                           ", " + words + " needed"))
        << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION, bf16_mma(&k, s, s.words(), s.bytes() - 1));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message())
                                     .find("workspace is too small: workspace_bytes = " +
                                           std::to_string(s.bytes() - 1) + ", " + bytes + " needed"))
        << kl_last_error_message();
    kl_kernel c;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_combine_get(&c, &h.mod)) << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_mla_decode_combine(&c, fake<int32_t>(0x1000), fake<float>(0x2000), fake(0x3000), fake<float>(0x4000),
                                    s.batch, s.s_q, s.h_q, s.D, s.parts, s.words(), s.bytes() - 1, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("workspace is too small"))
        << kl_last_error_message();
    EXPECT_EQ(0u, h.rb.count) << "a refused launch recorded something";
}

TEST(MlaDecodeLaunch, CombineGridAndProgrammaticLaunch) {
    Harness h("mistral_small_4");
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_kernel c, cp;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_combine_get(&c, &h.mod)) << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_combine_pdl_get(&cp, &h.mod)) << kl_last_error_message();
    Shape s;
    s.D = 320;
    for (const kl_kernel *k : {&c, &cp})
        ASSERT_EQ(KL_SUCCESS, (k == &c ? kl_mla_decode_combine : kl_mla_decode_combine_pdl)(
                                  k, fake<int32_t>(0x1000), fake<float>(0x2000), fake(0x3000), fake<float>(0x4000),
                                  s.batch, s.s_q, s.h_q, s.D, s.parts, s.words(), s.bytes(), nullptr))
            << kl_last_error_message();
    ASSERT_EQ(2u, h.rb.count);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(12u * 1u, h.recs[i].grid[0]);  // ceil(48 rows / 4) x min(4, max(1, 7 parts / (4 x 5))) chunks
        EXPECT_EQ(5u, h.recs[i].grid[1]);        // batch
        EXPECT_EQ(128u, h.recs[i].block[0]);
        EXPECT_EQ(7u, arg_at<uint32_t>(h.recs[i], 48)); // num_parts is a kernel argument here
    }
    EXPECT_EQ(0u, h.recs[0].attribute_flags);
    EXPECT_NE(0u, h.recs[1].attribute_flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION);
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              kl_mla_decode_combine(&c, fake<int32_t>(0x1000), fake<float>(0x2000), fake(0x3000), fake<float>(0x4000),
                                    s.batch, s.s_q, s.h_q, s.D, s.parts, s.words(), s.bytes() - 4, nullptr));
    // One sequence split many ways: its rows spread over column chunks, 4 for kv_lora 256.
    Shape one = s;
    one.batch = 1;
    one.parts = 132;
    ASSERT_EQ(KL_SUCCESS, kl_mla_decode_combine(&c, fake<int32_t>(0x1000), fake<float>(0x2000), fake(0x3000),
                                                fake<float>(0x4000), one.batch, one.s_q, one.h_q, one.D, one.parts,
                                                one.words(), one.bytes(), nullptr))
        << kl_last_error_message();
    EXPECT_EQ(12u * 4u, h.recs[2].grid[0]);
}

TEST(MlaDecodeLaunch, TmaAttentionGeometryMapsAndRefusals) {
    for (const char *variant : {"mistral_small_4", "deepseek_v4_flash"}) {
        SCOPED_TRACE(variant);
        Harness h(variant);
        ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
        Shape s;
        s.D = std::string(variant) == "deepseek_v4_flash" ? 576 : 320;
        s.h_q = 64;  // 128 rows: 2 blocks of 64
        kl_kernel k;
        // The record backend's module is no sm_90a image: the launcher is refused at _get, naming the target.
        EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_mla_decode_attn_bf16_tma_get(&k, &h.mod));
        EXPECT_NE(nullptr, std::strstr(kl_last_error_message(), "sm_90a")) << kl_last_error_message();
        kl_record_backend rb2;
        kl_record recs2[4];
        kl_record_backend_init(&rb2, recs2, 4);
        rb2.max_dynamic_shared = 227 * 1024;
        kl_module mod2;
        const std::string text = std::string(kl_mla_decode_variant_info[0].module_info).find(variant) != std::string::npos
                                     ? kl_mla_decode_variant_info[0].module_info
                                     : kl_mla_decode_variant_info[1].module_info;
        const std::string arch = text + "cuda_arch 900a\n";
        ASSERT_EQ(KL_SUCCESS, kl_module_load(&rb2.base, arch.data(), arch.size(), &mod2)) << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma_get(&k, &mod2)) << kl_last_error_message();
        kl_tensor_map qm, cm;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma_q_map_encode(&k, &qm, fake(0x10000), s.D, s.s_q * s.h_q,
                                                                       s.batch, s.D, (uint64_t)s.s_q * s.h_q * s.D))
            << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma_cache_map_encode(&k, &cm, fake(0x20000), s.D, s.page,
                                                                           s.num_blocks, s.D, (uint64_t)s.page * s.D))
            << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma(&k, &qm, &cm, fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                                          fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                                          fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D, s.page,
                                                          s.mbps, s.num_blocks, 0.0417f, s.parts, s.words(), s.bytes(),
                                                          nullptr))
            << kl_last_error_message();
        ASSERT_EQ(1u, rb2.count);
        EXPECT_EQ(2u, recs2[0].grid[0]);  // ceil(128 rows / 64)
        EXPECT_EQ(7u, recs2[0].grid[1]);
        EXPECT_EQ(384u, recs2[0].block[0]);
        EXPECT_EQ(384u * s.D + 10368u, recs2[0].shared_bytes);
        EXPECT_LE(recs2[0].shared_bytes, 227u * 1024u);
        EXPECT_NE(0u, recs2[0].attribute_flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION);
        // The maps' 128 bytes each, at 0 and 128; the table pointer after them.
        EXPECT_EQ(0x3000u, arg_at<uintptr_t>(recs2[0], 256));
        // A page the copy engine cannot box: 32 positions.
        Shape p32 = s;
        p32.page = 32;
        EXPECT_EQ(KL_ERROR_PRECONDITION,
                  kl_mla_decode_attn_bf16_tma(&k, &qm, &cm, fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                              fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                              fake<float>(0x8000), p32.batch, p32.s_q, p32.h_q, p32.D, p32.page,
                                              p32.mbps, p32.num_blocks, 0.0417f, p32.parts, p32.words(), p32.bytes(),
                                              nullptr));
        EXPECT_NE(nullptr, std::strstr(kl_last_error_message(), "mla_decode_attn_bf16_mma")) << kl_last_error_message();
        // The maps swapped: both have the same box, dtype and swizzle, but each
        // builder tags its map with its parameter (issue 44, defect 7).
        EXPECT_EQ(KL_ERROR_TENSOR_MAP,
                  kl_mla_decode_attn_bf16_tma(&k, &cm, &qm, fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                              fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                              fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D, s.page, s.mbps,
                                              s.num_blocks, 0.0417f, s.parts, s.words(), s.bytes(), nullptr));
        EXPECT_NE(nullptr, std::strstr(kl_last_error_message(),
                                       "tensor map q_map: the map was built for parameter cache_map"))
            << kl_last_error_message();
        // The maps' extents against the scalars (issue 44, defect 7; the
        // spec's tensor_map extent): q_map one row short of s_q * h_q (the
        // need shown with its values), the cache map of one page more than
        // num_blocks (exact: the map's zero fill past the last page is what
        // meets a masked key's weight of 0 in P V); both refused, launching nothing.
        const size_t launched = rb2.count;
        auto launch_tma = [&](const kl_tensor_map *q, const kl_tensor_map *c) {
            return kl_mla_decode_attn_bf16_tma(&k, q, c, fake<int32_t>(0x3000), fake<int32_t>(0x4000),
                                               fake<int32_t>(0x5000), fake(0x6000), fake<float>(0x7000),
                                               fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D, s.page, s.mbps,
                                               s.num_blocks, 0.0417f, s.parts, s.words(), s.bytes(), nullptr);
        };
        kl_tensor_map q_short, cache_more;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma_q_map_encode(&k, &q_short, fake(0x10000), s.D,
                                                                       s.s_q * s.h_q - 1, s.batch, s.D,
                                                                       (uint64_t)s.s_q * s.h_q * s.D));
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_tma_cache_map_encode(&k, &cache_more, fake(0x20000), s.D, s.page,
                                                                           s.num_blocks + 1, s.D, (uint64_t)s.page * s.D));
        EXPECT_EQ(KL_ERROR_TENSOR_MAP, launch_tma(&q_short, &cm));
        EXPECT_NE(nullptr, std::strstr(kl_last_error_message(),
                                       "kl_mla_decode_attn_bf16_tma: tensor map q_map: extent1 = 127, but the launch "
                                       "needs at least s_q * h_q = 128 (s_q = 2, h_q = 64)"))
            << kl_last_error_message();
        EXPECT_EQ(KL_ERROR_TENSOR_MAP, launch_tma(&qm, &cache_more));
        EXPECT_NE(nullptr, std::strstr(kl_last_error_message(),
                                       "tensor map cache_map: extent2 = 61, but the launch needs exactly num_blocks = 60"))
            << kl_last_error_message();
        EXPECT_EQ(launched, rb2.count) << "a refused launch recorded something";
        // The fp8 launcher: 16 rows a block, 256 threads, one map (q's 16-row boxes).
        kl_kernel k8;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_tma_get(&k8, &mod2)) << kl_last_error_message();
        kl_tensor_map qm8;
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_tma_q_map_encode(&k8, &qm8, fake(0x10000), s.D, s.s_q * s.h_q,
                                                                      s.batch, s.D, (uint64_t)s.s_q * s.h_q * s.D))
            << kl_last_error_message();
        EXPECT_EQ(KL_ERROR_TENSOR_MAP,
                  kl_mla_decode_attn_fp8_tma(&k8, &qm, fake<uint8_t>(0x2000), fake<int32_t>(0x3000),
                                             fake<int32_t>(0x4000), fake<int32_t>(0x5000), fake(0x6000),
                                             fake<float>(0x7000), fake<float>(0x8000), s.batch, s.s_q, s.h_q, s.D,
                                             s.page, s.mbps, s.num_blocks, 0.0417f, s.parts, s.words(), s.bytes(),
                                             nullptr))
            << "the bf16 launcher's q map has 64-row boxes";
        ASSERT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_tma(&k8, &qm8, fake<uint8_t>(0x2000), fake<int32_t>(0x3000),
                                                         fake<int32_t>(0x4000), fake<int32_t>(0x5000), fake(0x6000),
                                                         fake<float>(0x7000), fake<float>(0x8000), s.batch, s.s_q,
                                                         s.h_q, s.D, s.page, s.mbps, s.num_blocks, 0.0417f, s.parts,
                                                         s.words(), s.bytes(), nullptr))
            << kl_last_error_message();
        ASSERT_EQ(2u, rb2.count);
        EXPECT_EQ(8u, recs2[1].grid[0]);  // ceil(128 rows / 16)
        EXPECT_EQ(7u, recs2[1].grid[1]);
        EXPECT_EQ(256u, recs2[1].block[0]);
        EXPECT_EQ(288u * s.D + 64u * kl_mla_decode_fp8_token_bytes(s.D - 64) + 3840u, recs2[1].shared_bytes);
        EXPECT_LE(recs2[1].shared_bytes, 227u * 1024u);
        EXPECT_NE(0u, recs2[1].attribute_flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION);
        kl_module_unload(&mod2);
    }
}

// ---- klaunch/mla_decode_layout.h ----

TEST(MlaDecodeLayout, SizesAreTheDocumentedFormulas) {
    EXPECT_EQ(16u + 8u * 132u + 4u * 128u, kl_mla_decode_schedule_words(128, 132));
    EXPECT_EQ(16u + 8u * 65535u + 4u * 16777216u, kl_mla_decode_schedule_words(16777216, 65535));
    // 4 bytes x 2 slots a part x rows x (kv_lora + 1)
    EXPECT_EQ(4u * 2u * 132u * 2u * 128u * 513u, kl_mla_decode_workspace_bytes(132, 2, 128, 576));
    EXPECT_EQ(4u * 2u * 33u * 16u * 257u, kl_mla_decode_workspace_bytes(33, 1, 16, 320));
    EXPECT_EQ(UINT64_MAX, kl_mla_decode_workspace_bytes(1, 1, 1, 63)) << "no such head width";
    EXPECT_EQ(UINT64_MAX, kl_mla_decode_workspace_bytes(0xffffffffu, 0xffffffffu, 0xffffffffu, 576)) << "overflow";
}

TEST(MlaDecodeLayout, Fp8TokenIsFlashMlasAt576) {
    EXPECT_EQ(512u, kl_mla_decode_fp8_scales_offset(512));
    EXPECT_EQ(528u, kl_mla_decode_fp8_rope_offset(512));
    EXPECT_EQ(656u, kl_mla_decode_fp8_token_bytes(512));
    EXPECT_EQ(272u, kl_mla_decode_fp8_rope_offset(256)) << "2 scales end at 264; 16-byte aligned rope";
    EXPECT_EQ(400u, kl_mla_decode_fp8_token_bytes(256));
    // The spec's constant is the same number.
    for (const kl_variant_info *v = kl_mla_decode_variant_info; v->name != nullptr; ++v) {
        int64_t hd = 0, tb = 0;
        for (uint32_t i = 0; i < v->num_consts; ++i) {
            if (std::string(v->const_names[i]) == "MLA_HDIM") hd = v->const_values[i];
            if (std::string(v->const_names[i]) == "MLA_FP8_TOKEN_BYTES") tb = v->const_values[i];
        }
        EXPECT_EQ((int64_t)kl_mla_decode_fp8_token_bytes((uint32_t)hd - 64u), tb) << v->name;
    }
}

TEST(MlaDecodeLayout, PartsFillTheMultiprocessors) {
    // bf16 _tma: one block a multiprocessor, 64 rows a block.
    EXPECT_EQ(132u, kl_mla_decode_num_parts(KL_MLA_DECODE_BF16_TMA, 132, 1, 16));  // 1 block of rows
    EXPECT_EQ(33u, kl_mla_decode_num_parts(KL_MLA_DECODE_BF16_TMA, 132, 2, 128));  // 4 blocks of rows
    EXPECT_EQ(1u, kl_mla_decode_num_parts(KL_MLA_DECODE_BF16_TMA, 2, 8, 128));     // 16 blocks of rows, 2 SMs
    // fp8 _tma: one block a multiprocessor, 16 rows a block.
    EXPECT_EQ(132u, kl_mla_decode_num_parts(KL_MLA_DECODE_FP8_TMA, 132, 1, 16));
    EXPECT_EQ(8u, kl_mla_decode_num_parts(KL_MLA_DECODE_FP8_TMA, 132, 2, 128));    // 16 blocks of rows
    // _mma: two blocks a multiprocessor, 16 rows a block.
    EXPECT_EQ(264u, kl_mla_decode_num_parts(KL_MLA_DECODE_MMA, 132, 1, 16));
    EXPECT_EQ(16u, kl_mla_decode_num_parts(KL_MLA_DECODE_MMA, 132, 2, 128));
    EXPECT_EQ(1u, kl_mla_decode_num_parts(KL_MLA_DECODE_MMA, 0, 1, 8)) << "at least 1";
    EXPECT_EQ(65535u, kl_mla_decode_num_parts(KL_MLA_DECODE_MMA, 100000, 1, 1)) << "at most the grid's y";
}

// The rule of kl_mla_decode_attn_{bf16,fp8}_choose (the spec's fallback,
// asked alone: a rule-only table, no rows and the compiled-in table
// skipped): the expectations once written for kl_mla_decode_pick, now of
// the chooser, with num_parts kl_mla_decode_num_parts of the chosen kind.
struct MlaChoice {
    kl_mla_decode_attn_bf16_choice bf;
    kl_mla_decode_attn_fp8_choice f8;
};

// deepseek_v4_flash (D 576) with the sm_90a image (the _tma launchers load)
// or without; batch 5, s_q 2, h_q 24 (Shape's) at `page` on a device of
// compute capability cc_major with 132 SMs.
MlaChoice mla_choose(bool sm90a, uint32_t cc_major, uint32_t page) {
    kl_record recs[1];
    kl_record_backend rb;
    kl_record_backend_init(&rb, recs, 1);
    rb.max_dynamic_shared = 227 * 1024;
    const kl_variant_info *v = kl_mla_decode_variant_info;
    while (v->name != nullptr && std::string(v->name) != "deepseek_v4_flash") ++v;
    const std::string text = std::string(v->module_info) + (sm90a ? "cuda_arch 900a\n" : "");
    kl_module mod;
    EXPECT_EQ(KL_SUCCESS, kl_module_load(&rb.base, text.data(), text.size(), &mod)) << kl_last_error_message();
    kl_kernel k[4];
    EXPECT_EQ(KL_SUCCESS, kl_mla_decode_attn_bf16_mma_get(&k[0], &mod));
    EXPECT_EQ(sm90a, kl_mla_decode_attn_bf16_tma_get(&k[1], &mod) == KL_SUCCESS);  // a refusal leaves k[1] unloaded
    EXPECT_EQ(KL_SUCCESS, kl_mla_decode_attn_fp8_mma_get(&k[2], &mod));
    EXPECT_EQ(sm90a, kl_mla_decode_attn_fp8_tma_get(&k[3], &mod) == KL_SUCCESS);
    const kl_mla_decode_attn_bf16_kernels bf = {&k[0], &k[1]};
    const kl_mla_decode_attn_fp8_kernels f8 = {&k[2], &k[3]};
    const kl_device dev = {cc_major, 0, 132, 50ull << 20, 85031714816ull, 0};
    const Shape s;
    const kl_mla_decode_attn_bf16_shape shape = {s.batch, s.s_q, s.h_q, s.D, page, 4096};
    const kl_mla_decode_attn_fp8_shape shape8 = {s.batch, s.s_q, s.h_q, s.D, page, 4096};
    const kl_choice_table rule_only = {nullptr, 0u, nullptr, 0u, nullptr, KL_CHOICE_TABLE_ONLY};
    MlaChoice c;
    c.bf = kl_mla_decode_attn_bf16_choose(&shape, &dev, &rule_only, KL_CHOICE_GRAPH, &bf);
    c.f8 = kl_mla_decode_attn_fp8_choose(&shape8, &dev, &rule_only, KL_CHOICE_EAGER, &f8);
    kl_module_unload(&mod);
    return c;
}

// Both cache types: _tma (of the cache's kind) when tma, else _mma, by the rule.
void expect_mla_rule(bool sm90a, uint32_t cc_major, uint32_t page, bool tma) {
    SCOPED_TRACE(testing::Message() << "sm90a " << sm90a << " cc " << cc_major << " page " << page);
    const MlaChoice c = mla_choose(sm90a, cc_major, page);
    const Shape s;
    EXPECT_EQ(KL_CHOICE_RULE, c.bf.source);
    EXPECT_EQ(KL_CHOICE_RULE, c.f8.source);
    EXPECT_EQ(tma ? KL_MLA_DECODE_ATTN_BF16_TMA : KL_MLA_DECODE_ATTN_BF16_MMA, c.bf.alternative);
    EXPECT_EQ(tma ? KL_MLA_DECODE_ATTN_FP8_TMA : KL_MLA_DECODE_ATTN_FP8_MMA, c.f8.alternative);
    EXPECT_EQ(kl_mla_decode_num_parts(tma ? KL_MLA_DECODE_BF16_TMA : KL_MLA_DECODE_MMA, 132, s.s_q, s.h_q), c.bf.num_parts);
    EXPECT_EQ(kl_mla_decode_num_parts(tma ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_MMA, 132, s.s_q, s.h_q), c.f8.num_parts);
}

TEST(MlaDecodeChooser, RuleTakesTheCopyEngineOnHopperOnly) {
    expect_mla_rule(true, 9, 64, true);
    expect_mla_rule(true, 9, 256, true);
    expect_mla_rule(true, 9, 32, false);  // a box is 64 positions of a page
    expect_mla_rule(true, 9, 96, false);
    expect_mla_rule(false, 9, 64, false);  // the sm_90a image did not load
    expect_mla_rule(true, 8, 64, false);
    expect_mla_rule(true, 10, 64, false);
    // The parts the rule's kinds give here (48 rows): 132 bf16 _tma (1 block
    // of 64 rows), 44 fp8 _tma (3 blocks of 16, 1 an SM), 88 _mma (2 an SM).
    const MlaChoice c = mla_choose(true, 9, 64), m = mla_choose(true, 8, 64);
    EXPECT_EQ(132u, c.bf.num_parts);
    EXPECT_EQ(44u, c.f8.num_parts);
    EXPECT_EQ(88u, m.bf.num_parts);
    EXPECT_EQ(88u, m.f8.num_parts);
}

}  // namespace
