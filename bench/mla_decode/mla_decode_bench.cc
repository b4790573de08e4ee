// mla_decode_bench: the MLA decode family (specs/mla_decode.yaml) on a GPU,
// a whole decode step at a time, against the GPU's own copy bandwidth.
//
//   mla_decode_bench [--json FILE] [--runs N] [--only WORD,WORD...] [--quick]
//
// On the GPU machine, from the repository root, after tools/gpu/stage.sh
// (it stages this cc_binary, tagged gpu, as .gpu/bench/mla_decode/mla_decode_bench):
//   bash bench/mla_decode/run.sh        (this program, torch_baselines.py,
//                                        flashinfer_mla.py, then table.py)
//
// A step is what a decode loop runs for one layer: kl_mla_decode_schedule,
// one attention launcher, then kl_mla_decode_combine (the _mma launchers) or
// kl_mla_decode_combine_pdl (the _tma launchers), queued on one stream of
// this program's own. Times are CUDA events around the step (cuEventRecord on
// that stream), runs queued back to back, the median of N (default 30; 5
// with --quick) after 3 warm-up runs. Every run reads the next of several
// input sets (q, a paged cache, a block table of its own), at least 2 and at
// least 600 MB in a rotation, so no run finds its cache in the 50-60 MB L2.
// Caches hold random bf16 in [-1, 1) or valid fp8 tokens (E4M3 codes of
// magnitude 1/8 to 2, one fp32 scale in [0.25, 1) per 128 values, bf16 rope
// in [-1, 1): klaunch/mla_decode_layout.h's THE FP8 CACHE TOKEN); pages of
// 64 positions, each set's block table a shuffle of its cache's pages (as
// tests/mla_decode/mla_decode_reference.h's make() lays them out).
// num_parts = kl_mla_decode_num_parts(kind, SM count, s_q, h_q).
//
// Measured, for each attention launcher the device loads and both variants
// (deepseek_v4_flash D 576, mistral_small_4 D 320), bf16 and fp8 caches:
//   copy       cuMemcpyDtoD of 1 GiB; bytes = read + write: the baseline
//              every byte figure is divided by
//   mem_*      h_q 16, s_q 1, batch 128, every length 4096
//   varlen_*   the same with ragged lengths of mean exactly 4096: pairs
//              (x, 8192 - x), x uniform in [1, 8191], shuffled (Lcg seed 7)
//   compute_*  h_q 128, s_q 2, batch 128, lengths uniform in [4096, 32768]
//              (Lcg seed 45: the lengths torch_baselines.py and
//              flashinfer_mla.py time too)
//   long_*     h_q 16, s_q 1, batch 1, length 32768
//   short_*    h_q 128, s_q 1, batch 1, length 1024: a latency row, three
//              ways: _step (events around one step), _b2b (20 steps queued
//              back to back between the events, time / 20) and _graph (20
//              replays of CUDA graphs that each captured one step on one
//              input set, time / 20)
//   parts_<shape>_{sched,attn,combine,layer}_*  (D 576, every shape): the
//              three kernels of a step each alone between events, and a
//              layer (attention + combine: the schedule runs once a step,
//              for every layer)
//   sched_*, combine_*, sched_combine_* (and _pair)
//              at the mem shape (batch 128): the schedule alone, the
//              combine alone (after the launcher's steps have filled the
//              workspace; the _tma rows time combine_pdl, which launched
//              alone waits for nothing), the sum of the two medians, and
//              the two launched together between one pair of events
// Row names are <shape>_<launcher>_<head dim>, e.g. mem_bf16_mma_576.
// Per row: us per step; bytes = KV bytes (sum of lengths x bytes a token:
// 2 D for bf16, MLA_FP8_TOKEN_BYTES for fp8) + q + out; GB/s and its ratio
// to copy; FLOPs = 2 s_q h_q sum(lengths) (D + D - 64), counting every query
// row against every position (the causal mask among the s_q tokens hides at
// most s_q - 1 positions a row, which is ignored); TFLOP/s; KV tokens per
// second (sum of lengths / time).
//
// Where a launcher's kl_X_get refuses with KL_ERROR_UNSUPPORTED (the Hopper
// launchers kl_mla_decode_attn_bf16_tma and kl_mla_decode_attn_fp8_tma off
// sm_90), its rows are left out with a note, in the output and in the JSON's
// "notes".
//
// Correctness guard, before any timing (exit 1 when broken): at two small
// shapes (s_q 1, h_q 16, 8 ragged sequences; s_q 2, h_q 128, 4 sequences),
// each variant, the device's num_parts (so sequences are split and
// combined): bf16_tma's out equals bf16_mma's; fp8_mma's equals bf16_mma's
// over the same cache dequantised on the host; fp8_tma's equals fp8_mma's;
// relative norm of the difference < 1e-2.
//
// --only runs the rows whose names contain one of the words (copy and the
// guard always run). --quick: batch 32 instead of 128, length 8192 instead
// of 32768 for long_*, 5 runs unless --runs says otherwise (a smoke run; its
// JSON says "quick": true). A bad argument prints the usage and exits 2
// before the driver is touched. Exit 1 on any failure (no GPU, a refused
// launch, a mismatch).
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/mla_decode_fatbins.h"

#define KL_BENCH_PROGRAM "mla_decode_bench"
#include "bench/common/bench_driver.h"
#include "bench/common/inputs.h"

