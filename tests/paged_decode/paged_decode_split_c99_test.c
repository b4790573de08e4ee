/* klaunch/paged_decode_split.h included first, alone, in a C99 translation
 * unit built with -std=c99 -Wall -Wextra -Werror -pedantic (see BUILD):
 * the header must stand on its own as C. A few values the header's own
 * comments promise, so the program also runs what it compiled. */
#include "klaunch/paged_decode_split.h"

#include <stdio.h>

int main(void) {
    int bad = 0;
    kl_kernel none;
    memset(&none, 0, sizeof none);
    if (kl_paged_decode_num_splits(32, 8, 4096, 0, 16, 132) != 1) bad |= 1;
    /* 16, not 15: the rule fills the wave (8 x 16 = 128 of 132 SMs); H200 sweep 0.636 vs 0.612 of copy. */
    if (kl_paged_decode_num_splits(1, 8, 32768, 0, 16, 132) != 16) bad |= 2;
    if (kl_paged_decode_num_splits(1, 8, 1000, 0, 16, 132) != 3) bad |= 4;
    if (kl_paged_decode_split_workspace_bytes(32, 32, 128, 2) != 4ull * 32 * 2 * 32 * 130) bad |= 8;
    if (kl_paged_decode_gqa_applies(NULL, 8, 1, 128) || kl_paged_decode_gqa_applies(&none, 8, 1, 128)) bad |= 16;
    if (bad) fprintf(stderr, "paged_decode_split.h: failed checks (bit mask) %d\n", bad);
    return bad != 0;
}
