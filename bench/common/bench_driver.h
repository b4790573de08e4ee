// bench_driver.h: the driver plumbing the C++ GPU benchmarks share (the CUDA
// backend, the driver entry points they call beyond it, errors that end the
// program, device buffers, event-timed medians).
//
// Include it in exactly one file per program, after that file has defined
// KLAUNCH_IMPLEMENTATION and included klaunch/cuda_backend.h, and with
// KL_BENCH_PROGRAM defined to the program's name (it begins every error
// message):
//
//   #define KLAUNCH_IMPLEMENTATION
//   #include "klaunch/cuda_backend.h"
//   #define KL_BENCH_PROGRAM "decode_bench"
//   #include "bench/common/bench_driver.h"
//
// Everything is in an anonymous namespace, as it was in each program: one
// copy per program, and a program adds its own helpers (median_us at its own
// run count, entry points only it needs through symbol<F>()) beside these.
// Every failure prints "<program>: <what>" to stderr and exits 1.
#ifndef KLAUNCH_BENCH_COMMON_BENCH_DRIVER_H
#define KLAUNCH_BENCH_COMMON_BENCH_DRIVER_H

#ifndef KL_BENCH_PROGRAM
#error "define KL_BENCH_PROGRAM (the program's name, for error messages) before including bench_driver.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "klaunch/cuda_backend.h"

namespace {

// ---- the driver --------------------------------------------------------------------

kl_cuda_backend g_cuda;

typedef int (*EventCreateFn)(void **event, unsigned flags);
typedef int (*EventRecordFn)(void *event, kl_stream stream);
typedef int (*EventSyncFn)(void *event);
typedef int (*EventElapsedFn)(float *ms, void *start, void *end);
typedef int (*EventDestroyFn)(void *event);
typedef int (*MemcpyDtoDFn)(unsigned long long dst, unsigned long long src, size_t bytes);

// The entry points every benchmark calls that the backend does not wrap.
struct Driver {
    EventCreateFn event_create;
    EventRecordFn event_record;
    EventSyncFn event_sync;
    EventElapsedFn event_elapsed;
    EventDestroyFn event_destroy;
    MemcpyDtoDFn memcpy_dtod;
} g_drv;

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, KL_BENCH_PROGRAM ": %s\n", what.c_str());
    std::exit(1);
}

void ok(kl_status st, const std::string &what) {
    if (st != KL_SUCCESS) die(what + ": " + kl_last_error_message());
}

void cu(int r, const char *what) {
    if (r != 0) die(std::string(what) + " failed with CUresult " + std::to_string(r));
}

// A driver entry point by its exported name (else `fallback`'s), or die.
template <class F>
F symbol(const char *name, const char *fallback = nullptr) {
    void *p = kl_cuda_backend_symbol(&g_cuda, name);
    if (p == nullptr && fallback != nullptr) p = kl_cuda_backend_symbol(&g_cuda, fallback);
    if (p == nullptr) die(std::string("the driver lacks ") + name);
    F f;
    std::memcpy(&f, &p, sizeof f);
    return f;
}

// Opens device 0 and fills g_drv; a program resolves what else it needs
// with symbol<F>() afterwards.
void init_driver() {
    ok(kl_cuda_backend_init(&g_cuda, 0), "kl_cuda_backend_init");
    g_drv.event_create = symbol<EventCreateFn>("cuEventCreate");
    g_drv.event_record = symbol<EventRecordFn>("cuEventRecord");
    g_drv.event_sync = symbol<EventSyncFn>("cuEventSynchronize");
    g_drv.event_elapsed = symbol<EventElapsedFn>("cuEventElapsedTime_v2", "cuEventElapsedTime");
    g_drv.event_destroy = symbol<EventDestroyFn>("cuEventDestroy_v2", "cuEventDestroy");
    g_drv.memcpy_dtod = symbol<MemcpyDtoDFn>("cuMemcpyDtoD_v2");
}

