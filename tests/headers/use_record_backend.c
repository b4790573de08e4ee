#include "klaunch/record_backend.h"

#include <string.h>

#include "tests/headers/headers_test.h"

int kl_headers_use_record_backend(void) {
    static const char text[] = "klaunch-module 1\nfamily paged_decode\nvariant gqa4_d128\nspec_hash x\n"
                               "const DECODE_GQA_PACK_WIDTH 4\nconst DECODE_GQA_PACK_HEAD_DIM 128\n";
    kl_record recs[1];
    kl_record_backend rb;
    kl_module mod;
    int64_t width = 0;
    kl_status st;
    int rc;
    kl_record_backend_init(&rb, recs, 1);
    st = kl_module_load(&rb.base, text, strlen(text), &mod);
    if (st != KL_SUCCESS) return (int)st;
    rc = kl_module_const(&mod, "DECODE_GQA_PACK_WIDTH", &width) && width == 4 ? 0 : 101;
    kl_module_unload(&mod);
    return rc;
}
