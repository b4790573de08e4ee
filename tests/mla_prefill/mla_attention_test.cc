// GPU tests of the MLA prefill family's compute kernels against float64 CPU
// references written from ../shared/notes/kernel-contract.md
// (mla_reference.h):
//   5 mla_fused_prefill   7 grouped_gemm_mla   8 mla_prefill_attention_320
// in both variants' fatbins (mistral_small_4: MLA_HDIM 320, V cache rope
// part zeros; deepseek_v4_flash: MLA_HDIM 576, V cache repeats k_rope),
// launched through the generated launchers at the seed's geometry.
//
// Inputs are fresh random bf16 values per case (a fixed seed per case, so a
// failure reproduces). Every output buffer starts as poison (0xFFFF, a bf16
// NaN) and has guard elements on both sides: after the launch each element
// the contract names must be within atol + rtol*|ref| of the reference with
// ||out - ref|| / ||ref|| < 1e-2 (NaN never passes), and every other element
// (guards, the columns of C outside the groups) must still be poison. The
// cache rows the fused prefill writes are compared bit for bit, also for
// inputs that are arbitrary bit patterns (NaN, inf, -0, subnormals).
//
// Sizes: sequence lengths 1, 3, 17, 200; head counts 1, 3, 16; causal and
// not; model dimensions (nope 128, rope 64, v_dim 128, kv_lora 256 or 512)
// and odd ones (not multiples of 8, strides padded, buffers off a 16-byte
// boundary) so the kernels' element-wise fallbacks run too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/mla_prefill_fatbins.h"
#include "klaunch/mla_prefill.h"
#include "tests/mla_prefill/mla_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;

// ---- variants, as the contract's table states them -------------------------

struct Variant {
    const char *name;
    const unsigned char *image;
    size_t size;
    uint32_t mla_hdim;  // kv_lora + rope of the model
    uint32_t kv_lora;
    bool v_has_rope;  // V cache row is [kv_latent | k_rope] (else [kv_latent | 0])
};

const Variant &variant(int i) {
    static const Variant kVariants[] = {
        {"mistral_small_4", kl_fatbin_mla_prefill_mistral_small_4, kl_fatbin_mla_prefill_mistral_small_4_size, 320,
         256, false},
        {"deepseek_v4_flash", kl_fatbin_mla_prefill_deepseek_v4_flash,
         kl_fatbin_mla_prefill_deepseek_v4_flash_size, 576, 512, true},
    };
    return kVariants[i];
}
constexpr int kNumVariants = 2;

constexpr uint32_t kNope = 128, kRope = 64, kVDim = 128;  // the contract's typical per-head widths
constexpr double kMaxRelNorm = 1e-2;                       // bf16 outputs (contract, "Accuracy")
constexpr double kRtol = 1e-2;

// ---- host data and device placement ----------------------------------------

constexpr uint16_t kPoison = 0xFFFF;  // what DeviceBuffer::poison() writes (bytes 0xFF)
constexpr size_t kGuard = 8;          // guard elements on each side: 16 bytes, keeps alignment

std::vector<kl_bf16> random_bf16(size_t n, uint32_t seed, float scale = 1.0f) {
    return kl_test::to_bf16(kl_test::random_uniform(n, seed, -scale, scale));
}

// Any 16-bit pattern but the poison.
std::vector<kl_bf16> random_bits(size_t n, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<uint32_t> dist(0, 0xFFFE);
    std::vector<kl_bf16> out(n);
    for (kl_bf16 &v : out) v.bits = static_cast<uint16_t>(dist(gen));
    return out;
}

std::vector<uint16_t> bits_of(const std::vector<kl_bf16> &v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = v[i].bits;
    return out;
}

// `count` elements a kernel sees, with kGuard poison elements after them and
// kGuard + `misalign` before (misalign moves the start off a 16-byte
// boundary).
struct Region {
    Region(size_t count, size_t misalign) : count(count), front(kGuard + misalign), buf(front + count + kGuard) {
        buf.poison();
    }
    // An input: the data between poison guards.
    Region(const std::vector<kl_bf16> &data, size_t misalign) : Region(data.size(), misalign) {
        std::vector<kl_bf16> host(buf.size());
        for (kl_bf16 &v : host) v.bits = kPoison;
        std::memcpy(host.data() + front, data.data(), data.size() * sizeof(kl_bf16));
        buf.upload(host);
    }
    kl_bf16 *ptr() const { return buf.get() + front; }

