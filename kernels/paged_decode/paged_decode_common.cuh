/* paged_decode_common.cuh - device code shared by the paged decode attention
 * kernels: the seed's four (docs: ../shared/notes/kernel-contract.md,
 * kernels 9-12) and the split-KV partial and combine kernels
 * (specs/paged_decode.yaml).
 *
 * What every kernel of the family computes, for sequence s and query head h:
 *
 *   L = seq_lens[s]; positions [max(0, L - sliding_window), L), or [0, L)
 *   when sliding_window == 0; position p lives in physical block
 *   block_tables[s, p / block_size], slot p % block_size, KV head
 *   h / (num_q_heads / num_kv_heads).
 *   out[s, h] = softmax_p(q . k_p * inv_sqrt_d) . v_p, zeros when no position.
 *
 * How (both cores):
 * - A "group" of G lanes owns one cache row (one position) at a time; each
 *   lane holds a fixed slice of the head dim: chunks of E elements, read
 *   with one E-element load (16 bytes on the fast path, 8 for packed fp8,
 *   one element on the fallback for misaligned pointers or odd sizes).
 * - Each group takes U consecutive positions per step; the 8 warps' groups
 *   interleave, so one step of the block covers 8 * (32 / G) * U positions.
 *   K and V of a step are loaded together, one step ahead: step j + 1's
 *   loads are issued before step j's arithmetic, into the other of two
 *   register buffers (the loop is unrolled by two), and the walkers fetch
 *   block-table entries a step ahead of the loads. At decode shapes this
 *   pipelining measured 1.1x to 3x faster than loading and computing each
 *   step in turn (H200, the seed's geometry).
 * - Scores are kept in the log2 domain: q is pre-scaled by
 *   inv_sqrt_d * log2(e) (and k_scale for fp8), so p = 2^(s - m).
 * - Online softmax (running max m, sum l, unnormalised accumulator) per
 *   group, fp32 throughout; the groups of a warp merge with shuffles, the
 *   8 warps through shared memory, and the result is rounded to bf16 once.
 * - An empty range leaves every state at (m = -inf, l = 0, acc = 0); every
 *   merge guards -inf - -inf, so such a sequence writes exact zeros.
 * - The cores end by handing each head's block-wide state (m, l, acc) to an
 *   output policy: paged_decode__out_bf16 (the seed kernels: acc / l as
 *   bf16) or paged_decode__out_partial (split-KV: the state itself, fp32).
 *
 * Split-KV (paged_decode_split_*.cu, not in the seed): the same cores run
 * on one split of the window (paged_decode__split_range, whole cache
 * blocks) per block of a (heads, num_seqs, num_splits) grid and write
 * (m, l, acc) to a caller's workspace; paged_decode_split_combine.cu merges
 * the splits: M = max m_j, out = sum 2^(m_j - M) acc_j / sum 2^(m_j - M) l_j
 * over the splits with m_j > -inf.
 *
 * The kernels of the family are compiled as one translation unit per
 * variant (a unity build), so everything here is a template or static,
 * named paged_decode__*, behind one include guard.
 */
#ifndef KLAUNCH_KERNELS_PAGED_DECODE_COMMON_CUH
#define KLAUNCH_KERNELS_PAGED_DECODE_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "../common/kl_ptx.cuh"

/* The block of every kernel here but the combine's: the spec's (block x, as
 * klaunch/paged_decode.cuh exports it, KL_THREADS_<entry>), one size for all
 * of them, which the code below is written for. */
#define PAGED_DECODE__THREADS KL_THREADS_paged_decode_attn_bf16
static_assert(KL_THREADS_paged_decode_attn_fp8 == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_attn_bf16_gqa == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_attn_fp8_gqa == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_bf16 == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_fp8 == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_bf16_gqa == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_fp8_gqa == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_attn_bf16_gqa_mma == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_attn_fp8_gqa_mma == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_bf16_gqa_mma == PAGED_DECODE__THREADS &&
                  KL_THREADS_paged_decode_split_fp8_gqa_mma == PAGED_DECODE__THREADS,
              "specs/paged_decode.yaml gives its attention and split kernels one block size");
#define PAGED_DECODE__WARPS (PAGED_DECODE__THREADS / 32)
/* The plain kernels keep one fp32 row per warp in shared memory and a head's
 * slice in registers; the spec's precondition `head_dim <= 256` matches. */
#define PAGED_DECODE__MAX_HEAD_DIM 256
#define PAGED_DECODE__LOG2E 1.4426950408889634f
#define PAGED_DECODE__FULL 0xffffffffu

/* Before sm_89 there is no fp8 conversion instruction. The fallback below
 * reads an E4M3 value as a half with the same sign, exponent and mantissa
 * bits, which is exactly the value / 256 for every finite E4M3 number (the
 * biases differ by 8); the kernels fold the 256 into their scales. It reads
 * E4M3 NaN (S.1111.111) as 480 / 256 instead of NaN. */