namespace {

// ---- the command line (read before the driver is touched) -------------------------

const char kUsage[] =
    "usage: mla_decode_bench [--json FILE] [--runs N] [--only WORD,WORD...] [--quick]\n"
    "  --json FILE   also write the results to FILE\n"
    "  --runs N      timed runs a row, 1 to 100000 (default 30; 5 with --quick)\n"
    "  --only WORDS  only the rows whose names contain one of the comma-separated words\n"
    "                (copy and the correctness guard always run)\n"
    "  --quick       smaller batches and fewer runs: a smoke run, not the targets' shapes\n";

[[noreturn]] void usage_error(const std::string &why) {
    std::fprintf(stderr, "mla_decode_bench: %s\n%s", why.c_str(), kUsage);
    std::exit(2);
}

struct Options {
    std::string json;
    int runs = 0;  // 0: the default
    bool quick = false;
    std::vector<std::string> only;
};

Options parse_args(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&](const char *what) -> std::string {
            if (i + 1 >= argc) usage_error(a + " needs " + what);
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (a == "--json") {
            o.json = value("a file name");
            if (o.json.empty()) usage_error("--json needs a file name");
        } else if (a == "--runs") {
            const std::string v = value("a count");
            char *end = nullptr;
            errno = 0;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || errno != 0 || n < 1 || n > 100000)
                usage_error("--runs: a count of 1 to 100000, not '" + v + "'");
            o.runs = static_cast<int>(n);
        } else if (a == "--only") {
            std::stringstream list(value("a comma-separated list of words"));
            std::string w;
            while (std::getline(list, w, ','))
                if (!w.empty()) o.only.push_back(w);
            if (o.only.empty()) usage_error("--only needs at least one word");
        } else if (a == "--quick") {
            o.quick = true;
        } else {
            usage_error("unknown argument '" + a + "'");
        }
    }
    return o;
}

Options g_opt;
int g_runs = 30;
constexpr int kWarmup = 3;

bool want(const std::string &name) {
    if (g_opt.only.empty()) return true;
    for (const std::string &w : g_opt.only)
        if (name.find(w) != std::string::npos) return true;
    return false;
}

// ---- the driver --------------------------------------------------------------------

typedef struct CUgraph_st *Graph;
typedef struct CUgraphExec_st *GraphExec;
typedef int (*DeviceGetNameFn)(char *name, int len, int device);
typedef int (*StreamCreateFn)(kl_stream *stream, unsigned flags);
typedef int (*StreamDestroyFn)(kl_stream stream);
typedef int (*BeginCaptureFn)(kl_stream stream, int mode);
typedef int (*EndCaptureFn)(kl_stream stream, Graph *graph);
typedef int (*InstantiateFn)(GraphExec *exec, Graph graph, unsigned long long flags);
typedef int (*GraphLaunchFn)(GraphExec exec, kl_stream stream);
typedef int (*ExecDestroyFn)(GraphExec exec);
typedef int (*GraphDestroyFn)(Graph graph);

struct Extra {
    DeviceGetNameFn device_name;
    StreamCreateFn stream_create;
    StreamDestroyFn stream_destroy;
    BeginCaptureFn begin_capture;
    EndCaptureFn end_capture;
    InstantiateFn instantiate;
    GraphLaunchFn graph_launch;
    ExecDestroyFn exec_destroy;
    GraphDestroyFn graph_destroy;
} g_x;

kl_stream g_stream = nullptr;  // every step's stream (PDL and graph capture need one of our own)
uint32_t g_sms = 0;

int attribute(int attr, const char *what) {
    int v = 0;
    cu(g_cuda.api.device_get_attribute(&v, attr, g_cuda.device), what);
    return v;
}

void init_decode_driver() {
    init_driver();
    g_x.device_name = symbol<DeviceGetNameFn>("cuDeviceGetName");
    g_x.stream_create = symbol<StreamCreateFn>("cuStreamCreate");
    g_x.stream_destroy = symbol<StreamDestroyFn>("cuStreamDestroy_v2", "cuStreamDestroy");
    g_x.begin_capture = symbol<BeginCaptureFn>("cuStreamBeginCapture_v2", "cuStreamBeginCapture");
    g_x.end_capture = symbol<EndCaptureFn>("cuStreamEndCapture");
    g_x.instantiate = symbol<InstantiateFn>("cuGraphInstantiateWithFlags");
    g_x.graph_launch = symbol<GraphLaunchFn>("cuGraphLaunch");
    g_x.exec_destroy = symbol<ExecDestroyFn>("cuGraphExecDestroy");
    g_x.graph_destroy = symbol<GraphDestroyFn>("cuGraphDestroy");
    cu(g_x.stream_create(&g_stream, 0), "cuStreamCreate");
    g_sms = static_cast<uint32_t>(attribute(16 /* MULTIPROCESSOR_COUNT */, "cuDeviceGetAttribute(SM count)"));
}

// ---- host data ---------------------------------------------------------------------

// bf16 conversions, the fp8 cache token and the rotation count: bench/common/inputs.h.
using kl_inputs::from_bf16;
using kl_inputs::to_bf16;

// OCP E4M3 (bias 7, no infinities; S.1111.111 is NaN, never generated here).
float e4m3(uint8_t c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
    return s ? -v : v;
}

// How many input sets of `bytes` each make a rotation past L2: >= 2, >= 600 MB.
size_t rotation(size_t bytes) { return kl_inputs::rotation(bytes, 2); }

// ---- device fills ------------------------------------------------------------------

constexpr size_t kPatternBytes = 32u << 20;

// Copies `pattern` over dst from a seed-dependent offset (a multiple of
// `unit` bytes), wrapping: buffers of one rotation differ.
void fill_from(const Buf &pattern, const Buf &dst, size_t unit, uint32_t seed) {
    const size_t units = pattern.bytes / unit;
    size_t off = (size_t{seed} * 4099u % units) * unit, done = 0;
    while (done < dst.bytes) {
        const size_t n = std::min(dst.bytes - done, units * unit - off);
        cu(g_drv.memcpy_dtod(dst.addr() + done, pattern.addr() + off, n), "cuMemcpyDtoD (fill)");
        done += n;
        off = 0;
    }
}

// Random bf16 in [-1, 1).
void fill_bf16(const Buf &dst, uint32_t seed) {
    static Buf pattern;
    if (pattern.p == nullptr) {
        const std::vector<unsigned char> host = kl_inputs::bf16_pattern(kPatternBytes, 5);
        pattern = Buf(kPatternBytes);
        ok(kl_cuda_memcpy_htod(&g_cuda, pattern.p, host.data(), kPatternBytes), "upload of the bf16 pattern");
    }
    fill_from(pattern, dst, 2, seed);
}

