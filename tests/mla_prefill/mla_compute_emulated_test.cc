// The MLA prefill family's scalar compute kernels from their own source on
// the CPU emulator (tests/emu, docs/EMULATOR.md), through the generated
// launchers, in both variants, against the float64 references of the GPU
// test (tests/mla_prefill/mla_attention_test.cc, mla_reference.h):
//   mla_prefill_attention_320 (entry mla_prefill_attn_320), kernel 8
//   grouped_gemm_mla, kernel 7
//   mla_fused_prefill, kernel 5 (and its cache rows, bit exact)
// Fresh random inputs, odd sizes, several KV heads, causal and not, padded
// strides (pad columns must stay poison), buffers off a 16-byte boundary,
// outputs poisoned with guards. Tolerance as on the GPU: every element within
// 1% of the reference's RMS + 1e-2 |ref|, relative norm error < 1e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_reference.h"

namespace {

using emu::Access;

constexpr uint32_t kNope = 128, kRope = 64, kVDim = 128;  // the contract's per-head widths

class MlaComputeEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    uint32_t hdim() { return (uint32_t)emu_test::module_const(mod(), "MLA_HDIM"); }
    bool v_has_rope() { return emu_test::module_const(mod(), "MLA_V_HAS_ROPE") != 0; }
};

std::unique_ptr<emu::Buffer<kl_bf16>> input(const std::vector<uint16_t> &bits, const char *name, size_t lead) {
    std::unique_ptr<emu::Buffer<kl_bf16>> b(new emu::Buffer<kl_bf16>(bits.size(), Access::kRead, name, 8, lead));
    for (size_t i = 0; i < bits.size(); ++i) (*b)[i].bits = bits[i];
    return b;
}

double rms(const std::vector<double> &v) {
    double s = 0.0;
    for (double x : v) s += x * x;
    return v.empty() ? 0.0 : std::sqrt(s / (double)v.size());
}

::testing::AssertionResult close(const char *what, const std::function<double(size_t)> &got,
                                 const std::vector<double> &ref) {
    return emu_test::close(what, got, ref, 1e-2 * rms(ref), 1e-2, 1e-2,
                           [](size_t i) { return "[" + std::to_string(i) + "]"; });
}

// ---- kernel 8 ----------------------------------------------------------------------

struct AttnCase {
    uint32_t batch, seq, hq, hkv;
    bool causal;
    size_t lead;
};

TEST_P(MlaComputeEmulated, PrefillAttention320MatchesFloat64Reference) {
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_prefill_attention_320_get(&k, mod()));
    const uint32_t d = hdim();
    const double inv_sqrt_d = 1.0 / std::sqrt((double)(kNope + kRope));
    uint32_t seed = 1000;
    for (const AttnCase &c : {AttnCase{1, 1, 1, 1, true, 0}, AttnCase{1, 3, 3, 1, false, 0},
                              AttnCase{1, 17, 2, 1, true, 0}, AttnCase{2, 19, 4, 2, false, 0},
                              AttnCase{1, 9, 6, 2, true, 1}, AttnCase{3, 5, 3, 3, false, 3}}) {
        SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " seq " << c.seq << " heads " << c.hq << "/"
                                          << c.hkv << (c.causal ? " causal" : " full") << " misalign " << c.lead);
        const size_t nq = (size_t)c.batch * c.seq * c.hq * d, nkv = (size_t)c.batch * c.seq * c.hkv * d;
        const std::vector<uint16_t> qh = emu_test::random_bf16(nq, seed++, 1.0f),
                                    kh = emu_test::random_bf16(nkv, seed++, 1.0f),
                                    vh = emu_test::random_bf16(nkv, seed++, 1.0f);
        auto q = input(qh, "q", c.lead), kb = input(kh, "k", c.lead), vb = input(vh, "v", c.lead);
        emu::Buffer<kl_bf16> out(nq, Access::kWrite, "output", 8, c.lead);
        KL_EMU_ASSERT_OK(kl_mla_prefill_attention_320(&k, q->data(), kb->data(), vb->data(), out.data(), c.seq,
                                                      c.batch, c.hq, c.hkv, d, (float)inv_sqrt_d, c.causal, nullptr));
        const std::vector<double> ref =
            mla_ref::attention(qh, kh, vh, c.batch, c.seq, c.hq, c.hkv, d, inv_sqrt_d, c.causal);
        EXPECT_TRUE(close("output", [&](size_t i) { return emu_test::bf16(out[i].bits); }, ref));
        EXPECT_TRUE(out.guards_intact());
        // The extents are tight (contract 8): every query row is read and
        // every output row written; the last position's K and V rows of the
        // last KV head are read (by every query row when full, by the last
        // position's rows when causal).
        EXPECT_TRUE(emu_test::extents_reached("mla_prefill_attention_320"));
    }
}

