/* mla_decode_layout.h - the buffers of the MLA decode family
 * (specs/mla_decode.yaml) in one place, for the host and for the kernels
 * (kernels/mla_decode/ include it): the schedule, the workspace, the fp8
 * cache token; their sizes; how many parts to ask for; which attention
 * launcher to call. Hand-written, header-only, C99, C++ and CUDA.
 *
 * USE (one decode step; the schedule and workspace serve every layer)
 *       #include "klaunch/mla_decode.h"          // the launchers
 *       #include "klaunch/mla_decode_layout.h"
 *
 *       uint32_t parts = kl_mla_decode_num_parts(KL_MLA_DECODE_BF16_TMA, sm_count, s_q, h_q);
 *       uint64_t words = kl_mla_decode_schedule_words(batch, parts);       // int32 words
 *       uint64_t bytes = kl_mla_decode_workspace_bytes(parts, s_q, h_q, 576);
 *       // sched, workspace: device memory of that size, allocated once
 *       kl_mla_decode_schedule(&sched_k, lengths, sched, batch, parts, words, stream);
 *       for (each layer) {
 *           kl_mla_decode_attn_bf16_tma(&attn, &q_map, &cache_map, table, lengths, sched, out, lse,
 *               workspace, batch, s_q, h_q, 576, 64, max_blocks, num_blocks, scale, parts, words,
 *               bytes, stream);
 *           kl_mla_decode_combine_pdl(&comb, sched, workspace, out, lse, batch, s_q, h_q, 576,
 *               parts, words, bytes, stream);
 *       }
 *
 * THE SCHEDULE (int32 words, written by mla_decode_schedule)
 *   A sequence b of length L_b (negative counts as 0) has T_b =
 *   ceil(L_b / 64) key tiles and costs T_b + KL_MLA_DECODE_SCHED_FIXED_COST
 *   units (its Q tile, its epilogue, its share of the combine). The units
 *   of all sequences are laid end to end (C_b = the units before b, C_B
 *   the total) and cut at X_p = p * ceil(C_B / P), p = 0 .. P (P =
 *   num_parts; X_P is the end). A cut at X inside sequence b falls before
 *   its key tile clamp(X - C_b - FIXED, 0, T_b): a cut within the fixed
 *   cost falls before the sequence. Part p does everything from cut p to
 *   cut p + 1; a sequence with cuts inside its tiles has that many splits
 *   more than 1, and split k goes to workspace slot base_b + k.
 *     [0]  KL_MLA_DECODE_SCHED_MAGIC     [1]  batch     [2]  num_parts
 *     [3]  partial slots used (<= 2 * num_parts)
 *     [4], [5]  C_B, the total units (u64, low word first)   [6..16) zero
 *     part p at 16 + 8 p: begin_seq, begin_tile, end_seq, end_tile,
 *       begin_split, 0, 0, 0: the part runs from (begin_seq, begin_tile)
 *       to before (end_seq, end_tile) (end_tile 0: before end_seq
 *       entirely); begin_split is the split of begin_seq it starts
 *     num_splits[b]     at 16 + 8 P + b       (1: the attention writes out)
 *     base[b]           at 16 + 8 P + B + b   (its first slot, when split)
 *     C_b (u64, low word first) at 16 + 8 P + 2 B + 2 b, b < B: the
 *       schedule's scratch, kept for tests
 *   Words: kl_mla_decode_schedule_words(B, P) = 16 + 8 P + 4 B.
 *
 * THE WORKSPACE (float, written by the attention, read by the combine)
 *   R = s_q * h_q rows a sequence, DV = head_dim - 64 (kv_lora), S = 2 P
 *   slots. Slot k holds, for each row r, the split's output normalised by
 *   its own softmax sum, and its log-sum-exp (natural log, -inf for a split
 *   that saw no position, whose output row is zeros):
 *     o   [S][R][DV]  from float 0
 *     lse [S][R]      from float S * R * DV
 *   Bytes: kl_mla_decode_workspace_bytes(P, s_q, h_q, head_dim) =
 *   4 * S * R * (DV + 1). Its contents need no initialisation. The
 *   schedule numbers at most 2 P - 2 slots (at most P - 1 cuts fall inside
 *   sequences, each making at most 2 splits), so the kernels touch floats
 *   below S * R * DV + (2 P - 2) * R = 2 R (P (DV + 1) - 1), the spec's
 *   declared extent of workspace; slots 2 P - 2 and 2 P - 1 stay unused.
 *
 * THE FP8 CACHE TOKEN (mla_decode_attn_fp8_*: kv_cache [blocks][page][bytes])
 *   bytes [0, kv_lora)               the latent values, E4M3
 *   bytes [kv_lora, + kv_lora / 32)  one fp32 scale per 128 latent values
 *   bytes [rope_off, + 128)          the 64 rope values, bf16
 *   rope_off = the scales' end rounded up to 16 bytes: 528 at D 576 (656
 *   bytes a token, FlashMLA's format), 272 at D 320 (400 bytes; the 8
 *   bytes after the 2 scales are padding). Latent c = e4m3[c] * scale[c / 128].
 *
 * CHOOSING A LAUNCHER (docs/MLA_DECODE.md)
 *   kl_mla_decode_attn_{bf16,fp8}_choose (generated from the spec's
 *   operations:, klaunch/choose.h) chooses by measurement where a table
 *   covers the card and shape, else by the spec's rule: the _tma
 *   launcher of the cache's type on sm_90 when it loaded (kl_X_get
 *   succeeded) and page_size % 64 == 0; the _mma ones everywhere else.
 *   Call the chooser. kl_mla_decode_pick (below) is that rule by hand,
 *   left only for bench/mla_decode's JSON until it moves to the chooser
 *   (issue 45), then removed.
 *
 * ERROR REPORTING
 *   None of these functions fails or reports: they return values
 *   (UINT64_MAX where a size overflows 64 bits), and never touch
 *   kl_last_error() or the error callback.
 */
