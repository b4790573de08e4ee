// decode_bench: paged decode attention against the GPU's copy bandwidth.
//
//   decode_bench [--json FILE] [--runs N] [--only-gqa] [--only-fixed] [--tables-in-order] [--trace CUBIN]
//                [--ab CUBIN]
//
// --only-gqa: copy and the 32 x 4096 rows only (for a profiler's run).
// --only-fixed: copy and the fixed-cost sweep only (the same).
// --tables-in-order: block tables in order (sequence s's pages s * n ..
//   s * n + n - 1), not shuffled: what the shuffle costs the reads, against
//   torch SDPA's contiguous cache (docs/PERFORMANCE.md, paged decode; H100,
//   2026-12-06: 0.994x SDPA in order against 0.983x shuffled).
// --trace CUBIN: only the timelines of the `_tma` persistent launchers'
//   blocks, from CUBIN (bench/decode/trace.sh's build, whose kernels stamp
//   their phases; see trace_timelines below).
// --ab CUBIN: only a same-run A/B of the `_tma` persistent launchers: this
//   build's kernels (A) against CUBIN's (B: bench/decode/ab.sh's build of
//   another consumer step), interleaved; see ab_compare below.
//
// All kernel times are CUDA events around each run (cuEventRecord on the
// legacy stream before and after), runs queued back to back, the median of
// N (default 40) after 5 warm-up runs. Every run reads the next of several
// KV cache sets (at least 3, at least 600 MB read in a rotation), so no run
// finds its cache in the 50-60 MB L2. KV bytes count what a kernel must
// read: K and V of each sequence's attended positions (clipped to the
// sliding window), once per KV head; block tables, q and outputs are not
// counted. Caches hold random bf16 in [-1, 1) or fp8 codes of magnitude
// 1/8 to 2 (no NaN); block tables are shuffled (unless --tables-in-order).
//
// Measured (head dim 128, block size 16, 32 query / 8 KV heads, variant
// gqa4_d128):
//   copy          cuMemcpyDtoD of 512 MiB; bytes = read + write
//   gqa_bf16      32 sequences x 4096 (512 MiB of K+V): the seed grid
//                 (paged_decode_attn_bf16_gqa), split-KV at 1, 2, 4, 8, 16
//                 splits (partial + combine), and "dispatch": what a caller
//                 following klaunch/paged_decode_split.h runs (the rule's
//                 count; 1 means the seed launcher). Target: dispatch
//                 >= 0.85 of the copy bandwidth.
//   gqa_fp8       the same shape over fp8: tokens/s against bf16 (target
//                 >= 1.6x), dispatch against dispatch.
//   long_seq      1 sequence x 32768 (bf16): split-KV at the rule's count
//                 (target >= 0.7 of copy) and a sweep over 4, 8, 15, 16,
//                 17, 24, 32, 33, 48, 64 splits (partial + combine), with
//                 the best count's fraction of copy beside the rule's; the
//                 seed grid (8 blocks) for the record.
//   window        sliding window 4096 over 32 sequences of 8192, 16384 and
//                 32768 positions (bf16, dispatch): the time should not
//                 depend on the total length (max / min reported).
//   pdl           split-KV partial (bf16 GQA) + combine on one stream, the
//                 combine launched plainly (paged_decode_split_combine) or as
//                 a programmatic dependent launch
//                 (paged_decode_split_combine_pdl, sm_90+): 1 x 32768 and
//                 1 x 2048 at the rule's split count, 32 x 4096 at 4 splits;
//                 the gain is plain time / PDL time. The PDL output must
//                 equal the plain one bit for bit (else exit 1).
//   *_mma         the tensor-core launchers (paged_decode_attn_*_gqa_mma,
//                 paged_decode_split_*_gqa_mma) on the same problems as the
//                 scalar rows: gqa_bf16_mma, gqa_fp8_mma (32 x 4096; fp8
//                 over bf16 tokens/s, target >= 1.6x; bf16 against copy,
//                 target >= 0.9, and against torch SDPA, >= 1.0x) and
//                 long_seq_mma (1 x 32768, the sweep and the rule's count,
//                 target >= 0.8 of copy). Their split paths combine with
//                 paged_decode_split_combine_pdl on a stream of their own
//                 where the device has PDL (sm_90+), else the plain combine.
//   *_persist     the persistent launchers (paged_decode_persist_*_gqa_mma,
//                 one launch, no combine) on the _mma rows' problems
//                 (gqa_bf16_mma, gqa_fp8_mma, long_seq_mma, and
//                 long_seq_fp8_mma: 1 x 32768 over fp8), at num_ctas = SMs/2,
//                 SMs-4, SMs, 2*SMs and the rule's
//                 (kl_paged_decode_persist_ctas), each beside the _mma
//                 dispatch time of the same problem; targets: bf16 32 x 4096
//                 >= 0.9 of copy and >= 1.0x SDPA, fp8 >= 1.6x bf16
//                 tokens/s, 1 x 32768 >= 0.8 of copy. Its output is checked
//                 against the _mma seed kernel's and its counters are
//                 checked to be zero after the timed launches (else exit 1).
//   *_bulk, *_tma the copy-engine launchers (paged_decode_attn_*_gqa_bulk,
//                 paged_decode_persist_*_gqa_bulk: row copies; their
//                 *_gqa_tma twins: tensor-map boxes, the maps encoded once
//                 per cache set; sm_90a, skipped where they do not load)
//                 on every shape with persistent rows:
//                 the seed grid, the persistent grid swept as above and
//                 at the rule's, and 8 persistent launches queued back to
//                 back (no event between them: the programmatic dependent
//                 launch overlaps each launch's start with the previous
//                 one's tail), per launch, beside the persistent _mma
//                 launcher's; each beside the _mma dispatch of the same
//                 problem. Targets (issue 21, on the _tma persistent rows,
//                 the rule's choice on sm_90a): bf16 32 x 4096 >=
//                 0.98 of copy and >= 1.0x SDPA, fp8 >= 1.8x bf16
//                 tokens/s, 1 x 32768 >= 0.85 of copy. Outputs checked
//                 against the _mma seed kernel's, counters zero after the
//                 timed launches. The bf16 _tma rows also time the rule's
//                 launch with Q's rows off 16 bytes, and with K and V read
//                 as [block, kv head, slot, d] (timing only): the cost of
//                 the contract's token-major cache rows.
//   chooser       each shape with persistent rows: what
//                 kl_paged_decode_gqa_{bf16,fp8}_choose picks there (no
//                 table: the compiled-in one where it has this card, else
//                 the rule; eager; the device from the driver), its
//                 tunables and where it came from, and the time the rows
//                 above measured for that launch at those tunables (no
//                 launch of its own; "not timed" where they swept others).
// Correctness guard: the split path's output is compared with the seed
// kernel's on the same inputs (relative difference < 1e-2), and the _mma
// seed-grid output with the scalar one, else exit 1.
// Prints a table and, with --json, writes the numbers to FILE. Exit 1 on
// any failure (no GPU, a refused launch, a mismatch).
// One file of ~1400 lines because every row needs the others' state in the
// same process: the copy baseline each ratio is read against, the cache
// sets and kernel handles timed side by side, and the _mma seed output each
// row's check compares with; split, they would pass all of it around.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/paged_decode_fatbins.h"

#define KL_BENCH_PROGRAM "decode_bench"
#include "bench/common/bench_driver.h"
#include "bench/common/inputs.h"

namespace {

// ---- the driver ------------------------------------------------------------------

// What only this program calls beyond bench_driver.h's g_drv: a stream of
// its own for the PDL pair.
typedef int (*StreamCreateFn)(kl_stream *stream, unsigned flags);
typedef int (*StreamDestroyFn)(kl_stream stream);

StreamCreateFn g_stream_create;
StreamDestroyFn g_stream_destroy;

void init_decode_driver() {
    init_driver();
    g_stream_create = symbol<StreamCreateFn>("cuStreamCreate");
    g_stream_destroy = symbol<StreamDestroyFn>("cuStreamDestroy_v2", "cuStreamDestroy");
}

// The device as the chooser's tables key it (klaunch/choose.h, KEY), so
// that the compiled-in table's rows for this card match here; once in main().
kl_device g_dev;

// ---- timing ------------------------------------------------------------------------

int g_runs = 40;
constexpr int kWarmup = 5;

// bench_driver.h's median at this program's run and warm-up counts.
double median_us(const std::function<void(int)> &launch, kl_stream stream = nullptr) {
    return median_us(launch, g_runs, kWarmup, stream);
}

// ---- data ---------------------------------------------------------------------------

// Fills dst with copies of a random pattern: bf16 in [-1, 1) or fp8 codes
// of magnitude 1/8 to 2 (sign, exponent 4..8, any mantissa: never NaN).
void fill_random(const Buf &dst, bool fp8, uint32_t seed) {
    static std::map<bool, Buf> pattern;
    const size_t chunk = 32u << 20;
    if (pattern.find(fp8) == pattern.end()) {
        const std::vector<unsigned char> host = fp8 ? kl_inputs::fp8_pattern(chunk, 7) : kl_inputs::bf16_pattern(chunk, 3);
        Buf b(chunk);
        ok(kl_cuda_memcpy_htod(&g_cuda, b.p, host.data(), chunk), "upload of a pattern");
        pattern.emplace(fp8, std::move(b));
    }
    const Buf &pat = pattern.at(fp8);
    // Start each buffer at another offset of the pattern (seed), so sets differ.
    size_t off = (seed * 4099u * 2u) % (chunk / 2), done = 0;
    while (done < dst.bytes) {
        const size_t n = std::min(dst.bytes - done, chunk - off);
        cu(g_drv.memcpy_dtod(dst.addr() + done, pat.addr() + off, n), "cuMemcpyDtoD (fill)");
        done += n;
        off = 0;
    }
}

struct Shape {
    uint32_t num_seqs, seq_len, window;  // window 0: the whole sequence
    bool fp8;
};

constexpr uint32_t kNq = 32, kNkv = 8, kHd = 128, kBs = 16;
constexpr uint32_t kQOddStride = kNq * kHd + 1;  // Q rows 2 bytes past a 16-byte multiple apart
constexpr uint32_t kPersistMaxCtas = 1024;  // the most blocks a persistent row launches
constexpr float kInvSqrtD = 0.08838834764831845f;

// One cache set: K, V, a shuffled block table, and (where the *_gqa_tma
// launchers load) K's and V's tensor maps; q and seq_lens are shared.
struct CacheSet {
    Buf k, v, tables;
    kl_tensor_map km, vm;
    // The same buffers seen as [block, kv head, slot, d] (each head's slice
    // of a page contiguous, not the contract's [block, slot, kv head, d]):
    // timing only (the output is not checked), what the contract's layout
    // costs the per-head units' reads.
    kl_tensor_map km_hm, vm_hm;
};

struct Problem {
    Shape shape;
    uint32_t blocks_per_seq = 0;
    uint64_t block_elems = 0;  // block_size * num_kv_heads * head_dim
    std::vector<CacheSet> sets;
    Buf q, lens, out, ws;
    // Q again with rows one element past a 16-byte multiple apart
    // (kQOddStride): the consumers' scalar Q loads, for the same-run A/B of
    // paged_decode__mma_q's 16-byte loads.
    Buf q_odd;
    uint64_t ws_bytes = 0;
    // The persistent launchers' workspace (kPersistMaxCtas blocks) and
    // counters (zeroed once, as the contract asks).
    Buf pws, pcnt;
    uint64_t pws_bytes = 0, pcnt_words = 0;

