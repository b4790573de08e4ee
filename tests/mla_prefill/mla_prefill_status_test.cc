// Every way an MLA prefill launcher refuses: the status, a message naming the
// launcher, the offending expression or parameter, its value and the spec's
// file:line, the error callback, kl_X_check agreeing with kl_X, and nothing
// recorded. Values are chosen so that exactly one check fails.
#include <functional>

#include "tests/mla_prefill/mla_prefill_launchers.h"

namespace kltest {
namespace {

class MlaPrefillStatus : public ::testing::Test {
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
    // "specs/mla_prefill.yaml:<line>" of the text, searched after `section`
    // (e.g. "preconditions:") within launcher L.
    template <class L>
    static std::string Ref(const std::string &section, const std::string &text) {
        return SpecRef(kMlaSpec, L::kName, {section, text});
    }
    template <class L>
    static std::string LauncherRef() {
        return SpecRef(kMlaSpec, L::kName, {});
    }
    template <class L>
    void ExpectRefuses(const L &a, kl_status st, const std::vector<std::string> &fragments, const std::string &ref) {
        kl_kernel k = Kernel<L>();
        ExpectLauncherRefuses(h, &k, a, st, fragments, ref);
    }
    template <class L>
    void ExpectAccepts(const L &a, const kl_module *m = nullptr) {
        kl_kernel k = Kernel<L>(m);
        h.Clear();
        KL_EXPECT_STATUS(KL_SUCCESS, a.Check(&k)) << kl_last_error_message();
        KL_EXPECT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
        EXPECT_EQ(1u, h.count());
    }
};

// ---- grid: overflow of 64 bits, of the 32-bit field, CUDA limits -----------

using MlaPrefillGrid = MlaPrefillStatus;

TEST_F(MlaPrefillGrid, RejectsGridXOverflowingSixtyFourBits) {
    QFinalAssemble a; // 2^22 * 2^22 * 2^22 = 2^66
    a.num_tokens = 1u << 22;
    a.nq = 1u << 22;
    a.mla_cache_dim = 1u << 22;
    a.kv_lora = (1u << 22) - 64;
    a.rope = 64;
    ExpectRefuses(a, KL_ERROR_OVERFLOW,
                  {"grid.x", "ceil_div(num_tokens * nq * mla_cache_dim, 256)", "64 bits", "num_tokens = 4194304",
                   "nq = 4194304", "mla_cache_dim = 4194304"},
                  Ref<QFinalAssemble>("grid:", "ceil_div(num_tokens * nq * mla_cache_dim, 256)"));
}

TEST_F(MlaPrefillGrid, RejectsGridXOverflowingThirtyTwoBits) {
    QRopeExtract a; // 2^20 * 2^10 * 2^10 / 256 = 2^32 blocks
    a.num_tokens = 1u << 20;
    a.nq = 1u << 10;
    a.rope = 1u << 10;
    a.nope = 0;
    a.hd = 1u << 10;
    a.q_dim = 1u << 20;
    ExpectRefuses(a, KL_ERROR_OVERFLOW,
                  {"grid.x", "ceil_div(num_tokens * nq * rope, 256)", "4294967296", "num_tokens = 1048576",
                   "nq = 1024", "rope = 1024"},
                  Ref<QRopeExtract>("grid:", "ceil_div(num_tokens * nq * rope, 256)"));
}

TEST_F(MlaPrefillGrid, RejectsGroupedGemmGridXOverflowingThirtyTwoBits) {
    GroupedGemm a; // m * g = 2^32
    a.m = 65536;
    a.g = 65536;
    a.k_g = 1;
    a.n_g = 1;
    a.a_stride = 65536;
    a.c_stride = 65536;
    ExpectRefuses(a, KL_ERROR_OVERFLOW, {"grid.x", "m * g", "4294967296", "m = 65536", "g = 65536"},
                  Ref<GroupedGemm>("grid:", "m * g"));
}

TEST_F(MlaPrefillGrid, RejectsGridXAboveCudaLimit) {
    GroupedGemm a; // m * g = 2^31 > 2^31 - 1
    a.m = 65536;
    a.g = 32768;
    a.k_g = 1;
    a.n_g = 1;
    a.a_stride = 32768;
    a.c_stride = 32768;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.x", "m * g", "2147483648", "2147483647", "m = 65536", "g = 32768"},
                  Ref<GroupedGemm>("grid:", "m * g"));
}

TEST_F(MlaPrefillGrid, RejectsRopeExtractGridXAboveCudaLimit) {
    QRopeExtract a; // 2^19 * 2^10 * 2^10 / 256 = 2^31 blocks
    a.num_tokens = 1u << 19;
    a.nq = 1u << 10;
    a.rope = 1u << 10;
    a.nope = 0;
    a.hd = 1u << 10;
    a.q_dim = 1u << 20;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.x", "2147483648", "2147483647", "num_tokens = 524288"},
                  Ref<QRopeExtract>("grid:", "ceil_div(num_tokens * nq * rope, 256)"));
}

