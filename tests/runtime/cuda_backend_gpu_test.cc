// The CUDA backend on a real GPU (tags = ["gpu"]; skips without one). The
// modules are PTX written below, so this test needs no toolkit and no
// fatbin rule: the driver's JIT compiles them at load.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "klaunch/cuda_backend.h"
#include "klaunch/klaunch.h"
#include "tests/support/gpu_test_util.h"

namespace {

// Two kernels: kl_test_iota(u64* out, u32 n, u64 base) writes out[i] = base
// + i for i < n (parameters at offsets 0, 8, 16: base is 8-aligned), and
// kl_test_noop(). With `meta`, the module also carries kl__module_info as
// the generated .cuh defines it: the text and its NUL, in global memory.
std::string ptx_module(const std::string &meta) {
    std::string ptx =
        ".version 7.8\n"
        ".target sm_75\n"
        ".address_size 64\n";
    if (!meta.empty()) {
        ptx += ".visible .global .align 1 .b8 kl__module_info[" + std::to_string(meta.size() + 1) + "] = {";
        for (unsigned char c : meta) ptx += std::to_string(c) + ", ";
        ptx += "0};\n";
    }
    ptx +=
        ".visible .entry kl_test_iota(.param .u64 out, .param .u32 n, .param .u64 base)\n"
        "{\n"
        "    .reg .pred %p;\n"
        "    .reg .b32 %r<5>;\n"
        "    .reg .b64 %rd<7>;\n"
        "    ld.param.u64 %rd1, [out];\n"
        "    ld.param.u32 %r1, [n];\n"
        "    ld.param.u64 %rd2, [base];\n"
        "    mov.u32 %r2, %ctaid.x;\n"
        "    mov.u32 %r3, %ntid.x;\n"
        "    mov.u32 %r4, %tid.x;\n"
        "    mad.lo.s32 %r2, %r2, %r3, %r4;\n"
        "    setp.ge.u32 %p, %r2, %r1;\n"
        "    @%p bra DONE;\n"
        "    cvta.to.global.u64 %rd1, %rd1;\n"
        "    cvt.u64.u32 %rd3, %r2;\n"
        "    add.s64 %rd4, %rd2, %rd3;\n"
        "    shl.b64 %rd5, %rd3, 3;\n"
        "    add.s64 %rd6, %rd1, %rd5;\n"
        "    st.global.u64 [%rd6], %rd4;\n"
        "DONE:\n"
        "    ret;\n"
        "}\n"
        ".visible .entry kl_test_noop()\n"
        "{\n"
        "    ret;\n"
        "}\n";
    return ptx;
}

const char kMeta[] =
    "klaunch-module 1\n"
    "family runtime_test\n"
    "variant ptx\n"
    "source_hash unknown\n"
    "const TEST_WIDTH 8\n";

const kl_param_info kIotaParams[] = {
    {"out", KL_PARAM_PTR, 0, 8},
    {"n", KL_PARAM_U32, 8, 4},
    {"base", KL_PARAM_U64, 16, 8},
};

kl_kernel_desc iota_desc() {
    kl_kernel_desc d = {};
    d.launcher = "test_iota";
    d.entry = "kl_test_iota";
    d.family = "runtime_test";
    d.spec_file = "tests/runtime/cuda_backend_gpu_test.cc";
    d.spec_line = 1;
    d.spec_hash = "";
    d.params = kIotaParams;
    d.num_params = 3;
    d.param_bytes = 24;
    return d;
}

kl_kernel_desc noop_desc() {
    kl_kernel_desc d = iota_desc();
    d.launcher = "test_noop";
    d.entry = "kl_test_noop";
    d.params = nullptr;
    d.num_params = 0;
    d.param_bytes = 0;
    return d;
}

kl_launch make_launch(const kl_kernel *k, uint32_t grid, uint32_t block, uint32_t shared, void **args) {
    kl_launch l = {};
    l.kernel = k;
    l.grid[0] = grid;
    l.grid[1] = l.grid[2] = 1;
    l.block[0] = block;
    l.block[1] = l.block[2] = 1;
    l.shared_bytes = shared;
    l.stream = nullptr;
    l.args = args;
    return l;
}

bool has_param_info(const kl_cuda_backend *cuda) {
    return kl_cuda_backend_symbol(cuda, "cuFuncGetParamInfo") != nullptr;
}

class CudaBackendGpu : public GpuTest {
  protected:
    void load_test_module() {
        const std::string ptx = ptx_module(kMeta);
        ASSERT_EQ(kl_module_load(&cuda->base, ptx.data(), ptx.size(), &mod), KL_SUCCESS) << kl_last_error_message();
    }
    void TearDown() override { kl_module_unload(&mod); }
    kl_module mod{};
};

TEST_F(CudaBackendGpu, InitGivesTheDevicesName) {
    char name[256];
    KL_ASSERT_OK(kl_cuda_device_name(cuda, name, sizeof name));
    EXPECT_GT(std::strlen(name), 0u);
    std::printf("device: %s\n", name);
}

TEST_F(CudaBackendGpu, DescribesTheDeviceAsChoiceTablesKeyIt) {
    kl_device d;
    KL_ASSERT_OK(kl_cuda_device_describe(cuda, &d));
    EXPECT_EQ(static_cast<int>(d.cc_major), cuda->cc_major);
    EXPECT_EQ(static_cast<int>(d.cc_minor), cuda->cc_minor);
    EXPECT_GT(d.sm_count, 0u);
    EXPECT_GT(d.l2_bytes, 0u);
    EXPECT_GE(d.mem_bytes, 1ull << 30) << "every sm_80+ card has more than 1 GiB";
    EXPECT_GT(d.mem_bandwidth_gbs, 100u);
    std::printf("device: cc %u.%u, %u SMs, L2 %llu, %llu bytes, %u GB/s nominal\n", d.cc_major, d.cc_minor, d.sm_count,
                static_cast<unsigned long long>(d.l2_bytes), static_cast<unsigned long long>(d.mem_bytes),
                d.mem_bandwidth_gbs);
}

TEST_F(CudaBackendGpu, ResolvesDriverEntryPointsByExportedName) {
    EXPECT_NE(kl_cuda_backend_symbol(cuda, "cuMemAlloc_v2"), nullptr);
    EXPECT_NE(kl_cuda_backend_symbol(cuda, "cuLaunchKernel"), nullptr);
    EXPECT_EQ(kl_cuda_backend_symbol(cuda, "cuNoSuchFunction"), nullptr);
}

TEST_F(CudaBackendGpu, MemoryRoundTripsThroughTheDevice) {
    const size_t n = 1000003;  // odd on purpose
    std::vector<unsigned char> host(n), back(n, 0);
    for (size_t i = 0; i < n; i++) host[i] = static_cast<unsigned char>((i * 131u) ^ (i >> 7));
    void *d = nullptr;
    KL_ASSERT_OK(kl_cuda_malloc(cuda, &d, n));
    ASSERT_NE(d, nullptr);
    KL_EXPECT_OK(kl_cuda_memcpy_htod(cuda, d, host.data(), n));
    KL_EXPECT_OK(kl_cuda_memcpy_dtoh(cuda, back.data(), d, n));
    EXPECT_TRUE(back == host);
    KL_EXPECT_OK(kl_cuda_memset_d8(cuda, static_cast<char *>(d) + 1, 0x5a, n - 2));
    KL_EXPECT_OK(kl_cuda_memcpy_dtoh(cuda, back.data(), d, n));
    EXPECT_EQ(back[0], host[0]);
    EXPECT_EQ(back[1], 0x5a);
    EXPECT_EQ(back[n - 2], 0x5a);
    EXPECT_EQ(back[n - 1], host[n - 1]);
    KL_EXPECT_OK(kl_cuda_synchronize(cuda));
    KL_EXPECT_OK(kl_cuda_free(cuda, d));
}

TEST_F(CudaBackendGpu, ZeroBytesAllocateNothingAndFreeingNullSucceeds) {
    void *d = reinterpret_cast<void *>(0x1);
    KL_EXPECT_OK(kl_cuda_malloc(cuda, &d, 0));
    EXPECT_EQ(d, nullptr);
    KL_EXPECT_OK(kl_cuda_free(cuda, nullptr));
}

TEST_F(CudaBackendGpu, AnImpossibleAllocationIsOutOfMemory) {
    void *d = nullptr;
    EXPECT_EQ(kl_cuda_malloc(cuda, &d, size_t(1) << 50), KL_ERROR_OUT_OF_MEMORY);  // 1 PiB
    EXPECT_NE(std::string(kl_last_error_message()).find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(d, nullptr);
}

TEST_F(CudaBackendGpu, GarbageBytesAreAnInvalidImageWithTheDriversError) {
    const unsigned char garbage[] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 'n', 'o', 't', ' ', 'p', 't', 'x'};
    EXPECT_EQ(kl_module_load(&cuda->base, garbage, sizeof garbage, &mod), KL_ERROR_INVALID_IMAGE);
    EXPECT_NE(std::string(kl_last_error_message()).find("CUDA_ERROR_"), std::string::npos) << kl_last_error_message();
}

TEST_F(CudaBackendGpu, ATruncatedFatbinIsRefusedBeforeTheDriverReadsPastIt) {
    // A fatbin header (magic 0xBA55ED50, version 1, 16-byte header) that
    // claims 4096 bytes of body in a 32-byte image.
    unsigned char image[32] = {0x50, 0xed, 0x55, 0xba, 0x01, 0x00, 0x10, 0x00, 0x00, 0x10};
    EXPECT_EQ(kl_module_load(&cuda->base, image, sizeof image, &mod), KL_ERROR_INVALID_IMAGE);
    EXPECT_NE(std::string(kl_last_error_message()).find("fatbin: truncated"), std::string::npos)
        << kl_last_error_message();
}

TEST_F(CudaBackendGpu, AModuleWithoutMetadataIsNotAKlaunchFatbin) {
    const std::string ptx = ptx_module("");
    EXPECT_EQ(kl_module_load(&cuda->base, ptx.data(), ptx.size(), &mod), KL_ERROR_MODULE_INFO);
    EXPECT_NE(std::string(kl_last_error_message()).find("not a klaunch fatbin"), std::string::npos)
        << kl_last_error_message();
    EXPECT_EQ(mod.handle, nullptr);
}

TEST_F(CudaBackendGpu, LoadsAModuleAndReadsItsMetadataFromTheDevice) {
    load_test_module();
    EXPECT_STREQ(mod.family, "runtime_test");
    EXPECT_STREQ(mod.variant, "ptx");
    int64_t width = 0;
    EXPECT_TRUE(kl_module_const(&mod, "TEST_WIDTH", &width));
    EXPECT_EQ(width, 8);
}

TEST_F(CudaBackendGpu, LaunchesAKernelThatWritesItsOutput) {
    load_test_module();
    const kl_kernel_desc desc = iota_desc();
    kl_kernel k;
    KL_ASSERT_OK(kl_kernel_get(&k, &mod, &desc));
    EXPECT_GE(k.max_threads, 128u);
    EXPECT_GT(k.max_dynamic_shared, 0u);

    const uint32_t n = 1000;
    kl_test::DeviceBuffer<uint64_t> out(n + 24);  // 24 past the end must stay untouched
    out.poison();
    void *out_ptr = out.get();
    uint32_t count = n;
    uint64_t base = 1ull << 40;  // above 32 bits: the kernel reads all 8 bytes at offset 16
    void *args[] = {&out_ptr, &count, &base};
    const kl_launch l = make_launch(&k, (n + 127) / 128, 128, 0, args);
    KL_ASSERT_OK(k.backend->ops->launch(k.backend, &l));
    kl_test::synchronize();

    std::vector<uint64_t> want(n + 24, ~0ull);
    for (uint32_t i = 0; i < n; i++) want[i] = base + i;
    EXPECT_TRUE(kl_test::bitwise_equal("out", out.download(), want));
}

TEST_F(CudaBackendGpu, AMissingEntryIsKernelNotFoundNamingEntryAndLauncher) {
    load_test_module();
    kl_kernel_desc desc = iota_desc();
    desc.entry = "kl_test_absent";
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_KERNEL_NOT_FOUND);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("kl_test_absent"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kl_test_iota_get"), std::string::npos) << msg;
}

TEST_F(CudaBackendGpu, AParameterAtAnotherOffsetIsALayoutMismatch) {
    if (!has_param_info(cuda)) GTEST_SKIP() << "this driver has no cuFuncGetParamInfo";
    load_test_module();
    kl_param_info params[3];
    std::memcpy(params, kIotaParams, sizeof params);
    params[2] = {"base", KL_PARAM_U32, 12, 4};  // as if the spec said u32
    kl_kernel_desc desc = iota_desc();
    desc.params = params;
    desc.param_bytes = 16;
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_LAYOUT_MISMATCH);
    EXPECT_NE(std::string(kl_last_error_message()).find("base"), std::string::npos) << kl_last_error_message();
}