// Whole valid fp8 tokens (dst holds a whole number of them).
void fill_fp8(const Buf &dst, uint32_t kv_lora, uint32_t seed) {
    static Buf pattern[2];
    Buf &pat = pattern[kv_lora == 512 ? 1 : 0];
    const uint32_t tb = kl_mla_decode_fp8_token_bytes(kv_lora);
    if (pat.p == nullptr) {
        const std::vector<unsigned char> host = kl_inputs::mla_fp8_pattern(kPatternBytes, kv_lora, 7 + kv_lora);
        pat = Buf(host.size());
        ok(kl_cuda_memcpy_htod(&g_cuda, pat.p, host.data(), host.size()), "upload of the fp8 pattern");
    }
    fill_from(pat, dst, tb, seed);
}

// ---- the launchers -----------------------------------------------------------------

enum class Attn { kBf16Mma, kFp8Mma, kBf16Tma, kFp8Tma };
const Attn kAttns[] = {Attn::kBf16Mma, Attn::kFp8Mma, Attn::kBf16Tma, Attn::kFp8Tma};

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
bool attn_tma(Attn a) { return a == Attn::kBf16Tma || a == Attn::kFp8Tma; }
kl_mla_decode_kind attn_kind(Attn a) {
    return a == Attn::kBf16Tma ? KL_MLA_DECODE_BF16_TMA : a == Attn::kFp8Tma ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_MMA;
}

kl_status attn_get(Attn a, kl_kernel *k, const kl_module *mod) {
    switch (a) {
    case Attn::kBf16Mma: return kl_mla_decode_attn_bf16_mma_get(k, mod);
    case Attn::kFp8Mma: return kl_mla_decode_attn_fp8_mma_get(k, mod);
    case Attn::kBf16Tma: return kl_mla_decode_attn_bf16_tma_get(k, mod);
    case Attn::kFp8Tma: return kl_mla_decode_attn_fp8_tma_get(k, mod);
    default: break;
    }
    return KL_ERROR_UNSUPPORTED;
}

struct Variant {
    const char *name;
    uint32_t D;
    kl_module mod;
    bool loaded[4] = {false, false, false, false};  // by Attn
    bool pdl = false;                               // combine_pdl loads
};
Variant g_var[2] = {{"deepseek_v4_flash", 576, {}}, {"mistral_small_4", 320, {}}};

std::vector<std::string> g_notes;

void note(const std::string &s) {
    std::printf("  (%s)\n", s.c_str());
    g_notes.push_back(s);
}

// Asks every launcher of a variant for its kernel once: which rows this device has.
void probe(Variant &v) {
    kl_kernel k;
    for (Attn a : kAttns) {
        const int i = static_cast<int>(a);
        const std::string what = std::string(attn_name(a)) + " D " + std::to_string(v.D);
        const kl_status st = attn_get(a, &k, &v.mod);
        if (st == KL_ERROR_UNSUPPORTED) {
            note(what + " left out: " + kl_last_error_message());
            continue;
        }
        ok(st, "kl_mla_decode_attn_" + std::string(attn_name(a)) + "_get (" + v.name + ")");
        v.loaded[i] = true;
    }
    const kl_status st = kl_mla_decode_combine_pdl_get(&k, &v.mod);
    if (st == KL_SUCCESS)
        v.pdl = true;
    else if (st != KL_ERROR_UNSUPPORTED)
        ok(st, "kl_mla_decode_combine_pdl_get");
    for (Attn a : {Attn::kBf16Tma, Attn::kFp8Tma}) {
        if (v.loaded[static_cast<int>(a)] && !v.pdl) {
            note(std::string(attn_name(a)) + " D " + std::to_string(v.D) +
                 " left out: combine_pdl does not load here: " + kl_last_error_message());
            v.loaded[static_cast<int>(a)] = false;
        }
    }
}

// ---- a problem's inputs: nsets sets of q, cache and block table -----------------

struct Shape {
    std::string name;
    uint32_t s_q, h_q;
    std::vector<int32_t> lengths;
};

struct Inputs {
    uint32_t D = 0, batch = 0, s_q = 1, h_q = 1, page = 64, mbps = 1, num_blocks = 1, tb = 0;
    bool fp8 = false;
    float scale = 0.0f;
    std::vector<int32_t> lengths;
    uint64_t tokens = 0;
    size_t nsets = 0, q_set = 0, cache_set = 0, table_set = 0;  // bytes, bytes, int32 elements
    Buf q, cache, table, lens;

    uint32_t rows() const { return s_q * h_q; }
    uint32_t dv() const { return D - 64u; }
    const kl_bf16 *q_at(size_t s) const { return reinterpret_cast<const kl_bf16 *>(q.as<char>() + s * q_set); }
    const void *cache_at(size_t s) const { return cache.as<char>() + s * cache_set; }
    const int32_t *table_at(size_t s) const { return table.as<int32_t>() + s * table_set; }
    size_t out_elems() const { return size_t{batch} * rows() * dv(); }
    double kv_bytes() const { return static_cast<double>(tokens) * tb; }
    double io_bytes() const { return kv_bytes() + 2.0 * batch * rows() * D + 2.0 * out_elems(); }
    double flops() const { return 2.0 * s_q * h_q * static_cast<double>(tokens) * (2.0 * D - 64); }
};

