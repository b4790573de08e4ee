/* launch_bench.h - what both launch-cost programs share: the one
 * paged_decode_attn_fp8 call they make (18 launcher parameters, 17 kernel
 * arguments), a no-op backend, and a recording-backend module.
 *
 * Included by exactly one file per program (static functions), after that
 * file has defined KLAUNCH_IMPLEMENTATION and included the backends.
 */
#ifndef KLAUNCH_BENCH_LAUNCH_BENCH_H
#define KLAUNCH_BENCH_LAUNCH_BENCH_H

#include <stdio.h>
#include <string.h>

#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

/* The launcher's arguments, kept in memory: the programs read them after a
 * compiler barrier on every launch, as a caller's varying arguments would
 * be, so no check is folded at compile time or hoisted out of the loop. */
typedef struct lc_args {
    const kl_bf16 *q;
    const kl_fp8_e4m3 *k_cache, *v_cache;
    kl_bf16 *output;
    const int32_t *block_tables, *seq_lens;
    uint32_t max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim, block_size;
    float inv_sqrt_d, k_scale, v_scale;
    uint32_t q_stride;
    uint64_t cache_stride;
    uint32_t sliding_window;
} lc_args;

/* The smallest real problem: one sequence of one position, one query and
 * one KV head of 128, one cache block of 16 positions; grid (1, 1), block 256. */
static void lc_args_init(lc_args *a) {
    a->max_blocks_per_seq = 1;
    a->num_seqs = 1;
    a->num_q_heads = 1;
    a->num_kv_heads = 1;
    a->head_dim = 128;
    a->block_size = 16;
    a->inv_sqrt_d = 0.08838834764f;
    a->k_scale = 1.0f;
    a->v_scale = 1.0f;
    a->q_stride = 128;
    a->cache_stride = 16u * 1u * 128u;
    a->sliding_window = 0;
}

#define LC_BARRIER() __asm__ __volatile__("" ::: "memory")

static inline kl_status lc_launch(const kl_kernel *k, const lc_args *a, kl_stream stream) {
    return kl_paged_decode_attn_fp8(k, a->q, a->k_cache, a->v_cache, a->output, a->block_tables, a->seq_lens,
                                    a->max_blocks_per_seq, a->num_seqs, a->num_q_heads, a->num_kv_heads, a->head_dim,
                                    a->block_size, a->inv_sqrt_d, a->k_scale, a->v_scale, a->q_stride,
                                    a->cache_stride, a->sliding_window, stream);
}

static inline kl_status lc_check(const kl_kernel *k, const lc_args *a) {
    return kl_paged_decode_attn_fp8_check(k, a->q, a->k_cache, a->v_cache, a->output, a->block_tables, a->seq_lens,
                                          a->max_blocks_per_seq, a->num_seqs, a->num_q_heads, a->num_kv_heads,
                                          a->head_dim, a->block_size, a->inv_sqrt_d, a->k_scale, a->v_scale,
                                          a->q_stride, a->cache_stride, a->sliding_window);
}

/* A backend whose launch does nothing: the wrapper's own cost, with the
 * indirect call every backend gets. Only launch is ever called. */
static kl_status lc_noop_launch(const kl_backend *be, const kl_launch *launch) {
    (void)be;
    (void)launch;
    return KL_SUCCESS;
}
static const kl_backend_ops lc_noop_ops = {.name = "noop", .launch = lc_noop_launch};
static const kl_backend lc_noop_backend = {&lc_noop_ops};

/* Loads the paged_decode gqa8_d128 metadata into a recording backend (its
 * module image) and gets the fp8 launcher's kernel from it; `noop` (may be
 * NULL) becomes the same kernel whose launches go to the no-op backend. */
static kl_status lc_record_kernel(kl_record_backend *rb, kl_module *mod, kl_kernel *k, kl_kernel *noop) {
    char meta[512];
    kl_status st;
    snprintf(meta, sizeof meta,
             "klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nspec_hash %s\nsource_hash unknown\n"
             "const DECODE_GQA_PACK_WIDTH 8\nconst DECODE_GQA_PACK_HEAD_DIM 128\n",
             kl_paged_decode_attn_fp8_desc.spec_hash);
    st = kl_module_load(&rb->base, meta, strlen(meta), mod);
    if (st == KL_SUCCESS) st = kl_paged_decode_attn_fp8_get(k, mod);
    if (st == KL_SUCCESS && noop != NULL) {
        *noop = *k;
        noop->backend = &lc_noop_backend;
    }
    return st;
}

#endif /* KLAUNCH_BENCH_LAUNCH_BENCH_H */
