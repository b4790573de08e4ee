// The wide data-movement launchers (specs/mla_prefill.yaml, "data-movement
// fast paths"; docs/MLA_PREFILL.md) through the recording backend: each is
// its seed twin's contract, parameters and preconditions on a grid of one
// 256-thread block per 2048 elements. Expectations: the twin's argument
// packing (the seed's, transcribed in mla_prefill_launchers.h), grid x =
// ceil(elements / 2048), block 256, no dynamic shared memory, and every
// precondition refused the way the twin refuses it. mla_cache_assemble_wide
// is one block per 8 tokens, and its arguments are the twin's with
// num_tokens (launch-only there) passed to the kernel.
#include "tests/mla_prefill/mla_prefill_launchers.h"

namespace kltest {
namespace {

// Each fixture keeps its seed twin's arguments and packing and swaps the
// generated functions; WideGrid is the wide launchers' geometry.
struct QRopeExtractWide : QRopeExtract {
    static constexpr const char *kName = "mla_q_rope_extract_wide";
    static constexpr const char *kEntry = "mla_q_rope_extract_wide";
    static const kl_kernel_desc *Desc() { return &kl_mla_q_rope_extract_wide_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_rope_extract_wide_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_rope_extract_wide_check(k, q_full, q_rope_out, num_tokens, nq, hd, nope, rope, q_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_rope_extract_wide(k, q_full, q_rope_out, num_tokens, nq, hd, nope, rope, q_dim, s);
    }
    uint64_t Elements() const { return uint64_t(num_tokens) * nq * rope; }
};

struct QRopeWritebackWide : QRopeWriteback {
    static constexpr const char *kName = "mla_q_rope_writeback_wide";
    static constexpr const char *kEntry = "mla_q_rope_writeback_wide";
    static const kl_kernel_desc *Desc() { return &kl_mla_q_rope_writeback_wide_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_rope_writeback_wide_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_rope_writeback_wide_check(k, q_rope_in, q_full, num_tokens, nq, hd, nope, rope, q_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_rope_writeback_wide(k, q_rope_in, q_full, num_tokens, nq, hd, nope, rope, q_dim, s);
    }
    uint64_t Elements() const { return uint64_t(num_tokens) * nq * rope; }
};

struct QFinalAssembleWide : QFinalAssemble {
    static constexpr const char *kName = "mla_q_final_assemble_wide";
    static constexpr const char *kEntry = "mla_q_final_assemble_wide";
    static const kl_kernel_desc *Desc() { return &kl_mla_q_final_assemble_wide_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_final_assemble_wide_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_final_assemble_wide_check(k, q_absorbed, q_rope, q_final, num_tokens, nq, kv_lora, rope,
                                                  mla_cache_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_final_assemble_wide(k, q_absorbed, q_rope, q_final, num_tokens, nq, kv_lora, rope,
                                            mla_cache_dim, s);
    }
    uint64_t Elements() const { return uint64_t(num_tokens) * nq * mla_cache_dim; }
};

// The one wide launcher whose arguments are not its twin's: num_tokens, the
// seed twin's launch-only grid, is a kernel argument (after v_cache, in the
// parameter order), since a block of 8 tokens may be short.
struct CacheAssembleWide : CacheAssemble {
    static constexpr const char *kName = "mla_cache_assemble_wide";
    static constexpr const char *kEntry = "mla_cache_assemble_wide";
    static const kl_kernel_desc *Desc() { return &kl_mla_cache_assemble_wide_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_cache_assemble_wide_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_cache_assemble_wide_check(k, kv_latent, k_rope, k_cache, v_cache, num_tokens, kv_lora, rope,
                                                mla_cache_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_cache_assemble_wide(k, kv_latent, k_rope, k_cache, v_cache, num_tokens, kv_lora, rope,
                                          mla_cache_dim, s);
    }
    std::vector<unsigned char> WideArgs() const {
        return kltest::SeedArgs().Ptr(kv_latent).Ptr(k_rope).Ptr(k_cache).Ptr(v_cache).U32(num_tokens)
            .U32(kv_lora).U32(rope).U32(mla_cache_dim).bytes();
    }
};

class MlaWide : public ::testing::Test {
  protected:
    RecordHarness h;
    const kl_module *deepseek = h.Load(MlaPrefillModuleText("deepseek_v4_flash"));
    const kl_module *mistral = h.Load(MlaPrefillModuleText("mistral_small_4"));

