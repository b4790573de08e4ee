#include "klaunch/paged_decode_split.h"

#include "tests/headers/headers_test.h"

/* The split helpers: the workspace formula (4 * seqs * splits * heads *
 * (head_dim + 2) bytes) and the probe that must refuse a NULL kernel quietly. */
int kl_headers_use_paged_decode_split(void) {
    if (kl_paged_decode_split_workspace_bytes(2, 4, 128, 3) != (uint64_t)4 * 2 * 3 * 4 * 130) return 101;
    if (kl_paged_decode_gqa_applies(NULL, 32, 8, 128)) return 102;
    if (kl_paged_decode_num_splits(1, 8, 32768, 0, 16, 132) < 1) return 103;
    return 0;
}
