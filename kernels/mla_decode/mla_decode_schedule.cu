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
 * the layout). One block of 512 threads:
 *   1. thread t sums the costs of a contiguous run of ceil(B / 512)
 *      sequences; a block scan of those sums gives each run its first
 *      offset, and the thread writes C_b for its run (64-bit: 2^24
 *      sequences of 2^25 tiles);
 *   2. the number of cuts inside each sequence's tiles (multiples of the
 *      part size between C_b + FIXED and C_{b+1}) gives its splits; a
 *      second scan numbers the split sequences' workspace slots;
 *   3. thread t writes parts t, t + 512, ...: each cut by a binary search
 *      of C, the split index of its first piece in closed form.
 * The block's barriers order the global C writes before their reads
 * (__syncthreads orders global memory among the block's threads). */

#include "mla_decode_common.cuh"

namespace mla_decode_schedule_ {

constexpr uint32_t T = KL_THREADS_mla_decode_schedule;
constexpr uint64_t FIXED = KL_MLA_DECODE_SCHED_FIXED_COST;

__device__ __forceinline__ uint64_t cost(const int32_t *lengths, uint32_t b) {
    return (uint64_t)mla_decode__tiles(lengths[b]) + FIXED;
}

__device__ __forceinline__ uint64_t load_c(const int32_t *c, uint32_t b) {
    return (uint64_t)(uint32_t)c[2u * b] | ((uint64_t)(uint32_t)c[2u * b + 1u] << 32);
}

/* Exclusive scan of v over the block's T threads; *total gets the sum. */
__device__ __forceinline__ uint64_t block_scan(uint64_t v, uint64_t *buf, uint64_t *total) {
    const uint32_t tid = threadIdx.x;
    buf[tid] = v;
    __syncthreads();
    for (uint32_t d = 1u; d < T; d <<= 1) {
        const uint64_t add = tid >= d ? buf[tid - d] : 0u;
        __syncthreads();
        buf[tid] += add;
        __syncthreads();
    }
    const uint64_t incl = buf[tid];
    *total = buf[T - 1u];
    __syncthreads(); /* buf is reused by the next scan */
    return incl - v;
}

/* Cut p (p = 0 .. P) as (sequence, tile): the last sequence b with C_b <= X
 * and the tile the cut falls before. (X < total: the search stays below B.) */
__device__ __forceinline__ void cut(uint32_t p, uint32_t P, uint64_t per, uint64_t total, const int32_t *c,
                                    uint32_t B, uint32_t *cb, uint32_t *ct) {
    const uint64_t x = (uint64_t)p * per;
    if (p >= P || x >= total) {
        *cb = B;
        *ct = 0u;
        return;
    }
    uint32_t lo = 0u, hi = B - 1u; /* C_lo <= x < C_{hi + 1} */
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo + 1u) / 2u;
        if (load_c(c, mid) <= x)
            lo = mid;
        else
            hi = mid - 1u;
    }
    const uint64_t off = x - load_c(c, lo);
    *cb = lo;
    *ct = off <= FIXED ? 0u : (uint32_t)(off - FIXED);
}

}  // namespace mla_decode_schedule_

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_decode_schedule)
mla_decode_schedule(KL_PARAMS_mla_decode_schedule) {
    using namespace mla_decode_schedule_;
    __shared__ uint64_t buf[T];
    /* A dependent launch (the _tma attention) may become resident now; it
     * still waits for this grid to complete before it reads the schedule. */
    kl__griddep_launch_dependents();
    if (batch == 0u || num_parts == 0u || blockDim.x != T) return; /* the launcher refuses these */
    const uint32_t B = batch, P = num_parts, tid = threadIdx.x;
    int32_t *splits = sched + mla_decode__splits_at(P);
    int32_t *base = sched + mla_decode__base_at(P, B);
    int32_t *c = sched + mla_decode__cost_at(P, B);

    /* 1. C_b */
    const uint32_t run = (B + T - 1u) / T;
    const uint32_t b0 = tid * run < B ? tid * run : B, b1 = b0 + run < B ? b0 + run : B;
    uint64_t local = 0u;
    for (uint32_t b = b0; b < b1; ++b) local += cost(lengths, b);
    uint64_t total;
    uint64_t at = block_scan(local, buf, &total);
    for (uint32_t b = b0; b < b1; ++b) {
        c[2u * b] = (int32_t)(uint32_t)at;
        c[2u * b + 1u] = (int32_t)(uint32_t)(at >> 32);
        at += cost(lengths, b);
    }
    __syncthreads();
    const uint64_t per = (total + P - 1u) / P; /* total >= FIXED: per >= 1 */

    /* 2. splits and slots */
    uint64_t slots = 0u;
    for (uint32_t b = b0; b < b1; ++b) {
        const uint64_t lo = load_c(c, b) + FIXED, hi = (b + 1u < B ? load_c(c, b + 1u) : total) - 1u;
        const uint32_t n = hi >= lo ? 1u + (uint32_t)(hi / per - lo / per) : 1u;
        splits[b] = (int32_t)n;
        slots += n > 1u ? n : 0u;
    }
    uint64_t used;
    uint64_t slot = block_scan(slots, buf, &used);
    for (uint32_t b = b0; b < b1; ++b) {
        const uint32_t n = (uint32_t)splits[b];
        base[b] = (int32_t)(uint32_t)slot;
        slot += n > 1u ? n : 0u;
    }

    /* 3. parts */
    for (uint32_t p = tid; p < P; p += T) {
        uint32_t bs, bt, es, et;
        cut(p, P, per, total, c, B, &bs, &bt);
        cut(p + 1u, P, per, total, c, B, &es, &et);
        uint32_t split0 = 0u;
        if (bt > 0u) split0 = (uint32_t)((uint64_t)p - (load_c(c, bs) + FIXED) / per);
        int32_t *r = sched + mla_decode__part_at(p);
        r[0] = (int32_t)bs;
        r[1] = (int32_t)bt;
        r[2] = (int32_t)es;
        r[3] = (int32_t)et;
        r[4] = (int32_t)split0;
        r[5] = r[6] = r[7] = 0;
    }
    if (tid < KL_MLA_DECODE_SCHED_HEADER_WORDS) {
        const int32_t head[6] = {KL_MLA_DECODE_SCHED_MAGIC, (int32_t)B, (int32_t)P, (int32_t)(uint32_t)used,
                                 (int32_t)(uint32_t)total, (int32_t)(uint32_t)(total >> 32)};
        sched[tid] = tid < 6u ? head[tid] : 0;
    }
}
