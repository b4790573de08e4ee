// GPU tests of the MLA prefill family's data-movement kernels against CPU
// references written from ../shared/notes/kernel-contract.md:
//   1 mla_q_rope_extract_batched      2 mla_q_rope_writeback_batched
//   3 mla_kv_assemble_batched         4 mla_cache_assemble_batched
//   6 mla_q_final_assemble_batched
// in both variants' fatbins (mistral_small_4, deepseek_v4_flash). Kernels
// 1, 2, 4 and 6 run twice per case: the seed-grid launcher (_batched) and its
// wide twin (_wide: the same contract on one block per 2048 elements, or, for
// kernel 4, per 8 tokens).
//
// Data movement must be bit-exact: inputs are random 16-bit patterns (NaNs,
// infinities, subnormals and -0 included, so a kernel that converts through
// float would show), never 0xFFFF, the poison every output starts with. Each
// device buffer has guard elements on both sides; after a launch the WHOLE
// allocation is compared with the expected one, so every element the
// contract names must hold its value and every other element (guards,
// padding columns, the untouched parts of q_full) must be unchanged.
//
// Sizes are odd on purpose (num_tokens 1, 3, 17, 257; heads 1, 3, 16; dims
// such as nope 5, rope 3), strides are padded, and some buffers start off a
// 16-byte boundary, so the kernels' 16-, 8-, 4- and 2-byte copy paths all
// run. The *PastTwoTo32* tests index more than 2^32 elements (about 30 GB of
// device memory; they skip when the device has less free).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/mla_prefill_fatbins.h"
#include "klaunch/mla_prefill.h"
#include "tests/mla_prefill/mla_data_movement_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
// The CPU references, from the contract, and bits(): mla_data_movement_reference.h.
using namespace mla_dm_ref;

// ---- variants, as the contract's table states them -------------------------

struct Variant {
    const char *name;
    const unsigned char *image;
    size_t size;
    int64_t mla_hdim;  // kv_lora + rope of the model
    bool v_has_rope;   // kernel 4: V cache row is [kv_latent | k_rope] (else | 0)
};

const Variant &variant(int i) {
    static const Variant kVariants[] = {
        {"mistral_small_4", kl_fatbin_mla_prefill_mistral_small_4, kl_fatbin_mla_prefill_mistral_small_4_size, 320,
         false},
        {"deepseek_v4_flash", kl_fatbin_mla_prefill_deepseek_v4_flash, kl_fatbin_mla_prefill_deepseek_v4_flash_size,
         576, true},
    };
    return kVariants[i];
}
constexpr int kNumVariants = 2;

// ---- host data -----------------------------------------------------------------

constexpr uint16_t kPoison = 0xFFFF;  // what DeviceBuffer::poison() writes (bytes 0xFF)
constexpr size_t kGuard = 8;          // guard elements on each side: 16 bytes, keeps alignment

// Any 16-bit pattern but the poison.
std::vector<kl_bf16> random_bits(size_t n, std::mt19937 &gen) {
    std::uniform_int_distribution<uint32_t> dist(0, 0xFFFE);
    std::vector<kl_bf16> out(n);
    for (kl_bf16 &v : out) v = bits(static_cast<uint16_t>(dist(gen)));
    return out;
}

// A device allocation of `count` elements a kernel sees, with kGuard
// elements after it and kGuard + `misalign` before it (misalign shifts the
// start off a 16-byte boundary). `host` mirrors the whole allocation.
struct Region {
    Region(size_t count, size_t misalign) : count(count), front(kGuard + misalign), buf(front + count + kGuard) {}

    // Inputs: random everywhere, guards included, then uploaded.
    void fill_random(std::mt19937 &gen) {
        host = random_bits(buf.size(), gen);
        buf.upload(host);
    }
    // Outputs: all poison on the device and in the host mirror.
    void poison() {
        buf.poison();
        host.assign(buf.size(), bits(kPoison));
    }
    kl_bf16 *ptr() const { return buf.get() + front; }
    kl_bf16 *host_ptr() { return host.data() + front; }  // the mirror at ptr()'s element

    size_t count, front;
    DeviceBuffer<kl_bf16> buf;
    std::vector<kl_bf16> host;
};

// ---- the launchers of kernels 1, 2 and 6: seed grid and wide grid ---------------------

typedef kl_status (*GetFn)(kl_kernel *, const kl_module *);
typedef kl_status (*RopeFn)(const kl_kernel *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t, uint32_t, uint32_t,
                            uint32_t, uint32_t, kl_stream);
