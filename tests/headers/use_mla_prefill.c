#include "klaunch/mla_prefill.h"
#include "klaunch/record_backend.h"

#include <string.h>

#include "tests/headers/headers_test.h"

/* One launch of kl_mla_prefill_attention_320 (pointers, u32, f32, bool)
 * through the record backend, so the inline launcher is instantiated. */
int kl_headers_use_mla_prefill(void) {
    static const char text[] = "klaunch-module 1\nfamily mla_prefill\nvariant deepseek_v4_flash\nspec_hash x\n"
                               "const MLA_HDIM 576\nconst MLA_V_HAS_ROPE 1\n";
    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_bf16 q[1], kv[1], out[1];
    kl_status st;
    int rc;
    kl_record_backend_init(&rb, recs, 1);
    st = kl_module_load(&rb.base, text, strlen(text), &mod);
    if (st != KL_SUCCESS) return (int)st;
    st = kl_mla_prefill_attention_320_get(&k, &mod);
    if (st == KL_SUCCESS) st = kl_mla_prefill_attention_320_check(&k, q, kv, kv, out, 17, 2, 16, 1, 576, 0.04f, true);
    if (st == KL_SUCCESS) st = kl_mla_prefill_attention_320(&k, q, kv, kv, out, 17, 2, 16, 1, 576, 0.04f, true, NULL);
    rc = (int)st;
    if (st == KL_SUCCESS && (rb.count != 1 || recs[0].grid[1] != 2 || recs[0].grid[2] != 2)) rc = 101;
    kl_module_unload(&mod);
    return rc;
}
