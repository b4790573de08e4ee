// The CUDA backend where there may be no driver or GPU (CI, the development
// machine): init fails with a status and a message, never crashes, and
// leaves a backend every other function refuses cleanly. Passes on a GPU
// machine too (the driver-present case is cuda_backend_gpu_test).
#include <cstring>
#include <gtest/gtest.h>

#include <string>

#include "klaunch/cuda_backend.h"
#include "klaunch/klaunch.h"

namespace {

bool starts_with(const std::string &s, const std::string &prefix) { return s.rfind(prefix, 0) == 0; }

TEST(CudaBackend, InitWithoutDriverOrDeviceFailsWithAMessage) {
    kl_cuda_backend cb;
    const kl_status st = kl_cuda_backend_init(&cb, 0);
    if (st == KL_SUCCESS) {
        kl_cuda_backend_destroy(&cb);
        GTEST_SKIP() << "a CUDA driver and device are present; cuda_backend_gpu_test covers this machine";
    }
    ASSERT_TRUE(st == KL_ERROR_NO_DRIVER || st == KL_ERROR_NO_DEVICE) << kl_status_name(st);
    const std::string msg = kl_last_error_message();
    EXPECT_TRUE(starts_with(msg, std::string(kl_status_name(st)) + ": ")) << msg;
    if (st == KL_ERROR_NO_DRIVER) {
        EXPECT_NE(msg.find("libcuda.so.1"), std::string::npos) << msg;
    }
    EXPECT_EQ(cb.base.ops, nullptr);
}

TEST(CudaBackend, AnOrdinalWithoutADeviceIsNeverSuccess) {
    for (int ordinal : {-1, 1 << 20}) {
        kl_cuda_backend cb;
        const kl_status st = kl_cuda_backend_init(&cb, ordinal);
        EXPECT_TRUE(st == KL_ERROR_NO_DRIVER || st == KL_ERROR_NO_DEVICE)
            << "ordinal " << ordinal << ": " << kl_status_name(st) << " " << kl_last_error_message();
        if (st == KL_ERROR_NO_DEVICE) {
            EXPECT_NE(std::string(kl_last_error_message()).find(std::to_string(ordinal)), std::string::npos)
                << kl_last_error_message();
        }
    }
}

TEST(CudaBackend, AFailedInitLeavesABackendEveryCallRefuses) {
    kl_cuda_backend cb;
    ASSERT_NE(kl_cuda_backend_init(&cb, -1), KL_SUCCESS);
    void *p = reinterpret_cast<void *>(0x1000);
    char host[8] = {0};
    char name[64] = "unchanged";
    EXPECT_EQ(kl_cuda_backend_symbol(&cb, "cuMemAlloc_v2"), nullptr);
    EXPECT_EQ(kl_cuda_malloc(&cb, &p, 64), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(p, nullptr) << "a failed malloc hands back NULL";
    EXPECT_EQ(kl_cuda_free(&cb, reinterpret_cast<void *>(0x1000)), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_memcpy_htod(&cb, reinterpret_cast<void *>(0x1000), host, sizeof host),
              KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_memcpy_dtoh(&cb, host, reinterpret_cast<void *>(0x1000), sizeof host),
              KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_memset_d8(&cb, reinterpret_cast<void *>(0x1000), 0, 8), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_synchronize(&cb), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_device_name(&cb, name, sizeof name), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(name, "");
    kl_device dev;
    std::memset(&dev, 0x5a, sizeof dev);
    EXPECT_EQ(kl_cuda_device_describe(&cb, &dev), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(dev.sm_count, 0u) << "a failed describe leaves a zeroed device, not a stale one";
    EXPECT_EQ(dev.mem_bytes, 0u);
    kl_module mod;
    const char meta[] = "klaunch-module 1\nfamily f\n";
    EXPECT_EQ(kl_module_load(&cb.base, meta, sizeof meta, &mod), KL_ERROR_INVALID_ARGUMENT);
    kl_cuda_backend_destroy(&cb);  // harmless
    kl_cuda_backend_destroy(&cb);
}

TEST(CudaBackend, NullArgumentsAreInvalidArgument) {
    EXPECT_EQ(kl_cuda_backend_init(nullptr, 0), KL_ERROR_INVALID_ARGUMENT);
    kl_cuda_backend_destroy(nullptr);
    EXPECT_EQ(kl_cuda_backend_symbol(nullptr, "cuInit"), nullptr);
    EXPECT_EQ(kl_cuda_malloc(nullptr, nullptr, 8), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_synchronize(nullptr), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_device_name(nullptr, nullptr, 0), KL_ERROR_INVALID_ARGUMENT);
    kl_device dev;
    EXPECT_EQ(kl_cuda_device_describe(nullptr, &dev), KL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(kl_cuda_device_describe(nullptr, nullptr), KL_ERROR_INVALID_ARGUMENT);
}

}  // namespace
