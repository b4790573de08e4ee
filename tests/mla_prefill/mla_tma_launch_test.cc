// kl_mla_q_rope_extract_tma and its tensor-map builders through the
// recording backend (no GPU). Expectations from specs/mla_prefill.yaml (box
// [64, 8, 16] bf16, 128-byte swizzle, L2 promotion 128B by default, zero
// fill; grid (ceil(nq / 8), ceil(num_tokens / 16), ceil(rope / 64)), block
// 32, 17416 bytes of shared memory), from klaunch/tensor_map.h (the
// reference encoding's fields; the checks cuda.h's cuTensorMapEncodeTiled
// documents) and from the kernel's layout: two tensor maps first, at offsets
// 0 and 128 of a 128-byte-aligned parameter buffer.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"
#include "tests/support/wrapper_support.h"

namespace {

// A module whose loaded image is sm_90a code (the launcher's `arch`).
struct Harness {
    explicit Harness(const char *variant = "deepseek_v4_flash") {
        kl_record_backend_init(&rb, recs, 4);
        rb.device_arch = "sm_90a";
        std::string text;
        for (const kl_variant_info *v = kl_mla_prefill_variant_info; v->name; ++v)
            if (std::strcmp(v->name, variant) == 0) text = std::string(v->module_info) + "cuda_arch 900a\n";
        status = kl_module_load(&rb.base, text.data(), text.size(), &mod);
        if (status == KL_SUCCESS) status = kl_mla_q_rope_extract_tma_get(&k, &mod);
    }
    ~Harness() { kl_module_unload(&mod); }
    kl_record recs[4];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_status status;
};

// Device addresses are never read by the recording backend.
const kl_bf16 *at(uintptr_t v) { return reinterpret_cast<const kl_bf16 *>(v); }

// The model's shapes: 16 heads of [nope 128 | rope 64], rows q_dim = 16 * 192.
constexpr uint32_t kNope = 128, kRope = 64, kHd = 192, kNq = 16, kTokens = 100, kQdim = kNq * kHd;
constexpr uintptr_t kQ = 0x100000, kOut = 0x900000;

kl_status encode_q(Harness &h, kl_tensor_map *m, uint32_t tokens = kTokens) {
    return kl_mla_q_rope_extract_tma_q_map_encode(&h.k, m, at(kQ) + kNope, kRope, kNq, tokens, kHd, kQdim);
}
kl_status encode_out(Harness &h, kl_tensor_map *m, uint32_t tokens = kTokens) {
    return kl_mla_q_rope_extract_tma_out_map_encode(&h.k, m, at(kOut), kRope, kNq, tokens, kRope, kNq * kRope);
}

TEST(MlaTmaLaunch, DescriptorLaysTheMapsOutAt128ByteBoundaries) {
    const kl_kernel_desc &d = kl_mla_q_rope_extract_tma_desc;
    ASSERT_EQ(2u, d.num_params) << "num_tokens, nq and rope size the grid only (launch_only)";
    EXPECT_EQ(KL_PARAM_TENSOR_MAP, d.params[0].kind);
    EXPECT_EQ(0u, d.params[0].offset);
    EXPECT_EQ(128u, d.params[0].size);
    EXPECT_EQ(KL_PARAM_TENSOR_MAP, d.params[1].kind);
    EXPECT_EQ(128u, d.params[1].offset);
    EXPECT_EQ(256u, d.param_bytes);
    EXPECT_STREQ("sm_90a", d.arch);
    // On sm_90 the parameters start at 0x210 of constant bank 0, 16 past a
    // 128-byte boundary: the driver puts the maps at 112 and 240.
    EXPECT_EQ(112u, kl__param_offset_at(&d, 0, 0x210 % 128));
    EXPECT_EQ(240u, kl__param_offset_at(&d, 1, 0x210 % 128));
    EXPECT_EQ(32u, kl__param_offset_at(&d, 0, 0x160 % 128));  // sm_80's 0x160
}

TEST(MlaTmaLaunch, PacksBothMapsAndLaunchesOneBoxPerBlock) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, out;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q)) << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out)) << kl_last_error_message();
    EXPECT_EQ(2u, h.rb.tensor_maps_encoded);
    const kl_stream stream = reinterpret_cast<kl_stream>(uintptr_t{0x5000});
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, kTokens, kNq, kRope, stream))
        << kl_last_error_message();
    ASSERT_EQ(1u, h.rb.count);
    const kl_record &r = h.recs[0];
    EXPECT_STREQ("mla_q_rope_extract_tma", r.entry);
    EXPECT_EQ(2u, r.grid[0]);  // ceil(16 heads / 8)
    EXPECT_EQ(7u, r.grid[1]);  // ceil(100 tokens / 16)
    EXPECT_EQ(1u, r.grid[2]);  // ceil(64 / 64)
    EXPECT_EQ(32u, r.block[0]);
    EXPECT_EQ(17416u, r.shared_bytes);
    EXPECT_EQ(stream, r.stream);
    ASSERT_EQ(256u, r.arg_bytes);
    EXPECT_EQ(0, std::memcmp(r.args, q.opaque, 128)) << "q_map's 128 bytes at offset 0";
    EXPECT_EQ(0, std::memcmp(r.args + 128, out.opaque, 128)) << "out_map's at 128";

    // What the reference encoding says was encoded (klaunch/tensor_map.h).
    kl_tensor_map_request got;
    ASSERT_TRUE(kl_tensor_map_reference_decode(r.args, &got));
    EXPECT_EQ(KL_TENSOR_MAP_BF16, got.dtype);
    EXPECT_EQ(3u, got.rank);
    EXPECT_EQ(reinterpret_cast<const void *>(kQ + 2 * kNope), got.address);
    EXPECT_EQ(kRope, got.extent[0]);
    EXPECT_EQ(kNq, got.extent[1]);
    EXPECT_EQ(kTokens, got.extent[2]);
    EXPECT_EQ(2u * kHd, got.stride[0]) << "strides reach the driver in bytes";
    EXPECT_EQ(2u * kQdim, got.stride[1]);
    EXPECT_EQ(64u, got.box[0]);
    EXPECT_EQ(8u, got.box[1]);
    EXPECT_EQ(16u, got.box[2]);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(1u, got.element_stride[i]);
    EXPECT_EQ(KL_TENSOR_MAP_SWIZZLE_128B, got.swizzle);
    EXPECT_EQ(KL_TENSOR_MAP_INTERLEAVE_NONE, got.interleave);
    EXPECT_EQ(KL_TENSOR_MAP_L2_128B, got.l2_promotion);
    EXPECT_EQ(KL_TENSOR_MAP_FILL_ZERO, got.oob_fill);
    ASSERT_TRUE(kl_tensor_map_reference_decode(r.args + 128, &got));
    EXPECT_EQ(reinterpret_cast<const void *>(kOut), got.address);
    EXPECT_EQ(2u * kRope, got.stride[0]);
    EXPECT_EQ(2u * kNq * kRope, got.stride[1]);
}