#if defined(PAGED_DECODE_SOFTWARE_FP8) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890)
#define PAGED_DECODE__SOFT_FP8 1 /* -DPAGED_DECODE_SOFTWARE_FP8 tests this path on newer GPUs */
#define PAGED_DECODE__FP8_UNIT 256.0f
#else
#define PAGED_DECODE__SOFT_FP8 0
#define PAGED_DECODE__FP8_UNIT 1.0f
#endif

/* 2^x; ex2.approx(-inf) is +0, which the softmax relies on. */
static __device__ __forceinline__ float paged_decode__exp2(float x) {
    return kl__ex2_approx_ftz(x);
}

static __device__ __forceinline__ float paged_decode__bf16_bits(uint32_t bits16) {
    return __uint_as_float(bits16 << 16);
}

/* ---- raw loads: E elements of ES bytes each, as W 32-bit words ---------- */

template <int BYTES> struct paged_decode__words {
    static constexpr int n = BYTES >= 4 ? BYTES / 4 : 1;
};

/* Loads BYTES bytes at p (aligned to BYTES) into w; short loads zero-extend. */
template <int BYTES>
static __device__ __forceinline__ void paged_decode__load(uint32_t (&w)[paged_decode__words<BYTES>::n],
                                                          const unsigned char *p) {
    if constexpr (BYTES == 16) {
        const uint4 t = __ldg(reinterpret_cast<const uint4 *>(p));
        w[0] = t.x;
        w[1] = t.y;
        w[2] = t.z;
        w[3] = t.w;
    } else if constexpr (BYTES == 8) {
        const uint2 t = __ldg(reinterpret_cast<const uint2 *>(p));
        w[0] = t.x;
        w[1] = t.y;
    } else if constexpr (BYTES == 4) {
        w[0] = __ldg(reinterpret_cast<const unsigned int *>(p));
    } else if constexpr (BYTES == 2) {
        w[0] = __ldg(reinterpret_cast<const unsigned short *>(p));
    } else {
        static_assert(BYTES == 1, "loads are 1, 2, 4, 8 or 16 bytes");
        w[0] = __ldg(p);
    }
}

/* Two E4M3 values (bytes 0 and 1 of x) as floats, in units of
 * 1 / PAGED_DECODE__FP8_UNIT. */
static __device__ __forceinline__ float2 paged_decode__fp8x2(uint32_t x) {
#if !PAGED_DECODE__SOFT_FP8
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
    return __half22float2(__half2(r));
#else
    const uint32_t t = __byte_perm(x, 0u, 0x7170); /* [b0, 0, b1, 0] */
    __half2_raw r;
    const uint32_t h = ((t & 0x007f007fu) << 7) | ((t & 0x00800080u) << 8);
    r.x = (unsigned short)(h & 0xffffu);
    r.y = (unsigned short)(h >> 16);
    return __half22float2(__half2(r));
#endif
}

/* Converts E raw elements (packed in w as loaded) to floats. bf16 values are
 * exact; fp8 values come in units of 1 / PAGED_DECODE__FP8_UNIT. */
template <bool FP8, int E>
static __device__ __forceinline__ void paged_decode__to_float(
    const uint32_t (&w)[paged_decode__words<E *(FP8 ? 1 : 2)>::n], float (&f)[E]) {
    if constexpr (!FP8) {
        if constexpr (E == 1) {
            f[0] = paged_decode__bf16_bits(w[0] & 0xffffu);
        } else {
            static_assert(E % 2 == 0, "bf16 chunks are 1 or an even number of elements");
#pragma unroll
            for (int i = 0; i < E / 2; ++i) {
                f[2 * i] = paged_decode__bf16_bits(w[i] & 0xffffu);
                f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
            }
        }
    } else {
        if constexpr (E == 1) {
            f[0] = paged_decode__fp8x2(w[0] & 0xffu).x;
        } else {
            static_assert(E % 4 == 0, "fp8 chunks are 1 or a multiple of 4 elements");
#pragma unroll
            for (int i = 0; i < E / 4; ++i) {
                const float2 a = paged_decode__fp8x2(w[i]);
                const float2 b = paged_decode__fp8x2(w[i] >> 16);
                f[4 * i] = a.x;
                f[4 * i + 1] = a.y;
                f[4 * i + 2] = b.x;
                f[4 * i + 3] = b.y;
            }
        }
    }
}

/* ---- positions ----------------------------------------------------------- */

/* The attended range [*begin, *end) of one sequence. Positions past the
 * block table (L > max_blocks_per_seq * block_size, a caller error the
 * launcher cannot see) are dropped rather than read out of bounds. */