    // The kernel-visible elements after a launch; `guards_ok` says whether
    // every element outside them is still poison.
    std::vector<kl_bf16> read(bool *guards_ok) const {
        const std::vector<kl_bf16> all = buf.download();
        *guards_ok = true;
        for (size_t i = 0; i < all.size(); i++)
            if ((i < front || i >= front + count) && all[i].bits != kPoison) *guards_ok = false;
        return std::vector<kl_bf16>(all.begin() + static_cast<std::ptrdiff_t>(front),
                                    all.begin() + static_cast<std::ptrdiff_t>(front + count));
    }

    size_t count, front;
    DeviceBuffer<kl_bf16> buf;
};

double rms(const std::vector<double> &v) {
    double s = 0.0;
    for (double x : v) s += x * x;
    return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// Per element atol + rtol*|ref| with atol 1% of the reference's RMS (outputs
// near zero carry the error of their larger neighbours), and the contract's
// relative-norm bound.
::testing::AssertionResult close_to_reference(const char *what, const std::vector<kl_bf16> &out,
                                              const std::vector<double> &ref) {
    return kl_test::all_close(what, out, ref, 1e-2 * rms(ref), kRtol, kMaxRelNorm);
}

// ---- fixture: a GPU and one variant's module ---------------------------------

class MlaCompute : public kl_test::GpuTest, public ::testing::WithParamInterface<int> {
  protected:
    void SetUp() override {
        kl_test::GpuTest::SetUp();
        if (IsSkipped()) return;
        const Variant &v = variant(GetParam());
        ASSERT_GT(v.size, 0u) << "the " << v.name << " fatbin is empty: built without a CUDA toolkit";
        module_.reset(new kl_test::Module(v.image, v.size));
        int64_t hdim = 0, v_has_rope = -1;
        ASSERT_TRUE(kl_module_const(*module_, "MLA_HDIM", &hdim));
        ASSERT_TRUE(kl_module_const(*module_, "MLA_V_HAS_ROPE", &v_has_rope));
        ASSERT_EQ(hdim, static_cast<int64_t>(v.mla_hdim)) << v.name;
        ASSERT_EQ(v_has_rope, v.v_has_rope ? 1 : 0) << v.name;
    }
    const Variant &var() const { return variant(GetParam()); }
    const kl_module *module() const { return *module_; }

  private:
    std::unique_ptr<kl_test::Module> module_;
};

std::string variant_name(const ::testing::TestParamInfo<int> &info) { return variant(info.param).name; }

// ---- kernel 8: mla_prefill_attention_320 ----------------------------------------

struct AttnCase {
    uint32_t batch, seq_len, num_q_heads, num_kv_heads;
    bool causal;
    size_t misalign;
};

std::ostream &operator<<(std::ostream &os, const AttnCase &c) {
    return os << "batch " << c.batch << ", seq_len " << c.seq_len << ", num_q_heads " << c.num_q_heads
              << ", num_kv_heads " << c.num_kv_heads << ", causal " << c.causal << ", misalign " << c.misalign;
}

using MlaPrefillAttention = MlaCompute;

TEST_P(MlaPrefillAttention, MatchesFloat64Reference) {
    kl_kernel k;
    KL_ASSERT_OK(kl_mla_prefill_attention_320_get(&k, module()));
    const uint32_t d = var().mla_hdim;
    const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(kNope + kRope));

    std::vector<AttnCase> cases;
    for (uint32_t s : {1u, 3u, 17u, 200u})
        for (uint32_t h : {1u, 3u, 16u})
            for (bool causal : {false, true}) cases.push_back({1, s, h, 1, causal, 0});
    // Several KV heads (query head h reads KV head h / 4), batches, and
    // buffers off a 16-byte boundary (the element-wise load path).
    cases.push_back({2, 33, 16, 4, true, 0});
    cases.push_back({2, 33, 16, 4, false, 0});
    cases.push_back({1, 40, 6, 2, true, 1});
    cases.push_back({3, 5, 3, 3, false, 3});

    uint32_t seed = 1000u + 100u * static_cast<uint32_t>(GetParam());
    for (const AttnCase &c : cases) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        const size_t q_count = size_t{c.batch} * c.seq_len * c.num_q_heads * d;
        const size_t kv_count = size_t{c.batch} * c.seq_len * c.num_kv_heads * d;
        const std::vector<kl_bf16> q = random_bf16(q_count, seed++), kk = random_bf16(kv_count, seed++),
                                   v = random_bf16(kv_count, seed++);
        Region dq(q, c.misalign), dk(kk, c.misalign), dv(v, c.misalign), dout(q_count, c.misalign);

        KL_ASSERT_OK(kl_mla_prefill_attention_320(&k, dq.ptr(), dk.ptr(), dv.ptr(), dout.ptr(), c.seq_len, c.batch,
                                                  c.num_q_heads, c.num_kv_heads, d,
                                                  static_cast<float>(inv_sqrt_d), c.causal, nullptr));
        kl_test::synchronize();

        const std::vector<double> ref = mla_ref::attention(bits_of(q), bits_of(kk), bits_of(v), c.batch, c.seq_len,
                                                           c.num_q_heads, c.num_kv_heads, d, inv_sqrt_d, c.causal);
        bool guards_ok = false;
        const std::vector<kl_bf16> out = dout.read(&guards_ok);
        EXPECT_TRUE(guards_ok) << "an element outside output changed";
        EXPECT_TRUE(close_to_reference("output", out, ref));
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaPrefillAttention, ::testing::Range(0, kNumVariants), variant_name);

