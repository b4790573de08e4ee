// GPU tests of the MLA prefill family's tensor-core launchers against
// float64 CPU references (mla_fast_reference.h, mla_reference.h), in both
// variants' fatbins (mistral_small_4: MLA_HDIM 320, kv_lora 256;
// deepseek_v4_flash: MLA_HDIM 576, kv_lora 512), each case through both
// paths of the same contract (the test's parameter is variant x path):
//
//   mma:   kl_mla_absorbed_attention_mma, kl_grouped_gemm_mma (mma.sync, sm_80+)
//   wgmma: kl_mla_absorbed_attention_wgmma, kl_grouped_gemm_wgmma (sm_90a:
//          on a GPU that is not sm_90 their kl_X_get must refuse with
//          KL_ERROR_UNSUPPORTED naming both architectures, and the cases skip)
//
// Inputs are fresh random bf16 values per case (a fixed seed per case, so a
// failure reproduces). Outputs start as poison (0xFFFF, a bf16 NaN) with
// poisoned guard elements on both sides: every element the contract names
// must be within atol + 1e-2 |ref| of the reference (atol: 1% of the
// reference's RMS) with ||out - ref|| / ||ref|| < 1e-2, NaN never passes, and
// every other element must still be poison.
//
// Besides the sweeps (sequence lengths 1, 3, 17, 200 and longer; 1, 3, 16
// heads; causal and not; batch 2; buffers off a 16-byte boundary), cases
// that say where a wrong kernel goes wrong:
//   - one key: the output is that key's kv_latent exactly (P V and V's
//     layout, no softmax arithmetic involved);
//   - q = 0: every weight is equal, the output is a mean of V rows (P V and
//     the normalisation, not Q K^T);
//   - a grouped GEMM with B_g = I gives A's columns exactly, with A = I it
//     gives B_g^T exactly (each operand's path on its own).
// Mismatches are listed with their (batch, token, head, column) or
// (row, group, column).
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
#include "tests/mla_prefill/mla_fast_reference.h"
#include "tests/mla_prefill/mla_gpu_check.h"
#include "tests/mla_prefill/mla_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
using namespace mla_gpu_check;

struct Variant {
    const char *name;
    const unsigned char *image;
    size_t size;
    uint32_t mla_hdim, kv_lora;
};

// The launchers of one path; both paths share the contract and the signatures.
struct Path {
    const char *name;
    kl_status (*attn_get)(kl_kernel *, const kl_module *);
    kl_status (*attn)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t, uint32_t,
                      uint32_t, uint32_t, float, bool, kl_stream);
    kl_status (*gemm_get)(kl_kernel *, const kl_module *);
    kl_status (*gemm)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t, uint32_t,
                      uint32_t, uint32_t, uint32_t, kl_stream);
    bool needs_sm90;
};

const Path &path(int i) {
    static const Path kPaths[] = {
        {"mma", kl_mla_absorbed_attention_mma_get, kl_mla_absorbed_attention_mma, kl_grouped_gemm_mma_get,
         kl_grouped_gemm_mma, false},
        {"wgmma", kl_mla_absorbed_attention_wgmma_get, kl_mla_absorbed_attention_wgmma, kl_grouped_gemm_wgmma_get,
         kl_grouped_gemm_wgmma, true},
    };
    return kPaths[i];
}

const Variant &variant(int i) {
    static const Variant kVariants[] = {
        {"mistral_small_4", kl_fatbin_mla_prefill_mistral_small_4, kl_fatbin_mla_prefill_mistral_small_4_size, 320,
         256},
        {"deepseek_v4_flash", kl_fatbin_mla_prefill_deepseek_v4_flash,
         kl_fatbin_mla_prefill_deepseek_v4_flash_size, 576, 512},
    };
    return kVariants[i];
}

constexpr double kScale = 0.07216878364870322;  // 1/sqrt(192): MLA's softmax scale for nope 128 + rope 64

