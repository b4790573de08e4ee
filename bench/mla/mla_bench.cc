// mla_bench: the MLA prefill family's kernels on a GPU, against the GPU's own
// copy bandwidth.
//
//   mla_bench [--json FILE] [--runs N] [--quick] [--only NAME,NAME...] [--ab CUBIN]
//             [--ab-ctas N] [--gemm-ctas N,N...]
//
// Every time is CUDA events (cuEventRecord on the legacy stream) around one
// launch, runs queued back to back, the median of N (default 30; 5 for the
// slow seed kernels) after warm-up runs. Inputs are random bf16 in [-1, 1).
// Runs rotate over several input sets whose bytes together exceed 600 MB, so
// no run finds its inputs in the 50-60 MB L2 (the data-movement cases move
// far more than L2 per run anyway).
//
// Measured:
//   copy            cuMemcpyDtoD of 1 GiB; bytes = read + write
//   attn_mma_576    kl_mla_absorbed_attention_mma, deepseek_v4_flash (D 576,
//                   kv_lora 512), causal, 128 heads, seq 4096, batch 1
//   attn_mma_320    the same in mistral_small_4 (D 320, kv_lora 256)
//   attn_seed_576   the seed kernel kl_mla_prefill_attention_320 (D 576, one
//                   KV head, V = the cache row) at 16 heads, seq 1024, causal,
//                   and attn_mma_576_small, the tensor-core kernel at that shape
//   attn_wgmma_576, attn_wgmma_320
//                   kl_mla_absorbed_attention_wgmma (sm_90a, wgmma) at the
//                   same shapes (rows left out, with a note, where the GPU
//                   is not sm_90: kl_X_get refuses)
//   gemm_mma        kl_grouped_gemm_mma at m 4096, g 128, k_g 128, n_g 512
//                   (q_nope @ w_uk), gemm_mma_t at k_g 512, n_g 128
//                   (o_lat @ w_uv^T); gemm_seed: kl_grouped_gemm_mla at the
//                   first shape; gemm_wgmma, gemm_wgmma_t: kl_grouped_gemm_wgmma
//                   at both shapes. GEMM rows also carry bytes (A + B read
//                   once, C written once) for the copy-bandwidth ratio
//   attn_tma_576, attn_tma_320, gemm_tma, gemm_tma_t
//                   the copy-engine launchers of issue 20
//                   (kl_mla_absorbed_attention_tma, kl_grouped_gemm_tma;
//                   sm_90a) at the wgmma rows' shapes, one persistent block an
//                   SM, tensor maps encoded once per input set outside the
//                   timing; each checked against the mma.sync kernel first
//   gemm_tma_gmn, gemm_tma_t_gmn
//                   the same with A and C in torch.bmm's layout ([g, m, k],
//                   [g, m, n]: only the maps' strides differ), C checked bit
//                   for bit against the contract layout's
//   fill            cuMemsetD32 of 1 GiB (--only fill): the write-only rate
//   dm_*            the five data-movement launchers at sizes far past L2:
//                   bytes = what the contract reads + writes, each once;
//                   dm_*_wide: the wide twins (one block per 2048 elements)
//                   of rope extract/writeback and q_final, and of cache
//                   assembly (one block per 8 tokens), at the same sizes
// Attention FLOPs count causal work as half of dense: heads * S (S+1) / 2 *
// 2 (D + kv_lora) (the seed's V is D wide: 2 (D + D)). GEMM FLOPs: 2 m g k n.
//
// Correctness guards (exit 1 when broken): the tensor-core attention's
// output equals the seed's first kv_lora columns (relative norm < 1e-2) at
// the small shape, the wgmma attention's equals the mma one's there, and
// the tiled grouped GEMMs' C equals the seed's.
// Prints a table; --json writes the numbers. Exit 1 on any failure.
// --only runs the measures whose names contain one of the given words (copy
// always runs: the ratios need it), to fit a short GPU lease.
// --ab CUBIN: grouped_gemm_tma of another build (bench/mla/ab.sh: the same
// kernel with bench-only defines) beside this build's in the gemm_tma rows,
// checked against the mma kernel and its whole C against this build's (bit
// for bit), then timed in alternating rounds: rows
// gemm_tma*_ab_a, _ab_b and the median B / A (> 1: this build is faster).
// With a trace build as CUBIN (ab.sh OUT GROUPED_GEMM_TMA_TRACE) also the
// blocks' ends: rows gemm_tma*_trace_end_p50, _max.
// --ab-ctas N: B at N blocks (A keeps kl_grouped_gemm_tma_ctas's grid).
// --gemm-ctas N,N...: the gemm_tma rows also at these grids (rows
// gemm_tma*_<N>), beside the rule's (kl_grouped_gemm_tma_ctas) and the SM count.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/mla_prefill_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/mla_prefill_fatbins.h"

#define KL_BENCH_PROGRAM "mla_bench"
#include "bench/common/bench_driver.h"
#include "bench/common/inputs.h"

