// The recording backend: what it keeps of a launch, and its capacity, clear
// and failure settings. The descriptor is built by hand from the seed
// (../shared/seed/prefill_attn_a.rs, paged_decode_attn_fp8: its .arg_*
// order) and docs/DESIGN.md's natural alignment (pointers and u64: 8;
// u32, f32: 4), independently of the generator.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "klaunch/klaunch.h"
#include "klaunch/record_backend.h"

namespace {

// paged_decode_attn_fp8's kernel arguments; num_seqs is launch-only (it
// sizes the grid and is no kernel argument in the seed).
const kl_param_info kFp8Params[] = {
    {"q", KL_PARAM_PTR, 0, 8},
    {"k_cache", KL_PARAM_PTR, 8, 8},
    {"v_cache", KL_PARAM_PTR, 16, 8},
    {"output", KL_PARAM_PTR, 24, 8},
    {"block_tables", KL_PARAM_PTR, 32, 8},
    {"seq_lens", KL_PARAM_PTR, 40, 8},
    {"max_blocks_per_seq", KL_PARAM_U32, 48, 4},
    {"num_q_heads", KL_PARAM_U32, 52, 4},
    {"num_kv_heads", KL_PARAM_U32, 56, 4},
    {"head_dim", KL_PARAM_U32, 60, 4},
    {"block_size", KL_PARAM_U32, 64, 4},
    {"inv_sqrt_d", KL_PARAM_F32, 68, 4},
    {"k_scale", KL_PARAM_F32, 72, 4},
    {"v_scale", KL_PARAM_F32, 76, 4},
    {"q_stride", KL_PARAM_U32, 80, 4},
    {"cache_stride", KL_PARAM_U64, 88, 8},  // 84..87: padding to 8
    {"sliding_window", KL_PARAM_U32, 96, 4},
};
const uint32_t kFp8ParamBytes = 104;  // 100 rounded up to the buffer's 8-byte alignment

kl_kernel_desc fp8_desc() {
    kl_kernel_desc d = {};
    d.launcher = "paged_decode_attn_fp8";
    d.entry = "paged_decode_attn_fp8";
    d.family = "paged_decode";
    d.spec_file = "specs/paged_decode.yaml";
    d.spec_line = 1;
    d.spec_hash = "";
    d.params = kFp8Params;
    d.num_params = sizeof kFp8Params / sizeof kFp8Params[0];
    d.param_bytes = kFp8ParamBytes;
    return d;
}

// One launch's argument values, and the pointer array cuLaunchKernel takes.
struct Fp8Args {
    const void *q = reinterpret_cast<const void *>(0x7f0000001000);
    const void *k_cache = reinterpret_cast<const void *>(0x7f0000002000);
    const void *v_cache = reinterpret_cast<const void *>(0x7f0000003000);
    void *output = reinterpret_cast<void *>(0x7f0000004000);
    const void *block_tables = reinterpret_cast<const void *>(0x7f0000005000);
    const void *seq_lens = reinterpret_cast<const void *>(0x7f0000006000);
    uint32_t max_blocks_per_seq = 33, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, block_size = 16;
    float inv_sqrt_d = 0.08838834764831845f, k_scale = 0.5f, v_scale = 0.25f;
    uint32_t q_stride = 4096;
    uint64_t cache_stride = 0x100000000ull + 16 * 8 * 128;  // above 32 bits: all 8 bytes matter
    uint32_t sliding_window = 0xdeadbeef;
    void *ptrs[17] = {&q, &k_cache, &v_cache, &output, &block_tables, &seq_lens, &max_blocks_per_seq,
                      &num_q_heads, &num_kv_heads, &head_dim, &block_size, &inv_sqrt_d, &k_scale,
                      &v_scale, &q_stride, &cache_stride, &sliding_window};
};

template <class T>
T read_at(const kl_record &r, size_t offset) {
    T v;
    std::memcpy(&v, r.args + offset, sizeof v);
    return v;
}

class RecordBackend : public ::testing::Test {
  protected:
    void SetUp() override {
        // Garbage where records will go: packing must not depend on zeroed storage.
        std::memset(storage, 0xab, sizeof storage);
        kl_record_backend_init(&rb, storage, 2);
        desc = fp8_desc();
        const char meta[] = "klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\n";
        ASSERT_EQ(kl_module_load(&rb.base, meta, sizeof meta - 1, &mod), KL_SUCCESS) << kl_last_error_message();
        ASSERT_EQ(kl_kernel_get(&kernel, &mod, &desc), KL_SUCCESS) << kl_last_error_message();
    }
    void TearDown() override { kl_module_unload(&mod); }