    template <class L>
    kl_kernel Kernel(const kl_module *m = nullptr) {
        kl_kernel k;
        std::memset(&k, 0, sizeof k);
        kl_status st = L::Get(&k, m ? m : deepseek);
        EXPECT_STREQ("KL_SUCCESS", kl_status_name(st)) << kl_last_error_message();
        return k;
    }
    template <class L>
    static std::string Ref(const std::string &section, const std::string &text) {
        return SpecRef(kMlaSpec, L::kName, {section, text});
    }
    template <class L>
    void ExpectRefuses(const L &a, kl_status st, const std::vector<std::string> &fragments, const std::string &ref) {
        kl_kernel k = Kernel<L>();
        ExpectLauncherRefuses(h, &k, a, st, fragments, ref);
    }
    // One launch on each variant's module: entry, grid ceil(elements / 2048),
    // block 256, the twin's argument bytes, the stream.
    template <class L>
    void ExpectWideLaunch(const L &a, uint64_t want_grid_x) {
        for (const kl_module *m : {deepseek, mistral}) {
            kl_kernel k = Kernel<L>(m);
            h.Clear();
            KL_ASSERT_STATUS(KL_SUCCESS, a.Check(&k)) << kl_last_error_message();
            KL_ASSERT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
            ExpectSeedLaunch(h, L::Desc(), L::kEntry, {want_grid_x, 1, 1}, {256, 1, 1}, a.SeedArgs());
        }
    }
    // The same for mla_cache_assemble_wide: grid ceil(num_tokens / 8).
    void ExpectCacheWideLaunch(const CacheAssembleWide &a, uint64_t want_grid_x) {
        for (const kl_module *m : {deepseek, mistral}) {
            kl_kernel k = Kernel<CacheAssembleWide>(m);
            h.Clear();
            KL_ASSERT_STATUS(KL_SUCCESS, a.Check(&k)) << kl_last_error_message();
            KL_ASSERT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
            ExpectSeedLaunch(h, CacheAssembleWide::Desc(), CacheAssembleWide::kEntry, {want_grid_x, 1, 1},
                             {256, 1, 1}, a.WideArgs());
        }
    }
};

// ---- geometry and arguments ----------------------------------------------------

TEST_F(MlaWide, RopeExtractLaunchesOneBlockPer2048Elements) {
    QRopeExtractWide a; // 37 * 5 * 11 = 2035 elements: one block (the seed twin: 8)
    ASSERT_EQ(2035u, a.Elements());
    ExpectWideLaunch(a, 1);
    a.num_tokens = 38; // 2090: a second, short block
    ExpectWideLaunch(a, 2);
    a.num_tokens = 2048; a.nq = 16; a.rope = 64; a.nope = 128; a.hd = 192; a.q_dim = 3072; // 2^21 elements
    ExpectWideLaunch(a, 1024);
    a.num_tokens = 2049;
    ExpectWideLaunch(a, 1025);
}

TEST_F(MlaWide, RopeWritebackLaunchesOneBlockPer2048Elements) {
    QRopeWritebackWide a; // 41 * 3 * 13 = 1599
    ASSERT_EQ(1599u, a.Elements());
    ExpectWideLaunch(a, 1);
    a.num_tokens = 53; // 2067
    ExpectWideLaunch(a, 2);
    a.num_tokens = 4096; a.nq = 16; a.rope = 64; a.nope = 128; a.hd = 192; a.q_dim = 3072; // 2^22
    ExpectWideLaunch(a, 2048);
}

TEST_F(MlaWide, QFinalAssembleLaunchesOneBlockPer2048Elements) {
    QFinalAssembleWide a; // 3 * 5 * 28 = 420
    ASSERT_EQ(420u, a.Elements());
    ExpectWideLaunch(a, 1);
    a.num_tokens = 2048; a.nq = 16; a.kv_lora = 512; a.rope = 64; a.mla_cache_dim = 576; // 18874368 = 9216 * 2048
    ExpectWideLaunch(a, 9216);
    a.num_tokens = 2047; // 18865152 = 9211 * 2048 + 1024
    ExpectWideLaunch(a, 9212);
    a.nq = 15; // 2047 * 15 * 576 = 17686080 = 8635 * 2048 + 1600
    ExpectWideLaunch(a, 8636);
}

TEST_F(MlaWide, CacheAssembleLaunchesOneBlockPer8Tokens) {
    CacheAssembleWide a; // 13 tokens: two blocks, the second of 5 (the seed twin: 13)
    ExpectCacheWideLaunch(a, 2);
    a.num_tokens = 8;
    ExpectCacheWideLaunch(a, 1);
    a.num_tokens = 1;
    ExpectCacheWideLaunch(a, 1);
    a.num_tokens = 4097; a.kv_lora = 512; a.rope = 64; a.mla_cache_dim = 576;
    ExpectCacheWideLaunch(a, 513);
    // The largest num_tokens: 2^29 blocks, well inside grid x's limit.
    a.num_tokens = 0xffffffffu;
    ExpectCacheWideLaunch(a, 1u << 29);
}

// Block 256 whatever the row: the seed twin's block max(mla_cache_dim, 256)
// refuses rows past 1024 elements, this launcher has no such limit.
TEST_F(MlaWide, CacheAssembleBlockIs256ForAnyRow) {
    CacheAssembleWide a;
    a.kv_lora = 2000; a.rope = 48; a.mla_cache_dim = 2048;
    ExpectCacheWideLaunch(a, 2);
    CacheAssemble twin;
    twin.kv_lora = 2000; twin.rope = 48; twin.mla_cache_dim = 2048;
    kl_kernel k = Kernel<CacheAssemble>();
    h.Clear();
    EXPECT_NE(KL_SUCCESS, twin.Launch(&k, FakeStream()));
}

// Past 2^32 elements the grid is still well inside the CUDA limit, and the
// seed twin's grid would not be: 2^20 * 2^10 * 2^10 elements are 2^32 seed
// blocks, 2^29 wide ones.
TEST_F(MlaWide, RopeExtractGridPastTwoToThe32Elements) {
    QRopeExtractWide a;
    a.num_tokens = 1u << 20;
    a.nq = 1u << 10;
    a.rope = 1u << 10;
    a.nope = 0;
    a.hd = 1u << 10;
    a.q_dim = 1u << 20;
    ExpectWideLaunch(a, 1u << 29);
}

TEST_F(MlaWide, RejectsGridXAboveCudaLimit) {
    QFinalAssembleWide a; // 2^22 * 2^10 * 2^10 / 2048 = 2^31 blocks
    a.num_tokens = 1u << 22;
    a.nq = 1u << 10;
    a.mla_cache_dim = 1u << 10;
    a.kv_lora = (1u << 10) - 64;
    a.rope = 64;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.x", "2147483648", "2147483647", "num_tokens = 4194304"},
                  Ref<QFinalAssembleWide>("grid:", "ceil_div(num_tokens * nq * mla_cache_dim, 2048)"));
    a.num_tokens = (1u << 22) - 1; // (2^22 - 1) * 2^20 / 2^11 = 2^31 - 2^9 blocks
    kl_kernel k = Kernel<QFinalAssembleWide>();
    h.Clear();
    KL_EXPECT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
}

TEST_F(MlaWide, EmptyLaunchesLaunchNothing) {
    {
        QRopeExtractWide a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<QRopeExtractWide>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        QRopeWritebackWide a;
        a.nq = 0;
        kl_kernel k = Kernel<QRopeWritebackWide>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        QFinalAssembleWide a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<QFinalAssembleWide>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        CacheAssembleWide a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<CacheAssembleWide>();
        ExpectEmptyLaunch(h, &k, a);
    }
}

TEST_F(MlaWide, RefusesNullPointers) {
    QRopeExtractWide e;
    e.q_full = nullptr;
    ExpectRefuses(e, KL_ERROR_NULL_POINTER, {"q_full"}, "");
    QRopeWritebackWide w;
    w.q_full = nullptr;
    ExpectRefuses(w, KL_ERROR_NULL_POINTER, {"q_full"}, "");
    QFinalAssembleWide q;
    q.q_rope = nullptr;
    ExpectRefuses(q, KL_ERROR_NULL_POINTER, {"q_rope"}, "");
    CacheAssembleWide c;
    c.v_cache = nullptr;
    ExpectRefuses(c, KL_ERROR_NULL_POINTER, {"v_cache"}, "");
}

// ---- preconditions (the seed twins') ------------------------------------------

TEST_F(MlaWide, RopeExtractRejectsHeadNotNopePlusRope) {
    QRopeExtractWide a;
    a.hd = 19;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"hd == nope + rope", "hd = 19", "nope = 7", "rope = 11", "a head of Q is [nope | rope]"},
                  Ref<QRopeExtractWide>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaWide, RopeExtractRejectsHeadsWiderThanRow) {
    QRopeExtractWide a; // 5 * 18 = 90 > 89
    a.q_dim = 89;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"nq * hd <= q_dim", "nq = 5", "hd = 18", "q_dim = 89"},
                  Ref<QRopeExtractWide>("preconditions:", "nq * hd <= q_dim"));
    a.q_dim = 90;
    ExpectWideLaunch(a, 1);
}

TEST_F(MlaWide, RopeWritebackRejectsHeadNotNopePlusRope) {
    QRopeWritebackWide a;
    a.nope = 5;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"hd == nope + rope", "hd = 19", "nope = 5", "rope = 13"},
                  Ref<QRopeWritebackWide>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaWide, RopeWritebackRejectsHeadsWiderThanRow) {
    QRopeWritebackWide a; // 3 * 19 = 57 > 56
    a.q_dim = 56;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"nq * hd <= q_dim", "q_dim = 56"},
                  Ref<QRopeWritebackWide>("preconditions:", "nq * hd <= q_dim"));
    a.q_dim = 57;
    ExpectWideLaunch(a, 1);
}