// ---- kernel 7 ----------------------------------------------------------------------

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;
    size_t lead;
};

TEST_P(MlaComputeEmulated, GroupedGemmMlaMatchesFloat64Reference) {
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_grouped_gemm_mla_get(&k, mod()));
    const uint32_t kv_lora = hdim() - kRope;
    uint32_t seed = 2000;
    for (const GemmCase &c : {GemmCase{1, 1, kNope, kv_lora, 0, 0, 0}, GemmCase{3, 2, kv_lora, kVDim, 0, 0, 0},
                              GemmCase{7, 3, 37, 6, 9, 2, 0}, GemmCase{5, 2, 64, 9, 8, 1, 1},
                              GemmCase{3, 2, 700, 5, 0, 0, 0}, GemmCase{17, 1, 24, 1, 0, 3, 0}}) {
        SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                          << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " misalign " << c.lead);
        const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
        const std::vector<uint16_t> ah = emu_test::random_bf16((size_t)c.m * a_stride, seed++, 1.0f),
                                    bh = emu_test::random_bf16((size_t)c.g * c.n_g * c.k_g, seed++, 1.0f);
        auto a = input(ah, "a", c.lead), b = input(bh, "b", c.lead);
        emu::Buffer<kl_bf16> out((size_t)c.m * c_stride, Access::kWrite, "c", 8, c.lead);
        KL_EMU_ASSERT_OK(kl_grouped_gemm_mla(&k, a->data(), b->data(), out.data(), c.m, c.g, c.k_g, c.n_g, a_stride,
                                             c_stride, nullptr));
        const std::vector<double> ref = mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride);
        const size_t w = (size_t)c.g * c.n_g;
        size_t pad_changed = 0;
        for (size_t i = 0; i < c.m; ++i)
            for (size_t j = w; j < c_stride; ++j) pad_changed += out[i * c_stride + j].bits != 0xFFFF;
        EXPECT_EQ(pad_changed, 0u) << "columns past g*n_g of C's rows were written";
        EXPECT_TRUE(close("C", [&](size_t i) { return emu_test::bf16(out[(i / w) * c_stride + i % w].bits); }, ref));
        EXPECT_TRUE(out.guards_intact());
        // The extents are tight (contract 7): A's last row up to g * k_g
        // and C's last row up to g * n_g (not their padding), all of B.
        EXPECT_TRUE(emu_test::extents_reached("grouped_gemm_mla"));
    }
}

// ---- kernel 5 ----------------------------------------------------------------------

struct FusedCase {
    mla_ref::FusedShape s;  // seq, nq, nope, rope, kv_lora, v_dim
    size_t lead;
    bool raw_cache_bits;  // kv_latent and k_rope as any bit pattern (NaN, -0, inf): only the cache rows are checked
};