static __device__ __forceinline__ void paged_decode__range(int32_t seq_len, uint32_t sliding_window,
                                                           uint32_t max_blocks_per_seq, uint32_t block_size,
                                                           uint32_t *begin, uint32_t *end) {
    const uint32_t len = seq_len > 0 ? (uint32_t)seq_len : 0u;
    const uint64_t cap = (uint64_t)max_blocks_per_seq * block_size;
    const uint32_t b = (sliding_window != 0u && len > sliding_window) ? len - sliding_window : 0u;
    const uint32_t e = (uint64_t)len < cap ? len : (uint32_t)cap;
    *begin = b;
    *end = e > b ? e : b;
}

/* One walker per unrolled position of a group: where position `pos` lives,
 * advanced by a fixed stride without dividing again. */
struct paged_decode__walker {
    uint32_t pos, page, slot;
    int32_t block; /* physical block of `pos`, or 0 past the range */
};

static __device__ __forceinline__ void paged_decode__walk_init(paged_decode__walker &w, uint32_t pos,
                                                               uint32_t end, uint32_t block_size,
                                                               const int32_t *__restrict__ table) {
    w.pos = pos;
    w.page = pos / block_size;
    w.slot = pos - w.page * block_size;
    w.block = pos < end ? __ldg(table + w.page) : 0;
}

/* Advances by stride = stride_q * block_size + stride_r (stride_r < block_size). */
static __device__ __forceinline__ void paged_decode__walk_next(paged_decode__walker &w, uint32_t stride,
                                                               uint32_t stride_q, uint32_t stride_r,
                                                               uint32_t end, uint32_t block_size,
                                                               const int32_t *__restrict__ table) {
    w.pos += stride;
    w.page += stride_q;
    w.slot += stride_r;
    if (w.slot >= block_size) {
        w.slot -= block_size;
        w.page += 1u;
    }
    w.block = w.pos < end ? __ldg(table + w.page) : 0;
}

/* Element offset of a walker's row: block * block_stride + slot * row_stride. */
static __device__ __forceinline__ uint64_t paged_decode__row(const paged_decode__walker &w, uint64_t block_stride,
                                                             uint64_t row_stride) {
    return (uint64_t)(int64_t)w.block * block_stride + (uint64_t)w.slot * row_stride;
}

/* Loads the K and V chunks of a group's next U positions (one step) and
 * moves its walkers on by a step. Positions past `end` and chunks past the
 * head dim (cval false) read nothing and hold zeros. Chunk c of this lane
 * starts at element elem0 + c * chunk_elems of a row. */
template <int VB, int ES, int U, int NC, int W>
static __device__ __forceinline__ void paged_decode__load_step(
    uint32_t (&kd)[U][NC][W], uint32_t (&vd)[U][NC][W], paged_decode__walker (&wk)[U], const bool (&cval)[NC],
    const unsigned char *__restrict__ k_head, const unsigned char *__restrict__ v_head, uint32_t elem0,
    uint32_t chunk_elems, uint64_t block_stride, uint64_t row_stride, uint32_t stride, uint32_t stride_q,
    uint32_t stride_r, uint32_t end, uint32_t block_size, const int32_t *__restrict__ table) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const bool valid = wk[u].pos < end;
        const uint64_t row = paged_decode__row(wk[u], block_stride, row_stride);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            if (valid && cval[c]) {
                const uint64_t off = (row + elem0 + (uint32_t)c * chunk_elems) * ES;
                paged_decode__load<VB>(kd[u][c], k_head + off);
                paged_decode__load<VB>(vd[u][c], v_head + off);
            } else {
#pragma unroll
                for (int i = 0; i < W; ++i) kd[u][c][i] = vd[u][c][i] = 0u;
            }
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) paged_decode__walk_next(wk[u], stride, stride_q, stride_r, end, block_size, table);
}

/* ---- where a block's result goes ------------------------------------------- */

/* The cores end with, per head h < heads of the block and element d, the
 * block's softmax state over its positions: m (largest base-2 score, -inf
 * for none), l = sum_p 2^(s_p - m) and o = sum_p 2^(s_p - m) v_p[d] (v in
 * the cores' units), and hand it to Out::put. */

/* The seed kernels' output row(s): o / l times `scale`, rounded to bf16
 * once; zeros when the block had no position (l == 0). Head h's row is at
 * row + h * head_dim. */
struct paged_decode__out_bf16 {
    __nv_bfloat16 *row;
    float scale;
    __device__ __forceinline__ void put(uint32_t h, uint32_t d, uint32_t head_dim, float m, float l, float o) const {
        (void)m;
        row[h * head_dim + d] = __float2bfloat16_rn(l > 0.0f ? o * (scale / l) : 0.0f);
    }
};

/* A split's partial state in the split workspace (paged_decode__ws_*): head
 * h's accumulator row at acc + h * head_dim (o times `scale`, so it holds
 * dequantised values), its (m, l) at ml + 2h, written by the thread that
 * has d == 0. Left unnormalised: paged_decode_split_combine rescales the
 * splits to a common max before dividing. */
