/* Reference: tests/mla_decode/mla_decode_reference.h (schedule, from klaunch/mla_decode_layout.h's rule)
 * Tests:
 *   tests/mla_decode/mla_decode_schedule_emulated_test.cc (CPU emulator)
 *   tests/mla_decode/mla_decode_test.cc (GPU)
 *   tests/mla_decode/mla_decode_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_decode:mla_decode_schedule_emulated_test \
 *     //tests/mla_decode:mla_decode_test \
 *     //tests/mla_decode:mla_decode_launch_test
 */
#include "klaunch/mla_decode.cuh"

/* mla_decode_schedule: the work split of one decode step, from the lengths
 * on the device (klaunch/mla_decode_layout.h, THE SCHEDULE, is the rule and
 * the layout). It runs once a step on the critical path of every layer's
 * attention, so it is built for latency: one block of 512 threads, one
 * global read (the lengths), two block scans, a search in shared memory,
 * and stores.
 *   1. thread t takes a contiguous run of ceil(B / 512) sequences (one at
 *      a batch up to 512) and sums their costs; a block scan (warp
 *      shuffles, one exchange of the 16 warp sums) gives each run its
 *      first offset, so each thread knows C_b and C_{b+1} of its
 *      sequences without reading anyone's stores;
 *   2. the cuts inside a sequence's tiles are the multiples of the part
 *      size between C_b + FIXED and C_{b+1}: their count is its splits, a
 *      second scan numbers the split sequences' workspace slots;
 *   3. thread t takes cuts t, t + 512, ...: a binary search of C in
 *      shared memory (up to 4096 sequences; the global copy past that)
 *      finds the sequence cut X_p falls in, and the cut is written where it
 *      goes, as the begin of part p and the end of part p - 1 (one thread
 *      writing a long sequence's 130 cuts took 11 us on an H100, 2026-12-07).
 *      Each word of the schedule is written once. */

#include "mla_decode_common.cuh"

namespace mla_decode_schedule_ {

constexpr uint32_t T = KL_THREADS_mla_decode_schedule;
constexpr uint32_t WARPS = T / 32;
constexpr uint64_t FIXED = KL_MLA_DECODE_SCHED_FIXED_COST;
constexpr uint32_t SMEM_C = 4096; /* sequences whose C_b the cut search reads from shared memory (32 KiB) */

__device__ __forceinline__ uint64_t load_c(const int32_t *c, uint32_t b) {
    return (uint64_t)(uint32_t)c[2u * b] | ((uint64_t)(uint32_t)c[2u * b + 1u] << 32);
}
static_assert(T % 32 == 0 && WARPS <= 32, "the warp sums are scanned by one warp");

__device__ __forceinline__ uint64_t cost(const int32_t *lengths, uint32_t b) {
    return (uint64_t)mla_decode__tiles(lengths[b]) + FIXED;
}

/* Exclusive scan of v over the block; *total gets the sum. `warp_sums` holds
 * WARPS entries; two barriers. */
__device__ __forceinline__ uint64_t block_scan(uint64_t v, uint64_t *warp_sums, uint64_t *total) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    uint64_t incl = v;
#pragma unroll
    for (uint32_t d = 1; d < 32u; d <<= 1) {
        const uint64_t up = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += up;
    }
    if (lane == 31u) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0u) {
        uint64_t w = lane < WARPS ? warp_sums[lane] : 0u;
#pragma unroll
        for (uint32_t d = 1; d < 32u; d <<= 1) {
            const uint64_t up = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += up;
        }
        if (lane < WARPS) warp_sums[lane] = w; /* inclusive prefix of the warp sums */
    }
    __syncthreads();
    const uint64_t before = warp == 0u ? 0u : warp_sums[warp - 1u];
    *total = warp_sums[WARPS - 1u];
    __syncthreads(); /* warp_sums is reused by the next scan */
    return before + incl - v;
}

/* Writes cut p = (b, t) where it goes: the begin of part p (with its first
 * piece's split) and the end of part p - 1. */
