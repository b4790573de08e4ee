// Layer 3 (run time), on a GPU (tags = ["gpu"]; skips without one): the
// CUDA backend compares each kernel's parameters, as the driver reports
// them (cuFuncGetParamInfo), with the launcher's spec when the kernel is
// looked up, and refuses a fatbin built from another version of the spec.
//
// The fixture fatbins (tests/arg_order/BUILD): argtest_good is right; the
// others were compiled with KL_NO_SIGNATURE_CHECKS from wrong sources, so
// that layer 1 let them through (swapped: n and stride exchanged; widened:
// n a u64; truncated: tag missing; extra: one parameter more; missing: no
// argtest_axpy), and argtest_stale from an older spec. Expected offsets are
// worked out by hand from the fixture sources (natural alignment), as in
// cubin_negative_test.py; the stale hash is sha256sum's (spec_hashes.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "klaunch/argtest.h"
#include "tests/arg_order/argtest_extra_fatbins.h"
#include "tests/arg_order/argtest_good_fatbins.h"
#include "tests/arg_order/argtest_missing_fatbins.h"
#include "tests/arg_order/argtest_stale_fatbins.h"
#include "tests/arg_order/argtest_swapped_fatbins.h"
#include "tests/arg_order/argtest_truncated_fatbins.h"
#include "tests/arg_order/argtest_widened_fatbins.h"
#include "tests/arg_order/spec_hashes.h"
#include "tests/support/gpu_test_util.h"

namespace {

// "[specs/argtest.yaml:14]": where a launcher's messages point.
std::string where(const kl_kernel_desc &d) {
    return std::string(" [") + d.spec_file + ":" + std::to_string(d.spec_line) + "]";
}

class ArgOrderGpu : public kl_test::GpuTest {
  protected:
    // cuFuncGetParamInfo present: the layout check runs.
    bool layout_checked() const { return kl_cuda_backend_layout_note(cuda) == nullptr; }

