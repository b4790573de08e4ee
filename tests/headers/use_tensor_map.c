#include "klaunch/tensor_map.h"

#include "tests/headers/headers_test.h"

/* The tensor-map header stands alone: a request the reference encoding
 * round-trips, and one the checks refuse (a stride not a multiple of 16)
 * before any backend is asked. */
int kl_headers_use_tensor_map(void) {
    static const uint64_t storage[4] = {0, 0, 0, 0};
    kl_tensor_map_request r, back;
    uint64_t opaque[16];
    kl_tensor_map map;
    kl_backend none = {NULL};
    kl__tensor_map_request_clear(&r);
    r.dtype = KL_TENSOR_MAP_BF16;
    r.rank = 2u;
    r.address = storage;
    r.extent[0] = 64u;
    r.extent[1] = 3u;
    r.stride[0] = 136u; /* not a multiple of 16 */
    r.box[0] = 64u;
    r.box[1] = 1u;
    r.element_stride[0] = r.element_stride[1] = 1u;
    kl_tensor_map_reference_encode(&r, opaque);
    if (!kl_tensor_map_reference_decode(opaque, &back) || back.stride[0] != 136u || back.box[0] != 64u) return 101;
    none.ops = NULL;
    if (kl_tensor_map_encode_tiled(&none, &r, &map) != KL_ERROR_INVALID_ARGUMENT) return 102;
    if (kl_tensor_map_dtype_size(KL_TENSOR_MAP_BF16) != 2u) return 103;
    return 0;
}