TEST_F(MlaPrefillGrid, AcceptsGridXAtCudaLimit) {
    GroupedGemm a; // m * g = 2^31 - 1
    a.m = 1;
    a.g = 2147483647u;
    a.k_g = 1;
    a.n_g = 1;
    a.a_stride = 2147483647u;
    a.c_stride = 2147483647u;
    ExpectAccepts(a);
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(2147483647u, h.record(0).grid[0]);
}

TEST_F(MlaPrefillGrid, RejectsFusedPrefillGridYAboveCudaLimit) {
    FusedPrefill a;
    a.seq_len = 70000;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.y", "seq_len = 70000", "70000", "65535"},
                  Ref<FusedPrefill>("grid:", "y: seq_len"));
}

TEST_F(MlaPrefillGrid, AcceptsFusedPrefillGridYAtCudaLimit) {
    FusedPrefill a;
    a.seq_len = 65535;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillGrid, RejectsGroupedGemmGridYAboveCudaLimit) {
    GroupedGemm a; // ceil(262141 / 4) = 65536
    a.n_g = 4 * 65535 + 1;
    a.c_stride = 2000000;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.y", "ceil_div(n_g, 4)", "65536", "65535", "n_g = 262141"},
                  Ref<GroupedGemm>("grid:", "ceil_div(n_g, 4)"));
}

TEST_F(MlaPrefillGrid, RejectsAttentionGridYAboveCudaLimit) {
    PrefillAttention a; // ceil((16 * 65535 + 1) / 16) = 65536
    a.seq_len = 16 * 65535 + 1;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.y", "ceil_div(seq_len, 16)", "65536", "seq_len = 1048561"},
                  Ref<PrefillAttention>("grid:", "ceil_div(seq_len, 16)"));
}

TEST_F(MlaPrefillGrid, RejectsAttentionGridZAboveCudaLimit) {
    PrefillAttention a;
    a.batch = 65536;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.z", "batch = 65536", "65536", "65535"},
                  Ref<PrefillAttention>("grid:", "z: batch"));
}

TEST_F(MlaPrefillGrid, AcceptsAttentionGridZAtCudaLimit) {
    PrefillAttention a;
    a.batch = 65535;
    ExpectAccepts(a);
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(65535u, h.record(0).grid[2]);
}

// ---- block -------------------------------------------------------------------

using MlaPrefillBlock = MlaPrefillStatus;

TEST_F(MlaPrefillBlock, RejectsCacheAssembleBlockAbove1024Threads) {
    CacheAssemble a; // max(1025, 256) = 1025 threads
    a.kv_lora = 961;
    a.rope = 64;
    a.mla_cache_dim = 1025;
    ExpectRefuses(a, KL_ERROR_BLOCK_LIMIT,
                  {"block.x", "max(mla_cache_dim, 256)", "1025", "1024", "mla_cache_dim = 1025"},
                  Ref<CacheAssemble>("block:", "max(mla_cache_dim, 256)"));
}

TEST_F(MlaPrefillBlock, AcceptsCacheAssembleBlockOf1024Threads) {
    CacheAssemble a;
    a.kv_lora = 960;
    a.rope = 64;
    a.mla_cache_dim = 1024;
    ExpectAccepts(a);
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(1024u, h.record(0).block[0]);
}

