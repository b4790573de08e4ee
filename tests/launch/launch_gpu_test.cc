// GPU tests of launch attributes, CUDA graphs and several GPUs (docs/LAUNCH.md):
//
// - Pdl: paged_decode_split_* followed by paged_decode_split_combine_pdl (a
//   programmatic dependent launch: the combine may start while the partial
//   grid runs and waits in griddepcontrol.wait) gives the same bits as the
//   plain combine and matches the float64 reference, many times over, on
//   long sequences where an early read of the NaN-poisoned workspace would
//   show. Below sm_90 the lookup must refuse with KL_ERROR_UNSUPPORTED.
// - Graph: partial + combine launches captured into a CUDA graph on a
//   guarded stream; a module load and a kernel lookup attempted during the
//   capture are refused with KL_ERROR_CAPTURE_ACTIVE and the capture stays
//   valid; the instantiated graph is replayed with fresh inputs copied in
//   between, each result checked against the float64 reference.
// - MultiGpu: one backend per device (cuDeviceGetCount), each loads the
//   module and launches paged_decode_split_combine on its own data, all
//   launched before any is waited for; each result against a float64
//   reference of the merge. Runs on one GPU too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/paged_decode_fatbins.h"
#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tests/launch/decode_problem.h"
#include "tests/support/gpu_test_util.h"

namespace {

using decode_problem::check_output;
using decode_problem::kGuard;
using decode_problem::Problem;
using kl_test::DeviceBuffer;

// The gqa8_d128 variant's module on the process's backend (the plain split
// and combine kernels are in every variant).
const kl_module *module_gqa8() {
    static kl_test::Module m(kl_fatbin_paged_decode_gqa8_d128, kl_fatbin_paged_decode_gqa8_d128_size);
    return m.get();
}

// ---- driver entry points the tests need beyond the backend's helpers ----------

typedef struct CUgraph_st *Graph;
typedef struct CUgraphExec_st *GraphExec;

struct Driver {
    int (*stream_create)(kl_stream *, unsigned int) = nullptr;
    int (*stream_destroy)(kl_stream) = nullptr;
    int (*stream_synchronize)(kl_stream) = nullptr;
    int (*stream_is_capturing)(kl_stream, int *) = nullptr;
    int (*begin_capture)(kl_stream, int) = nullptr;
    int (*end_capture)(kl_stream, Graph *) = nullptr;
    int (*instantiate)(GraphExec *, Graph, unsigned long long) = nullptr;
    int (*graph_launch)(GraphExec, kl_stream) = nullptr;
    int (*exec_destroy)(GraphExec) = nullptr;
    int (*graph_destroy)(Graph) = nullptr;
    int (*device_get_count)(int *) = nullptr;
};

template <class F>
void resolve(kl_cuda_backend *cuda, F *fn, const char *name) {
    void *sym = kl_cuda_backend_symbol(cuda, name);
    if (sym == nullptr) throw std::runtime_error(std::string("libcuda.so.1 lacks ") + name);
    std::memcpy(fn, &sym, sizeof sym);
}

const Driver &driver() {
    static Driver d = [] {
        kl_cuda_backend *cuda = kl_test::require_gpu();
        Driver r;
        resolve(cuda, &r.stream_create, "cuStreamCreate");
        resolve(cuda, &r.stream_destroy, "cuStreamDestroy_v2");
        resolve(cuda, &r.stream_synchronize, "cuStreamSynchronize");
        resolve(cuda, &r.stream_is_capturing, "cuStreamIsCapturing");
        resolve(cuda, &r.begin_capture, "cuStreamBeginCapture_v2");
        resolve(cuda, &r.end_capture, "cuStreamEndCapture");
        resolve(cuda, &r.instantiate, "cuGraphInstantiateWithFlags");
        resolve(cuda, &r.graph_launch, "cuGraphLaunch");
        resolve(cuda, &r.exec_destroy, "cuGraphExecDestroy");
        resolve(cuda, &r.graph_destroy, "cuGraphDestroy");
        resolve(cuda, &r.device_get_count, "cuDeviceGetCount");
        return r;
    }();
    return d;
}

#define CU_ASSERT(call)                                           \
    do {                                                          \
        const int cu_result_ = (call);                            \
        ASSERT_EQ(cu_result_, 0) << #call << " gave CUresult " << cu_result_; \
    } while (0)

constexpr int kCaptureModeGlobal = 0;  // CU_STREAM_CAPTURE_MODE_GLOBAL: the strictest mode
constexpr int kCaptureNone = 0, kCaptureActive = 1;

// A blocking stream (it waits for the legacy stream the helpers' copies use).
struct Stream {
    kl_stream s = nullptr;
    Stream() {
        if (driver().stream_create(&s, 0) != 0) throw std::runtime_error("cuStreamCreate failed");
    }
    ~Stream() { driver().stream_destroy(s); }
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
};

// ---- one split-KV problem on the device ---------------------------------------------

struct Split {
    Problem p;
    uint32_t splits;
    uint64_t ws_bytes;
    DeviceBuffer<kl_bf16> q, k, v;
    DeviceBuffer<int32_t> tables, lens;
    DeviceBuffer<float> ws;
    DeviceBuffer<kl_bf16> out;  // kGuard poisoned elements each side

