// CPU tests, through the recording backend, of the copy-engine GQA
// launchers (paged_decode_{attn,persist}_{bf16,fp8}_gqa_bulk and their
// tensor-map twins *_gqa_tma) and of the persistent launchers' refusals,
// _mma, _bulk and _tma alike, which no other test checks; and the rule of
// kl_paged_decode_gqa_{bf16,fp8}_choose (the former
// kl_paged_decode_gqa_pick's expectations, on gqa8_d128). For both
// variants' constants:
// - each bulk launcher launches what its _mma twin launches (grid, the
//   packed argument bytes), with block 384, the spec's dynamic shared
//   memory (ring + mbarriers + merge scratch + schedule), and, for the
//   persistent ones, the programmatic-dependent-launch attribute;
// - kl_X_get refuses an image of another target (sm_90a machine code only)
//   with KL_ERROR_UNSUPPORTED, and a launch on a device that cannot grant
//   the ring's shared memory is KL_ERROR_SHARED_MEMORY_LIMIT;
// - the shapes the twin refuses are refused with the same status, and
//   nothing is recorded;
// - the _tma launchers pack their two maps by value, refuse block sizes
//   that are not a multiple of 16 and maps built for another launcher,
//   and their builders refuse caches and strides off 16 bytes, before the
//   backend sees them (KL_ERROR_TENSOR_MAP);
// - the persistent launchers refuse a workspace a byte short of
//   kl_paged_decode_persist_workspace_bytes, counters a word short of
//   kl_paged_decode_persist_counter_words, num_ctas 0 and 65536, each
//   naming the spec's message (KL_ERROR_PRECONDITION, the workspace's too:
//   it reads a variant constant, but a short buffer fits no variant better),
//   and accept the exact sizes.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "klaunch/record_backend.h"

namespace {

kl_bf16 *const kQ = reinterpret_cast<kl_bf16 *>(uintptr_t{0x10000});
kl_bf16 *const kKb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x20000});
kl_bf16 *const kVb = reinterpret_cast<kl_bf16 *>(uintptr_t{0x30000});
kl_fp8_e4m3 *const kK8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x40000});
kl_fp8_e4m3 *const kV8 = reinterpret_cast<kl_fp8_e4m3 *>(uintptr_t{0x50000});
float *const kWs = reinterpret_cast<float *>(uintptr_t{0x60000});
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(uintptr_t{0x70000});
int32_t *const kTables = reinterpret_cast<int32_t *>(uintptr_t{0x80000});
int32_t *const kLens = reinterpret_cast<int32_t *>(uintptr_t{0x90000});
uint32_t *const kCounters = reinterpret_cast<uint32_t *>(uintptr_t{0xa0000});

std::string module_text(int width, const char *arch_line) {
    return std::string("klaunch-module 1\nfamily paged_decode\nvariant gqa") + std::to_string(width) +
           "_d128\nspec_hash test\nsource_hash unknown\n" + arch_line + "const DECODE_GQA_PACK_WIDTH " +
           std::to_string(width) + "\nconst DECODE_GQA_PACK_HEAD_DIM 128\n";
}

struct Args {
    uint32_t mbps = 9, num_seqs = 5, nq = 0, nkv = 3, hd = 128, bs = 16;
    float inv = 0.125f, ks = 0.5f, vs = 2.0f;
    uint32_t q_stride = 0;
    uint64_t cache_stride = 0;
    uint32_t window = 0, ctas = 7;
    uint64_t ws_bytes = 0, counters = 0;
};

// The four kinds: 0 attn bf16, 1 attn fp8, 2 persist bf16, 3 persist fp8.
const char *const kMma[] = {"paged_decode_attn_bf16_gqa_mma", "paged_decode_attn_fp8_gqa_mma",
                            "paged_decode_persist_bf16_gqa_mma", "paged_decode_persist_fp8_gqa_mma"};

class BulkLaunchTest : public ::testing::TestWithParam<int> {
  protected:
    void SetUp() override { load("cuda_arch 900a\n", 227 * 1024); }
    void TearDown() override {
        if (loaded_) kl_module_unload(&mod_);
    }
    void load(const char *arch_line, uint32_t max_dynamic_shared) {
        if (loaded_) kl_module_unload(&mod_);
        kl_record_backend_init(&rb_, records_, kCapacity);
        rb_.max_dynamic_shared = max_dynamic_shared;
        const std::string text = module_text(GetParam(), arch_line);
        ASSERT_EQ(kl_module_load(&rb_.base, text.c_str(), text.size(), &mod_), KL_SUCCESS) << kl_last_error_message();
        loaded_ = true;
    }

