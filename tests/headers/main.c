#include <stdio.h>

#include "tests/headers/headers_test.h"

/* Returns the first failure's status (0 when every header works). */
int main(void) {
    struct {
        const char *name;
        int (*use)(void);
    } uses[] = {
        {"klaunch.h", kl_headers_use_klaunch},
        {"record_backend.h", kl_headers_use_record_backend},
        {"cuda_backend.h", kl_headers_use_cuda_backend},
        {"cuda_helpers.h", kl_headers_use_cuda_helpers},
        {"image.h", kl_headers_use_image},
        {"tensor_map.h", kl_headers_use_tensor_map},
        {"mla_prefill.h", kl_headers_use_mla_prefill},
        {"paged_decode.h", kl_headers_use_paged_decode},
        {"paged_decode_split.h", kl_headers_use_paged_decode_split},
        {"mla_prefill_grid.h", kl_headers_use_mla_prefill_grid},
        {"all headers together", kl_headers_use_all},
    };
    size_t i;
    for (i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        int st = uses[i].use();
        printf("%s %s (%d)\n", st == 0 ? "ok  " : "FAIL", uses[i].name, st);
        if (st != 0) return st;
    }
    return 0;
}
