// GPU test of kl_mla_q_rope_extract_tma: tensor maps encoded by the real
// driver (cuTensorMapEncodeTiled, through the generated builders), one
// tensor load and one tensor store per block, bit exact against the
// contract's CPU reference (kernel 1, ../shared/notes/kernel-contract.md;
// tests/mla_prefill/mla_data_movement_reference.h) in both variants'
// fatbins. Inputs are random 16-bit patterns (never 0xFFFF, the poison
// every output starts with); the whole output allocation, guards included,
// is compared, so a store the engine failed to clip at a ragged edge shows.
//
// Also: what the driver itself answers for requests the builders refuse
// (every one is refused before the driver sees it; the driver's verdict on
// the same request, called directly, is printed: refused, or accepted where
// klaunch's check stands in for a fault or a misread the driver would allow).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/mla_prefill_fatbins.h"
#include "klaunch/mla_prefill.h"
#include "tests/mla_prefill/mla_data_movement_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
using namespace mla_dm_ref;

struct Variant {
    const char *name;
    const unsigned char *image;
    size_t size;
};
const Variant kVariants[] = {
    {"mistral_small_4", kl_fatbin_mla_prefill_mistral_small_4, kl_fatbin_mla_prefill_mistral_small_4_size},
    {"deepseek_v4_flash", kl_fatbin_mla_prefill_deepseek_v4_flash, kl_fatbin_mla_prefill_deepseek_v4_flash_size},
};

constexpr size_t kGuard = 8;  // elements each side: 16 bytes, keeps the 16-byte alignment the maps need

std::vector<kl_bf16> random_bits(size_t n, std::mt19937 &gen) {
    std::uniform_int_distribution<uint32_t> dist(0, 0xFFFE);
    std::vector<kl_bf16> out(n);
    for (kl_bf16 &v : out) v = bits(static_cast<uint16_t>(dist(gen)));
    return out;
}

class MlaTma : public ::testing::TestWithParam<int> {
  protected:
    void SetUp() override {
        KL_TEST_REQUIRE_GPU();
        const Variant &v = kVariants[GetParam()];
        ASSERT_GT(v.size, 0u) << v.name << " fatbin is empty (built without a CUDA toolkit)";
        mod_.reset(new kl_test::Module(v.image, v.size));
        const kl_status st = kl_mla_q_rope_extract_tma_get(&k_, mod_->get());
        if (st == KL_ERROR_UNSUPPORTED) GTEST_SKIP() << "not an sm_90a device: " << kl_last_error_message();
        ASSERT_EQ(KL_SUCCESS, st) << kl_last_error_message();
    }
    std::unique_ptr<kl_test::Module> mod_;
    kl_kernel k_;
};

std::string variant_name(const ::testing::TestParamInfo<int> &info) { return kVariants[info.param].name; }
INSTANTIATE_TEST_SUITE_P(Variants, MlaTma, ::testing::Range(0, 2), variant_name);

// num_tokens, nq, nope, rope, q_dim_pad, misalign (0: the maps need 16-byte alignment)
const RopeCase kCases[] = {
    {1, 1, 128, 64, 0, 0},       // one token, one head: a box mostly outside the tensor
    {17, 9, 128, 64, 8, 0},      // ragged in heads and tokens, padded rows
    {16, 8, 0, 64, 0, 0},        // exactly one box, no nope part
    {3, 16, 128, 96, 0, 0},      // rope past one box: a second, half-empty box in z
    {5, 3, 8, 24, 16, 0},        // rope shorter than the box
    {4096, 128, 128, 64, 0, 0},  // the models' shape at prefill length
    {1001, 16, 128, 64, 24, 0},  // odd length, padded rows
};