namespace {

// ---- the driver --------------------------------------------------------------------

// What only this program calls beyond bench_driver.h's g_drv.
typedef int (*DeviceGetNameFn)(char *name, int len, int device);

DeviceGetNameFn g_device_name;

void init_mla_driver() {
    init_driver();
    g_device_name = symbol<DeviceGetNameFn>("cuDeviceGetName");
}

// Fills dst with random bf16 in [-1, 1): a 32 MiB pattern copied at a
// seed-dependent offset, so buffers of one rotation differ.
void fill_random(const Buf &dst, uint32_t seed) {
    static Buf pattern;
    const size_t chunk = 32u << 20;
    if (pattern.p == nullptr) {
        const std::vector<unsigned char> host = kl_inputs::bf16_pattern(chunk, 5);
        pattern = Buf(chunk);
        ok(kl_cuda_memcpy_htod(&g_cuda, pattern.p, host.data(), chunk), "upload of the pattern");
    }
    size_t off = (size_t{seed} * 8191u * 2u) % (chunk / 2), done = 0;
    while (done < dst.bytes) {
        const size_t n = std::min(dst.bytes - done, chunk - off);
        cu(g_drv.memcpy_dtod(dst.addr() + done, pattern.addr() + off, n), "cuMemcpyDtoD (fill)");
        done += n;
        off = 0;
    }
}

// How many sets of `bytes` each make a rotation past L2: >= 2, >= 600 MB.
size_t rotation(size_t bytes) { return kl_inputs::rotation(bytes, 2); }

// ---- timing ------------------------------------------------------------------------

int g_runs = 30;

// --ab CUBIN: grouped_gemm_tma of another build (bench/mla/ab.sh), timed
// beside this build's in the gemm_tma rows (B; null: no A/B).
const kl_module *g_ab_module = nullptr;
std::string g_ab_path;

// --gemm-ctas: more grids for the gemm_tma rows.
std::vector<uint32_t> g_gemm_ctas;
uint32_t g_ab_ctas = 0;  // --ab-ctas: B's grid (default: A's, kl_grouped_gemm_tma_ctas)

// ---- results -----------------------------------------------------------------------

struct Result {
    std::string name, what;
    double us;
    double flops;  // 0: a bandwidth measure
    double bytes;  // 0: a compute measure
};
std::vector<Result> g_results;

void report(const std::string &name, const std::string &what, double us, double flops, double bytes) {
    g_results.push_back({name, what, us, flops, bytes});
    if (flops > 0 && bytes > 0)
        std::printf("  %-20s %10.1f us  %8.1f TFLOP/s  %7.1f GB/s  %s\n", name.c_str(), us, flops / us * 1e-6,
                    bytes / us * 1e-3, what.c_str());
    else if (flops > 0)
        std::printf("  %-20s %10.1f us  %8.1f TFLOP/s   %s\n", name.c_str(), us, flops / us * 1e-6, what.c_str());
    else
        std::printf("  %-20s %10.1f us  %8.1f GB/s      %s\n", name.c_str(), us, bytes / us * 1e-3, what.c_str());
    std::fflush(stdout);
}

// ||a - b|| / ||b|| over bf16 vectors (a's first `cols` of every `a_row`-wide row against b's `cols`-wide rows).
double rel_diff(const Buf &a, size_t a_row, const Buf &b, size_t cols, size_t rows) {
    std::vector<uint16_t> ha(rows * a_row), hb(rows * cols);
    ok(kl_cuda_memcpy_dtoh(&g_cuda, ha.data(), a.p, ha.size() * 2), "download");
    ok(kl_cuda_memcpy_dtoh(&g_cuda, hb.data(), b.p, hb.size() * 2), "download");
    auto f = [](uint16_t h) {
        const uint32_t u = uint32_t{h} << 16;
        float x;
        std::memcpy(&x, &u, 4);
        return static_cast<double>(x);
    };
    double d2 = 0, r2 = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const double x = f(ha[r * a_row + c]), y = f(hb[r * cols + c]);
            if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
            d2 += (x - y) * (x - y);
            r2 += y * y;
        }
    return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

// ---- the measures ------------------------------------------------------------------

constexpr double kScale = 0.07216878364870322;  // 1/sqrt(192)

struct Modules {
    kl_module v576, v320;
} g_mod;

void bench_copy() {
    const size_t bytes = size_t{1} << 30;
    Buf a(bytes), b(bytes);
    fill_random(a, 1);
    const double us = median_us([&](int) { cu(g_drv.memcpy_dtod(b.addr(), a.addr(), bytes), "cuMemcpyDtoD"); },
                                g_runs, 3);
    report("copy", "cuMemcpyDtoD 1 GiB", us, 0, 2.0 * bytes);
}

// The write-only rate (C's writes are 78% of the k 128 GEMM's bytes): cuMemsetD32 of 1 GiB.
void bench_fill() {
    typedef int (*MemsetD32Fn)(unsigned long long, unsigned int, size_t);
    const auto memset_d32 = symbol<MemsetD32Fn>("cuMemsetD32_v2");
    const size_t bytes = size_t{1} << 30;
    Buf a(bytes);
    const double us = median_us([&](int run) { cu(memset_d32(a.addr(), 0x3f803f80u + run, bytes / 4), "cuMemsetD32"); },
                                g_runs, 3);
    report("fill", "cuMemsetD32 1 GiB; bytes = write", us, 0, double(bytes));
}

// How many bf16 elements of two device buffers of `bytes` differ, bit for bit.
size_t differing_bf16(const Buf &x, const Buf &y, size_t bytes) {
    std::vector<uint16_t> hx(bytes / 2), hy(bytes / 2);
    ok(kl_cuda_memcpy_dtoh(&g_cuda, hx.data(), x.p, bytes), "reading a C");
    ok(kl_cuda_memcpy_dtoh(&g_cuda, hy.data(), y.p, bytes), "reading a C");
    size_t differ = 0;
    for (size_t i = 0; i < hx.size(); i++) differ += hx[i] != hy[i];
    return differ;
}

double attn_flops(double heads, double s, double d_qk, double d_v) { return heads * s * (s + 1) / 2 * 2 * (d_qk + d_v); }

typedef kl_status (*GetFn)(kl_kernel *, const kl_module *);
typedef kl_status (*AttnFn)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                            uint32_t, uint32_t, uint32_t, float, bool, kl_stream);
typedef kl_status (*GemmFn)(const kl_kernel *, const kl_bf16 *, const kl_bf16 *, kl_bf16 *, uint32_t, uint32_t,
                            uint32_t, uint32_t, uint32_t, uint32_t, kl_stream);

// kl_X_get of an sm_90a launcher: false (with a note) where this GPU refuses it.
bool get_or_note(GetFn get, kl_kernel *k, const kl_module *mod, const char *what) {
    const kl_status st = get(k, mod);
    if (st == KL_ERROR_UNSUPPORTED) {
        std::printf("  (%s left out: %s)\n", what, kl_last_error_message());
        return false;
    }
    ok(st, what);
    return true;
}

void bench_attention(const kl_module *mod, uint32_t d, uint32_t heads, uint32_t seq, const std::string &name,
                     GetFn get = kl_mla_absorbed_attention_mma_get, AttnFn attn = kl_mla_absorbed_attention_mma) {
    kl_kernel k;
    if (!get_or_note(get, &k, mod, name.c_str())) return;
    const uint32_t dv = d - 64;
    const size_t q_bytes = size_t{seq} * heads * d * 2, kv_bytes = size_t{seq} * d * 2;
    const size_t nsets = rotation(q_bytes + kv_bytes);
    std::vector<Buf> q, kv;
    for (size_t i = 0; i < nsets; i++) {
        q.emplace_back(q_bytes);
        kv.emplace_back(kv_bytes);
        fill_random(q.back(), static_cast<uint32_t>(2 * i));
        fill_random(kv.back(), static_cast<uint32_t>(2 * i + 1));
    }
    Buf out(size_t{seq} * heads * dv * 2);
    const double us = median_us(
        [&](int run) {
            const size_t s = static_cast<size_t>(run) % nsets;
            ok(attn(&k, q[s].bf(), kv[s].bf(), out.bf(), seq, 1, heads, d, dv, static_cast<float>(kScale), true,
                    nullptr),
               name.c_str());
        },
        g_runs, 3);
    std::ostringstream what;
    what << "D " << d << ", kv_lora " << dv << ", " << heads << " heads, seq " << seq << ", causal, " << nsets
         << " input sets";
    report(name, what.str(), us, attn_flops(heads, seq, d, dv), 0);
}