    uint64_t kv_bytes_read() const {
        const uint64_t attended = shape.window ? std::min(shape.window, shape.seq_len) : shape.seq_len;
        return uint64_t{shape.num_seqs} * attended * kNkv * kHd * (shape.fp8 ? 1 : 2) * 2;
    }
    uint64_t tokens() const { return uint64_t{shape.num_seqs} * shape.seq_len; }
};

// The launchers, looked up once in main().
struct Kernels {
    kl_kernel attn_bf16, attn_fp8, split_bf16, split_fp8, combine, combine_pdl;
    kl_kernel attn_bf16_mma, attn_fp8_mma, split_bf16_mma, split_fp8_mma;
    kl_kernel persist_bf16, persist_fp8;
    kl_kernel attn_bf16_bulk, attn_fp8_bulk, persist_bf16_bulk, persist_fp8_bulk;
    kl_kernel attn_bf16_tma, attn_fp8_tma, persist_bf16_tma, persist_fp8_tma;
} g_k;
bool g_have_bulk = false;  // the *_gqa_bulk and *_gqa_tma launchers loaded (sm_90a)
bool g_tables_in_order = false;  // --tables-in-order

Problem make_problem(const Shape &s, uint32_t max_splits) {
    Problem p;
    p.shape = s;
    p.blocks_per_seq = (s.seq_len + kBs - 1) / kBs;
    p.block_elems = uint64_t{kBs} * kNkv * kHd;
    const uint64_t nblocks = uint64_t{s.num_seqs} * p.blocks_per_seq;
    const uint64_t cache_bytes = nblocks * p.block_elems * (s.fp8 ? 1 : 2);
    // Rotation: >= 3 sets and >= 600 MB read per round.
    size_t nsets = 3;
    while (nsets * p.kv_bytes_read() < 600ull * 1000 * 1000) nsets++;
    std::mt19937 gen(11);
    for (size_t i = 0; i < nsets; i++) {
        CacheSet cs{Buf(cache_bytes), Buf(cache_bytes), Buf(nblocks * 4)};
        fill_random(cs.k, s.fp8, static_cast<uint32_t>(2 * i));
        fill_random(cs.v, s.fp8, static_cast<uint32_t>(2 * i + 1));
        std::vector<int32_t> t(nblocks);
        std::iota(t.begin(), t.end(), 0);
        if (!g_tables_in_order) std::shuffle(t.begin(), t.end(), gen);
        ok(kl_cuda_memcpy_htod(&g_cuda, cs.tables.p, t.data(), t.size() * 4), "upload of a block table");
        if (g_have_bulk) {
            // The 4-D views (d, kv head, slot, block), encoded once (outside every timing).
            const uint64_t s2 = uint64_t{kNkv} * kHd, s3 = p.block_elems;
            if (!s.fp8) {
                ok(kl_paged_decode_attn_bf16_gqa_tma_k_map_encode(&g_k.attn_bf16_tma, &cs.km_hm, cs.k.as<kl_bf16>(),
                                                                  kHd, kNkv, kBs, nblocks, uint64_t{kBs} * kHd, kHd, s3),
                   "k_map (head-major)");
                ok(kl_paged_decode_attn_bf16_gqa_tma_v_map_encode(&g_k.attn_bf16_tma, &cs.vm_hm, cs.v.as<kl_bf16>(),
                                                                  kHd, kNkv, kBs, nblocks, uint64_t{kBs} * kHd, kHd, s3),
                   "v_map (head-major)");
                ok(kl_paged_decode_attn_bf16_gqa_tma_k_map_encode(&g_k.attn_bf16_tma, &cs.km, cs.k.as<kl_bf16>(), kHd,
                                                                  kNkv, kBs, nblocks, kHd, s2, s3),
                   "kl_paged_decode_attn_bf16_gqa_tma_k_map_encode");
                ok(kl_paged_decode_attn_bf16_gqa_tma_v_map_encode(&g_k.attn_bf16_tma, &cs.vm, cs.v.as<kl_bf16>(), kHd,
                                                                  kNkv, kBs, nblocks, kHd, s2, s3),
                   "kl_paged_decode_attn_bf16_gqa_tma_v_map_encode");
            } else {
                ok(kl_paged_decode_attn_fp8_gqa_tma_k_map_encode(&g_k.attn_fp8_tma, &cs.km, cs.k.as<kl_fp8_e4m3>(),
                                                                 kHd, kNkv, kBs, nblocks, kHd, s2, s3),
                   "kl_paged_decode_attn_fp8_gqa_tma_k_map_encode");
                ok(kl_paged_decode_attn_fp8_gqa_tma_v_map_encode(&g_k.attn_fp8_tma, &cs.vm, cs.v.as<kl_fp8_e4m3>(),
                                                                 kHd, kNkv, kBs, nblocks, kHd, s2, s3),
                   "kl_paged_decode_attn_fp8_gqa_tma_v_map_encode");
            }
        }
        p.sets.push_back(std::move(cs));
    }
    p.q = Buf(size_t{s.num_seqs} * kNq * kHd * 2);
    fill_random(p.q, false, 99);
    p.q_odd = Buf(size_t{s.num_seqs} * kQOddStride * 2);
    fill_random(p.q_odd, false, 98);
    std::vector<int32_t> lens(s.num_seqs, static_cast<int32_t>(s.seq_len));
    p.lens = Buf(lens.size() * 4);
    ok(kl_cuda_memcpy_htod(&g_cuda, p.lens.p, lens.data(), lens.size() * 4), "upload of seq_lens");
    p.out = Buf(size_t{s.num_seqs} * kNq * kHd * 2);
    p.ws_bytes = kl_paged_decode_split_workspace_bytes(s.num_seqs, kNq, kHd, max_splits);
    p.ws = Buf(p.ws_bytes);
    p.pws_bytes = kl_paged_decode_persist_workspace_bytes(kNq / kNkv, kHd, kPersistMaxCtas);
    p.pws = Buf(p.pws_bytes);
    p.pcnt_words = kl_paged_decode_persist_counter_words(s.num_seqs, kNkv);
    p.pcnt = Buf(p.pcnt_words * 4);
    ok(kl_cuda_memset_d8(&g_cuda, p.pcnt.p, 0, p.pcnt.bytes), "zeroing the persistent counters");
    ok(kl_cuda_synchronize(&g_cuda), "filling the caches");
    return p;
}

// ---- kernels --------------------------------------------------------------------------


// Which launchers a row measures: the scalar GQA kernels or the tensor-core ones.
enum class Impl { kScalar, kMma };
bool g_have_pdl = false;
kl_stream g_mma_stream = nullptr;  // the _mma rows' stream (PDL combine) when g_have_pdl

void launch_seed(const Problem &p, int run, Impl impl = Impl::kScalar) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const Shape &s = p.shape;
    if (impl == Impl::kMma) {
        if (!s.fp8)
            ok(kl_paged_decode_attn_bf16_gqa_mma(&g_k.attn_bf16_mma, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(),
                                                 c.v.as<kl_bf16>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                                 p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                 kBs, kInvSqrtD, kNq * kHd, s.window, g_mma_stream),
               "kl_paged_decode_attn_bf16_gqa_mma");
        else
            ok(kl_paged_decode_attn_fp8_gqa_mma(&g_k.attn_fp8_mma, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                                c.v.as<kl_fp8_e4m3>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                                p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                                kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window,
                                                g_mma_stream),
               "kl_paged_decode_attn_fp8_gqa_mma");
        return;
    }
    if (!s.fp8)
        ok(kl_paged_decode_attn_bf16_gqa(&g_k.attn_bf16, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(), c.v.as<kl_bf16>(),
                                         p.out.as<kl_bf16>(), c.tables.as<int32_t>(), p.lens.as<int32_t>(),
                                         p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, kNq * kHd,
                                         s.window, nullptr),
           "kl_paged_decode_attn_bf16_gqa");
    else
        ok(kl_paged_decode_attn_fp8_gqa(&g_k.attn_fp8, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                        c.v.as<kl_fp8_e4m3>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                        p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                        kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window, nullptr),
           "kl_paged_decode_attn_fp8_gqa");
}

void launch_split(const Problem &p, int run, uint32_t splits, Impl impl = Impl::kScalar) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const Shape &s = p.shape;
    if (impl == Impl::kMma) {
        if (!s.fp8)
            ok(kl_paged_decode_split_bf16_gqa_mma(&g_k.split_bf16_mma, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(),
                                                  c.v.as<kl_bf16>(), p.ws.as<float>(), c.tables.as<int32_t>(),
                                                  p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                  kBs, kInvSqrtD, kNq * kHd, s.window, splits, p.ws_bytes,
                                                  g_mma_stream),
               "kl_paged_decode_split_bf16_gqa_mma");
        else
            ok(kl_paged_decode_split_fp8_gqa_mma(&g_k.split_fp8_mma, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                                 c.v.as<kl_fp8_e4m3>(), p.ws.as<float>(), c.tables.as<int32_t>(),
                                                 p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                 kBs, kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window,
                                                 splits, p.ws_bytes, g_mma_stream),
               "kl_paged_decode_split_fp8_gqa_mma");
        if (g_have_pdl)
            ok(kl_paged_decode_split_combine_pdl(&g_k.combine_pdl, p.ws.as<float>(), p.out.as<kl_bf16>(), s.num_seqs,
                                                 kNq, kHd, splits, p.ws_bytes, g_mma_stream),
               "kl_paged_decode_split_combine_pdl");
        else
            ok(kl_paged_decode_split_combine(&g_k.combine, p.ws.as<float>(), p.out.as<kl_bf16>(), s.num_seqs, kNq,
                                             kHd, splits, p.ws_bytes, g_mma_stream),
               "kl_paged_decode_split_combine");
        return;
    }
    if (!s.fp8)
        ok(kl_paged_decode_split_bf16_gqa(&g_k.split_bf16, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(), c.v.as<kl_bf16>(),
                                          p.ws.as<float>(), c.tables.as<int32_t>(), p.lens.as<int32_t>(),
                                          p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, kNq * kHd,
                                          s.window, splits, p.ws_bytes, nullptr),
           "kl_paged_decode_split_bf16_gqa");
    else
        ok(kl_paged_decode_split_fp8_gqa(&g_k.split_fp8, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                         c.v.as<kl_fp8_e4m3>(), p.ws.as<float>(), c.tables.as<int32_t>(),
                                         p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                         kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window, splits,
                                         p.ws_bytes, nullptr),
           "kl_paged_decode_split_fp8_gqa");
    ok(kl_paged_decode_split_combine(&g_k.combine, p.ws.as<float>(), p.out.as<kl_bf16>(), s.num_seqs, kNq, kHd,
                                     splits, p.ws_bytes, nullptr),
       "kl_paged_decode_split_combine");
}