struct paged_decode__out_partial {
    float *acc;
    float *ml;
    float scale;
    __device__ __forceinline__ void put(uint32_t h, uint32_t d, uint32_t head_dim, float m, float l, float o) const {
        acc[h * head_dim + d] = o * scale;
        if (d == 0u) {
            ml[2u * h] = m;
            ml[2u * h + 1u] = l;
        }
    }
};

/* ---- split-KV ---------------------------------------------------------------- */

/* Split `split` of `num_splits` of the window [begin, end), as
 * [*sbegin, *send) (empty when *sbegin >= *send): the window's cache blocks
 * b0 = begin / block_size .. b1 = ceil_div(end, block_size) are dealt out
 * per = ceil_div(b1 - b0, num_splits) at a time, so every cache block is
 * read by one split only; split j covers [max(begin, (b0 + j*per) *
 * block_size), min(end, (b0 + (j+1)*per) * block_size)). Trailing splits
 * are empty when there are fewer blocks than splits (or per rounds up). */
static __device__ __forceinline__ void paged_decode__split_range(uint32_t begin, uint32_t end, uint32_t block_size,
                                                                 uint32_t num_splits, uint32_t split,
                                                                 uint32_t *sbegin, uint32_t *send) {
    *sbegin = end;
    *send = end;
    if (begin >= end) return;
    const uint32_t b0 = begin / block_size;
    const uint32_t b1 = (end - 1u) / block_size + 1u; /* ceil_div without overflow */
    const uint32_t per = (b1 - b0 - 1u) / num_splits + 1u;
    /* 64-bit: (b0 + j*per) * block_size passes 2^32 for the trailing splits. */
    const uint64_t lo = ((uint64_t)b0 + (uint64_t)split * per) * block_size;
    const uint64_t hi = lo + (uint64_t)per * block_size;
    const uint64_t sb = lo > begin ? lo : (uint64_t)begin;
    const uint64_t se = hi < end ? hi : (uint64_t)end;
    if (sb < se) {
        *sbegin = (uint32_t)sb;
        *send = (uint32_t)se;
    }
}

/* The split workspace (f32): R = num_seqs * num_splits * num_q_heads rows,
 * row (seq * num_splits + split) * num_q_heads + q_head; accumulators
 * [R][head_dim] from element 0, then (m, l) pairs [R][2]. */
static __device__ __forceinline__ uint64_t paged_decode__ws_row(uint32_t seq, uint32_t split, uint32_t num_splits,
                                                                uint32_t num_q_heads, uint32_t q_head) {
    return ((uint64_t)seq * num_splits + split) * num_q_heads + q_head;
}
static __device__ __forceinline__ float *paged_decode__ws_ml(float *ws, uint32_t num_seqs, uint32_t num_splits,
                                                             uint32_t num_q_heads, uint32_t head_dim, uint64_t row) {
    return ws + (uint64_t)num_seqs * num_splits * num_q_heads * head_dim + 2u * row;
}

/* An empty split's record: (m, l) = (-inf, 0) for each of its `heads` heads;
 * the accumulator rows are not written (the combine never reads them). */
static __device__ __forceinline__ void paged_decode__empty_split(float *ml, uint32_t heads) {
    for (uint32_t h = threadIdx.x; h < heads; h += PAGED_DECODE__THREADS) {
        ml[2u * h] = -INFINITY;
        ml[2u * h + 1u] = 0.0f;
    }
}

/* ---- plain kernels: one query head per block, head_dim known at run time -- */

/* Shared memory of the plain core (declared by the kernel, so that the fast
 * and the fallback instantiation share it). */
struct paged_decode__plain_smem {
    float acc[PAGED_DECODE__WARPS][PAGED_DECODE__MAX_HEAD_DIM];
    float m[PAGED_DECODE__WARPS];
    float l[PAGED_DECODE__WARPS];
};

/* One (query head, sequence), positions [begin, end). E elements per lane
 * chunk; G lanes per row is the smallest power of two covering head_dim / E
 * chunks, at most 32, so a warp holds 32 / G groups. Pointers: q_head at the
 * head's first element, k_head / v_head at the cache's element
 * kv_head * head_dim (byte pointers). The result goes to `out` (head 0). */
