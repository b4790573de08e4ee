// Every way a paged decode launcher refuses: the status, a message naming the
// launcher, the offending expression or parameter, its value and the spec's
// file:line, the error callback, kl_X_check agreeing with kl_X, and nothing
// recorded. Values are chosen so that exactly one check fails.
//
// No decode grid expression can overflow: each extent is a u32 parameter, and
// the preconditions multiply at most three u32 values into 64 bits (the
// 32-bit grid field and the 64-bit evaluation are covered by the MLA tests).
#include <functional>

#include "tests/paged_decode/paged_decode_launchers.h"

namespace kltest {
namespace {

class PagedDecodeStatus : public ::testing::Test {
  protected:
    RecordHarness h;
    const kl_module *gqa4 = h.Load(PagedDecodeModuleText("gqa4_d128"));
    const kl_module *gqa8 = h.Load(PagedDecodeModuleText("gqa8_d128"));

    template <class L>
    kl_kernel Kernel(const kl_module *m = nullptr) {
        kl_kernel k;
        std::memset(&k, 0, sizeof k);
        kl_status st = L::Get(&k, m ? m : gqa8);
        EXPECT_STREQ("KL_SUCCESS", kl_status_name(st)) << kl_last_error_message();
        return k;
    }
    template <class L>
    static std::string Ref(const std::string &section, const std::string &text) {
        return SpecRef(kDecodeSpec, L::kName, {section, text});
    }
    template <class L>
    static std::string LauncherRef() {
        return SpecRef(kDecodeSpec, L::kName, {});
    }
    template <class L>
    void ExpectRefuses(const L &a, kl_status st, const std::vector<std::string> &fragments, const std::string &ref,
                       const kl_module *m = nullptr) {
        kl_kernel k = Kernel<L>(m);
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
    // The same refusal from all four launchers (shape fields they share).
    // `where`: SpecLine fragments locating the failing expression in each launcher.
    template <class Edit>
    void ExpectAllRefuse(Edit edit, kl_status st, const std::vector<std::string> &fragments,
                         const std::vector<std::string> &where) {
        {
            SCOPED_TRACE(DecodeBf16::kName);
            DecodeBf16 a;
            edit(a);
            ExpectRefuses(a, st, fragments, SpecRef(kDecodeSpec, DecodeBf16::kName, where));
        }
        {
            SCOPED_TRACE(DecodeFp8::kName);
            DecodeFp8 a;
            edit(a);
            ExpectRefuses(a, st, fragments, SpecRef(kDecodeSpec, DecodeFp8::kName, where));
        }
        {
            SCOPED_TRACE(DecodeBf16Gqa::kName);
            DecodeBf16Gqa a;
            edit(a);
            ExpectRefuses(a, st, fragments, SpecRef(kDecodeSpec, DecodeBf16Gqa::kName, where));
        }
        {
            SCOPED_TRACE(DecodeFp8Gqa::kName);
            DecodeFp8Gqa a;
            edit(a);
            ExpectRefuses(a, st, fragments, SpecRef(kDecodeSpec, DecodeFp8Gqa::kName, where));
        }
    }
};

// ---- grid and block -------------------------------------------------------------

using PagedDecodeGrid = PagedDecodeStatus;

TEST_F(PagedDecodeGrid, RejectsGridYAboveCudaLimit) {
    ExpectAllRefuse([](auto &a) { a.num_seqs = 65536; }, KL_ERROR_GRID_LIMIT,
                    {"grid.y", "num_seqs = 65536", "65536", "65535"}, {"grid:", "y: num_seqs"});
}

TEST_F(PagedDecodeGrid, AcceptsGridYAtCudaLimit) {
    DecodeFp8 a;
    a.num_seqs = 65535;
    ExpectAccepts(a);
    DecodeBf16Gqa g;
    g.num_seqs = 65535;
    ExpectAccepts(g);
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(65535u, h.record(0).grid[1]);
}

TEST_F(PagedDecodeGrid, RejectsGridXAboveCudaLimit) {
    DecodeBf16 a; // 2^31 query heads, one element each
    a.num_q_heads = 2147483648u;
    a.num_kv_heads = 1;
    a.head_dim = 1;
    a.q_stride = 2147483648u;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.x", "num_q_heads = 2147483648", "2147483647"},
                  Ref<DecodeBf16>("grid:", "x: num_q_heads"));
    a.num_q_heads = a.q_stride = 2147483647u;
    ExpectAccepts(a);
}

TEST_F(PagedDecodeGrid, RejectsFp8GridXAboveCudaLimit) {
    DecodeFp8 a;
    a.num_q_heads = 4294967295u;
    a.num_kv_heads = 1;
    a.head_dim = 1;
    a.q_stride = 4294967295u;
    ExpectRefuses(a, KL_ERROR_GRID_LIMIT, {"grid.x", "4294967295", "2147483647"},
                  Ref<DecodeFp8>("grid:", "x: num_q_heads"));
}

TEST_F(PagedDecodeGrid, RejectsBlockAboveTheFunctionsOwnMaximum) {
    h.backend().max_threads = 255;
    ExpectAllRefuse([](auto &) {}, KL_ERROR_BLOCK_LIMIT, {"block", "256", "255"}, {"block:"});
    h.backend().max_threads = 256;
    ExpectAccepts(DecodeFp8Gqa());
}

// The seed launches with no dynamic shared memory and the spec declares none,
// so KL_ERROR_SHARED_MEMORY_LIMIT cannot come from these launchers.
TEST_F(PagedDecodeStatus, LaunchesWithNoDynamicSharedMemoryUnderAZeroLimit) {
    h.backend().max_dynamic_shared = 0;
    ExpectAccepts(DecodeBf16());
    ExpectAccepts(DecodeFp8Gqa());
    ASSERT_EQ(1u, h.count());
    EXPECT_EQ(0u, h.record(0).shared_bytes);
}

// ---- preconditions --------------------------------------------------------------

using PagedDecodePrecondition = PagedDecodeStatus;

TEST_F(PagedDecodePrecondition, PlainRejectsQueryHeadsNotSharedEvenly) {
    const char *expr = "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0";
    DecodeBf16 b;
    b.num_q_heads = 15; // 15 % 7
    b.q_stride = 135;
    ExpectRefuses(b, KL_ERROR_PRECONDITION, {expr, "num_q_heads = 15", "num_kv_heads = 7"},
                  Ref<DecodeBf16>("preconditions:", expr));
    DecodeFp8 f;
    f.num_q_heads = 15;
    f.q_stride = 135;
    ExpectRefuses(f, KL_ERROR_PRECONDITION, {expr, "num_q_heads = 15", "num_kv_heads = 7"},
                  Ref<DecodeFp8>("preconditions:", expr));
}

// Zero KV heads fails the guard before the modulo: a precondition, not a
// division by zero.
TEST_F(PagedDecodePrecondition, PlainRejectsZeroKvHeadsBeforeTheModulo) {
    const char *expr = "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0";
    DecodeBf16 b;
    b.num_kv_heads = 0;
    ExpectRefuses(b, KL_ERROR_PRECONDITION, {expr, "num_kv_heads = 0"}, Ref<DecodeBf16>("preconditions:", expr));
    DecodeFp8 f;
    f.num_kv_heads = 0;
    ExpectRefuses(f, KL_ERROR_PRECONDITION, {expr, "num_kv_heads = 0"}, Ref<DecodeFp8>("preconditions:", expr));
}

TEST_F(PagedDecodePrecondition, RejectsZeroBlockSize) {
    ExpectAllRefuse([](auto &a) { a.block_size = 0; }, KL_ERROR_PRECONDITION,
                    {"block_size >= 1", "block_size = 0", "a cache block holds at least one position"},
                    {"preconditions:", "block_size >= 1"});
}

TEST_F(PagedDecodePrecondition, RejectsQueryHeadsWiderThanQStride) {
    // One element short of num_q_heads * head_dim for each launcher.
    ExpectAllRefuse([](auto &a) { a.q_stride = a.num_q_heads * a.head_dim - 1; }, KL_ERROR_PRECONDITION,
                    {"num_q_heads * head_dim <= q_stride", "num_q_heads = ", "head_dim = ", "q_stride = "},
                    {"preconditions:", "num_q_heads * head_dim <= q_stride"});
    DecodeBf16 b;
    b.q_stride = 125; // 14 * 9 = 126
    ExpectRefuses(b, KL_ERROR_PRECONDITION, {"q_stride = 125", "num_q_heads = 14", "head_dim = 9"},
                  Ref<DecodeBf16>("preconditions:", "num_q_heads * head_dim <= q_stride"));
    b.q_stride = 126;
    ExpectAccepts(b);
}

TEST_F(PagedDecodePrecondition, Fp8RejectsCacheStrideSmallerThanABlock) {
    const char *expr = "cache_stride >= block_size * num_kv_heads * head_dim";
    DecodeFp8 f; // 11 * 7 * 9 = 693
    f.cache_stride = 692;
    ExpectRefuses(f, KL_ERROR_PRECONDITION, {expr, "cache_stride = 692", "block_size = 11", "num_kv_heads = 7"},
                  Ref<DecodeFp8>("preconditions:", expr));
    f.cache_stride = 693;
    ExpectAccepts(f);
    DecodeFp8Gqa g; // 11 * 2 * 128 = 2816
    g.cache_stride = 2815;
    ExpectRefuses(g, KL_ERROR_PRECONDITION, {expr, "cache_stride = 2815"}, Ref<DecodeFp8Gqa>("preconditions:", expr));
    g.cache_stride = 2816;
    ExpectAccepts(g);
}

// The plain kernels keep a head in registers and shared memory: 256 elements at most.
TEST_F(PagedDecodePrecondition, PlainRejectsHeadDimAbove256) {
    const char *expr = "head_dim <= 256";
    DecodeBf16 b;
    b.head_dim = 257;
    b.q_stride = 3600; // >= 14 * 257
    ExpectRefuses(b, KL_ERROR_PRECONDITION, {expr, "head_dim = 257"}, Ref<DecodeBf16>("preconditions:", expr));
    b.head_dim = 256;
    ExpectAccepts(b);
    DecodeFp8 f;
    f.head_dim = 257;
    f.q_stride = 3600;
    ExpectRefuses(f, KL_ERROR_PRECONDITION, {expr, "head_dim = 257"}, Ref<DecodeFp8>("preconditions:", expr));
    f.head_dim = 256;
    ExpectAccepts(f);
}

// cache_stride is a u64 and the product is taken in 64 bits: a block of
// 2^30 * 7 * 9 elements (above 2^32) needs a stride at least that large.
TEST_F(PagedDecodePrecondition, Fp8ComparesCacheStrideInSixtyFourBits) {
    const char *expr = "cache_stride >= block_size * num_kv_heads * head_dim";
    DecodeFp8 f;
    f.block_size = 1u << 30;
    f.cache_stride = 7ull * 9 * (1ull << 30) - 1;
    ExpectRefuses(f, KL_ERROR_PRECONDITION, {expr, "cache_stride = 67645734911"}, Ref<DecodeFp8>("preconditions:", expr));
    f.cache_stride = 7ull * 9 * (1ull << 30);
    ExpectAccepts(f);
    ASSERT_EQ(1u, h.count());
    uint64_t stride;
    std::memcpy(&stride, h.record(0).args + 88, 8);
    EXPECT_EQ(67645734912ull, stride);
}

TEST_F(PagedDecodePrecondition, EveryPreconditionOfTheSpecIsTestedHere) {
    const std::string shared = "num_kv_heads >= 1 and num_q_heads % num_kv_heads == 0";
    const std::string width = "num_q_heads == num_kv_heads * DECODE_GQA_PACK_WIDTH";
    const std::string dim = "head_dim == DECODE_GQA_PACK_HEAD_DIM";
    const std::string block = "block_size >= 1";
    const std::string row = "num_q_heads * head_dim <= q_stride";
    const std::string stride = "cache_stride >= block_size * num_kv_heads * head_dim";
    const std::string head = "head_dim <= 256";
    ExpectTestedChecks(DecodeBf16::Desc(), {shared, block, row, head});
    ExpectTestedChecks(DecodeFp8::Desc(), {shared, block, row, stride, head});
    ExpectTestedChecks(DecodeBf16Gqa::Desc(), {width, dim, block, row});
    ExpectTestedChecks(DecodeFp8Gqa::Desc(), {width, dim, block, row, stride});
}

// ---- variant: the GQA-packed kernels' compiled shape --------------------------------

using PagedDecodeVariant = PagedDecodeStatus;

TEST_F(PagedDecodeVariant, GqaRejectsQueryHeadsNotKvHeadsTimesPackWidth) {
    const char *expr = "num_q_heads == num_kv_heads * DECODE_GQA_PACK_WIDTH";
    DecodeBf16Gqa b; // 8 = 2 * 4: the gqa4 shape on the gqa8 module
    b.num_q_heads = 8;
    ExpectRefuses(b, KL_ERROR_VARIANT_MISMATCH,
                  {expr, "num_q_heads = 8", "num_kv_heads = 2", "DECODE_GQA_PACK_WIDTH = 8"},
                  Ref<DecodeBf16Gqa>("preconditions:", expr));
    ExpectAccepts(b, gqa4);
    DecodeFp8Gqa f; // 16 = 2 * 8: the gqa8 shape on the gqa4 module
    ExpectRefuses(f, KL_ERROR_VARIANT_MISMATCH,
                  {expr, "num_q_heads = 16", "num_kv_heads = 2", "DECODE_GQA_PACK_WIDTH = 4"},
                  Ref<DecodeFp8Gqa>("preconditions:", expr), gqa4);
    ExpectAccepts(f, gqa8);
}

TEST_F(PagedDecodeVariant, GqaRejectsHeadDimOtherThan128) {
    const char *expr = "head_dim == DECODE_GQA_PACK_HEAD_DIM";
    DecodeBf16Gqa b;
    b.head_dim = 64;
    ExpectRefuses(b, KL_ERROR_VARIANT_MISMATCH, {expr, "head_dim = 64", "DECODE_GQA_PACK_HEAD_DIM = 128"},
                  Ref<DecodeBf16Gqa>("preconditions:", expr));
    DecodeFp8Gqa f;
    f.head_dim = 256;
    f.q_stride = 4096;
    ExpectRefuses(f, KL_ERROR_VARIANT_MISMATCH, {expr, "head_dim = 256", "DECODE_GQA_PACK_HEAD_DIM = 128"},
                  Ref<DecodeFp8Gqa>("preconditions:", expr));
}

// The plain kernels take any GQA shape: what the packed ones refuse, they launch.
TEST_F(PagedDecodeVariant, PlainKernelsAcceptWhatThePackedOnesRefuse) {
    DecodeBf16 b;
    b.num_q_heads = 6;
    b.num_kv_heads = 2;
    b.head_dim = 64;
    b.q_stride = 384;
    ExpectAccepts(b);
    DecodeFp8 f;
    f.num_q_heads = 6;
    f.num_kv_heads = 2;
    f.head_dim = 64;
    f.q_stride = 384;
    ExpectAccepts(f, gqa4);
}

// ---- modules and kernel handles ---------------------------------------------------------

using PagedDecodeGet = PagedDecodeStatus;

TEST_F(PagedDecodeGet, RejectsModuleOfAnotherFamily) {
    const kl_module *mla = h.Load(ModuleText("mla_prefill", "deepseek_v4_flash", {{"MLA_HDIM", 576}, {"MLA_V_HAS_ROPE", 1}}));
    auto expect = [&](const char *name, kl_status (*get)(kl_kernel *, const kl_module *)) {
        SCOPED_TRACE(name);
        kl_kernel k;
        Refusal r = Capture(h, [&] { return get(&k, mla); });
        ExpectRefusal(r, KL_ERROR_FAMILY_MISMATCH,
                      {std::string("kl_") + name + "_get", "mla_prefill", "deepseek_v4_flash", "paged_decode"},
                      SpecRef(kDecodeSpec, name, {}), "kl_X_get");
    };
    expect(DecodeBf16::kName, DecodeBf16::Get);
    expect(DecodeFp8::kName, DecodeFp8::Get);
    expect(DecodeBf16Gqa::kName, DecodeBf16Gqa::Get);
    expect(DecodeFp8Gqa::kName, DecodeFp8Gqa::Get);
}

TEST_F(PagedDecodeGet, RejectsModuleLackingThePackWidth) {
    const kl_module *bare = h.Load(ModuleText("paged_decode", "d128_only", {{"DECODE_GQA_PACK_HEAD_DIM", 128}}));
    kl_kernel k;
    Refusal r = Capture(h, [&] { return DecodeBf16Gqa::Get(&k, bare); });
    ExpectRefusal(r, KL_ERROR_VARIANT_MISMATCH,
                  {"kl_paged_decode_attn_bf16_gqa_get", "DECODE_GQA_PACK_WIDTH", "d128_only"},
                  LauncherRef<DecodeBf16Gqa>(), "kl_X_get");
    r = Capture(h, [&] { return DecodeFp8Gqa::Get(&k, bare); });
    ExpectRefusal(r, KL_ERROR_VARIANT_MISMATCH, {"kl_paged_decode_attn_fp8_gqa_get", "DECODE_GQA_PACK_WIDTH"},
                  LauncherRef<DecodeFp8Gqa>(), "kl_X_get");
    // The plain kernels read no constant.
    KL_EXPECT_STATUS(KL_SUCCESS, DecodeBf16::Get(&k, bare)) << kl_last_error_message();
    KL_EXPECT_STATUS(KL_SUCCESS, DecodeFp8::Get(&k, bare)) << kl_last_error_message();
}

TEST_F(PagedDecodeGet, RejectsModuleLackingThePackHeadDim) {
    const kl_module *bare = h.Load(ModuleText("paged_decode", "w8_only", {{"DECODE_GQA_PACK_WIDTH", 8}}));
    kl_kernel k;
    Refusal r = Capture(h, [&] { return DecodeFp8Gqa::Get(&k, bare); });
    ExpectRefusal(r, KL_ERROR_VARIANT_MISMATCH, {"kl_paged_decode_attn_fp8_gqa_get", "DECODE_GQA_PACK_HEAD_DIM"},
                  LauncherRef<DecodeFp8Gqa>(), "kl_X_get");
}

// Entries are matched exactly: paged_decode_attn_fp8 is missing, its _gqa
// sibling is not.
TEST_F(PagedDecodeGet, RejectsModuleWithoutTheKernelEntry) {
    h.backend().missing_entry = "paged_decode_attn_fp8";
    kl_kernel k;
    Refusal r = Capture(h, [&] { return DecodeFp8::Get(&k, gqa8); });
    ExpectRefusal(r, KL_ERROR_KERNEL_NOT_FOUND, {"kl_paged_decode_attn_fp8_get", "paged_decode_attn_fp8"}, "",
                  "kl_X_get");
    ExpectLauncherRefuses(h, &k, DecodeFp8(), KL_ERROR_KERNEL_NOT_LOADED, {}, "");
    kl_kernel sibling;
    KL_EXPECT_STATUS(KL_SUCCESS, DecodeFp8Gqa::Get(&sibling, gqa8)) << kl_last_error_message();
}

using PagedDecodeHandle = PagedDecodeStatus;

TEST_F(PagedDecodeHandle, RejectsNullKernelHandle) {
    ExpectLauncherRefuses(h, nullptr, DecodeBf16(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
    ExpectLauncherRefuses(h, nullptr, DecodeFp8(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
    ExpectLauncherRefuses(h, nullptr, DecodeBf16Gqa(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
    ExpectLauncherRefuses(h, nullptr, DecodeFp8Gqa(), KL_ERROR_KERNEL_NOT_LOADED, {"NULL"}, "");
}

TEST_F(PagedDecodeHandle, RejectsHandleThatWasNeverLoaded) {
    kl_kernel zeroed;
    std::memset(&zeroed, 0, sizeof zeroed);
    ExpectLauncherRefuses(h, &zeroed, DecodeFp8(), KL_ERROR_KERNEL_NOT_LOADED, {"not loaded"}, "");
    kl_kernel garbage;
    std::memset(&garbage, 0x5a, sizeof garbage);
    ExpectLauncherRefuses(h, &garbage, DecodeBf16Gqa(), KL_ERROR_KERNEL_NOT_LOADED, {"not loaded"}, "");
}

// The plain and packed bf16 launchers take identical arguments, so a swapped
// handle would otherwise launch the wrong kernel with a wrong grid.
TEST_F(PagedDecodeHandle, RejectsHandleLoadedForAnotherLauncher) {
    kl_kernel plain = Kernel<DecodeBf16>();
    ExpectLauncherRefuses(h, &plain, DecodeBf16Gqa(), KL_ERROR_INVALID_ARGUMENT, {"kl_paged_decode_attn_bf16 "}, "");
    kl_kernel packed = Kernel<DecodeFp8Gqa>();
    ExpectLauncherRefuses(h, &packed, DecodeFp8(), KL_ERROR_INVALID_ARGUMENT, {"kl_paged_decode_attn_fp8_gqa"}, "");
}

// ---- NULL device pointers --------------------------------------------------------------

template <class L>
struct NullCase {
    const char *param;
    std::function<void(L &)> clear;
};
#define KL_NULL_CASE(L, field) NullCase<L>{#field, [](L &a) { a.field = nullptr; }}
#define KL_DECODE_NULL_CASES(L)                                                                                    \
    std::vector<NullCase<L>>{KL_NULL_CASE(L, q),       KL_NULL_CASE(L, k_cache),      KL_NULL_CASE(L, v_cache),    \
                             KL_NULL_CASE(L, output),  KL_NULL_CASE(L, block_tables), KL_NULL_CASE(L, seq_lens)}

class PagedDecodeNullPointer : public PagedDecodeStatus {
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

TEST_F(PagedDecodeNullPointer, Bf16RejectsEachNullPointer) { ExpectEachRejected(KL_DECODE_NULL_CASES(DecodeBf16)); }
TEST_F(PagedDecodeNullPointer, Fp8RejectsEachNullPointer) { ExpectEachRejected(KL_DECODE_NULL_CASES(DecodeFp8)); }
TEST_F(PagedDecodeNullPointer, Bf16GqaRejectsEachNullPointer) {
    ExpectEachRejected(KL_DECODE_NULL_CASES(DecodeBf16Gqa));
}
TEST_F(PagedDecodeNullPointer, Fp8GqaRejectsEachNullPointer) { ExpectEachRejected(KL_DECODE_NULL_CASES(DecodeFp8Gqa)); }

// ---- backend statuses, empty launches, order, callback -------------------------------------

TEST_F(PagedDecodeStatus, PassesLaunchFailureThroughFromTheBackend) {
    kl_kernel k = Kernel<DecodeFp8Gqa>();
    h.backend().launch_status = KL_ERROR_DRIVER;
    DecodeFp8Gqa a;
    Refusal c = Capture(h, [&] { return a.Check(&k); });
    KL_EXPECT_STATUS(KL_SUCCESS, c.status) << "kl_X_check must not reach the backend";
    Refusal l = Capture(h, [&] { return a.Launch(&k, FakeStream()); });
    ExpectRefusal(l, KL_ERROR_DRIVER, {"kl_paged_decode_attn_fp8_gqa"}, "", "kl_X");
    h.backend().launch_status = KL_ERROR_LAUNCH_FAILED;
    l = Capture(h, [&] { return a.Launch(&k, FakeStream()); });
    ExpectRefusal(l, KL_ERROR_LAUNCH_FAILED, {"kl_paged_decode_attn_fp8_gqa"}, "", "kl_X");
}

TEST_F(PagedDecodeStatus, LaunchesNothingForZeroSequences) {
    {
        DecodeBf16 a;
        a.num_seqs = 0;
        kl_kernel k = Kernel<DecodeBf16>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        DecodeFp8 a;
        a.num_seqs = 0;
        kl_kernel k = Kernel<DecodeFp8>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        DecodeBf16Gqa a;
        a.num_seqs = 0;
        kl_kernel k = Kernel<DecodeBf16Gqa>();
        ExpectEmptyLaunch(h, &k, a);
    }
    {
        DecodeFp8Gqa a;
        a.num_seqs = 0;
        kl_kernel k = Kernel<DecodeFp8Gqa>();
        ExpectEmptyLaunch(h, &k, a);
    }
}

TEST_F(PagedDecodeStatus, LaunchesNothingForZeroQueryHeads) {
    DecodeBf16 a; // 0 % 7 == 0 and 0 <= q_stride: valid, and nothing to do
    a.num_q_heads = 0;
    kl_kernel k = Kernel<DecodeBf16>();
    ExpectEmptyLaunch(h, &k, a);
}

TEST_F(PagedDecodeStatus, ReportsTheFirstFailingCheckInDocumentedOrder) {
    kl_kernel k = Kernel<DecodeFp8Gqa>();
    DecodeFp8Gqa a;
    a.num_seqs = 65536;   // grid y
    a.cache_stride = 1;   // last precondition
    a.block_size = 0;     // third precondition
    a.head_dim = 64;      // second precondition (variant)
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_VARIANT_MISMATCH, {"head_dim == DECODE_GQA_PACK_HEAD_DIM"}, "");
    a.seq_lens = nullptr;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_NULL_POINTER, {" seq_lens "}, "");
    a.seq_lens = DecodeFp8Gqa().seq_lens;
    a.head_dim = 128;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_PRECONDITION, {"block_size >= 1"}, "");
    a.block_size = 11;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_PRECONDITION, {"cache_stride = 1"}, "");
    a.cache_stride = 1ull << 40;
    ExpectLauncherRefuses(h, &k, a, KL_ERROR_GRID_LIMIT, {"grid.y"}, "");
}

TEST_F(PagedDecodeStatus, ErrorCallbackReceivesTheStatusMessageAndUserPointer) {
    kl_kernel k = Kernel<DecodeBf16Gqa>();
    CallbackLog log;
    kl_set_error_callback(LogError, &log);
    DecodeBf16Gqa bad;
    bad.num_q_heads = 24; // 2 * 8 != 24
    bad.q_stride = 4096;
    kl_status st = bad.Launch(&k, FakeStream());
    kl_set_error_callback(nullptr, nullptr);
    KL_EXPECT_STATUS(KL_ERROR_VARIANT_MISMATCH, st);
    ASSERT_EQ(1, log.calls);
    KL_EXPECT_STATUS(KL_ERROR_VARIANT_MISMATCH, log.status);
    EXPECT_EQ(std::string(kl_last_error_message()), log.message);
    EXPECT_NE(std::string::npos, log.message.find("num_q_heads = 24")) << log.message;
}

} // namespace
} // namespace kltest