// The layout of `nsets` sets (sizes and each set's shuffled table); device
// buffers allocated, tables and lengths uploaded, q and cache not filled.
void layout(Inputs &in, uint32_t D, bool fp8, const Shape &sh, size_t nsets_or_0, uint32_t seed) {
    in.D = D;
    in.fp8 = fp8;
    in.s_q = sh.s_q;
    in.h_q = sh.h_q;
    in.lengths = sh.lengths;
    in.batch = static_cast<uint32_t>(sh.lengths.size());
    in.scale = 1.0f / std::sqrt(static_cast<float>(D));
    in.tb = fp8 ? kl_mla_decode_fp8_token_bytes(D - 64u) : 2u * D;
    std::vector<uint32_t> npg(in.batch);
    uint32_t pages = 0, longest = 1;
    in.tokens = 0;
    for (uint32_t b = 0; b < in.batch; b++) {
        const uint32_t l = static_cast<uint32_t>(std::max<int32_t>(sh.lengths[b], 0));
        in.tokens += l;
        npg[b] = (l + in.page - 1u) / in.page;
        pages += npg[b];
        longest = std::max(longest, npg[b]);
    }
    in.mbps = longest;
    in.num_blocks = std::max(pages, 1u);
    in.q_set = size_t{in.batch} * in.rows() * D * 2;
    in.cache_set = size_t{in.num_blocks} * in.page * in.tb;
    in.table_set = size_t{in.batch} * in.mbps;
    in.nsets = nsets_or_0 ? nsets_or_0 : rotation(in.q_set + in.cache_set);
    std::vector<int32_t> tables(in.nsets * in.table_set, -1);
    std::mt19937 gen(seed * 2654435761u + 12345u);
    std::vector<int32_t> perm(in.num_blocks);
    for (size_t s = 0; s < in.nsets; s++) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), gen);
        uint32_t next = 0;
        for (uint32_t b = 0; b < in.batch; b++)
            for (uint32_t j = 0; j < npg[b]; j++) tables[s * in.table_set + size_t{b} * in.mbps + j] = perm[next++];
    }
    in.q = Buf(in.nsets * in.q_set);
    in.cache = Buf(in.nsets * in.cache_set);
    in.table = Buf(tables.size() * 4);
    in.lens = Buf(size_t{in.batch} * 4);
    ok(kl_cuda_memcpy_htod(&g_cuda, in.table.p, tables.data(), in.table.bytes), "upload of the block tables");
    ok(kl_cuda_memcpy_htod(&g_cuda, in.lens.p, in.lengths.data(), in.lens.bytes), "upload of the lengths");
}

// ---- a step ------------------------------------------------------------------------

struct Runner {
    const Inputs *in;
    Attn a;
    kl_mla_decode_kind kind;
    uint32_t parts;
    uint64_t words, ws_bytes;
    kl_kernel sk, ak, ck;
    bool pdl;
    Buf sched, ws, out, lse;
    std::vector<kl_tensor_map> qm, cm;  // the _tma launchers' maps, one a set (cm: bf16_tma's cache)

    Runner(const Inputs &inputs, const Variant &v, Attn at, uint32_t parts_or_0 = 0)
        : in(&inputs), a(at), kind(attn_kind(at)) {
        parts = parts_or_0 ? parts_or_0 : kl_mla_decode_num_parts(kind, g_sms, in->s_q, in->h_q);
        words = kl_mla_decode_schedule_words(in->batch, parts);
        ws_bytes = kl_mla_decode_workspace_bytes(parts, in->s_q, in->h_q, in->D);
        pdl = attn_tma(a);
        ok(kl_mla_decode_schedule_get(&sk, &v.mod), "kl_mla_decode_schedule_get");
        ok(pdl ? kl_mla_decode_combine_pdl_get(&ck, &v.mod) : kl_mla_decode_combine_get(&ck, &v.mod),
           "kl_mla_decode_combine_get");
        ok(attn_get(a, &ak, &v.mod), std::string("kl_mla_decode_attn_") + attn_name(a) + "_get");
        sched = Buf(words * 4);
        ws = Buf(ws_bytes);
        out = Buf(in->out_elems() * 2);
        lse = Buf(size_t{in->batch} * in->rows() * 4);
        if (attn_tma(a)) encode_maps();
    }

    void encode_maps() {
        qm.resize(in->nsets);
        cm.resize(in->nsets);
        const uint64_t R = in->rows(), D = in->D;
        for (size_t s = 0; s < in->nsets; s++) {
            if (a == Attn::kBf16Tma) {
                ok(kl_mla_decode_attn_bf16_tma_q_map_encode(&ak, &qm[s], in->q_at(s), D, R, in->batch, D, R * D),
                   "bf16_tma q_map");
                ok(kl_mla_decode_attn_bf16_tma_cache_map_encode(
                       &ak, &cm[s], static_cast<const kl_bf16 *>(in->cache_at(s)), D, in->page, in->num_blocks, D,
                       uint64_t{in->page} * D),
                   "bf16_tma cache_map");
            }
            // Only q has a map: fp8_tma reads the cache by bulk copies from its pointer.
            if (a == Attn::kFp8Tma)
                ok(kl_mla_decode_attn_fp8_tma_q_map_encode(&ak, &qm[s], in->q_at(s), D, R, in->batch, D, R * D),
                   "fp8_tma q_map");
            (void)R;
            (void)D;
        }
    }

    void schedule(kl_stream st) {
        ok(kl_mla_decode_schedule(&sk, in->lens.as<int32_t>(), sched.as<int32_t>(), in->batch, parts, words, st),
           "kl_mla_decode_schedule");
    }