// Device memory, freed on destruction.
struct Buf {
    void *p = nullptr;
    size_t bytes = 0;
    Buf() = default;
    explicit Buf(size_t n) : bytes(n) { ok(kl_cuda_malloc(&g_cuda, &p, n), "cuMemAlloc of " + std::to_string(n)); }
    ~Buf() {
        if (p) kl_cuda_free(&g_cuda, p);
    }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    Buf(Buf &&o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
    Buf &operator=(Buf &&o) noexcept {
        if (this != &o) {
            if (p) kl_cuda_free(&g_cuda, p);
            p = o.p;
            bytes = o.bytes;
            o.p = nullptr;
        }
        return *this;
    }
    template <class T>
    T *as() const {
        return static_cast<T *>(p);
    }
    kl_bf16 *bf() const { return as<kl_bf16>(); }
    unsigned long long addr() const { return reinterpret_cast<uintptr_t>(p); }
};

// ---- another build's kernels -----------------------------------------------------

// Loads the cubin or fatbin at `path` (a bench-only build: bench/*/ab.sh,
// trace.sh) into *mod; `what` names the option in errors. The image is
// copied into 8-byte-aligned memory that *image keeps for the module's life.
void load_image(const std::string &path, const char *what, std::vector<uint64_t> *image, kl_module *mod) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) die(std::string(what) + ": cannot open " + path);
    std::vector<unsigned char> bytes;
    unsigned char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
    image->assign((bytes.size() + 7) / 8, 0u);
    std::memcpy(image->data(), bytes.data(), bytes.size());
    ok(kl_module_load(&g_cuda.base, image->data(), bytes.size(), mod), std::string(what) + ": loading " + path);
}

// ---- traces -------------------------------------------------------------------------

// Prints " earliest: <tag><id> <value> ...; latest: ..." for the n smallest
// and n largest (value, id) pairs (e.g. mean end by SM of a trace build).
void print_extremes(std::vector<std::pair<double, int>> v, size_t n, const char *tag) {
    std::sort(v.begin(), v.end());
    std::printf(" earliest:");
    for (size_t i = 0; i < std::min(n, v.size()); i++) std::printf(" %s%d %.1f", tag, v[i].second, v[i].first);
    std::printf("; latest:");
    for (size_t i = v.size() > n ? v.size() - n : 0; i < v.size(); i++)
        std::printf(" %s%d %.1f", tag, v[i].second, v[i].first);
    std::printf("\n");
}

// ---- timing ------------------------------------------------------------------------

// Median microseconds of launch(run index) over `runs` runs, each between
// two events recorded on `stream` (the legacy stream by default), after
// `warmup` untimed runs (indices 0 .. warmup-1; the timed runs follow).
// Runs are queued back to back and synchronised once at the end.
double median_us(const std::function<void(int)> &launch, int runs, int warmup, kl_stream stream = nullptr) {
    std::vector<void *> start(runs), stop(runs);
    for (int i = 0; i < runs; i++) {
        cu(g_drv.event_create(&start[i], 0), "cuEventCreate");
        cu(g_drv.event_create(&stop[i], 0), "cuEventCreate");
    }
    for (int i = 0; i < warmup; i++) launch(i);
    for (int i = 0; i < runs; i++) {
        cu(g_drv.event_record(start[i], stream), "cuEventRecord");
        launch(warmup + i);
        cu(g_drv.event_record(stop[i], stream), "cuEventRecord");
    }
    cu(g_drv.event_sync(stop[runs - 1]), "cuEventSynchronize");
    ok(kl_cuda_synchronize(&g_cuda), "a benchmarked launch");
    std::vector<double> us(runs);
    for (int i = 0; i < runs; i++) {
        float ms = 0.0f;
        cu(g_drv.event_elapsed(&ms, start[i], stop[i]), "cuEventElapsedTime");
        us[i] = 1000.0 * ms;
        g_drv.event_destroy(start[i]);
        g_drv.event_destroy(stop[i]);
    }
    std::sort(us.begin(), us.end());
    return runs % 2 ? us[runs / 2] : 0.5 * (us[runs / 2 - 1] + us[runs / 2]);
}

}  // namespace

#endif  // KLAUNCH_BENCH_COMMON_BENCH_DRIVER_H
