// The MLA decode family on the GPU (tagged gpu; every case skips without
// one): whole decode steps (mla_decode_schedule, each attention launcher
// the device can load, mla_decode_combine or its PDL twin) against the
// float64 reference of mla_decode_reference.h, the schedule's words
// against the rule; the cases of the emulated test at larger sizes; and a
// CUDA graph that captures one step and replays it with other lengths and
// with fewer live sequences than captured (the rest length 0, their table
// rows garbage), the reuse that gives FlashMLA's and vLLM's users illegal
// accesses.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/mla_decode_fatbins.h"
#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"
#include "tests/mla_decode/mla_decode_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
using mla_decode_ref::Problem;
using mla_decode_ref::Spec;

enum class Attn { kBf16Mma, kFp8Mma, kBf16Tma, kFp8Tma };

const char *attn_name(Attn a) {
    switch (a) {
    case Attn::kBf16Mma: return "bf16_mma";
    case Attn::kFp8Mma: return "fp8_mma";
    case Attn::kBf16Tma: return "bf16_tma";
    case Attn::kFp8Tma: return "fp8_tma";
    }
    return "?";
}
bool attn_fp8(Attn a) { return a == Attn::kFp8Mma || a == Attn::kFp8Tma; }
kl_mla_decode_kind attn_kind(Attn a) {
    return a == Attn::kBf16Tma ? KL_MLA_DECODE_BF16_TMA : a == Attn::kFp8Tma ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_MMA;
}

kl_status attn_get(Attn a, kl_kernel *k, const kl_module *mod) {
    switch (a) {
    case Attn::kBf16Mma: return kl_mla_decode_attn_bf16_mma_get(k, mod);
    case Attn::kFp8Mma: return kl_mla_decode_attn_fp8_mma_get(k, mod);
    case Attn::kBf16Tma: return kl_mla_decode_attn_bf16_tma_get(k, mod);
    case Attn::kFp8Tma: return kl_mla_decode_attn_fp8_tma_get(k, mod);
    }
    return KL_ERROR_UNSUPPORTED;
}

const kl_module *module(const std::string &variant) {
    static kl_test::Module m320(kl_fatbin_mla_decode_mistral_small_4, kl_fatbin_mla_decode_mistral_small_4_size);
    static kl_test::Module m576(kl_fatbin_mla_decode_deepseek_v4_flash, kl_fatbin_mla_decode_deepseek_v4_flash_size);
    return variant == "deepseek_v4_flash" ? m576.get() : m320.get();
}

uint32_t sm_count() {
    int n = 0;
    kl_cuda_backend *cuda = kl_test::gpu();
    cuda->api.device_get_attribute(&n, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */, cuda->device);
    return (uint32_t)n;
}

// A decode step's device buffers: inputs uploaded, outputs poisoned.
struct Step {
    const Problem *p;
    uint32_t parts;
    uint64_t words, bytes;
    DeviceBuffer<uint16_t> q, cache16;
    DeviceBuffer<uint8_t> cache8;
    DeviceBuffer<int32_t> table, lens, sched;
    DeviceBuffer<float> ws, lse;
    DeviceBuffer<kl_bf16> out;
    kl_kernel sk, ak, ck;
    kl_tensor_map qm, cm;
    Attn a;
    bool pdl;