// Partial + combine on `stream`, the combine plain or as a programmatic
// dependent launch (the partial kernels trigger it on entry; it waits in
// griddepcontrol.wait for the partial grid's completion).
void launch_pair(const Problem &p, int run, uint32_t splits, bool pdl, kl_stream stream) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const Shape &s = p.shape;
    ok(kl_paged_decode_split_bf16_gqa(&g_k.split_bf16, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(), c.v.as<kl_bf16>(),
                                      p.ws.as<float>(), c.tables.as<int32_t>(), p.lens.as<int32_t>(), p.blocks_per_seq,
                                      s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, kNq * kHd, s.window, splits,
                                      p.ws_bytes, stream),
       "kl_paged_decode_split_bf16_gqa");
    if (pdl)
        ok(kl_paged_decode_split_combine_pdl(&g_k.combine_pdl, p.ws.as<float>(), p.out.as<kl_bf16>(), s.num_seqs, kNq,
                                             kHd, splits, p.ws_bytes, stream),
           "kl_paged_decode_split_combine_pdl");
    else
        ok(kl_paged_decode_split_combine(&g_k.combine, p.ws.as<float>(), p.out.as<kl_bf16>(), s.num_seqs, kNq, kHd,
                                         splits, p.ws_bytes, stream),
           "kl_paged_decode_split_combine");
}