// ---- kernel 7: grouped_gemm_mla -------------------------------------------------

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // a_stride = g*k_g + a_pad, c_stride = g*n_g + c_pad
    size_t misalign;
    uint32_t a_stride() const { return g * k_g + a_pad; }
    uint32_t c_stride() const { return g * n_g + c_pad; }
};

std::ostream &operator<<(std::ostream &os, const GemmCase &c) {
    return os << "m " << c.m << ", g " << c.g << ", k_g " << c.k_g << ", n_g " << c.n_g << ", a_stride "
              << c.a_stride() << ", c_stride " << c.c_stride() << ", misalign " << c.misalign;
}

using GroupedGemmMla = MlaCompute;

TEST_P(GroupedGemmMla, MatchesFloat64Reference) {
    kl_kernel k;
    KL_ASSERT_OK(kl_grouped_gemm_mla_get(&k, module()));
    const uint32_t kv_lora = var().kv_lora;

    std::vector<GemmCase> cases;
    for (uint32_t m : {1u, 3u, 17u, 200u})
        for (uint32_t g : {1u, 3u, 16u}) {
            cases.push_back({m, g, kNope, kv_lora, 0, 0, 0});  // Q absorption: q_nope @ w_uk
            cases.push_back({m, g, kv_lora, kVDim, 0, 0, 0});  // V extraction: o_lat @ w_uv^T
        }
    // Odd widths, padded strides (C's pad columns must stay untouched), a
    // start off a 16-byte boundary, and k longer than the 256 threads.
    cases.push_back({7, 3, 37, 6, 9, 2, 0});
    cases.push_back({5, 2, 64, 9, 8, 1, 1});
    cases.push_back({3, 2, 2000, 5, 0, 0, 0});
    cases.push_back({17, 1, 24, 1, 0, 3, 0});

    uint32_t seed = 2000u + 100u * static_cast<uint32_t>(GetParam());
    for (const GemmCase &c : cases) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        const std::vector<kl_bf16> a = random_bf16(size_t{c.m} * c.a_stride(), seed++),
                                   b = random_bf16(size_t{c.g} * c.n_g * c.k_g, seed++);
        Region da(a, c.misalign), db(b, c.misalign), dc(size_t{c.m} * c.c_stride(), c.misalign);

        KL_ASSERT_OK(kl_grouped_gemm_mla(&k, da.ptr(), db.ptr(), dc.ptr(), c.m, c.g, c.k_g, c.n_g, c.a_stride(),
                                         c.c_stride(), nullptr));
        kl_test::synchronize();

        const std::vector<double> ref =
            mla_ref::grouped_gemm(bits_of(a), bits_of(b), c.m, c.g, c.k_g, c.n_g, c.a_stride());
        bool guards_ok = false;
        const std::vector<kl_bf16> all = dc.read(&guards_ok);
        EXPECT_TRUE(guards_ok) << "an element outside C changed";
        // The contract's columns, and the row padding, which must stay poison.
        std::vector<kl_bf16> out;
        size_t pad_changed = 0;
        for (size_t i = 0; i < c.m; i++)
            for (size_t j = 0; j < c.c_stride(); j++) {
                const kl_bf16 x = all[i * c.c_stride() + j];
                if (j < size_t{c.g} * c.n_g)
                    out.push_back(x);
                else if (x.bits != kPoison)
                    pad_changed++;
            }
        EXPECT_EQ(pad_changed, 0u) << "columns past g*n_g of C's rows were written";
        EXPECT_TRUE(close_to_reference("C", out, ref));
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, GroupedGemmMla, ::testing::Range(0, kNumVariants), variant_name);