    Step(const Problem &pr, Attn at, const kl_module *mod, uint32_t parts_, bool pdl_)
        : p(&pr),
          parts(parts_),
          words(kl_mla_decode_schedule_words(pr.batch, parts_)),
          bytes(kl_mla_decode_workspace_bytes(parts_, pr.s_q, pr.h_q, pr.D)),
          q(pr.q),
          table(pr.table),
          lens(pr.lengths),
          sched((size_t)words),
          ws((size_t)(bytes / 4)),
          lse((size_t)pr.batch * pr.rows()),
          out((size_t)pr.batch * pr.rows() * pr.dv()),
          a(at),
          pdl(pdl_) {
        if (pr.fp8)
            cache8 = DeviceBuffer<uint8_t>(pr.cache8);
        else
            cache16 = DeviceBuffer<uint16_t>(pr.cache);
        kl_test::check(kl_mla_decode_schedule_get(&sk, mod), "schedule_get");
        kl_test::check(pdl ? kl_mla_decode_combine_pdl_get(&ck, mod) : kl_mla_decode_combine_get(&ck, mod),
                       "combine_get");
        kl_test::check(attn_get(a, &ak, mod), "attention _get");
        encode();
        poison();
    }
    // The tensor maps of the _tma launchers (their buffers stay put across replays).
    void encode() {
        const Problem &pr = *p;
        if (a == Attn::kFp8Tma)
            kl_test::check(kl_mla_decode_attn_fp8_tma_q_map_encode(&ak, &qm, reinterpret_cast<const kl_bf16 *>(q.get()),
                                                                   pr.D, pr.rows(), pr.batch, pr.D,
                                                                   (uint64_t)pr.rows() * pr.D),
                           "q_map");
        if (a != Attn::kBf16Tma) return;
        kl_test::check(kl_mla_decode_attn_bf16_tma_q_map_encode(&ak, &qm, reinterpret_cast<const kl_bf16 *>(q.get()),
                                                                pr.D, pr.rows(), pr.batch, pr.D,
                                                                (uint64_t)pr.rows() * pr.D),
                       "q_map");
        kl_test::check(kl_mla_decode_attn_bf16_tma_cache_map_encode(&ak, &cm,
                                                                    reinterpret_cast<const kl_bf16 *>(cache16.get()),
                                                                    pr.D, pr.page, pr.num_blocks, pr.D,
                                                                    (uint64_t)pr.page * pr.D),
                       "cache_map");
    }
    void poison() {
        sched.poison();
        ws.poison();
        lse.poison();
        out.poison();
    }
    kl_status launch(kl_stream stream) {
        const Problem &pr = *p;
        kl_status st = kl_mla_decode_schedule(&sk, lens.get(), sched.get(), pr.batch, parts, words, stream);
        if (st != KL_SUCCESS) return st;
        const kl_bf16 *qb = reinterpret_cast<const kl_bf16 *>(q.get());
        switch (a) {
        case Attn::kBf16Mma:
            st = kl_mla_decode_attn_bf16_mma(&ak, qb, reinterpret_cast<const kl_bf16 *>(cache16.get()), table.get(),
                                             lens.get(), sched.get(), out.get(), lse.get(), ws.get(), pr.batch,
                                             pr.s_q, pr.h_q, pr.D, pr.page, pr.mbps, pr.num_blocks, pr.scale, parts,
                                             words, bytes, stream);
            break;
        case Attn::kFp8Mma:
            st = kl_mla_decode_attn_fp8_mma(&ak, qb, cache8.get(), table.get(), lens.get(), sched.get(), out.get(),
                                            lse.get(), ws.get(), pr.batch, pr.s_q, pr.h_q, pr.D, pr.page, pr.mbps,
                                            pr.num_blocks, pr.scale, parts, words, bytes, stream);
            break;
        case Attn::kBf16Tma:
            st = kl_mla_decode_attn_bf16_tma(&ak, &qm, &cm, table.get(), lens.get(), sched.get(), out.get(), lse.get(),
                                             ws.get(), pr.batch, pr.s_q, pr.h_q, pr.D, pr.page, pr.mbps,
                                             pr.num_blocks, pr.scale, parts, words, bytes, stream);
            break;
        case Attn::kFp8Tma:
            st = kl_mla_decode_attn_fp8_tma(&ak, &qm, cache8.get(), table.get(), lens.get(), sched.get(), out.get(),
                                            lse.get(), ws.get(), pr.batch, pr.s_q, pr.h_q, pr.D, pr.page, pr.mbps,
                                            pr.num_blocks, pr.scale, parts, words, bytes, stream);
            break;
        }
        if (st != KL_SUCCESS) return st;
        return (pdl ? kl_mla_decode_combine_pdl : kl_mla_decode_combine)(&ck, sched.get(), ws.get(), out.get(),
                                                                          lse.get(), pr.batch, pr.s_q, pr.h_q, pr.D,
                                                                          parts, words, bytes, stream);
    }
};

