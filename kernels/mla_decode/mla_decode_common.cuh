/* mla_decode_common.cuh - what the MLA decode kernels share: reading the
 * schedule (its layout is include/klaunch/mla_decode_layout.h, which the
 * host reads too), walking a part's pieces, each row's visible positions,
 * and writing a row's result (final, or a split's partial). One family is
 * one translation unit: everything is inline behind one include guard and
 * named mla_decode__*.
 */
#ifndef KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_COMMON_CUH
#define KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_COMMON_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "klaunch/mla_decode_layout.h"
#include "../common/kl_ptx.cuh"

#define MLA_DECODE__TILE 64u /* KL_MLA_DECODE_TILE: the schedule's key tile */
static_assert(MLA_DECODE__TILE == KL_MLA_DECODE_TILE, "the kernels step over the schedule's tiles");

/* Word offsets of the schedule's arrays (klaunch/mla_decode_layout.h). */
static __device__ __forceinline__ uint64_t mla_decode__part_at(uint32_t p) {
    return KL_MLA_DECODE_SCHED_HEADER_WORDS + (uint64_t)KL_MLA_DECODE_SCHED_PART_WORDS * p;
}
static __device__ __forceinline__ uint64_t mla_decode__splits_at(uint32_t num_parts) {
    return mla_decode__part_at(num_parts);
}
static __device__ __forceinline__ uint64_t mla_decode__base_at(uint32_t num_parts, uint32_t batch) {
    return mla_decode__part_at(num_parts) + batch;
}
static __device__ __forceinline__ uint64_t mla_decode__cost_at(uint32_t num_parts, uint32_t batch) {
    return mla_decode__part_at(num_parts) + 2ull * batch;
}

/* The schedule was written for this batch and part count (else the kernels
 * write NaN rather than a result from another step's split). */
static __device__ __forceinline__ bool mla_decode__sched_ok(const int32_t *sched, uint32_t batch,
                                                            uint32_t num_parts) {
    return sched[0] == KL_MLA_DECODE_SCHED_MAGIC && (uint32_t)sched[1] == batch && (uint32_t)sched[2] == num_parts;
}

/* Key tiles of a length (a negative length is 0). */
static __device__ __forceinline__ uint32_t mla_decode__tiles(int32_t len) {
    return len > 0 ? (uint32_t)(((uint64_t)len + MLA_DECODE__TILE - 1u) / MLA_DECODE__TILE) : 0u;
}

/* A part's range: from (bs, bt) to before (es, et). */
struct mla_decode__part {
    uint32_t bs, bt, es, et, split0;
};

static __device__ __forceinline__ mla_decode__part mla_decode__load_part(const int32_t *sched, uint32_t p) {
    const int32_t *r = sched + mla_decode__part_at(p);
    mla_decode__part pt;
    pt.bs = (uint32_t)r[0];
    pt.bt = (uint32_t)r[1];
    pt.es = (uint32_t)r[2];
    pt.et = (uint32_t)r[3];
    pt.split0 = (uint32_t)r[4];
    return pt;
}

/* One piece of a part: key tiles [t0, t1) of sequence b (t1 clipped to the
 * positions the table can name), its length, and where its result goes. */
struct mla_decode__piece {
    uint32_t b, t0, t1, len, slot;
    bool split;
};

/* The piece of part `pt` in sequence b, if the part has one there
 * (b >= pt.bs): false once b is past the part. */
static __device__ __forceinline__ bool mla_decode__piece_at(const mla_decode__part &pt, uint32_t b,
                                                            const int32_t *sched, const int32_t *lengths,
                                                            uint32_t batch, uint32_t num_parts, uint64_t max_len,
                                                            mla_decode__piece &pc) {
    const uint32_t t0 = b == pt.bs ? pt.bt : 0u;
    if (b >= batch || b > pt.es || (b == pt.es && t0 >= pt.et)) return false;
    int32_t len = lengths[b];
    if (len < 0) len = 0;
    if ((uint64_t)len > max_len) len = (int32_t)max_len;
    const uint32_t tiles = mla_decode__tiles(len);
    uint32_t t1 = b == pt.es ? pt.et : 0xffffffffu;
    pc.b = b;
    pc.len = (uint32_t)len;
    pc.t0 = t0 < tiles ? t0 : tiles;
    pc.t1 = t1 < tiles ? t1 : tiles;
    const uint32_t splits = (uint32_t)sched[mla_decode__splits_at(num_parts) + b];
    pc.split = splits > 1u;
    pc.slot = pc.split ? (uint32_t)sched[mla_decode__base_at(num_parts, batch) + b] + (b == pt.bs ? pt.split0 : 0u)
                       : 0u;
    return true;
}

/* Positions row r (query token r / h_q of s_q) sees: len - s_q + 1 + i. */
static __device__ __forceinline__ uint32_t mla_decode__visible(uint32_t len, uint32_t r, uint32_t h_q, uint32_t s_q) {
    const uint32_t i = r / h_q;
    const uint32_t hidden = s_q - 1u - (i < s_q ? i : s_q - 1u);
    return len > hidden ? len - hidden : 0u;
}

/* Workspace addresses of slot k (klaunch/mla_decode_layout.h). */
static __device__ __forceinline__ float *mla_decode__ws_o(float *ws, uint32_t slot, uint32_t rows, uint32_t dv,
                                                          uint32_t r) {
    return ws + ((uint64_t)slot * rows + r) * dv;
}
static __device__ __forceinline__ float *mla_decode__ws_lse(float *ws, uint32_t num_parts, uint32_t slot,
                                                            uint32_t rows, uint32_t dv, uint32_t r) {
    return ws + 2ull * num_parts * rows * dv + (uint64_t)slot * rows + r;
}

/* Natural-log log-sum-exp of a row from its base-2 running max m (of
 * scores already scaled by softmax_scale * log2 e) and sum l. */
static __device__ __forceinline__ float mla_decode__lse(float m, float l) {
    return (l > 0.0f && m != -INFINITY) ? (m + log2f(l)) * 0.69314718055994531f : -INFINITY;
}

static __device__ __forceinline__ uint16_t mla_decode__bf16_bits(float x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *reinterpret_cast<const uint16_t *>(&h);
}

/* A schedule from another batch or part count: every output row NaN. */
static __device__ __forceinline__ void mla_decode__poison_all(__nv_bfloat16 *out, float *lse, uint32_t batch,
                                                              uint32_t rows, uint32_t dv) {
    const uint64_t n = (uint64_t)batch * rows;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned short *o = reinterpret_cast<unsigned short *>(out);
    for (uint64_t i = first; i < n * dv; i += step) o[i] = 0x7fc0u;
    for (uint64_t i = first; i < n; i += step) lse[i] = __int_as_float(0x7fc00000);
}

#endif /* KLAUNCH_KERNELS_MLA_DECODE_MLA_DECODE_COMMON_CUH */
