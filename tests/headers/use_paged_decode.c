#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <string.h>

#include "tests/headers/headers_test.h"

/* One launch of kl_paged_decode_attn_fp8_gqa (every argument type but bool,
 * u64 included) through the record backend. */
int kl_headers_use_paged_decode(void) {
    static const char text[] = "klaunch-module 1\nfamily paged_decode\nvariant gqa8_d128\nspec_hash x\n"
                               "const DECODE_GQA_PACK_WIDTH 8\nconst DECODE_GQA_PACK_HEAD_DIM 128\n";
    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_bf16 q[1], out[1];
    kl_fp8_e4m3 kc[1], vc[1];
    int32_t tables[1], lens[1];
    kl_status st;
    int rc;
    kl_record_backend_init(&rb, recs, 1);
    st = kl_module_load(&rb.base, text, strlen(text), &mod);
    if (st != KL_SUCCESS) return (int)st;
    st = kl_paged_decode_attn_fp8_gqa_get(&k, &mod);
    if (st == KL_SUCCESS)
        st = kl_paged_decode_attn_fp8_gqa(&k, q, kc, vc, out, tables, lens, 4, 3, 16, 2, 128, 16, 0.088f, 1.0f, 1.0f,
                                          2048, (uint64_t)16 * 2 * 128, 0, NULL);
    rc = (int)st;
    if (st == KL_SUCCESS && (rb.count != 1 || recs[0].grid[0] != 2 || recs[0].grid[1] != 3)) rc = 101;
    kl_module_unload(&mod);
    return rc;
}
