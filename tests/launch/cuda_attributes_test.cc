// The CUDA backend's launch-attribute, capture-guard and lookup paths
// against a fake driver (function pointers in kl_cuda_backend.api), so they
// run anywhere: which device or driver refuses which attribute (at lookup,
// KL_ERROR_UNSUPPORTED naming attribute, kernel and device), what
// cuLaunchKernelEx receives (its configuration read through cuda.h's layout
// of CUlaunchConfig / CUlaunchAttribute, offsets written out here from
// cuda.h of CUDA 12.0-13.0), that plain launches stay on cuLaunchKernel,
// and that a guarded stream's capture refuses loads and lookups before any
// driver load call. Also the record backend's view of the attributes.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

// The driver's handle types stay opaque: the fake hands out tagged addresses.
#define fake_ctx (*reinterpret_cast<CUctx_st *>(0xc7c7))
#define fake_mod (*reinterpret_cast<CUmod_st *>(0xc0de))
#define fake_fn (*reinterpret_cast<CUfunc_st *>(0xf00d))

namespace {

// ---- the fake driver ---------------------------------------------------------------

struct Fake {
    int cc_major = 9, cluster_launch = 1, cooperative_launch = 1;
    int capturing = 0;                      // status cuStreamIsCapturing gives for capture_stream
    kl_stream capture_stream = nullptr;
    int module_loads = 0, function_gets = 0, plain_launches = 0, ex_launches = 0;
    // What cuLaunchKernelEx got, as raw bytes at cuda.h's offsets.
    unsigned char config[56];
    unsigned char attrs[3][72];
    unsigned int num_attrs = 0;
    // Arguments 0 (a pointer) and 5 (a u32) as the launch passed them.
    void *arg0 = nullptr;
    uint32_t arg5 = 0;
};
Fake fake;


int f_push(kl__cu_context) { return 0; }
int f_pop(kl__cu_context *c) {
    *c = &fake_ctx;
    return 0;
}
int f_set(kl__cu_context) { return 0; }
int f_get(kl__cu_context *c) {
    *c = &fake_ctx;
    return 0;
}
int f_device_attr(int *v, int attr, kl__cu_device) {
    switch (attr) {
    case 75: *v = fake.cc_major; return 0;
    case 76: *v = 0; return 0;
    case 95: *v = fake.cooperative_launch; return 0;
    case 120: *v = fake.cluster_launch; return 0;
    default: *v = 0; return 0;
    }
}
int f_module_load(kl__cu_module *m, const void *) {
    fake.module_loads++;
    *m = &fake_mod;
    return 0;
}
int f_get_function(kl__cu_function *fn, kl__cu_module, const char *) {
    fake.function_gets++;
    *fn = &fake_fn;
    return 0;
}
int f_func_attr(int *v, int attr, kl__cu_function) {
    *v = attr == 0 ? 1024 : 48 * 1024;
    return 0;
}
int f_launch(kl__cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, kl_stream,
             void **, void **) {
    fake.plain_launches++;
    return 0;
}
int f_launch_ex(const kl__cu_launch_config *config, kl__cu_function, void **params, void **) {
    fake.ex_launches++;
    std::memcpy(fake.config, config, sizeof fake.config);
    fake.num_attrs = config->num_attrs;
    for (unsigned i = 0; i < config->num_attrs && i < 3; i++)
        std::memcpy(fake.attrs[i], reinterpret_cast<const unsigned char *>(config->attrs) + 72 * i, 72);
    std::memcpy(&fake.arg0, params[0], sizeof fake.arg0);
    std::memcpy(&fake.arg5, params[5], sizeof fake.arg5);
    return 0;
}
int f_is_capturing(kl_stream s, int *status) {
    *status = s == fake.capture_stream ? fake.capturing : 0;
    return 0;
}
int f_error_name(int, const char **s) {
    *s = "CUDA_ERROR_FAKE";
    return 0;
}

uint32_t u32_at(const unsigned char *p, size_t off) {
    uint32_t v;
    std::memcpy(&v, p + off, 4);
    return v;
}
uint64_t u64_at(const unsigned char *p, size_t off) {
    uint64_t v;
    std::memcpy(&v, p + off, 8);
    return v;
}

class FakeCuda : public ::testing::Test {
  protected:
    void SetUp() override {
        fake = Fake();
        std::memset(&cb, 0, sizeof cb);
        cb.base.ops = &kl__cuda_ops;
        cb.lib = &fake;  // only tested against NULL
        cb.ctx = &fake_ctx;
        cb.ordinal = 3;
        cb.cc_major = fake.cc_major;
        cb.api.ctx_push_current = f_push;
        cb.api.ctx_pop_current = f_pop;
        cb.api.ctx_set_current = f_set;
        cb.api.ctx_get_current = f_get;
        cb.api.device_get_attribute = f_device_attr;
        cb.api.module_load_data = f_module_load;
        cb.api.module_get_function = f_get_function;
        cb.api.func_get_attribute = f_func_attr;
        cb.api.launch_kernel = f_launch;
        cb.api.launch_kernel_ex = f_launch_ex;
        cb.api.stream_is_capturing = f_is_capturing;
        cb.api.get_error_name = f_error_name;
        // A module as kl_module_load would leave it (its metadata read elsewhere).
        std::memset(&mod, 0, sizeof mod);
        mod.backend = &cb.base;
        mod.handle = &fake_mod;
        std::strcpy(mod.family, "paged_decode");
        std::strcpy(mod.variant, "gqa8_d128");
        mod.magic = KL__MODULE_MAGIC;
    }
    void set_cc(int major) {
        fake.cc_major = major;
        cb.cc_major = major;
    }
    kl_cuda_backend cb;
    kl_module mod;
};

float *const kWs = reinterpret_cast<float *>(0x10000);
kl_bf16 *const kOut = reinterpret_cast<kl_bf16 *>(0x20000);
kl_stream const kStream = reinterpret_cast<kl_stream>(0x5eed);

TEST_F(FakeCuda, PdlLaunchGoesThroughCuLaunchKernelExWithTheAttribute) {
    kl_kernel k;
    ASSERT_EQ(kl_paged_decode_split_combine_pdl_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    const uint64_t ws_bytes = 4ull * 2 * 3 * 8 * (128 + 2);
    ASSERT_EQ(kl_paged_decode_split_combine_pdl(&k, kWs, kOut, 2, 8, 128, 3, ws_bytes, kStream), KL_SUCCESS)
        << kl_last_error_message();
    EXPECT_EQ(fake.plain_launches, 0);
    ASSERT_EQ(fake.ex_launches, 1);
    // CUlaunchConfig: gridDimX..blockDimZ, sharedMemBytes at 0..24, hStream at
    // 32, attrs at 40, numAttrs at 48 (cuda.h).
    EXPECT_EQ(u32_at(fake.config, 0), 8u);  // grid (num_q_heads, num_seqs)
    EXPECT_EQ(u32_at(fake.config, 4), 2u);
    EXPECT_EQ(u32_at(fake.config, 8), 1u);
    EXPECT_EQ(u32_at(fake.config, 12), 128u);
    EXPECT_EQ(u32_at(fake.config, 16), 1u);
    EXPECT_EQ(u32_at(fake.config, 20), 1u);
    EXPECT_EQ(u32_at(fake.config, 24), 0u);
    EXPECT_EQ(u64_at(fake.config, 32), 0x5eedu);
    EXPECT_EQ(u32_at(fake.config, 48), 1u);
    ASSERT_EQ(fake.num_attrs, 1u);
    // CUlaunchAttribute: id at 0, value at 8; PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    // value.programmaticStreamSerializationAllowed = 1.
    EXPECT_EQ(u32_at(fake.attrs[0], 0), 6u);
    EXPECT_EQ(u32_at(fake.attrs[0], 8), 1u);
    // The kernel arguments as for cuLaunchKernel.
    EXPECT_EQ(fake.arg0, static_cast<void *>(kWs));
    EXPECT_EQ(fake.arg5, 3u);
}

TEST_F(FakeCuda, PlainLaunchesStayOnCuLaunchKernel) {
    kl_kernel k;
    ASSERT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_paged_decode_split_combine(&k, kWs, kOut, 2, 8, 128, 3, 1u << 20, kStream), KL_SUCCESS);
    EXPECT_EQ(fake.plain_launches, 1);
    EXPECT_EQ(fake.ex_launches, 0);
}

TEST_F(FakeCuda, PdlBelowSm90IsRefusedAtLookup) {
    set_cc(8);
    kl_kernel k;
    EXPECT_EQ(kl_paged_decode_split_combine_pdl_get(&k, &mod), KL_ERROR_UNSUPPORTED);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("kl_paged_decode_split_combine_pdl_get"), std::string::npos) << msg;
    EXPECT_NE(msg.find("programmatic dependent launch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device 3 (sm_80)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("specs/paged_decode.yaml:"), std::string::npos) << msg;
    EXPECT_EQ(fake.function_gets, 0);
    // The plain combine still works there.
    EXPECT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_SUCCESS);
}

TEST_F(FakeCuda, ADriverWithoutCuLaunchKernelExRefusesAttributesAtLookup) {
    cb.api.launch_kernel_ex = nullptr;
    kl_kernel k;
    EXPECT_EQ(kl_paged_decode_split_combine_pdl_get(&k, &mod), KL_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kl_last_error_message()).find("no cuLaunchKernelEx"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_SUCCESS);
}

// Cluster and cooperative attributes, with a hand-made descriptor.
const kl_launch_attributes kClusterCoop = {{2u, 1u, 1u}, KL_LAUNCH_COOPERATIVE, 7, 9};

kl_kernel_desc attr_desc(const kl_launch_attributes *a) {
    kl_kernel_desc d;
    std::memset(&d, 0, sizeof d);
    d.launcher = "fake_attr";
    d.entry = "fake_attr_kernel";
    d.family = "paged_decode";
    d.spec_file = "fake.yaml";
    d.spec_hash = "test";
    d.attributes = a;
    return d;
}

TEST_F(FakeCuda, ClusterAndCooperativeAttributesReachTheDriver) {
    const kl_kernel_desc d = attr_desc(&kClusterCoop);
    kl_kernel k;
    ASSERT_EQ(kl_kernel_get(&k, &mod, &d), KL_SUCCESS) << kl_last_error_message();
    kl_launch l;
    std::memset(&l, 0, sizeof l);
    void *no_args[6] = {&l, &l, &l, &l, &l, &l};  // the fake reads arguments 0 and 5
    l.args = no_args;
    l.kernel = &k;
    l.grid[0] = 4;
    l.grid[1] = l.grid[2] = 1;
    l.block[0] = 64;
    l.block[1] = l.block[2] = 1;
    l.attributes = d.attributes;
    ASSERT_EQ(k.backend->ops->launch(k.backend, &l), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(fake.num_attrs, 2u);
    EXPECT_EQ(u32_at(fake.attrs[0], 0), 4u);  // CLUSTER_DIMENSION, value.clusterDim {x, y, z}
    EXPECT_EQ(u32_at(fake.attrs[0], 8), 2u);
    EXPECT_EQ(u32_at(fake.attrs[0], 12), 1u);
    EXPECT_EQ(u32_at(fake.attrs[0], 16), 1u);
    EXPECT_EQ(u32_at(fake.attrs[1], 0), 2u);  // COOPERATIVE, value.cooperative
    EXPECT_EQ(u32_at(fake.attrs[1], 8), 1u);
}

TEST_F(FakeCuda, ClusterBelowSm90AndCooperativeWithoutSupportAreRefused) {
    const kl_kernel_desc d = attr_desc(&kClusterCoop);
    kl_kernel k;
    set_cc(8);
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kl_last_error_message()).find("thread-block cluster"), std::string::npos)
        << kl_last_error_message();
    EXPECT_NE(std::string(kl_last_error_message()).find("[fake.yaml:7:9]"), std::string::npos)
        << kl_last_error_message();
    set_cc(9);
    fake.cluster_launch = 0;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kl_last_error_message()).find("CLUSTER_LAUNCH"), std::string::npos);
    fake.cluster_launch = 1;
    fake.cooperative_launch = 0;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &d), KL_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kl_last_error_message()).find("cooperative launch"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(fake.function_gets, 0);
}