// ---- kernel 5: mla_fused_prefill --------------------------------------------------

struct FusedCase {
    mla_ref::FusedShape shape;  // seq, nq, nope, rope, kv_lora, v_dim
    size_t misalign;
};

std::ostream &operator<<(std::ostream &os, const FusedCase &c) {
    const mla_ref::FusedShape &s = c.shape;
    return os << "seq_len " << s.seq << ", nq " << s.nq << ", nope " << s.nope << ", rope " << s.rope << ", kv_lora "
              << s.kv_lora << ", v_dim " << s.v_dim << ", misalign " << c.misalign;
}

struct FusedInputs {
    std::vector<kl_bf16> q_full, q_rope, kv_latent, k_rope, w_uk, w_uv;
};

// Values: activations in [-1, 1); the two weights scaled by 1/sqrt(fan-in)
// so scores and outputs stay O(1) as in a model.
FusedInputs fused_values(const mla_ref::FusedShape &s, uint32_t *seed) {
    FusedInputs in;
    in.q_full = random_bf16(s.seq * s.nq * s.hd(), (*seed)++);
    in.q_rope = random_bf16(s.seq * s.nq * s.rope, (*seed)++);
    in.kv_latent = random_bf16(s.seq * s.kv_lora, (*seed)++);
    in.k_rope = random_bf16(s.seq * s.rope, (*seed)++);
    in.w_uk = random_bf16(s.nq * s.nope * s.kv_lora, (*seed)++, 1.0f / std::sqrt(static_cast<float>(s.nope)));
    in.w_uv = random_bf16(s.nq * s.v_dim * s.kv_lora, (*seed)++, 1.0f / std::sqrt(static_cast<float>(s.kv_lora)));
    return in;
}

struct FusedOutputs {
    std::vector<kl_bf16> v_out, k_cache, v_cache;
    bool guards_ok = false;
};

FusedOutputs run_fused(const kl_kernel *k, const FusedCase &c, const FusedInputs &in, double inv_sqrt_d) {
    const mla_ref::FusedShape &s = c.shape;
    Region q_full(in.q_full, c.misalign), q_rope(in.q_rope, c.misalign), kv_latent(in.kv_latent, c.misalign),
        k_rope(in.k_rope, c.misalign), w_uk(in.w_uk, c.misalign), w_uv(in.w_uv, c.misalign);
    Region v_out(s.seq * s.nq * s.v_dim, c.misalign), k_cache(s.seq * s.cache_dim(), c.misalign),
        v_cache(s.seq * s.cache_dim(), c.misalign);
    FusedOutputs out;
    const kl_status st = kl_mla_fused_prefill(
        k, q_full.ptr(), q_rope.ptr(), kv_latent.ptr(), k_rope.ptr(), w_uk.ptr(), w_uv.ptr(), v_out.ptr(),
        k_cache.ptr(), v_cache.ptr(), static_cast<uint32_t>(s.seq), static_cast<uint32_t>(s.nq),
        static_cast<uint32_t>(s.nope), static_cast<uint32_t>(s.rope), static_cast<uint32_t>(s.kv_lora),
        static_cast<uint32_t>(s.v_dim), static_cast<uint32_t>(s.hd()), 1u, static_cast<float>(inv_sqrt_d), nullptr);
    kl_test::check(st, "kl_mla_fused_prefill");
    kl_test::synchronize();
    bool g1 = false, g2 = false, g3 = false;
    out.v_out = v_out.read(&g1);
    out.k_cache = k_cache.read(&g2);
    out.v_cache = v_cache.read(&g3);
    out.guards_ok = g1 && g2 && g3;
    return out;
}

