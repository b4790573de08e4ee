#include "klaunch/mla_prefill_grid.h"

#include "tests/headers/headers_test.h"

/* The persistent grid, by hand. The ring (operands not held): 4096 tiles
 * on 132 SMs take 32 rounds, which 128 blocks give evenly (128 x 32 =
 * 4096); n_g 1024 at k_g 128 (8 n tiles: the ring) makes 32768 tiles, 249
 * rounds, and 131 blocks would give 131 x 249 = 32619 < 32768, so 132.
 * Held operands (k_g <= 128 < n_g <= 512 or n_g <= 128 < k_g <= 512):
 * whole groups a block where that keeps 90% of the SMs: g 128 -> 128
 * (97%); g 40 -> 120 (3 blocks a group, 91%); g 200 -> 2 groups a block,
 * 100 blocks (76%), so the balanced count of 25600 tiles, 132. */
int kl_headers_use_mla_prefill_grid(void) {
    if (kl_grouped_gemm_tma_ctas(4096, 128, 1024, 128, 132) != 128u) return 111; /* ring: 4096 tiles */
    if (kl_grouped_gemm_tma_ctas(4096, 128, 128, 1024, 132) != 132u) return 112; /* ring: 32768 tiles */
    if (kl_grouped_gemm_tma_ctas(4096, 128, 128, 512, 132) != 128u) return 117;  /* held A and B */
    if (kl_grouped_gemm_tma_ctas(4096, 128, 512, 128, 132) != 128u) return 118;  /* held B */
    if (kl_grouped_gemm_tma_ctas(4096, 40, 128, 512, 132) != 120u) return 119;
    if (kl_grouped_gemm_tma_ctas(4096, 200, 128, 512, 132) != 132u) return 120;
    if (kl_grouped_gemm_tma_ctas(100, 3, 512, 64, 132) != 3u) return 121; /* held, 3 tiles: at most the tiles */
    if (kl_grouped_gemm_tma_holds(128, 512) != 1 || kl_grouped_gemm_tma_holds(129, 512) != 0 ||
        kl_grouped_gemm_tma_holds(512, 128) != 1 || kl_grouped_gemm_tma_holds(513, 128) != 0 ||
        kl_grouped_gemm_tma_holds(128, 128) != 0 || kl_grouped_gemm_tma_holds(0, 512) != 0)
        return 122;
    if (kl_persistent_balanced_ctas(0, 132) != 1u) return 113;
    if (kl_persistent_balanced_ctas(7, 132) != 7u) return 114;
    if (kl_persistent_balanced_ctas(133, 132) != 67u) return 115; /* 2 rounds: 67 + 66 */
    if (kl_persistent_balanced_ctas(5, 0) != 1u) return 116;    /* no SM count: one block */
    return 0;
}