void run_fused(const kl_module *mod, bool v_has_rope, const FusedCase &c, uint32_t seed) {
    const mla_ref::FusedShape &s = c.s;
    SCOPED_TRACE(::testing::Message() << "seq " << s.seq << " nq " << s.nq << " nope " << s.nope << " rope " << s.rope
                                      << " kv_lora " << s.kv_lora << " v_dim " << s.v_dim << " misalign " << c.lead
                                      << (c.raw_cache_bits ? " raw bits" : ""));
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_fused_prefill_get(&k, mod));
    auto raw = [&](size_t n) {
        std::mt19937 gen(seed++);
        std::vector<uint16_t> v(n);
        for (uint16_t &x : v) x = (uint16_t)(gen() % 0xFFFF);  // any pattern but the poison
        return v;
    };
    const std::vector<uint16_t> q_full = emu_test::random_bf16(s.seq * s.nq * s.hd(), seed++, 1.0f),
                                q_rope = emu_test::random_bf16(s.seq * s.nq * s.rope, seed++, 1.0f),
                                kv_latent = c.raw_cache_bits ? raw(s.seq * s.kv_lora)
                                                             : emu_test::random_bf16(s.seq * s.kv_lora, seed++, 1.0f),
                                k_rope = c.raw_cache_bits ? raw(s.seq * s.rope)
                                                          : emu_test::random_bf16(s.seq * s.rope, seed++, 1.0f),
                                w_uk = emu_test::random_bf16(s.nq * s.nope * s.kv_lora, seed++,
                                                             1.0f / std::sqrt((float)s.nope)),
                                w_uv = emu_test::random_bf16(s.nq * s.v_dim * s.kv_lora, seed++,
                                                             1.0f / std::sqrt((float)s.kv_lora));
    auto dq = input(q_full, "q_full", c.lead), dqr = input(q_rope, "q_rope", c.lead),
         dlat = input(kv_latent, "kv_latent", c.lead), dkr = input(k_rope, "k_rope", c.lead),
         duk = input(w_uk, "w_uk", c.lead), duv = input(w_uv, "w_uv", c.lead);
    emu::Buffer<kl_bf16> v_out(s.seq * s.nq * s.v_dim, Access::kWrite, "v_out", 8, c.lead),
        k_cache(s.seq * s.cache_dim(), Access::kWrite, "k_cache_out", 8, c.lead),
        v_cache(s.seq * s.cache_dim(), Access::kWrite, "v_cache_out", 8, c.lead);
    const double inv_sqrt_d = 1.0 / std::sqrt((double)s.hd());
    KL_EMU_ASSERT_OK(kl_mla_fused_prefill(&k, dq->data(), dqr->data(), dlat->data(), dkr->data(), duk->data(),
                                          duv->data(), v_out.data(), k_cache.data(), v_cache.data(), (uint32_t)s.seq,
                                          (uint32_t)s.nq, (uint32_t)s.nope, (uint32_t)s.rope, (uint32_t)s.kv_lora,
                                          (uint32_t)s.v_dim, (uint32_t)s.hd(), 1u, (float)inv_sqrt_d, nullptr));
    std::vector<uint16_t> kc, vc;
    mla_ref::cache_rows(s, kv_latent, k_rope, v_has_rope, &kc, &vc);
    size_t k_bad = 0, v_bad = 0;
    for (size_t i = 0; i < kc.size(); ++i) {
        k_bad += k_cache[i].bits != kc[i];
        v_bad += v_cache[i].bits != vc[i];
    }
    EXPECT_EQ(k_bad, 0u) << "k_cache_out elements differ from [kv_latent | k_rope]";
    EXPECT_EQ(v_bad, 0u) << "v_cache_out elements differ from the variant's V row";
    if (!c.raw_cache_bits) {
        const std::vector<double> ref =
            mla_ref::fused_prefill(s, q_full, q_rope, kv_latent, k_rope, w_uk, w_uv, inv_sqrt_d);
        EXPECT_TRUE(close("v_out", [&](size_t i) { return emu_test::bf16(v_out[i].bits); }, ref));
    }
    EXPECT_TRUE(v_out.guards_intact() && k_cache.guards_intact() && v_cache.guards_intact());
    // The extents are tight (contract 5): the last token's head reads the
    // last query row, every position's latent and rope row, both weights
    // whole, and writes v_out and both cache rows whole.
    EXPECT_TRUE(emu_test::extents_reached("mla_fused_prefill"));
}

TEST_P(MlaComputeEmulated, FusedPrefillMatchesFloat64Reference) {
    const size_t kv_lora = hdim() - kRope;
    run_fused(mod(), v_has_rope(), {{1, 1, kNope, kRope, kv_lora, kVDim}, 0, false}, 3000);
    run_fused(mod(), v_has_rope(), {{5, 2, kNope, kRope, kv_lora, kVDim}, 0, false}, 3100);
    // Widths not multiples of 8, a rope wider than one chunk per lane, the
    // largest kv_lora the spec allows, buffers off a 16-byte boundary.
    run_fused(mod(), v_has_rope(), {{7, 3, 40, 24, 200, 50}, 0, false}, 3200);
    run_fused(mod(), v_has_rope(), {{4, 2, kNope, kRope, 256, kVDim}, 1, false}, 3300);
    run_fused(mod(), v_has_rope(), {{3, 2, 16, 300, 64, 8}, 0, false}, 3400);
    run_fused(mod(), v_has_rope(), {{6, 1, 24, 8, 512, 16}, 0, false}, 3500);
}

TEST_P(MlaComputeEmulated, FusedPrefillCopiesCacheRowsBitExactly) {
    run_fused(mod(), v_has_rope(), {{5, 2, kNope, kRope, hdim() - kRope, kVDim}, 0, true}, 4000);
    run_fused(mod(), v_has_rope(), {{3, 1, 8, 13, 37, 8}, 1, true}, 4100);
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaComputeEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

}  // namespace
