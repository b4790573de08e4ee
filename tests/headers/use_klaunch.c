#include "klaunch/klaunch.h"

#include <string.h>

#include "tests/headers/headers_test.h"

int kl_headers_use_klaunch(void) {
    uint64_t r;
    if (strcmp(kl_status_name(KL_ERROR_GRID_LIMIT), "KL_ERROR_GRID_LIMIT") != 0) return 101;
    if (kl_status_string(KL_SUCCESS)[0] == '\0') return 102;
    if (!kl__mul(UINT64_MAX, 2u, &r)) return 103; /* overflow detected */
    if (kl__add(1u, 2u, &r) || r != 3u) return 104;
    if (!kl__sub(1u, 2u, &r)) return 105;
    return 0;
}