typedef kl_status (*QFinalFn)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                              uint32_t, uint32_t, uint32_t, kl_stream);
struct RopeLauncher {
    const char *name;
    GetFn get;
    RopeFn launch;
};
struct QFinalLauncher {
    const char *name;
    GetFn get;
    QFinalFn launch;
};
const RopeLauncher kExtractLaunchers[] = {
    {"mla_q_rope_extract_batched", kl_mla_q_rope_extract_batched_get, kl_mla_q_rope_extract_batched},
    {"mla_q_rope_extract_wide", kl_mla_q_rope_extract_wide_get, kl_mla_q_rope_extract_wide},
};
const RopeLauncher kWritebackLaunchers[] = {
    {"mla_q_rope_writeback_batched", kl_mla_q_rope_writeback_batched_get, kl_mla_q_rope_writeback_batched},
    {"mla_q_rope_writeback_wide", kl_mla_q_rope_writeback_wide_get, kl_mla_q_rope_writeback_wide},
};
const QFinalLauncher kQFinalLaunchers[] = {
    {"mla_q_final_assemble_batched", kl_mla_q_final_assemble_batched_get, kl_mla_q_final_assemble_batched},
    {"mla_q_final_assemble_wide", kl_mla_q_final_assemble_wide_get, kl_mla_q_final_assemble_wide},
};

// ---- the fixture: one variant's module per test ------------------------------------

class MlaDataMovement : public ::testing::TestWithParam<int> {
  protected:
    void SetUp() override {
        KL_TEST_REQUIRE_GPU();
        const Variant &v = variant(GetParam());
        ASSERT_GT(v.size, 0u) << "the " << v.name
                              << " fatbin is empty: it was built without a CUDA toolkit (see bazel/cuda_configure.bzl)";
        mod_.reset(new kl_test::Module(v.image, v.size));
    }
    const Variant &var() const { return variant(GetParam()); }
    const kl_module *mod() const { return mod_->get(); }

    std::unique_ptr<kl_test::Module> mod_;
};

std::string variant_name(const ::testing::TestParamInfo<int> &info) { return variant(info.param).name; }

INSTANTIATE_TEST_SUITE_P(Variants, MlaDataMovement, ::testing::Range(0, kNumVariants), variant_name);

// ---- variant check ---------------------------------------------------------------------

TEST_P(MlaDataMovement, ModuleIsTheVariantTheContractNamesAndHoldsEveryKernel) {
    const kl_module *m = mod();
    EXPECT_STREQ(m->family, "mla_prefill");
    EXPECT_STREQ(m->variant, var().name);
    int64_t hdim = -1, v_has_rope = -1;
    ASSERT_TRUE(kl_module_const(m, "MLA_HDIM", &hdim)) << var().name << " carries no MLA_HDIM";
    ASSERT_TRUE(kl_module_const(m, "MLA_V_HAS_ROPE", &v_has_rope)) << var().name << " carries no MLA_V_HAS_ROPE";
    EXPECT_EQ(hdim, var().mla_hdim);
    EXPECT_EQ(v_has_rope, var().v_has_rope ? 1 : 0);

    kl_kernel k;
    KL_EXPECT_OK(kl_mla_q_rope_extract_batched_get(&k, m));
    KL_EXPECT_OK(kl_mla_q_rope_writeback_batched_get(&k, m));
    KL_EXPECT_OK(kl_mla_kv_assemble_batched_get(&k, m));
    KL_EXPECT_OK(kl_mla_cache_assemble_batched_get(&k, m));
    KL_EXPECT_OK(kl_mla_q_final_assemble_batched_get(&k, m));
    KL_EXPECT_OK(kl_mla_q_rope_extract_wide_get(&k, m));
    KL_EXPECT_OK(kl_mla_q_rope_writeback_wide_get(&k, m));
    KL_EXPECT_OK(kl_mla_q_final_assemble_wide_get(&k, m));
    KL_EXPECT_OK(kl_mla_cache_assemble_wide_get(&k, m));
}

// ---- kernel 1 and 2 ------------------------------------------------------------------------

const RopeCase kRopeCases[] = {
    {1, 1, 128, 64, 0, 0},     // one token, one head, the models' nope/rope
    {3, 3, 5, 3, 7, 0},        // odd head parts, padded rows
    {17, 16, 128, 64, 0, 0},   // many heads, dense rows
    {257, 3, 5, 3, 1, 0},      // crosses blocks at odd element counts
    {257, 16, 128, 64, 64, 0}, // q_dim larger than nq*hd
    {17, 3, 0, 1, 2, 0},       // no nope part, one rope element
    {17, 16, 128, 64, 3, 1},   // buffers start 2 bytes off alignment
    // for the wide launchers' block edges: exactly 2048 elements (one wide
    // block), 2048 + 8 (a second block with one chunk), 16-byte path
    {16, 2, 0, 64, 0, 0},
    {257, 1, 8, 8, 0, 0},
    {129, 16, 8, 1, 0, 0},     // 2064 elements, 2-byte path, a short second block
};