    kl_status launch(uint32_t gx = 32, uint32_t gy = 5) {
        kl_launch l = {};
        l.kernel = &kernel;
        l.grid[0] = gx;
        l.grid[1] = gy;
        l.grid[2] = 1;
        l.block[0] = 256;
        l.block[1] = 1;
        l.block[2] = 1;
        l.shared_bytes = 0;
        l.stream = reinterpret_cast<kl_stream>(0x5151);
        l.args = args.ptrs;
        return rb.base.ops->launch(&rb.base, &l);
    }

    kl_record storage[3];  // capacity 2: storage[2] must never be written
    kl_record_backend rb;
    kl_kernel_desc desc;
    kl_module mod{};
    kl_kernel kernel{};
    Fp8Args args;
};

TEST(RecordBackendInit, SetsTheDocumentedDefaults) {
    kl_record recs[1];
    kl_record_backend rb;
    std::memset(&rb, 0x5a, sizeof rb);
    kl_record_backend_init(&rb, recs, 1);
    ASSERT_NE(rb.base.ops, nullptr);
    EXPECT_STREQ(rb.base.ops->name, "record");
    EXPECT_EQ(rb.records, recs);
    EXPECT_EQ(rb.capacity, 1u);
    EXPECT_EQ(rb.count, 0u);
    EXPECT_EQ(rb.max_threads, 1024u);
    EXPECT_EQ(rb.max_dynamic_shared, 48u * 1024u);
    EXPECT_EQ(rb.missing_entry, nullptr);
    EXPECT_EQ(rb.launch_status, KL_SUCCESS);
}

TEST_F(RecordBackend, KeepsKernelGridBlockSharedAndStream) {
    ASSERT_EQ(launch(32, 5), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(rb.count, 1u);
    const kl_record &r = storage[0];
    EXPECT_EQ(r.desc, &desc);
    EXPECT_STREQ(r.entry, "paged_decode_attn_fp8");
    EXPECT_EQ(r.grid[0], 32u);
    EXPECT_EQ(r.grid[1], 5u);
    EXPECT_EQ(r.grid[2], 1u);
    EXPECT_EQ(r.block[0], 256u);
    EXPECT_EQ(r.block[1], 1u);
    EXPECT_EQ(r.block[2], 1u);
    EXPECT_EQ(r.shared_bytes, 0u);
    EXPECT_EQ(r.stream, reinterpret_cast<kl_stream>(0x5151));
    EXPECT_EQ(r.arg_bytes, kFp8ParamBytes);
}

TEST_F(RecordBackend, PacksArgumentsAtTheirOffsets) {
    ASSERT_EQ(launch(), KL_SUCCESS) << kl_last_error_message();
    const kl_record &r = storage[0];
    EXPECT_EQ(read_at<const void *>(r, 0), args.q);
    EXPECT_EQ(read_at<const void *>(r, 8), args.k_cache);
    EXPECT_EQ(read_at<const void *>(r, 16), args.v_cache);
    EXPECT_EQ(read_at<void *>(r, 24), args.output);
    EXPECT_EQ(read_at<const void *>(r, 32), args.block_tables);
    EXPECT_EQ(read_at<const void *>(r, 40), args.seq_lens);
    EXPECT_EQ(read_at<uint32_t>(r, 48), 33u);
    EXPECT_EQ(read_at<uint32_t>(r, 52), 32u);
    EXPECT_EQ(read_at<uint32_t>(r, 56), 8u);
    EXPECT_EQ(read_at<uint32_t>(r, 60), 128u);
    EXPECT_EQ(read_at<uint32_t>(r, 64), 16u);
    EXPECT_EQ(read_at<float>(r, 68), 0.08838834764831845f);
    EXPECT_EQ(read_at<float>(r, 72), 0.5f);
    EXPECT_EQ(read_at<float>(r, 76), 0.25f);
    EXPECT_EQ(read_at<uint32_t>(r, 80), 4096u);
    EXPECT_EQ(read_at<uint64_t>(r, 88), 0x100000000ull + 16 * 8 * 128);
    EXPECT_EQ(read_at<uint32_t>(r, 96), 0xdeadbeefu);
}

TEST_F(RecordBackend, PaddingInsideTheParameterBufferIsZero) {
    ASSERT_EQ(launch(), KL_SUCCESS) << kl_last_error_message();
    const kl_record &r = storage[0];
    // Bytes past arg_bytes are unspecified (the backend clears only what a
    // launch uses); padding inside the buffer must read as zero.
    ASSERT_EQ(r.arg_bytes, kFp8ParamBytes);
    EXPECT_EQ(read_at<uint32_t>(r, 84), 0u) << "padding before cache_stride";
    for (size_t i = 100; i < kFp8ParamBytes; i++) EXPECT_EQ(r.args[i], 0) << "trailing padding byte " << i;
}

TEST_F(RecordBackend, RefusesALaunchBeyondCapacityNamingTheLauncher) {
    ASSERT_EQ(launch(1), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(launch(2), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(launch(3), KL_ERROR_CAPACITY);
    EXPECT_NE(std::string(kl_last_error_message()).find("kl_paged_decode_attn_fp8"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(rb.count, 2u);
    EXPECT_EQ(storage[0].grid[0], 1u);
    EXPECT_EQ(storage[1].grid[0], 2u);
    EXPECT_EQ(storage[2].grid[0], 0xababababu) << "wrote past the capacity";
}

TEST_F(RecordBackend, ClearForgetsRecordsAndStartsOver) {
    ASSERT_EQ(launch(1), KL_SUCCESS);
    ASSERT_EQ(launch(2), KL_SUCCESS);
    kl_record_backend_clear(&rb);
    EXPECT_EQ(rb.count, 0u);
    ASSERT_EQ(launch(7), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(rb.count, 1u);
    EXPECT_EQ(storage[0].grid[0], 7u);
}

TEST_F(RecordBackend, LaunchStatusFailsLaunchesAndRecordsNothing) {
    rb.launch_status = KL_ERROR_LAUNCH_FAILED;
    EXPECT_EQ(launch(), KL_ERROR_LAUNCH_FAILED);
    EXPECT_EQ(kl_last_error(), KL_ERROR_LAUNCH_FAILED);
    EXPECT_NE(std::string(kl_last_error_message()).find("kl_paged_decode_attn_fp8"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(rb.count, 0u);
    rb.launch_status = KL_SUCCESS;
    EXPECT_EQ(launch(), KL_SUCCESS);
    EXPECT_EQ(rb.count, 1u);
}

TEST_F(RecordBackend, WithoutStorageEveryLaunchIsOverCapacity) {
    kl_record_backend_init(&rb, nullptr, 5);
    EXPECT_EQ(launch(), KL_ERROR_CAPACITY);
    EXPECT_EQ(rb.count, 0u);
}

TEST_F(RecordBackend, RefusesAParameterBufferLargerThanARecordHolds) {
    kl_kernel_desc big = desc;
    big.param_bytes = KL_RECORD_ARG_BYTES + 8;
    kernel.desc = &big;  // the backend reads the descriptor through the handle
    EXPECT_EQ(launch(), KL_ERROR_CAPACITY);
    EXPECT_NE(std::string(kl_last_error_message()).find("KL_RECORD_ARG_BYTES"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(rb.count, 0u);
}

TEST_F(RecordBackend, RefusesAParameterOutsideTheBuffer) {
    kl_param_info params[sizeof kFp8Params / sizeof kFp8Params[0]];
    std::memcpy(params, kFp8Params, sizeof params);
    params[16].offset = 100;  // 100 + 4 bytes > 102
    kl_kernel_desc bad = desc;
    bad.params = params;
    bad.param_bytes = 102;
    kernel.desc = &bad;
    EXPECT_EQ(launch(), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kl_last_error_message()).find("sliding_window"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(rb.count, 0u);
}

TEST_F(RecordBackend, ReportsTheConfiguredLimitsAsTheFunctions) {
    rb.max_threads = 256;
    rb.max_dynamic_shared = 100 * 1024;
    kl_kernel k;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &desc), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(k.max_threads, 256u);
    EXPECT_EQ(k.max_dynamic_shared, 100u * 1024u);
}

}  // namespace
