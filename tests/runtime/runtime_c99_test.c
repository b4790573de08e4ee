/* The runtime from C: klaunch.h and both backends compiled as C99 with
 * -Wall -Wextra -Werror -pedantic (see BUILD), defining
 * KLAUNCH_IMPLEMENTATION here, then one load, lookup and recorded launch.
 * No GoogleTest: C. Exit status 0 is a pass. */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/klaunch.h"
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,      \
                    __LINE__, #cond, kl_last_error_message());                          \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

/* mla_q_rope_extract_batched's kernel arguments as the seed passes them:
 * two pointers, then six u32. */
static const kl_param_info params[] = {
    {"q_full", KL_PARAM_PTR, 0, 8},  {"q_rope_out", KL_PARAM_PTR, 8, 8}, {"num_tokens", KL_PARAM_U32, 16, 4},
    {"nq", KL_PARAM_U32, 20, 4},     {"hd", KL_PARAM_U32, 24, 4},        {"nope", KL_PARAM_U32, 28, 4},
    {"rope", KL_PARAM_U32, 32, 4},   {"q_dim", KL_PARAM_U32, 36, 4},
};
static const char *const consts[] = {"MLA_HDIM"};

int main(void) {
    static const char meta[] = "klaunch-module 1\nfamily mla_prefill\nvariant mistral_small_4\nconst MLA_HDIM 320\n";
    kl_kernel_desc desc;
    kl_record recs[2];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_launch l;
    kl_cuda_backend cuda;
    kl_status st;
    void *q = (void *)(uintptr_t)0x1000, *out = (void *)(uintptr_t)0x2000;
    uint32_t num_tokens = 7, nq = 16, hd = 192, nope = 128, rope = 64, q_dim = 3072;
    void *args[8];
    uint32_t v;

    memset(&desc, 0, sizeof desc);
    desc.launcher = "mla_q_rope_extract_batched";
    desc.entry = "mla_q_rope_extract_batched";
    desc.family = "mla_prefill";
    desc.spec_file = "specs/mla_prefill.yaml";
    desc.spec_hash = "";
    desc.params = params;
    desc.num_params = 8;
    desc.param_bytes = 40;
    desc.const_names = consts;
    desc.num_consts = 1;

    kl_record_backend_init(&rb, recs, 2);
    CHECK(kl_module_load(&rb.base, meta, sizeof meta, &mod) == KL_SUCCESS);
    CHECK(kl_kernel_get(&k, &mod, &desc) == KL_SUCCESS);
    CHECK(k.consts[0] == 320);

    args[0] = &q;
    args[1] = &out;
    args[2] = &num_tokens;
    args[3] = &nq;
    args[4] = &hd;
    args[5] = &nope;
    args[6] = &rope;
    args[7] = &q_dim;
    memset(&l, 0, sizeof l);
    l.kernel = &k;
    l.grid[0] = 28; /* ceil_div(7 * 16 * 64, 256) */
    l.grid[1] = l.grid[2] = 1;
    l.block[0] = 256;
    l.block[1] = l.block[2] = 1;
    l.args = args;
    CHECK(rb.base.ops->launch(&rb.base, &l) == KL_SUCCESS);
    CHECK(rb.count == 1);
    CHECK(recs[0].grid[0] == 28 && recs[0].block[0] == 256);
    memcpy(&v, recs[0].args + 36, sizeof v);
    CHECK(v == 3072);
    kl_module_unload(&mod);

    /* Whatever this machine has, init answers with a status, and a failure
     * with a message. */
    st = kl_cuda_backend_init(&cuda, 0);
    CHECK(st == KL_SUCCESS || st == KL_ERROR_NO_DRIVER || st == KL_ERROR_NO_DEVICE);
    if (st != KL_SUCCESS) CHECK(kl_last_error_message()[0] != '\0');
    kl_cuda_backend_destroy(&cuda);

    /* A C caller's stray -1 (well defined in C, unlike a C++ static_cast)
     * is no status: named as unknown, never a read past the tables. */
    CHECK(strcmp(kl_status_name((kl_status)-1), "KL_UNKNOWN_STATUS") == 0);
    CHECK(strcmp(kl_status_string((kl_status)-1), "unknown status") == 0);

    if (failures) {
        fprintf(stderr, "%d failed\n", failures);
        return 1;
    }
    printf("runtime_c99_test: all checks passed\n");
    return 0;
}