TEST_P(MlaDataMovement, RopeExtractCopiesEachHeadsRopeSlice) {
  for (const RopeLauncher &l : kExtractLaunchers) {
    SCOPED_TRACE(l.name);
    kl_kernel k;
    KL_ASSERT_OK(l.get(&k, mod()));
    uint32_t seed = 100 + GetParam();
    for (const RopeCase &c : kRopeCases) {
        SCOPED_TRACE(describe(c) + ", seed " + std::to_string(seed));
        std::mt19937 gen(seed++);
        Region q_full((size_t)c.num_tokens * c.q_dim(), c.misalign);
        Region out((size_t)c.num_tokens * c.nq * c.rope, c.misalign);
        q_full.fill_random(gen);
        out.poison();
        std::vector<kl_bf16> want = out.host;
        ref_rope_extract(q_full.host_ptr(), want.data() + out.front, c);

        KL_ASSERT_OK(l.launch(&k, q_full.ptr(), out.ptr(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope, c.q_dim(),
                              nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(kl_test::bitwise_equal("q_rope_out (with guards)", out.buf.download(), want));
        EXPECT_TRUE(kl_test::bitwise_equal("q_full (input)", q_full.buf.download(), q_full.host));
    }
  }
}

TEST_P(MlaDataMovement, RopeWritebackChangesOnlyTheRopeSlices) {
  for (const RopeLauncher &l : kWritebackLaunchers) {
    SCOPED_TRACE(l.name);
    kl_kernel k;
    KL_ASSERT_OK(l.get(&k, mod()));
    uint32_t seed = 200 + GetParam();
    for (const RopeCase &c : kRopeCases) {
        SCOPED_TRACE(describe(c) + ", seed " + std::to_string(seed));
        std::mt19937 gen(seed++);
        Region in((size_t)c.num_tokens * c.nq * c.rope, c.misalign);
        Region q_full((size_t)c.num_tokens * c.q_dim(), c.misalign);
        in.fill_random(gen);
        // q_full starts random (not poison): the elements the kernel must not
        // touch keep values that a stray write would very likely change.
        q_full.fill_random(gen);
        // A rope element whose new value equals its old one would hide a
        // missed write: make every old value differ from the one coming in.
        for (uint64_t t = 0; t < c.num_tokens; t++)
            for (uint64_t h = 0; h < c.nq; h++)
                for (uint64_t r = 0; r < c.rope; r++) {
                    kl_bf16 &old = q_full.host_ptr()[t * c.q_dim() + h * c.hd() + c.nope + r];
                    if (old.bits == in.host_ptr()[(t * c.nq + h) * c.rope + r].bits)
                        old.bits = static_cast<uint16_t>(old.bits == 0 ? 1 : old.bits - 1);
                }
        q_full.buf.upload(q_full.host);
        std::vector<kl_bf16> want = q_full.host;
        ref_rope_writeback(in.host_ptr(), want.data() + q_full.front, c);

        KL_ASSERT_OK(l.launch(&k, in.ptr(), q_full.ptr(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope, c.q_dim(),
                              nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(kl_test::bitwise_equal("q_full (with guards)", q_full.buf.download(), want));
        EXPECT_TRUE(kl_test::bitwise_equal("q_rope_in (input)", in.buf.download(), in.host));
    }
  }
}

// ---- kernel 3 ----------------------------------------------------------------------------------

const KvCase kKvCases[] = {
    {1, 1, 128, 128, 64, 0, 0},    // one token, the models' dims: 16-byte path
    {3, 3, 5, 7, 3, 5, 0},         // odd dims and stride: 2-byte path
    {17, 16, 128, 128, 64, 0, 0},  // many heads, dense rows: 16-byte path
    {257, 2, 128, 128, 64, 8, 0},  // padded stride, still 16-byte aligned
    {257, 3, 128, 96, 64, 3, 0},   // v_dim != nope; odd stride: 2-byte path
    {3, 2, 6, 10, 2, 2, 0},        // 4-byte path
    {5, 3, 4, 4, 4, 4, 0},         // 8-byte path
    {17, 16, 128, 128, 64, 0, 1},  // buffers 2 bytes off alignment: 2-byte path
    {17, 16, 128, 128, 64, 0, 4},  // buffers 8 bytes off alignment: 8-byte path
    {3, 1, 0, 8, 8, 0, 0},         // no k_nope
    {3, 2, 8, 0, 8, 1, 0},         // no v (v_out gets nothing)
};

TEST_P(MlaDataMovement, KvAssembleBuildsKAndVPerHead) {
    kl_kernel k;
    KL_ASSERT_OK(kl_mla_kv_assemble_batched_get(&k, mod()));
    uint32_t seed = 300 + GetParam();
    for (const KvCase &c : kKvCases) {
        SCOPED_TRACE(describe(c) + ", seed " + std::to_string(seed));
        std::mt19937 gen(seed++);
        Region kv((size_t)c.num_tokens * c.stride(), c.misalign);
        Region k_rope((size_t)c.num_tokens * c.rope, c.misalign);
        Region k_out((size_t)c.num_tokens * c.nkv * c.hd(), c.misalign);
        Region v_out((size_t)c.num_tokens * c.nkv * c.v_dim, c.misalign);
        kv.fill_random(gen);
        k_rope.fill_random(gen);
        k_out.poison();
        v_out.poison();
        std::vector<kl_bf16> want_k = k_out.host, want_v = v_out.host;
        ref_kv_assemble(kv.host_ptr(), k_rope.host_ptr(), want_k.data() + k_out.front, want_v.data() + v_out.front,
                        c);

        KL_ASSERT_OK(kl_mla_kv_assemble_batched(&k, kv.ptr(), k_rope.ptr(), k_out.ptr(), v_out.ptr(), c.num_tokens,
                                                c.nkv, c.nope, c.v_dim, c.rope, c.hd(), c.stride(), nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(kl_test::bitwise_equal("k_out (with guards)", k_out.buf.download(), want_k));
        EXPECT_TRUE(kl_test::bitwise_equal("v_out (with guards)", v_out.buf.download(), want_v));
    }
}

// ---- kernel 4 ----------------------------------------------------------------------------------

const CacheCase kCacheCases[] = {
    {1, 256, 64, 0},   // mistral_small_4's row, one token
    {3, 512, 64, 0},   // deepseek_v4_flash's row (block 576)
    {17, 256, 64, 0},
    {257, 512, 64, 0},
    {3, 5, 3, 0},      // odd: 2-byte path
    {17, 6, 2, 0},     // 4-byte path
    {5, 12, 4, 0},     // 8-byte path
    {2, 1000, 24, 0},  // mla_cache_dim 1024: the seed twin's largest block
    {17, 512, 64, 1},  // buffers 2 bytes off alignment
    {4, 0, 8, 0},      // no latent part
    {4, 16, 0, 0},     // no rope part
    // the wide launcher's block edges (8 tokens a block), both paths
    {7, 512, 64, 0},
    {8, 256, 64, 0},
    {9, 512, 64, 0},
    {15, 256, 64, 1},
    {16, 512, 64, 1},
    {23, 13, 7, 0},
    {2, 2000, 48, 0},  // mla_cache_dim 2048: the wide launcher only (the twin's block would be 2048)
    {9, 1021, 3, 1},
};

// Kernel 4's two launchers: the seed grid and the wide grid (one block per
// 8 tokens); same C signature.
struct CacheLauncher {
    const char *name;
    kl_status (*get)(kl_kernel *, const kl_module *);
    kl_status (*launch)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, kl_bf16 *, uint32_t,
                        uint32_t, uint32_t, uint32_t, kl_stream);
    uint32_t max_dim; // the seed twin's block max(mla_cache_dim, 256) stops at 1024
};
const CacheLauncher kCacheLaunchers[] = {
    {"mla_cache_assemble_batched", kl_mla_cache_assemble_batched_get, kl_mla_cache_assemble_batched, 1024},
    {"mla_cache_assemble_wide", kl_mla_cache_assemble_wide_get, kl_mla_cache_assemble_wide, 0xffffffffu},
};

TEST_P(MlaDataMovement, CacheAssembleWritesTheVariantsVRopePart) {
    for (const CacheLauncher &l : kCacheLaunchers) {
        kl_kernel k;
        KL_ASSERT_OK(l.get(&k, mod()));
        uint32_t seed = 400 + GetParam();
        for (const CacheCase &c : kCacheCases) {
            if (c.dim() > l.max_dim) continue;
            SCOPED_TRACE(std::string(l.name) + ", " + describe(c) + ", " + var().name +
                         (var().v_has_rope ? " (V has k_rope)" : " (V has zeros)") + ", seed " +
                         std::to_string(seed));
            std::mt19937 gen(seed++);
            Region latent((size_t)c.num_tokens * c.kv_lora, c.misalign);
            Region rope((size_t)c.num_tokens * c.rope, c.misalign);
            Region k_cache((size_t)c.num_tokens * c.dim(), c.misalign);
            Region v_cache((size_t)c.num_tokens * c.dim(), c.misalign);
            latent.fill_random(gen);
            rope.fill_random(gen);
            k_cache.poison();
            v_cache.poison();
            std::vector<kl_bf16> want_k = k_cache.host, want_v = v_cache.host;
            ref_cache_assemble(latent.host_ptr(), rope.host_ptr(), want_k.data() + k_cache.front,
                               want_v.data() + v_cache.front, c, var().v_has_rope);

            KL_ASSERT_OK(l.launch(&k, latent.ptr(), rope.ptr(), k_cache.ptr(), v_cache.ptr(), c.num_tokens,
                                  c.kv_lora, c.rope, c.dim(), nullptr));
            kl_test::synchronize();
            EXPECT_TRUE(kl_test::bitwise_equal("k_cache (with guards)", k_cache.buf.download(), want_k));
            EXPECT_TRUE(kl_test::bitwise_equal("v_cache (with guards)", v_cache.buf.download(), want_v));
        }
    }
}

// ---- kernel 6 ----------------------------------------------------------------------------------

const QFinalCase kQFinalCases[] = {
    {1, 1, 512, 64, 0},
    {3, 3, 5, 3, 0},
    {17, 16, 256, 64, 0},
    {257, 3, 512, 64, 0},
    {257, 16, 7, 1, 0},
    {5, 2, 0, 3, 0},       // no absorbed part
    {5, 2, 4, 0, 0},       // no rope part
    {17, 16, 512, 64, 1},  // buffers 2 bytes off alignment
    // the wide launchers' block edges: 2048 elements, 2048 + 16 (16-byte
    // path); 2052 elements (2-byte path)
    {4, 1, 448, 64, 0},
    {129, 1, 8, 8, 0},
    {171, 4, 2, 1, 0},
};

TEST_P(MlaDataMovement, QFinalAssembleConcatenatesAbsorbedAndRope) {
  for (const QFinalLauncher &l : kQFinalLaunchers) {
    SCOPED_TRACE(l.name);
    kl_kernel k;
    KL_ASSERT_OK(l.get(&k, mod()));
    uint32_t seed = 600 + GetParam();
    for (const QFinalCase &c : kQFinalCases) {
        SCOPED_TRACE(describe(c) + ", seed " + std::to_string(seed));
        std::mt19937 gen(seed++);
        Region absorbed((size_t)c.num_tokens * c.nq * c.kv_lora, c.misalign);
        Region rope((size_t)c.num_tokens * c.nq * c.rope, c.misalign);
        Region out((size_t)c.num_tokens * c.nq * c.dim(), c.misalign);
        absorbed.fill_random(gen);
        rope.fill_random(gen);
        out.poison();
        std::vector<kl_bf16> want = out.host;
        ref_q_final_assemble(absorbed.host_ptr(), rope.host_ptr(), want.data() + out.front, c);

        KL_ASSERT_OK(l.launch(&k, absorbed.ptr(), rope.ptr(), out.ptr(), c.num_tokens, c.nq, c.kv_lora, c.rope,
                              c.dim(), nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(kl_test::bitwise_equal("q_final (with guards)", out.buf.download(), want));
    }
  }
}

// ---- empty launches ----------------------------------------------------------------------------

TEST_P(MlaDataMovement, EmptyLaunchSucceedsAndWritesNothing) {
    std::mt19937 gen(700 + GetParam());
    Region in_a(4096, 0), in_b(4096, 0), out_a(4096, 0), out_b(4096, 0);
    in_a.fill_random(gen);
    in_b.fill_random(gen);
    out_a.fill_random(gen);
    out_b.fill_random(gen);
    kl_kernel k;

    KL_ASSERT_OK(kl_mla_q_rope_extract_batched_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_rope_extract_batched(&k, in_a.ptr(), out_a.ptr(), 0, 16, 192, 128, 64, 3072, nullptr));
    KL_ASSERT_OK(kl_mla_q_rope_writeback_batched_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_rope_writeback_batched(&k, in_a.ptr(), out_a.ptr(), 0, 16, 192, 128, 64, 3072, nullptr));
    KL_ASSERT_OK(kl_mla_kv_assemble_batched_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_kv_assemble_batched(&k, in_a.ptr(), in_b.ptr(), out_a.ptr(), out_b.ptr(), 0, 16, 128, 128,
                                            64, 192, 4096, nullptr));
    KL_ASSERT_OK(kl_mla_cache_assemble_batched_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_cache_assemble_batched(&k, in_a.ptr(), in_b.ptr(), out_a.ptr(), out_b.ptr(), 0, 256, 64, 320,
                                               nullptr));
    KL_ASSERT_OK(kl_mla_q_final_assemble_batched_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_final_assemble_batched(&k, in_a.ptr(), in_b.ptr(), out_a.ptr(), 0, 16, 512, 64, 576,
                                                 nullptr));
    KL_ASSERT_OK(kl_mla_q_rope_extract_wide_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_rope_extract_wide(&k, in_a.ptr(), out_a.ptr(), 0, 16, 192, 128, 64, 3072, nullptr));
    KL_ASSERT_OK(kl_mla_q_rope_writeback_wide_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_rope_writeback_wide(&k, in_a.ptr(), out_a.ptr(), 16, 0, 192, 128, 64, 3072, nullptr));
    KL_ASSERT_OK(kl_mla_q_final_assemble_wide_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_q_final_assemble_wide(&k, in_a.ptr(), in_b.ptr(), out_a.ptr(), 0, 16, 512, 64, 576,
                                              nullptr));
    KL_ASSERT_OK(kl_mla_cache_assemble_wide_get(&k, mod()));
    KL_EXPECT_OK(kl_mla_cache_assemble_wide(&k, in_a.ptr(), in_b.ptr(), out_a.ptr(), out_b.ptr(), 0, 256, 64, 320,
                                            nullptr));
    kl_test::synchronize();
    EXPECT_TRUE(kl_test::bitwise_equal("out_a", out_a.buf.download(), out_a.host));
    EXPECT_TRUE(kl_test::bitwise_equal("out_b", out_b.buf.download(), out_b.host));
}

// ---- more than 2^32 elements -------------------------------------------------------------------
//
// A 32-bit index would wrap: the last elements would land on the first ones
// and the tail stay poisoned. Buffers this large cannot be filled from the
// host quickly, so each input is a byte pattern (cuMemsetD8) with random
// windows uploaded at its head and tail, and only the output's head and tail
// windows are read back; the reference reads the same "virtual" input.

constexpr uint8_t kFillByte = 0x3C;  // bf16 0x3C3C (about 0.0115)
constexpr size_t kInWindow = size_t(4) << 20;   // elements of random data at each end of an input
constexpr size_t kOutWindow = size_t(1) << 20;  // elements checked at each end of an output

// An input of n elements: random at both ends, kFillByte in between.
struct BigInput {
    BigInput(size_t n, std::mt19937 &gen) : n(n), buf(n), head(random_bits(kInWindow, gen)), tail(random_bits(kInWindow, gen)) {
        buf.poison(kFillByte);
        kl_test::check(kl_cuda_memcpy_htod(kl_test::gpu(), buf.get(), head.data(), kInWindow * sizeof(kl_bf16)),
                       "upload head");
        kl_test::check(kl_cuda_memcpy_htod(kl_test::gpu(), buf.get() + (n - kInWindow), tail.data(),
                                           kInWindow * sizeof(kl_bf16)),
                       "upload tail");
    }
    kl_bf16 at(uint64_t i) const {
        if (i < kInWindow) return head[i];
        if (i >= n - kInWindow) return tail[i - (n - kInWindow)];
        return bits(static_cast<uint16_t>(kFillByte << 8 | kFillByte));
    }
    size_t n;
    DeviceBuffer<kl_bf16> buf;
    std::vector<kl_bf16> head, tail;
};

std::vector<kl_bf16> download_range(const DeviceBuffer<kl_bf16> &buf, size_t first, size_t count) {
    std::vector<kl_bf16> host(count);
    kl_test::check(kl_cuda_memcpy_dtoh(kl_test::gpu(), host.data(), buf.get() + first, count * sizeof(kl_bf16)),
                   "download range");
    return host;
}

// Skips unless the device has `bytes` free, plus room to spare.
bool have_device_memory(size_t bytes, std::string *why) {
    typedef int (*MemGetInfo)(size_t *, size_t *);
    MemGetInfo mem_get_info = reinterpret_cast<MemGetInfo>(kl_cuda_backend_symbol(kl_test::gpu(), "cuMemGetInfo_v2"));
    size_t free_bytes = 0, total_bytes = 0;
    if (mem_get_info == nullptr || mem_get_info(&free_bytes, &total_bytes) != 0) {
        *why = "cuMemGetInfo_v2 is unavailable or failed";
        return false;
    }
    if (free_bytes < bytes + (size_t(1) << 30)) {
        *why = "needs " + std::to_string(bytes >> 20) + " MiB of device memory, " + std::to_string(free_bytes >> 20) +
               " MiB free";
        return false;
    }
    return true;
}

// nq 3, rope 1: num_tokens*nq*rope = 4294967298 > 2^32, 2-byte path.
// nq 1, nope 8, rope 8, q_dim 16: 2^32 + 8 elements, everything 16-byte
// aligned, so the block-group path (16-byte chunks) runs.
const RopeCase kBigRopeCases[] = {{1431655766u, 3, 1, 1, 1, 0}, {(1u << 29) + 1, 1, 8, 8, 0, 0}};

TEST_P(MlaDataMovement, RopeExtractIndexesPastTwoTo32Elements) {
    for (const RopeCase &c : kBigRopeCases) {
        SCOPED_TRACE(describe(c));
        const size_t n_in = (size_t)c.num_tokens * c.q_dim(), n_out = (size_t)c.num_tokens * c.nq * c.rope;
        ASSERT_GT(n_out, size_t(1) << 32);
        std::string why;
        if (!have_device_memory((n_in + n_out) * sizeof(kl_bf16), &why)) GTEST_SKIP() << why;
        std::mt19937 gen(800 + GetParam());
        BigInput q_full(n_in, gen);
        DeviceBuffer<kl_bf16> out(n_out);
      for (const RopeLauncher &l : kExtractLaunchers) {
        SCOPED_TRACE(l.name);
        kl_kernel k;
        KL_ASSERT_OK(l.get(&k, mod()));
        out.poison();
        KL_ASSERT_OK(l.launch(&k, q_full.buf.get(), out.get(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope, c.q_dim(),
                              nullptr));
        kl_test::synchronize();
        for (size_t first : {size_t(0), n_out - kOutWindow}) {
            std::vector<kl_bf16> want(kOutWindow);
            for (size_t j = 0; j < kOutWindow; j++) {
                const uint64_t i = first + j, r = i % c.rope, h = (i / c.rope) % c.nq, t = i / c.rope / c.nq;
                want[j] = q_full.at(t * c.q_dim() + h * c.hd() + c.nope + r);
            }
            SCOPED_TRACE("output elements from " + std::to_string(first));
            EXPECT_TRUE(kl_test::bitwise_equal("q_rope_out window", download_range(out, first, kOutWindow), want));
        }
      }
    }
}

TEST_P(MlaDataMovement, RopeWritebackIndexesPastTwoTo32Elements) {
    for (const RopeCase &c : kBigRopeCases) {
        SCOPED_TRACE(describe(c));
        const size_t n_in = (size_t)c.num_tokens * c.nq * c.rope, n_q = (size_t)c.num_tokens * c.q_dim();
        ASSERT_GT(n_in, size_t(1) << 32);
        std::string why;
        if (!have_device_memory((n_in + n_q) * sizeof(kl_bf16), &why)) GTEST_SKIP() << why;
        std::mt19937 gen(900 + GetParam());
        BigInput in(n_in, gen);
        DeviceBuffer<kl_bf16> q_full(n_q);
      for (const RopeLauncher &l : kWritebackLaunchers) {
        SCOPED_TRACE(l.name);
        kl_kernel k;
        KL_ASSERT_OK(l.get(&k, mod()));
        q_full.poison();  // the background the kernel must keep outside the rope slices
        KL_ASSERT_OK(l.launch(&k, in.buf.get(), q_full.get(), c.num_tokens, c.nq, c.hd(), c.nope, c.rope, c.q_dim(),
                              nullptr));
        kl_test::synchronize();
        for (size_t first : {size_t(0), n_q - kOutWindow}) {
            std::vector<kl_bf16> want(kOutWindow, bits(kPoison));
            for (size_t j = 0; j < kOutWindow; j++) {
                const uint64_t e = first + j, t = e / c.q_dim(), col = e % c.q_dim();
                if (col >= (uint64_t)c.nq * c.hd() || col % c.hd() < c.nope) continue;
                const uint64_t h = col / c.hd(), r = col % c.hd() - c.nope;
                want[j] = in.at((t * c.nq + h) * c.rope + r);
            }
            SCOPED_TRACE("q_full elements from " + std::to_string(first));
            EXPECT_TRUE(kl_test::bitwise_equal("q_full window", download_range(q_full, first, kOutWindow), want));
        }
      }
    }
}

// nq 1, mla_cache_dim 3: num_tokens*nq*mla_cache_dim = 4294967298 > 2^32,
// 2-byte path; kv_lora 8 + rope 8: 2^32 + 16 elements, block-group path.
const QFinalCase kBigQFinalCases[] = {{1431655766u, 1, 2, 1, 0}, {(1u << 28) + 1, 1, 8, 8, 0}};

TEST_P(MlaDataMovement, QFinalAssembleIndexesPastTwoTo32Elements) {
    for (const QFinalCase &c : kBigQFinalCases) {
        SCOPED_TRACE(describe(c));
        const size_t n_abs = (size_t)c.num_tokens * c.nq * c.kv_lora, n_rope = (size_t)c.num_tokens * c.nq * c.rope,
                     n_out = (size_t)c.num_tokens * c.nq * c.dim();
        ASSERT_GT(n_out, size_t(1) << 32);
        std::string why;
        if (!have_device_memory((n_abs + n_rope + n_out) * sizeof(kl_bf16), &why)) GTEST_SKIP() << why;
        std::mt19937 gen(1000 + GetParam());
        BigInput absorbed(n_abs, gen);
        BigInput rope(n_rope, gen);
        DeviceBuffer<kl_bf16> out(n_out);
      for (const QFinalLauncher &l : kQFinalLaunchers) {
        SCOPED_TRACE(l.name);
        kl_kernel k;
        KL_ASSERT_OK(l.get(&k, mod()));
        out.poison();
        KL_ASSERT_OK(l.launch(&k, absorbed.buf.get(), rope.buf.get(), out.get(), c.num_tokens, c.nq, c.kv_lora, c.rope,
                              c.dim(), nullptr));
        kl_test::synchronize();
        for (size_t first : {size_t(0), n_out - kOutWindow}) {
            std::vector<kl_bf16> want(kOutWindow);
            for (size_t j = 0; j < kOutWindow; j++) {
                const uint64_t i = first + j, th = i / c.dim(), col = i % c.dim();
                want[j] = col < c.kv_lora ? absorbed.at(th * c.kv_lora + col)
                                          : rope.at(th * c.rope + (col - c.kv_lora));
            }
            SCOPED_TRACE("q_final elements from " + std::to_string(first));
            EXPECT_TRUE(kl_test::bitwise_equal("q_final window", download_range(out, first, kOutWindow), want));
        }
      }
    }
}

TEST_P(MlaDataMovement, CacheAssembleIndexesPastTwoTo32Elements) {
    // kv_lora 8 + rope 8: num_tokens*mla_cache_dim = 2^32 + 16 elements per
    // cache, everything 16-byte aligned (the block-group path).
    const CacheCase c = {(1u << 28) + 1, 8, 8, 0};
    const size_t n_lat = (size_t)c.num_tokens * c.kv_lora, n_rope = (size_t)c.num_tokens * c.rope,
                 n_out = (size_t)c.num_tokens * c.dim();
    ASSERT_GT(n_out, size_t(1) << 32);
    std::string why;
    if (!have_device_memory((n_lat + n_rope + 2 * n_out) * sizeof(kl_bf16), &why)) GTEST_SKIP() << why;
    std::mt19937 gen(1100 + GetParam());
    BigInput latent(n_lat, gen);
    BigInput rope(n_rope, gen);
    DeviceBuffer<kl_bf16> k_cache(n_out), v_cache(n_out);
    for (const CacheLauncher &l : kCacheLaunchers) {
        SCOPED_TRACE(l.name);
        kl_kernel k;
        KL_ASSERT_OK(l.get(&k, mod()));
        k_cache.poison();
        v_cache.poison();
        KL_ASSERT_OK(l.launch(&k, latent.buf.get(), rope.buf.get(), k_cache.get(), v_cache.get(), c.num_tokens,
                              c.kv_lora, c.rope, c.dim(), nullptr));
        kl_test::synchronize();
        for (size_t first : {size_t(0), n_out - kOutWindow}) {
            std::vector<kl_bf16> want_k(kOutWindow), want_v(kOutWindow);
            for (size_t j = 0; j < kOutWindow; j++) {
                const uint64_t i = first + j, t = i / c.dim(), col = i % c.dim();
                want_k[j] = col < c.kv_lora ? latent.at(t * c.kv_lora + col) : rope.at(t * c.rope + (col - c.kv_lora));
                want_v[j] = col < c.kv_lora || var().v_has_rope ? want_k[j] : bits(0x0000);
            }
            SCOPED_TRACE("cache elements from " + std::to_string(first));
            EXPECT_TRUE(kl_test::bitwise_equal("k_cache window", download_range(k_cache, first, kOutWindow), want_k));
            EXPECT_TRUE(kl_test::bitwise_equal("v_cache window", download_range(v_cache, first, kOutWindow), want_v));
        }
    }
}

}  // namespace