// out and lse of a step against the reference (rows `live` only when given).
::testing::AssertionResult matches(const Problem &p, const Step &s, uint32_t live_batch) {
    std::vector<double> ro, rl, rs;
    mla_decode_ref::attention(p, ro, rl, &rs);
    const std::vector<kl_bf16> out = s.out.download();
    const std::vector<float> lse = s.lse.download();
    const uint32_t R = p.rows(), DV = p.dv();
    size_t off = 0;
    double d2 = 0, r2 = 0;
    std::ostringstream first;
    for (size_t i = 0; i < (size_t)live_batch * R * DV; ++i) {
        const double g = kl_test::bf16_to_float(out[i]);
        if (!mla_decode_ref::close(g, ro[i], rs[i]) && off++ < 8)
            first << "  out[b " << i / DV / R << ", row " << i / DV % R << ", col " << i % DV << "]: got " << g
                  << ", want " << ro[i] << "\n";
        if (std::isfinite(g)) d2 += (g - ro[i]) * (g - ro[i]);
        r2 += ro[i] * ro[i];
    }
    for (size_t i = 0; i < (size_t)live_batch * R; ++i) {
        const double g = lse[i], r = rl[i];
        const bool ok = std::isinf(r) ? (std::isinf(g) && g < 0)
                                      : (std::isfinite(g) && std::fabs(g - r) <= 1e-2 + 1e-4 * std::fabs(r));
        if (!ok && off++ < 12) first << "  lse[b " << i / R << ", row " << i % R << "]: got " << g << ", want " << r << "\n";
    }
    const double rel = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    if (off == 0 && rel < 1e-2) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << off << " elements off, relative norm error " << rel << "\n" << first.str();
}

::testing::AssertionResult schedule_matches(const std::vector<int32_t> &lengths, uint32_t parts, const Step &s) {
    const std::vector<int32_t> got = s.sched.download(), want = mla_decode_ref::schedule(lengths, parts);
    for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i])
            return ::testing::AssertionFailure() << "sched word " << i << ": " << got[i] << ", want " << want[i];
    return ::testing::AssertionSuccess();
}

class MlaDecodeGpu : public kl_test::GpuTest,
                     public ::testing::WithParamInterface<std::tuple<const char *, Attn>> {
  protected:
    void SetUp() override {
        kl_test::GpuTest::SetUp();
        if (IsSkipped()) return;
        mod_ = module(variant());
        kl_kernel k;
        if (attn_get(attn(), &k, mod_) != KL_SUCCESS)
            GTEST_SKIP() << attn_name(attn()) << " does not load here: " << kl_last_error_message();
    }
    const char *variant() const { return std::get<0>(GetParam()); }
    Attn attn() const { return std::get<1>(GetParam()); }
    uint32_t hdim() const { return std::string(variant()) == "deepseek_v4_flash" ? 576u : 320u; }
    Spec spec(std::vector<int32_t> lengths, uint32_t s_q, uint32_t h_q, uint32_t page, uint32_t seed) const {
        Spec s;
        s.lengths = std::move(lengths);
        s.s_q = s_q;
        s.h_q = h_q;
        s.page = page;
        s.D = hdim();
        s.fp8 = attn_fp8(attn());
        s.seed = seed;
        return s;
    }
    // One step, checked; parts 0: the device's kl_mla_decode_num_parts.
    void run(const Spec &sp, uint32_t parts, bool pdl = false) {
        const Problem p = mla_decode_ref::make(sp);
        if (parts == 0) parts = kl_mla_decode_num_parts(attn_kind(attn()), sm_count(), p.s_q, p.h_q);
        SCOPED_TRACE(::testing::Message() << attn_name(attn()) << " D " << p.D << " batch " << p.batch << " s_q "
                                          << p.s_q << " h_q " << p.h_q << " page " << p.page << " parts " << parts);
        Step s(p, attn(), mod_, parts, pdl);
        KL_ASSERT_OK(s.launch(nullptr));
        kl_test::synchronize();
        EXPECT_TRUE(schedule_matches(p.lengths, parts, s));
        EXPECT_TRUE(matches(p, s, p.batch));
    }
    const kl_module *mod_ = nullptr;
};