TEST(MlaTmaLaunch, RopeWiderThanABoxTakesMoreBlocksInZ) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    // Maps of the launch's own shape (1 token, 9 heads of [nope 128 | rope
    // 96]): out_map's extents must equal the scalars (its bounds drop the
    // second z box's columns past 96).
    kl_tensor_map q, out;
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, &q, at(kQ) + kNope, 96, 9, 1, 224, 9 * 224))
        << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_out_map_encode(&h.k, &out, at(kOut), 96, 9, 1, 96, 9 * 96))
        << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, 1, 9, 96, nullptr)) << kl_last_error_message();
    EXPECT_EQ(2u, h.recs[0].grid[0]);  // ceil(9 / 8)
    EXPECT_EQ(1u, h.recs[0].grid[1]);
    EXPECT_EQ(2u, h.recs[0].grid[2]);  // ceil(96 / 64)
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, 0, 9, 96, nullptr));
    EXPECT_EQ(1u, h.rb.count) << "no tokens: an empty launch";
}

struct BadInput {
    const char *what;
    const kl_bf16 *address;
    uint64_t e0, e1, e2, s1, s2;
    kl_status status;
    const char *says;
};

// Each rule of cuTensorMapEncodeTiled the builder enforces, one value past it.
TEST(MlaTmaLaunch, BuilderRefusesEachBadInputBeforeTheBackendSeesIt) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map good;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &good));
    const uint64_t k2p32 = uint64_t{1} << 32;
    const BadInput cases[] = {
        {"address 2 bytes past 16", at(kQ) + 1, 64, 16, 100, 192, 3072, KL_ERROR_TENSOR_MAP,
         "the global address 0x100002 is not 16-byte aligned"},
        {"NULL address", nullptr, 64, 16, 100, 192, 3072, KL_ERROR_NULL_POINTER, "the global address is NULL"},
        {"stride of 196 elements", at(kQ), 64, 16, 100, 196, 3072, KL_ERROR_TENSOR_MAP,
         "stride1 = 196 elements = 392 bytes is not a multiple of 16 bytes"},
        {"stride of 2^39 elements", at(kQ), 64, 16, 100, 192, uint64_t{1} << 39, KL_ERROR_TENSOR_MAP,
         "stride2 = 549755813888 elements = 1099511627776 bytes is not below 2^40"},
        {"stride overflowing 64 bits in bytes", at(kQ), 64, 16, 100, 192, uint64_t{1} << 63, KL_ERROR_TENSOR_MAP,
         "stride2 = 9223372036854775808 elements overflows 64 bits in bytes"},
        {"extent 0", at(kQ), 64, 0, 100, 192, 3072, KL_ERROR_TENSOR_MAP, "extent1 = 0 is outside 1..2^32"},
        {"extent 2^32 + 1", at(kQ), 64, 16, k2p32 + 1, 192, 3072, KL_ERROR_TENSOR_MAP,
         "extent2 = 4294967297 is outside 1..2^32"},
    };
    for (const BadInput &c : cases) {
        SCOPED_TRACE(c.what);
        kl_tensor_map m = good;
        const size_t encoded = h.rb.tensor_maps_encoded;
        EXPECT_EQ(c.status, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, &m, c.address, c.e0, c.e1, c.e2, c.s1, c.s2));
        const std::string msg = kl_last_error_message();
        EXPECT_NE(std::string::npos, msg.find(kl_status_name(c.status))) << msg;
        EXPECT_NE(std::string::npos, msg.find("kl_mla_q_rope_extract_tma_q_map_encode: tensor map q_map: ")) << msg;
        EXPECT_NE(std::string::npos, msg.find(c.says)) << msg;
        EXPECT_NE(std::string::npos, msg.find("[specs/mla_prefill.yaml:")) << msg;
        EXPECT_EQ(encoded, h.rb.tensor_maps_encoded) << "the backend was asked";
        EXPECT_EQ(0, std::memcmp(&m, &good, sizeof m)) << "a refused encode changed the map";
    }
    // Extents of exactly 2^32 and strides just under 2^40 bytes are the limits, not past them.
    kl_tensor_map m;
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, &m, at(kQ), 64, 16, k2p32, 192,
                                                                   (uint64_t{1} << 39) - 8))
        << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, nullptr, at(kQ), 64, 16, 100, 192, 3072));
}