TEST_F(MlaWide, QFinalAssembleRejectsRowNotLoraPlusRope) {
    QFinalAssembleWide a;
    a.kv_lora = 16;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"mla_cache_dim == kv_lora + rope", "mla_cache_dim = 28", "kv_lora = 16", "rope = 11"},
                  Ref<QFinalAssembleWide>("preconditions:", "mla_cache_dim == kv_lora + rope"));
}

TEST_F(MlaWide, CacheAssembleRejectsRowNotLoraPlusRope) {
    CacheAssembleWide a;
    a.rope = 12;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"mla_cache_dim == kv_lora + rope", "mla_cache_dim = 28", "kv_lora = 17", "rope = 12",
                   "a cache row is [kv_latent | rope part]"},
                  Ref<CacheAssembleWide>("preconditions:", "mla_cache_dim == kv_lora + rope"));
}

// Coverage guard: a precondition added to a wide launcher fails here until it
// has a test above; and the wide launchers keep exactly their twins' list.
TEST_F(MlaWide, EveryPreconditionOfTheWideLaunchersIsTestedHere) {
    ExpectTestedChecks(QRopeExtractWide::Desc(), {"hd == nope + rope", "nq * hd <= q_dim"});
    ExpectTestedChecks(QRopeWritebackWide::Desc(), {"hd == nope + rope", "nq * hd <= q_dim"});
    ExpectTestedChecks(QFinalAssembleWide::Desc(), {"mla_cache_dim == kv_lora + rope"});
    ExpectTestedChecks(CacheAssembleWide::Desc(), {"mla_cache_dim == kv_lora + rope"});
}

} // namespace
} // namespace kltest
