// tune: times every alternative of the specs' operations on the present GPU
// and writes a choice table for it (issue 45; tools/tune/tune.h says how).
//
//   tune [--out FILE] [--policies eager,graph] [--runs N] [--rounds N] [--table FILE]
//        [--only OP[,OP...]] [--quick] [--exhaustive] [--device-id ID]
//
// On the GPU machine, from the repository root, after tools/gpu/stage.sh
// (it stages this cc_binary, tagged gpu, as .gpu/tools/tune/tune):
//   bash tools/tune/run.sh       (this program on the default grid; the
//                                 table and the log in $OUT/tune/;
//                                 //tools/tune:builtin compiles tables in)
//
// Timing: every launch on one stream of this program's own. A candidate
// timed in full is timed once a round (--rounds, default 3; the order of a
// shape's candidates rotated a place a round) and its time is the median
// of its rounds. A round's eager: CUDA events around each launch, queued
// back to back, the median of N (--runs, default 16) after 2 warm-up
// launches; a round's graph: one launch outside the capture, N launches
// captured into one CUDA graph, replayed once to warm up, then 2 replays
// between events: their median / N. Before the first shape,
// 1.5 s of memsets bring the clocks up. Screening (unless
// --exhaustive): of an alternative's tunable candidates, each is first
// timed eager over 3 launches (after 1), and only the two fastest of them
// and the values of the rule's and the compiled-in table's picks are timed
// in full. Runs rotate over input sets of at least 600 MB in all
// (at least 3 sets), so no run finds its inputs in L2. The device key
// (kl_device) comes from the driver: compute capability, SM count, L2 size,
// total memory, and the nominal bandwidth (memory clock x bus width).
//
// The grid (ops.h): paged decode over batch x length x heads x dtype (the
// decode benchmark's shapes widened to a grid), MLA decode, MLA prefill's
// absorbed attention and grouped GEMM; --quick a few shapes of each, one
// candidate less per tunable. Progress on stderr, results on stdout.
// Exit 1 on any failure (no GPU, a refused launch), 2 on a bad argument.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/mla_decode.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/paged_decode.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/mla_decode_fatbins.h"
#include "kernels/mla_prefill_fatbins.h"
#include "kernels/paged_decode_fatbins.h"

#define KL_BENCH_PROGRAM "tune"
#include "bench/common/bench_driver.h"
#include "tools/tune/ops.h"