    void attention(size_t s, kl_stream st) {
        const Inputs &p = *in;
        const int32_t *table = p.table_at(s), *lens = p.lens.as<int32_t>(), *sc = sched.as<int32_t>();
        kl_bf16 *o = out.as<kl_bf16>();
        float *l = lse.as<float>(), *w = ws.as<float>();
        kl_status r = KL_ERROR_UNSUPPORTED;
        switch (a) {
        case Attn::kBf16Mma:
            r = kl_mla_decode_attn_bf16_mma(&ak, p.q_at(s), static_cast<const kl_bf16 *>(p.cache_at(s)), table, lens,
                                            sc, o, l, w, p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks,
                                            p.scale, parts, words, ws_bytes, st);
            break;
        case Attn::kFp8Mma:
            r = kl_mla_decode_attn_fp8_mma(&ak, p.q_at(s), static_cast<const uint8_t *>(p.cache_at(s)), table, lens,
                                           sc, o, l, w, p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks,
                                           p.scale, parts, words, ws_bytes, st);
            break;
        case Attn::kBf16Tma:
            r = kl_mla_decode_attn_bf16_tma(&ak, &qm[s], &cm[s], table, lens, sc, o, l, w, p.batch, p.s_q, p.h_q,
                                            p.D, p.page, p.mbps, p.num_blocks, p.scale, parts, words, ws_bytes, st);
            break;
        case Attn::kFp8Tma:
            r = kl_mla_decode_attn_fp8_tma(&ak, &qm[s], static_cast<const uint8_t *>(p.cache_at(s)), table, lens, sc,
                                           o, l, w, p.batch, p.s_q, p.h_q, p.D, p.page, p.mbps, p.num_blocks, p.scale,
                                           parts, words, ws_bytes, st);
            break;
        default: break;
        }
        ok(r, std::string("kl_mla_decode_attn_") + attn_name(a));
    }

    void combine(kl_stream st) {
        const Inputs &p = *in;
        ok((pdl ? kl_mla_decode_combine_pdl : kl_mla_decode_combine)(
               &ck, sched.as<int32_t>(), ws.as<float>(), out.as<kl_bf16>(), lse.as<float>(), p.batch, p.s_q, p.h_q,
               p.D, parts, words, ws_bytes, st),
           pdl ? "kl_mla_decode_combine_pdl" : "kl_mla_decode_combine");
    }

    void step(size_t s, kl_stream st) {
        schedule(st);
        attention(s, st);
        combine(st);
    }

    std::vector<uint16_t> download_out() const {
        std::vector<uint16_t> h(in->out_elems());
        ok(kl_cuda_synchronize(&g_cuda), "a decode step");
        ok(kl_cuda_memcpy_dtoh(&g_cuda, h.data(), out.p, h.size() * 2), "download of out");
        return h;
    }
};

// ---- results -----------------------------------------------------------------------

struct Row {
    std::string name, shape, launcher, what;
    uint32_t D;
    double us, bytes, kv_bytes, flops, tokens;
};
std::vector<Row> g_rows;
double g_copy_gbps = 0;

void report(Row r) {
    const double gbps = r.bytes > 0 ? r.bytes / r.us * 1e-3 : 0;
    std::printf("  %-28s %10.2f us", r.name.c_str(), r.us);
    if (r.bytes > 0) std::printf("  %7.0f GB/s (%.3f x copy)", gbps, g_copy_gbps > 0 ? gbps / g_copy_gbps : 0.0);
    if (r.flops > 0) std::printf("  %7.1f TFLOP/s", r.flops / r.us * 1e-6);
    if (r.tokens > 0) std::printf("  %8.1f Mtok/s", r.tokens / r.us);
    std::printf("  %s\n", r.what.c_str());
    std::fflush(stdout);
    g_rows.push_back(std::move(r));
}

std::string describe(const Inputs &in, const Runner &r) {
    std::ostringstream w;
    w << "D " << in.D << (in.fp8 ? " fp8" : " bf16") << ", h_q " << in.h_q << ", s_q " << in.s_q << ", batch "
      << in.batch << ", " << in.tokens << " KV tokens, page " << in.page << ", " << r.parts << " parts, "
      << (r.pdl ? "combine_pdl" : "combine") << ", " << in.nsets << " input sets";
    return w.str();
}

Row step_row(const std::string &name, const std::string &shape, const Inputs &in, const Runner &r, double us,
             const std::string &what) {
    return Row{name, shape, attn_name(r.a), what, in.D, us, in.io_bytes(), in.kv_bytes(), in.flops(),
               static_cast<double>(in.tokens)};
}

// ||a - b|| / ||b|| (inf where either holds a non-finite value).
double rel_diff(const std::vector<uint16_t> &a, const std::vector<uint16_t> &b) {
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double x = from_bf16(a[i]), y = from_bf16(b[i]);
        if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
        d2 += (x - y) * (x - y);
        r2 += y * y;
    }
    return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

// ---- the correctness guard ---------------------------------------------------------

// Uploads random q and cache (bf16, or fp8 and its host dequantisation into
// bf16 for `deq`) into one-set inputs laid out for sh.
void guard_inputs(Inputs &in, Inputs *deq, const Variant &v, bool fp8, const Shape &sh, uint32_t seed) {
    layout(in, v.D, fp8, sh, 1, seed);
    std::mt19937 gen(seed + 99);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<uint16_t> q(in.q_set / 2);
    for (uint16_t &x : q) x = to_bf16(u(gen));
    ok(kl_cuda_memcpy_htod(&g_cuda, in.q.p, q.data(), in.q_set), "guard q");
    const size_t positions = size_t{in.num_blocks} * in.page;
    if (!fp8) {
        std::vector<uint16_t> c(positions * in.D);
        for (uint16_t &x : c) x = to_bf16(u(gen));
        ok(kl_cuda_memcpy_htod(&g_cuda, in.cache.p, c.data(), c.size() * 2), "guard cache");
        return;
    }
    const uint32_t dv = in.dv();
    std::vector<uint8_t> c(positions * in.tb);
    std::vector<uint16_t> d(positions * in.D);
    for (size_t p = 0; p < positions; p++) {
        uint8_t *t = c.data() + p * in.tb;
        kl_inputs::mla_fp8_token(t, dv, gen);
        for (uint32_t k = 0; k < dv; k++) {
            float s;
            std::memcpy(&s, t + kl_mla_decode_fp8_scales_offset(dv) + 4u * (k / 128u), 4);
            d[p * in.D + k] = to_bf16(e4m3(t[k]) * s);
        }
        std::memcpy(&d[p * in.D + dv], t + kl_mla_decode_fp8_rope_offset(dv), 128);
    }
    ok(kl_cuda_memcpy_htod(&g_cuda, in.cache.p, c.data(), c.size()), "guard fp8 cache");
    layout(*deq, v.D, false, sh, 1, seed);  // the same seed: the same table
    ok(kl_cuda_memcpy_htod(&g_cuda, deq->q.p, q.data(), in.q_set), "guard q");
    ok(kl_cuda_memcpy_htod(&g_cuda, deq->cache.p, d.data(), d.size() * 2), "guard dequantised cache");
}

