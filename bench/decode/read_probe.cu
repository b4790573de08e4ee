// bench/decode/read_probe.cu -- what a pure read of decode's bytes costs on
// this GPU, with no attention in it: the ceiling the decode kernels' "fraction
// of copy" is read against (docs/PERFORMANCE.md, "What bounds each figure":
// paged decode).
// Bench-only, never part of the library: a CUDA-runtime program built by
// bench/decode/read_probe.sh with nvcc (no Bazel rule builds host CUDA here).
//
//   bash bench/decode/read_probe.sh        # here: .gpu/bench/decode/read_probe
//   .gpu/bench/decode/read_probe [ROUNDS]  # on the GPU machine (default 3)
//
// 512 MiB (the bytes of decode_bench's 32 x 4096 bf16 shape), three sets
// rotated so the L2 is cold, every row again a round with the sets 18 MiB
// further on (two H100 cards ranked the variants differently), median of
// 40 launches after 25, CUDA events around each (as decode_bench times its kernels). Each line: the time, the
// read rate as a fraction of cuMemcpyDtoD's read + write rate in the same run,
// and when each block ended (globaltimer, from the first block's start):
// p10 / p50 / p90 / latest, and the SMs of the earliest and the latest.
//   bulk       one block an SM of 288 threads: warp 0 lane 0 issues 1-D
//              cp.async.bulk copies of 8 KiB into a ring of S slots behind
//              mbarriers; 8 warps wait for each slot and release it (no
//              compute). Each block reads its own contiguous share.
//   boxes      the same ring filled as decode's _tma kernels fill theirs: a
//              tile is 4 tensor-map boxes of 64 bf16 x 16 rows in the 128-byte
//              swizzle, rows 2 KiB apart (one KV head's rows of the contract's
//              [block, slot, 8 KV heads, 128] cache), a block's tiles head by
//              head.
//   boxes dyn  boxes, the tiles in chunks of C: a block's first chunk is
//              its own, the rest claimed from a global counter one chunk
//              ahead (a zeroed counter a launch), so fast SMs take more.
//   boxes 4 a region, 2 heads in series / in turn
//              boxes, static: 4 blocks share a region of 8 heads (decode's
//              32 x 4096: a sequence's units), each reading 2 heads, the
//              one after the other (decode's order) or a tile of each in
//              turn (the 4 blocks then read whole rows together).
//   boxes 8 a region, 1 head, 2 regions
//              boxes, static: block 8g + h reads head h of region g, then of
//              region g + 16 (the 8 blocks of a region read its rows whole).
//   pages [in order], 2 units in series / in turn
//              decode's own view (probe_pages): pages of [16 slots][8 heads]
//              [128] bf16 through a shuffled (or the identity) table, 4-D
//              maps; block b reads decode's persistent share at 32 x 4096
//              (sequence b / 4, heads 2 (b % 4) and + 1) in decode's order,
//              alternating the units, or in decode's order with heads
//              2 <-> 3 and 6 <-> 7 swapped.
//   boxes own + help in C
//              boxes, each block claiming its own share's chunks of C from
//              that share's counter, then the least-claimed share's (warp 0
//              reads every counter at once), until none is left; "moves" is
//              how many shares a block helped (the last launch).
//   boxes static + pool 1/D in C
//              boxes, equal static shares of the first T - T/D tiles, then
//              the last T/D in chunks of C claimed one ahead (the first at
//              entry): the schedule of a decode pool that keeps most units
//              whole (the pool measured in decode on the H100,
//              2026-12-06: 0.925x the static shares' speed at 32 x 4096
//              bf16; these rows read within -1% to +3% of static).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

/* The library's wrappers of the instructions the ring uses (mbarriers, bulk
 * and tensor copies, %globaltimer). */
#include "kernels/common/kl_ptx.cuh"
#include "kernels/common/kl_ptx_sm90.cuh"

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            std::fprintf(stderr, "read_probe: %s: %s\n", #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                              \
        }                                                                              \
    } while (0)

