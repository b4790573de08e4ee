/* paged_decode_split.h - split-KV (flash-decoding) helpers of the paged
 * decode family: the workspace size, the choice of num_splits, the
 * persistent launchers' grid, workspace and counters, and whether a
 * GQA-packed kernel fits a shape.
 * Hand-written, header-only, C99 and C++;
 * needs only klaunch.h (every function is static inline).
 *
 * USE
 *       #include "klaunch/paged_decode.h"        // the launchers
 *       #include "klaunch/paged_decode_split.h"
 *
 *       uint32_t splits = kl_paged_decode_num_splits(num_seqs, num_kv_heads, max_seq_len,
 *                                                    sliding_window, 16, sm_count);
 *       if (splits == 1 && kl_paged_decode_gqa_applies(&attn_gqa, 32, 8, 128)) {
 *           // the seed grid fills the GPU: kl_paged_decode_attn_bf16_gqa(&attn_gqa, ...)
 *       } else {
 *           uint64_t bytes = kl_paged_decode_split_workspace_bytes(num_seqs, 32, 128, splits);
 *           // workspace: bytes of device memory (cuMemAlloc, cudaMalloc), reusable
 *           kl_paged_decode_split_bf16_gqa(&split_gqa, q, kc, vc, workspace, tables, lens,
 *               max_blocks, num_seqs, 32, 8, 128, 16, 0.088f, 4096, 0, splits, bytes, stream);
 *           kl_paged_decode_split_combine(&combine, workspace, out, num_seqs, 32, 128, splits,
 *               bytes, stream);
 *       }
 *
 * SPLIT-KV (specs/paged_decode.yaml, launchers paged_decode_split_*)
 *   The seed kernels give a sequence one block per head: a few long
 *   sequences leave most multiprocessors idle. The partial launchers run a
 *   (heads, num_seqs, num_splits) grid; block (., seq, j) attends to split j
 *   of the sequence's window [begin, end) (the seed kernels' window). Splits
 *   are whole cache blocks: b0 = begin / block_size, b1 =
 *   ceil_div(end, block_size), per = ceil_div(b1 - b0, num_splits), and split
 *   j covers positions [max(begin, (b0 + j*per) * block_size),
 *   min(end, (b0 + (j+1)*per) * block_size)), so each cache block is read by
 *   one split; trailing splits may be empty. paged_decode_split_combine then
 *   writes the output, with the seed kernels' semantics (zeros for L == 0).
 *
 * WORKSPACE (float, 4-byte aligned; its contents need no initialisation)
 *   R = num_seqs * num_splits * num_q_heads rows; row
 *   r = (seq * num_splits + split) * num_q_heads + q_head.
 *     acc[R][head_dim]  from element 0          sum_p 2^(s_p - m) v_p
 *     ml[R][2]          from element R*head_dim  (m, l)
 *   s_p = (q . k_p) * inv_sqrt_d * log2(e) (base-2 scores, k and v
 *   dequantised), m = max_p s_p, l = sum_p 2^(s_p - m), p over the split's
 *   positions. An empty split writes m = -inf, l = 0 and leaves its acc row
 *   as it was; the combine never reads it.
 *   Bytes: 4 * num_seqs * num_splits * num_q_heads * (head_dim + 2)
 *   (kl_paged_decode_split_workspace_bytes). The launchers check the
 *   workspace_bytes argument against the same formula.
 *
 * CHOOSING A LAUNCHER (kl_paged_decode_gqa_{bf16,fp8}_choose)
 *   Generated from specs/paged_decode.yaml's operations (klaunch/choose.h):
 *   from a table of measured times where one covers the device and shape,
 *   else the spec's rule (its comment there says why, from counts), which
 *   reads the shape, which copy-engine (*_gqa_bulk, *_gqa_tma; sm_90a)
 *   handles loaded, whether the caches are 16-byte aligned and whether the
 *   caller keeps the persistent launchers' workspace and counters. Its
 *   num_splits and num_ctas default to the two functions below.
 *
 * CHOOSING num_splits (kl_paged_decode_num_splits)
 *   See the function. It returns 1 when the seed grid already keeps the
 *   multiprocessors busy; use the seed launchers then (no workspace, no
 *   combine launch).
 *
 * ERROR REPORTING
 *   None of these functions fails or reports: they return values, and
 *   never touch kl_last_error() or the error callback, so a caller can
 *   probe shapes freely.
 */
#ifndef KLAUNCH_PAGED_DECODE_SPLIT_H
#define KLAUNCH_PAGED_DECODE_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "klaunch/klaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most splits kl_paged_decode_num_splits chooses: bounds the workspace
 * (64 * (head_dim + 2) floats per head and sequence) and the combine's
 * work. The launchers themselves take any num_splits up to the grid limit
 * (65535). */