void check(const char *what, const std::vector<uint16_t> &got, const std::vector<uint16_t> &want, const Inputs &in,
           const char *against) {
    const double diff = rel_diff(got, want);
    std::printf("  check: %-8s D %u, s_q %u, h_q %u, batch %u vs %s: ||diff|| / ||ref|| = %.2e\n", what, in.D, in.s_q,
                in.h_q, in.batch, against, diff);
    if (!(diff < 1e-2)) die(std::string(what) + " disagrees with " + against);
}

void guard() {
    const std::vector<Shape> shapes = {{"guard16", 1, 16, {1, 63, 64, 65, 700, 3000, 4500, 129}},
                                       {"guard128", 2, 128, {2, 90, 1000, 2500}}};
    for (Variant &v : g_var) {
        for (const Shape &sh : shapes) {
            Inputs b16;
            guard_inputs(b16, nullptr, v, false, sh, 11);
            Runner ref(b16, v, Attn::kBf16Mma);
            ref.step(0, g_stream);
            const std::vector<uint16_t> ref_out = ref.download_out();
            if (v.loaded[static_cast<int>(Attn::kBf16Tma)]) {
                Runner t(b16, v, Attn::kBf16Tma);
                t.step(0, g_stream);
                check("bf16_tma", t.download_out(), ref_out, b16, "bf16_mma");
            }
            Inputs f8, deq;
            guard_inputs(f8, &deq, v, true, sh, 12);
            Runner dref(deq, v, Attn::kBf16Mma);
            dref.step(0, g_stream);
            const std::vector<uint16_t> deq_out = dref.download_out();
            Runner m8(f8, v, Attn::kFp8Mma);
            m8.step(0, g_stream);
            const std::vector<uint16_t> m8_out = m8.download_out();
            check("fp8_mma", m8_out, deq_out, f8, "bf16_mma over the dequantised cache");
            if (v.loaded[static_cast<int>(Attn::kFp8Tma)]) {
                Runner t(f8, v, Attn::kFp8Tma);
                t.step(0, g_stream);
                check("fp8_tma", t.download_out(), m8_out, f8, "fp8_mma");
            }
        }
    }
}

// ---- the measures ------------------------------------------------------------------

void bench_copy() {
    const size_t bytes = size_t{1} << 30;
    Buf a(bytes), b(bytes);
    fill_bf16(a, 1);
    const double us = median_us([&](int) { cu(g_drv.memcpy_dtod(b.addr(), a.addr(), bytes), "cuMemcpyDtoD"); },
                                g_runs, kWarmup);
    g_copy_gbps = 2.0 * bytes / us * 1e-3;
    report(Row{"copy", "copy", "cuMemcpyDtoD", "cuMemcpyDtoD 1 GiB; bytes = read + write", 0, us, 2.0 * bytes, 0, 0,
               0});
}

double time_steps(Runner &r) {
    return median_us([&](int run) { r.step(static_cast<size_t>(run) % r.in->nsets, g_stream); }, g_runs, kWarmup,
                     g_stream);
}

constexpr int kShortSteps = 20;

// The latency rows: one step between events; kShortSteps queued back to
// back; kShortSteps replays of graphs of one step each (one graph a set).
void bench_short(const std::string &base, const Inputs &in, Runner &r) {
    const std::string what = describe(in, r);
    if (want(base + "_step")) report(step_row(base + "_step", "short", in, r, time_steps(r), what + "; one step"));
    if (want(base + "_b2b")) {
        const double us = median_us(
            [&](int run) {
                for (int j = 0; j < kShortSteps; j++)
                    r.step(static_cast<size_t>(run * kShortSteps + j) % in.nsets, g_stream);
            },
            g_runs, kWarmup, g_stream);
        report(step_row(base + "_b2b", "short", in, r, us / kShortSteps,
                        what + "; " + std::to_string(kShortSteps) + " steps back to back, per step"));
    }
    if (want(base + "_graph")) {
        std::vector<Graph> graphs(in.nsets, nullptr);
        std::vector<GraphExec> execs(in.nsets, nullptr);
        for (size_t s = 0; s < in.nsets; s++) {
            cu(g_x.begin_capture(g_stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */), "cuStreamBeginCapture");
            r.step(s, g_stream);
            cu(g_x.end_capture(g_stream, &graphs[s]), "cuStreamEndCapture");
            cu(g_x.instantiate(&execs[s], graphs[s], 0), "cuGraphInstantiateWithFlags");
        }
        const double us = median_us(
            [&](int run) {
                for (int j = 0; j < kShortSteps; j++)
                    cu(g_x.graph_launch(execs[static_cast<size_t>(run * kShortSteps + j) % in.nsets], g_stream),
                       "cuGraphLaunch");
            },
            g_runs, kWarmup, g_stream);
        report(step_row(base + "_graph", "short", in, r, us / kShortSteps,
                        what + "; " + std::to_string(kShortSteps) + " CUDA graph replays (one step each), per step"));
        for (size_t s = 0; s < in.nsets; s++) {
            g_x.exec_destroy(execs[s]);
            g_x.graph_destroy(graphs[s]);
        }
    }
}