TEST_P(MlaTma, CopiesEachHeadsRopeSliceThroughTheCopyEngine) {
    uint32_t seed = 700 + GetParam();
    for (const RopeCase &c : kCases) {
        SCOPED_TRACE(describe(c) + ", seed " + std::to_string(seed));
        std::mt19937 gen(seed++);
        const size_t nq_elems = (size_t)c.num_tokens * c.q_dim(), n_out = (size_t)c.num_tokens * c.nq * c.rope;
        std::vector<kl_bf16> q_host = random_bits(nq_elems + 2 * kGuard, gen);
        DeviceBuffer<kl_bf16> q(q_host), out(n_out + 2 * kGuard);
        out.poison();
        std::vector<kl_bf16> want(n_out + 2 * kGuard, bits(0xFFFF));
        ref_rope_extract(q_host.data() + kGuard, want.data() + kGuard, c);

        kl_tensor_map qm, om;
        KL_ASSERT_OK(kl_mla_q_rope_extract_tma_q_map_encode(&k_, &qm, q.get() + kGuard + c.nope, c.rope, c.nq,
                                                            c.num_tokens, c.hd(), c.q_dim()));
        KL_ASSERT_OK(kl_mla_q_rope_extract_tma_out_map_encode(&k_, &om, out.get() + kGuard, c.rope, c.nq,
                                                              c.num_tokens, c.rope, (uint64_t)c.nq * c.rope));
        KL_ASSERT_OK(kl_mla_q_rope_extract_tma(&k_, &qm, &om, c.num_tokens, c.nq, c.rope, nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(kl_test::bitwise_equal("q_rope_out (with guards)", out.download(), want));
        EXPECT_TRUE(kl_test::bitwise_equal("q_full (input)", q.download(), q_host));
    }
}

// The same requests the builder refuses, given straight to the driver.
TEST_P(MlaTma, BuilderRefusalsAgainstTheDriversOwnAnswer) {
    kl_cuda_backend *cb = kl_test::require_gpu();
    typedef int (*EncodeFn)(void *, int, unsigned, void *, const unsigned long long *, const unsigned long long *,
                            const unsigned *, const unsigned *, int, int, int, int);
    EncodeFn raw = reinterpret_cast<EncodeFn>(kl_cuda_backend_symbol(cb, "cuTensorMapEncodeTiled"));
    ASSERT_NE(nullptr, raw);
    DeviceBuffer<kl_bf16> buf(1 << 20);
    struct Case {
        const char *what;
        kl_tensor_map_request r;
    };
    kl_tensor_map_request good;
    kl__tensor_map_request_clear(&good);
    good.dtype = KL_TENSOR_MAP_BF16;
    good.rank = 2;
    good.address = buf.get();
    good.extent[0] = 512;
    good.extent[1] = 512;
    good.stride[0] = 1024;
    good.box[0] = 64;
    good.box[1] = 8;
    good.element_stride[0] = good.element_stride[1] = 1;
    good.swizzle = KL_TENSOR_MAP_SWIZZLE_128B;
    std::vector<Case> cases(9, Case{"", good});
    cases[0].what = "address 8 bytes past 16";
    cases[0].r.address = reinterpret_cast<const char *>(buf.get()) + 8;
    cases[1].what = "stride 1032 bytes (not a multiple of 16)";
    cases[1].r.stride[0] = 1032;
    cases[2].what = "stride 2^40 bytes";
    cases[2].r.stride[0] = 1ull << 40;
    cases[3].what = "extent 2^32 + 1";
    cases[3].r.extent[1] = (1ull << 32) + 1;
    cases[4].what = "box 257";
    cases[4].r.box[1] = 257;
    cases[5].what = "inner box 144 bytes over the 128-byte swizzle";
    cases[5].r.box[0] = 72;
    cases[6].what = "inner box 24 bytes (not a multiple of 16)";
    cases[6].r.box[0] = 12;
    cases[6].r.swizzle = KL_TENSOR_MAP_SWIZZLE_NONE;
    cases[7].what = "NaN fill of u8";
    cases[7].r.dtype = KL_TENSOR_MAP_U8;
    cases[7].r.box[0] = 128;
    cases[7].r.oob_fill = KL_TENSOR_MAP_FILL_NAN;
    cases[8].what = "extent 0";
    cases[8].r.extent[0] = 0;
    int driver_refused = 0, driver_accepted = 0;
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        kl_tensor_map m;
        EXPECT_EQ(KL_ERROR_TENSOR_MAP, kl_tensor_map_encode_tiled(&cb->base, &c.r, &m)) << kl_last_error_message();
        alignas(128) unsigned char opaque[128];
        unsigned long long ext[5], str[5];
        unsigned box[5], es[5];
        for (int i = 0; i < 5; ++i) {
            ext[i] = c.r.extent[i];
            str[i] = i < 4 ? c.r.stride[i] : 0;
            box[i] = c.r.box[i];
            es[i] = c.r.element_stride[i];
        }
        const int rc = raw(opaque, (int)c.r.dtype, c.r.rank, const_cast<void *>(c.r.address), ext, str, box, es,
                           (int)c.r.interleave, (int)c.r.swizzle, (int)c.r.l2_promotion, (int)c.r.oob_fill);
        std::printf("driver on a builder-refused map (%s): %s (CUresult %d)\n", c.what,
                    rc == 0 ? "ACCEPTED: klaunch refuses what the driver would encode" : "refused", rc);
        (rc == 0 ? driver_accepted : driver_refused)++;
    }
    std::printf("builder refused %zu, the driver refused %d of them and accepted %d\n", cases.size(), driver_refused,
                driver_accepted);
    RecordProperty("driver_refused", driver_refused);
    RecordProperty("driver_accepted", driver_accepted);
    // The good request: both encode it.
    kl_tensor_map m;
    KL_EXPECT_OK(kl_tensor_map_encode_tiled(&cb->base, &good, &m));
}

}  // namespace