#define KL_PAGED_DECODE_MAX_SPLITS 64u
/* The fewest window positions per split kl_paged_decode_num_splits aims at:
 * below that a split's fixed cost (q load, block merge, the workspace
 * record, the combine) is no longer small beside its KV reads. */
#define KL_PAGED_DECODE_MIN_SPLIT_POSITIONS 256u

/* Bytes of workspace the split launchers and the combine need:
 * 4 * num_seqs * num_splits * num_q_heads * (head_dim + 2).
 * UINT64_MAX when that overflows 64 bits (no allocation can hold it). */
static inline uint64_t kl_paged_decode_split_workspace_bytes(uint32_t num_seqs, uint32_t num_q_heads,
                                                             uint32_t head_dim, uint32_t num_splits) {
    uint64_t n = 4u;
    if (kl__mul(n, num_seqs, &n) || kl__mul(n, num_splits, &n) || kl__mul(n, num_q_heads, &n) ||
        kl__mul(n, (uint64_t)head_dim + 2u, &n))
        return UINT64_MAX;
    return n;
}

/* The number of splits per sequence for a split-KV launch, from the shape
 * and the device:
 *
 *   num_kv_heads  the grid's x extent: num_kv_heads for the packed kernels
 *                 (*_gqa), num_q_heads for the plain ones
 *   max_seq_len   the longest sequence of the batch
 *   sliding_window, block_size   as given to the launcher
 *   sm_count      the blocks that run at once: the multiprocessor count
 *                 (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) for the packed
 *                 kernels, which fit one block on a multiprocessor; twice
 *                 it for the plain kernels, which fit two
 *
 * The rule. window = max_seq_len, clipped to sliding_window when that is
 * nonzero. base = num_seqs * num_kv_heads (the seed grid's blocks). A grid
 * of B = base * S equal blocks runs in waves = ceil_div(B, sm_count) waves
 * and keeps busy the fraction B / (waves * sm_count) of the multiprocessor
 * time. S0 is the smallest count in [1, cap] whose fraction is at least
 * 0.9, and S the largest count in [S0, cap] that runs in the same waves as
 * S0: min(cap, floor(waves(S0) * sm_count / base)). When no count reaches
 * 0.9, S is the one with the largest fraction (the smallest of equals).
 * cap = min(KL_PAGED_DECODE_MAX_SPLITS,
 * window / KL_PAGED_DECODE_MIN_SPLIT_POSITIONS, ceil_div(window,
 * block_size)), at least 1 (each split at least 256 positions and one cache
 * block). Returns 1 when any argument but sliding_window is zero.
 *
 * Why past S0: the waves take the same time per block-position, so more
 * splits in the same waves means shorter blocks on more multiprocessors.
 * Measured on an H200 (132 SMs, GQA bf16, 1 x 32768; bench/decode's sweep,
 * 2026-11-29): S0 = 15 (120 blocks, 91% busy, one wave) 0.61 of copy
 * bandwidth; S = floor(132 / 8) = 16 (128 blocks, 97%, one wave, 2048
 * positions a split) 0.64, the best of the sweep; a second wave costs more
 * than it fills (17: 0.41, 32: 0.52, 33: 0.51, 64: 0.40). Measured again
 * for the tensor-core partials (paged_decode_split_bf16_gqa_mma, PDL
 * combine; H200, 2026-12-01, two runs): 8: 0.64, 12: 0.73, 15: 0.72, 16:
 * 0.72, 17: 0.52, 32: 0.56, 64: 0.42; they too hold one block per SM, so
 * the same sm_count applies and the rule's 16 is 0.98-0.99 of the best
 * (12). docs/PERFORMANCE.md has the sweeps.
 *
 * So the seed grid stays (S = 1) whenever base >= 9 * sm_count; e.g. on
 * 132 multiprocessors: 32 sequences x 8 KV heads (256 blocks, 97% busy, 2
 * waves; S = 2 would need 4) -> 1; one sequence of 32768 x 8 KV heads -> 16
 * (128 blocks, 97%); one of 1000 -> 3 (the 256-position floor). */
