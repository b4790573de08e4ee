// The MLA prefill family's data-movement kernels from their own source on
// the CPU emulator (tests/emu, docs/EMULATOR.md), through the generated
// launchers, in both variants, bit exact against the contract's CPU
// references of the GPU test (tests/mla_prefill/mla_data_movement_reference.h):
//   mla_q_rope_extract_{batched,wide}, mla_q_rope_writeback_{batched,wide},
//   mla_kv_assemble_batched, mla_cache_assemble_{batched,wide},
//   mla_q_final_assemble_{batched,wide}
// Inputs are random bit patterns (NaN, inf, -0 and subnormals included, so a
// kernel that converts through float fails), outputs poisoned with guards;
// the emulator faults on any access outside the buffers (inputs read-only,
// outputs write-only). Shapes reach each copy width (16-, 8-, 4-, 2-byte
// chunks), buffers off alignment, empty parts, and the wide launchers' block
// edges; sizes are cut to what the emulator runs in seconds (the GPU test
// has the 2^32-element cases).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_data_movement_reference.h"

namespace {

using emu::Access;
using namespace mla_dm_ref;

class MlaDataMovementEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    const kl_module *mod() { return emu_test::module("mla_prefill", GetParam()); }
    bool v_has_rope() { return emu_test::module_const(mod(), "MLA_V_HAS_ROPE") != 0; }
};

// A buffer of random bit patterns (any but the poison), `misalign` elements off its 256-byte start.
std::unique_ptr<emu::Buffer<kl_bf16>> random_input(size_t n, size_t misalign, std::mt19937 &gen, const char *name,
                                                   Access a = Access::kRead) {
    std::unique_ptr<emu::Buffer<kl_bf16>> b(new emu::Buffer<kl_bf16>(n, a, name, 8, misalign));
    std::uniform_int_distribution<uint32_t> dist(0, 0xFFFE);
    for (size_t i = 0; i < n; ++i) (*b)[i].bits = (uint16_t)dist(gen);
    return b;
}
std::unique_ptr<emu::Buffer<kl_bf16>> output(size_t n, size_t misalign, const char *name) {
    return std::unique_ptr<emu::Buffer<kl_bf16>>(new emu::Buffer<kl_bf16>(n, Access::kWrite, name, 8, misalign));
}

::testing::AssertionResult bit_equal(const char *what, const emu::Buffer<kl_bf16> &got, const std::vector<kl_bf16> &want) {
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < want.size(); ++i)
        if (got[i].bits != want[i].bits) {
            if (bad < 10) first << "  " << what << "[" << i << "]: got " << std::hex << got[i].bits << ", want " << want[i].bits << std::dec << "\n";
            bad++;
        }
    if (!got.guards_intact()) return ::testing::AssertionFailure() << what << ": a guard element was written";
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << bad << " of " << want.size() << " elements differ\n" << first.str();
}

std::vector<kl_bf16> poison(size_t n) { return std::vector<kl_bf16>(n, bits(0xFFFF)); }

// ---- kernels 1 and 2 ------------------------------------------------------------

typedef kl_status (*GetFn)(kl_kernel *, const kl_module *);
typedef kl_status (*RopeFn)(const kl_kernel *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t, uint32_t, uint32_t,
                            uint32_t, uint32_t, kl_stream);
struct RopeLauncher {
    const char *name;
    GetFn get;
    RopeFn launch;
};

// num_tokens, nq, nope, rope, q_dim_pad, misalign
const RopeCase kRopeCases[] = {
    {1, 1, 128, 64, 0, 0},   // the models' head: 16-byte path
    {3, 3, 5, 3, 5, 0},      // odd: 2-byte path
    {9, 16, 128, 64, 0, 0},  // many heads: several block groups
    {5, 2, 6, 2, 2, 0},      // 4-byte path
    {7, 3, 4, 4, 4, 0},      // 8-byte path
    {9, 16, 128, 64, 0, 1},  // buffers 2 bytes off alignment
    {3, 2, 0, 8, 0, 0},      // no nope part
    {32, 1, 64, 64, 0, 0},   // exactly 2048 rope elements: one wide block
    {33, 1, 64, 64, 0, 0},   // 2112: a second, short wide block
};

