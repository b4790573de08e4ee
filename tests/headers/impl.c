/* The runtime's implementation, compiled under the test's language flags:
 * cuda_backend.h first (it brings in klaunch.h), then the others. */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"
#include "klaunch/klaunch.h"

#include "tests/headers/headers_test.h"

/* No GPU is needed: without a driver init fails cleanly and destroy accepts
 * the zeroed struct. */
int kl_headers_use_cuda_backend(void) {
    kl_cuda_backend cb;
    kl_status st = kl_cuda_backend_init(&cb, 0);
    kl_cuda_backend_destroy(&cb);
    if ((int)st < 0 || st >= KL_STATUS_COUNT) return 101;
    return 0;
}
