/* mla_prefill_grid.h - the persistent grid of the MLA prefill launchers
 * whose blocks walk equal tiles (kl_grouped_gemm_tma): how many blocks to
 * ask for. Hand-written, header-only, C99 and C++; needs only stdint.h.
 *
 * USE
 *       #include "klaunch/mla_prefill.h"
 *       #include "klaunch/mla_prefill_grid.h"
 *
 *       uint32_t ctas = kl_grouped_gemm_tma_ctas(m, g, n_g, sm_count);
 *       kl_grouped_gemm_tma(&k, &a_map, &b_map, &c_map, m, g, k_g, n_g, ctas, stream);
 *
 * WHY NOT sm_count. Block x takes tiles x, x + nb, x + 2 nb, ...: with
 * tiles = q nb + r (0 < r < nb) the launch takes q + 1 rounds and its last
 * round runs r blocks alone. The launcher is memory-bound (docs/
 * PERFORMANCE.md), so those r blocks run at what r SMs can pull, not at
 * the GPU's rate: 4096 tiles (m 4096, g 128, n_g 128) on 132 blocks are 31
 * full rounds and one of 4 blocks. The fewest blocks that still take
 * ceil(tiles / sm_count) rounds give every block the same count, or one
 * less: 128 for those 4096 tiles (32 rounds either way), 132 for 16384
 * (125 rounds).
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

/* kl_grouped_gemm_tma's num_ctas: its 128 x 128 tiles of all g groups
 * (ceil(n_g / 128) * ceil(m / 128) * g), balanced over at most sm_count
 * blocks. */
static inline uint32_t kl_grouped_gemm_tma_ctas(uint32_t m, uint32_t g, uint32_t n_g, uint32_t sm_count) {
    const uint64_t tiles = (((uint64_t)n_g + 127u) / 128u) * (((uint64_t)m + 127u) / 128u) * (uint64_t)g;
    return kl_persistent_balanced_ctas(tiles, sm_count);
}

#endif /* KLAUNCH_MLA_PREFILL_GRID_H */