template <bool FP8, int E, class Out>
static __device__ __forceinline__ void paged_decode__plain_core(
    paged_decode__plain_smem &sm, const __nv_bfloat16 *__restrict__ q_head, const unsigned char *__restrict__ k_head,
    const unsigned char *__restrict__ v_head, const Out &out, const int32_t *__restrict__ table, uint32_t begin,
    uint32_t end, uint32_t head_dim, uint32_t block_size, uint64_t block_stride, uint64_t row_stride, float q_scale) {
    constexpr int ES = FP8 ? 1 : 2;
    constexpr int VB = E * ES;
    constexpr int W = paged_decode__words<VB>::n;
    constexpr int MAXC = (PAGED_DECODE__MAX_HEAD_DIM + 32 * E - 1) / (32 * E); /* chunks per lane */
    /* Positions per group per step: 4 keeps 4 K and 4 V loads of each lane in
     * flight (8 with the next step's). The element-load fallback (8 chunks a
     * lane) and 16-element fp8 chunks (16 q and 16 accumulator floats) take
     * 2, so their registers fit in 128 without spilling. */
    constexpr int U = (MAXC >= 4 || E >= 16) ? 2 : 4;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t chunks = (head_dim + E - 1) / E;
    uint32_t log_g = 0;
    while ((1u << log_g) < chunks && log_g < 5u) ++log_g;
    const uint32_t G = 1u << log_g, P = 32u >> log_g;
    const uint32_t lig = lane & (G - 1u), grp = lane >> log_g;

    /* This lane's slice of q, pre-scaled; zeros past head_dim make the
     * missing chunks contribute nothing. */
    float qf[MAXC][E], acc[MAXC][E];
    bool cval[MAXC];
    const unsigned short *qbits = reinterpret_cast<const unsigned short *>(q_head);
#pragma unroll
    for (int c = 0; c < MAXC; ++c) {
        const uint32_t e0 = (lig + (uint32_t)c * G) * E;
        cval[c] = e0 < head_dim; /* whole chunk: head_dim % E == 0 unless E == 1 */
#pragma unroll
        for (int e = 0; e < E; ++e) {
            qf[c][e] = cval[c] ? paged_decode__bf16_bits(qbits[e0 + e]) * q_scale : 0.0f;
            acc[c][e] = 0.0f;
        }
    }

    const uint32_t stride = PAGED_DECODE__WARPS * P * U;
    const uint32_t stride_q = stride / block_size, stride_r = stride % block_size;
    paged_decode__walker wk[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
        paged_decode__walk_init(wk[u], begin + (warp * P + grp) * U + (uint32_t)u, end, block_size, table);

    /* Software pipelining: step j + 1's loads are issued before step j's
     * arithmetic, so twice the bytes are in flight. Two register buffers take
     * turns (the loop is unrolled by two), so nothing is copied between them. */
    uint32_t ka[U][MAXC][W], va[U][MAXC][W], kb[U][MAXC][W], vb[U][MAXC][W];
    float m = -INFINITY, l = 0.0f;
    uint32_t gpos = begin + (warp * P + grp) * U; /* this group's first position of the step */

    /* One step's arithmetic on the K and V chunks of positions gpos + u. */
    auto compute = [&](const uint32_t (&kx)[U][MAXC][W], const uint32_t (&vx)[U][MAXC][W]) {
        bool valid[U];
#pragma unroll
        for (int u = 0; u < U; ++u) valid[u] = gpos + (uint32_t)u < end;

        float sc[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float part = 0.0f;
#pragma unroll
            for (int c = 0; c < MAXC; ++c) {
                float kf[E];
                paged_decode__to_float<FP8, E>(kx[u][c], kf);
#pragma unroll
                for (int e = 0; e < E; ++e) part = fmaf(qf[c][e], kf[e], part);
            }
            sc[u] = part;
        }
        for (uint32_t o = G >> 1; o > 0u; o >>= 1) {
#pragma unroll
            for (int u = 0; u < U; ++u) sc[u] += __shfl_xor_sync(PAGED_DECODE__FULL, sc[u], o);
        }
        float mx = -INFINITY;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (!valid[u]) sc[u] = -INFINITY;
            mx = fmaxf(mx, sc[u]);
        }
        const float mn = fmaxf(m, mx);
        if (mn != -INFINITY) { /* group-uniform; no shuffles inside */
            const float alpha = paged_decode__exp2(m - mn);
            l *= alpha;
#pragma unroll
            for (int c = 0; c < MAXC; ++c)
#pragma unroll
                for (int e = 0; e < E; ++e) acc[c][e] *= alpha;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const float p = paged_decode__exp2(sc[u] - mn);
                l += p;
#pragma unroll
                for (int c = 0; c < MAXC; ++c) {
                    float vf[E];
                    paged_decode__to_float<FP8, E>(vx[u][c], vf);
#pragma unroll
                    for (int e = 0; e < E; ++e) acc[c][e] = fmaf(p, vf[e], acc[c][e]);
                }
            }
            m = mn;
        }
    };
    auto load = [&](uint32_t (&kx)[U][MAXC][W], uint32_t (&vx)[U][MAXC][W]) {
        paged_decode__load_step<VB, ES>(kx, vx, wk, cval, k_head, v_head, lig * E, G * E, block_stride, row_stride,
                                        stride, stride_q, stride_r, end, block_size, table);
    };

    /* Warp-uniform trip count (the warp's first position), so every lane
     * reaches every shuffle; positions past `end` are masked. */
    uint32_t wpos = begin + warp * P * U;
    load(ka, va);
    while (wpos < end) {
        load(kb, vb);
        compute(ka, va);
        wpos += stride;
        gpos += stride;
        if (wpos >= end) break;
        load(ka, va);
        compute(kb, vb);
        wpos += stride;
        gpos += stride;
    }

    /* Merge the warp's groups: each lane scales its own state to the common
     * max, then adds its partner's. */
    for (uint32_t o = G; o < 32u; o <<= 1) {
        const float mo = __shfl_xor_sync(PAGED_DECODE__FULL, m, o);
        const float mm = fmaxf(m, mo);
        const float f = m == -INFINITY ? 0.0f : paged_decode__exp2(m - mm);
        const float tl = l * f;
        l = tl + __shfl_xor_sync(PAGED_DECODE__FULL, tl, o);
#pragma unroll
        for (int c = 0; c < MAXC; ++c)
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const float t = acc[c][e] * f;
                acc[c][e] = t + __shfl_xor_sync(PAGED_DECODE__FULL, t, o);
            }
        m = mm;
    }
    if (grp == 0u) {
#pragma unroll
        for (int c = 0; c < MAXC; ++c)
            if (cval[c]) {
#pragma unroll
                for (int e = 0; e < E; ++e) sm.acc[warp][(lig + (uint32_t)c * G) * E + e] = acc[c][e];
            }
    }
    if (lane == 0u) {
        sm.m[warp] = m;
        sm.l[warp] = l;
    }
    __syncthreads();

    for (uint32_t d = tid; d < head_dim; d += PAGED_DECODE__THREADS) {
        float mm = -INFINITY;
#pragma unroll
        for (int w = 0; w < PAGED_DECODE__WARPS; ++w) mm = fmaxf(mm, sm.m[w]);
        float lt = 0.0f, o = 0.0f;
#pragma unroll
        for (int w = 0; w < PAGED_DECODE__WARPS; ++w) {
            const float f = sm.m[w] == -INFINITY ? 0.0f : paged_decode__exp2(sm.m[w] - mm);
            lt = fmaf(sm.l[w], f, lt);
            o = fmaf(sm.acc[w][d], f, o);
        }
        out.put(0u, d, head_dim, mm, lt, o);
    }
}