static inline uint32_t kl_paged_decode_num_splits(uint32_t num_seqs, uint32_t num_kv_heads, uint32_t max_seq_len,
                                                  uint32_t sliding_window, uint32_t block_size, uint32_t sm_count) {
    uint32_t window, cap, s, best = 1;
    uint64_t base, best_blocks = 0, best_slots = 1;
    if (num_seqs == 0 || num_kv_heads == 0 || max_seq_len == 0 || block_size == 0 || sm_count == 0) return 1;
    window = (sliding_window != 0 && sliding_window < max_seq_len) ? sliding_window : max_seq_len;
    cap = window / KL_PAGED_DECODE_MIN_SPLIT_POSITIONS;
    if (cap > KL_PAGED_DECODE_MAX_SPLITS) cap = KL_PAGED_DECODE_MAX_SPLITS;
    if (cap > (window - 1u) / block_size + 1u) cap = (window - 1u) / block_size + 1u;
    base = (uint64_t)num_seqs * num_kv_heads;
    /* At base >= 9 * sm_count one split already keeps > 90% busy (less than
     * one wave idle in nine); returning here also keeps base * s small. */
    if (cap <= 1 || base >= 9u * (uint64_t)sm_count) return 1;
    for (s = 1; s <= cap; s++) {
        const uint64_t blocks = base * s;
        const uint64_t slots = (blocks + sm_count - 1u) / sm_count * sm_count;
        if (10u * blocks >= 9u * slots) {
            /* Then the most splits in the same waves: equal time per wave,
             * shorter blocks, more multiprocessors busy (slots / base >= s). */
            const uint64_t fit = slots / base;
            return fit < cap ? (uint32_t)fit : cap;
        }
        /* blocks / slots > best_blocks / best_slots, without division */
        if (blocks * best_slots > best_blocks * slots) {
            best = s;
            best_blocks = blocks;
            best_slots = slots;
        }
    }
    return best;
}

/* ---- the persistent launchers (paged_decode_persist_{bf16,fp8}_gqa_mma) ----
 *
 * One launch of num_ctas blocks for the whole batch, no combine launch
 * (specs/paged_decode.yaml says how the blocks divide the work). They
 * need:
 *   workspace  kl_paged_decode_persist_workspace_bytes(pack_width,
 *              head_dim, num_ctas) bytes of device memory, float-aligned,
 *              no initialisation (2 records per block);
 *   counters   num_seqs * num_kv_heads uint32_t words (kl_paged_decode_
 *              persist_counter_words), ZERO before the first launch
 *              (cuMemsetD32 once after allocating them); every completed
 *              launch leaves them zero, so they are reused as they are.
 *              Launches that share counters or workspace may follow one
 *              another on one stream with no wait between, any mix of the
 *              persistent launchers: the _bulk and _tma ones are
 *              programmatic dependent launches that touch no global memory
 *              before griddepcontrol.wait, which returns once the launch
 *              before has completed (specs/paged_decode.yaml). Across
 *              streams, order them with events.
 *
 *       uint32_t ctas = kl_paged_decode_persist_ctas(num_seqs, 8, max_len, 0, sm_count);
 *       uint64_t ws = kl_paged_decode_persist_workspace_bytes(4, 128, ctas);
 *       uint64_t nc = kl_paged_decode_persist_counter_words(num_seqs, 8);
 *       // allocate ws bytes and nc words; cuMemsetD32(counters, 0, nc) once
 *       kl_paged_decode_persist_bf16_gqa_mma(&k, q, kc, vc, out, tables, lens, max_blocks,
 *           num_seqs, 32, 8, 128, 16, 0.088f, 4096, 0, workspace, counters, ctas, ws, nc, stream);
 *
 * Which to call: kl_paged_decode_gqa_{bf16,fp8}_choose says, from the shape
 * and the handles that loaded on this device (CHOOSING A LAUNCHER above).
 */

/* Bytes of workspace: 8 * num_ctas * pack_width * (head_dim + 2); UINT64_MAX
 * when that overflows 64 bits. */
static inline uint64_t kl_paged_decode_persist_workspace_bytes(uint32_t pack_width, uint32_t head_dim,
                                                               uint32_t num_ctas) {
    uint64_t n = 8u;
    if (kl__mul(n, num_ctas, &n) || kl__mul(n, pack_width, &n) || kl__mul(n, (uint64_t)head_dim + 2u, &n))
        return UINT64_MAX;
    return n;
}

/* Counter words: num_seqs * num_kv_heads. */
static inline uint64_t kl_paged_decode_persist_counter_words(uint32_t num_seqs, uint32_t num_kv_heads) {
    return (uint64_t)num_seqs * num_kv_heads;
}