#ifndef KLAUNCH_MLA_DECODE_LAYOUT_H
#define KLAUNCH_MLA_DECODE_LAYOUT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define KL__MLA_DECODE_FN static inline __host__ __device__
#else
#define KL__MLA_DECODE_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Key positions a schedule tile holds (every attention kernel steps over them). */
#define KL_MLA_DECODE_TILE 64u
/* Units a sequence costs besides its tiles (see THE SCHEDULE). */
#define KL_MLA_DECODE_SCHED_FIXED_COST 4u
/* sched[0] once the schedule has run: "MLAD". */
#define KL_MLA_DECODE_SCHED_MAGIC 0x4d4c4144
/* Word offsets of the schedule. */
#define KL_MLA_DECODE_SCHED_HEADER_WORDS 16u
#define KL_MLA_DECODE_SCHED_PART_WORDS 8u

/* The attention launchers, by the rows a block takes and the blocks a
 * multiprocessor holds (what num_parts depends on). */
typedef enum kl_mla_decode_kind {
    KL_MLA_DECODE_MMA = 0,      /* mla_decode_attn_{bf16,fp8}_mma: 16 rows a block, 2 blocks a multiprocessor */
    KL_MLA_DECODE_BF16_TMA = 1, /* mla_decode_attn_bf16_tma: 64 rows a block, 1 block a multiprocessor */
    KL_MLA_DECODE_FP8_TMA = 2   /* mla_decode_attn_fp8_tma: 16 rows a block, 1 block a multiprocessor */
} kl_mla_decode_kind;

KL__MLA_DECODE_FN uint32_t kl_mla_decode_rows_per_block(kl_mla_decode_kind kind) {
    return kind == KL_MLA_DECODE_BF16_TMA ? 64u : 16u;
}
KL__MLA_DECODE_FN uint32_t kl_mla_decode_blocks_per_sm(kl_mla_decode_kind kind) {
    return kind == KL_MLA_DECODE_MMA ? 2u : 1u;
}

