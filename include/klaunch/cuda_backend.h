/* cuda_backend.h - the klaunch backend that launches through the CUDA driver.
 *
 * The driver is loaded at run time with dlopen("libcuda.so.1"): nothing to
 * link but -ldl, no CUDA toolkit needed to build, and a program on a machine
 * without a GPU still starts and gets KL_ERROR_NO_DRIVER.
 *
 * FILES
 *   This header is the backend's API and its implementation. It includes
 *   klaunch/cuda_driver.h (private: the driver's types, entry points, the
 *   dlopen loader and error names), klaunch/image.h (kl_image_check, run on
 *   every image before the driver sees it) and klaunch/cuda_helpers.h
 *   (kl_cuda_malloc ... kl_cuda_device_name, for tests, examples and
 *   benchmarks).
 *
 * USE
 *   In the one file that defines KLAUNCH_IMPLEMENTATION, include this header
 *   after klaunch.h (or alone: it includes klaunch.h). Link with -ldl.
 *
 *       kl_cuda_backend cuda;
 *       kl_module mod;
 *       void *buf;
 *       if (kl_cuda_backend_init(&cuda, 0) != KL_SUCCESS) {
 *           fprintf(stderr, "%s\n", kl_last_error_message());  // no driver, no GPU
 *           return 1;
 *       }
 *       kl_module_load_file(&cuda.base, "paged_decode_gqa8_d128.fatbin", &mod);
 *       kl_cuda_malloc(&cuda, &buf, 1 << 20);
 *       ...                                     // kl_<launcher>_get, kl_<launcher>
 *       kl_cuda_synchronize(&cuda);
 *       kl_cuda_free(&cuda, buf);
 *       kl_module_unload(&mod);
 *       kl_cuda_backend_destroy(&cuda);
 *
 * CONTEXTS AND THREADS
 *   init retains the device's primary context (the one the CUDA runtime
 *   uses, so cudaMalloc'd pointers and cudaStream_t streams work here) and
 *   makes it current on the calling thread. Module loads, kernel lookups and
 *   the helpers push it for their own duration, so they work from any
 *   thread. A launch does nothing but call cuLaunchKernel: launch from a
 *   thread where the primary context is current (init's thread, or any
 *   thread the CUDA runtime has used on this device; or call
 *   kl_cuda_backend_make_current), or get KL_ERROR_LAUNCH_FAILED naming
 *   CUDA_ERROR_INVALID_CONTEXT. One backend per device: handles belong to
 *   the backend's device. Load and look kernels up before a stream capture;
 *   kl_cuda_backend_guard_stream makes loads and lookups refuse with
 *   KL_ERROR_CAPTURE_ACTIVE during one (docs/LAUNCH.md).
 *
 * LAUNCH ATTRIBUTES
 *   A launcher with launch_attributes (cluster, programmatic serialization,
 *   cooperative) launches through cuLaunchKernelEx; its kl_X_get fails with
 *   KL_ERROR_UNSUPPORTED where the driver or device cannot honour them, so
 *   launches never fall back to a plain launch nor query the device.
 *
 * ERROR REPORTING
 *   As klaunch.h: every function returns a kl_status and keeps the message,
 *   with the driver's error name and description, in
 *   kl_last_error_message(). No driver: KL_ERROR_NO_DRIVER; no such device:
 *   KL_ERROR_NO_DEVICE; an image the device cannot run, or one whose
 *   headers point outside it (refused by kl_image_check before the driver
 *   reads a byte; docs/LOADING.md): KL_ERROR_INVALID_IMAGE; a module
 *   without klaunch metadata:
 *   KL_ERROR_MODULE_INFO; a kernel whose parameters differ from its spec
 *   (each spec parameter's offset and size, checked with cuFuncGetParamInfo
 *   where the driver has it): KL_ERROR_LAYOUT_MISMATCH, naming the first
 *   parameter that differs or is missing. A driver without
 *   cuFuncGetParamInfo skips that check and says so once per process (see
 *   kl_cuda_backend_layout_note). docs/ARG_ORDER.md has every message.
 */
#ifndef KLAUNCH_CUDA_BACKEND_H
#define KLAUNCH_CUDA_BACKEND_H

#include "klaunch/klaunch.h"
#include "klaunch/cuda_driver.h" /* private: the driver's types, entry points and loader */
#include "klaunch/image.h"       /* kl_image_check: images are checked before the driver reads them */
#include "klaunch/tensor_map.h"  /* kl_tensor_map: encoded with cuTensorMapEncodeTiled */

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KL_CUDA_MAX_GUARDED_STREAMS
#define KL_CUDA_MAX_GUARDED_STREAMS 8
#endif