TEST_F(FakeCuda, AGuardedCapturingStreamRefusesLoadsAndLookups) {
    kl_stream s = reinterpret_cast<kl_stream>(0xca9);
    ASSERT_EQ(kl_cuda_backend_guard_stream(&cb, s), KL_SUCCESS);
    fake.capture_stream = s;
    fake.capturing = 1;
    const char ptx[] = "// not really PTX";
    kl_module m2;
    EXPECT_EQ(kl_module_load(&cb.base, ptx, sizeof ptx - 1, &m2), KL_ERROR_CAPTURE_ACTIVE);
    EXPECT_NE(std::string(kl_last_error_message()).find("kl_module_load"), std::string::npos);
    EXPECT_EQ(fake.module_loads, 0) << "the driver's load must not be called during the capture";
    kl_kernel k;
    EXPECT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_ERROR_CAPTURE_ACTIVE);
    EXPECT_EQ(fake.function_gets, 0);
    // An invalidated capture is refused too (loading cannot repair it).
    fake.capturing = 2;
    EXPECT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_ERROR_CAPTURE_ACTIVE);
    EXPECT_NE(std::string(kl_last_error_message()).find("invalidated"), std::string::npos);
    // Capture over: lookups work; a launch never asks.
    fake.capturing = 0;
    ASSERT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_SUCCESS) << kl_last_error_message();
    fake.capturing = 1;
    EXPECT_EQ(kl_paged_decode_split_combine(&k, kWs, kOut, 2, 8, 128, 3, 1u << 20, s), KL_SUCCESS);
    // Unguarded, the stream is no longer asked about.
    kl_cuda_backend_unguard_stream(&cb, s);
    EXPECT_EQ(kl_paged_decode_split_combine_get(&k, &mod), KL_SUCCESS);
    EXPECT_EQ(cb.num_guarded, 0);
}