/* int32 words of the schedule: 16 + 8 * num_parts + 4 * batch. */
KL__MLA_DECODE_FN uint64_t kl_mla_decode_schedule_words(uint32_t batch, uint32_t num_parts) {
    return 16u + 8u * (uint64_t)num_parts + 4u * (uint64_t)batch;
}

/* Bytes of workspace: 8 * num_parts * s_q * h_q * (head_dim - 63); UINT64_MAX
 * when head_dim < 64 (no such variant) or the product overflows. */
KL__MLA_DECODE_FN uint64_t kl_mla_decode_workspace_bytes(uint32_t num_parts, uint32_t s_q, uint32_t h_q,
                                                         uint32_t head_dim) {
    if (head_dim < 64u) return UINT64_MAX;
    /* each factor is below 2^32: check each product against the remaining room */
    const uint64_t f[4] = {8u * (uint64_t)num_parts, s_q, h_q, (uint64_t)head_dim - 63u};
    uint64_t n = 1u;
    for (int i = 0; i < 4; ++i) {
        if (f[i] != 0u && n > UINT64_MAX / f[i]) return UINT64_MAX;
        n *= f[i];
    }
    return n;
}

/* num_parts for a launcher kind on a device of sm_count multiprocessors:
 * the blocks that run at once (sm_count * kl_mla_decode_blocks_per_sm)
 * over the blocks a part needs (ceil(s_q * h_q / rows a block)), at least
 * 1 and at most 65535 (the grid's y limit). */
KL__MLA_DECODE_FN uint32_t kl_mla_decode_num_parts(kl_mla_decode_kind kind, uint32_t sm_count, uint32_t s_q,
                                                   uint32_t h_q) {
    const uint64_t rows = (uint64_t)s_q * h_q, per = kl_mla_decode_rows_per_block(kind);
    const uint64_t groups = rows == 0u ? 1u : (rows + per - 1u) / per;
    const uint64_t slots = (uint64_t)sm_count * kl_mla_decode_blocks_per_sm(kind);
    uint64_t parts = slots / groups;
    if (parts < 1u) parts = 1u;
    if (parts > 65535u) parts = 65535u;
    return (uint32_t)parts;
}

/* Byte offsets within an fp8 cache token of kv_lora latent values. */
KL__MLA_DECODE_FN uint32_t kl_mla_decode_fp8_scales_offset(uint32_t kv_lora) { return kv_lora; }
KL__MLA_DECODE_FN uint32_t kl_mla_decode_fp8_rope_offset(uint32_t kv_lora) {
    return (kv_lora + kv_lora / 32u + 15u) & ~15u;
}
KL__MLA_DECODE_FN uint32_t kl_mla_decode_fp8_token_bytes(uint32_t kv_lora) {
    return kl_mla_decode_fp8_rope_offset(kv_lora) + 128u;
}

/* DEPRECATED (issue 45): call kl_mla_decode_attn_{bf16,fp8}_choose. Kept
 * only while bench/mla_decode/mla_decode_bench.cc still calls it; no other
 * caller is left. The spec's rule by hand: the _tma launcher of a bf16
 * (fp8 == 0) or fp8 cache when the device is sm_90 (cc_major 9), its
 * kl_X_get succeeded (tma_loaded) and page_size is a multiple of 64; else
 * KL_MLA_DECODE_MMA. */
KL__MLA_DECODE_FN kl_mla_decode_kind kl_mla_decode_pick(int cc_major, int tma_loaded, uint32_t page_size, int fp8) {
    if (cc_major != 9 || !tma_loaded || page_size < 64u || page_size % 64u != 0u) return KL_MLA_DECODE_MMA;
    return fp8 ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_BF16_TMA;
}

#ifdef __cplusplus
}
#endif

#undef KL__MLA_DECODE_FN

#endif /* KLAUNCH_MLA_DECODE_LAYOUT_H */