typedef struct kl_cuda_backend {
    kl_backend base; /* first member: pass &cuda.base where a kl_backend* is wanted */
    /* private */
    void *lib;            /* dlopen handle of libcuda.so.1; NULL when not initialised */
    int ordinal;          /* device ordinal given to init */
    kl__cu_device device;
    kl__cu_context ctx;   /* the device's primary context, retained */
    int cc_major, cc_minor; /* compute capability, for error messages */
    kl__cuda_api api;
    /* Streams whose active capture makes module loads and kernel lookups
     * refuse with KL_ERROR_CAPTURE_ACTIVE (kl_cuda_backend_guard_stream). */
    kl_stream guarded[KL_CUDA_MAX_GUARDED_STREAMS];
    int num_guarded;
} kl_cuda_backend;

/* dlopen("libcuda.so.1"), cuInit, cuDeviceGet(device_ordinal), retain the
 * primary context and make it current on the calling thread. On failure the
 * struct is left zeroed (destroy and the helpers accept it). */
kl_status kl_cuda_backend_init(kl_cuda_backend *cb, int device_ordinal);
/* Releases the primary context. Unload the backend's modules first. */
void kl_cuda_backend_destroy(kl_cuda_backend *cb);
/* Any driver entry point by its exported name, e.g. "cuMemAlloc_v2"; NULL
 * when absent or when cb is not initialised. */
void *kl_cuda_backend_symbol(const kl_cuda_backend *cb, const char *name);
/* NULL when kernel lookups check each kernel's parameter layout against its
 * spec (the driver has cuFuncGetParamInfo, CUDA 12.4+), else a sentence
 * saying they do not. The first lookup that skips the check in a process
 * also passes that sentence to the error callback (kl_set_error_callback)
 * with KL_ERROR_UNSUPPORTED, once; the lookup itself succeeds. */
const char *kl_cuda_backend_layout_note(const kl_cuda_backend *cb);
/* Makes the backend's (device's primary) context current on the calling
 * thread: what a thread needs before launching on this backend's device. */
kl_status kl_cuda_backend_make_current(kl_cuda_backend *cb);
/* From now on kl_module_load* and kl_X_get on this backend first ask the
 * driver whether `stream` is capturing (cuStreamIsCapturing) and refuse with
 * KL_ERROR_CAPTURE_ACTIVE if it is, rather than load during the capture (an
 * unsafe call there invalidates the capture). Launches ask nothing. Up to
 * KL_CUDA_MAX_GUARDED_STREAMS streams; register them before sharing the
 * backend between threads. */
kl_status kl_cuda_backend_guard_stream(kl_cuda_backend *cb, kl_stream stream);
/* Stops guarding `stream` (do so before destroying it); no-op if unguarded. */
void kl_cuda_backend_unguard_stream(kl_cuda_backend *cb, kl_stream stream);
/* KL_ERROR_CAPTURE_ACTIVE naming `what` when `stream` is capturing (or its
 * capture was invalidated), else KL_SUCCESS. */
kl_status kl_cuda_stream_check_not_capturing(kl_cuda_backend *cb, kl_stream stream, const char *what);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_BACKEND_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_CUDA_BACKEND_IMPLEMENTATION_DONE
#define KLAUNCH_CUDA_BACKEND_IMPLEMENTATION_DONE

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kl__fail with ": <driver error>" appended. Error path only. */
static kl_status kl__cuda_fail(const kl_cuda_backend *cb, kl_status status, kl__cu_result r, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static kl_status kl__cuda_fail(const kl_cuda_backend *cb, kl_status status, kl__cu_result r, const char *fmt, ...) {
    char what[640], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    kl__cuda_error_text(&cb->api, r, err, sizeof err);
    return kl__fail(status, "%s: %s", what, err);
}

/* Makes the backend's context current for one call, from any thread. */
static kl_status kl__cuda_enter(const kl_cuda_backend *cb, const char *what) {
    kl__cu_result r;
    if (cb == NULL || cb->lib == NULL || cb->ctx == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "%s: the CUDA backend is NULL or not initialised", what);
    r = cb->api.ctx_push_current(cb->ctx);
    if (r != KL__CUDA_SUCCESS) return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "%s: cuCtxPushCurrent", what);
    return KL_SUCCESS;
}

static void kl__cuda_leave(const kl_cuda_backend *cb) {
    kl__cu_context ctx;
    cb->api.ctx_pop_current(&ctx);
}

static kl_status kl__cuda_capture_guard(kl_cuda_backend *cb, const char *what);