    // argtest_axpy of the module is refused with exactly `message`; the
    // module's argtest_fill, which is right, still loads.
    void expect_layout_mismatch(const unsigned char *image, size_t size, const std::string &message) {
        if (!layout_checked()) GTEST_SKIP() << kl_cuda_backend_layout_note(cuda);
        kl_test::Module mod(image, size);
        kl_kernel k;
        EXPECT_EQ(kl_argtest_axpy_get(&k, mod), KL_ERROR_LAYOUT_MISMATCH) << kl_last_error_message();
        EXPECT_EQ(std::string(kl_last_error_message()), message);
        std::printf("argtest_axpy: %s\n", kl_last_error_message());
        kl_kernel fill;
        KL_EXPECT_OK(kl_argtest_fill_get(&fill, mod));
    }
};

TEST_F(ArgOrderGpu, TheGoodFatbinLoadsAndItsKernelsReadEachArgumentRight) {
    std::printf("layout check: %s\n", layout_checked() ? "on (cuFuncGetParamInfo)" : kl_cuda_backend_layout_note(cuda));
    kl_test::Module mod(kl_fatbin_argtest_good_v1, kl_fatbin_argtest_good_v1_size);
    kl_kernel axpy, fill;
    KL_ASSERT_OK(kl_argtest_axpy_get(&axpy, mod));
    KL_ASSERT_OK(kl_argtest_fill_get(&fill, mod));

    // Every argument changes the result, so a wrong packing shows: y[i *
    // stride] = a * x[i] + tag for i < n, the rest of y untouched (NaN).
    const uint32_t n = 1000, tag = 7;
    const uint64_t stride = 3;
    const float a = 2.5f;
    std::vector<float> x(n + 16);
    for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(static_cast<int>(i % 97) - 40);
    kl_test::DeviceBuffer<float> dx(x);
    kl_test::DeviceBuffer<float> dy((n + 16) * stride);
    dy.poison();
    KL_ASSERT_OK(kl_argtest_axpy(&axpy, dx.get(), dy.get(), n, stride, a, tag, nullptr));
    kl_test::synchronize();
    const std::vector<float> y = dy.download();
    int bad = 0;
    for (size_t j = 0; j < y.size() && bad < 10; j++) {
        const bool written = j % stride == 0 && j / stride < n;
        const float want = written ? a * x[j / stride] + static_cast<float>(tag) : NAN;
        if (written ? y[j] != want : !std::isnan(y[j])) {
            ADD_FAILURE() << "y[" << j << "] = " << y[j] << ", want " << want;
            bad++;
        }
    }

    kl_test::DeviceBuffer<uint32_t> out(n + 5);
    out.poison();
    KL_ASSERT_OK(kl_argtest_fill(&fill, out.get(), n, 0xC0FFEEu, nullptr));
    kl_test::synchronize();
    const std::vector<uint32_t> o = out.download();
    for (size_t j = 0; j < o.size(); j++) EXPECT_EQ(o[j], j < n ? 0xC0FFEEu : 0xFFFFFFFFu) << "out[" << j << "]";
}

TEST_F(ArgOrderGpu, TwoParametersSwappedAreRefusedAtTheFirst) {
    // kernel: x 0/8, y 8/8, stride 16/8, n 24/4, ...; spec: n 16/4.
    expect_layout_mismatch(kl_fatbin_argtest_swapped_v1, kl_fatbin_argtest_swapped_v1_size,
                           "KL_ERROR_LAYOUT_MISMATCH: kl_argtest_axpy_get: kernel argtest_axpy differs from its spec at "
                           "parameter 3 (n): the kernel has offset 16, 8 bytes; the spec says offset 16, 4 bytes (u32)" +
                               where(kl_argtest_axpy_desc));
}

TEST_F(ArgOrderGpu, AU32ThatBecameU64IsRefused) {
    expect_layout_mismatch(kl_fatbin_argtest_widened_v1, kl_fatbin_argtest_widened_v1_size,
                           "KL_ERROR_LAYOUT_MISMATCH: kl_argtest_axpy_get: kernel argtest_axpy differs from its spec at "
                           "parameter 3 (n): the kernel has offset 16, 8 bytes; the spec says offset 16, 4 bytes (u32)" +
                               where(kl_argtest_axpy_desc));
}

TEST_F(ArgOrderGpu, AMissingTrailingParameterIsRefusedByName) {
    expect_layout_mismatch(kl_fatbin_argtest_truncated_v1, kl_fatbin_argtest_truncated_v1_size,
                           "KL_ERROR_LAYOUT_MISMATCH: kl_argtest_axpy_get: kernel argtest_axpy has 5 parameters, its "
                           "spec 6: parameter 6 (tag, offset 36, 4 bytes, u32) is missing" +
                               where(kl_argtest_axpy_desc));
}

TEST_F(ArgOrderGpu, AnExtraTrailingParameterIsLeftToTheEarlierLayers) {
    // Documented (docs/ARG_ORDER.md): the driver is not asked past the
    // spec's last parameter, so only layers 1 and 2 see an extra one.
    kl_test::Module mod(kl_fatbin_argtest_extra_v1, kl_fatbin_argtest_extra_v1_size);
    kl_kernel k;
    KL_EXPECT_OK(kl_argtest_axpy_get(&k, mod));
}

TEST_F(ArgOrderGpu, AKernelNoSourceDefinedIsNotFound) {
    kl_test::Module mod(kl_fatbin_argtest_missing_v1, kl_fatbin_argtest_missing_v1_size);
    kl_kernel k;
    EXPECT_EQ(kl_argtest_axpy_get(&k, mod), KL_ERROR_KERNEL_NOT_FOUND);
    EXPECT_EQ(std::string(kl_last_error_message()),
              "KL_ERROR_KERNEL_NOT_FOUND: kl_argtest_axpy_get: the module has no kernel 'argtest_axpy'" +
                  where(kl_argtest_axpy_desc));
    KL_EXPECT_OK(kl_argtest_fill_get(&k, mod));
}

TEST_F(ArgOrderGpu, AFatbinOfAnotherSpecVersionIsStale) {
    kl_test::Module mod(kl_fatbin_argtest_stale_v1, kl_fatbin_argtest_stale_v1_size);
    EXPECT_STREQ(mod.get()->spec_hash, ARGTEST_STALE_SPEC_HASH);
    for (int which = 0; which < 2; which++) {
        const kl_kernel_desc &d = which ? kl_argtest_fill_desc : kl_argtest_axpy_desc;
        kl_kernel k;
        EXPECT_EQ(which ? kl_argtest_fill_get(&k, mod) : kl_argtest_axpy_get(&k, mod), KL_ERROR_STALE_FATBIN);
        EXPECT_EQ(std::string(kl_last_error_message()),
                  std::string("KL_ERROR_STALE_FATBIN: kl_") + d.launcher + "_get: module argtest/v1 was built from spec " +
                      ARGTEST_STALE_SPEC_HASH + ", this launcher's header from spec " + ARGTEST_SPEC_HASH +
                      where(d) +
                      ": one of them is stale; rebuild both from the same spec: ./bazelw build //kernels:argtest (or "
                      "./bazelw run //:generate)");
    }
}

int g_notes = 0;
std::string g_note;

void count_notes(kl_status status, const char *message, void *) {
    if (status == KL_ERROR_UNSUPPORTED && std::string(message).find("cuFuncGetParamInfo") != std::string::npos) {
        g_notes++;
        g_note = message;
    }
}

const char kNote[] =
    "this driver has no cuFuncGetParamInfo (drivers of CUDA 12.4 and newer have it): kernel parameter layouts are "
    "not checked when kernels are looked up; the compile-time and build-time checks still apply "
    "(docs/ARG_ORDER.md)";

// Takes cuFuncGetParamInfo away, as on a driver older than CUDA 12.4, and
// counts the notes; gives it back however the test ends.
struct NoParamInfo {
    explicit NoParamInfo(kl_cuda_backend *cb) : cuda(cb), saved(cb->api.func_get_param_info) {
        cuda->api.func_get_param_info = nullptr;
        kl_set_error_callback(count_notes, nullptr);
    }
    ~NoParamInfo() {
        kl_set_error_callback(nullptr, nullptr);
        cuda->api.func_get_param_info = saved;
    }
    kl_cuda_backend *cuda;
    decltype(kl__cuda_api::func_get_param_info) saved;
};

TEST_F(ArgOrderGpu, WithoutCuFuncGetParamInfoTheCheckIsSkippedAndSaidOnce) {
    const bool had = layout_checked();
    {
        NoParamInfo without(cuda);
        EXPECT_STREQ(kl_cuda_backend_layout_note(cuda), kNote);
        kl_test::Module mod(kl_fatbin_argtest_swapped_v1, kl_fatbin_argtest_swapped_v1_size);
        kl_kernel k;
        // The swapped kernel goes through: nothing can see it at run time now.
        EXPECT_EQ(kl_argtest_axpy_get(&k, mod), KL_SUCCESS) << kl_last_error_message();
        EXPECT_EQ(kl_argtest_axpy_get(&k, mod), KL_SUCCESS) << kl_last_error_message();
        EXPECT_EQ(kl_argtest_fill_get(&k, mod), KL_SUCCESS) << kl_last_error_message();
    }
    std::printf("note: %s\n", g_note.c_str());
    if (had) {
        // Nothing in this process skipped the check before: one note, from the first lookup.
        EXPECT_EQ(g_notes, 1);
        EXPECT_EQ(g_note, std::string("KL_ERROR_UNSUPPORTED: kl_argtest_axpy_get: ") + kNote);
    } else {
        EXPECT_LE(g_notes, 1);  // it may have been said before this test
    }
    EXPECT_EQ(kl_cuda_backend_layout_note(cuda) == nullptr, had);
}

}  // namespace