// The function's own limit (cuFuncGetAttribute's MAX_THREADS_PER_BLOCK,
// reported by the backend at kl_X_get) is below the CUDA limit here. It
// bounds the block's thread count, so the message points at the spec's block.
TEST_F(MlaPrefillBlock, RejectsBlockAboveTheFunctionsOwnMaximum) {
    h.backend().max_threads = 128;
    {
        SCOPED_TRACE("q_rope_extract, 256 threads");
        ExpectRefuses(QRopeExtract(), KL_ERROR_BLOCK_LIMIT, {"block", "256", "128"},
                      SpecRef(kMlaSpec, QRopeExtract::kName, {"block:"}));
    }
    {
        SCOPED_TRACE("fused_prefill, 256 threads");
        ExpectRefuses(FusedPrefill(), KL_ERROR_BLOCK_LIMIT, {"block", "256", "128"},
                      SpecRef(kMlaSpec, FusedPrefill::kName, {"block:"}));
    }
    {
        SCOPED_TRACE("attention, 256 threads");
        ExpectRefuses(PrefillAttention(), KL_ERROR_BLOCK_LIMIT, {"block", "256", "128"},
                      SpecRef(kMlaSpec, PrefillAttention::kName, {"block:"}));
    }
}

TEST_F(MlaPrefillBlock, ComparesCacheAssembleBlockWithTheFunctionsOwnMaximum) {
    h.backend().max_threads = 300;
    CacheAssemble a;
    a.kv_lora = 236;
    a.rope = 64;
    a.mla_cache_dim = 300;
    ExpectAccepts(a);
    a.kv_lora = 237;
    a.mla_cache_dim = 301;
    ExpectRefuses(a, KL_ERROR_BLOCK_LIMIT, {"block", "301", "300"}, SpecRef(kMlaSpec, CacheAssemble::kName, {"block:"}));
}

// ---- shared memory -------------------------------------------------------------
// The seed launches every kernel with 0 bytes of dynamic shared memory and the
// spec declares none, so KL_ERROR_SHARED_MEMORY_LIMIT cannot come from these
// launchers: even a function limit of 0 accepts them.

TEST_F(MlaPrefillStatus, LaunchesWithNoDynamicSharedMemoryUnderAZeroLimit) {
    h.backend().max_dynamic_shared = 0;
    ExpectAccepts(QRopeExtract());
    ExpectAccepts(CacheAssemble());
    ExpectAccepts(PrefillAttention());
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(0u, h.record(0).shared_bytes);
}

// ---- preconditions, in spec order ---------------------------------------------

using MlaPrefillPrecondition = MlaPrefillStatus;

TEST_F(MlaPrefillPrecondition, RopeExtractRejectsHeadNotNopePlusRope) {
    QRopeExtract a;
    a.hd = 19;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"hd == nope + rope", "hd = 19", "nope = 7", "rope = 11", "a head of Q is [nope | rope]"},
                  Ref<QRopeExtract>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaPrefillPrecondition, RopeExtractRejectsHeadsWiderThanRow) {
    QRopeExtract a; // 5 * 18 = 90 > 89
    a.q_dim = 89;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"nq * hd <= q_dim", "nq = 5", "hd = 18", "q_dim = 89"},
                  Ref<QRopeExtract>("preconditions:", "nq * hd <= q_dim"));
    a.q_dim = 90;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, RopeWritebackRejectsHeadNotNopePlusRope) {
    QRopeWriteback a;
    a.nope = 5;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"hd == nope + rope", "hd = 19", "nope = 5", "rope = 13"},
                  Ref<QRopeWriteback>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaPrefillPrecondition, RopeWritebackRejectsHeadsWiderThanRow) {
    QRopeWriteback a; // 3 * 19 = 57 > 56
    a.q_dim = 56;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"nq * hd <= q_dim", "q_dim = 56"},
                  Ref<QRopeWriteback>("preconditions:", "nq * hd <= q_dim"));
    a.q_dim = 57;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, KvAssembleRejectsHeadNotNopePlusRope) {
    KvAssemble a;
    a.rope = 12;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"hd == nope + rope", "hd = 18", "rope = 12"},
                  Ref<KvAssemble>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaPrefillPrecondition, KvAssembleRejectsGroupsWiderThanRow) {
    KvAssemble a; // 3 * (7 + 5) = 36 > 35
    a.kv_expanded_stride = 35;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"nkv * (nope + v_dim) <= kv_expanded_stride", "nkv = 3", "v_dim = 5", "kv_expanded_stride = 35"},
                  Ref<KvAssemble>("preconditions:", "nkv * (nope + v_dim) <= kv_expanded_stride"));
    a.kv_expanded_stride = 36;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, CacheAssembleRejectsRowNotLoraPlusRope) {
    CacheAssemble a;
    a.mla_cache_dim = 29;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"mla_cache_dim == kv_lora + rope", "mla_cache_dim = 29", "kv_lora = 17", "rope = 11"},
                  Ref<CacheAssemble>("preconditions:", "mla_cache_dim == kv_lora + rope"));
}