__device__ __forceinline__ void put_cut(int32_t *sched, uint32_t P, uint32_t p, uint32_t b, uint32_t t,
                                        uint32_t split0) {
    if (p < P) {
        int32_t *r = sched + mla_decode__part_at(p);
        r[0] = (int32_t)b;
        r[1] = (int32_t)t;
        r[4] = (int32_t)split0;
        r[5] = r[6] = r[7] = 0;
    }
    if (p > 0u) {
        int32_t *r = sched + mla_decode__part_at(p - 1u);
        r[2] = (int32_t)b;
        r[3] = (int32_t)t;
    }
}

}  // namespace mla_decode_schedule_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_schedule)
mla_decode_schedule(KL_PARAMS_mla_decode_schedule) {
    using namespace mla_decode_schedule_;
    __shared__ uint64_t warp_sums[WARPS];
    __shared__ uint64_t c_smem[SMEM_C];
    /* A dependent launch (the _tma attention) may become resident now; it
     * still waits for this grid to complete before it reads the schedule. */
    kl__griddep_launch_dependents();
    if (batch == 0u || num_parts == 0u || blockDim.x != T) return; /* the launcher refuses these */
    const uint32_t B = batch, P = num_parts, tid = threadIdx.x;
    int32_t *splits = sched + mla_decode__splits_at(P);
    int32_t *base = sched + mla_decode__base_at(P, B);
    int32_t *c = sched + mla_decode__cost_at(P, B);

    /* 1. C_b: this thread's run [b0, b1) */
    const uint32_t run = (B + T - 1u) / T;
    const uint32_t b0 = tid * run < B ? tid * run : B, b1 = b0 + run < B ? b0 + run : B;
    uint64_t local = 0u, first_cost = 0u;
    for (uint32_t b = b0; b < b1; ++b) {
        const uint64_t k = cost(lengths, b);
        if (b == b0) first_cost = k; /* the common case (a run of one) reads its length once */
        local += k;
    }
    uint64_t total;
    const uint64_t at0 = block_scan(local, warp_sums, &total);
    const uint64_t per = (total + P - 1u) / P; /* total >= FIXED: per >= 1 */

    /* 2. splits and slots */
    uint64_t slots = 0u;
    {
        uint64_t at = at0;
        for (uint32_t b = b0; b < b1; ++b) {
            const uint64_t k = b == b0 ? first_cost : cost(lengths, b);
            const uint64_t lo = at + FIXED, hi = at + k - 1u;
            const uint32_t n = hi >= lo ? 1u + (uint32_t)(hi / per - lo / per) : 1u;
            splits[b] = (int32_t)n;
            c[2u * b] = (int32_t)(uint32_t)at;
            c[2u * b + 1u] = (int32_t)(uint32_t)(at >> 32);
            slots += n > 1u ? n : 0u;
            at += k;
        }
    }
    uint64_t used;
    uint64_t slot = block_scan(slots, warp_sums, &used);

    /* 3. base slots */
    for (uint32_t b = b0; b < b1; ++b) {
        const uint32_t n = (uint32_t)splits[b]; /* this thread's own store */
        base[b] = (int32_t)(uint32_t)slot;
        slot += n > 1u ? n : 0u;
    }
    /* 4. the cuts, a thread a part: the sequence holding X_p by a binary search
     * of C (in shared memory up to SMEM_C sequences; past that in the global
     * copy, slower), then where it falls in it */
    const bool in_smem = B <= SMEM_C;
    if (in_smem) {
        uint64_t at = at0;
        for (uint32_t b = b0; b < b1; ++b) {
            c_smem[b] = at;
            at += b == b0 ? first_cost : cost(lengths, b);
        }
    }
    __syncthreads(); /* C is whole, in shared and in global memory */
    for (uint32_t p = tid; p <= P; p += T) {
        const uint64_t x = (uint64_t)p * per;
        if (p == P || x >= total) {
            put_cut(sched, P, p, B, 0u, 0u);
            continue;
        }
        uint32_t lo = 0u, hi = B - 1u; /* C_lo <= x < C_{hi + 1} */
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo + 1u) / 2u;
            const uint64_t cm = in_smem ? c_smem[mid] : load_c(c, mid);
            if (cm <= x)
                lo = mid;
            else
                hi = mid - 1u;
        }
        const uint64_t cb = in_smem ? c_smem[lo] : load_c(c, lo);
        const uint64_t off = x - cb;
        const uint32_t t = off <= FIXED ? 0u : (uint32_t)(off - FIXED);
        put_cut(sched, P, p, lo, t, t > 0u ? (uint32_t)((uint64_t)p - (cb + FIXED) / per) : 0u);
    }
    if (tid == 0u) {
        sched[0] = KL_MLA_DECODE_SCHED_MAGIC;
        sched[1] = (int32_t)B;
        sched[2] = (int32_t)P;
        sched[3] = (int32_t)(uint32_t)used;
        sched[4] = (int32_t)(uint32_t)total;
        sched[5] = (int32_t)(uint32_t)(total >> 32);
    }
    if (tid >= 6u && tid < KL_MLA_DECODE_SCHED_HEADER_WORDS) sched[tid] = 0;
}