/* The persistent grid (num_ctas) from the shape and the device:
 *
 *   units = num_seqs * num_kv_heads; sm_count: the multiprocessors (the
 *   packed _mma cores hold one 256-thread block per SM at 233-255
 *   registers, so sm_count blocks are what runs at once).
 *   Aligned grid A: the most blocks <= sm_count for which equal units fall
 *   on block boundaries: units * floor(sm_count / units) when units <=
 *   sm_count (each unit split evenly), else ceil_div(units, k) with k =
 *   ceil_div(units, sm_count) units per block (no unit cut).
 *   If A keeps >= 90% of the SMs (10 A >= 9 sm_count) the rule takes A,
 *   else sm_count (cut units, merged by the last arrival, rather than idle
 *   SMs). Then at most the batch's tiles of 16 positions (num_seqs *
 *   num_kv_heads * ceil_div(window, 16), window = max_seq_len clipped to
 *   a nonzero sliding_window; an empty sequence counts one), so no block is
 *   left without work; 1 to 65535 (the launchers' limit).
 *
 * E.g. 132 SMs: 1 x 32768 at 8 KV heads -> 128 (16 blocks a unit); 32 x
 * 4096 -> 128 (2 units a block); 40 x 8 units -> 107 (81%) -> 132.
 * Measured on the H200 (bench/decode's persistent sweep over SMs / 2,
 * SMs - 4, SMs, 2 SMs; docs/PERFORMANCE.md, paged decode, persistent
 * schedule): the aligned 128 blocks were the best of the four at 32 x 4096
 * and 1 x 32768, bf16 and fp8; a second wave (264) the worst. */
static inline uint32_t kl_paged_decode_persist_ctas(uint32_t num_seqs, uint32_t num_kv_heads, uint32_t max_seq_len,
                                                    uint32_t sliding_window, uint32_t sm_count) {
    uint32_t window;
    uint64_t tiles, units, aligned, n = sm_count;
    if (n == 0u) n = 1u;
    if (n > 65535u) n = 65535u;
    units = (uint64_t)num_seqs * num_kv_heads;
    if (units == 0u) units = 1u;
    if (units <= n) {
        aligned = units * (n / units);
    } else {
        const uint64_t k = (units + n - 1u) / n;
        aligned = (units + k - 1u) / k;
    }
    if (10u * aligned >= 9u * n) n = aligned;
    window = (sliding_window != 0u && sliding_window < max_seq_len) ? sliding_window : max_seq_len;
    tiles = units * (window == 0u ? 1u : ((uint64_t)window + 15u) / 16u);
    return (uint32_t)(tiles < n ? tiles : n);
}

/* Does the GQA-packed kernel `gqa_kernel` (a handle from
 * kl_paged_decode_attn_{bf16,fp8}_gqa_get or
 * kl_paged_decode_split_{bf16,fp8}_gqa_get) fit this shape? True exactly
 * when the shape meets the variant preconditions its launcher checks:
 * num_q_heads == num_kv_heads * DECODE_GQA_PACK_WIDTH and head_dim ==
 * DECODE_GQA_PACK_HEAD_DIM of the loaded variant. False for NULL, a handle
 * that is not loaded, or one whose launcher has no pack constants (the
 * plain kernels). The other preconditions (block_size, q_stride, ...) are
 * the call's, not the shape's: kl_X_check() checks everything, but reports
 * a failure (kl_last_error, the error callback); this reports nothing. */
static inline bool kl_paged_decode_gqa_applies(const kl_kernel *gqa_kernel, uint32_t num_q_heads,
                                               uint32_t num_kv_heads, uint32_t head_dim) {
    const kl_kernel_desc *desc;
    int64_t width = -1, pack_dim = -1;
    uint32_t i;
    if (gqa_kernel == NULL || gqa_kernel->magic != KL__KERNEL_MAGIC || gqa_kernel->desc == NULL) return false;
    desc = gqa_kernel->desc;
    if (desc->family == NULL || strcmp(desc->family, "paged_decode") != 0) return false;
    for (i = 0; i < desc->num_consts && i < KL_MAX_CONSTS; i++) {
        if (strcmp(desc->const_names[i], "DECODE_GQA_PACK_WIDTH") == 0) width = gqa_kernel->consts[i];
        if (strcmp(desc->const_names[i], "DECODE_GQA_PACK_HEAD_DIM") == 0) pack_dim = gqa_kernel->consts[i];
    }
    /* A negative constant fails the launcher's check too. */
    if (width < 0 || pack_dim < 0) return false;
    /* num_kv_heads * width in 64 bits; where that overflows the launcher
     * reports KL_ERROR_OVERFLOW, and num_q_heads (32 bits) cannot equal it. */
    if (num_kv_heads != 0 && (uint64_t)width > UINT64_MAX / num_kv_heads) return false;
    return (uint64_t)num_q_heads == (uint64_t)num_kv_heads * (uint64_t)width && (uint64_t)head_dim == (uint64_t)pack_dim;
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_PAGED_DECODE_SPLIT_H */