static kl_status kl__cuda_module_load(kl_backend *be, const void *image, size_t size, void **handle) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    kl__cu_module mod = NULL;
    kl__cu_result r;
    kl_status st;
    kl_image_kind kind;
    char *copy = NULL;
    /* cuModuleLoadData takes no size: every offset and size it will follow
     * is checked against this one first (klaunch/image.h). */
    st = kl__image_check(image, size, "kl_module_load", &kind);
    if (st != KL_SUCCESS) return st;
    if (kind == KL_IMAGE_PTX && memchr(image, '\0', size) == NULL) {
        copy = (char *)malloc(size + 1);
        if (copy == NULL)
            return kl__fail(KL_ERROR_OUT_OF_MEMORY, "kl_module_load: %lu bytes to terminate a PTX image",
                            (unsigned long)size + 1);
        memcpy(copy, image, size);
        copy[size] = '\0';
        image = copy;
    }
    st = kl__cuda_enter(cb, "kl_module_load");
    if (st == KL_SUCCESS) {
        st = kl__cuda_capture_guard((kl_cuda_backend *)cb, "kl_module_load");
        if (st != KL_SUCCESS) {
            kl__cuda_leave(cb);
            free(copy);
            return st;
        }
        r = cb->api.module_load_data(&mod, image);
        kl__cuda_leave(cb);
        switch (r) {
        case KL__CUDA_SUCCESS:
            *handle = mod;
            break;
        case KL__CUDA_ERROR_INVALID_IMAGE:
        case KL__CUDA_ERROR_NO_BINARY_FOR_GPU:
        case KL__CUDA_ERROR_INVALID_PTX:
        case KL__CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
        case KL__CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        case KL__CUDA_ERROR_INVALID_SOURCE:
            st = kl__cuda_fail(cb, KL_ERROR_INVALID_IMAGE, r,
                               "kl_module_load: the driver cannot load this %lu-byte image on device %d (sm_%d%d)",
                               (unsigned long)size, cb->ordinal, cb->cc_major, cb->cc_minor);
            break;
        default:
            st = kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_module_load: cuModuleLoadData");
            break;
        }
    }
    free(copy);
    return st;
}

static void kl__cuda_module_unload(kl_backend *be, void *handle) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    if (kl__cuda_enter(cb, "kl_module_unload") != KL_SUCCESS) return;
    cb->api.module_unload((kl__cu_module)handle);
    kl__cuda_leave(cb);
}

static kl_status kl__cuda_module_info(kl_backend *be, void *handle, char *buf, size_t cap) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    kl__cu_deviceptr dptr = 0;
    size_t bytes = 0;
    kl__cu_result r;
    kl_status st = kl__cuda_enter(cb, "kl_module_load");
    if (st != KL_SUCCESS) return st;
    r = cb->api.module_get_global(&dptr, &bytes, (kl__cu_module)handle, KL_MODULE_INFO_SYMBOL);
    if (r == KL__CUDA_ERROR_NOT_FOUND) {
        st = kl__fail(KL_ERROR_MODULE_INFO,
                      "kl_module_load: the module has no %s: not a klaunch fatbin (kernels must include their "
                      "family's generated .cuh)",
                      KL_MODULE_INFO_SYMBOL);
    } else if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_module_load: cuModuleGetGlobal(%s)", KL_MODULE_INFO_SYMBOL);
    } else if (bytes == 0 || bytes > cap) {
        st = kl__fail(KL_ERROR_MODULE_INFO, "kl_module_load: %s is %lu bytes; this runtime reads 1 to %lu",
                      KL_MODULE_INFO_SYMBOL, (unsigned long)bytes, (unsigned long)cap);
    } else {
        r = cb->api.memcpy_dtoh(buf, dptr, bytes);
        if (r != KL__CUDA_SUCCESS) {
            st = kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r, "kl_module_load: reading %s",
                               KL_MODULE_INFO_SYMBOL);
        } else if (buf[bytes - 1] != '\0') {
            /* The generated .cuh defines it as a string, NUL included. */
            if (bytes == cap)
                st = kl__fail(KL_ERROR_MODULE_INFO, "kl_module_load: %s is not NUL-terminated within %lu bytes",
                              KL_MODULE_INFO_SYMBOL, (unsigned long)cap);
            else
                buf[bytes] = '\0';
        }
    }
    kl__cuda_leave(cb);
    return st;
}

static const char kl__cuda_layout_note[] =
    "this driver has no cuFuncGetParamInfo (drivers of CUDA 12.4 and newer have it): kernel parameter layouts are "
    "not checked when kernels are looked up; the compile-time and build-time checks still apply "
    "(docs/ARG_ORDER.md)";
/* Whether the note above went to the error callback (once per process). */
static int kl__cuda_layout_note_given;

const char *kl_cuda_backend_layout_note(const kl_cuda_backend *cb) {
    if (cb == NULL || cb->lib == NULL || cb->api.func_get_param_info != NULL) return NULL;
    return kl__cuda_layout_note;
}