/* ---- GQA-packed kernels: NH query heads of one KV head per block --------- */

template <int NH, int HD> struct paged_decode__gqa_smem {
    float acc[PAGED_DECODE__WARPS][NH][HD];
    float m[PAGED_DECODE__WARPS][NH];
    float l[PAGED_DECODE__WARPS][NH];
};

/* The block's merge of the packed cores: every warp has left its state per
 * head in sm (m, l and the accumulator row; m = -inf for none); after the
 * barrier each thread merges elements of the NH x HD output over the 8
 * warps (log-sum-exp rescale to the common max) and hands them to Out::put.
 * The barrier is __syncthreads, or with bar != 0 the named barrier bar of
 * the 8 warps (threads 0 .. 255) when the block has other warps besides
 * them (the bulk kernels' producer). */
template <int NH, int HD, class Out>
static __device__ __forceinline__ void paged_decode__gqa_merge(paged_decode__gqa_smem<NH, HD> &sm, const Out &out,
                                                               uint32_t bar = 0u) {
    if (bar == 0u)
        __syncthreads();
    else
        kl__bar_sync(bar, PAGED_DECODE__THREADS);
    for (uint32_t i = threadIdx.x; i < (uint32_t)(NH * HD); i += PAGED_DECODE__THREADS) {
        const uint32_t h = i / HD, d = i % HD;
        float mm = -INFINITY;
#pragma unroll
        for (int w = 0; w < PAGED_DECODE__WARPS; ++w) mm = fmaxf(mm, sm.m[w][h]);
        float lt = 0.0f, o = 0.0f;
#pragma unroll
        for (int w = 0; w < PAGED_DECODE__WARPS; ++w) {
            const float f = sm.m[w][h] == -INFINITY ? 0.0f : paged_decode__exp2(sm.m[w][h] - mm);
            lt = fmaf(sm.l[w][h], f, lt);
            o = fmaf(sm.acc[w][h][d], f, o);
        }
        out.put(h, d, (uint32_t)HD, mm, lt, o);
    }
}

template <int X> struct paged_decode__log2 {
    static_assert(X > 0 && (X & (X - 1)) == 0, "a power of two");
    static constexpr int value = X == 1 ? 0 : 1 + paged_decode__log2<(X > 1 ? X / 2 : 1)>::value;
};
template <> struct paged_decode__log2<1> {
    static constexpr int value = 0;
};

/* Butterfly reduce-scatter of part[0, n) over the lanes of a group, offset
 * o first: the lanes with bit o set keep the upper half of the values, their
 * partners the lower half, each adding what the other sends. After log2(n)
 * steps part[0] holds the group-wide sum of value index lig >> (log2(o) + 1
 * - log2(n)). A template recursion, so every index is a constant and part
 * stays in registers. */