TEST_F(MlaPrefillPrecondition, FusedPrefillRejectsHeadNotNopePlusRope) {
    FusedPrefill a;
    a.hd = 17;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"hd == nope + rope", "hd = 17"},
                  Ref<FusedPrefill>("preconditions:", "hd == nope + rope"));
}

TEST_F(MlaPrefillPrecondition, FusedPrefillRejectsMoreThanOneKvHead) {
    FusedPrefill a;
    a.num_kv_heads = 2;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"num_kv_heads == 1", "num_kv_heads = 2"},
                  Ref<FusedPrefill>("preconditions:", "num_kv_heads == 1"));
}

// The kernel keeps a latent row in registers: 16 columns per lane of a warp.
TEST_F(MlaPrefillPrecondition, FusedPrefillRejectsLatentRowsWiderThan512) {
    FusedPrefill a;
    a.kv_lora = 513;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"kv_lora <= 512", "kv_lora = 513"},
                  Ref<FusedPrefill>("preconditions:", "kv_lora <= 512"));
    a.kv_lora = 512;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, QFinalAssembleRejectsRowNotLoraPlusRope) {
    QFinalAssemble a;
    a.kv_lora = 16;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"mla_cache_dim == kv_lora + rope", "mla_cache_dim = 28", "kv_lora = 16", "rope = 11"},
                  Ref<QFinalAssemble>("preconditions:", "mla_cache_dim == kv_lora + rope"));
}

TEST_F(MlaPrefillPrecondition, GroupedGemmRejectsGroupsWiderThanA) {
    GroupedGemm a; // 5 * 7 = 35 > 34
    a.a_stride = 34;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"g * k_g <= a_stride", "g = 5", "k_g = 7", "a_stride = 34"},
                  Ref<GroupedGemm>("preconditions:", "g * k_g <= a_stride"));
    a.a_stride = 35;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, GroupedGemmRejectsGroupsWiderThanC) {
    GroupedGemm a; // 5 * 11 = 55 > 54
    a.c_stride = 54;
    ExpectRefuses(a, KL_ERROR_PRECONDITION, {"g * n_g <= c_stride", "n_g = 11", "c_stride = 54"},
                  Ref<GroupedGemm>("preconditions:", "g * n_g <= c_stride"));
    a.c_stride = 55;
    ExpectAccepts(a);
}

TEST_F(MlaPrefillPrecondition, AttentionRejectsQueryHeadsNotSharedEvenly) {
    PrefillAttention a;
    a.num_q_heads = 15; // 15 % 7 != 0
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0", "num_q_heads = 15", "num_kv_heads = 7"},
                  Ref<PrefillAttention>("preconditions:", "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0"));
}

// `num_kv_heads >= 1 and ...` guards the modulo: zero KV heads is a failed
// precondition, not a division by zero.
TEST_F(MlaPrefillPrecondition, AttentionRejectsZeroKvHeadsBeforeTheModulo) {
    PrefillAttention a;
    a.num_kv_heads = 0;
    ExpectRefuses(a, KL_ERROR_PRECONDITION,
                  {"num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0", "num_kv_heads = 0"},
                  Ref<PrefillAttention>("preconditions:", "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0"));
}