// The schedule and the combine alone, after r's steps filled the workspace.
void bench_sched_combine(const std::string &suffix, const Inputs &in, Runner &r) {
    const std::string what = describe(in, r);
    const std::string ns = "sched_" + suffix, nc = "combine_" + suffix, nsum = "sched_combine_" + suffix,
                      npair = "sched_combine_pair_" + suffix;
    if (!(want(ns) || want(nc) || want(nsum) || want(npair))) return;
    const double s_us = median_us([&](int) { r.schedule(g_stream); }, g_runs, kWarmup, g_stream);
    const double c_us = median_us([&](int) { r.combine(g_stream); }, g_runs, kWarmup, g_stream);
    const double p_us = median_us(
        [&](int) {
            r.schedule(g_stream);
            r.combine(g_stream);
        },
        g_runs, kWarmup, g_stream);
    auto row = [&](const std::string &name, double us, const std::string &w) {
        report(Row{name, "sched_combine", attn_name(r.a), what + "; " + w, in.D, us, 0, 0, 0, 0});
    };
    row(ns, s_us, "mla_decode_schedule alone");
    row(nc, c_us, std::string(r.pdl ? "mla_decode_combine_pdl" : "mla_decode_combine") + " alone");
    row(nsum, s_us + c_us, "the sum of the two medians above");
    row(npair, p_us, "schedule then combine between one pair of events");
}

// Where a step's time goes, at one shape: the schedule, the attention and
// the combine each alone between events (the attention after one schedule
// run: the schedule and workspace stay valid for it), rows
// parts_<shape>_{sched,attn,combine}_<launcher>_<D>.
void bench_parts(const std::string &shape, const std::string &suffix, const Inputs &in, Runner &r) {
    const std::string base = "parts_" + shape + "_";
    if (!(want(base + "sched_" + suffix) || want(base + "attn_" + suffix) || want(base + "combine_" + suffix) ||
          want(base + "layer_" + suffix)))
        return;
    const std::string what = describe(in, r);
    r.step(0, g_stream);
    const double s_us = median_us([&](int) { r.schedule(g_stream); }, g_runs, kWarmup, g_stream);
    const double a_us = median_us([&](int run) { r.attention(static_cast<size_t>(run) % in.nsets, g_stream); }, g_runs,
                                  kWarmup, g_stream);
    const double c_us = median_us([&](int) { r.combine(g_stream); }, g_runs, kWarmup, g_stream);
    /* a layer: what every layer of a step runs (the schedule is once a step) */
    const double l_us = median_us(
        [&](int run) {
            r.attention(static_cast<size_t>(run) % in.nsets, g_stream);
            r.combine(g_stream);
        },
        g_runs, kWarmup, g_stream);
    report(Row{base + "layer_" + suffix, "parts", attn_name(r.a), what + "; attention and combine (a layer)", in.D,
               l_us, in.io_bytes(), in.kv_bytes(), in.flops(), static_cast<double>(in.tokens)});
    report(Row{base + "sched_" + suffix, "parts", attn_name(r.a), what + "; mla_decode_schedule alone", in.D, s_us, 0,
               0, 0, 0});
    report(Row{base + "attn_" + suffix, "parts", attn_name(r.a), what + "; the attention alone", in.D, a_us,
               in.io_bytes(), in.kv_bytes(), in.flops(), static_cast<double>(in.tokens)});
    report(Row{base + "combine_" + suffix, "parts", attn_name(r.a), what + "; the combine alone", in.D, c_us, 0, 0,
               0, 0});
}

std::vector<Shape> g_shapes;

// The lengths' generator, the same in torch_baselines.py and flashinfer_mla.py
// (so all three time the same lengths): x = x * 1664525 + 1013904223 mod
// 2^32, giving x >> 8.
struct Lcg {
    uint32_t x;
    uint32_t next() {
        x = x * 1664525u + 1013904223u;
        return x >> 8;
    }
};

void make_shapes() {
    const uint32_t B = g_opt.quick ? 32 : 128;
    std::vector<int32_t> mem(B, 4096), varlen, compute(B);
    Lcg g7{7}, g45{45};
    for (uint32_t i = 0; i < B / 2; i++) {  // pairs (x, 8192 - x): mean exactly 4096
        const int32_t v = 1 + static_cast<int32_t>(g7.next() % 8191u);
        varlen.push_back(v);
        varlen.push_back(8192 - v);
    }
    for (size_t i = varlen.size() - 1; i > 0; i--) std::swap(varlen[i], varlen[g7.next() % (i + 1)]);
    for (int32_t &l : compute) l = 4096 + static_cast<int32_t>(g45.next() % 28673u);
    g_shapes = {{"mem", 1, 16, mem},
                {"varlen", 1, 16, varlen},
                {"compute", 2, 128, compute},
                {"long", 1, 16, {g_opt.quick ? 8192 : 32768}},
                {"short", 1, 128, {1024}}};
}

void bench_shapes() {
    uint32_t seed = 100;
    for (const Shape &sh : g_shapes) {
        for (Variant &v : g_var) {
            for (bool fp8 : {false, true}) {
                seed++;
                std::vector<Attn> todo;
                for (Attn a : kAttns) {
                    if (attn_fp8(a) != fp8 || !v.loaded[static_cast<int>(a)]) continue;
                    const std::string base = sh.name + "_" + attn_name(a) + "_" + std::to_string(v.D);
                    bool any = want(base);
                    if (sh.name == "short")
                        any = want(base + "_step") || want(base + "_b2b") || want(base + "_graph");
                    const std::string suf = std::string(attn_name(a)) + "_" + std::to_string(v.D);
                    if (sh.name == "mem" && !fp8)
                        any = any || want("sched_" + suf) || want("combine_" + suf) ||
                              want("sched_combine_" + suf) || want("sched_combine_pair_" + suf);
                    if (v.D == 576) {
                        const std::string pb = "parts_" + sh.name + "_";
                        any = any || want(pb + "sched_" + suf) || want(pb + "attn_" + suf) || want(pb + "combine_" + suf);
                    }
                    if (any) todo.push_back(a);
                }
                if (todo.empty()) continue;
                Inputs in;
                layout(in, v.D, fp8, sh, 0, seed);
                fill_bf16(in.q, seed);
                if (fp8)
                    fill_fp8(in.cache, in.dv(), seed);
                else
                    fill_bf16(in.cache, seed + 7);
                for (Attn a : todo) {
                    Runner r(in, v, a);
                    const std::string suf = std::string(attn_name(a)) + "_" + std::to_string(v.D);
                    const std::string base = sh.name + "_" + suf;
                    if (v.D == 576) bench_parts(sh.name, suf, in, r);
                    if (sh.name == "short") {
                        bench_short(base, in, r);
                        continue;
                    }
                    if (want(base)) report(step_row(base, sh.name, in, r, time_steps(r), describe(in, r)));
                    if (sh.name == "mem" && !fp8) {
                        if (!want(base)) r.step(0, g_stream);  // the workspace the combine reads
                        bench_sched_combine(suf, in, r);
                    }
                }
            }
        }
    }
}

