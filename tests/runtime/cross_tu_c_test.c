/* A kernel handle crosses C translation units (issue 15, item 1): looked up
 * in cross_tu_lookup.c and launched here, and the other way round, with the
 * recording backend; a handle for another launcher is still refused. Each
 * file has its own static kl_mla_q_rope_extract_batched_desc. No
 * GoogleTest: C. Exit status 0 is a pass. */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/record_backend.h"
#include "tests/runtime/cross_tu.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                            \
    do {                                                                                                       \
        if (!(cond)) {                                                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,           \
                    kl_last_error_message());                                                                  \
            failures++;                                                                                        \
        }                                                                                                      \
    } while (0)

int main(void) {
    static const char meta[] = "klaunch-module 1\nfamily mla_prefill\nvariant deepseek_v4_flash\nconst MLA_HDIM 576\n";
    kl_record recs[4];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel there, here, other;
    const kl_bf16 *q = (const kl_bf16 *)(uintptr_t)0x1000;
    kl_bf16 *out = (kl_bf16 *)(uintptr_t)0x2000;
    uint32_t v;

    /* The premise: two descriptors of one launcher, at two addresses. */
    CHECK(kl_test_c_rope_extract_desc() != &kl_mla_q_rope_extract_batched_desc);

    kl_record_backend_init(&rb, recs, 4);
    CHECK(kl_module_load(&rb.base, meta, sizeof meta, &mod) == KL_SUCCESS);

    /* Looked up there, launched here. */
    CHECK(kl_test_c_get_rope_extract(&there, &mod) == KL_SUCCESS);
    CHECK(kl_mla_q_rope_extract_batched_check(&there, q, out, 7, 16, 192, 128, 64, 3072) == KL_SUCCESS);
    CHECK(kl_mla_q_rope_extract_batched(&there, q, out, 7, 16, 192, 128, 64, 3072, NULL) == KL_SUCCESS);
    CHECK(rb.count == 1);
    CHECK(recs[0].grid[0] == 28 && recs[0].block[0] == 256); /* ceil_div(7 * 16 * 64, 256) */
    memcpy(&v, recs[0].args + 36, sizeof v);
    CHECK(v == 3072);

    /* Looked up here, launched there. */
    CHECK(kl_mla_q_rope_extract_batched_get(&here, &mod) == KL_SUCCESS);
    CHECK(kl_test_c_launch_rope_extract(&here, q, out) == KL_SUCCESS);
    CHECK(rb.count == 2);

    /* A handle of another launcher stays refused, naming both. */
    CHECK(kl_mla_q_rope_writeback_batched_get(&other, &mod) == KL_SUCCESS);
    CHECK(kl_test_c_launch_rope_extract(&other, q, out) == KL_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(kl_last_error_message(),
                 "kl_mla_q_rope_extract_batched: kernel handle was loaded for kl_mla_q_rope_writeback_batched") !=
          NULL);
    CHECK(rb.count == 2);

    kl_module_unload(&mod);
    if (failures) {
        fprintf(stderr, "%d failed\n", failures);
        return 1;
    }
    printf("cross_tu_c_test: all checks passed\n");
    return 0;
}