TEST_F(MlaPrefillPrecondition, EveryPreconditionOfTheSpecIsTestedHere) {
    ExpectTestedChecks(QRopeExtract::Desc(), {"hd == nope + rope", "nq * hd <= q_dim"});
    ExpectTestedChecks(QRopeWriteback::Desc(), {"hd == nope + rope", "nq * hd <= q_dim"});
    ExpectTestedChecks(KvAssemble::Desc(), {"hd == nope + rope", "nkv * (nope + v_dim) <= kv_expanded_stride"});
    ExpectTestedChecks(CacheAssemble::Desc(), {"mla_cache_dim == kv_lora + rope"});
    ExpectTestedChecks(FusedPrefill::Desc(), {"hd == nope + rope", "num_kv_heads == 1", "kv_lora <= 512"});
    ExpectTestedChecks(QFinalAssemble::Desc(), {"mla_cache_dim == kv_lora + rope"});
    ExpectTestedChecks(GroupedGemm::Desc(), {"g * k_g <= a_stride", "g * n_g <= c_stride"});
    ExpectTestedChecks(PrefillAttention::Desc(),
                       {"head_dim == MLA_HDIM", "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0"});
}

// ---- variant -----------------------------------------------------------------------

using MlaPrefillVariant = MlaPrefillStatus;

TEST_F(MlaPrefillVariant, AttentionRejectsHeadDim320OnDeepseekModule) {
    PrefillAttention a;
    a.head_dim = 320;
    ExpectRefuses(a, KL_ERROR_VARIANT_MISMATCH, {"head_dim == MLA_HDIM", "head_dim = 320", "MLA_HDIM = 576"},
                  Ref<PrefillAttention>("preconditions:", "head_dim == MLA_HDIM"));
}

TEST_F(MlaPrefillVariant, AttentionRejectsHeadDim576OnMistralModule) {
    PrefillAttention a; // head_dim 576
    kl_kernel k = Kernel<PrefillAttention>(mistral);
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_VARIANT_MISMATCH,
                          {"head_dim == MLA_HDIM", "head_dim = 576", "MLA_HDIM = 320"},
                          Ref<PrefillAttention>("preconditions:", "head_dim == MLA_HDIM"));
}

// Checks run in the documented order: kernel handle, NULL pointers,
// preconditions in spec order, then grid and block.
TEST_F(MlaPrefillStatus, ReportsTheFirstFailingCheckInDocumentedOrder) {
    kl_kernel k = Kernel<PrefillAttention>();
    PrefillAttention a;
    a.head_dim = 320;  // precondition 1 (variant)
    a.num_kv_heads = 0; // precondition 2
    a.batch = 65536;    // grid z
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_VARIANT_MISMATCH, {"head_dim == MLA_HDIM"}, "");
    a.q = nullptr;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_NULL_POINTER, {" q "}, "");
    ExpectLauncherRefuses(h, nullptr, a, KL_ERROR_KERNEL_NOT_LOADED, {}, "");
    a.q = PrefillAttention().q;
    a.head_dim = 576;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_PRECONDITION, {"num_kv_heads = 0"}, "");
    a.num_kv_heads = 7;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_GRID_LIMIT, {"grid.z"}, "");
}

// ---- modules and kernel handles ----------------------------------------------------

using MlaPrefillGet = MlaPrefillStatus;

// kl_X_get on a module of another family, for every launcher of the family.
TEST_F(MlaPrefillGet, RejectsModuleOfAnotherFamily) {
    const kl_module *decode = h.Load(PagedDecodeModuleText("gqa8_d128"));
    auto expect = [&](const char *name, kl_status (*get)(kl_kernel *, const kl_module *)) {
        SCOPED_TRACE(name);
        kl_kernel k;
        Refusal r = Capture(h, [&] { return get(&k, decode); });
        ExpectRefusal(r, KL_ERROR_FAMILY_MISMATCH,
                      {std::string("kl_") + name + "_get", "paged_decode", "gqa8_d128", "mla_prefill"},
                      SpecRef(kMlaSpec, name, {}), "kl_X_get");
        KL_EXPECT_STATUS(KL_ERROR_KERNEL_NOT_LOADED, QRopeExtract().Check(&k)) << "a refused get left a usable handle";
    };
    expect(QRopeExtract::kName, QRopeExtract::Get);
    expect(QRopeWriteback::kName, QRopeWriteback::Get);
    expect(KvAssemble::kName, KvAssemble::Get);
    expect(CacheAssemble::kName, CacheAssemble::Get);
    expect(FusedPrefill::kName, FusedPrefill::Get);
    expect(QFinalAssemble::kName, QFinalAssemble::Get);
    expect(GroupedGemm::kName, GroupedGemm::Get);
    expect(PrefillAttention::kName, PrefillAttention::Get);
}