    Split(const std::vector<int32_t> &seq_lens, uint32_t seed, uint32_t splits_)
        : p(decode_problem::build(seq_lens, seed)),
          splits(splits_),
          ws_bytes(kl_paged_decode_split_workspace_bytes(p.num_seqs, p.num_q_heads, p.head_dim, splits_)),
          q(p.q),
          k(p.k),
          v(p.v),
          tables(p.tables),
          lens(p.lens),
          ws(ws_bytes / sizeof(float)),
          out(2 * kGuard + static_cast<size_t>(p.num_seqs) * p.num_q_heads * p.head_dim) {}

    // Fresh inputs of the same shape (another seed), into the same buffers.
    void refill(uint32_t seed) {
        p = decode_problem::build(p.lens, seed);
        q.upload(p.q);
        k.upload(p.k);
        v.upload(p.v);
        tables.upload(p.tables);
        lens.upload(p.lens);
    }

    kl_bf16 *out_ptr() { return out.get() + kGuard; }

    kl_status partial(const kl_kernel *k_partial, kl_stream stream) {
        return kl_paged_decode_split_bf16(k_partial, q.get(), k.get(), v.get(), ws.get(), tables.get(), lens.get(),
                                          p.max_blocks_per_seq, p.num_seqs, p.num_q_heads, p.num_kv_heads,
                                          p.head_dim, p.block_size, p.inv_sqrt_d, p.q_stride, 0u, splits, ws_bytes,
                                          stream);
    }
    kl_status combine(const kl_kernel *k_combine, kl_stream stream) {
        return kl_paged_decode_split_combine(k_combine, ws.get(), out_ptr(), p.num_seqs, p.num_q_heads, p.head_dim,
                                             splits, ws_bytes, stream);
    }
    kl_status combine_pdl(const kl_kernel *k_combine, kl_stream stream) {
        return kl_paged_decode_split_combine_pdl(k_combine, ws.get(), out_ptr(), p.num_seqs, p.num_q_heads,
                                                 p.head_dim, splits, ws_bytes, stream);
    }
};

bool device_has_pdl() { return kl_test::gpu()->cc_major >= 9; }

// ---- programmatic dependent launch ----------------------------------------------------

class Pdl : public kl_test::GpuTest {};

TEST_F(Pdl, CombinePdlIsRefusedBelowSm90AndFoundFrom90) {
    const kl_module *m = module_gqa8();
    kl_kernel k;
    const kl_status st = kl_paged_decode_split_combine_pdl_get(&k, m);
    if (device_has_pdl()) {
        KL_ASSERT_OK(st);
        ASSERT_NE(k.desc->attributes, nullptr);
        EXPECT_EQ(k.desc->attributes->flags, KL_LAUNCH_PROGRAMMATIC_SERIALIZATION);
    } else {
        EXPECT_EQ(st, KL_ERROR_UNSUPPORTED) << kl_last_error_message();
        EXPECT_NE(std::string(kl_last_error_message()).find("programmatic dependent launch"), std::string::npos)
            << kl_last_error_message();
    }
}

// Partial + PDL combine against partial + plain combine (bit for bit) and the
// float64 reference; the workspace and output are NaN before each run, so a
// combine that read the workspace before the partial grid finished would
// show. Long sequences (the partial runs long enough for the combine to be
// resident early) and short ones, several split counts, repeated.
TEST_F(Pdl, PartialThenPdlCombineMatchesPlainCombineBitForBit) {
    if (!device_has_pdl()) GTEST_SKIP() << "programmatic dependent launch needs sm_90 or newer";
    const kl_module *m = module_gqa8();
    kl_kernel partial, combine, combine_pdl;
    KL_ASSERT_OK(kl_paged_decode_split_bf16_get(&partial, m));
    KL_ASSERT_OK(kl_paged_decode_split_combine_get(&combine, m));
    KL_ASSERT_OK(kl_paged_decode_split_combine_pdl_get(&combine_pdl, m));
    Stream stream;
    const struct {
        std::vector<int32_t> lens;
        uint32_t splits;
    } cases[] = {
        {{32768}, 4}, {{32768}, 16}, {{32768}, 64}, {{2048}, 8}, {{2048}, 1}, {{0, 1, 17, 2048, 9000}, 7},
    };
    uint32_t seed = 11;
    for (const auto &cs : cases) {
        Split sp(cs.lens, seed++, cs.splits);
        SCOPED_TRACE("seq_lens[0] " + std::to_string(cs.lens[0]) + " (" + std::to_string(cs.lens.size()) +
                     " sequences), " + std::to_string(cs.splits) + " splits");
        const std::vector<double> ref = decode_problem::reference(sp.p);
        sp.ws.poison();
        sp.out.poison();
        KL_ASSERT_OK(sp.partial(&partial, stream.s));
        KL_ASSERT_OK(sp.combine(&combine, stream.s));
        CU_ASSERT(driver().stream_synchronize(stream.s));
        const std::vector<kl_bf16> plain = sp.out.download();
        ASSERT_TRUE(check_output(sp.p, ref, plain));
        for (int rep = 0; rep < 8; rep++) {
            sp.ws.poison();
            sp.out.poison();
            KL_ASSERT_OK(sp.partial(&partial, stream.s));
            KL_ASSERT_OK(sp.combine_pdl(&combine_pdl, stream.s));
            CU_ASSERT(driver().stream_synchronize(stream.s));
            const std::vector<kl_bf16> pdl = sp.out.download();
            ASSERT_TRUE(kl_test::bitwise_equal("PDL combine vs plain combine", pdl, plain)) << "repetition " << rep;
        }
        // Back to back, no wait between pairs: the next partial overwrites
        // the workspace only after the PDL combine has completed (the partial
        // is a plain launch and waits for it).
        sp.out.poison();
        for (int rep = 0; rep < 16; rep++) {
            KL_ASSERT_OK(sp.partial(&partial, stream.s));
            KL_ASSERT_OK(sp.combine_pdl(&combine_pdl, stream.s));
        }
        CU_ASSERT(driver().stream_synchronize(stream.s));
        ASSERT_TRUE(kl_test::bitwise_equal("16 back-to-back PDL pairs vs plain", sp.out.download(), plain));
    }
    KL_ASSERT_OK(kl_cuda_synchronize(cuda));
}

// ---- CUDA graphs and the capture guard ------------------------------------------------------

class CudaGraph : public kl_test::GpuTest {};

TEST_F(CudaGraph, CapturedLaunchesReplayWithFreshInputsAndLoadsDuringCaptureAreRefused) {
    const Driver &d = driver();
    // A backend of our own on the same device (same primary context), so the
    // stream guard does not outlive this test on the process's backend.
    kl_cuda_backend cb;
    KL_ASSERT_OK(kl_cuda_backend_init(&cb, cuda->ordinal));
    kl_module mod;
    KL_ASSERT_OK(kl_module_load(&cb.base, kl_fatbin_paged_decode_gqa8_d128, kl_fatbin_paged_decode_gqa8_d128_size,
                                &mod));
    // Preload: every kernel the graph launches is looked up before capturing.
    kl_kernel partial, combine;
    KL_ASSERT_OK(kl_paged_decode_split_bf16_get(&partial, &mod));
    KL_ASSERT_OK(kl_paged_decode_split_combine_get(&combine, &mod));

    {
        Stream stream;
        KL_ASSERT_OK(kl_cuda_backend_guard_stream(&cb, stream.s));
        Split sp({0, 1, 16, 17, 700, 4096}, 21, 7);

        CU_ASSERT(d.begin_capture(stream.s, kCaptureModeGlobal));
        KL_EXPECT_OK(sp.partial(&partial, stream.s));
        // Loading now would be an unsafe call inside a global-mode capture.
        kl_module late;
        EXPECT_EQ(kl_module_load(&cb.base, kl_fatbin_paged_decode_gqa4_d128, kl_fatbin_paged_decode_gqa4_d128_size,
                                 &late),
                  KL_ERROR_CAPTURE_ACTIVE);
        EXPECT_NE(std::string(kl_last_error_message()).find("capturing"), std::string::npos)
            << kl_last_error_message();
        kl_kernel late_k;
        EXPECT_EQ(kl_paged_decode_split_combine_get(&late_k, &mod), KL_ERROR_CAPTURE_ACTIVE)
            << kl_last_error_message();
        EXPECT_EQ(kl_cuda_stream_check_not_capturing(&cb, stream.s, "test"), KL_ERROR_CAPTURE_ACTIVE);
        int status = -1;
        CU_ASSERT(d.stream_is_capturing(stream.s, &status));
        EXPECT_EQ(status, kCaptureActive) << "the refused load must leave the capture valid";
        KL_EXPECT_OK(sp.combine(&combine, stream.s));
        Graph graph = nullptr;
        CU_ASSERT(d.end_capture(stream.s, &graph));
        ASSERT_NE(graph, nullptr);
        CU_ASSERT(d.stream_is_capturing(stream.s, &status));
        EXPECT_EQ(status, kCaptureNone);
        KL_EXPECT_OK(kl_cuda_stream_check_not_capturing(&cb, stream.s, "test"));
        GraphExec exec = nullptr;
        CU_ASSERT(d.instantiate(&exec, graph, 0));

        // Nothing ran during the capture: replay with fresh inputs each time.
        for (uint32_t rep = 0; rep < 4; rep++) {
            SCOPED_TRACE("replay " + std::to_string(rep));
            sp.refill(100 + rep);
            sp.ws.poison();
            sp.out.poison();
            CU_ASSERT(d.graph_launch(exec, stream.s));
            CU_ASSERT(d.stream_synchronize(stream.s));
            EXPECT_TRUE(check_output(sp.p, decode_problem::reference(sp.p), sp.out.download()));
        }
        // After the capture, loads and lookups work again.
        kl_kernel again;
        KL_EXPECT_OK(kl_paged_decode_split_combine_get(&again, &mod));
        CU_ASSERT(d.exec_destroy(exec));
        CU_ASSERT(d.graph_destroy(graph));
        kl_cuda_backend_unguard_stream(&cb, stream.s);
    }
    kl_module_unload(&mod);
    kl_cuda_backend_destroy(&cb);
    // destroy left no context current if ours was; the process's backend's
    // context is the same primary context: make it current again.
    KL_ASSERT_OK(kl_cuda_backend_make_current(cuda));
}

// ---- several GPUs -----------------------------------------------------------------------

// The merge of paged_decode_split_combine in float64, from its documented
// formula: out = sum_j 2^(m_j - M) acc_j / sum_j 2^(m_j - M) l_j over splits
// with m_j > -inf.
std::vector<double> combine_reference(const std::vector<float> &ws, uint32_t seqs, uint32_t heads, uint32_t dim,
                                      uint32_t splits) {
    const uint64_t R = static_cast<uint64_t>(seqs) * splits * heads;
    std::vector<double> out(static_cast<size_t>(seqs) * heads * dim, 0.0);
    for (uint32_t s = 0; s < seqs; s++)
        for (uint32_t h = 0; h < heads; h++) {
            double mx = -INFINITY;
            for (uint32_t j = 0; j < splits; j++) {
                const uint64_t row = (static_cast<uint64_t>(s) * splits + j) * heads + h;
                mx = std::max(mx, static_cast<double>(ws[R * dim + 2 * row]));
            }
            for (uint32_t dd = 0; dd < dim; dd++) {
                double num = 0.0, den = 0.0;
                for (uint32_t j = 0; j < splits; j++) {
                    const uint64_t row = (static_cast<uint64_t>(s) * splits + j) * heads + h;
                    const double m = ws[R * dim + 2 * row];
                    if (m == -INFINITY) continue;
                    const double f = std::exp2(m - mx);
                    num += f * ws[row * dim + dd];
                    den += f * ws[R * dim + 2 * row + 1];
                }
                out[(static_cast<size_t>(s) * heads + h) * dim + dd] = den > 0.0 ? num / den : 0.0;
            }
        }
    return out;
}

TEST(MultiGpu, EveryDeviceLoadsItsOwnModuleAndLaunches) {
    KL_TEST_REQUIRE_GPU();
    int count = 0;
    CU_ASSERT(driver().device_get_count(&count));
    ASSERT_GE(count, 1);
    std::printf("[ MultiGpu ] %d device(s)\n", count);
    constexpr uint32_t kSeqs = 3, kHeads = 4, kDim = 128, kSplits = 5;
    const uint64_t R = static_cast<uint64_t>(kSeqs) * kSplits * kHeads;
    const size_t ws_floats = R * (kDim + 2), out_elems = static_cast<size_t>(kSeqs) * kHeads * kDim;

    struct PerDevice {
        kl_cuda_backend cb{};
        kl_module mod{};
        kl_kernel k{};
        void *ws = nullptr, *out = nullptr;
        std::vector<float> host_ws;
    };
    std::vector<std::unique_ptr<PerDevice>> devs;
    for (int dev = 0; dev < count; dev++) {
        devs.emplace_back(new PerDevice());
        PerDevice &p = *devs.back();
        SCOPED_TRACE("device " + std::to_string(dev));
        KL_ASSERT_OK(kl_cuda_backend_init(&p.cb, dev));
        KL_ASSERT_OK(kl_module_load(&p.cb.base, kl_fatbin_paged_decode_gqa8_d128,
                                    kl_fatbin_paged_decode_gqa8_d128_size, &p.mod));
        KL_ASSERT_OK(kl_paged_decode_split_combine_get(&p.k, &p.mod));
        // Each device its own workspace: (m, l) with empty splits (-inf, 0) here and there.
        std::mt19937 gen(1234u + static_cast<unsigned>(dev));
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        p.host_ws.resize(ws_floats);
        for (uint64_t i = 0; i < R * kDim; i++) p.host_ws[i] = u(gen);
        for (uint64_t r = 0; r < R; r++) {
            const bool empty = (r + static_cast<uint64_t>(dev)) % 7 == 3;
            p.host_ws[R * kDim + 2 * r] = empty ? -INFINITY : 4.0f * u(gen);
            p.host_ws[R * kDim + 2 * r + 1] = empty ? 0.0f : 1.0f + 3.0f * (u(gen) + 1.0f);
        }
        KL_ASSERT_OK(kl_cuda_malloc(&p.cb, &p.ws, ws_floats * sizeof(float)));
        KL_ASSERT_OK(kl_cuda_malloc(&p.cb, &p.out, out_elems * sizeof(kl_bf16)));
        KL_ASSERT_OK(kl_cuda_memcpy_htod(&p.cb, p.ws, p.host_ws.data(), ws_floats * sizeof(float)));
        KL_ASSERT_OK(kl_cuda_memset_d8(&p.cb, p.out, 0xFF, out_elems * sizeof(kl_bf16)));
    }
    // Launch on every device before waiting for any: a launch goes to the
    // context current on the thread, so make each device's current first.
    for (int dev = 0; dev < count; dev++) {
        PerDevice &p = *devs[static_cast<size_t>(dev)];
        KL_ASSERT_OK(kl_cuda_backend_make_current(&p.cb));
        KL_ASSERT_OK(kl_paged_decode_split_combine(&p.k, static_cast<const float *>(p.ws),
                                                   static_cast<kl_bf16 *>(p.out), kSeqs, kHeads, kDim, kSplits,
                                                   ws_floats * sizeof(float), nullptr));
    }
    for (int dev = 0; dev < count; dev++) {
        PerDevice &p = *devs[static_cast<size_t>(dev)];
        SCOPED_TRACE("device " + std::to_string(dev));
        KL_ASSERT_OK(kl_cuda_synchronize(&p.cb));
        std::vector<kl_bf16> got(out_elems);
        KL_ASSERT_OK(kl_cuda_memcpy_dtoh(&p.cb, got.data(), p.out, out_elems * sizeof(kl_bf16)));
        const std::vector<double> ref = combine_reference(p.host_ws, kSeqs, kHeads, kDim, kSplits);
        EXPECT_TRUE(kl_test::all_close("combine output", got, ref, 1e-3, 1e-2, 1e-2));
        char name[128];
        KL_EXPECT_OK(kl_cuda_device_name(&p.cb, name, sizeof name));
        std::printf("[ MultiGpu ] device %d (%s, sm_%d%d): combine checked\n", dev, name, p.cb.cc_major,
                    p.cb.cc_minor);
    }
    for (auto &pp : devs) {
        kl_cuda_free(&pp->cb, pp->ws);
        kl_cuda_free(&pp->cb, pp->out);
        kl_module_unload(&pp->mod);
        kl_cuda_backend_destroy(&pp->cb);
    }
    KL_ASSERT_OK(kl_cuda_backend_make_current(kl_test::gpu()));
}

}  // namespace