TEST(MlaTmaLaunch, BuilderNeedsALoadedKernelAndAnEncodingBackend) {
    kl_kernel none;
    std::memset(&none, 0, sizeof none);
    kl_tensor_map m;
    EXPECT_EQ(KL_ERROR_KERNEL_NOT_LOADED,
              kl_mla_q_rope_extract_tma_q_map_encode(&none, &m, at(kQ), 64, 16, 100, 192, 3072));
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map good;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &good));
    m = good;
    h.rb.tensor_map_status = KL_ERROR_DRIVER;  // what the CUDA backend returns when the driver refuses
    EXPECT_EQ(KL_ERROR_DRIVER, encode_q(h, &m));
    EXPECT_EQ(0, std::memcmp(&m, &good, sizeof m)) << "a failed encode changed the map";
}

// A map that does not fit the kernel: refused by the launcher and by
// kl_X_check alike, launching nothing.
TEST(MlaTmaLaunch, LauncherRefusesMapsThatDoNotFitTheKernel) {
    Harness h, other;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    ASSERT_EQ(KL_SUCCESS, other.status) << kl_last_error_message();
    kl_tensor_map q, out, foreign;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    ASSERT_EQ(KL_SUCCESS, encode_q(other, &foreign));

    // The same request with one field changed, through the generic encoder.
    kl_tensor_map_request base = q.request;
    struct Variant {
        const char *what;
        kl_tensor_map_request req;
        const char *says;
    };
    Variant variants[4] = {{"another box", base, "the map's box is (64, 8, 8) with element strides (1, 1, 1); the "
                                                 "loaded variant's kernel copies boxes of (64, 8, 16)"},
                           {"no swizzle", base, "the map has swizzle none"},
                           {"rank 2", base, "the map is bf16 of rank 2; the kernel takes bf16 of rank 3"},
                           {"f16", base, "the map is f16 of rank 3"}};
    variants[0].req.box[2] = 8;
    variants[1].req.swizzle = KL_TENSOR_MAP_SWIZZLE_NONE;
    variants[2].req.rank = 2;
    variants[3].req.dtype = KL_TENSOR_MAP_F16;
    for (Variant &v : variants) {
        SCOPED_TRACE(v.what);
        kl_tensor_map m;
        ASSERT_EQ(KL_SUCCESS, kl_tensor_map_encode_tiled(&h.rb.base, &v.req, &m)) << kl_last_error_message();
        EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma(&h.k, &m, &out, kTokens, kNq, kRope, nullptr));
        const std::string msg = kl_last_error_message();
        EXPECT_NE(std::string::npos, msg.find("kl_mla_q_rope_extract_tma: tensor map q_map: ")) << msg;
        EXPECT_NE(std::string::npos, msg.find(v.says)) << msg;
        EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma_check(&h.k, &q, &m, kTokens, kNq, kRope));
        EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("tensor map out_map: "));
    }

    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma(&h.k, &foreign, &out, kTokens, kNq, kRope, nullptr));
    EXPECT_NE(std::string::npos,
              std::string(kl_last_error_message()).find("the map was encoded by the record backend at"))
        << kl_last_error_message();

    kl_tensor_map blank;
    std::memset(&blank, 0, sizeof blank);
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma(&h.k, &q, &blank, kTokens, kNq, kRope, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message())
                                     .find("tensor map out_map: the map was never encoded (encode it with "
                                           "kl_mla_q_rope_extract_tma_out_map_encode first)"))
        << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_mla_q_rope_extract_tma(&h.k, nullptr, &out, kTokens, kNq, kRope, nullptr));
    EXPECT_EQ(0u, h.rb.count) << "a refused launch recorded something";

}