static const char *kl__param_kind_name(kl_param_kind kind) {
    switch (kind) {
    case KL_PARAM_PTR: return "pointer";
    case KL_PARAM_U32: return "u32";
    case KL_PARAM_U64: return "u64";
    case KL_PARAM_F32: return "f32";
    case KL_PARAM_I32: return "i32";
    case KL_PARAM_BOOL: return "bool, as u32";
    case KL_PARAM_TENSOR_MAP: return "tensor map";
    default: return "?";
    }
}

/* The compiled kernel's parameters against the spec's (cuFuncGetParamInfo):
 * a kernel built from a source that drifted from its spec would otherwise
 * read its arguments from the wrong bytes. */
static kl_status kl__cuda_check_layout(const kl_cuda_backend *cb, kl__cu_function fn, const kl_kernel_desc *desc) {
    size_t offset, size;
    kl__cu_result r;
    uint32_t i, base = 0;
    int have_base = 0;
    if (cb->api.func_get_param_info == NULL) {
        /* Said once per process, through the error callback only: the lookup
         * itself succeeds and the thread's last error is left alone. */
        kl_error_callback callback = NULL;
        void *user = NULL;
        int given;
#if defined(__GNUC__) || defined(__clang__)
        given = __atomic_exchange_n(&kl__cuda_layout_note_given, 1, __ATOMIC_RELAXED);
#else
        given = kl__cuda_layout_note_given;
        kl__cuda_layout_note_given = 1;
#endif
        if (!given) kl__error_callback_get(&callback, &user);
        if (callback != NULL) {
            char note[512];
            snprintf(note, sizeof note, "%s: kl_%s_get: %s", kl_status_name(KL_ERROR_UNSUPPORTED), desc->launcher,
                     kl__cuda_layout_note);
            callback(KL_ERROR_UNSUPPORTED, note, user);
        }
        return KL_SUCCESS;
    }
    for (i = 0; i < desc->num_params; i++) {
        const kl_param_info *p = &desc->params[i];
        uint32_t want;
        r = cb->api.func_get_param_info(fn, i, &offset, &size);
        if (r == KL__CUDA_ERROR_INVALID_VALUE)
            return kl__fail(KL_ERROR_LAYOUT_MISMATCH,
                            "kl_%s_get: kernel %s has %u parameters, its spec %u: parameter %u (%s, offset %u, %u "
                            "bytes, %s) is missing [%s:%u]",
                            desc->launcher, desc->entry, (unsigned)i, (unsigned)desc->num_params, (unsigned)i + 1,
                            p->name, (unsigned)p->offset, (unsigned)p->size, kl__param_kind_name(p->kind),
                            desc->spec_file, (unsigned)desc->spec_line);
        if (r != KL__CUDA_SUCCESS)
            return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_%s_get: cuFuncGetParamInfo(%s, %u)", desc->launcher,
                                 desc->entry, (unsigned)i);
        /* A tensor map is 128-byte aligned in the constant bank, whose
         * parameter area starts at a target-dependent offset (0x160, 0x210,
         * 0x380...): the first one the driver reports fixes where the buffer
         * starts modulo 128, and every offset follows from it (docs/ARG_ORDER.md). */
        if (p->kind == KL_PARAM_TENSOR_MAP && !have_base && size == p->size) {
            /* Every target's area starts 16-byte aligned: another residue is a misplaced map. */
            base = (uint32_t)((128u - offset % 128u) % 128u);
            if (base % 16u != 0u) base = 0;
            have_base = 1;
        }
        want = kl__param_offset_at(desc, i, base);
        if (offset != want || size != p->size)
            return kl__fail(KL_ERROR_LAYOUT_MISMATCH,
                            "kl_%s_get: kernel %s differs from its spec at parameter %u (%s): the kernel has offset "
                            "%lu, %lu bytes; the spec says offset %u, %u bytes (%s) [%s:%u]",
                            desc->launcher, desc->entry, (unsigned)i + 1, p->name, (unsigned long)offset,
                            (unsigned long)size, (unsigned)want, (unsigned)p->size, kl__param_kind_name(p->kind),
                            desc->spec_file, (unsigned)desc->spec_line);
    }
    /* Extra trailing kernel parameters are not probed for: asking for index
     * num_params would fail on every correct kernel, an API error that
     * compute-sanitizer reports. The compile-time and build-time checks
     * catch them (docs/ARG_ORDER.md). */
    return KL_SUCCESS;
}