template <int CAP, int n, int o>
static __device__ __forceinline__ void paged_decode__reduce_scatter(float (&part)[CAP], uint32_t lig) {
    if constexpr (n > 1) {
        constexpr int half = n / 2;
        const bool upper = (lig & (uint32_t)o) != 0u;
#pragma unroll
        for (int i = 0; i < half; ++i) {
            const float send = upper ? part[i] : part[i + half];
            const float keep = upper ? part[i + half] : part[i];
            part[i] = keep + __shfl_xor_sync(PAGED_DECODE__FULL, send, (uint32_t)o);
        }
        paged_decode__reduce_scatter<CAP, half, o / 2>(part, lig);
    }
}

/* One (KV head, sequence) with its NH query heads, head dim HD, each K and V
 * row read once for all NH heads. Everything that sizes registers is a
 * compile-time constant: G = min(32, HD / E) lanes per row, NC = HD / (G*E)
 * chunks per lane, U positions per group so that U * NH <= G.
 *
 * Per step a group computes N = U * NH partial dot products per lane and
 * reduces them with a butterfly reduce-scatter (N/2 + N/4 + ... shuffles
 * instead of N * log2(G)): afterwards lane `lig` of the group holds the full
 * score of value index lig >> SHIFT = u * NH + h. Each lane keeps the
 * online-softmax state (m, l) of its head h; the probabilities are then
 * broadcast for the accumulator update, and the accumulator is rescaled only
 * when some running max grew (a vote). q_grp points at the group's first
 * query head; the results of its heads 0 .. NH-1 go to `out`. */
template <bool FP8, int NH, int HD, int E, class Out>
static __device__ __forceinline__ void paged_decode__gqa_core(
    paged_decode__gqa_smem<NH, HD> &sm, const __nv_bfloat16 *__restrict__ q_grp,
    const unsigned char *__restrict__ k_head, const unsigned char *__restrict__ v_head,
    const Out &out, const int32_t *__restrict__ table, uint32_t begin, uint32_t end, uint32_t block_size,
    uint64_t block_stride, uint64_t row_stride, float q_scale) {
    constexpr int ES = FP8 ? 1 : 2;
    constexpr int VB = E * ES;
    constexpr int W = paged_decode__words<VB>::n;
    constexpr int G = HD / E >= 32 ? 32 : HD / E;
    static_assert(G >= 1 && (G & (G - 1)) == 0 && HD % (G * E) == 0, "head dim must split evenly over the lanes");
    constexpr int NC = HD / (G * E);
    constexpr int LOG_G = paged_decode__log2<G>::value;
    constexpr int P = 32 / G;
    static_assert(NH >= 1 && (NH & (NH - 1)) == 0 && NH <= G, "query heads per KV head: a power of two <= G");
    constexpr int U = G / NH < 4 ? G / NH : 4;
    constexpr int N = U * NH;
    constexpr int LOG_N = paged_decode__log2<N>::value;
    constexpr int SHIFT = LOG_G - LOG_N;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t lig = lane & (uint32_t)(G - 1), grp = lane >> LOG_G;
    const uint32_t gbase = grp << LOG_G; /* first lane of this group */
    const uint32_t my_idx = lig >> SHIFT;
    const uint32_t my_u = my_idx / NH, my_h = my_idx % NH;

    float qf[NH][NC][E], acc[NH][NC][E];
    const unsigned short *qbits = reinterpret_cast<const unsigned short *>(q_grp);
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int c = 0; c < NC; ++c)
#pragma unroll
            for (int e = 0; e < E; ++e) {
                qf[h][c][e] = paged_decode__bf16_bits(qbits[h * HD + (lig + c * G) * E + e]) * q_scale;
                acc[h][c][e] = 0.0f;
            }

    const uint32_t stride = PAGED_DECODE__WARPS * P * U;
    const uint32_t stride_q = stride / block_size, stride_r = stride % block_size;
    const uint32_t first = begin + (warp * P + grp) * U; /* this group's first position */
    paged_decode__walker wk[U];
#pragma unroll
    for (int u = 0; u < U; ++u) paged_decode__walk_init(wk[u], first + (uint32_t)u, end, block_size, table);

    /* Software pipelining with two register buffers, as in the plain core. */
    bool cval[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) cval[c] = true;
    uint32_t ka[U][NC][W], va[U][NC][W], kb[U][NC][W], vb[U][NC][W];
    uint32_t gpos = first;
    float m = -INFINITY, l = 0.0f; /* state of head my_h */

    auto compute = [&](const uint32_t (&kx)[U][NC][W], const uint32_t (&vx)[U][NC][W]) {
        /* Partial dot products, index u * NH + h. */
        float part[N];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float kf[NC][E];
#pragma unroll
            for (int c = 0; c < NC; ++c) paged_decode__to_float<FP8, E>(kx[u][c], kf[c]);
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                float s = 0.0f;
#pragma unroll
                for (int c = 0; c < NC; ++c)
#pragma unroll
                    for (int e = 0; e < E; ++e) s = fmaf(qf[h][c][e], kf[c][e], s);
                part[u * NH + h] = s;
            }
        }
        paged_decode__reduce_scatter<N, N, G / 2>(part, lig);
        float sc = part[0];
