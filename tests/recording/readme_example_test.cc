#define KLAUNCH_IMPLEMENTATION /* in one file of the test binary */
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"
#include <gtest/gtest.h>

TEST(PagedDecodeAttnBf16, LaunchesABlockPerHeadAndSequence) {
    kl_record recs[4];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_record_backend_init(&rb, recs, 4);
    ASSERT_EQ(kl_record_backend_load_variant(&rb, kl_paged_decode_variant_info, "gqa8_d128", &mod), KL_SUCCESS);
    ASSERT_EQ(kl_paged_decode_attn_bf16_get(&k, &mod), KL_SUCCESS);
    kl_bf16 *buf = (kl_bf16 *)0x1000; /* device addresses, never read */
    int32_t *idx = (int32_t *)0x2000;
    ASSERT_EQ(kl_paged_decode_attn_bf16(&k, buf, buf, buf, buf, idx, idx, 4, 3, 32, 8, 128, 16, 0.088f, 32 * 128, 0, NULL),
              KL_SUCCESS) << kl_last_error_message();
    ASSERT_EQ(rb.count, 1u);
    EXPECT_EQ(recs[0].grid[0], 32u); /* num_q_heads */
    EXPECT_EQ(recs[0].grid[1], 3u);  /* num_seqs */
}
