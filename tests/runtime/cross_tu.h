/* The cross-translation-unit handle tests (issue 15, item 1): a kernel
 * handle looked up with kl_X_get in one file and launched with kl_X in
 * another, as a real program does. Each file that includes a generated
 * header has its own static kl_X_desc, so the two files' descriptors sit at
 * different addresses; the runtime compares what they say instead.
 *
 * cross_tu_lookup.c (C) and cross_tu_lookup_cc.cc (C++) look kernels up;
 * cross_tu_c_test.c and cross_tu_cc_test.cc launch them. */
#ifndef KLAUNCH_TESTS_RUNTIME_CROSS_TU_H
#define KLAUNCH_TESTS_RUNTIME_CROSS_TU_H

#include "klaunch/mla_prefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cross_tu_lookup.c */
kl_status kl_test_c_get_rope_extract(kl_kernel *kernel, const kl_module *module);
kl_status kl_test_c_launch_rope_extract(const kl_kernel *kernel, const kl_bf16 *q, kl_bf16 *out);
/* This file's own kl_mla_q_rope_extract_batched_desc, to show it is not the caller's. */
const kl_kernel_desc *kl_test_c_rope_extract_desc(void);

/* cross_tu_lookup_cc.cc */
kl_status kl_test_cc_get_rope_extract(kl_kernel *kernel, const kl_module *module);
kl_status kl_test_cc_launch_rope_extract(const kl_kernel *kernel, const kl_bf16 *q, kl_bf16 *out);
const kl_kernel_desc *kl_test_cc_rope_extract_desc(void);

#ifdef __cplusplus
}
#endif
#endif
