// The emulated cases both tensor-core paths share (mla_mma_emulated_test.cc,
// mla_wgmma_emulated_test.cc; the checks also mla_copy_engine_emulated_test.cc): one runner per contract, given the launcher's
// _get and launch functions (the mma.sync and wgmma launchers take the same
// parameters), against the float64 references of the GPU test. Outputs start
// poisoned with guard elements around them.
#ifndef KLAUNCH_TESTS_MLA_PREFILL_MLA_TENSOR_CORE_EMULATED_H
#define KLAUNCH_TESTS_MLA_PREFILL_MLA_TENSOR_CORE_EMULATED_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_fast_reference.h"
#include "tests/mla_prefill/mla_reference.h"

namespace mla_tc_emu {

using GetFn = kl_status (*)(kl_kernel *, const kl_module *);
using AttentionFn = kl_status (*)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                                  uint32_t, uint32_t, uint32_t, float, bool, kl_stream);
using GemmFn = kl_status (*)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                             uint32_t, uint32_t, uint32_t, uint32_t, kl_stream);

// Input bits in a registered read-only buffer, `lead` elements off a 16-byte boundary when odd.
inline std::unique_ptr<emu::Buffer<kl_bf16>> input(const std::vector<uint16_t> &bits, const char *name, size_t lead) {
    std::unique_ptr<emu::Buffer<kl_bf16>> b(new emu::Buffer<kl_bf16>(bits.size(), emu::Access::kRead, name, 8, lead));
    for (size_t i = 0; i < bits.size(); ++i) (*b)[i].bits = bits[i];
    return b;
}

// out [batch, seq, heads, DV] against the float64 reference (mismatches named
// by batch, token, head, column), and its guards untouched.
inline void expect_attention(const emu::Buffer<kl_bf16> &out, const std::vector<double> &ref, uint32_t seq,
                             uint32_t heads, uint32_t DV) {
    EXPECT_TRUE(emu_test::close(
        "out", [&](size_t i) { return emu_test::bf16(out[i].bits); }, ref, 1e-2, 1e-2, 1e-2, [&](size_t i) {
            std::ostringstream s;
            s << "[b " << i / DV / heads / seq << ", t " << i / DV / heads % seq << ", h " << i / DV % heads
              << ", col " << i % DV << "]";
            return s.str();
        }));
    EXPECT_TRUE(out.guards_intact());
}

// C (m rows c_stride apart) against the dense [m, g * n_g] reference: the
// columns past g * n_g still poison, the rest close, the guards untouched.
inline void expect_gemm(const emu::Buffer<kl_bf16> &out, const std::vector<double> &dense, uint32_t m, uint32_t g,
                        uint32_t n_g, uint32_t c_stride) {
    const size_t w = (size_t)g * n_g;
    size_t outside = 0;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = w; j < c_stride; ++j) outside += out[i * c_stride + j].bits != 0xFFFF;
    EXPECT_EQ(0u, outside) << "columns of C outside the groups were written";
    EXPECT_TRUE(emu_test::close(
        "C", [&](size_t i) { return emu_test::bf16(out[(i / w) * c_stride + i % w].bits); }, dense, 1e-2, 1e-2, 1e-2,
        [&](size_t i) {
            std::ostringstream s;
            s << "[row " << i / w << ", group " << i % w / n_g << ", col " << i % w % n_g << "]";
            return s.str();
        }));
    EXPECT_TRUE(out.guards_intact());
}

struct AttnCase {
    uint32_t batch, seq, heads;
    bool causal;
    size_t lead;
};

// `name`: the launcher's (kl_<name>), whose extents the run asserts reached.
inline void run_attention(const char *name, GetFn get, AttentionFn launch, const kl_module *mod, uint32_t D,
                          const AttnCase &c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "D " << D << " batch " << c.batch << " seq " << c.seq << " heads " << c.heads
                                      << (c.causal ? " causal" : " full") << " lead " << c.lead);
    const uint32_t DV = D - 64;
    kl_kernel k;
    KL_EMU_ASSERT_OK(get(&k, mod));
    const size_t nq = (size_t)c.batch * c.seq * c.heads * D, nkv = (size_t)c.batch * c.seq * D;
    const std::vector<uint16_t> qh = emu_test::random_bf16(nq, seed, 1.0f), kvh = emu_test::random_bf16(nkv, seed + 1, 1.0f);
    auto q = input(qh, "q", c.lead), kv = input(kvh, "kv", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.batch * c.seq * c.heads * DV, emu::Access::kWrite, "output", 8, c.lead);
    const float scale = 1.0f / std::sqrt((float)D);
    KL_EMU_ASSERT_OK(launch(&k, q->data(), kv->data(), out.data(), c.seq, c.batch, c.heads, D, DV, scale, c.causal,
                            nullptr));
    expect_attention(out, mla_fast_ref::absorbed_attention(qh, kvh, c.batch, c.seq, c.heads, D, DV, scale, c.causal),
                     c.seq, c.heads, DV);
    // The extents are tight: every query row is read and every output row
    // written; the last position's kv row is read (by every row when full,
    // by the last position's when causal).
    EXPECT_TRUE(emu_test::extents_reached(name));
}

struct GemmCase {
    uint32_t m, g, k_g, n_g, a_pad, c_pad;  // strides are g*k_g + a_pad, g*n_g + c_pad
    size_t lead;
};

inline void run_gemm(const char *name, GetFn get, GemmFn launch, const kl_module *mod, const GemmCase &c,
                     uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " g " << c.g << " k_g " << c.k_g << " n_g " << c.n_g
                                      << " a_pad " << c.a_pad << " c_pad " << c.c_pad << " lead " << c.lead);
    kl_kernel k;
    KL_EMU_ASSERT_OK(get(&k, mod));
    const uint32_t a_stride = c.g * c.k_g + c.a_pad, c_stride = c.g * c.n_g + c.c_pad;
    const std::vector<uint16_t> ah = emu_test::random_bf16((size_t)c.m * a_stride, seed, 1.0f),
                                bh = emu_test::random_bf16((size_t)c.g * c.n_g * c.k_g, seed + 1, 1.0f);
    auto a = input(ah, "a", c.lead), b = input(bh, "b", c.lead);
    emu::Buffer<kl_bf16> out((size_t)c.m * c_stride, emu::Access::kWrite, "c", 8, c.lead);
    KL_EMU_ASSERT_OK(launch(&k, a->data(), b->data(), out.data(), c.m, c.g, c.k_g, c.n_g, a_stride, c_stride, nullptr));
    expect_gemm(out, mla_ref::grouped_gemm(ah, bh, c.m, c.g, c.k_g, c.n_g, a_stride), c.m, c.g, c.n_g, c_stride);
    // A's last row up to g * k_g and C's up to g * n_g (not their padding), all of B.
    EXPECT_TRUE(emu_test::extents_reached(name));
}

}  // namespace mla_tc_emu

#endif