namespace {

const char kUsage[] =
    "usage: tune [--out FILE] [--policies eager,graph] [--runs N] [--rounds N] [--table FILE]\n"
    "            [--only OP[,OP...]] [--quick] [--exhaustive] [--device-id ID]\n"
    "  --out FILE        write the choice table (klaunch-choices 1) to FILE\n"
    "  --policies LIST   eager, graph or both (default both)\n"
    "  --runs N          launches a round's time is the median of (eager) or its graph holds (graph); default 16\n"
    "  --rounds N        rounds of full timing, a time the median of its rounds; default 3\n"
    "  --table FILE      also print the regret of the chooser given this table (klaunch-choices 1)\n"
    "  --only OPS        only these operations (paged_decode_gqa_bf16, paged_decode_gqa_fp8,\n"
    "                    mla_decode_attn_bf16, mla_decode_attn_fp8, mla_absorbed_attention, grouped_gemm)\n"
    "  --quick           a few shapes an operation, fewer candidates: a smoke run\n"
    "  --exhaustive      time every tunable candidate in full (default: screen them, time the best and the rule's)\n"
    "  --device-id ID    the table's device id (default: from the device's name)\n";

typedef struct CUgraph_st *Graph;
typedef struct CUgraphExec_st *GraphExec;
typedef int (*StreamCreateFn)(kl_stream *stream, unsigned flags);
typedef int (*BeginCaptureFn)(kl_stream stream, int mode);
typedef int (*EndCaptureFn)(kl_stream stream, Graph *graph);
typedef int (*InstantiateFn)(GraphExec *exec, Graph graph, unsigned long long flags);
typedef int (*GraphLaunchFn)(GraphExec exec, kl_stream stream);
typedef int (*ExecDestroyFn)(GraphExec exec);
typedef int (*GraphDestroyFn)(Graph graph);

struct Extra {
    StreamCreateFn stream_create;
    BeginCaptureFn begin_capture;
    EndCaptureFn end_capture;
    InstantiateFn instantiate;
    GraphLaunchFn graph_launch;
    ExecDestroyFn exec_destroy;
    GraphDestroyFn graph_destroy;
} g_x;

// Device memory; patterns kept on the device once uploaded.
class GpuMem : public tune::Mem {
  public:
    void *alloc(size_t bytes, const char *name) override {
        void *p = nullptr;
        ok(kl_cuda_malloc(&g_cuda, &p, std::max<size_t>(bytes, 256)), std::string("cuMemAlloc of ") + name + " (" +
                                                                        std::to_string(bytes) + " bytes)");
        live_.push_back(p);
        return p;
    }
    void free(void *p) override {
        for (size_t i = 0; i < live_.size(); i++)
            if (live_[i] == p) {
                kl_cuda_free(&g_cuda, p);
                live_.erase(live_.begin() + static_cast<long>(i));
                return;
            }
    }
    void free_all() override {
        ok(kl_cuda_synchronize(&g_cuda), "the shape's launches");
        for (void *p : live_) kl_cuda_free(&g_cuda, p);
        live_.clear();
    }
    void upload(void *dst, const void *src, size_t bytes) override {
        ok(kl_cuda_memcpy_htod(&g_cuda, dst, src, bytes), "an upload");
    }
    void zero(void *dst, size_t bytes) override { ok(kl_cuda_memset_d8(&g_cuda, dst, 0, bytes), "cuMemsetD8"); }
    void fill(void *dst, size_t bytes, const std::vector<unsigned char> &pattern, size_t offset, size_t unit) override {
        auto it = patterns_.find(&pattern);
        if (it == patterns_.end()) {
            void *p = nullptr;
            ok(kl_cuda_malloc(&g_cuda, &p, pattern.size()), "cuMemAlloc of a pattern");
            ok(kl_cuda_memcpy_htod(&g_cuda, p, pattern.data(), pattern.size()), "upload of a pattern");
            it = patterns_.emplace(&pattern, p).first;
        }
        const size_t units = pattern.size() / unit;
        size_t off = (offset / unit % units) * unit, done = 0;
        const unsigned long long base = reinterpret_cast<uintptr_t>(it->second), d = reinterpret_cast<uintptr_t>(dst);
        while (done < bytes) {
            const size_t n = std::min(bytes - done, units * unit - off);
            cu(g_drv.memcpy_dtod(d + done, base + off, n), "cuMemcpyDtoD (fill)");
            done += n;
            off = 0;
        }
    }
    void sync() override { ok(kl_cuda_synchronize(&g_cuda), "the launches so far"); }
    size_t sets(size_t bytes) const override { return kl_inputs::rotation(bytes, 3); }

  private:
    std::vector<void *> live_;
    std::map<const void *, void *> patterns_;
};

class GpuClock : public tune::Clock {
  public:
    GpuClock(int runs) : runs_(runs) { cu(g_x.stream_create(&stream_, 0), "cuStreamCreate"); }
    kl_stream stream() override { return stream_; }
    const char *name() const override { return "CUDA events"; }
    double time_us(kl_choice_policy policy, const tune::Trial &, const tune::Launch &launch) override {
        if (policy == KL_CHOICE_EAGER) return median_us([&](int run) { launch(run, stream_); }, runs_, 2, stream_);
        // One launch outside the capture first: whatever a launcher does
        // once (its first launch's set-up) is not captured.
        launch(0, stream_);
        ok(kl_cuda_synchronize(&g_cuda), "a launch before capture");
        Graph graph = nullptr;
        GraphExec exec = nullptr;
        cu(g_x.begin_capture(stream_, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */), "cuStreamBeginCapture");
        for (int i = 0; i < runs_; i++) launch(i, stream_);
        cu(g_x.end_capture(stream_, &graph), "cuStreamEndCapture");
        cu(g_x.instantiate(&exec, graph, 0), "cuGraphInstantiateWithFlags");
        const double us = median_us([&](int) { cu(g_x.graph_launch(exec, stream_), "cuGraphLaunch"); }, 2, 1, stream_);
        g_x.exec_destroy(exec);
        g_x.graph_destroy(graph);
        return us / runs_;
    }
    double screen_us(const tune::Trial &, const tune::Launch &launch) override {
        return median_us([&](int run) { launch(run, stream_); }, 3, 1, stream_);
    }