// The persistent launcher (paged_decode_persist_*_gqa_mma) at `ctas` blocks.
void launch_persist(const Problem &p, int run, uint32_t ctas) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const Shape &s = p.shape;
    if (ctas > kPersistMaxCtas) die("a persistent row asks for more blocks than its workspace holds");
    if (!s.fp8)
        ok(kl_paged_decode_persist_bf16_gqa_mma(&g_k.persist_bf16, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(),
                                                c.v.as<kl_bf16>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                                p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                kBs, kInvSqrtD, kNq * kHd, s.window, p.pws.as<float>(),
                                                p.pcnt.as<uint32_t>(), ctas, p.pws_bytes, p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_bf16_gqa_mma");
    else
        ok(kl_paged_decode_persist_fp8_gqa_mma(&g_k.persist_fp8, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                               c.v.as<kl_fp8_e4m3>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                               p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                               kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window,
                                               p.pws.as<float>(), p.pcnt.as<uint32_t>(), ctas, p.pws_bytes,
                                               p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_fp8_gqa_mma");
}

// The copy-engine launchers: the seed grid (paged_decode_attn_*_gqa_bulk,
// or with maps its tensor-map twin *_gqa_tma) and the persistent one
// (paged_decode_persist_*_gqa_{bulk,tma}, a programmatic dependent launch)
// at `ctas` blocks.
void launch_bulk_seed(const Problem &p, int run, bool maps = false) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const Shape &s = p.shape;
    if (maps && !s.fp8)
        ok(kl_paged_decode_attn_bf16_gqa_tma(&g_k.attn_bf16_tma, p.q.as<kl_bf16>(), &c.km, &c.vm, p.out.as<kl_bf16>(),
                                             c.tables.as<int32_t>(), p.lens.as<int32_t>(), p.blocks_per_seq,
                                             s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, kNq * kHd, s.window,
                                             g_mma_stream),
           "kl_paged_decode_attn_bf16_gqa_tma");
    else if (maps)
        ok(kl_paged_decode_attn_fp8_gqa_tma(&g_k.attn_fp8_tma, p.q.as<kl_bf16>(), &c.km, &c.vm, p.out.as<kl_bf16>(),
                                            c.tables.as<int32_t>(), p.lens.as<int32_t>(), p.blocks_per_seq,
                                            s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, 0.05f, 0.05f, kNq * kHd,
                                            s.window, g_mma_stream),
           "kl_paged_decode_attn_fp8_gqa_tma");
    else if (!s.fp8)
        ok(kl_paged_decode_attn_bf16_gqa_bulk(&g_k.attn_bf16_bulk, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(),
                                              c.v.as<kl_bf16>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                              p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                              kInvSqrtD, kNq * kHd, s.window, g_mma_stream),
           "kl_paged_decode_attn_bf16_gqa_bulk");
    else
        ok(kl_paged_decode_attn_fp8_gqa_bulk(&g_k.attn_fp8_bulk, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                             c.v.as<kl_fp8_e4m3>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                             p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd, kBs,
                                             kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window,
                                             g_mma_stream),
           "kl_paged_decode_attn_fp8_gqa_bulk");
}

void launch_bulk_persist(const Problem &p, int run, uint32_t ctas, bool maps = false, bool odd_q = false,
                         bool head_major = false) {
    const CacheSet &c = p.sets[run % p.sets.size()];
    const kl_tensor_map *km = head_major ? &c.km_hm : &c.km, *vm = head_major ? &c.vm_hm : &c.vm;
    const Shape &s = p.shape;
    if (ctas > kPersistMaxCtas) die("a persistent row asks for more blocks than its workspace holds");
    const kl_bf16 *q = odd_q ? p.q_odd.as<kl_bf16>() : p.q.as<kl_bf16>();
    const uint32_t q_stride = odd_q ? kQOddStride : kNq * kHd;
    if (maps && !s.fp8)
        ok(kl_paged_decode_persist_bf16_gqa_tma(&g_k.persist_bf16_tma, q, km, vm, p.out.as<kl_bf16>(),
                                                c.tables.as<int32_t>(), p.lens.as<int32_t>(), p.blocks_per_seq,
                                                s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, q_stride, s.window,
                                                p.pws.as<float>(), p.pcnt.as<uint32_t>(), ctas, p.pws_bytes,
                                                p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_bf16_gqa_tma");
    else if (maps)
        ok(kl_paged_decode_persist_fp8_gqa_tma(&g_k.persist_fp8_tma, q, km, vm, p.out.as<kl_bf16>(),
                                               c.tables.as<int32_t>(), p.lens.as<int32_t>(), p.blocks_per_seq,
                                               s.num_seqs, kNq, kNkv, kHd, kBs, kInvSqrtD, 0.05f, 0.05f, q_stride,
                                               s.window, p.pws.as<float>(), p.pcnt.as<uint32_t>(), ctas, p.pws_bytes,
                                               p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_fp8_gqa_tma");
    else if (!s.fp8)
        ok(kl_paged_decode_persist_bf16_gqa_bulk(&g_k.persist_bf16_bulk, p.q.as<kl_bf16>(), c.k.as<kl_bf16>(),
                                                 c.v.as<kl_bf16>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                                 p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                 kBs, kInvSqrtD, kNq * kHd, s.window, p.pws.as<float>(),
                                                 p.pcnt.as<uint32_t>(), ctas, p.pws_bytes, p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_bf16_gqa_bulk");
    else
        ok(kl_paged_decode_persist_fp8_gqa_bulk(&g_k.persist_fp8_bulk, p.q.as<kl_bf16>(), c.k.as<kl_fp8_e4m3>(),
                                                c.v.as<kl_fp8_e4m3>(), p.out.as<kl_bf16>(), c.tables.as<int32_t>(),
                                                p.lens.as<int32_t>(), p.blocks_per_seq, s.num_seqs, kNq, kNkv, kHd,
                                                kBs, kInvSqrtD, 0.05f, 0.05f, kNq * kHd, p.block_elems, s.window,
                                                p.pws.as<float>(), p.pcnt.as<uint32_t>(), ctas, p.pws_bytes,
                                                p.pcnt_words, g_mma_stream),
           "kl_paged_decode_persist_fp8_gqa_bulk");
}

uint32_t rule(const Problem &p) {
    return kl_paged_decode_num_splits(p.shape.num_seqs, kNkv, p.shape.seq_len, p.shape.window, kBs, g_dev.sm_count);
}

// What a caller following the header runs: the seed launcher at one split.
void launch_dispatch(const Problem &p, int run, Impl impl = Impl::kScalar) {
    const uint32_t s = rule(p);
    if (s == 1)
        launch_seed(p, run, impl);
    else
        launch_split(p, run, s, impl);
}

std::vector<float> download_out(const Problem &p) {
    const size_t n = size_t{p.shape.num_seqs} * kNq * kHd;
    std::vector<uint16_t> bits(n);
    ok(kl_cuda_memcpy_dtoh(&g_cuda, bits.data(), p.out.p, n * 2), "download of the output");
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = uint32_t{bits[i]} << 16;
        std::memcpy(&f[i], &u, 4);
    }
    return f;
}

// ||a - b|| / ||a||, and the count of non-finite elements.
double rel_diff(const std::vector<float> &a, const std::vector<float> &b, size_t *nonfinite, double *r2_out) {
    double d2 = 0, r2 = 0;
    *nonfinite = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) ++*nonfinite;
        d2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        r2 += double(a[i]) * a[i];
    }
    *r2_out = r2;
    return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

// The _mma seed-grid output against the scalar seed kernel's (set 0).
void check_mma_matches_scalar(const Problem &p, const char *name) {
    launch_seed(p, 0, Impl::kScalar);
    ok(kl_cuda_synchronize(&g_cuda), "the scalar seed kernel");
    const std::vector<float> a = download_out(p);
    ok(kl_cuda_memset_d8(&g_cuda, p.out.p, 0xFF, p.out.bytes), "poisoning the output");
    launch_seed(p, 0, Impl::kMma);
    ok(kl_cuda_synchronize(&g_cuda), "the _mma seed-grid kernel");
    const std::vector<float> b = download_out(p);
    size_t nonfinite = 0;
    double r2 = 0;
    const double rel = rel_diff(a, b, &nonfinite, &r2);
    std::printf("  check %s: _mma vs the scalar seed kernel: ||diff|| / ||scalar|| = %.2e, %zu non-finite\n", name, rel,
                nonfinite);
    if (nonfinite != 0 || !(rel < 1e-2) || r2 == 0)
        die(std::string("the _mma kernel's output differs from the scalar one's (") + name + ")");
}

// `launch` (on set 0, output and persistent workspace poisoned first) gives
// the _mma seed-grid kernel's output, within 1e-2 and finite; `what` names it.
void check_matches_mma_seed(const Problem &p, const char *name, const std::string &what,
                            const std::function<void()> &launch) {
    launch_seed(p, 0, Impl::kMma);
    ok(kl_cuda_synchronize(&g_cuda), "the _mma seed-grid kernel");
    const std::vector<float> a = download_out(p);
    ok(kl_cuda_memset_d8(&g_cuda, p.out.p, 0xFF, p.out.bytes), "poisoning the output");
    ok(kl_cuda_memset_d8(&g_cuda, p.pws.p, 0xFF, p.pws.bytes), "poisoning the persistent workspace");
    launch();
    ok(kl_cuda_synchronize(&g_cuda), what.c_str());
    const std::vector<float> b = download_out(p);
    size_t nonfinite = 0;
    double r2 = 0;
    const double rel = rel_diff(a, b, &nonfinite, &r2);
    std::printf("  check %s: %s vs the _mma seed kernel: ||diff|| / ||seed|| = %.2e, %zu non-finite\n", name,
                what.c_str(), rel, nonfinite);
    if (nonfinite != 0 || !(rel < 1e-2) || r2 == 0)
        die("the " + what + " output differs from the seed kernel's (" + name + ")");
}

// The persistent launcher at `ctas` blocks gives the _mma seed-grid kernel's output.
void check_persist_matches_seed(const Problem &p, uint32_t ctas, const char *name) {
    check_matches_mma_seed(p, name, "persistent at " + std::to_string(ctas) + " blocks",
                           [&] { launch_persist(p, 0, ctas); });
}

// The copy-engine launchers (seed grid; persistent at `ctas`), rows or
// (maps) boxes, give the _mma seed kernel's output.
void check_bulk_matches_seed(const Problem &p, uint32_t ctas, const char *name, bool maps) {
    const std::string kind = maps ? "tma " : "bulk ";
    check_matches_mma_seed(p, name, kind + "seed grid", [&] { launch_bulk_seed(p, 0, maps); });
    check_matches_mma_seed(p, name, kind + "persistent at " + std::to_string(ctas) + " blocks",
                           [&] { launch_bulk_persist(p, 0, ctas, maps); });
}

// The persistent counters are all zero (after every completed launch).
void check_persist_counters(const Problem &p, const char *name) {
    std::vector<uint32_t> cnt(p.pcnt_words);
    ok(kl_cuda_memcpy_dtoh(&g_cuda, cnt.data(), p.pcnt.p, cnt.size() * 4), "download of the counters");
    for (uint32_t v : cnt)
        if (v != 0) die(std::string("a persistent counter is not zero after the timed launches (") + name + ")");
}

// The split path at `splits` gives the seed kernel's output (set 0).
void check_split_matches_seed(const Problem &p, uint32_t splits, const char *name, Impl impl = Impl::kScalar) {
    launch_seed(p, 0, impl);
    ok(kl_cuda_synchronize(&g_cuda), "the seed-grid kernel");
    const std::vector<float> a = download_out(p);
    ok(kl_cuda_memset_d8(&g_cuda, p.out.p, 0xFF, p.out.bytes), "poisoning the output");
    launch_split(p, 0, splits, impl);
    ok(kl_cuda_synchronize(&g_cuda), "the split path");
    const std::vector<float> b = download_out(p);
    double d2 = 0, r2 = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) nonfinite++;
        d2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        r2 += double(a[i]) * a[i];
    }
    const double rel = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    std::printf("  check %s: split-KV at %u splits vs the seed kernel: ||diff|| / ||seed|| = %.2e, %zu non-finite\n",
                name, splits, rel, nonfinite);
    if (nonfinite != 0 || !(rel < 1e-2) || r2 == 0) die(std::string("split-KV output differs from the seed kernel's (") + name + ")");
}

// ---- report --------------------------------------------------------------------------

std::ostringstream g_json;
bool g_json_first = true;
// Split-KV fraction of copy by shape key + split count, for the long-sequence sweep.
std::map<std::string, double> g_split_frac;

// Every number written, by key: the chooser's row reads back the time this
// run measured for the launch it picks.
std::map<std::string, double> g_nums;

void json_num(const std::string &key, double v) {
    g_json << (g_json_first ? "" : ",\n") << "  \"" << key << "\": " << v;
    g_json_first = false;
    g_nums[key] = v;
}
void json_str(const std::string &key, const std::string &v) {
    g_json << (g_json_first ? "" : ",\n") << "  \"" << key << "\": \"" << v << "\"";
    g_json_first = false;
}

double gbps(uint64_t bytes, double us) { return bytes / (us * 1e3); }

// ---- the project's choice ----------------------------------------------------------

// What kl_paged_decode_gqa_{bf16,fp8}_choose takes for a shape of this
// program, as a caller would ask: no table (the compiled-in one where it
// has this card, else the rule), eager (this program times launches one by
// one), the handles that loaded, the caches aligned (cudaMalloc'd) and the
// persistent buffers kept (they are). alt: KL_PAGED_DECODE_GQA_BF16_*,
// which the fp8 enumerators equal.
struct ChooserPick {
    int alt;
    std::string name;  // the alternative's name in the spec, "none" when none applies
    uint32_t num_splits, num_ctas;
    kl_choice_source source;
};

const char *source_name(kl_choice_source s) {
    return s == KL_CHOICE_TABLE     ? "table"
           : s == KL_CHOICE_BUILTIN ? "compiled-in table"
           : s == KL_CHOICE_RULE    ? "rule"
                                    : "none";
}

ChooserPick chooser_pick(const Shape &s) {
    ChooserPick r;
    if (!s.fp8) {
        kl_paged_decode_gqa_bf16_kernels ks;
        ks.mma_seed = &g_k.attn_bf16_mma, ks.mma_split = &g_k.split_bf16_mma, ks.mma_persist = &g_k.persist_bf16;
        ks.bulk_seed = &g_k.attn_bf16_bulk, ks.bulk_persist = &g_k.persist_bf16_bulk;
        ks.tma_seed = &g_k.attn_bf16_tma, ks.tma_persist = &g_k.persist_bf16_tma;
        ks.scalar_seed = &g_k.attn_bf16, ks.scalar_split = &g_k.split_bf16;
        const kl_paged_decode_gqa_bf16_shape sh = {s.num_seqs, kNq, kNkv, kHd, kBs, s.window, s.seq_len, true, true};
        const kl_paged_decode_gqa_bf16_choice c = kl_paged_decode_gqa_bf16_choose(&sh, &g_dev, nullptr, KL_CHOICE_EAGER, &ks);
        r = {c.alternative, c.alternative >= 0 ? kl_paged_decode_gqa_bf16_op.alternatives[c.alternative] : "none",
             c.num_splits, c.num_ctas, c.source};
    } else {
        kl_paged_decode_gqa_fp8_kernels ks;
        ks.mma_seed = &g_k.attn_fp8_mma, ks.mma_split = &g_k.split_fp8_mma, ks.mma_persist = &g_k.persist_fp8;
        ks.bulk_seed = &g_k.attn_fp8_bulk, ks.bulk_persist = &g_k.persist_fp8_bulk;
        ks.tma_seed = &g_k.attn_fp8_tma, ks.tma_persist = &g_k.persist_fp8_tma;
        ks.scalar_seed = &g_k.attn_fp8, ks.scalar_split = &g_k.split_fp8;
        const kl_paged_decode_gqa_fp8_shape sh = {s.num_seqs, kNq, kNkv, kHd, kBs, s.window,
                                                  uint64_t{kBs} * kNkv * kHd, s.seq_len, true, true};
        const kl_paged_decode_gqa_fp8_choice c = kl_paged_decode_gqa_fp8_choose(&sh, &g_dev, nullptr, KL_CHOICE_EAGER, &ks);
        r = {c.alternative, c.alternative >= 0 ? kl_paged_decode_gqa_fp8_op.alternatives[c.alternative] : "none",
             c.num_splits, c.num_ctas, c.source};
    }
    return r;
}

// The key under which this run timed the picked launch at its tunables, of
// the shape whose rows are under `key` (bench_impl's, bench_persist's and
// bench_bulk's keys); "" for none.
std::string chooser_timing_key(const std::string &key, const ChooserPick &c) {
    const std::string n = std::to_string(c.alt == KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT ||
                                                 c.alt == KL_PAGED_DECODE_GQA_BF16_SCALAR_SPLIT
                                             ? c.num_splits
                                             : c.num_ctas);
    switch (c.alt) {
    case KL_PAGED_DECODE_GQA_BF16_MMA_SEED: return key + "_mma_seed_us";
    case KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT: return key + "_mma_split" + n + "_us";
    case KL_PAGED_DECODE_GQA_BF16_MMA_PERSIST: return key + "_mma_persist" + n + "_us";
    case KL_PAGED_DECODE_GQA_BF16_BULK_SEED: return key + "_mma_bulk_seed_us";
    case KL_PAGED_DECODE_GQA_BF16_BULK_PERSIST: return key + "_mma_bulk_persist" + n + "_us";
    case KL_PAGED_DECODE_GQA_BF16_TMA_SEED: return key + "_mma_tma_seed_us";
    case KL_PAGED_DECODE_GQA_BF16_TMA_PERSIST: return key + "_mma_tma_persist" + n + "_us";
    case KL_PAGED_DECODE_GQA_BF16_SCALAR_SEED: return key + "_seed_us";
    case KL_PAGED_DECODE_GQA_BF16_SCALAR_SPLIT: return key + "_split" + n + "_us";
    default: return "";
    }
}

// --trace: the kernels of `path` (bench/decode/trace.sh: PAGED_DECODE_TRACE
// defined) stamp each persistent block's phases into the device array
// paged_decode__trace (32 words a block: the global timer at stamp i in
// word i, the SM clock in word 16 + i, the block's piece count in word 14;
// kernels/paged_decode/paged_decode_bulk_gqa.cu says what each stamp
// marks). For each shape, kTraceRuns launches of the `_tma` persistent
// launcher, each alone (the array zeroed, events around it, synchronised):
// per stamp, over the blocks that reached it, the median and the latest
// time after the earliest block's entry (us), medians over the runs; the
// event time and the span from the first entry to the last consumers' end
// beside it. Keys trace_<shape>_s<i>_{med,max}_us, _event_us, _span_us.
void trace_timelines(const char *path) {
    constexpr int kTraceRuns = 9, kStamps = 14;
    std::vector<uint64_t> image;
    {
        kl_module tmod;
        load_image(path, "--trace", &image, &tmod);
        ok(kl_paged_decode_persist_bf16_gqa_tma_get(&g_k.persist_bf16_tma, &tmod), "--trace: the bf16 _tma kernel");
        ok(kl_paged_decode_persist_fp8_gqa_tma_get(&g_k.persist_fp8_tma, &tmod), "--trace: the fp8 _tma kernel");
        typedef int (*GetGlobalFn)(unsigned long long *, size_t *, void *, const char *);
        unsigned long long dptr = 0;
        size_t dbytes = 0;
        cu(symbol<GetGlobalFn>("cuModuleGetGlobal_v2")(&dptr, &dbytes, tmod.handle, "paged_decode__trace"),
           "cuModuleGetGlobal(paged_decode__trace): not a PAGED_DECODE_TRACE build?");
        const size_t nwords = dbytes / 8;
        void *trace = reinterpret_cast<void *>(static_cast<uintptr_t>(dptr));
        const std::vector<uint64_t> zeros(nwords, 0);
        std::vector<uint64_t> words(nwords);
        void *ev0, *ev1;
        cu(g_drv.event_create(&ev0, 0), "cuEventCreate");
        cu(g_drv.event_create(&ev1, 0), "cuEventCreate");
        const uint32_t sms = g_dev.sm_count;
        struct Case {
            const char *key;
            Shape shape;
            uint32_t ctas;
        };
        const Case cases[] = {
            {"1x1_bf16_128", Shape{1, 1, 0, false}, 128},
            {"1x256_bf16_128", Shape{1, 256, 0, false}, 128},
            {"1x32768_bf16_128", Shape{1, 32768, 0, false}, 128},
            {"32x4096_bf16_128", Shape{32, 4096, 0, false}, 128},
            {"32x4096_fp8_128", Shape{32, 4096, 0, true}, 128},
            {"32x4096_bf16_sms", Shape{32, 4096, 0, false}, sms},
        };
        auto median = [](std::vector<double> v) {
            if (v.empty()) return 0.0;
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        const char *names[kStamps] = {"entry", "ring set up", "griddep wait", "(3: not stamped since the one-pass scan)", "first tile found",
                                      "first copies issued", "first tile landed", "last piece computed",
                                      "last piece merged", "cut arrival counted", "last arrival merged",
                                      "consumers end", "2nd piece begins", "producers' last issue"};
        const int order[kStamps] = {0, 1, 2, 3, 4, 5, 6, 12, 13, 7, 8, 9, 10, 11};
        for (const Case &c : cases) {
            Problem p = make_problem(c.shape, 2);
            for (int w = 0; w < kWarmup; w++) launch_bulk_persist(p, w, c.ctas, true);
            std::vector<std::vector<double>> med(kStamps), mx(kStamps), clk(kStamps);
            std::vector<double> event_us, span_us, end_p10, end_p90;
            std::vector<double> sm_end(1024, 0.0);
            std::vector<int> sm_n(1024, 0);
            for (int run = 0; run < kTraceRuns; run++) {
                ok(kl_cuda_memcpy_htod(&g_cuda, trace, zeros.data(), dbytes), "--trace: zeroing the stamps");
                cu(g_drv.event_record(ev0, g_mma_stream), "cuEventRecord");
                launch_bulk_persist(p, kWarmup + run, c.ctas, true);
                cu(g_drv.event_record(ev1, g_mma_stream), "cuEventRecord");
                cu(g_drv.event_sync(ev1), "cuEventSynchronize");
                float ms = 0;
                cu(g_drv.event_elapsed(&ms, ev0, ev1), "cuEventElapsedTime");
                ok(kl_cuda_memcpy_dtoh(&g_cuda, words.data(), trace, dbytes), "--trace: reading the stamps");
                const uint32_t nb = std::min<uint32_t>(c.ctas, static_cast<uint32_t>(nwords / 32));
                uint64_t t0 = UINT64_MAX, tend = 0;
                for (uint32_t b = 0; b < nb; b++)
                    if (words[b * 32] != 0) t0 = std::min(t0, words[b * 32]);
                for (int i = 0; i < kStamps; i++) {
                    std::vector<double> v, cv;
                    for (uint32_t b = 0; b < nb; b++) {
                        const uint64_t t = words[b * 32 + i];
                        if (t == 0 || words[b * 32] == 0) continue;
                        v.push_back((t - t0) * 1e-3);
                        cv.push_back(static_cast<double>(words[b * 32 + 16 + i] - words[b * 32 + 16]));
                        if (i == 11) tend = std::max(tend, t);
                    }
                    if (v.empty()) continue;
                    med[i].push_back(median(v));
                    mx[i].push_back(*std::max_element(v.begin(), v.end()));
                    clk[i].push_back(median(cv));
                }
                {  // the consumers' ends: their spread, and which SMs end late run after run
                    std::vector<double> ends;
                    for (uint32_t b = 0; b < nb; b++) {
                        const uint64_t t = words[b * 32 + 11], sm = words[b * 32 + 15];
                        if (t == 0 || words[b * 32] == 0) continue;
                        ends.push_back((t - t0) * 1e-3);
                        if (sm != 0 && sm <= sm_end.size()) sm_end[sm - 1] += ends.back(), sm_n[sm - 1]++;
                    }
                    std::sort(ends.begin(), ends.end());
                    if (!ends.empty()) {
                        end_p10.push_back(ends[ends.size() / 10]);
                        end_p90.push_back(ends[ends.size() * 9 / 10]);
                    }
                }
                event_us.push_back(ms * 1e3);
                span_us.push_back(tend > t0 ? (tend - t0) * 1e-3 : 0.0);
            }
            uint32_t pieces = 0, active = 0;
            for (uint32_t b = 0; b < std::min<uint32_t>(c.ctas, static_cast<uint32_t>(nwords / 32)); b++)
                if (words[b * 32 + 14] != 0) pieces += static_cast<uint32_t>(words[b * 32 + 14]), active++;
            const std::string k = std::string("trace_") + c.key;
            std::printf("trace     %s: %u blocks at work, %u pieces; event %.1f us, first entry to last end %.1f us\n",
                        c.key, active, pieces, median(event_us), median(span_us));
            if (!end_p10.empty()) {
                std::vector<std::pair<double, int>> by_sm;
                for (uint32_t sm = 0; sm < sm_end.size(); sm++)
                    if (sm_n[sm] != 0) by_sm.push_back({sm_end[sm] / sm_n[sm], static_cast<int>(sm)});
                std::printf("          ends: p10 %.2f us, p90 %.2f us; mean end by SM,", median(end_p10),
                            median(end_p90));
                print_extremes(by_sm, 6, "sm");
                json_num(k + "_end_p10_us", median(end_p10));
                json_num(k + "_end_p90_us", median(end_p90));
            }
            json_num(k + "_event_us", median(event_us));
            json_num(k + "_span_us", median(span_us));
            for (const int i : order) {
                if (med[i].empty()) continue;
                std::printf("          s%-2d %-22s median %7.2f us  latest %7.2f us  (block's own clock: median %8.0f "
                            "cycles)\n",
                            i, names[i], median(med[i]), median(mx[i]), median(clk[i]));
                json_num(k + "_s" + std::to_string(i) + "_med_us", median(med[i]));
                json_num(k + "_s" + std::to_string(i) + "_max_us", median(mx[i]));
            }
        }
        g_drv.event_destroy(ev0);
        g_drv.event_destroy(ev1);
        kl_module_unload(&tmod);
    }
}

// --ab: the `_tma` persistent kernels of this build (A) against those of
// `path` (B, bench/decode/ab.sh), at the rule's grid, on 32 x 4096 bf16 and
// fp8 and 1 x 32768 bf16. A's and B's outputs are first checked against the
// _mma seed kernel's. Then kAbRounds rounds, each timing A
// then B (median of --runs launches each, KV sets rotated): the median over
// the rounds of B's time over A's (> 1: A is faster), and each one's
// fraction of the copy bandwidth measured in the same run. Keys
// ab_<shape>_{a_us,b_us,b_over_a,a_fraction_of_copy,b_fraction_of_copy}.
void ab_compare(const char *path) {
    constexpr int kAbRounds = 5;
    std::vector<uint64_t> image;
    kl_module bmod;
    load_image(path, "--ab", &image, &bmod);
    Kernels b = g_k;
    ok(kl_paged_decode_persist_bf16_gqa_tma_get(&b.persist_bf16_tma, &bmod), "--ab: B's bf16 _tma kernel");
    ok(kl_paged_decode_persist_fp8_gqa_tma_get(&b.persist_fp8_tma, &bmod), "--ab: B's fp8 _tma kernel");
    const Kernels a = g_k;
    double copy_gbps;
    {
        const size_t cbytes = 512u << 20;
        Buf src(cbytes), dst(cbytes);
        fill_random(src, false, 1);
        const double us = median_us([&](int) { cu(g_drv.memcpy_dtod(dst.addr(), src.addr(), cbytes), "cuMemcpyDtoD"); });
        copy_gbps = gbps(2 * cbytes, us);
    }
    std::printf("ab        copy %.1f GB/s; A = this build, B = %s\n", copy_gbps, path);
    json_num("ab_copy_gbps", copy_gbps);
    const uint32_t sms = g_dev.sm_count;
    struct Case {
        const char *key;
        Shape shape;
    };
    const Case cases[] = {{"32x4096_bf16", Shape{32, 4096, 0, false}},
                          {"32x4096_fp8", Shape{32, 4096, 0, true}},
                          {"1x32768_bf16", Shape{1, 32768, 0, false}}};
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    for (const Case &c : cases) {
        Problem p = make_problem(c.shape, 2);
        const uint32_t r = kl_paged_decode_persist_ctas(c.shape.num_seqs, kNkv, c.shape.seq_len, 0, sms);
        const std::string k = std::string("ab_") + c.key;
        check_matches_mma_seed(p, k.c_str(), "A's tma persistent at " + std::to_string(r) + " blocks",
                               [&] { launch_bulk_persist(p, 0, r, true); });
        g_k = b;
        check_matches_mma_seed(p, k.c_str(), "B's tma persistent at " + std::to_string(r) + " blocks",
                               [&] { launch_bulk_persist(p, 0, r, true); });
        std::vector<double> a_us, b_us, ratio;
        for (int round = 0; round < kAbRounds; round++) {
            g_k = a;
            a_us.push_back(median_us([&](int run) { launch_bulk_persist(p, run, r, true); }, g_mma_stream));
            g_k = b;
            b_us.push_back(median_us([&](int run) { launch_bulk_persist(p, run, r, true); }, g_mma_stream));
            ratio.push_back(b_us.back() / a_us.back());
        }
        g_k = a;
        check_persist_counters(p, k.c_str());
        const double am = median(a_us), bm = median(b_us), rm = median(ratio);
        const double af = gbps(p.kv_bytes_read(), am) / copy_gbps, bf = gbps(p.kv_bytes_read(), bm) / copy_gbps;
        std::printf("ab        %-13s %4u blocks: A %8.1f us (%.3f of copy)  B %8.1f us (%.3f of copy)  B/A %.3f "
                    "(rounds %.3f..%.3f)\n",
                    c.key, r, am, af, bm, bf, rm, *std::min_element(ratio.begin(), ratio.end()),
                    *std::max_element(ratio.begin(), ratio.end()));
        json_num(k + "_a_us", am);
        json_num(k + "_b_us", bm);
        json_num(k + "_b_over_a", rm);
        json_num(k + "_a_fraction_of_copy", af);
        json_num(k + "_b_fraction_of_copy", bf);
    }
    kl_module_unload(&bmod);
}

}  // namespace

int main(int argc, char **argv) {
    const char *json_path = nullptr;
    bool only_gqa = false, only_fixed = false;
    const char *trace_path = nullptr, *ab_path = nullptr;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            g_runs = std::max(3, std::atoi(argv[++i]));
        else if (std::strcmp(argv[i], "--only-gqa") == 0)
            only_gqa = true;
        else if (std::strcmp(argv[i], "--only-fixed") == 0)
            only_fixed = true;
        else if (std::strcmp(argv[i], "--tables-in-order") == 0)
            g_tables_in_order = true;
        else if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
            trace_path = argv[++i];
        else if (std::strcmp(argv[i], "--ab") == 0 && i + 1 < argc)
            ab_path = argv[++i];
        else
            die(std::string("unknown argument ") + argv[i] +
                " (decode_bench [--json FILE] [--runs N] [--only-gqa] [--only-fixed] [--tables-in-order] [--trace CUBIN] "
                "[--ab CUBIN])");
    }
    init_decode_driver();
    char name[256] = "?";
    kl_cuda_device_name(&g_cuda, name, sizeof name);
    ok(kl_cuda_device_describe(&g_cuda, &g_dev), "kl_cuda_device_describe");
    const uint32_t sms = g_dev.sm_count;
    std::printf("decode_bench on %s (%u SMs), median of %d runs after %d warm-up, KV sets rotated, block tables %s\n",
                name, sms, g_runs, kWarmup, g_tables_in_order ? "in order" : "shuffled");
    json_str("device", name);
    json_str("block_tables", g_tables_in_order ? "in order" : "shuffled");
    json_num("sm_count", sms);
    json_num("runs", g_runs);

    kl_module mod;
    ok(kl_module_load(&g_cuda.base, kl_fatbin_paged_decode_gqa4_d128, kl_fatbin_paged_decode_gqa4_d128_size, &mod),
       "loading the gqa4_d128 fatbin");
    ok(kl_paged_decode_attn_bf16_gqa_get(&g_k.attn_bf16, &mod), "kl_paged_decode_attn_bf16_gqa_get");
    ok(kl_paged_decode_attn_fp8_gqa_get(&g_k.attn_fp8, &mod), "kl_paged_decode_attn_fp8_gqa_get");
    ok(kl_paged_decode_split_bf16_gqa_get(&g_k.split_bf16, &mod), "kl_paged_decode_split_bf16_gqa_get");
    ok(kl_paged_decode_split_fp8_gqa_get(&g_k.split_fp8, &mod), "kl_paged_decode_split_fp8_gqa_get");
    ok(kl_paged_decode_split_combine_get(&g_k.combine, &mod), "kl_paged_decode_split_combine_get");
    ok(kl_paged_decode_attn_bf16_gqa_mma_get(&g_k.attn_bf16_mma, &mod), "kl_paged_decode_attn_bf16_gqa_mma_get");
    ok(kl_paged_decode_attn_fp8_gqa_mma_get(&g_k.attn_fp8_mma, &mod), "kl_paged_decode_attn_fp8_gqa_mma_get");
    ok(kl_paged_decode_split_bf16_gqa_mma_get(&g_k.split_bf16_mma, &mod), "kl_paged_decode_split_bf16_gqa_mma_get");
    ok(kl_paged_decode_split_fp8_gqa_mma_get(&g_k.split_fp8_mma, &mod), "kl_paged_decode_split_fp8_gqa_mma_get");
    ok(kl_paged_decode_persist_bf16_gqa_mma_get(&g_k.persist_bf16, &mod), "kl_paged_decode_persist_bf16_gqa_mma_get");
    ok(kl_paged_decode_persist_fp8_gqa_mma_get(&g_k.persist_fp8, &mod), "kl_paged_decode_persist_fp8_gqa_mma_get");
    g_have_bulk = kl_paged_decode_attn_bf16_gqa_bulk_get(&g_k.attn_bf16_bulk, &mod) == KL_SUCCESS &&
                  kl_paged_decode_attn_fp8_gqa_bulk_get(&g_k.attn_fp8_bulk, &mod) == KL_SUCCESS &&
                  kl_paged_decode_persist_bf16_gqa_bulk_get(&g_k.persist_bf16_bulk, &mod) == KL_SUCCESS &&
                  kl_paged_decode_persist_fp8_gqa_bulk_get(&g_k.persist_fp8_bulk, &mod) == KL_SUCCESS &&
                  kl_paged_decode_attn_bf16_gqa_tma_get(&g_k.attn_bf16_tma, &mod) == KL_SUCCESS &&
                  kl_paged_decode_attn_fp8_gqa_tma_get(&g_k.attn_fp8_tma, &mod) == KL_SUCCESS &&
                  kl_paged_decode_persist_bf16_gqa_tma_get(&g_k.persist_bf16_tma, &mod) == KL_SUCCESS &&
                  kl_paged_decode_persist_fp8_gqa_tma_get(&g_k.persist_fp8_tma, &mod) == KL_SUCCESS;
    if (!g_have_bulk) std::printf("bulk      the *_gqa_bulk rows are not measured: %s\n", kl_last_error_message());
    json_num("bulk_supported", g_have_bulk ? 1 : 0);
    g_have_pdl = kl_paged_decode_split_combine_pdl_get(&g_k.combine_pdl, &mod) == KL_SUCCESS;
    if (g_have_pdl) cu(g_stream_create(&g_mma_stream, 0), "cuStreamCreate");
    json_num("mma_split_combine_pdl", g_have_pdl ? 1 : 0);
    if (!kl_paged_decode_gqa_applies(&g_k.attn_bf16, kNq, kNkv, kHd)) die("the gqa4_d128 kernels do not fit 32/8 heads");
    if (trace_path != nullptr || ab_path != nullptr) {
        if (!g_have_bulk || !g_have_pdl) die("--trace/--ab: the copy-engine kernels do not load here");
        if (trace_path != nullptr) trace_timelines(trace_path);
        if (ab_path != nullptr) ab_compare(ab_path);
        if (json_path != nullptr) {
            FILE *f = std::fopen(json_path, "w");
            if (f == nullptr) die(std::string("cannot write ") + json_path);
            std::fprintf(f, "{\n%s\n}\n", g_json.str().c_str());
            std::fclose(f);
        }
        kl_module_unload(&mod);
        return 0;
    }

    // ---- copy bandwidth
    double copy_gbps;
    {
        const size_t bytes = 512u << 20;
        Buf src(bytes), dst(bytes);
        fill_random(src, false, 1);
        const double us = median_us([&](int) { cu(g_drv.memcpy_dtod(dst.addr(), src.addr(), bytes), "cuMemcpyDtoD"); });
        copy_gbps = gbps(2 * uint64_t{bytes}, us);
        std::printf("copy      cuMemcpyDtoD 512 MiB: %8.1f us  %7.1f GB/s (read + write)\n", us, copy_gbps);
        json_num("copy_gbps", copy_gbps);
    }

    const std::vector<uint32_t> sweep = {1, 2, 4, 8, 16};
    // One shape's rows for one implementation, on a problem built once per
    // shape (the scalar and the _mma rows read the same caches). Keys:
    // <key>_seed_us, <key>_split<N>_us, <key>_dispatch_*.
    auto bench_impl = [&](const std::string &k, const Problem &p, Impl impl, const std::vector<uint32_t> &splits_list,
                          double *dispatch_us_out) {
        const Shape &s = p.shape;
        const uint32_t r = rule(p);
        kl_stream st = impl == Impl::kMma ? g_mma_stream : nullptr;
        std::printf("%-13s %u seqs x %u%s, %s, %.0f MiB of KV read, %zu sets; rule: %u split(s)\n", k.c_str(),
                    s.num_seqs, s.seq_len, s.window ? (" (window " + std::to_string(s.window) + ")").c_str() : "",
                    s.fp8 ? "fp8" : "bf16", p.kv_bytes_read() / 1048576.0, p.sets.size(), r);
        check_split_matches_seed(p, r > 1 ? r : 2, k.c_str(), impl);
        const double seed_us = median_us([&](int run) { launch_seed(p, run, impl); }, st);
        std::printf("  seed grid          %8.1f us  %7.1f GB/s  %.3f of copy\n", seed_us,
                    gbps(p.kv_bytes_read(), seed_us), gbps(p.kv_bytes_read(), seed_us) / copy_gbps);
        json_num(k + "_seed_us", seed_us);
        for (uint32_t n : splits_list) {
            const double us = median_us([&](int run) { launch_split(p, run, n, impl); }, st);
            std::printf("  split-KV %2u splits %8.1f us  %7.1f GB/s  %.3f of copy%s\n", n, us,
                        gbps(p.kv_bytes_read(), us), gbps(p.kv_bytes_read(), us) / copy_gbps,
                        n == r ? "  (the rule's count)" : "");
            json_num(k + "_split" + std::to_string(n) + "_us", us);
            g_split_frac[k + "/" + std::to_string(n)] = gbps(p.kv_bytes_read(), us) / copy_gbps;
        }
        const double dus = median_us([&](int run) { launch_dispatch(p, run, impl); }, st);
        const double frac = gbps(p.kv_bytes_read(), dus) / copy_gbps;
        std::printf("  dispatch (%2u)      %8.1f us  %7.1f GB/s  %.3f of copy  %.3g Mtokens/s\n", r, dus,
                    gbps(p.kv_bytes_read(), dus), frac, p.tokens() / dus);
        json_num(k + "_rule_splits", r);
        json_num(k + "_dispatch_us", dus);
        json_num(k + "_kv_bytes", static_cast<double>(p.kv_bytes_read()));
        json_num(k + "_dispatch_gbps", gbps(p.kv_bytes_read(), dus));
        json_num(k + "_dispatch_fraction_of_copy", frac);
        json_num(k + "_seed_fraction_of_copy", gbps(p.kv_bytes_read(), seed_us) / copy_gbps);
        if (dispatch_us_out) *dispatch_us_out = dus;
        return r;
    };
    // The persistent rows of a shape (issue 10's long-sequence schedule):
    // the grid swept over half the SMs, 4 fewer, the SMs and twice them
    // (a second wave), and the rule's pick (kl_paged_decode_persist_ctas),
    // beside the _mma dispatch time `old_us` measured on the same problem.
    // Keys <key>_persist<N>_us, <key>_persist_rule_*, <key>_persist_best_*.
    auto bench_persist = [&](const std::string &k, const Problem &p, double old_us, double *rule_us_out) {
        const Shape &s = p.shape;
        const uint32_t r = kl_paged_decode_persist_ctas(s.num_seqs, kNkv, s.seq_len, s.window, sms);
        std::vector<uint32_t> list = {sms / 2, sms - 4, sms, 2 * sms};
        if (std::find(list.begin(), list.end(), r) == list.end()) list.push_back(r);
        check_persist_matches_seed(p, r, k.c_str());
        uint32_t best_n = 0;
        double best_us = 0, rule_us = 0;
        for (uint32_t n : list) {
            const double us = median_us([&](int run) { launch_persist(p, run, n); }, g_mma_stream);
            const double frac = gbps(p.kv_bytes_read(), us) / copy_gbps;
            std::printf("  persistent %4u blocks %8.1f us  %7.1f GB/s  %.3f of copy  %.3fx the _mma dispatch%s\n", n,
                        us, gbps(p.kv_bytes_read(), us), frac, old_us / us, n == r ? "  (the rule's count)" : "");
            json_num(k + "_persist" + std::to_string(n) + "_us", us);
            json_num(k + "_persist" + std::to_string(n) + "_fraction_of_copy", frac);
            if (best_n == 0 || us < best_us) best_n = n, best_us = us;
            if (n == r) rule_us = us;
        }
        check_persist_counters(p, k.c_str());
        std::printf("  persistent: rule %u blocks %.3f of copy, best %u blocks %.3f (the rule %.3f of the best); "
                    "over the _mma dispatch %.3fx\n",
                    r, gbps(p.kv_bytes_read(), rule_us) / copy_gbps, best_n,
                    gbps(p.kv_bytes_read(), best_us) / copy_gbps, best_us / rule_us, old_us / rule_us);
        json_num(k + "_persist_rule_ctas", r);
        json_num(k + "_persist_rule_us", rule_us);
        json_num(k + "_persist_rule_fraction_of_copy", gbps(p.kv_bytes_read(), rule_us) / copy_gbps);
        json_num(k + "_persist_best_ctas", best_n);
        json_num(k + "_persist_best_us", best_us);
        json_num(k + "_persist_best_fraction_of_copy", gbps(p.kv_bytes_read(), best_us) / copy_gbps);
        json_num(k + "_persist_rule_over_best", best_us / rule_us);
        json_num(k + "_persist_speedup_over_mma_dispatch", old_us / rule_us);
        if (rule_us_out) *rule_us_out = rule_us;
    };
    // The copy-engine rows of a shape (issue 21): the seed grid, the
    // persistent launcher swept as bench_persist sweeps (and the rule's
    // grid), each beside the _mma dispatch time `old_us` of the same
    // problem; then 8 launches queued back to back (no event between them:
    // what a decode loop sees, where the persistent bulk launcher's PDL
    // overlaps its launch and prologue with the previous launch's tail),
    // per launch, beside the persistent _mma launcher's. Keys <key>_bulk_*.
    auto bench_bulk = [&](const std::string &k0, const Problem &p, double old_us, double *rule_us_out, bool maps) {
        const Shape &s = p.shape;
        const std::string k = k0 + (maps ? "_tma" : "_bulk"), kind = maps ? "tma " : "bulk";
        const uint32_t r = kl_paged_decode_persist_ctas(s.num_seqs, kNkv, s.seq_len, s.window, sms);
        check_bulk_matches_seed(p, r, k.c_str(), maps);
        const double seed_us = median_us([&](int run) { launch_bulk_seed(p, run, maps); }, g_mma_stream);
        std::printf("  %s seed grid        %8.1f us  %7.1f GB/s  %.3f of copy  %.3fx the _mma dispatch\n",
                    kind.c_str(), seed_us, gbps(p.kv_bytes_read(), seed_us),
                    gbps(p.kv_bytes_read(), seed_us) / copy_gbps, old_us / seed_us);
        json_num(k + "_seed_us", seed_us);
        json_num(k + "_seed_fraction_of_copy", gbps(p.kv_bytes_read(), seed_us) / copy_gbps);
        std::vector<uint32_t> list = {sms / 2, sms - 4, sms, 2 * sms};
        if (std::find(list.begin(), list.end(), r) == list.end()) list.push_back(r);
        uint32_t best_n = 0;
        double best_us = 0, rule_us = 0;
        for (uint32_t n : list) {
            const double us = median_us([&](int run) { launch_bulk_persist(p, run, n, maps); }, g_mma_stream);
            const double frac = gbps(p.kv_bytes_read(), us) / copy_gbps;
            std::printf("  %s persistent %4u blocks %8.1f us  %7.1f GB/s  %.3f of copy  %.3fx the _mma dispatch%s\n",
                        kind.c_str(), n, us, gbps(p.kv_bytes_read(), us), frac, old_us / us,
                        n == r ? "  (the rule's count)" : "");
            json_num(k + "_persist" + std::to_string(n) + "_us", us);
            if (best_n == 0 || us < best_us) best_n = n, best_us = us;
            if (n == r) rule_us = us;
        }
        check_persist_counters(p, k.c_str());
        if (maps) {
            // The same launch with Q's rows off 16 bytes (scalar Q loads),
            // right after the aligned one: > 1 when the 16-byte loads pay.
            const double odd_us = median_us([&](int run) { launch_bulk_persist(p, run, r, maps, true); }, g_mma_stream);
            std::printf("  %s persistent %4u blocks, Q rows off 16 bytes (scalar Q loads) %8.1f us: %.3fx the aligned "
                        "row's time\n",
                        kind.c_str(), r, odd_us, odd_us / rule_us);
            json_num(k + "_scalar_q_over_vector_q", odd_us / rule_us);
            check_persist_counters(p, (k + " (Q off 16 bytes)").c_str());
            if (!s.fp8) {
                // The same launch reading the buffers as [block, kv head, slot,
                // d] (a head's page slice one 4 KiB run, not 16 rows 2 KiB
                // apart): < 1 when the contract's token-major rows cost DRAM
                // time. Timing only: these maps read other bytes.
                const double hm_us = median_us([&](int run) { launch_bulk_persist(p, run, r, maps, false, true); },
                                               g_mma_stream);
                std::printf("  %s persistent %4u blocks, K and V read as [block, kv head, slot, d] (timing only) "
                            "%8.1f us: %.3fx the contract layout's time\n",
                            kind.c_str(), r, hm_us, hm_us / rule_us);
                json_num(k + "_head_major_over_contract", hm_us / rule_us);
                check_persist_counters(p, (k + " (head-major maps)").c_str());
            }
        }
        constexpr int kB2b = 8;
        const double b2b_us =
            median_us([&](int run) {
                for (int i = 0; i < kB2b; i++) launch_bulk_persist(p, run * kB2b + i, r, maps);
            }, g_mma_stream) / kB2b;
        const double b2b_mma_us =
            median_us([&](int run) {
                for (int i = 0; i < kB2b; i++) launch_persist(p, run * kB2b + i, r);
            }, g_mma_stream) / kB2b;
        check_persist_counters(p, (k + " (back to back)").c_str());
        const ChooserPick pick = chooser_pick(s);
        std::printf("  %s persistent: rule %u blocks %.3f of copy, best %u blocks %.3f (the rule %.3f of the best); "
                    "over the _mma dispatch %.3fx; %d back to back: %.1f us a launch (%.3f of copy; persistent _mma "
                    "%.1f us, %.3f); the chooser's pick: %s\n",
                    kind.c_str(), r, gbps(p.kv_bytes_read(), rule_us) / copy_gbps, best_n,
                    gbps(p.kv_bytes_read(), best_us) / copy_gbps, best_us / rule_us, old_us / rule_us, kB2b, b2b_us,
                    gbps(p.kv_bytes_read(), b2b_us) / copy_gbps, b2b_mma_us,
                    gbps(p.kv_bytes_read(), b2b_mma_us) / copy_gbps, pick.name.c_str());
        json_num(k + "_persist_rule_ctas", r);
        json_num(k + "_persist_rule_us", rule_us);
        json_num(k + "_persist_rule_fraction_of_copy", gbps(p.kv_bytes_read(), rule_us) / copy_gbps);
        json_num(k + "_persist_best_ctas", best_n);
        json_num(k + "_persist_best_fraction_of_copy", gbps(p.kv_bytes_read(), best_us) / copy_gbps);
        json_num(k + "_persist_rule_over_best", best_us / rule_us);
        json_num(k + "_speedup_over_mma_dispatch", old_us / rule_us);
        json_num(k + "_b2b_us", b2b_us);
        json_num(k + "_b2b_fraction_of_copy", gbps(p.kv_bytes_read(), b2b_us) / copy_gbps);
        json_num(k0 + "_persist_b2b_us", b2b_mma_us);
        json_num(k0 + "_persist_b2b_fraction_of_copy", gbps(p.kv_bytes_read(), b2b_mma_us) / copy_gbps);
        json_num(k + "_pick", pick.alt);  // KL_PAGED_DECODE_GQA_BF16_*: the former kl_paged_decode_gqa_path's numbers
        if (rule_us_out) *rule_us_out = rule_us;
    };
    // What the chooser picks for a shape whose rows have all been timed
    // (keys <key>_chooser_*), and that launch's time from those rows: no
    // launch of its own, so "not timed" where its tunables are none the
    // rows swept (a compiled-in table's other count, say).
    auto report_choice = [&](const std::string &key, const Problem &p) {
        const ChooserPick c = chooser_pick(p.shape);
        const std::string tk = chooser_timing_key(key, c);
        const auto it = g_nums.find(tk);
        std::printf("  the chooser's pick (eager, no table): %s, num_splits %u, num_ctas %u, from the %s", c.name.c_str(),
                    c.num_splits, c.num_ctas, source_name(c.source));
        json_str(key + "_chooser_alt", c.name);
        json_str(key + "_chooser_source", source_name(c.source));
        json_num(key + "_chooser_num_splits", c.num_splits);
        json_num(key + "_chooser_num_ctas", c.num_ctas);
        if (it == g_nums.end()) {
            std::printf("; not timed in this run\n");
            return;
        }
        std::printf(": %.1f us, %.3f of copy (%s)\n", it->second, gbps(p.kv_bytes_read(), it->second) / copy_gbps,
                    tk.c_str());
        json_num(key + "_chooser_us", it->second);
        json_num(key + "_chooser_fraction_of_copy", gbps(p.kv_bytes_read(), it->second) / copy_gbps);
    };
    // The scalar rows of a shape, then (mma) the _mma rows on the same
    // problem, then (persist) the persistent rows and, where they load,
    // the copy-engine rows; then (persist) the chooser's pick.
    auto bench_shape = [&](const char *key, const Shape &s, const std::vector<uint32_t> &splits_list,
                           double *dispatch_us_out, bool mma = false, double *mma_us_out = nullptr,
                           bool persist = false, double *persist_us_out = nullptr, double *bulk_us_out = nullptr) {
        uint32_t max_splits = 1;
        for (uint32_t x : splits_list) max_splits = std::max(max_splits, x);
        Problem p = make_problem(s, std::max(max_splits, KL_PAGED_DECODE_MAX_SPLITS));
        const uint32_t r = bench_impl(key, p, Impl::kScalar, splits_list, dispatch_us_out);
        if (mma) {
            double mus = 0;
            check_mma_matches_scalar(p, key);
            bench_impl(std::string(key) + "_mma", p, Impl::kMma, splits_list, &mus);
            if (mma_us_out) *mma_us_out = mus;
            if (persist) bench_persist(std::string(key) + "_mma", p, mus, persist_us_out);
            if (persist && g_have_bulk) {
                double ignored = 0;
                bench_bulk(std::string(key) + "_mma", p, mus, &ignored, false);
                bench_bulk(std::string(key) + "_mma", p, mus, bulk_us_out, true);
            }
            if (persist) report_choice(key, p);
        }
        return r;
    };

    // The fixed cost of a persistent launch (issue 21's 1 x 32768 miss).
    auto fixed_sweep = [&]() {
        if (!g_have_bulk) return;
        // The fixed cost of one `_tma` persistent launch (issue 21's 1 x 32768
        // miss): the time of 1 sequence at 2048 .. 32768 positions (every
        // unit cut between blocks) and of 32 sequences at 256 .. 4096 (whole
        // units at 128 blocks), at the rule's grid and at one block an SM,
        // fitted to t = fixed + bytes / rate by least squares. The intercept
        // is what a launch costs beyond streaming its bytes (launch, ramp,
        // block merges, records, the last arrival's merge); the slope the
        // streaming rate once it runs. Keys fixed_<seqs>_<type>_ctas<N>_*.
        // The floor: 1 sequence of 1 position (8 units of one tile: 8 blocks
        // work, whole units, the rest leave after the scan) and of 256 (128
        // tiles: one a block, every unit cut into 16 records), bf16, the
        // rule's 128 blocks and one block an SM.
        for (const uint32_t nb : {kl_paged_decode_persist_ctas(1, kNkv, 32768, 0, sms), sms}) {
            for (const uint32_t len : {1u, 256u}) {
                Problem p = make_problem(Shape{1, len, 0, false}, 2);
                const double us = median_us([&](int run) { launch_bulk_persist(p, run, nb, true); }, g_mma_stream);
                const double mus = median_us([&](int run) { launch_persist(p, run, nb); }, g_mma_stream);
                check_persist_counters(p, "fixed floor");
                std::printf("fixed     floor: 1 x %u at %u blocks: tma persistent %.1f us, _mma persistent %.1f us\n", len,
                            nb, us, mus);
                json_num("fixed_floor_len" + std::to_string(len) + "_ctas" + std::to_string(nb) + "_us", us);
                json_num("fixed_floor_len" + std::to_string(len) + "_ctas" + std::to_string(nb) + "_mma_us", mus);
            }
        }
        for (const uint32_t nseq : {1u, 32u}) {
            for (const bool fp8 : {false, true}) {
                const std::vector<uint32_t> lens = nseq == 1 ? std::vector<uint32_t>{2048, 4096, 8192, 16384, 32768}
                                                             : std::vector<uint32_t>{256, 512, 1024, 2048, 4096};
                const uint32_t r = kl_paged_decode_persist_ctas(nseq, kNkv, lens.back(), 0, sms);
                // Beside the `_tma` launcher, the `_mma` persistent one (no PDL, no
                // copy engine) at the rule's grid: which fixed cost is the copy-engine kernel's own.
                for (const auto &[tma, nb] : {std::pair<bool, uint32_t>{true, r}, {true, sms}, {false, r}}) {
                    const std::string k = "fixed_" + std::to_string(nseq) + (fp8 ? "_fp8" : "_bf16") +
                                          (tma ? "" : "_mma") + "_ctas" + std::to_string(nb);
                    std::vector<double> xs, ys;
                    std::printf("fixed     %s: %u seqs, %s persistent at %u blocks:", fp8 ? "fp8 " : "bf16", nseq,
                                tma ? "tma" : "_mma", nb);
                    for (const uint32_t len : lens) {
                        Problem p = make_problem(Shape{nseq, len, 0, fp8}, 2);
                        const double us = median_us(
                            [&](int run) {
                                if (tma)
                                    launch_bulk_persist(p, run, nb, true);
                                else
                                    launch_persist(p, run, nb);
                            },
                            g_mma_stream);
                        check_persist_counters(p, k.c_str());
                        xs.push_back(static_cast<double>(p.kv_bytes_read()));
                        ys.push_back(us);
                        std::printf(" %u: %.1f us", len, us);
                        json_num(k + "_len" + std::to_string(len) + "_us", us);
                    }
                    double mx = 0, my = 0, sxx = 0, sxy = 0;
                    for (size_t i = 0; i < xs.size(); i++) mx += xs[i] / xs.size(), my += ys[i] / ys.size();
                    for (size_t i = 0; i < xs.size(); i++)
                        sxx += (xs[i] - mx) * (xs[i] - mx), sxy += (xs[i] - mx) * (ys[i] - my);
                    const double slope = sxy / sxx, fixed = my - slope * mx;  // us a byte, us
                    const double rate = 1e-3 / slope;                          // GB/s
                    std::printf("\n          fit: %.2f us fixed + bytes at %.0f GB/s (%.3f of copy)\n", fixed, rate,
                                rate / copy_gbps);
                    json_num(k + "_fixed_us", fixed);
                    json_num(k + "_stream_gbps", rate);
                    json_num(k + "_stream_fraction_of_copy", rate / copy_gbps);
                }
            }
        }
    };
    if (only_fixed) {
        fixed_sweep();
        if (json_path != nullptr) {
            FILE *f = std::fopen(json_path, "w");
            if (f == nullptr) die(std::string("cannot write ") + json_path);
            std::fprintf(f, "{\n%s\n}\n", g_json.str().c_str());
            std::fclose(f);
        }
        return 0;
    }

    double bf16_us = 0, fp8_us = 0, bf16_mma_us = 0, fp8_mma_us = 0, bf16_per_us = 0, fp8_per_us = 0;
    double bf16_bulk_us = 0, fp8_bulk_us = 0;
    bench_shape("gqa_bf16", Shape{32, 4096, 0, false}, sweep, &bf16_us, true, &bf16_mma_us, true, &bf16_per_us,
                &bf16_bulk_us);
    bench_shape("gqa_fp8", Shape{32, 4096, 0, true}, sweep, &fp8_us, true, &fp8_mma_us, true, &fp8_per_us,
                &fp8_bulk_us);
    if (g_have_bulk) {
        std::printf("tma persistent fp8 / bf16 tokens/s (rule's grid): %.3f (target >= 1.8)\n",
                    bf16_bulk_us / fp8_bulk_us);
        json_num("tma_fp8_over_bf16_tokens_per_s", bf16_bulk_us / fp8_bulk_us);
    }
    std::printf("persistent fp8 / bf16 tokens/s (rule's grid): %.3f (target >= 1.6)\n", bf16_per_us / fp8_per_us);
    json_num("persist_fp8_over_bf16_tokens_per_s", bf16_per_us / fp8_per_us);
    std::printf("fp8 / bf16 tokens/s (dispatch): %.3f scalar, %.3f _mma (target >= 1.6); _mma fp8 over scalar bf16 "
                "%.3f; _mma bf16 over scalar bf16 %.3f\n",
                bf16_us / fp8_us, bf16_mma_us / fp8_mma_us, bf16_us / fp8_mma_us, bf16_us / bf16_mma_us);
    json_num("fp8_over_bf16_tokens_per_s", bf16_us / fp8_us);
    json_num("mma_fp8_over_bf16_tokens_per_s", bf16_mma_us / fp8_mma_us);
    json_num("mma_fp8_over_scalar_bf16_tokens_per_s", bf16_us / fp8_mma_us);
    json_num("mma_bf16_over_scalar_bf16", bf16_us / bf16_mma_us);
    bool pdl_failed = false;
    if (!only_gqa) {

    {
        // Issue 5's sweep: which split count brings one long sequence closest
        // to the copy bandwidth (8 x S blocks on the SMs: 15 -> 120 blocks,
        // under one wave; 16.5 fills one wave of 132; 33 -> two whole waves),
        // for the scalar and the _mma split kernels.
        std::vector<uint32_t> counts = {4, 8, 12, 15, 16, 17, 20, 24, 32, 33, 48, 64};
        const uint32_t r = kl_paged_decode_num_splits(1, kNkv, 32768, 0, kBs, sms);
        if (std::find(counts.begin(), counts.end(), r) == counts.end()) counts.push_back(r);
        double dus = 0, mma_dus = 0;
        bench_shape("long_seq", Shape{1, 32768, 0, false}, counts, &dus, true, &mma_dus, true);
        // bench_impl recorded each count's fraction of copy; the best of the
        // sweep beside the rule's choice.
        for (const std::string key : {"long_seq", "long_seq_mma"}) {
            uint32_t best_n = 0;
            double best = 0, at_rule = 0;
            std::printf("  sweep %s 1 x 32768 (bf16 GQA, partial + combine), fraction of copy:", key.c_str());
            for (uint32_t n : counts) {
                const double f = g_split_frac.at(key + "/" + std::to_string(n));
                std::printf(" %u: %.3f", n, f);
                json_num(key + "_sweep_split" + std::to_string(n) + "_fraction_of_copy", f);
                if (best_n == 0 || f > best) best_n = n, best = f;
                if (n == r) at_rule = f;
            }
            std::printf("\n  best split count %u: %.3f of copy; the rule's (%u): %.3f of copy (%.3f of the best)\n",
                        best_n, best, r, at_rule, at_rule / best);
            json_num(key + "_sweep_best_splits", best_n);
            json_num(key + "_sweep_best_fraction_of_copy", best);
            json_num(key + "_sweep_rule_splits", r);
            json_num(key + "_sweep_rule_fraction_of_copy", at_rule);
        }
    }

    {
        // The fp8 cache at 1 x 32768 (64 MiB): the old schedule at the rule's
        // count and at 12, then the persistent rows.
        const uint32_t r = kl_paged_decode_num_splits(1, kNkv, 32768, 0, kBs, sms);
        double dus = 0;
        bench_shape("long_seq_fp8", Shape{1, 32768, 0, true}, {12, r}, &dus, true, nullptr, true);
    }

    fixed_sweep();

    std::vector<double> window_us;
    for (uint32_t len : {8192u, 16384u, 32768u}) {
        double dus = 0;
        const std::string key = "window4096_len" + std::to_string(len);
        bench_shape(key.c_str(), Shape{32, len, 4096, false}, {}, &dus);
        window_us.push_back(dus);
    }
    const double wmax = *std::max_element(window_us.begin(), window_us.end());
    const double wmin = *std::min_element(window_us.begin(), window_us.end());
    std::printf("sliding window 4096 over 8192 / 16384 / 32768: %.1f / %.1f / %.1f us, max / min %.3f\n",
                window_us[0], window_us[1], window_us[2], wmax / wmin);
    json_num("window_max_over_min", wmax / wmin);

    // ---- programmatic dependent launch: partial + combine, plain vs PDL
    if (kl_paged_decode_split_combine_pdl_get(&g_k.combine_pdl, &mod) != KL_SUCCESS) {
        std::printf("pdl       not measured: %s\n", kl_last_error_message());
        json_num("pdl_supported", 0);
    } else {
        json_num("pdl_supported", 1);
        kl_stream stream = nullptr;
        cu(g_stream_create(&stream, 0), "cuStreamCreate");
        struct PdlCase {
            const char *key;
            Shape shape;
            uint32_t splits;  // 0: the rule's count
        };
        const PdlCase pdl_cases[] = {
            {"long_seq", Shape{1, 32768, 0, false}, 0},
            {"short_seq", Shape{1, 2048, 0, false}, 0},
            {"gqa_bf16", Shape{32, 4096, 0, false}, 4},
        };
        for (const PdlCase &pc : pdl_cases) {
            Problem p = make_problem(pc.shape, KL_PAGED_DECODE_MAX_SPLITS);
            uint32_t n = pc.splits ? pc.splits : rule(p);
            if (n < 2) n = 2;  // a split path needs a combine
            const std::string k = std::string("pdl_") + pc.key;
            // Bit for bit: the same partial, the same combine code.
            launch_pair(p, 0, n, false, stream);
            ok(kl_cuda_synchronize(&g_cuda), "partial + combine");
            const std::vector<float> plain_out = download_out(p);
            ok(kl_cuda_memset_d8(&g_cuda, p.out.p, 0xFF, p.out.bytes), "poisoning the output");
            ok(kl_cuda_memset_d8(&g_cuda, p.ws.p, 0xFF, p.ws.bytes), "poisoning the workspace");
            launch_pair(p, 0, n, true, stream);
            ok(kl_cuda_synchronize(&g_cuda), "partial + PDL combine");
            const std::vector<float> pdl_out = download_out(p);
            const bool same = std::memcmp(plain_out.data(), pdl_out.data(), plain_out.size() * sizeof(float)) == 0;
            const double plain_us = median_us([&](int run) { launch_pair(p, run, n, false, stream); }, stream);
            const double pdl_us = median_us([&](int run) { launch_pair(p, run, n, true, stream); }, stream);
            std::printf("pdl       %u seqs x %u, %u splits: partial + combine %8.1f us, + PDL combine %8.1f us, "
                        "gain %.3fx (%+.1f us)%s\n",
                        p.shape.num_seqs, p.shape.seq_len, n, plain_us, pdl_us, plain_us / pdl_us, pdl_us - plain_us,
                        same ? "" : "  OUTPUT DIFFERS FROM THE PLAIN COMBINE'S");
            json_num(k + "_splits", n);
            json_num(k + "_plain_us", plain_us);
            json_num(k + "_pdl_us", pdl_us);
            json_num(k + "_gain", plain_us / pdl_us);
            json_num(k + "_bitwise_equal", same ? 1 : 0);
            if (!same) pdl_failed = true;
        }
        cu(g_stream_destroy(stream), "cuStreamDestroy");
    }

    }  // !only_gqa
    if (g_mma_stream != nullptr) cu(g_stream_destroy(g_mma_stream), "cuStreamDestroy");
    kl_module_unload(&mod);
    if (json_path != nullptr) {
        FILE *f = std::fopen(json_path, "w");
        if (f == nullptr) die(std::string("cannot write ") + json_path);
        std::fprintf(f, "{\n%s\n}\n", g_json.str().c_str());
        std::fclose(f);
    }
    if (pdl_failed) die("the PDL combine's output differs from the plain combine's");
    return 0;
}