    Args good() const {
        Args a;
        a.nq = a.nkv * static_cast<uint32_t>(GetParam());
        a.q_stride = a.nq * a.hd + 3;
        a.cache_stride = uint64_t{a.bs} * a.nkv * a.hd + 16;
        a.ws_bytes = kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(GetParam()), a.hd, a.ctas);
        a.counters = kl_paged_decode_persist_counter_words(a.num_seqs, a.nkv);
        return a;
    }

    kl_status get(int k, bool bulk, kl_kernel *kern) {
        switch (k) {
        case 0:
            return bulk ? kl_paged_decode_attn_bf16_gqa_bulk_get(kern, &mod_)
                        : kl_paged_decode_attn_bf16_gqa_mma_get(kern, &mod_);
        case 1:
            return bulk ? kl_paged_decode_attn_fp8_gqa_bulk_get(kern, &mod_)
                        : kl_paged_decode_attn_fp8_gqa_mma_get(kern, &mod_);
        case 2:
            return bulk ? kl_paged_decode_persist_bf16_gqa_bulk_get(kern, &mod_)
                        : kl_paged_decode_persist_bf16_gqa_mma_get(kern, &mod_);
        default:
            return bulk ? kl_paged_decode_persist_fp8_gqa_bulk_get(kern, &mod_)
                        : kl_paged_decode_persist_fp8_gqa_mma_get(kern, &mod_);
        }
    }

    // Launches kind k through the _mma launcher or its bulk twin.
    kl_status launch(int k, bool bulk, const Args &a) {
        kl_kernel kern;
        const kl_status st = get(k, bulk, &kern);
        if (st != KL_SUCCESS) return st;
        switch (k) {
        case 0:
            return (bulk ? kl_paged_decode_attn_bf16_gqa_bulk : kl_paged_decode_attn_bf16_gqa_mma)(
                &kern, kQ, kKb, kVb, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq, a.nkv, a.hd, a.bs, a.inv,
                a.q_stride, a.window, nullptr);
        case 1:
            return (bulk ? kl_paged_decode_attn_fp8_gqa_bulk : kl_paged_decode_attn_fp8_gqa_mma)(
                &kern, kQ, kK8, kV8, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks,
                a.vs, a.q_stride, a.cache_stride, a.window, nullptr);
        case 2:
            return (bulk ? kl_paged_decode_persist_bf16_gqa_bulk : kl_paged_decode_persist_bf16_gqa_mma)(
                &kern, kQ, kKb, kVb, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq, a.nkv, a.hd, a.bs, a.inv,
                a.q_stride, a.window, kWs, kCounters, a.ctas, a.ws_bytes, a.counters, nullptr);
        default:
            return (bulk ? kl_paged_decode_persist_fp8_gqa_bulk : kl_paged_decode_persist_fp8_gqa_mma)(
                &kern, kQ, kK8, kV8, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks,
                a.vs, a.q_stride, a.cache_stride, a.window, kWs, kCounters, a.ctas, a.ws_bytes, a.counters, nullptr);
        }
    }

    // The _tma twin of kind k: its get, its maps (encoded once per fixture
    // from good(): the launcher cannot check them against the arguments)
    // and its launch.
    kl_status get_tma(int k, kl_kernel *kern) {
        switch (k) {
        case 0:
            return kl_paged_decode_attn_bf16_gqa_tma_get(kern, &mod_);
        case 1:
            return kl_paged_decode_attn_fp8_gqa_tma_get(kern, &mod_);
        case 2:
            return kl_paged_decode_persist_bf16_gqa_tma_get(kern, &mod_);
        default:
            return kl_paged_decode_persist_fp8_gqa_tma_get(kern, &mod_);
        }
    }
    // Encodes kind k's K map (or, with v, its V map: each parameter has its
    // own builder, and a map is tagged with it) of the caches at kb (bf16) /
    // k8 (fp8) with good()'s shape.
    kl_status encode_tma(int k, const kl_kernel *kern, kl_tensor_map *map, uintptr_t at, uint64_t stride3,
                         bool v = false) {
        const Args a = good();
        const uint64_t s2 = uint64_t{a.nkv} * a.hd;
        const kl_bf16 *b = reinterpret_cast<const kl_bf16 *>(at);
        const kl_fp8_e4m3 *f = reinterpret_cast<const kl_fp8_e4m3 *>(at);
        switch (k) {
        case 0:
            return (v ? kl_paged_decode_attn_bf16_gqa_tma_v_map_encode : kl_paged_decode_attn_bf16_gqa_tma_k_map_encode)(
                kern, map, b, a.hd, a.nkv, a.bs, 100, a.hd, s2, stride3);
        case 1:
            return (v ? kl_paged_decode_attn_fp8_gqa_tma_v_map_encode : kl_paged_decode_attn_fp8_gqa_tma_k_map_encode)(
                kern, map, f, a.hd, a.nkv, a.bs, 100, a.hd, s2, stride3);
        case 2:
            return (v ? kl_paged_decode_persist_bf16_gqa_tma_v_map_encode
                      : kl_paged_decode_persist_bf16_gqa_tma_k_map_encode)(kern, map, b, a.hd, a.nkv, a.bs, 100, a.hd,
                                                                           s2, stride3);
        default:
            return (v ? kl_paged_decode_persist_fp8_gqa_tma_v_map_encode
                      : kl_paged_decode_persist_fp8_gqa_tma_k_map_encode)(kern, map, f, a.hd, a.nkv, a.bs, 100, a.hd,
                                                                          s2, stride3);
        }
    }
    kl_status launch_tma(int k, const Args &a, const kl_tensor_map *km = nullptr, const kl_tensor_map *vm = nullptr) {
        kl_kernel kern;
        kl_status st = get_tma(k, &kern);
        if (st != KL_SUCCESS) return st;
        kl_tensor_map kmap, vmap;
        const Args g = good();
        const uint64_t stride3 = k % 2 ? g.cache_stride : uint64_t{g.bs} * g.nkv * g.hd;
        if (km == nullptr) {
            st = encode_tma(k, &kern, &kmap, k % 2 ? 0x40000 : 0x20000, stride3);
            if (st != KL_SUCCESS) return st;
            km = &kmap;
        }
        if (vm == nullptr) {
            st = encode_tma(k, &kern, &vmap, k % 2 ? 0x50000 : 0x30000, stride3, true);
            if (st != KL_SUCCESS) return st;
            vm = &vmap;
        }
        switch (k) {
        case 0:
            return kl_paged_decode_attn_bf16_gqa_tma(&kern, kQ, km, vm, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq,
                                                     a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window, nullptr);
        case 1:
            return kl_paged_decode_attn_fp8_gqa_tma(&kern, kQ, km, vm, kOut, kTables, kLens, a.mbps, a.num_seqs, a.nq,
                                                    a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride, a.window, nullptr);
        case 2:
            return kl_paged_decode_persist_bf16_gqa_tma(&kern, kQ, km, vm, kOut, kTables, kLens, a.mbps, a.num_seqs,
                                                        a.nq, a.nkv, a.hd, a.bs, a.inv, a.q_stride, a.window, kWs,
                                                        kCounters, a.ctas, a.ws_bytes, a.counters, nullptr);
        default:
            return kl_paged_decode_persist_fp8_gqa_tma(&kern, kQ, km, vm, kOut, kTables, kLens, a.mbps, a.num_seqs,
                                                       a.nq, a.nkv, a.hd, a.bs, a.inv, a.ks, a.vs, a.q_stride,
                                                       a.window, kWs, kCounters, a.ctas, a.ws_bytes, a.counters,
                                                       nullptr);
        }
    }
    // impl 0: the _mma launcher, 1: its _bulk twin, 2: its _tma twin.
    kl_status launch_impl(int k, int impl, const Args &a) { return impl == 2 ? launch_tma(k, a) : launch(k, impl == 1, a); }

    // The spec's dynamic shared memory of a _tma kernel: 1 KiB to align the
    // ring of boxes, the ring (16 x 8 KiB bf16, 48 x 4 KiB fp8), mbarriers,
    // merge scratch, 512 bytes.
    uint32_t tma_shared(int k) const {
        const bool fp8 = k % 2 == 1;
        const uint32_t slots = fp8 ? 48u : 16u; /* 4 KiB / 8 KiB each */
        return 1024u + slots * (fp8 ? 4096u : 8192u) + 16u * slots +
               8u * static_cast<uint32_t>(GetParam()) * (128u + 2u) * 4u + 512u;
    }

    // The spec's dynamic shared memory of a bulk kernel (its layout:
    // kernels/paged_decode/paged_decode_bulk.cuh): ring, 2 mbarriers a
    // slot, merge scratch of 8 warps x (128 + 2) floats a head, 512 bytes.
    uint32_t bulk_shared(int k) const {
        const bool fp8 = k % 2 == 1;
        const uint32_t ring = fp8 ? 32u * 32u * 144u : 16u * 32u * 272u;
        const uint32_t bars = 16u * (fp8 ? 32u : 16u);
        return ring + bars + 8u * static_cast<uint32_t>(GetParam()) * (128u + 2u) * 4u + 512u;
    }

    static constexpr size_t kCapacity = 4;
    kl_record records_[kCapacity];
    kl_record_backend rb_;
    kl_module mod_;
    bool loaded_ = false;
};

