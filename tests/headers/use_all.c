/* Every klaunch header in one translation unit: the two families and both
 * backends must not clash. */
#include "klaunch/cuda_backend.h"
#include "klaunch/cuda_helpers.h"
#include "klaunch/image.h"
#include "klaunch/klaunch.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/mla_prefill_grid.h"
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"
#include "klaunch/tensor_map.h"

#include "tests/headers/headers_test.h"

int kl_headers_use_all(void) {
    /* A NULL handle is refused by both families' launchers alike. */
    kl_status a = kl_grouped_gemm_mla_check(NULL, NULL, NULL, NULL, 1, 1, 1, 1, 1, 1);
    kl_status b = kl_paged_decode_attn_bf16_check(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 1, 1, 1, 0.5f, 1, 0);
    if (a != KL_ERROR_KERNEL_NOT_LOADED) return (int)a ? (int)a : 101;
    if (b != KL_ERROR_KERNEL_NOT_LOADED) return (int)b ? (int)b : 102;
    return 0;
}