// Issue 44, defect 7: q_map and out_map share a description, so the two
// swapped passed every check (the kernel would read the output and write
// over Q). Each builder tags its map with its parameter: a map built for
// one is refused for the other, naming both, in the launcher and its _check.
TEST(MlaTmaLaunch, SwappedMapsOfOneShapeAreRefusedNamingTheParameterEachWasBuiltFor) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, out;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma(&h.k, &out, &q, kTokens, kNq, kRope, nullptr));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message())
                                     .find("kl_mla_q_rope_extract_tma: tensor map q_map: the map was built for "
                                           "parameter out_map (by kl_mla_q_rope_extract_tma_out_map_encode), not "
                                           "for q_map"))
        << kl_last_error_message();
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma_check(&h.k, &q, &q, kTokens, kNq, kRope));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message())
                                     .find("tensor map out_map: the map was built for parameter q_map"))
        << kl_last_error_message();
    EXPECT_EQ(0u, h.rb.count) << "a refused launch recorded something";
    // A map of kl_tensor_map_encode_tiled carries no parameter: its fields decide.
    kl_tensor_map generic;
    ASSERT_EQ(KL_SUCCESS, kl_tensor_map_encode_tiled(&h.rb.base, &out.request, &generic));
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &generic, kTokens, kNq, kRope, nullptr))
        << kl_last_error_message();
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, kTokens, kNq, kRope, nullptr));
}

// ---- the maps' extents against the launch's scalars (issue 44, defect 7,
// second half; the spec's tensor_map extent:): q_map at least (rope, nq,
// num_tokens), out_map exactly them. Messages name the launcher, the map,
// the dimension, the map's extent, the need and its expression, and the
// spec's file:line of the entry. ----