TEST_P(MlaDecodeGpu, RaggedLengthsAroundAPage) { run(spec({0, 1, 63, 64, 65, 133}, 1, 16, 64, 1), 5); }
TEST_P(MlaDecodeGpu, OnePartWritesEverySequenceItself) { run(spec({37, 0, 70}, 1, 8, 64, 2), 1); }
TEST_P(MlaDecodeGpu, TwoTokensCausal) { run(spec({1, 2, 90, 1000}, 2, 8, 64, 3), 3); }
TEST_P(MlaDecodeGpu, FourTokensCausal) { run(spec({3, 66, 700}, 4, 16, 64, 4), 0, true); }
TEST_P(MlaDecodeGpu, EightTokensCausal) { run(spec({5, 129, 2000}, 8, 8, 64, 5), 0); }
TEST_P(MlaDecodeGpu, SixtyFourHeads) { run(spec({40, 100, 3000}, 1, 64, 64, 6), 0); }
TEST_P(MlaDecodeGpu, HundredTwentyEightHeadsTwoTokens) { run(spec({70, 2500, 1}, 2, 128, 64, 7), 0, true); }
TEST_P(MlaDecodeGpu, LongSequencesAllParts) { run(spec({4500, 3999}, 1, 16, 64, 8), 0, true); }
TEST_P(MlaDecodeGpu, MorePartsThanTiles) { run(spec({10, 3}, 1, 8, 64, 9), 200); }
TEST_P(MlaDecodeGpu, PagesOf128) { run(spec({200, 127, 1300}, 1, 16, 128, 10), 0); }
TEST_P(MlaDecodeGpu, ThirtyTwoSequencesOfAFewThousand) {
    std::mt19937 gen(11);
    std::uniform_int_distribution<int32_t> d(0, 4096);
    std::vector<int32_t> l(32);
    for (int32_t &x : l) x = d(gen);
    run(spec(l, 1, 16, 64, 11), 0, true);
}

// ---- a step in a CUDA graph ----

typedef struct CUgraph_st *Graph;
typedef struct CUgraphExec_st *GraphExec;

struct Driver {
    int (*stream_create)(kl_stream *, unsigned int) = nullptr;
    int (*stream_destroy)(kl_stream) = nullptr;
    int (*stream_synchronize)(kl_stream) = nullptr;
    int (*begin_capture)(kl_stream, int) = nullptr;
    int (*end_capture)(kl_stream, Graph *) = nullptr;
    int (*instantiate)(GraphExec *, Graph, unsigned long long) = nullptr;
    int (*graph_launch)(GraphExec, kl_stream) = nullptr;
    int (*exec_destroy)(GraphExec) = nullptr;
    int (*graph_destroy)(Graph) = nullptr;
};

template <class F>
void resolve(F *fn, const char *name) {
    void *sym = kl_cuda_backend_symbol(kl_test::require_gpu(), name);
    if (sym == nullptr) throw std::runtime_error(std::string("libcuda.so.1 lacks ") + name);
    std::memcpy(fn, &sym, sizeof sym);
}

const Driver &driver() {
    static Driver d = [] {
        Driver r;
        resolve(&r.stream_create, "cuStreamCreate");
        resolve(&r.stream_destroy, "cuStreamDestroy_v2");
        resolve(&r.stream_synchronize, "cuStreamSynchronize");
        resolve(&r.begin_capture, "cuStreamBeginCapture_v2");
        resolve(&r.end_capture, "cuStreamEndCapture");
        resolve(&r.instantiate, "cuGraphInstantiateWithFlags");
        resolve(&r.graph_launch, "cuGraphLaunch");
        resolve(&r.exec_destroy, "cuGraphExecDestroy");
        resolve(&r.graph_destroy, "cuGraphDestroy");
        return r;
    }();
    return d;
}

#define CU_ASSERT(call)                                                        \
    do {                                                                       \
        const int cu_result_ = (call);                                         \
        ASSERT_EQ(cu_result_, 0) << #call << " gave CUresult " << cu_result_; \
    } while (0)