TEST_F(CudaBackendGpu, ASpecParameterTheKernelLacksIsALayoutMismatch) {
    if (!has_param_info(cuda)) GTEST_SKIP() << "this driver has no cuFuncGetParamInfo";
    load_test_module();
    kl_kernel_desc desc = noop_desc();
    desc.params = kIotaParams;
    desc.num_params = 1;
    desc.param_bytes = 8;
    kl_kernel k;
    EXPECT_EQ(kl_kernel_get(&k, &mod, &desc), KL_ERROR_LAYOUT_MISMATCH);
}

TEST_F(CudaBackendGpu, OptsIntoTheDynamicSharedMemoryTheDescriptorAsksFor) {
    load_test_module();
    const uint32_t big = 100 * 1024;  // above the 48 KiB default, within sm_80+'s opt-in limit
    kl_kernel_desc desc = noop_desc();
    desc.max_dynamic_shared = big;
    kl_kernel k;
    KL_ASSERT_OK(kl_kernel_get(&k, &mod, &desc));
    EXPECT_GE(k.max_dynamic_shared, big);
    const kl_launch l = make_launch(&k, 1, 32, big, nullptr);
    KL_EXPECT_OK(k.backend->ops->launch(k.backend, &l));
    kl_test::synchronize();
}

TEST_F(CudaBackendGpu, WithoutOptInTheLimitIsTheDefaultAndALargerLaunchFails) {
    load_test_module();
    const kl_kernel_desc desc = iota_desc();
    kl_kernel k;
    KL_ASSERT_OK(kl_kernel_get(&k, &mod, &desc));
    EXPECT_LE(k.max_dynamic_shared, 48u * 1024u);
    void *out_ptr = nullptr;
    uint32_t count = 0;
    uint64_t base = 0;
    void *args[] = {&out_ptr, &count, &base};
    const kl_launch l = make_launch(&k, 1, 32, 100 * 1024, args);
    EXPECT_EQ(k.backend->ops->launch(k.backend, &l), KL_ERROR_LAUNCH_FAILED);
}