const char kSpec[] = "specs/mla_prefill.yaml";
std::string QMapExtentRef() { return kltest::SpecRef(kSpec, "mla_q_rope_extract_tma", {"extent: [rope, nq, num_tokens]"}); }
std::string OutMapExtentRef() {
    return kltest::SpecRef(kSpec, "mla_q_rope_extract_tma", {"extent: [{exact: rope}, {exact: nq}, {exact: num_tokens}]"});
}

// The launcher and its _check refuse alike, launching nothing; the message.
std::string RefusedBoth(Harness &h, const kl_tensor_map *q, const kl_tensor_map *out, uint32_t tokens, uint32_t nq,
                        uint32_t rope) {
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma_check(&h.k, q, out, tokens, nq, rope));
    const std::string checked = kl_last_error_message();
    EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_mla_q_rope_extract_tma(&h.k, q, out, tokens, nq, rope, nullptr));
    const std::string msg = kl_last_error_message();
    EXPECT_EQ(checked, msg) << "kl_X_check and kl_X disagree";
    EXPECT_EQ(0u, h.rb.count) << "a refused launch recorded something";
    return msg;
}

// The case: the maps built for 100 tokens, the launch for 101. The
// kernel's 101st token row would be q_map's zero fill, its store dropped by
// out_map's bounds: out held 100 rows of the 101 asked, and no check said so.
TEST(MlaTmaLaunch, QRopeExtractNumTokensPastItsMapsIsRefused) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, out, q101;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    std::string msg = RefusedBoth(h, &q, &out, kTokens + 1, kNq, kRope);
    EXPECT_NE(std::string::npos,
              msg.find("KL_ERROR_TENSOR_MAP: kl_mla_q_rope_extract_tma: tensor map q_map: extent2 = 100, but the launch "
                       "needs at least num_tokens = 101; encode the map for a tensor this large [" + QMapExtentRef() + ":"))
        << msg;
    EXPECT_TRUE(kltest::HasSpecRef(msg, QMapExtentRef())) << msg;
    // q_map large enough, out_map still of 100 tokens: its exact extent.
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q101, kTokens + 1));
    msg = RefusedBoth(h, &q101, &out, kTokens + 1, kNq, kRope);
    EXPECT_NE(std::string::npos,
              msg.find("kl_mla_q_rope_extract_tma: tensor map out_map: extent2 = 100, but the launch needs exactly "
                       "num_tokens = 101: the kernel relies on the map's bounds there"))
        << msg;
    EXPECT_TRUE(kltest::HasSpecRef(msg, OutMapExtentRef())) << msg;
}

// Each dimension of q_map (at least: rope, nq, num_tokens) one short.
TEST(MlaTmaLaunch, AMapOneShortInAnAtLeastDimensionIsRefusedNamingTheDimensionBothValuesAndTheExpression) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map out;
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    struct Short {
        uint64_t e0, e1, e2;
        const char *says;
    } cases[] = {
        {kRope - 8, kNq, kTokens, "tensor map q_map: extent0 = 56, but the launch needs at least rope = 64;"},
        {kRope, kNq - 1, kTokens, "tensor map q_map: extent1 = 15, but the launch needs at least nq = 16;"},
        {kRope, kNq, kTokens - 1, "tensor map q_map: extent2 = 99, but the launch needs at least num_tokens = 100;"},
    };
    for (const Short &c : cases) {
        SCOPED_TRACE(c.says);
        kl_tensor_map q;
        ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, &q, at(kQ) + kNope, c.e0, c.e1, c.e2, kHd, kQdim))
            << kl_last_error_message();
        const std::string msg = RefusedBoth(h, &q, &out, kTokens, kNq, kRope);
        EXPECT_EQ(0u, msg.find("KL_ERROR_TENSOR_MAP: kl_mla_q_rope_extract_tma: ")) << msg;
        EXPECT_NE(std::string::npos, msg.find(c.says)) << msg;
        EXPECT_TRUE(kltest::HasSpecRef(msg, QMapExtentRef())) << msg;
    }
}

