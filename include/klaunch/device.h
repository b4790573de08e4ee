/* device.h - kl_device: what a chooser (klaunch/choose.h) knows of a GPU,
 * and what a choice table is keyed by. Its own header so that
 * klaunch/cuda_helpers.h (kl_cuda_device_describe) can fill one without
 * pulling in the choosers and their compiled-in tables.
 * Hand-written, header-only, C99 and C++. */
#ifndef KLAUNCH_DEVICE_H
#define KLAUNCH_DEVICE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a chooser knows of the device: from the CUDA driver (compute
 * capability, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, _L2_CACHE_SIZE,
 * cuDeviceTotalMem; kl_cuda_device_describe) or written by hand. mem_bandwidth_gbs: measured or
 * nominal GB/s, 0 when unknown; rules may read it, tables do not match it. */
typedef struct kl_device {
    uint32_t cc_major, cc_minor;
    uint32_t sm_count;
    uint64_t l2_bytes;
    uint64_t mem_bytes;
    uint32_t mem_bandwidth_gbs;
} kl_device;

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_DEVICE_H */