// The attention launcher reads MLA_HDIM; a module without it cannot serve it.
TEST_F(MlaPrefillGet, RejectsModuleLackingAConstantTheLauncherReads) {
    const kl_module *bare = h.Load(ModuleText("mla_prefill", "no_hdim", {{"MLA_V_HAS_ROPE", 1}}));
    kl_kernel k;
    Refusal r = Capture(h, [&] { return PrefillAttention::Get(&k, bare); });
    ExpectRefusal(r, KL_ERROR_VARIANT_MISMATCH, {"kl_mla_prefill_attention_320_get", "MLA_HDIM", "no_hdim"},
                  LauncherRef<PrefillAttention>(), "kl_X_get");
    // Launchers that read no constant still load from it.
    kl_kernel other;
    KL_EXPECT_STATUS(KL_SUCCESS, QRopeExtract::Get(&other, bare)) << kl_last_error_message();
}

TEST_F(MlaPrefillGet, RejectsModuleWithoutTheKernelEntry) {
    h.backend().missing_entry = "mla_prefill_attn_320";
    kl_kernel k;
    Refusal r = Capture(h, [&] { return PrefillAttention::Get(&k, deepseek); });
    ExpectRefusal(r, KL_ERROR_KERNEL_NOT_FOUND, {"mla_prefill_attention_320", "mla_prefill_attn_320"}, "", "kl_X_get");
    // The handle of a failed get is not loaded, and saying so is safe.
    ExpectLauncherRefuses(h, &k, PrefillAttention(), KL_ERROR_KERNEL_NOT_LOADED, {}, "");
    // Other entries of the module are still found.
    kl_kernel other;
    KL_EXPECT_STATUS(KL_SUCCESS, QRopeExtract::Get(&other, deepseek)) << kl_last_error_message();
}

TEST_F(MlaPrefillGet, LooksTheAttentionKernelUpByItsEntryNotItsLauncherName) {
    h.backend().missing_entry = "mla_prefill_attention_320"; // the launcher's name, not a kernel
    kl_kernel k;
    KL_EXPECT_STATUS(KL_SUCCESS, PrefillAttention::Get(&k, deepseek)) << kl_last_error_message();
}

using MlaPrefillHandle = MlaPrefillStatus;