// ---- JSON ------------------------------------------------------------------------

std::string esc(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        o += c;
    }
    return o;
}

void write_json(const std::string &path, const std::string &device) {
    FILE *f = std::fopen(path.c_str(), "w");
    if (f == nullptr) die("cannot write " + path);
    const int l2 = attribute(38 /* L2_CACHE_SIZE */, "cuDeviceGetAttribute(L2)");
    auto pick = [](Attn tma, int fp8) {
        const kl_mla_decode_kind k =
            kl_mla_decode_pick(g_cuda.cc_major, g_var[0].loaded[static_cast<int>(tma)] ? 1 : 0, 64, fp8);
        return k == KL_MLA_DECODE_MMA ? (fp8 ? "fp8_mma" : "bf16_mma") : (fp8 ? "fp8_tma" : "bf16_tma");
    };
    std::fprintf(f, "{\n  \"program\": \"mla_decode_bench\",\n  \"device\": \"%s\",\n  \"cc\": \"%d.%d\",\n",
                 esc(device).c_str(), g_cuda.cc_major, g_cuda.cc_minor);
    std::fprintf(f, "  \"sm_count\": %u,\n  \"l2_bytes\": %d,\n  \"runs\": %d,\n  \"quick\": %s,\n", g_sms, l2, g_runs,
                 g_opt.quick ? "true" : "false");
    std::fprintf(f, "  \"pick\": {\"bf16\": \"%s\", \"fp8\": \"%s\"},\n  \"copy_gbps\": %.3f,\n  \"launchers\": {",
                 pick(Attn::kBf16Tma, 0), pick(Attn::kFp8Tma, 1), g_copy_gbps);
    bool first = true;
    for (const Variant &v : g_var)
        for (Attn a : kAttns) {
            std::fprintf(f, "%s\"%s_%u\": %s", first ? "" : ", ", attn_name(a), v.D,
                         v.loaded[static_cast<int>(a)] ? "true" : "false");
            first = false;
        }
    std::fprintf(f, "},\n  \"notes\": [");
    for (size_t i = 0; i < g_notes.size(); i++)
        std::fprintf(f, "%s\n    \"%s\"", i ? "," : "", esc(g_notes[i]).c_str());
    std::fprintf(f, "%s],\n  \"results\": {\n", g_notes.empty() ? "" : "\n  ");
    for (size_t i = 0; i < g_rows.size(); i++) {
        const Row &r = g_rows[i];
        const double gbps = r.bytes > 0 ? r.bytes / r.us * 1e-3 : 0;
        std::fprintf(f,
                     "    \"%s\": {\"us\": %.4f, \"shape\": \"%s\", \"launcher\": \"%s\", \"head_dim\": %u, "
                     "\"bytes\": %.0f, \"kv_bytes\": %.0f, \"flops\": %.17g, \"tokens\": %.0f, \"gbps\": %.3f, "
                     "\"copy_ratio\": %.4f, \"tflops\": %.4f, \"tokens_per_s\": %.6e, \"what\": \"%s\"}%s\n",
                     r.name.c_str(), r.us, r.shape.c_str(), r.launcher.c_str(), r.D, r.bytes, r.kv_bytes, r.flops,
                     r.tokens, gbps, g_copy_gbps > 0 ? gbps / g_copy_gbps : 0.0,
                     r.flops > 0 ? r.flops / r.us * 1e-6 : 0.0, r.tokens > 0 ? r.tokens / (r.us * 1e-6) : 0.0,
                     esc(r.what).c_str(), i + 1 < g_rows.size() ? "," : "");
    }
    std::fprintf(f, "  }\n}\n");
    std::fclose(f);
}

}  // namespace

int main(int argc, char **argv) {
    g_opt = parse_args(argc, argv);
    g_runs = g_opt.runs ? g_opt.runs : (g_opt.quick ? 5 : 30);
    init_decode_driver();
    char name[256] = {0};
    g_x.device_name(name, sizeof name - 1, g_cuda.device);
    std::printf("mla_decode_bench on %s (sm_%d%d, %u SMs; median of %d runs%s)\n", name, g_cuda.cc_major,
                g_cuda.cc_minor, g_sms, g_runs, g_opt.quick ? "; --quick" : "");
    ok(kl_module_load(&g_cuda.base, kl_fatbin_mla_decode_deepseek_v4_flash,
                      kl_fatbin_mla_decode_deepseek_v4_flash_size, &g_var[0].mod),
       "loading the deepseek_v4_flash fatbin");
    ok(kl_module_load(&g_cuda.base, kl_fatbin_mla_decode_mistral_small_4, kl_fatbin_mla_decode_mistral_small_4_size,
                      &g_var[1].mod),
       "loading the mistral_small_4 fatbin");
    for (Variant &v : g_var) probe(v);
    guard();
    bench_copy();
    make_shapes();
    bench_shapes();
    if (!g_opt.json.empty()) write_json(g_opt.json, name);
    for (Variant &v : g_var) kl_module_unload(&v.mod);
    g_x.stream_destroy(g_stream);
    return 0;
}
