/* One side of the cross-translation-unit tests (cross_tu.h), in C. */
#include "tests/runtime/cross_tu.h"

kl_status kl_test_c_get_rope_extract(kl_kernel *kernel, const kl_module *module) {
    return kl_mla_q_rope_extract_batched_get(kernel, module);
}

/* The seed's shape: 7 tokens, 16 heads of 192 = 128 nope + 64 rope, rows of 3072. */
kl_status kl_test_c_launch_rope_extract(const kl_kernel *kernel, const kl_bf16 *q, kl_bf16 *out) {
    return kl_mla_q_rope_extract_batched(kernel, q, out, 7, 16, 192, 128, 64, 3072, NULL);
}

const kl_kernel_desc *kl_test_c_rope_extract_desc(void) { return &kl_mla_q_rope_extract_batched_desc; }
