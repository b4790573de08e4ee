// Tensor maps on the CUDA backend over a fake driver (no GPU): every rule
// kl_tensor_map_encode_tiled enforces is refused before cuTensorMapEncodeTiled
// is called (the fake counts its calls), a good request reaches it with
// exactly the request's values, a driver refusal is KL_ERROR_DRIVER and
// leaves the map as it was; and the load-time layout check places a tensor
// map where each target's parameter area puts it. Rules: cuda.h's
// documentation of cuTensorMapEncodeTiled (CUDA 13.0); offsets: the cubins
// nvcc 13.0 builds for (u32, CUtensorMap, u32, u64) — sm_80 0/32/160/168,
// sm_90 0/112/240/248, sm_100 0/128/256/264 (EIATTR_KPARAM_INFO, read with
// tools/nvinfo/cubin_nvinfo.py).
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/tensor_map.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/runtime/fake_driver.h"

namespace {

struct EncodeCall {
    int dtype, interleave, swizzle, l2, fill;
    unsigned rank;
    void *address;
    std::vector<unsigned long long> extents, strides;
    std::vector<unsigned> box, estr;
};
std::vector<EncodeCall> g_calls;
int g_answer = 0;  // what the fake cuTensorMapEncodeTiled returns

int fake_encode(void *map, int dtype, unsigned rank, void *address, const unsigned long long *extents,
                const unsigned long long *strides, const unsigned *box, const unsigned *estr, int interleave,
                int swizzle, int l2, int fill) {
    EncodeCall c{dtype, interleave, swizzle, l2, fill, rank, address, {}, {}, {}, {}};
    for (unsigned i = 0; i < rank; ++i) {
        c.extents.push_back(extents[i]);
        c.box.push_back(box[i]);
        c.estr.push_back(estr[i]);
        if (i + 1 < rank) c.strides.push_back(strides[i]);
    }
    g_calls.push_back(c);
    if (g_answer == 0) std::memset(map, 0xab, 128);  // the "driver's" encoding
    return g_answer;
}

struct TensorMapDriver : ::testing::Test {
    void SetUp() override {
        kl_fake_driver::init(&cb);
        cb.api.tensor_map_encode_tiled = fake_encode;
        g_calls.clear();
        g_answer = 0;
        alignas(128) static unsigned char buffer[1 << 16];
        r.dtype = KL_TENSOR_MAP_BF16;
        r.rank = 2;
        r.address = buffer;
        r.extent[0] = 1000;
        r.extent[1] = 7;
        r.stride[0] = 2016;  // 1008 bf16 elements, a multiple of 16 bytes
        r.box[0] = 64;
        r.box[1] = 8;
        r.element_stride[0] = r.element_stride[1] = 1;
        r.swizzle = KL_TENSOR_MAP_SWIZZLE_128B;
        r.l2_promotion = KL_TENSOR_MAP_L2_128B;
        std::memset(&old, 0x5a, sizeof old);
    }
    // Encodes `q` into a map holding `old`'s bytes; returns the status.
    kl_status encode(const kl_tensor_map_request &q) {
        map = old;
        return kl_tensor_map_encode_tiled(&cb.base, &q, &map);
    }
    kl_cuda_backend cb;
    kl_tensor_map_request r{};
    kl_tensor_map map, old;
};

TEST_F(TensorMapDriver, AGoodRequestReachesTheDriverAsGiven) {
    ASSERT_EQ(KL_SUCCESS, encode(r)) << kl_last_error_message();
    ASSERT_EQ(1u, g_calls.size());
    const EncodeCall &c = g_calls[0];
    EXPECT_EQ(9, c.dtype);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    EXPECT_EQ(2u, c.rank);
    EXPECT_EQ(r.address, c.address);
    EXPECT_EQ((std::vector<unsigned long long>{1000, 7}), c.extents);
    EXPECT_EQ((std::vector<unsigned long long>{2016}), c.strides);
    EXPECT_EQ((std::vector<unsigned>{64, 8}), c.box);
    EXPECT_EQ((std::vector<unsigned>{1, 1}), c.estr);
    EXPECT_EQ(0, c.interleave);
    EXPECT_EQ(3, c.swizzle);  // CU_TENSOR_MAP_SWIZZLE_128B
    EXPECT_EQ(2, c.l2);       // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
    EXPECT_EQ(0, c.fill);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(0xababababababababull, map.opaque[i]) << "the driver's bytes are kept";
    EXPECT_EQ(&cb.base, map.backend);
    EXPECT_EQ(2u, map.request.rank);
}

struct Case {
    const char *what;
    void (*edit)(kl_tensor_map_request &);
    kl_status status;
    const char *says;
};

// One case per rule (cuda.h, cuTensorMapEncodeTiled), each just past it.
const Case kCases[] = {
    {"dtype 13 (16U4_ALIGN8B, not encoded by klaunch)", [](kl_tensor_map_request &q) { q.dtype = 13; },
     KL_ERROR_TENSOR_MAP, "dtype 13 is not one klaunch encodes"},
    {"rank 0", [](kl_tensor_map_request &q) { q.rank = 0; }, KL_ERROR_TENSOR_MAP, "rank 0 is outside 1..5"},
    {"rank 6", [](kl_tensor_map_request &q) { q.rank = 6; }, KL_ERROR_TENSOR_MAP, "rank 6 is outside 1..5"},
    {"NULL address", [](kl_tensor_map_request &q) { q.address = nullptr; }, KL_ERROR_NULL_POINTER,
     "the global address is NULL"},
    {"address 8 bytes past 16",
     [](kl_tensor_map_request &q) { q.address = static_cast<const char *>(q.address) + 8; }, KL_ERROR_TENSOR_MAP,
     "is not 16-byte aligned"},
    {"interleave 32B, address 16 past 32",
     [](kl_tensor_map_request &q) {
         q.rank = 3;
         q.extent[2] = 2;
         q.stride[1] = 2016 * 7 + 32;
         q.box[0] = 16;  // 32 bytes
         q.box[2] = 1;
         q.element_stride[2] = 1;
         q.interleave = KL_TENSOR_MAP_INTERLEAVE_32B;
         q.swizzle = KL_TENSOR_MAP_SWIZZLE_32B;
         q.stride[0] = 2048;
         q.address = static_cast<const char *>(q.address) + 16;
     },
     KL_ERROR_TENSOR_MAP, "is not 32-byte aligned (interleave 32B)"},
    {"extent 0", [](kl_tensor_map_request &q) { q.extent[1] = 0; }, KL_ERROR_TENSOR_MAP,
     "extent1 = 0 is outside 1..2^32"},
    {"extent 2^32 + 1", [](kl_tensor_map_request &q) { q.extent[0] = (1ull << 32) + 1; }, KL_ERROR_TENSOR_MAP,
     "extent0 = 4294967297 is outside 1..2^32"},
    {"stride 2008 bytes", [](kl_tensor_map_request &q) { q.stride[0] = 2008; }, KL_ERROR_TENSOR_MAP,
     "stride1 = 2008 bytes is not a multiple of 16 bytes"},
    {"stride 2^40 bytes", [](kl_tensor_map_request &q) { q.stride[0] = 1ull << 40; }, KL_ERROR_TENSOR_MAP,
     "stride1 = 1099511627776 bytes is not below 2^40"},
    {"box 0", [](kl_tensor_map_request &q) { q.box[1] = 0; }, KL_ERROR_TENSOR_MAP, "box1 = 0 is outside 1..256"},
    {"box 257", [](kl_tensor_map_request &q) { q.box[1] = 257; }, KL_ERROR_TENSOR_MAP,
     "box1 = 257 is outside 1..256"},
    {"inner box 12 bf16 = 24 bytes", [](kl_tensor_map_request &q) { q.box[0] = 12; }, KL_ERROR_TENSOR_MAP,
     "box0 = 12 elements of bf16 is 24 bytes, not a multiple of 16"},
    {"inner box 72 bf16 over the 128-byte swizzle", [](kl_tensor_map_request &q) { q.box[0] = 72; },
     KL_ERROR_TENSOR_MAP, "box0 = 72 elements of bf16 is 144 bytes, more than the 128B swizzle's span of 128 bytes"},
    {"inner box 32 bf16 over the 32-byte swizzle",
     [](kl_tensor_map_request &q) {
         q.box[0] = 32;
         q.swizzle = KL_TENSOR_MAP_SWIZZLE_32B;
     },
     KL_ERROR_TENSOR_MAP, "more than the 32B swizzle's span of 32 bytes"},
    {"element stride 9", [](kl_tensor_map_request &q) { q.element_stride[1] = 9; }, KL_ERROR_TENSOR_MAP,
     "element stride 1 = 9 is outside 1..8"},
    {"swizzle 4 (128B_ATOM_32B)", [](kl_tensor_map_request &q) { q.swizzle = 4; }, KL_ERROR_TENSOR_MAP,
     "swizzle 4 is not none (0), 32B (1), 64B (2) or 128B (3)"},
    {"interleave on rank 2", [](kl_tensor_map_request &q) { q.interleave = KL_TENSOR_MAP_INTERLEAVE_16B; },
     KL_ERROR_TENSOR_MAP, "an interleaved map needs rank 3 or more"},
    {"L2 promotion 4", [](kl_tensor_map_request &q) { q.l2_promotion = 4; }, KL_ERROR_TENSOR_MAP,
     "L2 promotion 4 is not"},
    {"NaN fill of i32",
     [](kl_tensor_map_request &q) {
         q.dtype = KL_TENSOR_MAP_I32;
         q.box[0] = 32;
         q.oob_fill = KL_TENSOR_MAP_FILL_NAN;
     },
     KL_ERROR_TENSOR_MAP, "NaN out-of-bounds fill needs a floating-point dtype; this map's is i32"},
};

TEST_F(TensorMapDriver, EveryRefusalHappensBeforeTheDriverIsCalled) {
    for (const Case &c : kCases) {
        SCOPED_TRACE(c.what);
        kl_tensor_map_request q = r;
        c.edit(q);
        EXPECT_EQ(c.status, encode(q));
        const std::string msg = kl_last_error_message();
        EXPECT_EQ(0u, msg.find(std::string(kl_status_name(c.status)) + ": kl_tensor_map_encode_tiled: ")) << msg;
        EXPECT_NE(std::string::npos, msg.find(c.says)) << msg;
        EXPECT_TRUE(g_calls.empty()) << "cuTensorMapEncodeTiled was called";
        EXPECT_EQ(0, std::memcmp(&map, &old, sizeof map)) << "a refused encode changed the map";
        g_calls.clear();
    }
}

TEST_F(TensorMapDriver, RefusesStorageTheDriverCannotWriteAndNoBackend) {
    alignas(128) static unsigned char raw[sizeof(kl_tensor_map) + 64];
    kl_tensor_map *misaligned = reinterpret_cast<kl_tensor_map *>(raw + 32);
    EXPECT_EQ(KL_ERROR_INVALID_ARGUMENT, kl_tensor_map_encode_tiled(&cb.base, &r, misaligned));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("is not 64-byte aligned"));
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_tensor_map_encode_tiled(&cb.base, &r, nullptr));
    EXPECT_EQ(KL_ERROR_NULL_POINTER, kl_tensor_map_encode_tiled(&cb.base, nullptr, &map));
    EXPECT_EQ(KL_ERROR_INVALID_ARGUMENT, kl_tensor_map_encode_tiled(nullptr, &r, &map));
    EXPECT_TRUE(g_calls.empty());
}