// Kernel 4's rows, which kernel 5 writes too, as bf16 bit patterns.
void expected_cache(const mla_ref::FusedShape &s, const FusedInputs &in, bool v_has_rope,
                    std::vector<kl_bf16> *k_cache, std::vector<kl_bf16> *v_cache) {
    std::vector<uint16_t> kc, vc;
    mla_ref::cache_rows(s, bits_of(in.kv_latent), bits_of(in.k_rope), v_has_rope, &kc, &vc);
    k_cache->resize(kc.size());
    v_cache->resize(vc.size());
    for (size_t i = 0; i < kc.size(); i++) (*k_cache)[i].bits = kc[i];
    for (size_t i = 0; i < vc.size(); i++) (*v_cache)[i].bits = vc[i];
}

using MlaFusedPrefill = MlaCompute;

TEST_P(MlaFusedPrefill, MatchesFloat64Reference) {
    kl_kernel k;
    KL_ASSERT_OK(kl_mla_fused_prefill_get(&k, module()));
    const size_t kv_lora = var().kv_lora;

    std::vector<FusedCase> cases;
    for (size_t s : {1u, 3u, 17u, 200u})
        for (size_t h : {1u, 3u, 16u}) cases.push_back({{s, h, kNope, kRope, kv_lora, kVDim}, 0});
    // Widths that are not multiples of 8 (element-wise loads), buffers off a
    // 16-byte boundary, a rope wider than one 8-column chunk per lane
    // (rope > 256), and the largest kv_lora the spec allows.
    cases.push_back({{19, 3, 40, 24, 200, 50}, 0});
    cases.push_back({{9, 2, kNope, kRope, 256, kVDim}, 1});
    cases.push_back({{5, 2, 16, 300, 64, 8}, 0});
    cases.push_back({{33, 2, 24, 8, 512, 16}, 0});

    uint32_t seed = 3000u + 100u * static_cast<uint32_t>(GetParam());
    for (const FusedCase &c : cases) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        const mla_ref::FusedShape &s = c.shape;
        const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(s.hd()));
        const FusedInputs in = fused_values(s, &seed);
        const FusedOutputs out = run_fused(&k, c, in, inv_sqrt_d);

        const std::vector<double> ref = mla_ref::fused_prefill(s, bits_of(in.q_full), bits_of(in.q_rope),
                                                               bits_of(in.kv_latent), bits_of(in.k_rope),
                                                               bits_of(in.w_uk), bits_of(in.w_uv), inv_sqrt_d);
        EXPECT_TRUE(out.guards_ok) << "an element outside v_out, k_cache_out or v_cache_out changed";
        EXPECT_TRUE(close_to_reference("v_out", out.v_out, ref));
        std::vector<kl_bf16> k_cache, v_cache;
        expected_cache(s, in, var().v_has_rope, &k_cache, &v_cache);
        EXPECT_TRUE(kl_test::bitwise_equal("k_cache_out", out.k_cache, k_cache));
        EXPECT_TRUE(kl_test::bitwise_equal("v_cache_out", out.v_cache, v_cache));
    }
}

// The cache rows are copies: bit patterns a float round trip would change
// (NaN payloads, -0, subnormals, inf) must arrive unchanged. v_out is
// meaningless for such inputs and not checked.
TEST_P(MlaFusedPrefill, CopiesCacheRowsBitExactly) {
    kl_kernel k;
    KL_ASSERT_OK(kl_mla_fused_prefill_get(&k, module()));
    uint32_t seed = 4000u + 100u * static_cast<uint32_t>(GetParam());
    for (const FusedCase &c : {FusedCase{{17, 2, kNope, kRope, var().kv_lora, kVDim}, 0},
                               FusedCase{{3, 1, 8, 13, 37, 8}, 1}}) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        const mla_ref::FusedShape &s = c.shape;
        FusedInputs in = fused_values(s, &seed);
        in.kv_latent = random_bits(in.kv_latent.size(), seed++);
        in.k_rope = random_bits(in.k_rope.size(), seed++);
        const FusedOutputs out = run_fused(&k, c, in, 0.125);
        EXPECT_TRUE(out.guards_ok) << "an element outside v_out, k_cache_out or v_cache_out changed";
        std::vector<kl_bf16> k_cache, v_cache;
        expected_cache(s, in, var().v_has_rope, &k_cache, &v_cache);
        EXPECT_TRUE(kl_test::bitwise_equal("k_cache_out", out.k_cache, k_cache));
        EXPECT_TRUE(kl_test::bitwise_equal("v_cache_out", out.v_cache, v_cache));
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaFusedPrefill, ::testing::Range(0, kNumVariants), variant_name);

}  // namespace