  private:
    int runs_;
    kl_stream stream_ = nullptr;
};

class GpuModules : public tune::Modules {
  public:
    const kl_module *get(const char *family, const char *variant) override {
        const std::string key = std::string(family) + "/" + variant;
        auto it = mods_.find(key);
        if (it != mods_.end()) return &it->second;
        const unsigned char *image = nullptr;
        size_t size = 0;
        const std::string f = family, v = variant;
        if (f == "paged_decode" && v == "gqa4_d128") image = kl_fatbin_paged_decode_gqa4_d128, size = kl_fatbin_paged_decode_gqa4_d128_size;
        if (f == "paged_decode" && v == "gqa8_d128") image = kl_fatbin_paged_decode_gqa8_d128, size = kl_fatbin_paged_decode_gqa8_d128_size;
        if (f == "mla_decode" && v == "deepseek_v4_flash") image = kl_fatbin_mla_decode_deepseek_v4_flash, size = kl_fatbin_mla_decode_deepseek_v4_flash_size;
        if (f == "mla_decode" && v == "mistral_small_4") image = kl_fatbin_mla_decode_mistral_small_4, size = kl_fatbin_mla_decode_mistral_small_4_size;
        if (f == "mla_prefill" && v == "deepseek_v4_flash") image = kl_fatbin_mla_prefill_deepseek_v4_flash, size = kl_fatbin_mla_prefill_deepseek_v4_flash_size;
        if (f == "mla_prefill" && v == "mistral_small_4") image = kl_fatbin_mla_prefill_mistral_small_4, size = kl_fatbin_mla_prefill_mistral_small_4_size;
        if (image == nullptr) die("no fatbin " + key);
        kl_module &m = mods_[key];
        ok(kl_module_load(&g_cuda.base, image, size, &m), "loading " + key);
        return &m;
    }

  private:
    std::map<std::string, kl_module> mods_;
};

}  // namespace

int main(int argc, char **argv) {
    const tune::Options opt = tune::parse_options(argc, argv, kUsage);
    init_driver();
    g_x.stream_create = symbol<StreamCreateFn>("cuStreamCreate");
    g_x.begin_capture = symbol<BeginCaptureFn>("cuStreamBeginCapture_v2", "cuStreamBeginCapture");
    g_x.end_capture = symbol<EndCaptureFn>("cuStreamEndCapture");
    g_x.instantiate = symbol<InstantiateFn>("cuGraphInstantiateWithFlags");
    g_x.graph_launch = symbol<GraphLaunchFn>("cuGraphLaunch");
    g_x.exec_destroy = symbol<ExecDestroyFn>("cuGraphExecDestroy");
    g_x.graph_destroy = symbol<GraphDestroyFn>("cuGraphDestroy");

    kl_device dev;
    ok(kl_cuda_device_describe(&g_cuda, &dev), "kl_cuda_device_describe");
    char name[128] = {0};
    ok(kl_cuda_device_name(&g_cuda, name, sizeof name), "kl_cuda_device_name");
    const std::string id = opt.device_id.empty() ? tune::device_id_of(name) : opt.device_id;
    const kl_choice_device td = tune::table_device(dev, id, name);

    // Clocks up before the first shape: without this the grid's first
    // (smallest) shapes were timed on an idle GPU, up to 60% slower eager
    // in one run than the next (two H100 runs of 2026-12-07).
    {
        void *buf = nullptr;
        const size_t bytes = size_t{512} << 20;
        ok(kl_cuda_malloc(&g_cuda, &buf, bytes), "cuMemAlloc (warm-up)");
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500)) {
            for (int i = 0; i < 20; i++) ok(kl_cuda_memset_d8(&g_cuda, buf, static_cast<unsigned char>(i), bytes), "cuMemsetD8 (warm-up)");
            ok(kl_cuda_synchronize(&g_cuda), "the warm-up");
        }
        kl_cuda_free(&g_cuda, buf);
    }
    GpuMem memory;
    GpuClock clock(opt.runs);
    GpuModules mods;
    std::vector<std::unique_ptr<tune::Op>> owned = tune::make_ops(mods, opt.quick ? tune::Grid::kQuick : tune::Grid::kFull, dev);
    std::vector<tune::Op *> ops;
    for (auto &o : owned) ops.push_back(o.get());
    tune::Result res = tune::run(ops, tune::all_operations(), dev, td, memory, clock, opt);
    kl_choice_table_free(&res.loaded);
    return 0;
}