#pragma unroll
        for (int o = (1 << SHIFT) >> 1; o > 0; o >>= 1) sc += __shfl_xor_sync(PAGED_DECODE__FULL, sc, (uint32_t)o);
        if (gpos + my_u >= end) sc = -INFINITY;

        /* Head-wise max and sum over the U positions: the lanes of head h
         * differ in the u bits of the index. */
        float mx = sc;
#pragma unroll
        for (int k = NH; k < N; k <<= 1) mx = fmaxf(mx, __shfl_xor_sync(PAGED_DECODE__FULL, mx, (uint32_t)(k << SHIFT)));
        const float mn = fmaxf(m, mx);
        const float p = mn == -INFINITY ? 0.0f : paged_decode__exp2(sc - mn);
        const float alpha = mn == -INFINITY ? 1.0f : paged_decode__exp2(m - mn);
        float ps = p;
#pragma unroll
        for (int k = NH; k < N; k <<= 1) ps += __shfl_xor_sync(PAGED_DECODE__FULL, ps, (uint32_t)(k << SHIFT));
        l = fmaf(l, alpha, ps);
        m = mn;

        if (__any_sync(PAGED_DECODE__FULL, alpha != 1.0f)) {
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                const float a = __shfl_sync(PAGED_DECODE__FULL, alpha, gbase + ((uint32_t)h << SHIFT));
#pragma unroll
                for (int c = 0; c < NC; ++c)
#pragma unroll
                    for (int e = 0; e < E; ++e) acc[h][c][e] *= a;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float vf[NC][E];
#pragma unroll
            for (int c = 0; c < NC; ++c) paged_decode__to_float<FP8, E>(vx[u][c], vf[c]);
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                const float pu = __shfl_sync(PAGED_DECODE__FULL, p, gbase + ((uint32_t)(u * NH + h) << SHIFT));
#pragma unroll
                for (int c = 0; c < NC; ++c)
#pragma unroll
                    for (int e = 0; e < E; ++e) acc[h][c][e] = fmaf(pu, vf[c][e], acc[h][c][e]);
            }
        }
    };
    auto load = [&](uint32_t (&kx)[U][NC][W], uint32_t (&vx)[U][NC][W]) {
        paged_decode__load_step<VB, ES>(kx, vx, wk, cval, k_head, v_head, lig * E, G * E, block_stride, row_stride,
                                        stride, stride_q, stride_r, end, block_size, table);
    };

    uint32_t wpos = begin + warp * P * U;
    load(ka, va);
    while (wpos < end) {
        load(kb, vb);
        compute(ka, va);
        wpos += stride;
        gpos += stride;
        if (wpos >= end) break;
        load(ka, va);
        compute(kb, vb);
        wpos += stride;
        gpos += stride;
    }

    /* Merge the warp's groups (lanes lig and lig ^ o hold the same head). */
#pragma unroll
    for (int o = G; o < 32; o <<= 1) {
        const float mo = __shfl_xor_sync(PAGED_DECODE__FULL, m, (uint32_t)o);
        const float mm = fmaxf(m, mo);
        const float f = m == -INFINITY ? 0.0f : paged_decode__exp2(m - mm);
        const float tl = l * f;
        l = tl + __shfl_xor_sync(PAGED_DECODE__FULL, tl, (uint32_t)o);
#pragma unroll
        for (int h = 0; h < NH; ++h) {
            const float fh = __shfl_sync(PAGED_DECODE__FULL, f, gbase + ((uint32_t)h << SHIFT));
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    const float t = acc[h][c][e] * fh;
                    acc[h][c][e] = t + __shfl_xor_sync(PAGED_DECODE__FULL, t, (uint32_t)o);
                }
        }
        m = mm;
    }
    if (grp == 0u) {
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
            for (int c = 0; c < NC; ++c)
#pragma unroll
                for (int e = 0; e < E; ++e) sm.acc[warp][h][(lig + c * G) * E + e] = acc[h][c][e];
        if (my_u == 0u && (lig & ((1u << SHIFT) - 1u)) == 0u) {
            sm.m[warp][my_h] = m;
            sm.l[warp][my_h] = l;
        }
    }
    paged_decode__gqa_merge<NH, HD>(sm, out);
}

#endif /* KLAUNCH_KERNELS_PAGED_DECODE_COMMON_CUH */