TEST_P(BulkLaunchTest, LaunchesWhatItsMmaTwinLaunchesWith384ThreadsAndTheRing) {
    for (int k = 0; k < 4; k++) {
        SCOPED_TRACE(kMma[k]);
        kl_record_backend_clear(&rb_);
        const Args a = good();
        ASSERT_EQ(launch(k, false, a), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(launch(k, true, a), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(rb_.count, 2u);
        const kl_record &mma = records_[0], &bulk = records_[1];
        EXPECT_EQ(std::string(bulk.entry), std::string(kMma[k]).replace(std::string(kMma[k]).size() - 3, 3, "bulk"));
        for (int i = 0; i < 3; i++) EXPECT_EQ(bulk.grid[i], mma.grid[i]);
        EXPECT_EQ(bulk.block[0], 384u);
        EXPECT_EQ(bulk.block[1], 1u);
        EXPECT_EQ(bulk.block[2], 1u);
        EXPECT_EQ(bulk.shared_bytes, bulk_shared(k));
        EXPECT_EQ(bulk.attribute_flags, k >= 2 ? KL_LAUNCH_PROGRAMMATIC_SERIALIZATION : 0u);
        ASSERT_EQ(bulk.arg_bytes, mma.arg_bytes);
        EXPECT_EQ(std::memcmp(bulk.args, mma.args, bulk.arg_bytes), 0) << "the packed arguments differ";
    }
}

TEST_P(BulkLaunchTest, RefusesAnotherTargetAndTooLittleSharedMemory) {
    for (const char *arch : {"", "cuda_arch 900\n", "cuda_arch 800\n"}) {
        load(arch, 227 * 1024);
        for (int k = 0; k < 4; k++) {
            SCOPED_TRACE(std::string(kMma[k]) + " bulk twin, image line '" + arch + "'");
            kl_kernel kern;
            EXPECT_EQ(get(k, true, &kern), KL_ERROR_UNSUPPORTED);
            EXPECT_EQ(get(k, false, &kern), KL_SUCCESS) << "the _mma launchers load on any target";
        }
    }
    // A device that grants 100 KiB: the ring does not fit, the launch is refused.
    load("cuda_arch 900a\n", 100 * 1024);
    for (int k = 0; k < 4; k++) {
        SCOPED_TRACE(std::string(kMma[k]) + " bulk twin, 100 KiB of dynamic shared memory granted");
        kl_record_backend_clear(&rb_);
        EXPECT_EQ(launch(k, true, good()), KL_ERROR_SHARED_MEMORY_LIMIT);
        EXPECT_EQ(rb_.count, 0u);
    }
}

TEST_P(BulkLaunchTest, RefusesWhatItsMmaTwinRefuses) {
    const int width = GetParam(), other = width == 4 ? 8 : 4;
    struct Bad {
        const char *why;
        void (*edit)(Args &, int other);
        bool fp8_only;
    };
    const Bad bads[] = {
        {"the other variant's pack width", [](Args &a, int o) { a.nq = a.nkv * static_cast<uint32_t>(o); }, false},
        {"head dim 64", [](Args &a, int) { a.hd = 64; }, false},
        {"one query head more", [](Args &a, int) { a.nq += 1; }, false},
        {"block size 0", [](Args &a, int) { a.bs = 0; }, false},
        {"q_stride below the heads", [](Args &a, int) { a.q_stride = a.nq * a.hd - 1; }, false},
        {"cache_stride below a block", [](Args &a, int) { a.cache_stride = uint64_t{a.bs} * a.nkv * a.hd - 1; }, true},
    };
    for (const Bad &b : bads)
        for (int k = 0; k < 4; k++) {
            if (b.fp8_only && k % 2 == 0) continue;
            SCOPED_TRACE(std::string(kMma[k]) + ": " + b.why);
            Args a = good();
            b.edit(a, other);
            kl_record_backend_clear(&rb_);
            const kl_status mma = launch(k, false, a);
            const kl_status bulk = launch(k, true, a);
            EXPECT_NE(mma, KL_SUCCESS);
            EXPECT_EQ(bulk, mma) << kl_last_error_message();
            EXPECT_EQ(rb_.count, 0u) << "a refused launch was recorded";
        }
}

// The persistent launchers' own preconditions: workspace, counters, grid.
TEST_P(BulkLaunchTest, PersistentLaunchersRefuseShortWorkspaceShortCountersAndBadGrids) {
    // The workspace check reads DECODE_GQA_PACK_WIDTH, yet it sizes a buffer
    // (`buffer: workspace`): KL_ERROR_PRECONDITION (issue 44, defect 5).
    struct Bad {
        const char *why, *message;
        kl_status want;
        void (*edit)(Args &);
    };
    const kl_status ws = KL_ERROR_PRECONDITION, pre = KL_ERROR_PRECONDITION;
    const char *ws_msg = "the workspace holds 2 records per block";
    const char *cnt_msg = "counters holds one zeroed word per (sequence, KV head)";
    const char *grid_msg = "the persistent grid has 1 to 65535 blocks";
    const Bad bads[] = {
        {"workspace a byte short", ws_msg, ws, [](Args &a) { a.ws_bytes -= 1; }},
        {"no workspace", ws_msg, ws, [](Args &a) { a.ws_bytes = 0; }},
        {"workspace for one block fewer", ws_msg, ws, [](Args &a) { a.ctas += 1; }},
        {"counters a word short", cnt_msg, pre, [](Args &a) { a.counters -= 1; }},
        {"counters for one sequence fewer", cnt_msg, pre, [](Args &a) { a.num_seqs += 1; }},
        {"no counters", cnt_msg, pre, [](Args &a) { a.counters = 0; }},
        {"no blocks", grid_msg, pre, [](Args &a) { a.ctas = 0; }},
        {"65536 blocks", grid_msg, pre,
         [](Args &a) {
             a.ctas = 65536;
             a.ws_bytes = UINT64_MAX;
         }},
    };
    const char *const twin[] = {"", " (bulk twin)", " (tma twin)"};
    for (int k = 2; k < 4; k++)
        for (int impl = 0; impl < 3; impl++)
            for (const Bad &b : bads) {
                SCOPED_TRACE(std::string(kMma[k]) + twin[impl] + ": " + b.why);
                Args a = good();
                b.edit(a);
                kl_record_backend_clear(&rb_);
                EXPECT_EQ(launch_impl(k, impl, a), b.want);
                EXPECT_NE(std::string(kl_last_error_message()).find(b.message), std::string::npos)
                    << kl_last_error_message();
                EXPECT_EQ(rb_.count, 0u) << "a refused launch was recorded";
            }
    // The exact sizes pass, and one block at the limit.
    for (int k = 2; k < 4; k++)
        for (int impl = 0; impl < 3; impl++) {
            SCOPED_TRACE(std::string(kMma[k]) + twin[impl] + ": exact sizes");
            Args a = good();
            kl_record_backend_clear(&rb_);
            EXPECT_EQ(launch_impl(k, impl, a), KL_SUCCESS) << kl_last_error_message();
            a.ctas = 65535;
            a.ws_bytes = kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(GetParam()), a.hd, a.ctas);
            EXPECT_EQ(launch_impl(k, impl, a), KL_SUCCESS) << kl_last_error_message();
            EXPECT_EQ(rb_.count, 2u);
        }
}

// Issue 44, defect 5: a workspace one byte short was KL_ERROR_VARIANT_MISMATCH
// (Python: "no variant fits"), since its check reads a variant constant. A
// buffer too small is a size error of that buffer: KL_ERROR_PRECONDITION,
// naming the buffer, the size given and the size needed (the sizes the
// split header's helpers compute), for every persistent launcher.
TEST_P(BulkLaunchTest, WorkspaceOrCountersOneShortIsASizeErrorOfThatBufferNotAVariantMismatch) {
    const char *const twin[] = {"", " (bulk twin)", " (tma twin)"};
    for (int k = 2; k < 4; k++)
        for (int impl = 0; impl < 3; impl++) {
            SCOPED_TRACE(std::string(kMma[k]) + twin[impl]);
            Args a = good();
            const uint64_t need = kl_paged_decode_persist_workspace_bytes(static_cast<uint32_t>(GetParam()), a.hd, a.ctas);
            a.ws_bytes = need - 1;
            EXPECT_EQ(launch_impl(k, impl, a), KL_ERROR_PRECONDITION);
            std::string msg = kl_last_error_message();
            EXPECT_NE(msg.find("workspace is too small: workspace_bytes = " + std::to_string(need - 1) + ", " +
                               std::to_string(need) + " needed"),
                      std::string::npos)
                << msg;
            EXPECT_EQ(msg.find("VARIANT_MISMATCH"), std::string::npos) << msg;
            a = good();
            const uint64_t words = kl_paged_decode_persist_counter_words(a.num_seqs, a.nkv);
            a.counters = words - 1;
            EXPECT_EQ(launch_impl(k, impl, a), KL_ERROR_PRECONDITION);
            msg = kl_last_error_message();
            EXPECT_NE(msg.find("counters is too small: num_counters = " + std::to_string(words - 1) + ", " +
                               std::to_string(words) + " needed"),
                      std::string::npos)
                << msg;
            // The shape's own variant checks still decide the variant.
            a = good();
            a.nq += 1;
            EXPECT_EQ(launch_impl(k, impl, a), KL_ERROR_VARIANT_MISMATCH) << kl_last_error_message();
        }
}

TEST_P(BulkLaunchTest, TensorMapTwinsPackTheirMapsAndRefuseWhatTheyCannotCopy) {
    for (int k = 0; k < 4; k++) {
        SCOPED_TRACE(std::string(kMma[k]) + " tma twin");
        kl_record_backend_clear(&rb_);
        const Args a = good();
        ASSERT_EQ(launch(k, false, a), KL_SUCCESS) << kl_last_error_message();
        kl_kernel kern;
        ASSERT_EQ(get_tma(k, &kern), KL_SUCCESS) << kl_last_error_message();
        kl_tensor_map km, vm;
        const uint64_t stride3 = k % 2 ? a.cache_stride : uint64_t{a.bs} * a.nkv * a.hd;
        ASSERT_EQ(encode_tma(k, &kern, &km, k % 2 ? 0x40000 : 0x20000, stride3), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(encode_tma(k, &kern, &vm, k % 2 ? 0x50000 : 0x30000, stride3, true), KL_SUCCESS)
            << kl_last_error_message();
        ASSERT_EQ(launch_tma(k, a, &km, &vm), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(rb_.count, 2u);
        const kl_record &mma = records_[0], &tma = records_[1];
        EXPECT_EQ(std::string(tma.entry), std::string(kMma[k]).replace(std::string(kMma[k]).size() - 3, 3, "tma"));
        for (int i = 0; i < 3; i++) EXPECT_EQ(tma.grid[i], mma.grid[i]);
        EXPECT_EQ(tma.block[0], 384u);
        EXPECT_EQ(tma.shared_bytes, tma_shared(k));
        EXPECT_EQ(tma.attribute_flags, k >= 2 ? KL_LAUNCH_PROGRAMMATIC_SERIALIZATION : 0u);
        // q at 0, the maps by value at the next 128-byte offsets, then output.
        ASSERT_GE(tma.arg_bytes, 8u + 128u + 128u + 128u + 8u);
        uintptr_t qv = 0;
        std::memcpy(&qv, tma.args, 8);
        EXPECT_EQ(qv, reinterpret_cast<uintptr_t>(kQ));
        EXPECT_EQ(std::memcmp(tma.args + 128, km.opaque, 128), 0) << "k_map is not at offset 128";
        EXPECT_EQ(std::memcmp(tma.args + 256, vm.opaque, 128), 0) << "v_map is not at offset 256";
        uintptr_t ov = 0;
        std::memcpy(&ov, tma.args + 384, 8);
        EXPECT_EQ(ov, reinterpret_cast<uintptr_t>(kOut));

        // Block sizes off 16: the _bulk launcher's, not this one's.
        for (uint32_t bs : {1u, 8u, 24u}) {
            Args b = good();
            b.bs = bs;
            b.cache_stride = uint64_t{bs} * b.nkv * b.hd + 16;
            kl_record_backend_clear(&rb_);
            EXPECT_EQ(launch_tma(k, b, &km, &vm), KL_ERROR_PRECONDITION) << "block size " << bs;
            EXPECT_NE(std::string(kl_last_error_message()).find("one box of 16 slots"), std::string::npos);
            EXPECT_EQ(launch(k, true, b), KL_SUCCESS) << "the bulk twin takes block size " << bs;
        }
        // A map of the other cache type's launcher (another dtype and box).
        const int other = k ^ 1;
        kl_kernel okern;
        ASSERT_EQ(get_tma(other, &okern), KL_SUCCESS);
        kl_tensor_map om;
        ASSERT_EQ(encode_tma(other, &okern, &om, 0x20000, other % 2 ? a.cache_stride : uint64_t{a.bs} * a.nkv * a.hd),
                  KL_SUCCESS);
        kl_record_backend_clear(&rb_);
        EXPECT_EQ(launch_tma(k, a, &om, &vm), KL_ERROR_TENSOR_MAP);
        EXPECT_EQ(launch_tma(k, a, &km, &om), KL_ERROR_TENSOR_MAP);
        EXPECT_EQ(rb_.count, 0u);
        // The builders: caches off 16 bytes, strides off 16 bytes.
        kl_tensor_map bad;
        EXPECT_EQ(encode_tma(k, &kern, &bad, (k % 2 ? 0x40000 : 0x20000) + 2, stride3), KL_ERROR_TENSOR_MAP);
        if (k % 2) EXPECT_EQ(encode_tma(k, &kern, &bad, 0x40000, stride3 + 5), KL_ERROR_TENSOR_MAP);
    }
}

// Issue 44, defect 7: k_map and v_map have one description, so a K map passed
// for V (or the two swapped) passed every check and the kernel read K as V.
// Each builder tags its map with its parameter; a launcher refuses a map
// built for a parameter of another name, naming both, and records nothing.
TEST_P(BulkLaunchTest, TensorMapTwinsRefuseTheKAndVMapsSwappedNamingTheParameterEachWasBuiltFor) {
    for (int k = 0; k < 4; k++) {
        SCOPED_TRACE(std::string(kMma[k]) + " tma twin");
        const Args a = good();
        kl_kernel kern;
        ASSERT_EQ(get_tma(k, &kern), KL_SUCCESS) << kl_last_error_message();
        kl_tensor_map km, vm;
        const uint64_t stride3 = k % 2 ? a.cache_stride : uint64_t{a.bs} * a.nkv * a.hd;
        ASSERT_EQ(encode_tma(k, &kern, &km, k % 2 ? 0x40000 : 0x20000, stride3), KL_SUCCESS);
        ASSERT_EQ(encode_tma(k, &kern, &vm, k % 2 ? 0x50000 : 0x30000, stride3, true), KL_SUCCESS);
        kl_record_backend_clear(&rb_);
        EXPECT_EQ(launch_tma(k, a, &vm, &km), KL_ERROR_TENSOR_MAP);
        std::string msg = kl_last_error_message();
        EXPECT_NE(msg.find("tensor map k_map: the map was built for parameter v_map (by kl_" +
                           std::string(kMma[k]).replace(std::string(kMma[k]).size() - 3, 3, "tma") +
                           "_v_map_encode), not for k_map"),
                  std::string::npos)
            << msg;
        EXPECT_EQ(launch_tma(k, a, &km, &km), KL_ERROR_TENSOR_MAP);
        msg = kl_last_error_message();
        EXPECT_NE(msg.find("tensor map v_map: the map was built for parameter k_map"), std::string::npos) << msg;
        EXPECT_EQ(rb_.count, 0u) << "a refused launch was recorded";
        EXPECT_EQ(launch_tma(k, a, &km, &vm), KL_SUCCESS) << kl_last_error_message();
    }
}

TEST_P(BulkLaunchTest, GqaAppliesAnswersForTheBulkHandles) {
    const uint32_t w = static_cast<uint32_t>(GetParam());
    for (int k = 0; k < 4; k++) {
        kl_kernel kern;
        ASSERT_EQ(get(k, true, &kern), KL_SUCCESS) << kl_last_error_message();
        EXPECT_TRUE(kl_paged_decode_gqa_applies(&kern, 8 * w, 8, 128));
        EXPECT_FALSE(kl_paged_decode_gqa_applies(&kern, 8 * w + 1, 8, 128));
        EXPECT_FALSE(kl_paged_decode_gqa_applies(&kern, 8 * w, 8, 64));
    }
}

INSTANTIATE_TEST_SUITE_P(BothVariants, BulkLaunchTest, ::testing::Values(4, 8),
                         [](const ::testing::TestParamInfo<int> &i) { return "gqa" + std::to_string(i.param) + "_d128"; });

// ---- the chooser's rule (the former kl_paged_decode_gqa_pick) ---------------------
// The helper's expectations, derived by hand from its rule, asked now of
// kl_paged_decode_gqa_{bf16,fp8}_choose with a rule-only table (no rows and
// the compiled-in table skipped, so measured rows cannot change them): the
// source is the rule, and the tunables are kl_paged_decode_num_splits' and
// kl_paged_decode_persist_ctas' where the alternative has them, else 0.

constexpr uint32_t kH200 = 132;
const kl_choice_table kRuleOnly = {nullptr, 0u, nullptr, 0u, nullptr, KL_CHOICE_TABLE_ONLY};

static_assert(KL_PAGED_DECODE_GQA_FP8_MMA_SEED == (int)KL_PAGED_DECODE_GQA_BF16_MMA_SEED &&
                  KL_PAGED_DECODE_GQA_FP8_MMA_SPLIT == (int)KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT &&
                  KL_PAGED_DECODE_GQA_FP8_MMA_PERSIST == (int)KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST &&
                  KL_PAGED_DECODE_GQA_FP8_BULK_SEED == (int)KL_PAGED_DECODE_GQA_BF16_BULK_SEED &&
                  KL_PAGED_DECODE_GQA_FP8_BULK_PERSIST == (int)KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST &&
                  KL_PAGED_DECODE_GQA_FP8_TMA_SEED == (int)KL_PAGED_DECODE_GQA_BF16_TMA_SEED &&
                  KL_PAGED_DECODE_GQA_FP8_TMA_PERSIST == (int)KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST,
              "one expectation serves both cache types");

// Every GQA-packed handle of gqa8_d128 (64 query, 8 KV heads), from an image
// with the sm_90a machine code (the copy-engine launchers load) or without
// (their kl_X_get fails and leaves the handle unloaded: not available).
class GqaHandles {
  public:
    explicit GqaHandles(bool sm90a) {
        kl_record_backend_init(&rb_, records_, 1);
        rb_.max_dynamic_shared = 227 * 1024;
        const std::string text = module_text(8, sm90a ? "cuda_arch 900a\n" : "");
        loaded_ = kl_module_load(&rb_.base, text.c_str(), text.size(), &mod_) == KL_SUCCESS;
        EXPECT_TRUE(loaded_) << kl_last_error_message();
        bf = {get(kl_paged_decode_attn_bf16_gqa_mma_get, 0), get(kl_paged_decode_split_bf16_gqa_mma_get, 1),
              get(kl_paged_decode_persist_bf16_gqa_mma_get, 2), get(kl_paged_decode_attn_bf16_gqa_bulk_get, 3),
              get(kl_paged_decode_persist_bf16_gqa_bulk_get, 4), get(kl_paged_decode_attn_bf16_gqa_tma_get, 5),
              get(kl_paged_decode_persist_bf16_gqa_tma_get, 6), get(kl_paged_decode_attn_bf16_gqa_get, 7),
              get(kl_paged_decode_split_bf16_gqa_get, 8)};
        f8 = {get(kl_paged_decode_attn_fp8_gqa_mma_get, 9), get(kl_paged_decode_split_fp8_gqa_mma_get, 10),
              get(kl_paged_decode_persist_fp8_gqa_mma_get, 11), get(kl_paged_decode_attn_fp8_gqa_bulk_get, 12),
              get(kl_paged_decode_persist_fp8_gqa_bulk_get, 13), get(kl_paged_decode_attn_fp8_gqa_tma_get, 14),
              get(kl_paged_decode_persist_fp8_gqa_tma_get, 15), get(kl_paged_decode_attn_fp8_gqa_get, 16),
              get(kl_paged_decode_split_fp8_gqa_get, 17)};
        // The copy-engine ones (3..6 of each type) load exactly with the sm_90a image.
        for (int i = 0; i < 18; i++) EXPECT_EQ(got_[i], sm90a || i % 9 < 3 || i % 9 > 6) << "handle " << i;
    }
    ~GqaHandles() {
        if (loaded_) kl_module_unload(&mod_);
    }
    GqaHandles(const GqaHandles &) = delete;
    GqaHandles &operator=(const GqaHandles &) = delete;
    kl_paged_decode_gqa_bf16_kernels bf;
    kl_paged_decode_gqa_fp8_kernels f8;

  private:
    const kl_kernel *get(kl_status (*fn)(kl_kernel *, const kl_module *), int i) {
        got_[i] = fn(&k_[i], &mod_) == KL_SUCCESS;  // a refusal leaves k_[i] zeroed: not loaded
        return &k_[i];
    }
    kl_record records_[1];
    kl_record_backend rb_;
    kl_module mod_;
    kl_kernel k_[18];
    bool got_[18] = {};
    bool loaded_ = false;
};

// What the chooser takes for one cache type: the alternative (the bf16
// enumerators, which the fp8 ones equal), where it came from, the tunables.
struct Pick {
    int alt;
    kl_choice_source source;
    uint32_t num_splits, num_ctas;
    bool operator==(const Pick &o) const {
        return alt == o.alt && source == o.source && num_splits == o.num_splits && num_ctas == o.num_ctas;
    }
};

// The choice for num_seqs x len, 8 KV heads, no window, on `sms` SMs: [0]
// bf16, [1] fp8 (cache_stride: the block's elements, a multiple of 16).
std::array<Pick, 2> choose(const GqaHandles &h, uint32_t seqs, uint32_t len, uint32_t bs, uint32_t sms, bool aligned,
                           bool persistent_ok) {
    kl_device dev = {9, 0, sms, 60ull << 20, 150754820096ull, 0};  // an H200 of `sms` SMs
    const kl_paged_decode_gqa_bf16_shape s = {seqs, 64, 8, 128, bs, 0, len, aligned, persistent_ok};
    const kl_paged_decode_gqa_fp8_shape s8 = {seqs, 64, 8, 128, bs, 0, (uint64_t)bs * 8 * 128, len, aligned, persistent_ok};
    const kl_paged_decode_gqa_bf16_choice c = kl_paged_decode_gqa_bf16_choose(&s, &dev, &kRuleOnly, KL_CHOICE_EAGER, &h.bf);
    const kl_paged_decode_gqa_fp8_choice c8 = kl_paged_decode_gqa_fp8_choose(&s8, &dev, &kRuleOnly, KL_CHOICE_GRAPH, &h.f8);
    return {Pick{c.alternative, c.source, c.num_splits, c.num_ctas},
            Pick{c8.alternative, c8.source, c8.num_splits, c8.num_ctas}};
}

// Both cache types take `want` by the rule, with its tunables.
void expect_rule(const GqaHandles &h, uint32_t seqs, uint32_t len, uint32_t bs, uint32_t sms, bool aligned,
                 bool persistent_ok, int want) {
    const bool split = want == KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT || want == KL_PAGED_DECODE_GQA_BF16_SCALAR_SPLIT;
    const bool persist = want == KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST || want == KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST ||
                         want == KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST;
    const Pick expected = {want, KL_CHOICE_RULE, split ? kl_paged_decode_num_splits(seqs, 8, len, 0, bs, sms) : 0u,
                           persist ? kl_paged_decode_persist_ctas(seqs, 8, len, 0, sms) : 0u};
    const std::array<Pick, 2> got = choose(h, seqs, len, bs, sms, aligned, persistent_ok);
    for (int fp8 = 0; fp8 < 2; fp8++) {
        SCOPED_TRACE(testing::Message() << (fp8 ? "fp8" : "bf16") << " " << seqs << " x " << len << " block " << bs
                                        << " SMs " << sms << " aligned " << aligned << " persistent_ok "
                                        << persistent_ok);
        EXPECT_EQ(got[fp8].alt, expected.alt);
        EXPECT_EQ(got[fp8].source, expected.source);
        EXPECT_EQ(got[fp8].num_splits, expected.num_splits);
        EXPECT_EQ(got[fp8].num_ctas, expected.num_ctas);
    }
}

TEST(PagedDecodeGqaRule, TakesTheTensorMapLaunchersForAlignedCachesOfBlocksOf16) {
    GqaHandles sm90a(true);
    for (uint32_t seqs : {1u, 32u, 1000u})
        for (uint32_t bs : {16u, 64u}) {
            expect_rule(sm90a, seqs, 32768 / seqs + 1, bs, kH200, true, true, KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST);
            expect_rule(sm90a, seqs, 32768 / seqs + 1, bs, kH200, true, false, KL_PAGED_DECODE_GQA_BF16_TMA_SEED);
        }
}

TEST(PagedDecodeGqaRule, OtherBlockSizesTakeTheMmaLaunchersNotTheRowCopyOnes) {
    // A box is 16 slots of one block. The row-copy (_bulk) launchers, which
    // other block sizes could take, measured 0.70 (bf16) and 0.34 (fp8) of
    // copy at 32 x 4096 on the H200 against the _mma dispatch's 0.99 and
    // 0.79 (docs/PERFORMANCE.md, 2026-12-04): the rule is the one without
    // copy-engine launchers.
    GqaHandles sm90a(true), plain(false);
    for (uint32_t bs : {1u, 8u, 24u})
        for (bool persistent_ok : {false, true})
            for (uint32_t seqs : {1u, 32u}) {
                SCOPED_TRACE(testing::Message() << "block " << bs << " persistent_ok " << persistent_ok << " seqs " << seqs);
                const uint32_t len = seqs == 1u ? 32768u : 4096u;
                const std::array<Pick, 2> with = choose(sm90a, seqs, len, bs, kH200, true, persistent_ok);
                const std::array<Pick, 2> without = choose(plain, seqs, len, bs, kH200, true, persistent_ok);
                for (int fp8 = 0; fp8 < 2; fp8++) {
                    EXPECT_TRUE(with[fp8] == without[fp8]) << (fp8 ? "fp8" : "bf16");
                    EXPECT_EQ(with[fp8].source, KL_CHOICE_RULE);
                    EXPECT_NE(with[fp8].alt, KL_PAGED_DECODE_GQA_BF16_BULK_SEED);
                    EXPECT_NE(with[fp8].alt, KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST);
                    EXPECT_NE(with[fp8].alt, KL_PAGED_DECODE_GQA_BF16_NONE);
                }
            }
}

TEST(PagedDecodeGqaRule, CachesOff16BytesTakeTheMmaLaunchers) {
    GqaHandles sm90a(true), plain(false);
    for (uint32_t bs : {1u, 16u}) {
        const std::array<Pick, 2> with = choose(sm90a, 1, 32768, bs, kH200, false, true);
        const std::array<Pick, 2> without = choose(plain, 1, 32768, bs, kH200, false, true);
        EXPECT_TRUE(with[0] == without[0]) << "block " << bs;
        EXPECT_TRUE(with[1] == without[1]) << "block " << bs;
        expect_rule(sm90a, 32, 4096, bs, kH200, false, false, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    }
    expect_rule(sm90a, 1, 32768, 16, kH200, false, true, KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST);
}

TEST(PagedDecodeGqaRule, WithoutTheBulkLaunchersFollowsTheSplitRule) {
    GqaHandles plain(false);
    for (bool maps : {false, true}) {
        // 32 x 8 units fill 132 SMs: one split, the seed grid.
        expect_rule(plain, 32, 4096, 16, kH200, maps, true, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
        expect_rule(plain, 32, 4096, 16, kH200, maps, false, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
        // One long sequence: 16 splits; the persistent launcher (128 blocks)
        // where the caller keeps its buffers.
        expect_rule(plain, 1, 32768, 16, kH200, maps, true, KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST);
        expect_rule(plain, 1, 32768, 16, kH200, maps, false, KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT);
        // Degenerate shapes: the seed grid.
        expect_rule(plain, 0, 32768, 16, kH200, maps, true, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
        expect_rule(plain, 1, 32768, 16, 0, maps, true, KL_PAGED_DECODE_GQA_BF16_MMA_SEED);
    }
    // The counts the comments above name, so the tunables checked are these.
    EXPECT_EQ(choose(plain, 1, 32768, 16, kH200, true, false)[0].num_splits, 16u);
    EXPECT_EQ(choose(plain, 1, 32768, 16, kH200, true, true)[1].num_ctas, 128u);
}

}  // namespace
