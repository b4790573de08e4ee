#include "klaunch/cuda_helpers.h"

#include <string.h>

#include "tests/headers/headers_test.h"

/* The helpers header stands alone; on a backend that was never initialised
 * every helper refuses instead of touching the driver. */
int kl_headers_use_cuda_helpers(void) {
    kl_cuda_backend cb;
    void *p = &cb;
    memset(&cb, 0, sizeof cb);
    if (kl_cuda_synchronize(&cb) != KL_ERROR_INVALID_ARGUMENT) return 101;
    if (kl_cuda_malloc(&cb, &p, 16) != KL_ERROR_INVALID_ARGUMENT || p != NULL) return 102;
    return 0;
}