TEST_P(MlaDataMovementEmulated, RopeExtractCopiesEachHeadsRopeSlice) {
    for (const RopeLauncher &l : {RopeLauncher{"mla_q_rope_extract_batched", kl_mla_q_rope_extract_batched_get,
                                               kl_mla_q_rope_extract_batched},
                                  RopeLauncher{"mla_q_rope_extract_wide", kl_mla_q_rope_extract_wide_get,
                                               kl_mla_q_rope_extract_wide}}) {
        kl_kernel k;
        KL_EMU_ASSERT_OK(l.get(&k, mod()));
        emu_test::ExtentsReached ext(l.name);
        uint32_t seed = 100;
        for (const RopeCase &c : kRopeCases) {
            SCOPED_TRACE(std::string(l.name) + ", " + describe(c));
            std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
            auto q = random_input((size_t)c.num_tokens * c.q_dim(), c.misalign, gen, "q_full");
            auto out = output((size_t)c.num_tokens * c.nq * c.rope, c.misalign, "q_rope_out");
            std::vector<kl_bf16> want = poison(out->size());
            ref_rope_extract(q->data(), want.data(), c);
            KL_EMU_ASSERT_OK(l.launch(&k, q->data(), out->data(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope,
                                      c.q_dim(), nullptr));
            EXPECT_TRUE(bit_equal("q_rope_out", *out, want));
            // The extents are tight (contract 1): the last head's rope slice
            // of the last token ends q_full's (num_tokens - 1) * q_dim + nq * hd
            // elements (a padded row's tail is not read); every output is written.
            EXPECT_TRUE(ext.add());
        }
        EXPECT_TRUE(ext.all());
    }
}

TEST_P(MlaDataMovementEmulated, RopeWritebackChangesOnlyTheRopeSlices) {
    for (const RopeLauncher &l : {RopeLauncher{"mla_q_rope_writeback_batched", kl_mla_q_rope_writeback_batched_get,
                                               kl_mla_q_rope_writeback_batched},
                                  RopeLauncher{"mla_q_rope_writeback_wide", kl_mla_q_rope_writeback_wide_get,
                                               kl_mla_q_rope_writeback_wide}}) {
        kl_kernel k;
        KL_EMU_ASSERT_OK(l.get(&k, mod()));
        emu_test::ExtentsReached ext(l.name);
        uint32_t seed = 200;
        for (const RopeCase &c : kRopeCases) {
            SCOPED_TRACE(std::string(l.name) + ", " + describe(c));
            std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
            auto in = random_input((size_t)c.num_tokens * c.nq * c.rope, c.misalign, gen, "q_rope_in");
            // q_full starts random; every rope element differs from the one coming in.
            auto q = random_input((size_t)c.num_tokens * c.q_dim(), c.misalign, gen, "q_full", Access::kReadWrite);
            for (uint64_t t = 0; t < c.num_tokens; t++)
                for (uint64_t h = 0; h < c.nq; h++)
                    for (uint64_t r = 0; r < c.rope; r++) {
                        kl_bf16 &old = (*q)[t * c.q_dim() + h * c.hd() + c.nope + r];
                        if (old.bits == (*in)[(t * c.nq + h) * c.rope + r].bits)
                            old.bits = (uint16_t)(old.bits == 0 ? 1 : old.bits - 1);
                    }
            std::vector<kl_bf16> want(q->data(), q->data() + q->size());
            ref_rope_writeback(in->data(), want.data(), c);
            KL_EMU_ASSERT_OK(l.launch(&k, in->data(), q->data(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope,
                                      c.q_dim(), nullptr));
            EXPECT_TRUE(bit_equal("q_full", *q, want));
            EXPECT_TRUE(ext.add());  // as for the extract (contract 2)
        }
        EXPECT_TRUE(ext.all());
    }
}

// ---- kernel 3 -----------------------------------------------------------------------

TEST_P(MlaDataMovementEmulated, KvAssembleBuildsKAndVPerHead) {
    kl_kernel k;
    KL_EMU_ASSERT_OK(kl_mla_kv_assemble_batched_get(&k, mod()));
    emu_test::ExtentsReached ext("mla_kv_assemble_batched");
    uint32_t seed = 300;
    // num_tokens, nkv, nope, v_dim, rope, stride_pad, misalign
    for (const KvCase &c : {KvCase{1, 1, 128, 128, 64, 0, 0}, KvCase{3, 3, 5, 7, 3, 5, 0},
                            KvCase{5, 4, 128, 128, 64, 0, 0}, KvCase{5, 2, 128, 96, 64, 3, 0},
                            KvCase{3, 2, 6, 10, 2, 2, 0}, KvCase{5, 3, 4, 4, 4, 4, 0},
                            KvCase{5, 4, 128, 128, 64, 0, 1}, KvCase{5, 4, 128, 128, 64, 0, 4},
                            KvCase{3, 1, 0, 8, 8, 0, 0}, KvCase{3, 2, 8, 0, 8, 1, 0}}) {
        SCOPED_TRACE(describe(c));
        std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
        auto kv = random_input((size_t)c.num_tokens * c.stride(), c.misalign, gen, "kv_expanded");
        auto k_rope = random_input((size_t)c.num_tokens * c.rope, c.misalign, gen, "k_rope_buf");
        auto k_out = output((size_t)c.num_tokens * c.nkv * c.hd(), c.misalign, "k_out");
        auto v_out = output((size_t)c.num_tokens * c.nkv * c.v_dim, c.misalign, "v_out");
        std::vector<kl_bf16> want_k = poison(k_out->size()), want_v = poison(v_out->size());
        ref_kv_assemble(kv->data(), k_rope->data(), want_k.data(), want_v.data(), c);
        KL_EMU_ASSERT_OK(kl_mla_kv_assemble_batched(&k, kv->data(), k_rope->data(), k_out->data(), v_out->data(),
                                                    c.num_tokens, c.nkv, c.nope, c.v_dim, c.rope, c.hd(), c.stride(),
                                                    nullptr));
        EXPECT_TRUE(bit_equal("k_out", *k_out, want_k));
        EXPECT_TRUE(bit_equal("v_out", *v_out, want_v));
        // The extents are tight (contract 3): the last KV head's v of the
        // last token ends kv_expanded's (num_tokens - 1) * stride + nkv *
        // (nope + v_dim) (a padded row's tail is not read), the last token's
        // k_rope ends k_rope_buf, and every output element is written.
        EXPECT_TRUE(ext.add());
    }
    EXPECT_TRUE(ext.all());
}

// ---- kernel 4 -----------------------------------------------------------------------

TEST_P(MlaDataMovementEmulated, CacheAssembleWritesTheVariantsVRopePart) {
    struct CacheLauncher {
        const char *name;
        kl_status (*get)(kl_kernel *, const kl_module *);
        kl_status (*launch)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, kl_bf16 *, uint32_t,
                            uint32_t, uint32_t, uint32_t, kl_stream);
        uint32_t max_dim;  // the seed twin's block max(mla_cache_dim, 256) stops at 1024
    };
    for (const CacheLauncher &l :
         {CacheLauncher{"mla_cache_assemble_batched", kl_mla_cache_assemble_batched_get, kl_mla_cache_assemble_batched,
                        1024},
          CacheLauncher{"mla_cache_assemble_wide", kl_mla_cache_assemble_wide_get, kl_mla_cache_assemble_wide,
                        0xffffffffu}}) {
        kl_kernel k;
        KL_EMU_ASSERT_OK(l.get(&k, mod()));
        emu_test::ExtentsReached ext(l.name);
        uint32_t seed = 400;
        // num_tokens, kv_lora, rope, misalign
        for (const CacheCase &c : {CacheCase{1, 256, 64, 0}, CacheCase{3, 512, 64, 0}, CacheCase{3, 5, 3, 0},
                                   CacheCase{9, 6, 2, 0}, CacheCase{5, 12, 4, 0}, CacheCase{5, 512, 64, 1},
                                   CacheCase{4, 0, 8, 0}, CacheCase{4, 16, 0, 0}, CacheCase{7, 512, 64, 0},
                                   CacheCase{8, 256, 64, 0}, CacheCase{9, 512, 64, 0}, CacheCase{16, 256, 64, 1},
                                   CacheCase{2, 1000, 24, 0}, CacheCase{2, 2000, 48, 0}}) {
            if (c.dim() > l.max_dim) continue;
            SCOPED_TRACE(std::string(l.name) + ", " + describe(c) + (v_has_rope() ? " (V has k_rope)" : " (V has zeros)"));
            std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
            auto latent = random_input((size_t)c.num_tokens * c.kv_lora, c.misalign, gen, "kv_latent");
            auto rope = random_input((size_t)c.num_tokens * c.rope, c.misalign, gen, "k_rope");
            auto kc = output((size_t)c.num_tokens * c.dim(), c.misalign, "k_cache");
            auto vc = output((size_t)c.num_tokens * c.dim(), c.misalign, "v_cache");
            std::vector<kl_bf16> want_k = poison(kc->size()), want_v = poison(vc->size());
            ref_cache_assemble(latent->data(), rope->data(), want_k.data(), want_v.data(), c, v_has_rope());
            KL_EMU_ASSERT_OK(l.launch(&k, latent->data(), rope->data(), kc->data(), vc->data(), c.num_tokens,
                                      c.kv_lora, c.rope, c.dim(), nullptr));
            EXPECT_TRUE(bit_equal("k_cache", *kc, want_k));
            EXPECT_TRUE(bit_equal("v_cache", *vc, want_v));
            // The extents are tight (contract 4): both inputs are read whole,
            // both cache rows written whole (V's rope part as zeros or k_rope).
            EXPECT_TRUE(ext.add());
        }
        EXPECT_TRUE(ext.all());
    }
}

// ---- kernel 6 -----------------------------------------------------------------------

TEST_P(MlaDataMovementEmulated, QFinalAssembleConcatenatesAbsorbedAndRope) {
    typedef kl_status (*QFinalFn)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                                  uint32_t, uint32_t, uint32_t, kl_stream);
    struct QFinalLauncher {
        const char *name;
        GetFn get;
        QFinalFn launch;
    };
    for (const QFinalLauncher &l :
         {QFinalLauncher{"mla_q_final_assemble_batched", kl_mla_q_final_assemble_batched_get,
                         kl_mla_q_final_assemble_batched},
          QFinalLauncher{"mla_q_final_assemble_wide", kl_mla_q_final_assemble_wide_get, kl_mla_q_final_assemble_wide}}) {
        kl_kernel k;
        KL_EMU_ASSERT_OK(l.get(&k, mod()));
        emu_test::ExtentsReached ext(l.name);
        uint32_t seed = 600;
        // num_tokens, nq, kv_lora, rope, misalign
        for (const QFinalCase &c : {QFinalCase{1, 1, 512, 64, 0}, QFinalCase{3, 3, 5, 3, 0},
                                    QFinalCase{3, 8, 256, 64, 0}, QFinalCase{5, 2, 0, 3, 0},
                                    QFinalCase{5, 2, 4, 0, 0}, QFinalCase{3, 8, 512, 64, 1},
                                    QFinalCase{4, 1, 448, 64, 0}, QFinalCase{129, 1, 8, 8, 0},
                                    QFinalCase{171, 4, 2, 1, 0}}) {
            SCOPED_TRACE(std::string(l.name) + ", " + describe(c));
            std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
            auto absorbed = random_input((size_t)c.num_tokens * c.nq * c.kv_lora, c.misalign, gen, "q_absorbed");
            auto rope = random_input((size_t)c.num_tokens * c.nq * c.rope, c.misalign, gen, "q_rope");
            auto out = output((size_t)c.num_tokens * c.nq * c.dim(), c.misalign, "q_final");
            std::vector<kl_bf16> want = poison(out->size());
            ref_q_final_assemble(absorbed->data(), rope->data(), want.data(), c);
            KL_EMU_ASSERT_OK(l.launch(&k, absorbed->data(), rope->data(), out->data(), c.num_tokens, c.nq, c.kv_lora,
                                      c.rope, c.dim(), nullptr));
            EXPECT_TRUE(bit_equal("q_final", *out, want));
            EXPECT_TRUE(ext.add());  // both inputs read whole, q_final written whole (contract 6)
        }
        EXPECT_TRUE(ext.all());
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaDataMovementEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

}  // namespace
