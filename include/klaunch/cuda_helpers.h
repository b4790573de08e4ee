/* cuda_helpers.h - small CUDA driver helpers for tests, examples and benchmarks.
 *
 * Device memory, copies, synchronisation and the device's name through a
 * kl_cuda_backend, with klaunch's statuses and messages: enough for a test
 * or a benchmark to run a kernel without linking the CUDA runtime. Not
 * needed to launch anything: a program that has its own device memory
 * (cudaMalloc, a framework's allocator) uses klaunch/cuda_backend.h alone.
 *
 * klaunch/cuda_backend.h includes this header, so including either one is
 * enough; the implementation comes with KLAUNCH_IMPLEMENTATION as usual.
 */
#ifndef KLAUNCH_CUDA_HELPERS_H
#define KLAUNCH_CUDA_HELPERS_H

#include "klaunch/cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Driver helpers for tests, examples and benchmarks (device pointers as
 * void*). Copies are synchronous; zero bytes is a no-op (malloc of zero
 * bytes gives NULL, free of NULL succeeds). */
kl_status kl_cuda_malloc(kl_cuda_backend *cb, void **dptr, size_t bytes);
kl_status kl_cuda_free(kl_cuda_backend *cb, void *dptr);
kl_status kl_cuda_memcpy_htod(kl_cuda_backend *cb, void *dst, const void *src, size_t bytes);
kl_status kl_cuda_memcpy_dtoh(kl_cuda_backend *cb, void *dst, const void *src, size_t bytes);
kl_status kl_cuda_memset_d8(kl_cuda_backend *cb, void *dst, unsigned char value, size_t bytes);
/* Waits for all work on the device's primary context; a kernel fault shows
 * up here as KL_ERROR_LAUNCH_FAILED. */
kl_status kl_cuda_synchronize(kl_cuda_backend *cb);
kl_status kl_cuda_device_name(kl_cuda_backend *cb, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_HELPERS_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_CUDA_HELPERS_IMPLEMENTATION_DONE
#define KLAUNCH_CUDA_HELPERS_IMPLEMENTATION_DONE

#include <limits.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

kl_status kl_cuda_malloc(kl_cuda_backend *cb, void **dptr, size_t bytes) {
    kl__cu_deviceptr d = 0;
    kl__cu_result r;
    kl_status st;
    if (dptr == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_malloc: dptr is NULL");
    *dptr = NULL;
    st = kl__cuda_enter(cb, "kl_cuda_malloc");
    if (st != KL_SUCCESS || bytes == 0) return st;
    r = cb->api.mem_alloc(&d, bytes);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_malloc(%lu bytes)",
                             (unsigned long)bytes);
    *dptr = (void *)(uintptr_t)d;
    return KL_SUCCESS;
}

kl_status kl_cuda_free(kl_cuda_backend *cb, void *dptr) {
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_cuda_free");
    if (st != KL_SUCCESS || dptr == NULL) return st;
    r = cb->api.mem_free((kl__cu_deviceptr)(uintptr_t)dptr);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_free(%p)", dptr);
    return KL_SUCCESS;
}

kl_status kl_cuda_memcpy_htod(kl_cuda_backend *cb, void *dst, const void *src, size_t bytes) {
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_cuda_memcpy_htod");
    if (st != KL_SUCCESS || bytes == 0) return st;
    if (dst == NULL || src == NULL) {
        kl__cuda_leave(cb);
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_memcpy_htod: %s is NULL", dst ? "src" : "dst");
    }
    r = cb->api.memcpy_htod((kl__cu_deviceptr)(uintptr_t)dst, src, bytes);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_memcpy_htod(%lu bytes to %p)",
                             (unsigned long)bytes, dst);
    return KL_SUCCESS;
}

kl_status kl_cuda_memcpy_dtoh(kl_cuda_backend *cb, void *dst, const void *src, size_t bytes) {
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_cuda_memcpy_dtoh");
    if (st != KL_SUCCESS || bytes == 0) return st;
    if (dst == NULL || src == NULL) {
        kl__cuda_leave(cb);
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_memcpy_dtoh: %s is NULL", dst ? "src" : "dst");
    }
    r = cb->api.memcpy_dtoh(dst, (kl__cu_deviceptr)(uintptr_t)src, bytes);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_memcpy_dtoh(%lu bytes from %p)",
                             (unsigned long)bytes, src);
    return KL_SUCCESS;
}

kl_status kl_cuda_memset_d8(kl_cuda_backend *cb, void *dst, unsigned char value, size_t bytes) {
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_cuda_memset_d8");
    if (st != KL_SUCCESS || bytes == 0) return st;
    if (dst == NULL) {
        kl__cuda_leave(cb);
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_memset_d8: dst is NULL");
    }
    r = cb->api.memset_d8((kl__cu_deviceptr)(uintptr_t)dst, value, bytes);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_memset_d8(%lu bytes at %p)",
                             (unsigned long)bytes, dst);
    return KL_SUCCESS;
}

kl_status kl_cuda_synchronize(kl_cuda_backend *cb) {
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_cuda_synchronize");
    if (st != KL_SUCCESS) return st;
    r = cb->api.ctx_synchronize();
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_cuda_synchronize(device %d)",
                             cb->ordinal);
    return KL_SUCCESS;
}

kl_status kl_cuda_device_name(kl_cuda_backend *cb, char *buf, size_t cap) {
    kl__cu_result r;
    kl_status st;
    if (buf == NULL || cap == 0)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_device_name: buf is NULL or cap is 0");
    buf[0] = '\0';
    st = kl__cuda_enter(cb, "kl_cuda_device_name");
    if (st != KL_SUCCESS) return st;
    r = cb->api.device_get_name(buf, cap > (size_t)INT_MAX ? INT_MAX : (int)cap, cb->device);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_cuda_device_name(device %d)", cb->ordinal);
    buf[cap - 1] = '\0';
    return KL_SUCCESS;
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_HELPERS_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