kl_status kl_cuda_stream_check_not_capturing(kl_cuda_backend *cb, kl_stream stream, const char *what) {
    kl__cu_result r;
    int status = KL__CU_STREAM_CAPTURE_STATUS_NONE;
    if (cb == NULL || cb->lib == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "%s: the CUDA backend is NULL or not initialised",
                        what ? what : "kl_cuda_stream_check_not_capturing");
    if (cb->api.stream_is_capturing == NULL)
        return kl__fail(KL_ERROR_UNSUPPORTED, "%s: this driver has no cuStreamIsCapturing",
                        what ? what : "kl_cuda_stream_check_not_capturing");
    /* With the backend's context current: the NULL stream means its context's. */
    r = cb->api.ctx_push_current(cb->ctx);
    if (r == KL__CUDA_SUCCESS) {
        r = cb->api.stream_is_capturing(stream, &status);
        kl__cuda_leave(cb);
    }
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "%s: cuStreamIsCapturing(%p)",
                             what ? what : "kl_cuda_stream_check_not_capturing", (void *)stream);
    if (status != KL__CU_STREAM_CAPTURE_STATUS_NONE)
        return kl__fail(KL_ERROR_CAPTURE_ACTIVE,
                        "%s: stream %p is %s; loading there would invalidate the capture: load modules and look "
                        "kernels up (kl_X_get) before cuStreamBeginCapture (docs/LAUNCH.md)",
                        what ? what : "kl_cuda_stream_check_not_capturing", (void *)stream,
                        status == KL__CU_STREAM_CAPTURE_STATUS_ACTIVE ? "capturing" : "in an invalidated capture");
    return KL_SUCCESS;
}

/* The guarded streams (kl_cuda_backend_guard_stream); with the context current. */
static kl_status kl__cuda_capture_guard(kl_cuda_backend *cb, const char *what) {
    int i;
    for (i = 0; i < cb->num_guarded; i++) {
        kl_status st = kl_cuda_stream_check_not_capturing(cb, cb->guarded[i], what);
        if (st != KL_SUCCESS) return st;
    }
    return KL_SUCCESS;
}

kl_status kl_cuda_backend_guard_stream(kl_cuda_backend *cb, kl_stream stream) {
    int i;
    if (cb == NULL || cb->lib == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_backend_guard_stream: the CUDA backend is NULL or not "
                                                   "initialised");
    if (cb->api.stream_is_capturing == NULL)
        return kl__fail(KL_ERROR_UNSUPPORTED, "kl_cuda_backend_guard_stream: this driver has no cuStreamIsCapturing");
    for (i = 0; i < cb->num_guarded; i++)
        if (cb->guarded[i] == stream) return KL_SUCCESS;
    if (cb->num_guarded >= KL_CUDA_MAX_GUARDED_STREAMS)
        return kl__fail(KL_ERROR_CAPACITY, "kl_cuda_backend_guard_stream: already %d streams "
                                           "(KL_CUDA_MAX_GUARDED_STREAMS)",
                        cb->num_guarded);
    cb->guarded[cb->num_guarded++] = stream;
    return KL_SUCCESS;
}

void kl_cuda_backend_unguard_stream(kl_cuda_backend *cb, kl_stream stream) {
    int i;
    if (cb == NULL) return;
    for (i = 0; i < cb->num_guarded; i++) {
        if (cb->guarded[i] == stream) {
            cb->guarded[i] = cb->guarded[--cb->num_guarded];
            cb->guarded[cb->num_guarded] = NULL;
            return;
        }
    }
}

kl_status kl_cuda_backend_make_current(kl_cuda_backend *cb) {
    kl__cu_result r;
    if (cb == NULL || cb->lib == NULL || cb->ctx == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_backend_make_current: the CUDA backend is NULL or not "
                                                   "initialised");
    r = cb->api.ctx_set_current(cb->ctx);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_cuda_backend_make_current: cuCtxSetCurrent(device %d)",
                             cb->ordinal);
    return KL_SUCCESS;
}

/* Can this driver and device honour desc's launch attributes? Asked once,
 * at lookup, so launches never query the device. */
static kl_status kl__cuda_check_attributes(const kl_cuda_backend *cb, const kl_kernel_desc *desc) {
    const kl_launch_attributes *a = desc->attributes;
    int value = 0;
    const char *what = NULL;
    if (a == NULL) return KL_SUCCESS;
    if (cb->api.launch_kernel_ex == NULL)
        return kl__fail(KL_ERROR_UNSUPPORTED,
                        "kl_%s_get: kernel %s declares launch attributes [%s:%u:%u], but this driver has no "
                        "cuLaunchKernelEx (CUDA 12.0 and newer drivers have it)",
                        desc->launcher, desc->entry, desc->spec_file, (unsigned)a->line, (unsigned)a->col);
    if (a->cluster[0] != 0u) {
        if (cb->cc_major < 9)
            what = "a thread-block cluster (compute capability 9.0 and newer)";
        else if (cb->api.device_get_attribute(&value, KL__CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, cb->device) !=
                     KL__CUDA_SUCCESS ||
                 value == 0)
            what = "a thread-block cluster (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0)";
    }
    if (what == NULL && (a->flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION) != 0u && cb->cc_major < 9)
        what = "programmatic dependent launch (programmatic_serialization; compute capability 9.0 and newer)";
    if (what == NULL && (a->flags & KL_LAUNCH_COOPERATIVE) != 0u) {
        value = 0;
        if (cb->api.device_get_attribute(&value, KL__CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, cb->device) !=
                KL__CUDA_SUCCESS ||
            value == 0)
            what = "a cooperative launch (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)";
    }
    if (what != NULL)
        return kl__fail(KL_ERROR_UNSUPPORTED, "kl_%s_get: kernel %s declares %s, which device %d (sm_%d%d) cannot do "
                                              "[%s:%u:%u]",
                        desc->launcher, desc->entry, what, cb->ordinal, cb->cc_major, cb->cc_minor, desc->spec_file,
                        (unsigned)a->line, (unsigned)a->col);
    return KL_SUCCESS;
}