namespace {

constexpr unsigned kTile = 8192, kSlots = 16;

/* Device code for the sm_90a pass only: the wrappers above exist there. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* %smid: which SM a block ran on (no library kernel reads it, so it has no
 * kl_ptx wrapper; this file is never built for the emulator). */
__device__ __forceinline__ unsigned smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// The ring: NS slots of kTile bytes (1024-aligned for the swizzle), full and
// empty mbarriers. Tile k: slot k % NS, consumer warp 1 + k % 8.
struct Ring {
    unsigned ring, full, empty;
};
template <unsigned NS>
__device__ Ring ring_setup(unsigned char *sm, unsigned long long *bars) {
    Ring r;
    r.ring = ((unsigned)__cvta_generic_to_shared(sm) + 1023u) & ~1023u;
    r.full = (unsigned)__cvta_generic_to_shared(bars);
    r.empty = r.full + 8u * NS;
    if (threadIdx.x == 0) {
        for (unsigned s = 0; s < NS; ++s) kl__mbar_init(r.full + 8 * s, 1), kl__mbar_init(r.empty + 8 * s, 1);
        kl__fence_proxy_async_shared(); /* the inits, before the copy engine sees them */
    }
    __syncthreads();
    return r;
}
// Warps 1..8 wait for their tiles, touch a word, release; a tag of -1 ends.
template <unsigned NS>
__device__ int consume(const Ring &r, const unsigned char *sm, const volatile int *tag) {
    int acc = 0;
    const unsigned w = threadIdx.x / 32u - 1u, lane = threadIdx.x & 31u;
    const unsigned char *base = sm + (r.ring - (unsigned)__cvta_generic_to_shared(sm));
    for (unsigned k = w;; k += 8u) {
        const unsigned s = k % NS;
        kl__mbar_wait(r.full + 8 * s, (k / NS) & 1u);
        if (tag[s] < 0) break;
        acc ^= reinterpret_cast<const volatile int *>(base + s * kTile)[lane];
        __syncwarp();
        if (lane == 0) kl__mbar_arrive(r.empty + 8 * s);
    }
    return acc;
}
// The producer's slot for stream tile k (tile t): wait until its last
// reader is done, tag it, expect a tile's bytes on `full`.
template <unsigned NS>
__device__ unsigned slot_begin(const Ring &r, int *tag, unsigned k, unsigned t) {
    const unsigned s = k % NS;
    kl__mbar_wait(r.empty + 8 * s, ((k / NS) & 1u) ^ 1u);
    tag[s] = (int)t;
    kl__mbar_arrive_expect_tx(r.full + 8 * s, kTile);
    return s;
}
template <unsigned NS>
__device__ void finish(const Ring &r, int *tag, unsigned k) { /* 8 end markers, one per consumer warp */
    for (unsigned e = 0; e < 8u; ++e, ++k) {
        const unsigned s = k % NS;
        kl__mbar_wait(r.empty + 8 * s, ((k / NS) & 1u) ^ 1u);
        tag[s] = -1;
        kl__mbar_arrive(r.full + 8 * s);
    }
}
__device__ void stamp(unsigned long long *stamps, unsigned long long t0, int acc, int *sink, unsigned moves) {
    __syncthreads();
    if (threadIdx.x == 0) {
        stamps[4 * blockIdx.x] = t0;
        stamps[4 * blockIdx.x + 1] = kl__globaltimer();
        stamps[4 * blockIdx.x + 2] = smid();
        stamps[4 * blockIdx.x + 3] = moves;
    }
    if (acc == 0x12345678) *sink = 1; /* keeps the reads */
}

// mode 0: 1-D copies of a contiguous share; mode 1: boxes, a static share;
// mode 2: boxes, chunks of C tiles claimed from *ctr; mode 3: static shares,
// then `pool` tiles in chunks of C claimed from *ctr; mode 4: share b's
// chunks of C claimed from ctr[b], then (warp 0 reading every share's
// counter at once) the least-claimed share's, until none is left; mode 5:
// static, blocks 4g .. 4g + 3 on shares 4g .. 4g + 3 taken as one region
// of 8 heads, block 4g + j reading heads 2j and 2j + 1, one after the other
// (chunk 0: decode's persistent blocks at 32 x 4096) or a tile of each in
// turn (chunk 1); mode 6: static, block 8g + h reading head h of region g,
// then of region g + 16 (8 blocks read a region's whole rows together).
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

template <unsigned NS>
__global__ void __launch_bounds__(288) probe(int mode, const char *src, size_t share, const __grid_constant__ CUtensorMap map,
                                             unsigned rows_per_share, unsigned nshares, unsigned chunk, unsigned pool, unsigned *ctr,
                                             unsigned long long *stamps, int *sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char sm[];
    __shared__ __align__(8) unsigned long long bars[2 * NS];
    __shared__ int tag[NS];
    const Ring r = ring_setup<NS>(sm, bars);
    const unsigned long long t0 = kl__globaltimer();
    int acc = 0;
    unsigned moves = 0; /* mode 4: shares helped after the block's own */
    if (threadIdx.x >= 32u) {
        acc = consume<NS>(r, sm, tag);
    } else if (threadIdx.x < 32u) {
        const unsigned lane = threadIdx.x;
        const unsigned half = rows_per_share / 2u, bands = half / 16u, per = 8u * bands;
        auto issue = [&](unsigned k, unsigned t) { /* tile t into stream slot k */
            const unsigned s = slot_begin<NS>(r, tag, k, t);
            if (mode == 0) {
                kl__bulk_load(r.ring + s * kTile, src + share * blockIdx.x + (size_t)t * kTile, kTile, r.full + 8 * s);
                return;
            }
            unsigned h, row0, j;
            if (mode == 5 || mode == 6) { /* regions of 4 shares: 8 heads x 4 bands-of-a-share bands */
                const unsigned kk = t % per, gb = 4u * bands;
                if (mode == 5) { /* block 4g + jb: heads 2jb, 2jb + 1 of region g */
                    const unsigned grp = blockIdx.x / 4u, jb = blockIdx.x % 4u;
                    h = 2u * jb + (chunk ? kk % 2u : kk / gb);
                    j = chunk ? kk / 2u : kk % gb;
                    row0 = grp * 4u * rows_per_share;
                } else { /* block 8g + h: head h of region g, then of region g + nshares / 8 */
                    h = blockIdx.x % 8u;
                    j = kk % gb;
                    row0 = (blockIdx.x / 8u + (kk / gb) * (nshares / 8u)) * 4u * rows_per_share;
                }
                for (unsigned q = 0; q < 4u; ++q)
                    kl__tma_load_2d(r.ring + s * kTile + q * 2048u, &map, (int)(h * 128u + (q & 1u) * 64u),
                                    (int)(row0 + (q >> 1) * 4u * half + 16u * j), r.full + 8 * s);
                return;
            }
            const unsigned sh = t / per, kk = t % per;
            h = kk / bands, j = kk % bands, row0 = sh * rows_per_share;
            for (unsigned q = 0; q < 4u; ++q) /* K dims 0-63, 64-127, then V's */
                kl__tma_load_2d(r.ring + s * kTile + q * 2048u, &map, (int)(h * 128u + (q & 1u) * 64u),
                       (int)(row0 + (q >> 1) * half + 16u * j), r.full + 8 * s);
        };
        unsigned k = 0;
        if (mode == 4) {
            /* Unit-affine claims: a block's own share first, then help. */
            const unsigned nch = (per + chunk - 1u) / chunk;
            unsigned s = blockIdx.x, c = 0;
            if (lane == 0) c = atomicAdd(ctr + s, 1u);
            c = __shfl_sync(~0u, c, 0);
            for (;;) {
                if (c >= nch) { /* this share is done: the least-claimed one next */
                    unsigned best = ~0u, bs = 0;
                    for (unsigned j = lane; j < nshares; j += 32u) {
                        const unsigned v = *reinterpret_cast<volatile unsigned *>(ctr + j);
                        if (v < best) best = v, bs = j;
                    }
                    for (int o = 16; o > 0; o >>= 1) {
                        const unsigned ob = __shfl_xor_sync(~0u, best, o), os = __shfl_xor_sync(~0u, bs, o);
                        if (ob < best || (ob == best && os < bs)) best = ob, bs = os;
                    }
                    if (best >= nch) break;
                    s = bs;
                    ++moves;
                    if (lane == 0) c = atomicAdd(ctr + s, 1u);
                    c = __shfl_sync(~0u, c, 0);
                    continue;
                }
                unsigned nxt = 0;
                if (lane == 0) {
                    nxt = atomicAdd(ctr + s, 1u); /* one ahead, under this chunk's copies */
                    for (unsigned t = c * chunk; t < min(per, c * chunk + chunk); ++t) issue(k++, s * per + t);
                }
                c = __shfl_sync(~0u, nxt, 0);
            }
        } else if (lane != 0) {
        } else if (mode == 0) {
            for (unsigned t = 0; t < share / kTile; ++t) issue(k++, t);
        } else if (mode == 1 || mode == 5 || mode == 6) {
            for (unsigned t = 0; t < per; ++t) issue(k++, blockIdx.x * per + t);
        } else if (mode == 3) {
            /* static shares of the first total - pool tiles, then the pool in
             * chunks claimed from *ctr one ahead (the first at entry) */
            const unsigned total = per * nshares, stat = total - pool;
            const unsigned nch = (pool + chunk - 1u) / chunk;
            const unsigned lo = (unsigned)((unsigned long long)stat * blockIdx.x / gridDim.x);
            const unsigned hi = (unsigned)((unsigned long long)stat * (blockIdx.x + 1u) / gridDim.x);
            unsigned nxt = atomicAdd(ctr, 1u);
            for (unsigned t = lo; t < hi; ++t) issue(k++, t);
            while (nxt < nch) {
                const unsigned cur = nxt;
                nxt = atomicAdd(ctr, 1u);
                for (unsigned t = stat + cur * chunk; t < min(total, stat + cur * chunk + chunk); ++t) issue(k++, t);
            }
        } else {
            const unsigned total = per * nshares, nch = (total + chunk - 1u) / chunk;
            unsigned cur = blockIdx.x, nxt = atomicAdd(ctr, 1u) + gridDim.x; /* the first chunk is the block's own */
            while (cur < nch) {
                for (unsigned t = cur * chunk; t < min(total, cur * chunk + chunk); ++t) issue(k++, t);
                cur = nxt;
                if (cur < nch) nxt = atomicAdd(ctr, 1u) + gridDim.x;
            }
        }
        if (lane == 0) finish<NS>(r, tag, k);
    }
    stamp(stamps, t0, acc, sink, moves);
#endif
}

// Decode's own view: caches of pages [16 slots][8 heads][128] bf16 (32 KiB),
// K then V (256 MiB each), a shuffled page table of 8192 entries (32
// sequences x 256 pages); 4-D maps (d, head, slot, page), boxes of 64 d x 1
// head x 16 slots. Block b takes decode's persistent share at 32 x 4096,
// units 2b and 2b + 1 (sequence b / 4, heads 2 (b % 4) and + 1): alt 0 the
// one unit then the other (decode's order), alt 1 a tile of each in turn,
// alt 2 as 0 with the heads in the order 0 1 3 2 4 5 7 6 (so the blocks'
// first units are heads 0, 3, 4, 7 of a sequence, not 0, 2, 4, 6).
template <unsigned NS>
__global__ void __launch_bounds__(288) probe_pages(const __grid_constant__ CUtensorMap kmap,
                                                   const __grid_constant__ CUtensorMap vmap, const int *table,
                                                   unsigned alt, unsigned long long *stamps, int *sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char sm[];
    __shared__ __align__(8) unsigned long long bars[2 * NS];
    __shared__ int tag[NS];
    __shared__ int pages[256];
    const unsigned seq = blockIdx.x / 4u, h0 = 2u * (blockIdx.x % 4u);
    for (unsigned i = threadIdx.x; i < 256u; i += blockDim.x) pages[i] = table[seq * 256u + i];
    const Ring r = ring_setup<NS>(sm, bars); /* its __syncthreads covers pages[] */
    const unsigned long long t0 = kl__globaltimer();
    int acc = 0;
    if (threadIdx.x >= 32u) {
        acc = consume<NS>(r, sm, tag);
    } else if (threadIdx.x == 0) {
        unsigned k = 0;
        for (unsigned t = 0; t < 512u; ++t, ++k) {
            unsigned h = h0 + (alt == 1u ? t % 2u : t / 256u);
            const unsigned j = alt == 1u ? t / 2u : t % 256u;
            if (alt == 2u && (h & 2u)) h ^= 1u; /* heads in the order 0 1 3 2 4 5 7 6 */
            const unsigned s = slot_begin<NS>(r, tag, k, t);
            for (unsigned q = 0; q < 4u; ++q) /* K dims 0-63, 64-127, then V's */
                kl__tma_load_4d(r.ring + s * kTile + q * 2048u, q < 2u ? &kmap : &vmap, (int)((q & 1u) * 64u), (int)h,
                                0, pages[j], r.full + 8 * s);
        }
        finish<NS>(r, tag, k);
    }
    stamp(stamps, t0, acc, sink, 0u);
#endif
}

}  // namespace