// Captured once for a batch of 8; replayed with new lengths (longer and
// shorter than captured: the schedule recomputes on the device), and with
// only 5 live sequences: the last 3 of length 0 with their table rows and q
// garbage, which no kernel may read.
TEST_P(MlaDecodeGpu, GraphReplaysOtherLengthsAndFewerLiveSequences) {
    Spec sp = spec({300, 64, 1, 0, 2000, 777, 65, 128}, 2, 16, 64, 20);
    // Room for the longest lengths of any replay: the tables get 40 pages a sequence.
    Problem p = mla_decode_ref::make(sp);
    const uint32_t parts = kl_mla_decode_num_parts(attn_kind(attn()), sm_count(), p.s_q, p.h_q);
    const uint32_t mbps = 40;
    auto retable = [&](Problem &pr, const std::vector<int32_t> &lengths, uint32_t seed, uint32_t live) {
        Spec s2 = sp;
        s2.lengths = lengths;
        s2.seed = seed;
        s2.spare_table = 0;
        pr = mla_decode_ref::make(s2);
        // widen every table to mbps entries (the graph's max_blocks_per_seq) and pad the cache to its size
        std::vector<int32_t> t((size_t)pr.batch * mbps, -1);
        for (uint32_t b = 0; b < pr.batch; ++b)
            for (uint32_t j = 0; j < pr.mbps && j < mbps; ++j) t[(size_t)b * mbps + j] = pr.table[(size_t)b * pr.mbps + j];
        for (uint32_t b = live; b < pr.batch; ++b) {
            pr.lengths[b] = 0;
            for (uint32_t j = 0; j < mbps; ++j) t[(size_t)b * mbps + j] = 0x7fffffff;
            for (uint32_t x = 0; x < pr.rows() * pr.D; ++x) pr.q[((size_t)b * pr.rows()) * pr.D + x] = 0x7fc0u;
        }
        pr.table = t;
        pr.mbps = mbps;
    };
    const uint32_t kBlocks = 8 * mbps + 3;
    auto pad_cache = [&](Problem &pr) {
        if (pr.fp8)
            pr.cache8.resize((size_t)kBlocks * pr.page * pr.token_bytes(), 0xff);
        else
            pr.cache.resize((size_t)kBlocks * pr.page * pr.D, 0x7fc0u);
        pr.num_blocks = kBlocks;
    };
    retable(p, sp.lengths, 20, 8);
    pad_cache(p);
    Step s(p, attn(), mod_, parts, true);
    const Driver &d = driver();
    kl_stream stream = nullptr;
    CU_ASSERT(d.stream_create(&stream, 0));
    CU_ASSERT(d.begin_capture(stream, 0));
    KL_EXPECT_OK(s.launch(stream));
    Graph graph = nullptr;
    CU_ASSERT(d.end_capture(stream, &graph));
    GraphExec exec = nullptr;
    CU_ASSERT(d.instantiate(&exec, graph, 0));
    const std::vector<std::vector<int32_t>> replays = {
        {300, 64, 1, 0, 2000, 777, 65, 128},
        {2500, 1, 0, 63, 9, 1999, 2560, 4},      // longer than captured
        {17, 2000, 640, 5, 1, 0, 0, 0},          // 5 live sequences
    };
    for (size_t r = 0; r < replays.size(); ++r) {
        SCOPED_TRACE("replay " + std::to_string(r));
        Problem pr;
        retable(pr, replays[r], 30 + (uint32_t)r, r == 2 ? 5u : 8u);
        pad_cache(pr);
        s.q.upload(pr.q);
        s.table.upload(pr.table);
        s.lens.upload(pr.lengths);
        if (pr.fp8)
            s.cache8.upload(pr.cache8);
        else
            s.cache16.upload(pr.cache);
        s.p = &pr;
        s.poison();
        CU_ASSERT(d.graph_launch(exec, stream));
        CU_ASSERT(d.stream_synchronize(stream));
        EXPECT_TRUE(schedule_matches(pr.lengths, parts, s));
        EXPECT_TRUE(matches(pr, s, pr.batch));
    }
    s.p = &p;
    CU_ASSERT(d.exec_destroy(exec));
    CU_ASSERT(d.graph_destroy(graph));
    CU_ASSERT(d.stream_destroy(stream));
}

const char *const kVariants[] = {"mistral_small_4", "deepseek_v4_flash"};

std::string name(const ::testing::TestParamInfo<std::tuple<const char *, Attn>> &i) {
    return std::string(std::get<0>(i.param)) + "_" + attn_name(std::get<1>(i.param));
}

INSTANTIATE_TEST_SUITE_P(All, MlaDecodeGpu,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(Attn::kBf16Mma, Attn::kFp8Mma, Attn::kBf16Tma,
                                                              Attn::kFp8Tma)),
                         name);

class MlaDecodeGpuMmaPages : public MlaDecodeGpu {};
TEST_P(MlaDecodeGpuMmaPages, PagesOf16) { run(spec({0, 15, 16, 17, 500}, 1, 16, 16, 12), 0); }
TEST_P(MlaDecodeGpuMmaPages, PagesOf32) { run(spec({31, 32, 33, 970}, 2, 8, 32, 13), 0); }
INSTANTIATE_TEST_SUITE_P(Mma, MlaDecodeGpuMmaPages,
                         ::testing::Combine(::testing::ValuesIn(kVariants),
                                            ::testing::Values(Attn::kBf16Mma, Attn::kFp8Mma)),
                         name);

}  // namespace