static kl_status kl__cuda_function_get_in_ctx(const kl_cuda_backend *cb, kl__cu_module mod,
                                              const kl_kernel_desc *desc, void **fn_out, kl_func_attrs *attrs) {
    kl__cu_function fn = NULL;
    int threads = 0, shared = 0;
    kl_status st = kl__cuda_capture_guard((kl_cuda_backend *)cb, "kl_kernel_get");
    kl__cu_result r;
    if (st != KL_SUCCESS) return st;
    st = kl__cuda_check_attributes(cb, desc);
    if (st != KL_SUCCESS) return st;
    r = cb->api.module_get_function(&fn, mod, desc->entry);
    if (r == KL__CUDA_ERROR_NOT_FOUND)
        return kl__fail(KL_ERROR_KERNEL_NOT_FOUND, "kl_%s_get: the module has no kernel '%s' [%s:%u]",
                        desc->launcher, desc->entry, desc->spec_file, (unsigned)desc->spec_line);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_%s_get: cuModuleGetFunction(%s)", desc->launcher,
                             desc->entry);
    st = kl__cuda_check_layout(cb, fn, desc);
    if (st != KL_SUCCESS) return st;
    if (desc->max_dynamic_shared > 0) {
        r = cb->api.func_set_attribute(fn, KL__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)desc->max_dynamic_shared);
        if (r != KL__CUDA_SUCCESS)
            return kl__cuda_fail(cb, KL_ERROR_UNSUPPORTED, r,
                                 "kl_%s_get: device %d (sm_%d%d) cannot give kernel %s %u bytes of dynamic shared "
                                 "memory",
                                 desc->launcher, cb->ordinal, cb->cc_major, cb->cc_minor, desc->entry,
                                 (unsigned)desc->max_dynamic_shared);
    }
    r = cb->api.func_get_attribute(&threads, KL__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
    if (r == KL__CUDA_SUCCESS)
        r = cb->api.func_get_attribute(&shared, KL__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_%s_get: cuFuncGetAttribute(%s)", desc->launcher,
                             desc->entry);
    *fn_out = fn;
    attrs->max_threads = threads > 0 ? (uint32_t)threads : 0;
    attrs->max_dynamic_shared = shared > 0 ? (uint32_t)shared : 0;
    return KL_SUCCESS;
}

static kl_status kl__cuda_function_get(kl_backend *be, void *module_handle, const kl_kernel_desc *desc, void **fn,
                                       kl_func_attrs *attrs) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    kl_status st = kl__cuda_enter(cb, "kl_kernel_get");
    if (st != KL_SUCCESS) return st;
    st = kl__cuda_function_get_in_ctx(cb, (kl__cu_module)module_handle, desc, fn, attrs);
    kl__cuda_leave(cb);
    return st;
}

/* Out of line so the launch path stays one driver call and a branch. */
static kl_status kl__cuda_launch_failed(const kl_cuda_backend *cb, const kl_launch *l, kl__cu_result r) {
    const kl_kernel_desc *d = l->kernel->desc;
    return kl__cuda_fail(cb, KL_ERROR_LAUNCH_FAILED, r,
                         "kl_%s: cuLaunchKernel(%s, grid (%u, %u, %u), block (%u, %u, %u), %u shared bytes)%s",
                         d->launcher, d->entry, (unsigned)l->grid[0], (unsigned)l->grid[1], (unsigned)l->grid[2],
                         (unsigned)l->block[0], (unsigned)l->block[1], (unsigned)l->block[2],
                         (unsigned)l->shared_bytes,
                         r == KL__CUDA_ERROR_INVALID_CONTEXT
                             ? " on a thread where the device's primary context is not current"
                             : "");
}

/* A launch with attributes (kl_X_get made sure the driver has
 * cuLaunchKernelEx and the device can honour them). Out of line: plain
 * launches stay one driver call and two branches. */
