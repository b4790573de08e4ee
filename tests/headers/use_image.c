#include "klaunch/image.h"

#include "tests/headers/headers_test.h"

/* The image checks stand alone: PTX text passes as PTX, a cut ELF magic
 * does not. */
int kl_headers_use_image(void) {
    static const char ptx[] = ".version 9.0\n";
    kl_image_kind kind = KL_IMAGE_UNKNOWN;
    if (kl_image_check(ptx, sizeof ptx, &kind) != KL_SUCCESS || kind != KL_IMAGE_PTX) return 101;
    if (kl_image_check("\x7f" "EL", 3, &kind) != KL_ERROR_INVALID_IMAGE) return 102;
    return 0;
}