// Each dimension of out_map (exactly: rope, nq, num_tokens) one larger.
TEST(MlaTmaLaunch, AMapOneLargerInAnExactDimensionIsRefused) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    struct Large {
        uint64_t e0, e1, e2;
        const char *says;
    } cases[] = {
        {kRope + 8, kNq, kTokens, "tensor map out_map: extent0 = 72, but the launch needs exactly rope = 64:"},
        {kRope, kNq + 1, kTokens, "tensor map out_map: extent1 = 17, but the launch needs exactly nq = 16:"},
        {kRope, kNq, kTokens + 1, "tensor map out_map: extent2 = 101, but the launch needs exactly num_tokens = 100:"},
    };
    for (const Large &c : cases) {
        SCOPED_TRACE(c.says);
        kl_tensor_map out;
        ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_out_map_encode(&h.k, &out, at(kOut), c.e0, c.e1, c.e2, c.e0,
                                                                       c.e0 * c.e1))
            << kl_last_error_message();
        const std::string msg = RefusedBoth(h, &q, &out, kTokens, kNq, kRope);
        EXPECT_NE(std::string::npos, msg.find(c.says)) << msg;
        EXPECT_NE(std::string::npos, msg.find("a larger map would feed or write the elements past it")) << msg;
        EXPECT_TRUE(kltest::HasSpecRef(msg, OutMapExtentRef())) << msg;
    }
}

// A launch of no tokens has no element in that dimension: an exact need of
// 0 takes any map (no map is empty), and the launch is empty.
TEST(MlaTmaLaunch, AnExactNeedOfZeroAcceptsAnyMap) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, out;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_check(&h.k, &q, &out, 0, kNq, kRope)) << kl_last_error_message();
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, 0, kNq, kRope, nullptr)) << kl_last_error_message();
    EXPECT_EQ(0u, h.rb.count) << "no tokens: an empty launch";
    // The other dimensions are still checked.
    kl_tensor_map wide;
    ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_out_map_encode(&h.k, &wide, at(kOut), kRope, kNq + 1, kTokens, kRope,
                                                                   kRope * (kNq + 1)));
    const std::string msg = RefusedBoth(h, &q, &wide, 0, kNq, kRope);
    EXPECT_NE(std::string::npos, msg.find("tensor map out_map: extent1 = 17, but the launch needs exactly nq = 16")) << msg;
}

// Maps of exactly the launch's extents launch; q_map larger in each of its
// at-least dimensions (more rope elements, heads or tokens) launches too.
TEST(MlaTmaLaunch, MapsExactlyRightOrLargerInAtLeastDimensionsAreAccepted) {
    Harness h;
    ASSERT_EQ(KL_SUCCESS, h.status) << kl_last_error_message();
    kl_tensor_map q, out;
    ASSERT_EQ(KL_SUCCESS, encode_q(h, &q));
    ASSERT_EQ(KL_SUCCESS, encode_out(h, &out));
    EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &q, &out, kTokens, kNq, kRope, nullptr)) << kl_last_error_message();
    const uint64_t larger[][3] = {{kRope + 64, kNq, kTokens}, {kRope, kNq + 1, kTokens}, {kRope, kNq, 4 * kTokens}};
    for (const auto &e : larger) {
        kl_tensor_map big;
        ASSERT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_q_map_encode(&h.k, &big, at(kQ), e[0], e[1], e[2], kHd, kQdim))
            << kl_last_error_message();
        EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma_check(&h.k, &big, &out, kTokens, kNq, kRope))
            << kl_last_error_message();
        EXPECT_EQ(KL_SUCCESS, kl_mla_q_rope_extract_tma(&h.k, &big, &out, kTokens, kNq, kRope, nullptr))
            << kl_last_error_message();
    }
    EXPECT_EQ(4u, h.rb.count);
}

TEST(MlaTmaLaunch, RefusesAModuleWhoseLoadedImageIsNotSm90a) {
    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_record_backend_init(&rb, recs, 1);
    rb.device_arch = "sm_90";
    ASSERT_EQ(KL_SUCCESS, kl_record_backend_load_variant(&rb, kl_mla_prefill_variant_info, "mistral_small_4", &mod));
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, kl_mla_q_rope_extract_tma_get(&k, &mod));
    kl_module_unload(&mod);
}

}  // namespace