static kl_status kl__cuda_launch_ex(const kl_cuda_backend *cb, const kl_launch *l) {
    const kl_launch_attributes *a = l->attributes;
    kl__cu_launch_attribute attrs[3];
    kl__cu_launch_config config;
    kl__cu_result r;
    unsigned int n = 0;
    memset(attrs, 0, sizeof attrs);
    if (a->cluster[0] != 0u) {
        attrs[n].id = KL__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.cluster_dim.x = a->cluster[0];
        attrs[n].value.cluster_dim.y = a->cluster[1];
        attrs[n].value.cluster_dim.z = a->cluster[2];
        n++;
    }
    if ((a->flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION) != 0u) {
        attrs[n].id = KL__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[n].value.programmatic_stream_serialization_allowed = 1;
        n++;
    }
    if ((a->flags & KL_LAUNCH_COOPERATIVE) != 0u) {
        attrs[n].id = KL__CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n].value.cooperative = 1;
        n++;
    }
    config.grid_x = l->grid[0];
    config.grid_y = l->grid[1];
    config.grid_z = l->grid[2];
    config.block_x = l->block[0];
    config.block_y = l->block[1];
    config.block_z = l->block[2];
    config.shared_bytes = l->shared_bytes;
    config.stream = l->stream;
    config.attrs = attrs;
    config.num_attrs = n;
    r = cb->api.launch_kernel_ex(&config, (kl__cu_function)l->kernel->fn, l->args, NULL);
    if (r != KL__CUDA_SUCCESS) {
        const kl_kernel_desc *d = l->kernel->desc;
        return kl__cuda_fail(cb, KL_ERROR_LAUNCH_FAILED, r,
                             "kl_%s: cuLaunchKernelEx(%s, grid (%u, %u, %u), block (%u, %u, %u), %u shared bytes, "
                             "cluster (%u, %u, %u), flags %u)%s",
                             d->launcher, d->entry, (unsigned)l->grid[0], (unsigned)l->grid[1], (unsigned)l->grid[2],
                             (unsigned)l->block[0], (unsigned)l->block[1], (unsigned)l->block[2],
                             (unsigned)l->shared_bytes, (unsigned)a->cluster[0], (unsigned)a->cluster[1],
                             (unsigned)a->cluster[2], (unsigned)a->flags,
                             r == KL__CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
                                 ? ": a cooperative grid must fit on the device at once"
                                 : r == KL__CUDA_ERROR_INVALID_CONTEXT
                                       ? " on a thread where the device's primary context is not current"
                                       : "");
    }
    return KL_SUCCESS;
}

static kl_status kl__cuda_launch(const kl_backend *be, const kl_launch *l) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    kl__cu_result r;
    if (l->attributes != NULL) return kl__cuda_launch_ex(cb, l);
    r = cb->api.launch_kernel((kl__cu_function)l->kernel->fn, l->grid[0], l->grid[1], l->grid[2],
                                            l->block[0], l->block[1], l->block[2], l->shared_bytes, l->stream,
                                            l->args, NULL);
    if (r != KL__CUDA_SUCCESS) return kl__cuda_launch_failed(cb, l, r);
    return KL_SUCCESS;
}

static void kl__cuda_device_arch(const kl_backend *be, char *buf, size_t cap) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    snprintf(buf, cap, "sm_%d%d (ordinal %d)", cb->cc_major, cb->cc_minor, cb->ordinal);
}

static kl_status kl__cuda_tensor_map_encode(const kl_backend *be, const kl_tensor_map_request *q, void *opaque) {
    const kl_cuda_backend *cb = (const kl_cuda_backend *)be;
    unsigned long long extents[KL_TENSOR_MAP_MAX_RANK], strides[KL_TENSOR_MAP_MAX_RANK];
    unsigned int box[KL_TENSOR_MAP_MAX_RANK], estr[KL_TENSOR_MAP_MAX_RANK];
    kl__cu_result r;
    kl_status st;
    uint32_t i;
    if (cb->api.tensor_map_encode_tiled == NULL)
        return kl__fail(KL_ERROR_UNSUPPORTED, "cuTensorMapEncodeTiled: this driver lacks it (CUDA 12.0 and newer "
                                              "have it)");
    for (i = 0; i < KL_TENSOR_MAP_MAX_RANK; i++) {
        extents[i] = q->extent[i];
        strides[i] = i + 1 < KL_TENSOR_MAP_MAX_RANK ? q->stride[i] : 0u;
        box[i] = q->box[i];
        estr[i] = q->element_stride[i];
    }
    st = kl__cuda_enter(cb, "cuTensorMapEncodeTiled");
    if (st != KL_SUCCESS) return st;
    r = cb->api.tensor_map_encode_tiled(opaque, (int)q->dtype, q->rank, (void *)(uintptr_t)q->address, extents,
                                        strides, box, estr, (int)q->interleave, (int)q->swizzle,
                                        (int)q->l2_promotion, (int)q->oob_fill);
    kl__cuda_leave(cb);
    if (r != KL__CUDA_SUCCESS)
        return kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r,
                             "cuTensorMapEncodeTiled(rank %u, address %p) refused a map klaunch's checks passed",
                             (unsigned)q->rank, q->address);
    return KL_SUCCESS;
}

