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

/* device.h first: cuda_backend.h includes this header again at its end,
 * whose implementation part then needs kl_device. */
#include "klaunch/device.h"
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
/* The backend's device as choice tables key it (klaunch/choose.h, KEY):
 * compute capability, SM count, L2 bytes, total memory, and the nominal
 * bandwidth (2 x memory clock x bus width). On failure *out is zeroed and
 * the message names the query that failed (KL_ERROR_DRIVER), or
 * KL_ERROR_UNSUPPORTED for a driver without cuDeviceTotalMem_v2. */
kl_status kl_cuda_device_describe(kl_cuda_backend *cb, kl_device *out);

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

kl_status kl_cuda_device_describe(kl_cuda_backend *cb, kl_device *out) {
    typedef kl__cu_result (*total_mem_fn)(size_t *bytes, kl__cu_device dev);
    static const struct {
        int attr;
        const char *name;
    } q[4] = {{16, "MULTIPROCESSOR_COUNT"}, {38, "L2_CACHE_SIZE"}, {36, "MEMORY_CLOCK_RATE"},
              {37, "GLOBAL_MEMORY_BUS_WIDTH"}}; /* the compute capability: read by kl_cuda_backend_init */
    int v[4];
    size_t i, mem = 0;
    total_mem_fn total_mem;
    void *sym;
    kl__cu_result r;
    kl_status st;
    if (out == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_device_describe: out is NULL");
    memset(out, 0, sizeof *out);
    st = kl__cuda_enter(cb, "kl_cuda_device_describe");
    if (st != KL_SUCCESS) return st;
    for (i = 0; i < 4; i++) {
        v[i] = 0;
        r = cb->api.device_get_attribute(&v[i], q[i].attr, cb->device);
        if (r != KL__CUDA_SUCCESS || v[i] < 0) {
            kl__cuda_leave(cb);
            return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_cuda_device_describe(device %d): cuDeviceGetAttribute(%s)",
                                 cb->ordinal, q[i].name);
        }
    }
    sym = kl_cuda_backend_symbol(cb, "cuDeviceTotalMem_v2");
    if (sym == NULL) {
        kl__cuda_leave(cb);
        return kl__fail(KL_ERROR_UNSUPPORTED, "kl_cuda_device_describe(device %d): the driver has no cuDeviceTotalMem_v2",
                        cb->ordinal);
    }
    memcpy(&total_mem, &sym, sizeof total_mem); /* C99 has no object-to-function pointer cast */
    r = total_mem(&mem, cb->device);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_cuda_device_describe(device %d): cuDeviceTotalMem_v2",
                             cb->ordinal);
    out->cc_major = (uint32_t)cb->cc_major;
    out->cc_minor = (uint32_t)cb->cc_minor;
    out->sm_count = (uint32_t)v[0];
    out->l2_bytes = (uint64_t)v[1];
    out->mem_bytes = (uint64_t)mem;
    out->mem_bandwidth_gbs = (uint32_t)(2.0 * v[2] * 1e3 * v[3] / 8.0 / 1e9 + 0.5);
    return KL_SUCCESS;
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_HELPERS_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
