#include "klaunch/mla_prefill_grid.h"

#include "tests/headers/headers_test.h"

/* The balanced persistent grid, by hand: 4096 tiles on 132 SMs take 32
 * rounds, which 128 blocks give evenly (128 x 32 = 4096); 16384 tiles take
 * 125 rounds, and 131 blocks would give 131 x 125 = 16375 < 16384, so 132. */
int kl_headers_use_mla_prefill_grid(void) {
    if (kl_grouped_gemm_tma_ctas(4096, 128, 128, 132) != 128u) return 111;
    if (kl_grouped_gemm_tma_ctas(4096, 128, 512, 132) != 132u) return 112;
    if (kl_persistent_balanced_ctas(0, 132) != 1u) return 113;
    if (kl_persistent_balanced_ctas(7, 132) != 7u) return 114;
    if (kl_persistent_balanced_ctas(133, 132) != 67u) return 115; /* 2 rounds: 67 + 66 */
    if (kl_persistent_balanced_ctas(5, 0) != 1u) return 116;    /* no SM count: one block */
    return 0;
}