// Parameter: variant * 2 + path.
class MlaFast : public kl_test::GpuTest, public ::testing::WithParamInterface<int> {
  protected:
    void SetUp() override {
        kl_test::GpuTest::SetUp();
        if (IsSkipped()) return;
        const Variant &v = var();
        ASSERT_GT(v.size, 0u) << "the " << v.name << " fatbin is empty: built without a CUDA toolkit";
        module_.reset(new kl_test::Module(v.image, v.size));
        int64_t hdim = 0;
        ASSERT_TRUE(kl_module_const(*module_, "MLA_HDIM", &hdim));
        ASSERT_EQ(hdim, static_cast<int64_t>(v.mla_hdim)) << v.name;
    }
    const Variant &var() const { return variant(GetParam() / 2); }
    const Path &pth() const { return path(GetParam() % 2); }
    const kl_module *module() const { return *module_; }
    // kl_X_get of this path; an sm_90a path on another GPU must refuse, naming
    // both architectures, and then the case skips.
    bool get(kl_status (*fn)(kl_kernel *, const kl_module *), kl_kernel *k) {
        const kl_status st = fn(k, module());
        if (pth().needs_sm90 && kl_test::gpu()->cc_major != 9) {
            EXPECT_EQ(KL_ERROR_UNSUPPORTED, st) << kl_last_error_message();
            EXPECT_NE(std::string(kl_last_error_message()).find("sm_90a"), std::string::npos) << kl_last_error_message();
            return false;
        }
        EXPECT_EQ(KL_SUCCESS, st) << kl_last_error_message();
        return st == KL_SUCCESS;
    }

  private:
    std::unique_ptr<kl_test::Module> module_;
};

std::string variant_name(const ::testing::TestParamInfo<int> &info) {
    return std::string(variant(info.param / 2).name) + "_" + path(info.param % 2).name;
}

#define GET_OR_SKIP(fn, k)                                                   \
    do {                                                                     \
        if (!get(fn, k)) GTEST_SKIP() << pth().name << " needs an sm_90 GPU"; \
    } while (0)

// ---- kl_mla_absorbed_attention_mma ------------------------------------------------

struct AttnCase {
    uint32_t batch, seq, heads;
    bool causal;
    size_t misalign;
    float q_scale;  // q uniform in [-q_scale, q_scale]; 0 makes every weight equal
};

std::ostream &operator<<(std::ostream &os, const AttnCase &c) {
    return os << "batch " << c.batch << ", seq_len " << c.seq << ", heads " << c.heads << ", causal " << c.causal
              << ", misalign " << c.misalign << ", q in +-" << c.q_scale;
}

using MlaAbsorbedAttentionFast = MlaFast;

// Runs one case; returns the output bits (kernel-visible part) for extra checks.
std::vector<uint16_t> run_attention(const kl_kernel *k, const Path &p, const Variant &v, const AttnCase &c, uint32_t seed,
                                    std::vector<uint16_t> *kv_out = nullptr) {
    const uint32_t d = v.mla_hdim, dv = v.kv_lora;
    const size_t nq = size_t{c.batch} * c.seq * c.heads * d, nkv = size_t{c.batch} * c.seq * d;
    const std::vector<uint16_t> qh = c.q_scale > 0.0f ? random_bits(nq, seed, c.q_scale) : std::vector<uint16_t>(nq, 0);
    const std::vector<uint16_t> kvh = random_bits(nkv, seed + 1, 1.0f);
    Region q(qh, c.misalign), kv(kvh, c.misalign), out(size_t{c.batch} * c.seq * c.heads * dv, c.misalign);
    const kl_status st = p.attn(k, reinterpret_cast<const kl_bf16 *>(q.ptr()), kv.ptr(), out.ptr(), c.seq, c.batch,
                                c.heads, d, dv, static_cast<float>(kScale), c.causal, nullptr);
    EXPECT_EQ(KL_SUCCESS, st) << kl_last_error_message();
    kl_test::synchronize();
    bool guards_ok = false;
    std::vector<uint16_t> got = out.read(&guards_ok);
    EXPECT_TRUE(guards_ok) << "an element outside the output was written";
    std::vector<double> mass;
    const std::vector<double> ref =
        mla_fast_ref::absorbed_attention(qh, kvh, c.batch, c.seq, c.heads, d, dv, kScale, c.causal, &mass);
    EXPECT_TRUE(attention_close_to(got, ref, mass, c.seq, c.heads, dv));
    if (kv_out) *kv_out = kvh;
    return got;
}