TEST_F(FakeCuda, GuardedStreamsAreBounded) {
    for (int i = 0; i < KL_CUDA_MAX_GUARDED_STREAMS; i++)
        ASSERT_EQ(kl_cuda_backend_guard_stream(&cb, reinterpret_cast<kl_stream>(0x100 + i)), KL_SUCCESS);
    EXPECT_EQ(kl_cuda_backend_guard_stream(&cb, reinterpret_cast<kl_stream>(0x100)), KL_SUCCESS);  // already
    EXPECT_EQ(kl_cuda_backend_guard_stream(&cb, reinterpret_cast<kl_stream>(0x999)), KL_ERROR_CAPACITY);
}

// ---- the record backend ---------------------------------------------------------------

TEST(RecordAttributes, TheRecordShowsThePdlAttributeAndPlainLaunchesShowNone) {
    std::vector<kl_record> recs(4);
    kl_record_backend rb;
    kl_record_backend_init(&rb, recs.data(), recs.size());
    const std::string meta =
        "klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nconst DECODE_GQA_PACK_WIDTH 8\n"
        "const DECODE_GQA_PACK_HEAD_DIM 128\n";
    kl_module m;
    ASSERT_EQ(kl_module_load(&rb.base, meta.c_str(), meta.size(), &m), KL_SUCCESS) << kl_last_error_message();
    kl_kernel pdl, plain;
    ASSERT_EQ(kl_paged_decode_split_combine_pdl_get(&pdl, &m), KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(kl_paged_decode_split_combine_get(&plain, &m), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine_pdl(&pdl, kWs, kOut, 2, 8, 128, 3, 1u << 20, kStream), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_split_combine(&plain, kWs, kOut, 2, 8, 128, 3, 1u << 20, kStream), KL_SUCCESS);
    ASSERT_EQ(rb.count, 2u);
    EXPECT_STREQ(recs[0].entry, "paged_decode_split_combine_pdl");
    EXPECT_EQ(recs[0].attribute_flags, KL_LAUNCH_PROGRAMMATIC_SERIALIZATION);
    EXPECT_EQ(recs[0].cluster[0], 0u);
    EXPECT_EQ(recs[0].grid[0], 8u);
    EXPECT_EQ(recs[0].grid[1], 2u);
    EXPECT_EQ(recs[0].block[0], 128u);
    EXPECT_STREQ(recs[1].entry, "paged_decode_split_combine");
    EXPECT_EQ(recs[1].attribute_flags, 0u);
    // Same arguments, same bytes: only the entry and the attribute differ.
    EXPECT_EQ(recs[0].arg_bytes, recs[1].arg_bytes);
    EXPECT_EQ(std::memcmp(recs[0].args, recs[1].args, recs[0].arg_bytes), 0);
    kl_module_unload(&m);
}

}  // namespace