// The seed attention and the tensor-core kernel at one small shape; their
// outputs must agree on the first kv_lora columns.
void bench_seed_attention(uint32_t heads, uint32_t seq) {
    const uint32_t d = 576, dv = 512;
    kl_kernel seed, mma;
    ok(kl_mla_prefill_attention_320_get(&seed, &g_mod.v576), "kl_mla_prefill_attention_320_get");
    ok(kl_mla_absorbed_attention_mma_get(&mma, &g_mod.v576), "kl_mla_absorbed_attention_mma_get");
    const size_t q_bytes = size_t{seq} * heads * d * 2, kv_bytes = size_t{seq} * d * 2;
    const size_t nsets = rotation(q_bytes + kv_bytes);
    std::vector<Buf> q, kv;
    for (size_t i = 0; i < nsets; i++) {
        q.emplace_back(q_bytes);
        kv.emplace_back(kv_bytes);
        fill_random(q.back(), static_cast<uint32_t>(40 + 2 * i));
        fill_random(kv.back(), static_cast<uint32_t>(41 + 2 * i));
    }
    Buf out_seed(size_t{seq} * heads * d * 2), out_mma(size_t{seq} * heads * dv * 2);
    auto run_seed = [&](int run) {
        const size_t s = static_cast<size_t>(run) % nsets;
        ok(kl_mla_prefill_attention_320(&seed, q[s].bf(), kv[s].bf(), kv[s].bf(), out_seed.bf(), seq, 1, heads, 1, d,
                                        static_cast<float>(kScale), true, nullptr),
           "kl_mla_prefill_attention_320");
    };
    auto run_mma = [&](int run) {
        const size_t s = static_cast<size_t>(run) % nsets;
        ok(kl_mla_absorbed_attention_mma(&mma, q[s].bf(), kv[s].bf(), out_mma.bf(), seq, 1, heads, d, dv,
                                         static_cast<float>(kScale), true, nullptr),
           "kl_mla_absorbed_attention_mma");
    };
    run_seed(0);
    run_mma(0);
    ok(kl_cuda_synchronize(&g_cuda), "attention");
    const double diff = rel_diff(out_seed, d, out_mma, dv, size_t{seq} * heads);
    std::printf("  check: tensor-core attention vs seed, ||diff|| / ||seed|| = %.2e\n", diff);
    if (!(diff < 1e-2)) die("the tensor-core attention disagrees with the seed kernel");
    kl_kernel wg;
    if (get_or_note(kl_mla_absorbed_attention_wgmma_get, &wg, &g_mod.v576, "the wgmma check")) {
        Buf out_wg(size_t{seq} * heads * dv * 2);
        ok(kl_mla_absorbed_attention_wgmma(&wg, q[0].bf(), kv[0].bf(), out_wg.bf(), seq, 1, heads, d, dv,
                                           static_cast<float>(kScale), true, nullptr),
           "kl_mla_absorbed_attention_wgmma");
        ok(kl_cuda_synchronize(&g_cuda), "wgmma attention");
        const double dw = rel_diff(out_wg, dv, out_mma, dv, size_t{seq} * heads);
        std::printf("  check: wgmma attention vs mma attention, ||diff|| / ||mma|| = %.2e\n", dw);
        if (!(dw < 1e-2)) die("the wgmma attention disagrees with the mma.sync one");
    }
    std::ostringstream what;
    what << "D 576 (V = the cache row, D wide), " << heads << " heads, seq " << seq << ", causal";
    report("attn_seed_576", what.str(), median_us(run_seed, 5, 1), attn_flops(heads, seq, d, d), 0);
    std::ostringstream what2;
    what2 << "D 576, kv_lora 512, " << heads << " heads, seq " << seq << ", causal (the seed's shape)";
    report("attn_mma_576_small", what2.str(), median_us(run_mma, g_runs, 3), attn_flops(heads, seq, d, dv), 0);
}

void bench_gemm(uint32_t m, uint32_t g, uint32_t kg, uint32_t ng, const std::string &name, bool with_seed,
                GetFn get = kl_grouped_gemm_mma_get, GemmFn gemm = kl_grouped_gemm_mma) {
    kl_kernel k;
    if (!get_or_note(get, &k, &g_mod.v576, name.c_str())) return;
    const size_t a_bytes = size_t{m} * g * kg * 2, b_bytes = size_t{g} * ng * kg * 2, c_bytes = size_t{m} * g * ng * 2;
    const size_t nsets = rotation(a_bytes + b_bytes);
    std::vector<Buf> a, b;
    for (size_t i = 0; i < nsets; i++) {
        a.emplace_back(a_bytes);
        b.emplace_back(b_bytes);
        fill_random(a.back(), static_cast<uint32_t>(60 + 2 * i));
        fill_random(b.back(), static_cast<uint32_t>(61 + 2 * i));
    }
    Buf c(c_bytes);
    auto run_mma = [&](int run) {
        const size_t s = static_cast<size_t>(run) % nsets;
        ok(gemm(&k, a[s].bf(), b[s].bf(), c.bf(), m, g, kg, ng, g * kg, g * ng, nullptr), name.c_str());
    };
    const double flops = 2.0 * m * g * kg * ng;
    std::ostringstream what;
    what << "m " << m << ", g " << g << ", k_g " << kg << ", n_g " << ng << ", " << nsets << " input sets";
    report(name, what.str(), median_us(run_mma, g_runs, 3), flops, double(a_bytes + b_bytes + c_bytes));
    if (!with_seed) return;
    kl_kernel seed;
    ok(kl_grouped_gemm_mla_get(&seed, &g_mod.v576), "kl_grouped_gemm_mla_get");
    Buf c_seed(c_bytes);
    auto run_seed = [&](int run) {
        const size_t s = static_cast<size_t>(run) % nsets;
        ok(kl_grouped_gemm_mla(&seed, a[s].bf(), b[s].bf(), c_seed.bf(), m, g, kg, ng, g * kg, g * ng, nullptr),
           "kl_grouped_gemm_mla");
    };
    run_seed(0);
    run_mma(0);
    ok(kl_cuda_synchronize(&g_cuda), "grouped GEMM");
    const double diff = rel_diff(c, size_t{g} * ng, c_seed, size_t{g} * ng, std::min<size_t>(m, 256));
    std::printf("  check: %s vs seed (first %u rows), ||diff|| / ||seed|| = %.2e\n", name.c_str(), std::min(m, 256u),
                diff);
    if (!(diff < 1e-2)) die("the tiled grouped GEMM disagrees with the seed kernel");
    if (get == kl_grouped_gemm_mma_get) report("gemm_seed", what.str(), median_us(run_seed, 5, 1), flops, 0);
}

// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: the copy-engine launchers' persistent grid.
uint32_t sm_count() {
    int v = 0;
    cu(g_cuda.api.device_get_attribute(&v, 16, g_cuda.device), "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
    return static_cast<uint32_t>(v);
}

// kl_mla_absorbed_attention_tma (issue 20) at bench_attention's shape, one
// block an SM; the maps of every input set are encoded once, outside the
// timing. Its output must equal the mma.sync kernel's (relative norm < 1e-2)
// on the first set before it is timed.
void bench_attention_tma(const kl_module *mod, uint32_t d, uint32_t heads, uint32_t seq, const std::string &name) {
    kl_kernel k, ref;
    if (!get_or_note(kl_mla_absorbed_attention_tma_get, &k, mod, name.c_str())) return;
    ok(kl_mla_absorbed_attention_mma_get(&ref, mod), "kl_mla_absorbed_attention_mma_get");
    const uint32_t dv = d - 64, ctas = sm_count();
    const size_t q_bytes = size_t{seq} * heads * d * 2, kv_bytes = size_t{seq} * d * 2;
    const size_t nsets = rotation(q_bytes + kv_bytes);
    std::vector<Buf> q, kv;
    std::vector<kl_tensor_map> qm(nsets), km(nsets);
    for (size_t i = 0; i < nsets; i++) {
        q.emplace_back(q_bytes);
        kv.emplace_back(kv_bytes);
        fill_random(q.back(), static_cast<uint32_t>(2 * i));
        fill_random(kv.back(), static_cast<uint32_t>(2 * i + 1));
        ok(kl_mla_absorbed_attention_tma_q_map_encode(&k, &qm[i], q[i].bf(), d, heads, seq, 1, d, size_t{heads} * d,
                                                      size_t{seq} * heads * d),
           "q_map");
        ok(kl_mla_absorbed_attention_tma_kv_map_encode(&k, &km[i], kv[i].bf(), d, seq, 1, d, size_t{seq} * d), "kv_map");
    }
    Buf out(size_t{seq} * heads * dv * 2), out_ref(size_t{seq} * heads * dv * 2);
    ok(kl_mla_absorbed_attention_tma(&k, &qm[0], &km[0], out.bf(), seq, 1, heads, d, dv, static_cast<float>(kScale),
                                     true, ctas, nullptr),
       name.c_str());
    ok(kl_mla_absorbed_attention_mma(&ref, q[0].bf(), kv[0].bf(), out_ref.bf(), seq, 1, heads, d, dv,
                                     static_cast<float>(kScale), true, nullptr),
       "kl_mla_absorbed_attention_mma");
    ok(kl_cuda_synchronize(&g_cuda), name.c_str());
    const double diff = rel_diff(out, dv, out_ref, dv, size_t{seq} * heads);
    std::printf("  check: %s vs mma attention, ||diff|| / ||mma|| = %.2e\n", name.c_str(), diff);
    if (!(diff < 1e-2)) die("the copy-engine attention disagrees with the mma.sync one");
    const double us = median_us(
        [&](int run) {
            const size_t s = static_cast<size_t>(run) % nsets;
            ok(kl_mla_absorbed_attention_tma(&k, &qm[s], &km[s], out.bf(), seq, 1, heads, d, dv,
                                             static_cast<float>(kScale), true, ctas, nullptr),
               name.c_str());
        },
        g_runs, 3);
    std::ostringstream what;
    what << "D " << d << ", kv_lora " << dv << ", " << heads << " heads, seq " << seq << ", causal, " << ctas
         << " persistent blocks, " << nsets << " input sets";
    report(name, what.str(), us, attn_flops(heads, seq, d, dv), 0);
}

// kl_grouped_gemm_tma (issue 20) at bench_gemm's shapes, one block an SM,
// the maps encoded once per input set outside the timing; C must equal the
// mma.sync kernel's on the first set (first 256 rows, relative norm < 1e-2).
void bench_gemm_tma(uint32_t m, uint32_t g, uint32_t kg, uint32_t ng, const std::string &name) {
    kl_kernel k, ref;
    if (!get_or_note(kl_grouped_gemm_tma_get, &k, &g_mod.v576, name.c_str())) return;
    ok(kl_grouped_gemm_mma_get(&ref, &g_mod.v576), "kl_grouped_gemm_mma_get");
    const uint32_t ctas = kl_grouped_gemm_tma_ctas(m, g, kg, ng, sm_count());
    const size_t a_bytes = size_t{m} * g * kg * 2, b_bytes = size_t{g} * ng * kg * 2, c_bytes = size_t{m} * g * ng * 2;
    const size_t nsets = rotation(a_bytes + b_bytes);
    std::vector<Buf> a, b;
    std::vector<kl_tensor_map> am(nsets), bm(nsets);
    for (size_t i = 0; i < nsets; i++) {
        a.emplace_back(a_bytes);
        b.emplace_back(b_bytes);
        fill_random(a.back(), static_cast<uint32_t>(60 + 2 * i));
        fill_random(b.back(), static_cast<uint32_t>(61 + 2 * i));
        ok(kl_grouped_gemm_tma_a_map_encode(&k, &am[i], a[i].bf(), kg, g, m, kg, size_t{g} * kg), "a_map");
        ok(kl_grouped_gemm_tma_b_map_encode(&k, &bm[i], b[i].bf(), kg, ng, g, kg, size_t{ng} * kg), "b_map");
    }
    Buf c(c_bytes), c_ref(c_bytes);
    Buf cnt(8);  // the pacing counters: zeroed once, zero again after every launch
    ok(kl_cuda_memset_d8(&g_cuda, cnt.p, 0, cnt.bytes), "zeroing the pacing counters");
    kl_tensor_map cm;
    ok(kl_grouped_gemm_tma_c_map_encode(&k, &cm, c.bf(), ng, g, m, ng, size_t{g} * ng), "c_map");
    ok(kl_grouped_gemm_tma(&k, &am[0], &bm[0], &cm, m, g, kg, ng, cnt.as<uint32_t>(), ctas, 2, nullptr), name.c_str());
    ok(kl_grouped_gemm_mma(&ref, a[0].bf(), b[0].bf(), c_ref.bf(), m, g, kg, ng, g * kg, g * ng, nullptr),
       "kl_grouped_gemm_mma");
    ok(kl_cuda_synchronize(&g_cuda), name.c_str());
    const double diff = rel_diff(c, size_t{g} * ng, c_ref, size_t{g} * ng, std::min<size_t>(m, 256));
    std::printf("  check: %s vs mma GEMM (first %u rows), ||diff|| / ||mma|| = %.2e\n", name.c_str(),
                std::min(m, 256u), diff);
    if (!(diff < 1e-2)) die("the copy-engine grouped GEMM disagrees with the mma.sync one");
    // At kl_grouped_gemm_tma_ctas's grid (the row `name`) and, beside it, one
    // block an SM (`name`_sms: what the balanced count is measured against).
    auto run_at = [&](uint32_t blocks, const std::string &row, const char *why) {
        const double us = median_us(
            [&](int run) {
                const size_t s = static_cast<size_t>(run) % nsets;
                ok(kl_grouped_gemm_tma(&k, &am[s], &bm[s], &cm, m, g, kg, ng, cnt.as<uint32_t>(), blocks, 2, nullptr), row.c_str());
            },
            g_runs, 3);
        std::ostringstream what;
        what << "m " << m << ", g " << g << ", k_g " << kg << ", n_g " << ng << ", " << blocks << " persistent blocks ("
             << why << "), " << nsets << " input sets";
        report(row, what.str(), us, 2.0 * m * g * kg * ng, double(a_bytes + b_bytes + c_bytes));
    };
    run_at(ctas, name, "kl_grouped_gemm_tma_ctas");
    run_at(sm_count(), name + "_sms", "the SM count");
    for (uint32_t n : g_gemm_ctas) run_at(n, name + "_" + std::to_string(n), "--gemm-ctas");
    {   // `name`_gmn: the same kernel with A and C in torch.bmm's layout
        // ([g, m, k] and [g, m, n], each group's rows contiguous: only the
        // maps' strides differ), checked bit for bit against C above; what
        // the contract's layout ([m, g, .], a row 256 B or 1 KiB of each
        // group) costs against the bmm row.
        typedef int (*Memcpy2DFn)(const void *);
        struct Copy2D {  // CUDA_MEMCPY2D, device to device
            size_t sx, sy; int smt; const void *sh; unsigned long long sd; void *sa; size_t sp;
            size_t dx, dy; int dmt; void *dh; unsigned long long dd; void *da; size_t dp; size_t w, h;
        };
        static_assert(sizeof(Copy2D) == 128, "CUDA_MEMCPY2D's layout");
        const auto memcpy2d = symbol<Memcpy2DFn>("cuMemcpy2D_v2");
        auto regroup = [&](const Buf &src, Buf &dst, size_t row_elems, bool to_gmn) {
            for (uint32_t gi = 0; gi < g; gi++) {  // [m, g, r] <-> [g, m, r]
                Copy2D c2{};
                c2.smt = c2.dmt = 2; /* CU_MEMORYTYPE_DEVICE */
                const size_t mg = size_t{gi} * row_elems * 2, gm = size_t{gi} * m * row_elems * 2;
                c2.sd = src.addr() + (to_gmn ? mg : gm), c2.sp = (to_gmn ? size_t{g} : 1) * row_elems * 2;
                c2.dd = dst.addr() + (to_gmn ? gm : mg), c2.dp = (to_gmn ? 1 : size_t{g}) * row_elems * 2;
                c2.w = row_elems * 2, c2.h = m;
                cu(memcpy2d(&c2), "cuMemcpy2D (regroup)");
            }
        };
        std::vector<Buf> ag;
        std::vector<kl_tensor_map> agm(nsets);
        for (size_t i = 0; i < nsets; i++) {
            ag.emplace_back(a_bytes);
            regroup(a[i], ag.back(), kg, true);
            ok(kl_grouped_gemm_tma_a_map_encode(&k, &agm[i], ag[i].bf(), kg, g, m, size_t{m} * kg, kg), "a_map (gmn)");
        }
        Buf cg(c_bytes), cback(c_bytes);
        kl_tensor_map cgm;
        ok(kl_grouped_gemm_tma_c_map_encode(&k, &cgm, cg.bf(), ng, g, m, size_t{m} * ng, ng), "c_map (gmn)");
        ok(kl_grouped_gemm_tma(&k, &agm[0], &bm[0], &cgm, m, g, kg, ng, cnt.as<uint32_t>(), ctas, 2, nullptr), (name + "_gmn").c_str());
        ok(kl_grouped_gemm_tma(&k, &am[0], &bm[0], &cm, m, g, kg, ng, cnt.as<uint32_t>(), ctas, 2, nullptr), name.c_str());
        ok(kl_cuda_synchronize(&g_cuda), (name + "_gmn").c_str());
        regroup(cg, cback, ng, false);
        const size_t differ = differing_bf16(c, cback, c_bytes);
        std::printf("  check: %s_gmn's C, regrouped, against the contract layout's: %zu of %zu elements differ\n",
                    name.c_str(), differ, c_bytes / 2);
        if (differ != 0) die("the [g, m, .] layout's C differs");
        const double us = median_us(
            [&](int run) {
                const size_t s = static_cast<size_t>(run) % nsets;
                ok(kl_grouped_gemm_tma(&k, &agm[s], &bm[s], &cgm, m, g, kg, ng, cnt.as<uint32_t>(), ctas, 2, nullptr), (name + "_gmn").c_str());
            },
            g_runs, 3);
        std::ostringstream what;
        what << "as " << name << " with A [g, m, k] and C [g, m, n] (torch.bmm's layout), " << ctas << " blocks";
        report(name + "_gmn", what.str(), us, 2.0 * m * g * kg * ng, double(a_bytes + b_bytes + c_bytes));
    }
    if (g_ab_module == nullptr) return;

    // --ab: B's kernel, checked against the same mma reference, then
    // kAbRounds rounds each timing A then B at the rule's grid; the median
    // over the rounds of B's time over A's (> 1: A, this build, is faster).
    constexpr int kAbRounds = 5;
    const uint32_t bctas = g_ab_ctas != 0 ? g_ab_ctas : ctas;
    kl_kernel kb;
    ok(kl_grouped_gemm_tma_get(&kb, g_ab_module), "--ab: B's grouped_gemm_tma");
    Buf cb(c_bytes);
    ok(kl_grouped_gemm_tma_c_map_encode(&kb, &cm, cb.bf(), ng, g, m, ng, size_t{g} * ng), "c_map (B)");
    ok(kl_grouped_gemm_tma(&kb, &am[0], &bm[0], &cm, m, g, kg, ng, cnt.as<uint32_t>(), bctas, 2, nullptr), "--ab: B");
    ok(kl_cuda_synchronize(&g_cuda), "--ab: B");
    const double bdiff = rel_diff(cb, size_t{g} * ng, c_ref, size_t{g} * ng, std::min<size_t>(m, 256));
    std::printf("  check: %s B (%s) vs mma GEMM, ||diff|| / ||mma|| = %.2e\n", name.c_str(), g_ab_path.c_str(), bdiff);
    if (!(bdiff < 1e-2)) die("--ab: B's grouped GEMM disagrees with the mma.sync one");
    ok(kl_grouped_gemm_tma_c_map_encode(&k, &cm, c.bf(), ng, g, m, ng, size_t{g} * ng), "c_map");
    {   // The whole of C, A's against B's, bit for bit (the same products in
        // the same order: a build that moves tiles between blocks must still
        // compute each one once, as A does). B's C from the check above.
        ok(kl_grouped_gemm_tma(&k, &am[0], &bm[0], &cm, m, g, kg, ng, cnt.as<uint32_t>(), ctas, 2, nullptr), "--ab: A, whole C");
        ok(kl_cuda_synchronize(&g_cuda), "--ab: A, whole C");
        const size_t differ = differing_bf16(c, cb, c_bytes);
        std::printf("  check: %s B's whole C against A's: %zu of %zu elements differ\n", name.c_str(), differ, c_bytes / 2);
        if (differ != 0) die("--ab: B's C is not A's");
    }
    auto time_one = [&](const kl_kernel *kk) {
        return median_us(
            [&](int run) {
                const size_t s = static_cast<size_t>(run) % nsets;
                ok(kl_grouped_gemm_tma(kk, &am[s], &bm[s], &cm, m, g, kg, ng, cnt.as<uint32_t>(), kk == &kb ? bctas : ctas, 2, nullptr), "--ab");
            },
            g_runs, 3);
    };
    std::vector<double> a_us, b_us, ratio;
    for (int round = 0; round < kAbRounds; round++) {
        a_us.push_back(time_one(&k));
        b_us.push_back(time_one(&kb));
        ratio.push_back(b_us.back() / a_us.back());
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::ostringstream what;
    what << "A/B: m " << m << ", g " << g << ", k_g " << kg << ", n_g " << ng << ", " << ctas << " blocks, "
         << kAbRounds << " rounds; B = " << g_ab_path << " at " << bctas << " blocks";
    report(name + "_ab_a", what.str(), median(a_us), 2.0 * m * g * kg * ng, double(a_bytes + b_bytes + c_bytes));
    report(name + "_ab_b", what.str(), median(b_us), 2.0 * m * g * kg * ng, double(a_bytes + b_bytes + c_bytes));
    std::printf("  %-20s B/A %.3f (rounds %.3f..%.3f)\n", (name + "_ab").c_str(), median(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
    // In the JSON as a row whose "us" is the ratio (no FLOPs, no bytes).
    g_results.push_back({name + "_ab_b_over_a", "B's median time over A's (rounds' median)", median(ratio), 0, 0});

    // A trace build as B (ab.sh ... GROUPED_GEMM_TMA_TRACE): the blocks' ends
    // (both consumers' last stores complete) after the earliest entry, over
    // kTraceRuns launches: their p10 / p50 / p90 / max, and the SMs and the
    // blocks that end earliest and latest on average.
    typedef int (*GetGlobalFn)(unsigned long long *, size_t *, void *, const char *);
    unsigned long long dptr = 0;
    size_t dbytes = 0;
    if (symbol<GetGlobalFn>("cuModuleGetGlobal_v2")(&dptr, &dbytes, g_ab_module->handle, "grouped_gemm_tma__trace") != 0)
        return;
    constexpr int kTraceRuns = 10;
    void *trace = reinterpret_cast<void *>(static_cast<uintptr_t>(dptr));
    const size_t nwords = dbytes / 8;
    std::vector<uint64_t> zeros(nwords, 0), words(nwords);
    std::vector<double> q10, q50, q90, qmax, first_entry_spread;
    std::vector<double> sm_end(1024, 0.0), block_end(1024, 0.0);
    std::vector<int> sm_n(1024, 0);
    const uint32_t nb = std::min<uint32_t>(bctas, static_cast<uint32_t>(nwords / 4));
    for (int run = 0; run < kTraceRuns; run++) {
        ok(kl_cuda_memcpy_htod(&g_cuda, trace, zeros.data(), dbytes), "--ab: zeroing the trace");
        ok(kl_grouped_gemm_tma(&kb, &am[run % nsets], &bm[run % nsets], &cm, m, g, kg, ng, cnt.as<uint32_t>(), bctas, 2, nullptr), "--ab trace");
        ok(kl_cuda_synchronize(&g_cuda), "--ab trace");
        ok(kl_cuda_memcpy_dtoh(&g_cuda, words.data(), trace, dbytes), "--ab: reading the trace");
        uint64_t t0 = UINT64_MAX, t0max = 0;
        for (uint32_t b = 0; b < nb; b++)
            if (words[4 * b] != 0) t0 = std::min(t0, words[4 * b]), t0max = std::max(t0max, words[4 * b]);
        std::vector<double> ends;
        for (uint32_t b = 0; b < nb; b++) {
            const uint64_t e = std::max(words[4 * b + 1], words[4 * b + 2]), sm = words[4 * b + 3];
            if (words[4 * b] == 0 || e == 0) continue;
            ends.push_back((e - t0) * 1e-3);
            if (sm != 0 && sm <= sm_end.size()) sm_end[sm - 1] += ends.back(), sm_n[sm - 1]++;
            block_end[b] += ends.back() / kTraceRuns;
        }
        if (ends.empty()) die("--ab: the trace build stamped nothing");
        std::sort(ends.begin(), ends.end());
        q10.push_back(ends[ends.size() / 10]);
        q50.push_back(ends[ends.size() / 2]);
        q90.push_back(ends[ends.size() * 9 / 10]);
        qmax.push_back(ends.back());
        first_entry_spread.push_back((t0max - t0) * 1e-3);
    }
    std::printf("  %-20s blocks' ends (us after the first entry; medians of %d launches): p10 %.1f, p50 %.1f, p90 "
                "%.1f, max %.1f; entries within %.1f\n",
                (name + "_trace").c_str(), kTraceRuns, median(q10), median(q50), median(q90), median(qmax),
                median(first_entry_spread));
    std::vector<std::pair<double, int>> by_sm, by_block;
    for (size_t i = 0; i < sm_end.size(); i++)
        if (sm_n[i] > 0) by_sm.push_back({sm_end[i] / sm_n[i], static_cast<int>(i)});
    for (uint32_t b = 0; b < nb; b++) by_block.push_back({block_end[b], static_cast<int>(b)});
    std::printf("  %-20s mean end by SM,", (name + "_trace").c_str());
    print_extremes(by_sm, 6, "sm");
    std::printf("  %-20s mean end by block,", (name + "_trace").c_str());
    print_extremes(by_block, 8, "b");
    g_results.push_back({name + "_trace_end_p50", "blocks' ends, median block", median(q50), 0, 0});
    g_results.push_back({name + "_trace_end_max", "blocks' ends, latest block", median(qmax), 0, 0});
}

// The five data-movement launchers (deepseek_v4_flash shapes: 128 heads,
// nope 128, rope 64, kv_lora 512, v_dim 128).
void bench_data_movement() {
    const kl_module *mod = &g_mod.v576;
    const uint32_t nq = 128, nope = 128, rope = 64, hd = 192, kv_lora = 512, v_dim = 128, cache = 576;
    {
        kl_kernel ke, kw, kew, kww;
        ok(kl_mla_q_rope_extract_batched_get(&ke, mod), "get");
        ok(kl_mla_q_rope_writeback_batched_get(&kw, mod), "get");
        ok(kl_mla_q_rope_extract_wide_get(&kew, mod), "get");
        ok(kl_mla_q_rope_writeback_wide_get(&kww, mod), "get");
        const uint32_t t = 16384, q_dim = nq * hd;
        Buf q(size_t{t} * q_dim * 2), r(size_t{t} * nq * rope * 2);
        fill_random(q, 80);
        fill_random(r, 81);
        const double bytes = 2.0 * t * nq * rope * 2;
        std::ostringstream what;
        what << t << " tokens x " << nq << " heads x rope " << rope << " (q rows " << q_dim << ")";
        report("dm_q_rope_extract", what.str(), median_us([&](int) {
                   ok(kl_mla_q_rope_extract_batched(&ke, q.bf(), r.bf(), t, nq, hd, nope, rope, q_dim, nullptr), "extract");
               }, g_runs, 3), 0, bytes);
        report("dm_q_rope_writeback", what.str(), median_us([&](int) {
                   ok(kl_mla_q_rope_writeback_batched(&kw, r.bf(), q.bf(), t, nq, hd, nope, rope, q_dim, nullptr), "writeback");
               }, g_runs, 3), 0, bytes);
        report("dm_q_rope_extract_wide", what.str(), median_us([&](int) {
                   ok(kl_mla_q_rope_extract_wide(&kew, q.bf(), r.bf(), t, nq, hd, nope, rope, q_dim, nullptr), "extract_wide");
               }, g_runs, 3), 0, bytes);
        report("dm_q_rope_writeback_wide", what.str(), median_us([&](int) {
                   ok(kl_mla_q_rope_writeback_wide(&kww, r.bf(), q.bf(), t, nq, hd, nope, rope, q_dim, nullptr), "writeback_wide");
               }, g_runs, 3), 0, bytes);
        // The copy engine's version (sm_90a only): the maps are encoded once, outside the timing.
        kl_kernel kt;
        if (kl_mla_q_rope_extract_tma_get(&kt, mod) == KL_SUCCESS) {
            kl_tensor_map qm, om;
            ok(kl_mla_q_rope_extract_tma_q_map_encode(&kt, &qm, q.bf() + nope, rope, nq, t, hd, q_dim), "q_map");
            ok(kl_mla_q_rope_extract_tma_out_map_encode(&kt, &om, r.bf(), rope, nq, t, rope, size_t{nq} * rope), "out_map");
            report("dm_q_rope_extract_tma", what.str(), median_us([&](int) {
                       ok(kl_mla_q_rope_extract_tma(&kt, &qm, &om, t, nq, rope, nullptr), "extract_tma");
                   }, g_runs, 3), 0, bytes);
        } else {
            std::printf("  skip dm_q_rope_extract_tma: %s\n", kl_last_error_message());
        }
    }
    {
        kl_kernel k;
        ok(kl_mla_kv_assemble_batched_get(&k, mod), "get");
        const uint32_t t = 16384, nkv = 128, stride = nkv * (nope + v_dim);
        Buf kv(size_t{t} * stride * 2), kr(size_t{t} * rope * 2), ko(size_t{t} * nkv * hd * 2), vo(size_t{t} * nkv * v_dim * 2);
        fill_random(kv, 82);
        fill_random(kr, 83);
        const double bytes = 2.0 * t * (double(nkv) * (nope + v_dim) + rope + double(nkv) * hd + double(nkv) * v_dim);
        std::ostringstream what;
        what << t << " tokens x " << nkv << " KV heads (nope 128, v 128, rope 64)";
        report("dm_kv_assemble", what.str(), median_us([&](int) {
                   ok(kl_mla_kv_assemble_batched(&k, kv.bf(), kr.bf(), ko.bf(), vo.bf(), t, nkv, nope, v_dim, rope, hd, stride, nullptr),
                      "kv_assemble");
               }, g_runs, 3), 0, bytes);
    }
    {
        kl_kernel k, kw;
        ok(kl_mla_cache_assemble_batched_get(&k, mod), "get");
        ok(kl_mla_cache_assemble_wide_get(&kw, mod), "get");
        const uint32_t t = 262144;
        Buf lat(size_t{t} * kv_lora * 2), kr(size_t{t} * rope * 2), kc(size_t{t} * cache * 2), vc(size_t{t} * cache * 2);
        fill_random(lat, 84);
        fill_random(kr, 85);
        const double bytes = 2.0 * t * (double(kv_lora) + rope + 2.0 * cache);
        std::ostringstream what;
        what << t << " tokens, kv_lora 512 + rope 64 -> K and V cache rows";
        report("dm_cache_assemble", what.str(), median_us([&](int) {
                   ok(kl_mla_cache_assemble_batched(&k, lat.bf(), kr.bf(), kc.bf(), vc.bf(), t, kv_lora, rope, cache, nullptr),
                      "cache_assemble");
               }, g_runs, 3), 0, bytes);
        report("dm_cache_assemble_wide", what.str(), median_us([&](int) {
                   ok(kl_mla_cache_assemble_wide(&kw, lat.bf(), kr.bf(), kc.bf(), vc.bf(), t, kv_lora, rope, cache, nullptr),
                      "cache_assemble_wide");
               }, g_runs, 3), 0, bytes);
    }
    {
        kl_kernel k, kw;
        ok(kl_mla_q_final_assemble_batched_get(&k, mod), "get");
        ok(kl_mla_q_final_assemble_wide_get(&kw, mod), "get");
        const uint32_t t = 8192;
        Buf qa(size_t{t} * nq * kv_lora * 2), qr(size_t{t} * nq * rope * 2), qf(size_t{t} * nq * cache * 2);
        fill_random(qa, 86);
        fill_random(qr, 87);
        const double bytes = 2.0 * t * nq * (double(kv_lora) + rope + cache);
        std::ostringstream what;
        what << t << " tokens x " << nq << " heads -> [q_absorbed 512 | q_rope 64]";
        report("dm_q_final_assemble", what.str(), median_us([&](int) {
                   ok(kl_mla_q_final_assemble_batched(&k, qa.bf(), qr.bf(), qf.bf(), t, nq, kv_lora, rope, cache, nullptr),
                      "q_final_assemble");
               }, g_runs, 3), 0, bytes);
        report("dm_q_final_assemble_wide", what.str(), median_us([&](int) {
                   ok(kl_mla_q_final_assemble_wide(&kw, qa.bf(), qr.bf(), qf.bf(), t, nq, kv_lora, rope, cache, nullptr),
                      "q_final_assemble_wide");
               }, g_runs, 3), 0, bytes);
    }
}

void write_json(const std::string &path, const std::string &device) {
    FILE *f = std::fopen(path.c_str(), "w");
    if (f == nullptr) die("cannot write " + path);
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"runs\": %d,\n  \"results\": {\n", device.c_str(), g_runs);
    for (size_t i = 0; i < g_results.size(); i++) {
        const Result &r = g_results[i];
        std::fprintf(f, "    \"%s\": {\"us\": %.3f, \"flops\": %.6e, \"bytes\": %.6e, \"tflops\": %.3f, \"gbps\": %.3f, "
                        "\"what\": \"%s\"}%s\n",
                     r.name.c_str(), r.us, r.flops, r.bytes, r.flops > 0 ? r.flops / r.us * 1e-6 : 0.0,
                     r.bytes > 0 ? r.bytes / r.us * 1e-3 : 0.0, r.what.c_str(), i + 1 < g_results.size() ? "," : "");
    }
    std::fprintf(f, "  }\n}\n");
    std::fclose(f);
}

}  // namespace

int main(int argc, char **argv) {
    std::string json;
    bool quick = false;
    std::vector<std::string> only;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--json" && i + 1 < argc)
            json = argv[++i];
        else if (a == "--runs" && i + 1 < argc)
            g_runs = std::max(1, std::atoi(argv[++i]));
        else if (a == "--quick")
            quick = true;
        else if (a == "--ab" && i + 1 < argc)
            g_ab_path = argv[++i];
        else if (a == "--ab-ctas" && i + 1 < argc) {
            const long n = std::atol(argv[++i]);
            if (n < 1 || n > 65535) die("--ab-ctas: B's grid is 1 to 65535 blocks");
            g_ab_ctas = static_cast<uint32_t>(n);
        }
        else if (a == "--only" && i + 1 < argc) {
            std::stringstream list(argv[++i]);
            std::string w;
            while (std::getline(list, w, ','))
                if (!w.empty()) only.push_back(w);
        } else if (a == "--gemm-ctas" && i + 1 < argc) {
            std::stringstream list(argv[++i]);
            std::string w;
            while (std::getline(list, w, ',')) {
                const long n = std::atol(w.c_str());
                if (n < 1 || n > 65535) die("--gemm-ctas: each grid is 1 to 65535 blocks");
                g_gemm_ctas.push_back(static_cast<uint32_t>(n));
            }
        } else
            die("usage: mla_bench [--json FILE] [--runs N] [--quick] [--only NAME,NAME...] [--ab CUBIN] "
                "[--ab-ctas N] [--gemm-ctas N,N...]");
    }
    auto want = [&only](const char *name) {
        if (only.empty()) return true;
        for (const std::string &w : only)
            if (std::strstr(name, w.c_str()) != nullptr) return true;
        return false;
    };
    init_mla_driver();
    char name[256] = {0};
    g_device_name(name, sizeof name - 1, g_cuda.device);
    std::printf("mla_bench on %s (median of %d runs)\n", name, g_runs);
    ok(kl_module_load(&g_cuda.base, kl_fatbin_mla_prefill_deepseek_v4_flash,
                      kl_fatbin_mla_prefill_deepseek_v4_flash_size, &g_mod.v576),
       "loading the deepseek_v4_flash fatbin");
    ok(kl_module_load(&g_cuda.base, kl_fatbin_mla_prefill_mistral_small_4, kl_fatbin_mla_prefill_mistral_small_4_size,
                      &g_mod.v320),
       "loading the mistral_small_4 fatbin");

    kl_module ab_module;
    std::vector<uint64_t> ab_image;
    if (!g_ab_path.empty()) {
        load_image(g_ab_path, "--ab", &ab_image, &ab_module);
        g_ab_module = &ab_module;
    }
    const uint32_t seq = quick ? 1024 : 4096;
    bench_copy();
    if (want("fill")) bench_fill();
    if (want("attn_mma_576")) bench_attention(&g_mod.v576, 576, 128, seq, "attn_mma_576");
    if (want("attn_mma_320")) bench_attention(&g_mod.v320, 320, 128, seq, "attn_mma_320");
    if (want("attn_wgmma_576"))
        bench_attention(&g_mod.v576, 576, 128, seq, "attn_wgmma_576", kl_mla_absorbed_attention_wgmma_get,
                        kl_mla_absorbed_attention_wgmma);
    if (want("attn_wgmma_320"))
        bench_attention(&g_mod.v320, 320, 128, seq, "attn_wgmma_320", kl_mla_absorbed_attention_wgmma_get,
                        kl_mla_absorbed_attention_wgmma);
    if (want("attn_seed_576")) bench_seed_attention(16, quick ? 512 : 1024);
    if (want("gemm_mma")) bench_gemm(4096, 128, 128, 512, "gemm_mma", true);
    if (want("gemm_mma_t")) bench_gemm(4096, 128, 512, 128, "gemm_mma_t", false);
    if (want("gemm_wgmma"))
        bench_gemm(4096, 128, 128, 512, "gemm_wgmma", true, kl_grouped_gemm_wgmma_get, kl_grouped_gemm_wgmma);
    if (want("gemm_wgmma_t"))
        bench_gemm(4096, 128, 512, 128, "gemm_wgmma_t", false, kl_grouped_gemm_wgmma_get, kl_grouped_gemm_wgmma);
    if (want("attn_tma_576")) bench_attention_tma(&g_mod.v576, 576, 128, seq, "attn_tma_576");
    if (want("attn_tma_320")) bench_attention_tma(&g_mod.v320, 320, 128, seq, "attn_tma_320");
    if (want("gemm_tma")) bench_gemm_tma(4096, 128, 128, 512, "gemm_tma");
    if (want("gemm_tma_t")) bench_gemm_tma(4096, 128, 512, 128, "gemm_tma_t");
    if (want("dm_")) bench_data_movement();

    if (!json.empty()) write_json(json, name);
    if (g_ab_module != nullptr) kl_module_unload(&ab_module);
    kl_module_unload(&g_mod.v320);
    kl_module_unload(&g_mod.v576);
    return 0;
}