TEST_F(CudaBackendGpu, ALaunchTheDriverRefusesNamesTheLauncherAndTheDriverError) {
    load_test_module();
    const kl_kernel_desc desc = iota_desc();
    kl_kernel k;
    KL_ASSERT_OK(kl_kernel_get(&k, &mod, &desc));
    void *out_ptr = nullptr;
    uint32_t count = 0;
    uint64_t base = 0;
    void *args[] = {&out_ptr, &count, &base};
    const kl_launch l = make_launch(&k, 1, 2048, 0, args);  // past every GPU's 1024 threads
    EXPECT_EQ(k.backend->ops->launch(k.backend, &l), KL_ERROR_LAUNCH_FAILED);
    const std::string msg = kl_last_error_message();
    EXPECT_NE(msg.find("kl_test_iota"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << msg;
    KL_EXPECT_OK(kl_cuda_synchronize(cuda));  // a refused launch leaves the context usable
}

TEST_F(CudaBackendGpu, HelpersWorkFromAThreadWithoutTheContext) {
    kl_status st = KL_ERROR_DRIVER;
    std::string msg;
    std::thread t([&] {
        void *d = nullptr;
        st = kl_cuda_malloc(cuda, &d, 4096);
        if (st == KL_SUCCESS) st = kl_cuda_memset_d8(cuda, d, 0, 4096);
        if (st == KL_SUCCESS) st = kl_cuda_free(cuda, d);
        msg = kl_last_error_message();
    });
    t.join();
    EXPECT_EQ(st, KL_SUCCESS) << msg;
}

TEST_F(CudaBackendGpu, ALaunchFromAThreadWithoutTheContextFailsCleanly) {
    load_test_module();
    const kl_kernel_desc desc = noop_desc();
    kl_kernel k;
    KL_ASSERT_OK(kl_kernel_get(&k, &mod, &desc));
    kl_status st = KL_SUCCESS;
    std::string msg;
    std::thread t([&] {
        const kl_launch l = make_launch(&k, 1, 32, 0, nullptr);
        st = k.backend->ops->launch(k.backend, &l);
        msg = kl_last_error_message();
    });
    t.join();
    EXPECT_EQ(st, KL_ERROR_LAUNCH_FAILED);
    EXPECT_NE(msg.find("CUDA_ERROR_INVALID_CONTEXT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not current"), std::string::npos) << msg;
}

}  // namespace