int main(int argc, char **argv) {
    const size_t bytes = size_t{512} << 20;
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    /* Rounds: the three sets moved by 18 MiB a round in one allocation, so
     * each round's bytes lie on other physical pages (the rows' order
     * differed between cards by more than it differs between variants). */
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    if (argc > 2 || rounds < 1 || rounds > 16) {
        std::fprintf(stderr, "read_probe: ROUNDS must be a number from 1 to 16 (usage: read_probe [ROUNDS])\n");
        return 2;
    }
    const size_t shift = size_t{18} << 20;
    char *pool;
    CK(cudaMalloc(&pool, 3 * bytes + (size_t)(rounds - 1) * shift));
    CK(cudaMemset(pool, 1, 3 * bytes + (size_t)(rounds - 1) * shift));
    std::vector<char *> src(3);
    void *dst;
    CK(cudaMalloc(&dst, bytes));
    unsigned *ctr;
    unsigned long long *st;
    int *sink;
    constexpr int kCounters = 128 * 72; /* mode 4: 128 a launch, 72 launches */
    CK(cudaMalloc(&ctr, 4 * kCounters));
    CK(cudaMalloc(&st, 4 * 8 * 1024));
    CK(cudaMalloc(&sink, 4));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    auto median_us = [&](auto fn) {
        std::vector<float> v;
        for (int i = 0; i < 25; ++i) fn(i);
        for (int i = 0; i < 40; ++i) {
            CK(cudaEventRecord(a));
            fn(i);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            v.push_back(ms * 1e3f);
        }
        CK(cudaGetLastError());
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const unsigned smem = kSlots * kTile + 1024;
    CK(cudaFuncSetAttribute(probe<kSlots>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(probe<kSlots / 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem / 2 + 512));
    CK(cudaFuncSetAttribute(probe_pages<kSlots>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    // probe_pages' tables, the same every round.
    std::vector<int> h_table(8192);
    std::iota(h_table.begin(), h_table.end(), 0);
    std::mt19937 gen(1234);
    std::shuffle(h_table.begin(), h_table.end(), gen);
    int *d_table; /* the shuffled table, then the identity */
    CK(cudaMalloc(&d_table, 2 * 4 * 8192));
    CK(cudaMemcpy(d_table, h_table.data(), 4 * 8192, cudaMemcpyHostToDevice));
    std::iota(h_table.begin(), h_table.end(), 0);
    CK(cudaMemcpy(d_table + 8192, h_table.data(), 4 * 8192, cudaMemcpyHostToDevice));
    for (int round = 0; round < rounds; ++round) {
        for (int i = 0; i < 3; ++i) src[i] = pool + (size_t)round * shift + (size_t)i * bytes;
        const double copy_us =
            median_us([&](int i) { CK(cudaMemcpyAsync(dst, src[i % 3], bytes, cudaMemcpyDeviceToDevice)); });
        const double copy = 2.0 * bytes / (copy_us * 1e3);
        std::printf("read_probe on %s (%d SMs), round %d (sets %zu MiB on): copy %.1f us, %.0f GB/s (read + write)\n",
                    prop.name, nsm, round, (size_t)round * (shift >> 20), copy_us, copy);

        // The boxes' view: rows of 2048 bytes (8 KV heads x 128 bf16), 128 shares.
        const unsigned nshares = 128, rows = (unsigned)(bytes / 2048 / nshares) / 32u * 32u;
        std::vector<CUtensorMap> maps(3);
        for (int i = 0; i < 3; ++i) {
            cuuint64_t dims[2] = {1024, (cuuint64_t)rows * nshares};
            cuuint64_t strides[1] = {2048};
            cuuint32_t box[2] = {64, 16}, es[2] = {1, 1};
            if (cuTensorMapEncodeTiled(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, src[i], dims, strides, box, es,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
                std::fprintf(stderr, "read_probe: cuTensorMapEncodeTiled failed\n");
                return 1;
            }
        }

        auto report = [&](const char *name, int blocks, double us, double read_bytes) {
            CK(cudaDeviceSynchronize());
            std::vector<unsigned long long> h(4 * blocks);
            CK(cudaMemcpy(h.data(), st, 8 * h.size(), cudaMemcpyDeviceToHost));
            unsigned long long t0 = ~0ull;
            unsigned long long moves = 0, most = 0;
            for (int k = 0; k < blocks; ++k) t0 = std::min(t0, h[4 * k]);
            std::vector<std::pair<double, int>> e;
            for (int k = 0; k < blocks; ++k) {
                e.push_back({(h[4 * k + 1] - t0) * 1e-3, (int)h[4 * k + 2]});
                moves += h[4 * k + 3];
                most = std::max(most, h[4 * k + 3]);
            }
            std::sort(e.begin(), e.end());
            const double gbps = read_bytes / (us * 1e3);
            std::printf("%-34s %7.1f us %6.0f GB/s = %.3f of copy; ends p10 %.1f p50 %.1f p90 %.1f latest %.1f us; "
                        "earliest sm",
                        name, us, gbps, gbps / copy, e[e.size() / 10].first, e[e.size() / 2].first,
                        e[e.size() * 9 / 10].first, e.back().first);
            for (int i = 0; i < 4; ++i) std::printf(" %d", e[i].second);
            std::printf(", latest sm");
            for (int i = 0; i < 4; ++i) std::printf(" %d", e[e.size() - 1 - i].second);
            if (moves != 0) std::printf("; moves %.2f a block, most %llu", (double)moves / blocks, most);
            std::printf("\n");
        };
        for (int blocks : {128, nsm, 2 * nsm}) {
            const bool two = blocks == 2 * nsm;
            const size_t share = bytes / blocks / kTile * kTile;
            const double us = median_us([&](int i) {
                if (two)
                    probe<kSlots / 2><<<blocks, 288, smem / 2 + 512>>>(0, src[i % 3], share, maps[0], 0, 0, 0, 0,
                                                                       ctr, st, sink);
                else
                    probe<kSlots><<<blocks, 288, smem>>>(0, src[i % 3], share, maps[0], 0, 0, 0, 0, ctr, st, sink);
            });
            char name[64];
            std::snprintf(name, sizeof name, "bulk 8 KiB, %d blocks%s", blocks, two ? " (2 an SM)" : "");
            report(name, blocks, us, (double)share * blocks);
        }
        const double box_bytes = (double)rows * 2048 * nshares;
        double us = median_us([&](int i) {
            probe<kSlots><<<nshares, 288, smem>>>(1, nullptr, 0, maps[i % 3], rows, nshares, 0, 0, ctr, st, sink);
        });
        report("boxes, 128 blocks", nshares, us, box_bytes);
        for (unsigned chunk : {16u, 64u}) {
            for (int blocks : {128, nsm}) {
                // A zeroed counter a launch (median_us launches 65 times, i < 40).
                CK(cudaMemset(ctr, 0, 4 * kCounters));
                int launch = 0;
                us = median_us([&](int i) {
                    probe<kSlots><<<blocks, 288, smem>>>(2, nullptr, 0, maps[i % 3], rows, nshares, chunk, 0,
                                                         ctr + launch++ % 128, st, sink);
                });
                char name[64];
                std::snprintf(name, sizeof name, "boxes dyn %u tiles, %d blocks", chunk, blocks);
                report(name, blocks, us, box_bytes);
            }
        }
        // Static shares with a claimed pool at the end (the decode schedule
        // that keeps whole units for most tiles): pool as a fraction of all tiles.
        const unsigned total_tiles = rows / 32u * 8u * nshares;
        for (unsigned div : {16u, 8u, 4u}) {
            for (unsigned chunk : {16u, 32u}) {
                const unsigned pool = total_tiles / div;
                CK(cudaMemset(ctr, 0, 4 * kCounters));
                int launch = 0;
                us = median_us([&](int i) {
                    probe<kSlots><<<128, 288, smem>>>(3, nullptr, 0, maps[i % 3], rows, nshares, chunk, pool,
                                                      ctr + launch++ % 128, st, sink);
                });
                char name[64];
                std::snprintf(name, sizeof name, "boxes static + pool 1/%u in %u, 128", div, chunk);
                report(name, 128, us, box_bytes);
            }
        }
        us = median_us([&](int i) {
            probe<kSlots><<<nshares, 288, smem>>>(6, nullptr, 0, maps[i % 3], rows, nshares, 0, 0, ctr, st, sink);
        });
        report("boxes 8 a region, 1 head, 2 regions", nshares, us, box_bytes);
        for (unsigned alt : {0u, 1u}) {
            us = median_us([&](int i) {
                probe<kSlots><<<nshares, 288, smem>>>(5, nullptr, 0, maps[i % 3], rows, nshares, alt, 0, ctr, st, sink);
            });
            report(alt ? "boxes 4 a region, 2 heads in turn" : "boxes 4 a region, 2 heads in series", nshares, us,
                   box_bytes);
        }
        // Unit-affine claims: each block's own share in chunks of C from its
        // share's counter, then the least-claimed share's, so a fast SM helps
        // slow ones and a block leaves its own share only at its end (in decode,
        // a piece end only where it helps).
        for (unsigned chunk : {8u, 16u, 32u}) {
            CK(cudaMemset(ctr, 0, 4 * kCounters));
            int launch = 0;
            us = median_us([&](int i) {
                probe<kSlots><<<nshares, 288, smem>>>(4, nullptr, 0, maps[i % 3], rows, nshares, chunk, 0,
                                                      ctr + 128 * (launch++ % 72), st, sink);
            });
            char name[64];
            std::snprintf(name, sizeof name, "boxes own + help in %u, 128", chunk);
            report(name, nshares, us, box_bytes);
        }
        // Decode's pages (probe_pages): K and V maps a set.
        {
            std::vector<CUtensorMap> km(3), vm(3);
            for (int i = 0; i < 3; ++i) {
                for (int c = 0; c < 2; ++c) {
                    cuuint64_t dims[4] = {128, 8, 16, 8192};
                    cuuint64_t strides[3] = {256, 2048, 32768};
                    cuuint32_t box[4] = {64, 1, 16, 1}, es[4] = {1, 1, 1, 1};
                    if (cuTensorMapEncodeTiled(c ? &vm[i] : &km[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                                               src[i] + (size_t)c * (bytes / 2), dims, strides, box, es,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
                        std::fprintf(stderr, "read_probe: cuTensorMapEncodeTiled (pages) failed\n");
                        return 1;
                    }
                }
            }
            for (int ident = 0; ident < 2; ++ident)
                for (unsigned alt : {0u, 1u, 2u}) {
                    us = median_us([&](int i) {
                        probe_pages<kSlots><<<128, 288, smem>>>(km[i % 3], vm[i % 3], d_table + 8192 * ident, alt,
                                                                st, sink);
                    });
                    char name[64];
                    std::snprintf(name, sizeof name, "pages%s, 2 units %s", ident ? " in order" : "",
                                  alt == 1u ? "in turn" : alt == 2u ? "in series, 0 1 3 2 4 5 7 6" : "in series");
                    report(name, 128, us, (double)bytes);
                }
        }
    } /* rounds */
    CK(cudaFree(d_table));
    return 0;
}