TEST_F(TensorMapDriver, ADriverRefusalIsADriverErrorAndKeepsTheMap) {
    g_answer = 1;  // CUDA_ERROR_INVALID_VALUE
    EXPECT_EQ(KL_ERROR_DRIVER, encode(r));
    const std::string msg = kl_last_error_message();
    EXPECT_NE(std::string::npos, msg.find("cuTensorMapEncodeTiled(rank 2, address")) << msg;
    EXPECT_NE(std::string::npos, msg.find("CUDA_ERROR_FAKE")) << msg;
    EXPECT_EQ(1u, g_calls.size());
    EXPECT_EQ(0, std::memcmp(&map, &old, sizeof map));
}

TEST_F(TensorMapDriver, ADriverWithoutTheEntryPointIsUnsupported) {
    cb.api.tensor_map_encode_tiled = nullptr;
    EXPECT_EQ(KL_ERROR_UNSUPPORTED, encode(r));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("this driver lacks it"));
    EXPECT_EQ(0, std::memcmp(&map, &old, sizeof map));
}

// ---- the load-time layout check (cuFuncGetParamInfo) ----

const kl_param_info kParams[] = {
    {"n", KL_PARAM_U32, 0, 4},
    {"map", KL_PARAM_TENSOR_MAP, 128, 128},
    {"m", KL_PARAM_U32, 256, 4},
    {"out", KL_PARAM_PTR, 264, 8},
};
kl_kernel_desc desc_of(const kl_param_info *params) {
    kl_kernel_desc d;
    std::memset(&d, 0, sizeof d);
    d.launcher = "tm";
    d.entry = "tm";
    d.family = "f";
    d.spec_file = "f.yaml";
    d.params = params;
    d.num_params = 4;
    d.param_bytes = 272;
    return d;
}
std::vector<size_t> g_offsets;
int fake_param_info(kl__cu_function, size_t i, size_t *offset, size_t *size) {
    if (i >= g_offsets.size()) return 1;
    *offset = g_offsets[i];
    *size = kParams[i].size;
    return 0;
}