TEST_P(MlaAbsorbedAttentionFast, MatchesFloat64Reference) {
    kl_kernel k;
    GET_OR_SKIP(pth().attn_get, &k);
    std::vector<AttnCase> cases;
    for (uint32_t s : {1u, 3u, 17u, 200u})
        for (uint32_t h : {1u, 3u, 16u})
            for (bool causal : {false, true}) cases.push_back({1, s, h, causal, 0, 1.0f});
    cases.push_back({2, 17, 3, true, 0, 1.0f});  // batch > 1
    cases.push_back({2, 70, 2, false, 0, 1.0f});
    cases.push_back({1, 333, 2, true, 0, 1.0f});  // 6 query tiles, ragged last key tile
    cases.push_back({1, 300, 2, false, 0, 1.0f}); // 5 key tiles for every query tile
    cases.push_back({1, 17, 3, true, 1, 1.0f});   // buffers off a 16-byte boundary
    cases.push_back({1, 65, 2, false, 3, 1.0f});
    cases.push_back({1, 150, 2, true, 0, 4.0f});  // peaked softmax: the running max moves a lot
    uint32_t seed = 7000u + 100u * static_cast<uint32_t>(GetParam() / 2);
    for (const AttnCase &c : cases) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        run_attention(&k, pth(), var(), c, seed += 2);
    }
}

// One key: the weights are exactly 1, the output is the key's kv_latent, bit
// for bit (a wrong V layout or output column map shows here alone).
TEST_P(MlaAbsorbedAttentionFast, OneKeyGivesItsLatentExactly) {
    kl_kernel k;
    GET_OR_SKIP(pth().attn_get, &k);
    const uint32_t heads = 3, dv = var().kv_lora, d = var().mla_hdim;
    std::vector<uint16_t> kvh;
    const std::vector<uint16_t> got = run_attention(&k, pth(), var(), {2, 1, heads, true, 0, 1.0f}, 91, &kvh);
    size_t bad = 0;
    std::ostringstream first;
    for (uint32_t b = 0; b < 2; b++)
        for (uint32_t h = 0; h < heads; h++)
            for (uint32_t col = 0; col < dv; col++) {
                const uint16_t want = kvh[size_t{b} * d + col], have = got[(size_t{b} * heads + h) * dv + col];
                if (want != have && bad++ < 10)
                    first << "  out[b " << b << ", h " << h << ", col " << col << "] = 0x" << std::hex << have
                          << ", kv[b " << std::dec << b << ", 0, col " << col << "] = 0x" << std::hex << want << std::dec
                          << "\n";
            }
    EXPECT_EQ(0u, bad) << "outputs that are not the single key's latent:\n" << first.str();
}

// q = 0: every score is 0, every visible key weighs the same; the output is
// the mean of those keys' latents (Q K^T plays no part).
TEST_P(MlaAbsorbedAttentionFast, ZeroQueryAveragesTheLatents) {
    kl_kernel k;
    GET_OR_SKIP(pth().attn_get, &k);
    for (bool causal : {false, true}) {
        SCOPED_TRACE(causal ? "causal" : "full");
        run_attention(&k, pth(), var(), {1, 100, 2, causal, 0, 0.0f}, causal ? 93u : 95u);
    }
}

// An empty grid launches nothing and succeeds; the output stays poison.
TEST_P(MlaAbsorbedAttentionFast, EmptyLaunchWritesNothing) {
    kl_kernel k;
    GET_OR_SKIP(pth().attn_get, &k);
    const uint32_t d = var().mla_hdim, dv = var().kv_lora;
    Region q(size_t{4} * d, 0), kv(size_t{4} * d, 0), out(size_t{4} * dv, 0);
    KL_EXPECT_OK(pth().attn(&k, q.ptr(), kv.ptr(), out.ptr(), 0, 1, 1, d, dv, 0.1f, true, nullptr));
    KL_EXPECT_OK(pth().attn(&k, q.ptr(), kv.ptr(), out.ptr(), 4, 0, 1, d, dv, 0.1f, true, nullptr));
    kl_test::synchronize();
    bool guards_ok = false;
    const std::vector<uint16_t> got = out.read(&guards_ok);
    EXPECT_TRUE(guards_ok);
    for (uint16_t b : got) ASSERT_EQ(kPoison, b) << "an empty launch wrote the output";
}