static const kl_backend_ops kl__cuda_ops = {
    "cuda",
    kl__cuda_module_load,
    kl__cuda_module_unload,
    kl__cuda_module_info,
    kl__cuda_function_get,
    kl__cuda_launch,
    kl__cuda_device_arch,
    kl__cuda_tensor_map_encode,
};

kl_status kl_cuda_backend_init(kl_cuda_backend *cb, int device_ordinal) {
    kl__cu_result r;
    kl_status st;
    int count = 0;
    void *lib;
    if (cb == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_cuda_backend_init: cb is NULL");
    memset(cb, 0, sizeof *cb);
    st = kl__cuda_driver_open(&lib, &cb->api);
    if (st != KL_SUCCESS) {
        memset(cb, 0, sizeof *cb);
        return st;
    }
    /* From cuInit on, libcuda.so.1 stays loaded, as the CUDA runtime leaves
     * it: the driver's own threads may outlive this backend. */
    cb->lib = lib;
    cb->ordinal = device_ordinal;
    r = cb->api.init(0);
    if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, r == KL__CUDA_ERROR_NO_DEVICE ? KL_ERROR_NO_DEVICE : KL_ERROR_NO_DRIVER, r,
                           "kl_cuda_backend_init: cuInit of libcuda.so.1");
        memset(cb, 0, sizeof *cb);
        return st;
    }
    kl__cuda_driver_resolve_versioned(&cb->api);
    r = cb->api.device_get_count(&count);
    if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, KL_ERROR_NO_DEVICE, r, "kl_cuda_backend_init: cuDeviceGetCount");
        memset(cb, 0, sizeof *cb);
        return st;
    }
    if (device_ordinal < 0 || device_ordinal >= count) {
        memset(cb, 0, sizeof *cb);
        return kl__fail(KL_ERROR_NO_DEVICE, "kl_cuda_backend_init: no CUDA device %d (the driver sees %d)",
                        device_ordinal, count);
    }
    r = cb->api.device_get(&cb->device, device_ordinal);
    if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, KL_ERROR_NO_DEVICE, r, "kl_cuda_backend_init: cuDeviceGet(%d)", device_ordinal);
        memset(cb, 0, sizeof *cb);
        return st;
    }
    cb->api.device_get_attribute(&cb->cc_major, KL__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cb->device);
    cb->api.device_get_attribute(&cb->cc_minor, KL__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cb->device);
    r = cb->api.primary_ctx_retain(&cb->ctx, cb->device);
    if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, kl__cuda_status(r, KL_ERROR_DRIVER), r,
                           "kl_cuda_backend_init: cuDevicePrimaryCtxRetain(device %d)", device_ordinal);
        memset(cb, 0, sizeof *cb);
        return st;
    }
    r = cb->api.ctx_set_current(cb->ctx);
    if (r != KL__CUDA_SUCCESS) {
        st = kl__cuda_fail(cb, KL_ERROR_DRIVER, r, "kl_cuda_backend_init: cuCtxSetCurrent(device %d)",
                           device_ordinal);
        cb->api.primary_ctx_release(cb->device);
        memset(cb, 0, sizeof *cb);
        return st;
    }
    cb->base.ops = &kl__cuda_ops;
    return KL_SUCCESS;
}


void kl_cuda_backend_destroy(kl_cuda_backend *cb) {
    kl__cu_context current = NULL;
    if (cb == NULL || cb->lib == NULL) return;
    if (cb->ctx != NULL) {
        /* Undo init's cuCtxSetCurrent: release does not pop it, and a
         * released context left current would dangle. */
        if (cb->api.ctx_get_current(&current) == KL__CUDA_SUCCESS && current == cb->ctx)
            cb->api.ctx_set_current(NULL);
        cb->api.primary_ctx_release(cb->device);
    }
    memset(cb, 0, sizeof *cb);
}

void *kl_cuda_backend_symbol(const kl_cuda_backend *cb, const char *name) {
    if (cb == NULL || cb->lib == NULL || name == NULL) return NULL;
    return dlsym(cb->lib, name);
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_BACKEND_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */

/* The driver helpers for tests, examples and benchmarks (kl_cuda_malloc ...
 * kl_cuda_device_name) live in their own header; included here so every
 * program that reached them through this one still builds. */
#include "klaunch/cuda_helpers.h"