TEST_F(TensorMapDriver, LayoutCheckFollowsEachTargetsParameterArea) {
    cb.api.func_get_param_info = fake_param_info;
    const kl_kernel_desc d = desc_of(kParams);
    for (auto offsets : {std::vector<size_t>{0, 32, 160, 168}, std::vector<size_t>{0, 112, 240, 248},
                         std::vector<size_t>{0, 128, 256, 264}}) {
        g_offsets = offsets;
        EXPECT_EQ(KL_SUCCESS, kl__cuda_check_layout(&cb, nullptr, &d)) << offsets[1] << ": " << kl_last_error_message();
    }
    // A map where no target's 16-byte-aligned parameter area puts it, and a
    // parameter after it where no alignment does, are mismatches.
    g_offsets = {0, 116, 244, 248};
    EXPECT_EQ(KL_ERROR_LAYOUT_MISMATCH, kl__cuda_check_layout(&cb, nullptr, &d));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("parameter 2 (map): the kernel has offset 116"))
        << kl_last_error_message();
    g_offsets = {0, 112, 240, 256};
    EXPECT_EQ(KL_ERROR_LAYOUT_MISMATCH, kl__cuda_check_layout(&cb, nullptr, &d));
    EXPECT_NE(std::string::npos, std::string(kl_last_error_message()).find("the kernel has offset 256, 8 bytes; the spec says offset 248"))
        << kl_last_error_message();
}

}  // namespace