TEST_F(MlaPrefillHandle, RejectsNullKernelHandle) {
    ExpectLauncherRefuses(h, nullptr, QRopeExtract(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
    ExpectLauncherRefuses(h, nullptr, KvAssemble(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
    ExpectLauncherRefuses(h, nullptr, PrefillAttention(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
}

TEST_F(MlaPrefillHandle, RejectsHandleThatWasNeverLoaded) {
    kl_kernel zeroed;
    std::memset(&zeroed, 0, sizeof zeroed);
    ExpectLauncherRefuses(h, &zeroed, FusedPrefill(), KL_ERROR_KERNEL_NOT_LOADED, {"not loaded"}, "");
    kl_kernel garbage; // what an uninitialised stack handle may hold
    std::memset(&garbage, 0xa5, sizeof garbage);
    ExpectLauncherRefuses(h, &garbage, GroupedGemm(), KL_ERROR_KERNEL_NOT_LOADED, {"not loaded"}, "");
}

// Writeback and extract take the same arguments; a handle of one must not
// launch the other's kernel.
TEST_F(MlaPrefillHandle, RejectsHandleLoadedForAnotherLauncher) {
    kl_kernel extract = Kernel<QRopeExtract>();
    ExpectLauncherRefuses(h, &extract, QRopeWriteback(), KL_ERROR_INVALID_ARGUMENT,
                          {"kl_mla_q_rope_extract_batched", "mla_q_rope_extract_batched"}, "");
    kl_kernel attention = Kernel<PrefillAttention>();
    ExpectLauncherRefuses(h, &attention, CacheAssemble(), KL_ERROR_INVALID_ARGUMENT,
                          {"kl_mla_prefill_attention_320", "mla_prefill_attn_320"}, "");
}

// ---- NULL device pointers: every pointer of every launcher ----------------------

template <class L>
struct NullCase {
    const char *param;
    std::function<void(L &)> clear;
};
#define KL_NULL_CASE(L, field) NullCase<L>{#field, [](L &a) { a.field = nullptr; }}

class MlaPrefillNullPointer : public MlaPrefillStatus {
  protected:
    template <class L>
    void ExpectEachRejected(const std::vector<NullCase<L>> &cases) {
        kl_kernel k = Kernel<L>();
        for (const NullCase<L> &c : cases) {
            SCOPED_TRACE(c.param);
            L a;
            c.clear(a);
            ExpectLauncherRefuses(h, &k, a, KL_ERROR_NULL_POINTER, {std::string(" ") + c.param + " ", "NULL"},
                                  LauncherRef<L>());
        }
    }
};

TEST_F(MlaPrefillNullPointer, RopeExtractRejectsEachNullPointer) {
    ExpectEachRejected<QRopeExtract>({KL_NULL_CASE(QRopeExtract, q_full), KL_NULL_CASE(QRopeExtract, q_rope_out)});
}

TEST_F(MlaPrefillNullPointer, RopeWritebackRejectsEachNullPointer) {
    ExpectEachRejected<QRopeWriteback>({KL_NULL_CASE(QRopeWriteback, q_rope_in), KL_NULL_CASE(QRopeWriteback, q_full)});
}

TEST_F(MlaPrefillNullPointer, KvAssembleRejectsEachNullPointer) {
    ExpectEachRejected<KvAssemble>({KL_NULL_CASE(KvAssemble, kv_expanded), KL_NULL_CASE(KvAssemble, k_rope_buf),
                                    KL_NULL_CASE(KvAssemble, k_out), KL_NULL_CASE(KvAssemble, v_out)});
}

TEST_F(MlaPrefillNullPointer, CacheAssembleRejectsEachNullPointer) {
    ExpectEachRejected<CacheAssemble>({KL_NULL_CASE(CacheAssemble, kv_latent), KL_NULL_CASE(CacheAssemble, k_rope),
                                       KL_NULL_CASE(CacheAssemble, k_cache), KL_NULL_CASE(CacheAssemble, v_cache)});
}

TEST_F(MlaPrefillNullPointer, FusedPrefillRejectsEachNullPointer) {
    ExpectEachRejected<FusedPrefill>(
        {KL_NULL_CASE(FusedPrefill, q_full), KL_NULL_CASE(FusedPrefill, q_rope), KL_NULL_CASE(FusedPrefill, kv_latent),
         KL_NULL_CASE(FusedPrefill, k_rope), KL_NULL_CASE(FusedPrefill, w_uk), KL_NULL_CASE(FusedPrefill, w_uv),
         KL_NULL_CASE(FusedPrefill, v_out), KL_NULL_CASE(FusedPrefill, k_cache_out),
         KL_NULL_CASE(FusedPrefill, v_cache_out)});
}

TEST_F(MlaPrefillNullPointer, QFinalAssembleRejectsEachNullPointer) {
    ExpectEachRejected<QFinalAssemble>({KL_NULL_CASE(QFinalAssemble, q_absorbed),
                                        KL_NULL_CASE(QFinalAssemble, q_rope), KL_NULL_CASE(QFinalAssemble, q_final)});
}

TEST_F(MlaPrefillNullPointer, GroupedGemmRejectsEachNullPointer) {
    ExpectEachRejected<GroupedGemm>(
        {KL_NULL_CASE(GroupedGemm, a), KL_NULL_CASE(GroupedGemm, b), KL_NULL_CASE(GroupedGemm, c)});
}

TEST_F(MlaPrefillNullPointer, AttentionRejectsEachNullPointer) {
    ExpectEachRejected<PrefillAttention>({KL_NULL_CASE(PrefillAttention, q), KL_NULL_CASE(PrefillAttention, k),
                                          KL_NULL_CASE(PrefillAttention, v), KL_NULL_CASE(PrefillAttention, output)});
}

// ---- the backend's launch status ------------------------------------------------------

TEST_F(MlaPrefillStatus, PassesLaunchFailureThroughFromTheBackend) {
    kl_kernel k = Kernel<FusedPrefill>();
    h.backend().launch_status = KL_ERROR_LAUNCH_FAILED;
    FusedPrefill a;
    // kl_X_check never reaches the backend, so it still accepts.
    Refusal c = Capture(h, [&] { return a.Check(&k); });
    KL_EXPECT_STATUS(KL_SUCCESS, c.status);
    EXPECT_EQ(0, c.callbacks);
    Refusal l = Capture(h, [&] { return a.Launch(&k, FakeStream()); });
    ExpectRefusal(l, KL_ERROR_LAUNCH_FAILED, {"kl_mla_fused_prefill"}, "", "kl_X");
}

TEST_F(MlaPrefillStatus, PassesBackendCapacityErrorThrough) {
    kl_kernel k = Kernel<GroupedGemm>();
    GroupedGemm a;
    h.Clear();
    for (size_t i = 0; i < RecordHarness::kCapacity; i++)
        KL_ASSERT_STATUS(KL_SUCCESS, a.Launch(&k, FakeStream())) << kl_last_error_message();
    KL_EXPECT_STATUS(KL_ERROR_CAPACITY, a.Launch(&k, FakeStream()));
    EXPECT_EQ(RecordHarness::kCapacity, h.count());
}

// ---- empty launches ---------------------------------------------------------------------

using MlaPrefillEmptyLaunch = MlaPrefillStatus;

TEST_F(MlaPrefillEmptyLaunch, LaunchesNothingForZeroTokens) {
    {
        QRopeExtract a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<QRopeExtract>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        QRopeWriteback a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<QRopeWriteback>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        KvAssemble a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<KvAssemble>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        CacheAssemble a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<CacheAssemble>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        QFinalAssemble a;
        a.num_tokens = 0;
        kl_kernel k = Kernel<QFinalAssemble>();
        ExpectEmptyLaunch(h, &k, a);
    }
}

TEST_F(MlaPrefillEmptyLaunch, LaunchesNothingForZeroSequenceOrBatch) {
    {
        FusedPrefill a;
        a.seq_len = 0;
        kl_kernel k = Kernel<FusedPrefill>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        GroupedGemm a;
        a.m = 0;
        kl_kernel k = Kernel<GroupedGemm>();
        ExpectEmptyLaunch(h, &k, a);
    }
    kl_kernel k = Kernel<PrefillAttention>();
    PrefillAttention a;
    a.batch = 0;
    ExpectEmptyLaunch(h, &k, a);
    a.batch = 5;
    a.seq_len = 0;
    ExpectEmptyLaunch(h, &k, a);
}

// An empty grid is checked like any other launch first.
TEST_F(MlaPrefillEmptyLaunch, StillChecksHandlePointersAndPreconditions) {
    kl_kernel k = Kernel<CacheAssemble>();
    CacheAssemble a;
    a.num_tokens = 0;
    ExpectLauncherRefuses(h, nullptr, a, KL_ERROR_KERNEL_NOT_LOADED, {}, "");
    a.mla_cache_dim = 29;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_PRECONDITION, {"mla_cache_dim = 29"}, "");
    a.k_cache = nullptr;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_NULL_POINTER, {" k_cache "}, "");
}

// ---- the error callback ------------------------------------------------------------------

TEST_F(MlaPrefillStatus, ErrorCallbackReceivesTheStatusMessageAndUserPointer) {
    kl_kernel k = Kernel<FusedPrefill>();
    CallbackLog log;
    kl_set_error_callback(LogError, &log);
    FusedPrefill ok;
    kl_status st_ok = ok.Launch(&k, FakeStream());
    EXPECT_EQ(0, log.calls) << "a successful launch reported an error";
    FusedPrefill bad;
    bad.num_kv_heads = 3;
    kl_status st = bad.Launch(&k, FakeStream());
    kl_set_error_callback(nullptr, nullptr);
    KL_EXPECT_STATUS(KL_SUCCESS, st_ok);
    KL_EXPECT_STATUS(KL_ERROR_PRECONDITION, st);
    ASSERT_EQ(1, log.calls);
    KL_EXPECT_STATUS(KL_ERROR_PRECONDITION, log.status);
    EXPECT_EQ(std::string(kl_last_error_message()), log.message);
    EXPECT_NE(std::string::npos, log.message.find("num_kv_heads = 3")) << log.message;
    // Removed, it is no longer called.
    bad.Launch(&k, FakeStream());
    EXPECT_EQ(1, log.calls);
}

} // namespace
} // namespace kltest
