/* mla_prefill_grid.h - the persistent grid of the MLA prefill launchers
 * whose blocks walk equal tiles (kl_grouped_gemm_tma): how many blocks to
 * ask for. Hand-written, header-only, C99 and C++; needs only stdint.h.
 *
 * USE
 *       #include "klaunch/mla_prefill.h"
 *       #include "klaunch/mla_prefill_grid.h"
 *
 *       uint32_t ctas = kl_grouped_gemm_tma_ctas(m, g, k_g, n_g, sm_count);
 *       kl_grouped_gemm_tma(&k, &a_map, &b_map, &c_map, m, g, k_g, n_g, counters, ctas, 2, stream);
 *       (counters: 2 zeroed u32 words of device memory, the blocks' pacing)
 *
 * WHY NOT sm_count. On the ring (shapes whose operands the kernel does not
 * hold) block x takes tiles x, x + nb, x + 2 nb, ...: with
 * tiles = q nb + r (0 < r < nb) the launch takes q + 1 rounds and its last
 * round runs r blocks alone. The launcher is memory-bound (docs/
 * PERFORMANCE.md), so those r blocks run at what r SMs can pull, not at
 * the GPU's rate: 4096 tiles (m 4096, g 128, n_g 128) on 132 blocks are 31
 * full rounds and one of 4 blocks. The fewest blocks that still take
 * ceil(tiles / sm_count) rounds give every block the same count, or one
 * less: 128 for those 4096 tiles (32 rounds either way), 132 for 16384
 * (125 rounds). Where the kernel holds operands (k_g <= 128 < n_g <= 512,
 * and n_g <= 128 < k_g <= 512: grouped_gemm_tma.cu's plan_of) each block
 * walks a contiguous run of a group's tiles instead, and the count that
 * gives every block whole groups (or equal parts of one) is the better
 * one: each group's B is then loaded by one block, and the blocks sweep
 * C's rows together. H100, the same call (docs/PERFORMANCE.md,
 * 2026-12-06): k_g 128 / n_g 512 (16384 tiles, g 128) 269.6 us at 128
 * blocks against 280.2 us at 132.
 */
#ifndef KLAUNCH_MLA_PREFILL_GRID_H
#define KLAUNCH_MLA_PREFILL_GRID_H

#include <stdint.h>

/* The fewest blocks, at most sm_count (0 counts as 1), that take as many
 * rounds of `tiles` equal tiles as sm_count blocks do; 1 for no tiles. */
static inline uint32_t kl_persistent_balanced_ctas(uint64_t tiles, uint32_t sm_count) {
    const uint64_t sms = sm_count == 0u ? 1u : sm_count;
    if (tiles == 0u) return 1u;
    if (tiles <= sms) return (uint32_t)tiles;
    const uint64_t rounds = (tiles + sms - 1u) / sms;
    return (uint32_t)((tiles + rounds - 1u) / rounds);
}

/* Whether grouped_gemm_tma holds operands across a run of tiles for this
 * k_g and n_g (its plan_of: A and B for k_g <= 128 < n_g <= 512, B for
 * n_g <= 128 < k_g <= 512); else its tiles stream through the ring. */
static inline int kl_grouped_gemm_tma_holds(uint32_t k_g, uint32_t n_g) {
    return (k_g >= 1u && k_g <= 128u && n_g > 128u && n_g <= 512u) ||
           (n_g >= 1u && n_g <= 128u && k_g > 128u && k_g <= 512u);
}

/* kl_grouped_gemm_tma's num_ctas, at most sm_count (0 counts as 1):
 *   - operands held (kl_grouped_gemm_tma_holds): whole groups to a block,
 *     g * floor(sm_count / g) blocks when g <= sm_count (each group split
 *     evenly), else ceil(g / k) with k = ceil(g / sm_count) groups a
 *     block, when that keeps >= 90% of the SMs; at most the tiles;
 *   - else (and below 90%): the balanced count of its 128 x 128 tiles of
 *     all g groups (ceil(n_g / 128) * ceil(m / 128) * g). */
static inline uint32_t kl_grouped_gemm_tma_ctas(uint32_t m, uint32_t g, uint32_t k_g, uint32_t n_g,
                                                uint32_t sm_count) {
    const uint64_t tiles = (((uint64_t)n_g + 127u) / 128u) * (((uint64_t)m + 127u) / 128u) * (uint64_t)g;
    const uint64_t sms = sm_count == 0u ? 1u : sm_count;
    if (kl_grouped_gemm_tma_holds(k_g, n_g) && g != 0u && tiles != 0u) {
        const uint64_t aligned = g <= sms ? g * (sms / g) : (g + (g + sms - 1u) / sms - 1u) / ((g + sms - 1u) / sms);
        if (10u * aligned >= 9u * sms) return (uint32_t)(aligned < tiles ? aligned : tiles);
    }
    return kl_persistent_balanced_ctas(tiles, sm_count);
}

#endif /* KLAUNCH_MLA_PREFILL_GRID_H */