// The launcher refuses another variant's head width and a kv_lora that is not head_dim - 64.
TEST_P(MlaAbsorbedAttentionFast, RefusesWrongWidths) {
    kl_kernel k;
    GET_OR_SKIP(pth().attn_get, &k);
    const uint32_t d = var().mla_hdim, other = d == 576 ? 320 : 576;
    Region buf(size_t{1024}, 0);
    EXPECT_EQ(KL_ERROR_VARIANT_MISMATCH, pth().attn(&k, buf.ptr(), buf.ptr(), buf.ptr(), 1, 1, 1,
                                                                       other, other - 64, 0.1f, true, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION, pth().attn(&k, buf.ptr(), buf.ptr(), buf.ptr(), 1, 1, 1, d,
                                                                   d - 32, 0.1f, true, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaAbsorbedAttentionFast, ::testing::Values(0, 1, 2, 3), variant_name);

// ---- kl_grouped_gemm_mma ----------------------------------------------------------

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // a_stride = g k_g + a_pad, c_stride = g n_g + c_pad
    size_t misalign;
};

std::ostream &operator<<(std::ostream &os, const GemmCase &c) {
    return os << "m " << c.m << ", g " << c.g << ", k_g " << c.k_g << ", n_g " << c.n_g << ", a_pad " << c.a_pad
              << ", c_pad " << c.c_pad << ", misalign " << c.misalign;
}

// Launches C = grouped A B^T; returns C's kernel-visible part (c_stride-wide rows)
// after checking that no column outside the groups and no guard was written.
std::vector<uint16_t> run_gemm(const kl_kernel *k, const Path &p, const GemmCase &c, const std::vector<uint16_t> &ah,
                               const std::vector<uint16_t> &bh) {
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    Region a(ah, c.misalign), b(bh, c.misalign), out(size_t{c.m} * c_stride, c.misalign);
    KL_EXPECT_OK(p.gemm(k, a.ptr(), b.ptr(), out.ptr(), c.m, c.g, c.k_g, c.n_g, a_stride, c_stride, nullptr));
    kl_test::synchronize();
    bool guards_ok = false;
    std::vector<uint16_t> got = out.read(&guards_ok);
    EXPECT_TRUE(guards_ok) << "an element outside C was written";
    size_t pad_written = 0;
    for (size_t i = 0; i < c.m; i++)
        for (size_t j = size_t{c.g} * c.n_g; j < c_stride; j++) pad_written += got[i * c_stride + j] != kPoison;
    EXPECT_EQ(0u, pad_written) << "columns of C past the g groups were written";
    return got;
}

std::string gemm_where(const GemmCase &c, size_t i) {
    const size_t w = size_t{c.g} * c.n_g;
    std::ostringstream s;
    s << "[row " << i / w << ", group " << i % w / c.n_g << ", col " << i % c.n_g << "]";
    return s.str();
}

// The g*n_g columns of each c_stride-wide row.
std::vector<uint16_t> groups_of(const GemmCase &c, const std::vector<uint16_t> &got) {
    const size_t w = size_t{c.g} * c.n_g, c_stride = w + c.c_pad;
    std::vector<uint16_t> out(size_t{c.m} * w);
    for (size_t i = 0; i < c.m; i++) std::memcpy(&out[i * w], &got[i * c_stride], w * sizeof(uint16_t));
    return out;
}

using GroupedGemmFast = MlaFast;

TEST_P(GroupedGemmFast, MatchesFloat64Reference) {
    kl_kernel k;
    GET_OR_SKIP(pth().gemm_get, &k);
    const std::vector<GemmCase> cases = {
        {1, 1, 8, 8, 0, 0, 0},
        {200, 4, 128, 512, 0, 0, 0},  // the absorption shape (q_nope @ w_uk), fewer rows and groups
        {200, 4, 512, 128, 0, 0, 0},  // the transposed one (o_lat @ w_uv^T)
        {300, 3, 40, 136, 8, 16, 0},  // several row and column tiles, k_g not a multiple of 32
        {37, 3, 13, 19, 1, 3, 1},     // odd everything, buffers off a 16-byte boundary
        {3, 1, 12, 20, 4, 4, 0},      // aligned rows with ragged last pieces of k and n
        {129, 2, 64, 129, 0, 2, 2},
        {130, 2, 200, 72, 0, 0, 0},   // k_g past the stages (4 k-tiles of 64, ragged), partial n tile
        {1100, 2, 200, 136, 0, 8, 0}, // 9 m tiles: the wgmma kernel's blocks of 4, 4 and 1, its ring wrapping
    };
    uint32_t seed = 8000u + 100u * static_cast<uint32_t>(GetParam() / 2);
    for (const GemmCase &c : cases) {
        std::ostringstream name;
        name << c;
        SCOPED_TRACE(name.str());
        const uint32_t a_stride = c.g * c.k_g + c.a_pad;
        const std::vector<uint16_t> ah = random_bits(size_t{c.m} * a_stride, seed += 2, 1.0f),
                                    bh = random_bits(size_t{c.g} * c.n_g * c.k_g, seed + 1, 1.0f);
        const std::vector<uint16_t> got = groups_of(c, run_gemm(&k, pth(), c, ah, bh));
        const std::vector<double> ref = mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride);
        EXPECT_TRUE(close_to("C", got, ref, [&](size_t i) { return gemm_where(c, i); }));
    }
}

// B_g = I: C_g is A_g, exactly; A = I (every group): C_g = B_g^T, exactly.
TEST_P(GroupedGemmFast, IdentityOperandsCopyTheOtherExactly) {
    kl_kernel k;
    GET_OR_SKIP(pth().gemm_get, &k);
    const uint16_t one = 0x3F80;  // bf16 1.0
    const GemmCase c{160, 2, 160, 160, 0, 0, 0};
    const size_t w = size_t{c.g} * c.n_g;
    for (int which = 0; which < 2; which++) {
        SCOPED_TRACE(which == 0 ? "B_g = I" : "A_g = I");
        std::vector<uint16_t> ah = random_bits(size_t{c.m} * c.g * c.k_g, 301u + which, 1.0f);
        std::vector<uint16_t> bh = random_bits(size_t{c.g} * c.n_g * c.k_g, 401u + which, 1.0f);
        std::vector<uint16_t> &eye = which == 0 ? bh : ah;
        std::fill(eye.begin(), eye.end(), uint16_t{0});
        for (size_t gi = 0; gi < c.g; gi++)
            for (size_t j = 0; j < 160; j++) {
                if (which == 0)
                    bh[(gi * c.n_g + j) * c.k_g + j] = one;
                else
                    ah[j * c.g * c.k_g + gi * c.k_g + j] = one;
            }
        const std::vector<uint16_t> got = groups_of(c, run_gemm(&k, pth(), c, ah, bh));
        size_t bad = 0;
        std::ostringstream first;
        for (size_t i = 0; i < c.m; i++)
            for (size_t gi = 0; gi < c.g; gi++)
                for (size_t j = 0; j < c.n_g; j++) {
                    const uint16_t want = which == 0 ? ah[i * c.g * c.k_g + gi * c.k_g + j]   // A_g[i, j]
                                                     : bh[(gi * c.n_g + j) * c.k_g + i];     // B_g[j, i]
                    const uint16_t have = got[i * w + gi * c.n_g + j];
                    if (want != have && bad++ < 10)
                        first << "  C[row " << i << ", group " << gi << ", col " << j << "] = " << bf16(have)
                              << ", want " << bf16(want) << "\n";
                }
        EXPECT_EQ(0u, bad) << "elements that are not the other operand's:\n" << first.str();
    }
}

TEST_P(GroupedGemmFast, RefusesStridesTooNarrow) {
    kl_kernel k;
    GET_OR_SKIP(pth().gemm_get, &k);
    Region buf(size_t{4096}, 0);
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              pth().gemm(&k, buf.ptr(), buf.ptr(), buf.ptr(), 4, 2, 16, 16, 31, 32, nullptr));
    EXPECT_EQ(KL_ERROR_PRECONDITION,
              pth().gemm(&k, buf.ptr(), buf.ptr(), buf.ptr(), 4, 2, 16, 16, 32, 31, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Variants, GroupedGemmFast, ::testing::Values(0, 1, 2, 3), variant_name);

}  // namespace
