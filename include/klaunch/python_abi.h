/* python_abi.h - the C side of klaunch's Python launchers (private).
 *
 * For each kernel family F the generator's --python-dir writes klaunch_F.py,
 * the Python module, and klaunch_F.c, the source of its shared library
 * libklaunch_F.so. klaunch_F.c defines KLAUNCH_IMPLEMENTATION, includes
 * klaunch/F.h and this file, so the library holds the whole runtime (the
 * generated launchers, the CUDA and recording backends), and exports only
 * what the Python runtime (python/klaunch/_family.py) calls through ctypes:
 * the kl__py_* functions below and one kl__X_py() per launcher X, which
 * calls kl_X() or kl_X_check() with the same arguments. So a refusal from
 * Python is the C launcher's own: its status and kl_last_error_message().
 *
 * BUILD (Bazel's kl_python_families, cmake/klaunch.cmake's PYTHON and
 * python/setup.py all do this):
 *     cc -O2 -fPIC -shared -fvisibility=hidden -I include -I generated \
 *        [-DKL_PYTHON_EMBED_FATBINS -I <folder of F_fatbins.h>] \
 *        klaunch_F.c [F_fatbins.c] -o libklaunch_F.so -ldl
 * -fvisibility=hidden keeps each library's runtime to itself: two families'
 * libraries in one process have separate error messages, load ids and
 * backends. With KL_PYTHON_EMBED_FATBINS the library embeds the family's
 * fatbins (F_fatbins.h from kl_fatbin or klaunch_add_family).
 *
 * Nothing here is for C programs. The Python runtime refuses a library whose
 * kl__py_abi() is not its KL_PYTHON_ABI.
 */
#ifndef KLAUNCH_PYTHON_ABI_H
#define KLAUNCH_PYTHON_ABI_H

#ifndef KLAUNCH_IMPLEMENTATION
#error "klaunch/python_abi.h is the implementation of a Python launcher library: include it in the generated klaunch_<family>.c only"
#endif

#include "klaunch/klaunch.h"
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The ABI between a library and python/klaunch/_family.py (which checks it):
 * the kl__py_* functions, kl__py_record_view and the kl__X_py signatures. */
#define KL_PYTHON_ABI 2

#if defined(__GNUC__) || defined(__clang__)
#define KL__PY_EXPORT __attribute__((visibility("default")))
#else
#define KL__PY_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KL__PY_CUDA 1
#define KL__PY_RECORD 2

/* A backend of one device (CUDA) or a recording one. */
typedef struct kl__py_backend {
    int kind; /* KL__PY_CUDA or KL__PY_RECORD */
    kl_cuda_backend cuda;
    kl_record_backend record;
    kl_record *records;
    char missing_entry[128];
    char device_arch[32];
} kl__py_backend;

typedef struct kl__py_module {
    kl_module m;
    kl__py_backend *b;
} kl__py_module;

/* A kernel handle and the backend it launches on: launches on a CUDA
 * backend push its device's context when another is current. */
typedef struct kl__py_kernel {
    kl_kernel k;
    const kl__py_backend *b;
} kl__py_kernel;

/* One recorded launch, as the Python runtime reads it (klaunch.Record). */
typedef struct kl__py_record_view {
    const char *launcher;
    const char *entry;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t cluster[3];
    uint32_t shared_bytes;
    uint32_t attribute_flags;
    uint32_t arg_bytes;
    uint64_t stream;
    const unsigned char *args;
    uint32_t num_extents;     /* the launch's declared extents, in its desc's order */
    const uint64_t *extents;
} kl__py_record_view;

typedef kl_status (*kl__py_get_fn)(kl_kernel *kernel, const kl_module *module);

/* ---- errors -------------------------------------------------------------- */

KL__PY_EXPORT uint32_t kl__py_abi(void) { return KL_PYTHON_ABI; }
KL__PY_EXPORT int kl__py_status_count(void) { return (int)KL_STATUS_COUNT; }
KL__PY_EXPORT const char *kl__py_status_name(int status) { return kl_status_name((kl_status)status); }
KL__PY_EXPORT const char *kl__py_status_string(int status) { return kl_status_string((kl_status)status); }
KL__PY_EXPORT const char *kl__py_last_error_message(void) { return kl_last_error_message(); }
KL__PY_EXPORT size_t kl__py_record_view_size(void) { return sizeof(kl__py_record_view); }

/* ---- backends ------------------------------------------------------------ */

/* kl_cuda_backend_init(ordinal), leaving the calling thread's current
 * context as it was (init makes the device's primary context current, which
 * the CUDA runtime, and so PyTorch, would take for a change of device). */
KL__PY_EXPORT kl_status kl__py_cuda_open(int ordinal, kl__py_backend **out) {
    kl__py_backend *b;
    kl__cuda_api api;
    void *lib = NULL;
    kl__cu_context before = NULL;
    int restore = 0;
    kl_status st;
    *out = NULL;
    b = (kl__py_backend *)calloc(1, sizeof *b);
    if (b == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "klaunch python: %lu bytes for a backend", (unsigned long)sizeof *b);
    if (kl__cuda_driver_open(&lib, &api) == KL_SUCCESS) {
        restore = api.init(0) == KL__CUDA_SUCCESS && api.ctx_get_current(&before) == KL__CUDA_SUCCESS;
        dlclose(lib); /* the backend's own dlopen keeps the driver loaded */
    }
    st = kl_cuda_backend_init(&b->cuda, ordinal);
    if (st != KL_SUCCESS) {
        free(b);
        return st;
    }
    if (restore) b->cuda.api.ctx_set_current(before);
    b->kind = KL__PY_CUDA;
    *out = b;
    return KL_SUCCESS;
}

KL__PY_EXPORT kl_status kl__py_record_open(size_t capacity, kl__py_backend **out) {
    kl__py_backend *b;
    *out = NULL;
    b = (kl__py_backend *)calloc(1, sizeof *b);
    if (b != NULL && capacity > 0) b->records = (kl_record *)calloc(capacity, sizeof *b->records);
    if (b == NULL || (capacity > 0 && b->records == NULL)) {
        free(b);
        return kl__fail(KL_ERROR_OUT_OF_MEMORY, "klaunch python: a recording backend of %lu records",
                        (unsigned long)capacity);
    }
    kl_record_backend_init(&b->record, b->records, capacity);
    b->kind = KL__PY_RECORD;
    *out = b;
    return KL_SUCCESS;
}

/* The recording backend's settings (record_backend.h): what its functions
 * report, an entry whose lookup fails, the status its launches return, the
 * device architecture messages name (NULL or "" for each: the default). */
KL__PY_EXPORT void kl__py_record_configure(kl__py_backend *b, uint32_t max_threads, uint32_t max_dynamic_shared,
                                           const char *missing_entry, int launch_status, const char *device_arch) {
    if (b->kind != KL__PY_RECORD) return;
    b->record.max_threads = max_threads;
    b->record.max_dynamic_shared = max_dynamic_shared;
    b->record.launch_status = (kl_status)launch_status;
    b->missing_entry[0] = b->device_arch[0] = '\0';
    if (missing_entry != NULL) strncat(b->missing_entry, missing_entry, sizeof b->missing_entry - 1);
    if (device_arch != NULL) strncat(b->device_arch, device_arch, sizeof b->device_arch - 1);
    b->record.missing_entry = b->missing_entry[0] ? b->missing_entry : NULL;
    b->record.device_arch = b->device_arch[0] ? b->device_arch : NULL;
}

KL__PY_EXPORT int kl__py_backend_kind(const kl__py_backend *b) { return b->kind; }

KL__PY_EXPORT void kl__py_backend_close(kl__py_backend *b) {
    if (b == NULL) return;
    if (b->kind == KL__PY_CUDA) kl_cuda_backend_destroy(&b->cuda);
    free(b->records);
    free(b);
}

KL__PY_EXPORT size_t kl__py_record_count(const kl__py_backend *b) { return b->kind == KL__PY_RECORD ? b->record.count : 0; }

KL__PY_EXPORT void kl__py_record_clear(kl__py_backend *b) {
    if (b->kind == KL__PY_RECORD) kl_record_backend_clear(&b->record);
}

KL__PY_EXPORT int kl__py_record_get(const kl__py_backend *b, size_t i, kl__py_record_view *out) {
    const kl_record *r;
    int j;
    if (b->kind != KL__PY_RECORD || i >= b->record.count) return 0;
    r = &b->record.records[i];
    out->launcher = r->desc->launcher;
    out->entry = r->entry;
    for (j = 0; j < 3; j++) {
        out->grid[j] = r->grid[j];
        out->block[j] = r->block[j];
        out->cluster[j] = r->cluster[j];
    }
    out->shared_bytes = r->shared_bytes;
    out->attribute_flags = r->attribute_flags;
    out->arg_bytes = r->arg_bytes;
    out->stream = (uint64_t)(uintptr_t)r->stream;
    out->args = r->args;
    out->num_extents = r->num_extents;
    out->extents = r->extents;
    return 1;
}

/* kl_cuda_stream_check_not_capturing on a CUDA backend; KL_SUCCESS on a
 * recording one. The Python runtime asks before it loads a module for a
 * launch on `stream`. */
KL__PY_EXPORT kl_status kl__py_check_not_capturing(kl__py_backend *b, uint64_t stream, const char *what) {
    if (b->kind != KL__PY_CUDA) return KL_SUCCESS;
    return kl_cuda_stream_check_not_capturing(&b->cuda, (kl_stream)(uintptr_t)stream, what);
}

/* Where the memory at `address` is, for arrays that say only their address
 * (__cuda_array_interface__), from cuPointerGetAttribute: 1 and *ordinal
 * (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) for device or managed memory, 2 for
 * host memory the driver knows (pinned or registered), 0 when the driver
 * does not know the address (or on a recording backend). */
KL__PY_EXPORT int kl__py_pointer_device(const kl__py_backend *b, uint64_t address, int *ordinal) {
    typedef kl__cu_result (*get_attribute_fn)(void *data, int attribute, uint64_t ptr);
    get_attribute_fn get;
    unsigned int memory_type = 0;
    int value = -1;
    if (b->kind != KL__PY_CUDA) return 0;
    get = (get_attribute_fn)(uintptr_t)kl_cuda_backend_symbol(&b->cuda, "cuPointerGetAttribute");
    if (get == NULL || get(&memory_type, 2 /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */, address) != KL__CUDA_SUCCESS)
        return 0;
    if (memory_type == 1 /* CU_MEMORYTYPE_HOST */) return 2;
    if (get(&value, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, address) != KL__CUDA_SUCCESS || value < 0) return 0;
    *ordinal = value;
    return 1;
}

/* ---- modules and kernels ------------------------------------------------- */

static kl_status kl__py_module_new(kl__py_backend *b, kl__py_module **out) {
    *out = (kl__py_module *)calloc(1, sizeof **out);
    if (*out == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "klaunch python: a module");
    (*out)->b = b;
    return KL_SUCCESS;
}

/* kl_module_load of `size` bytes at `image`. */
KL__PY_EXPORT kl_status kl__py_module_load(kl__py_backend *b, const void *image, size_t size, kl__py_module **out) {
    kl_status st = kl__py_module_new(b, out);
    if (st != KL_SUCCESS) return st;
    st = kl_module_load(b->kind == KL__PY_CUDA ? &b->cuda.base : &b->record.base, image, size, &(*out)->m);
    if (st != KL_SUCCESS) {
        free(*out);
        *out = NULL;
    }
    return st;
}

KL__PY_EXPORT kl_status kl__py_module_load_file(kl__py_backend *b, const char *path, kl__py_module **out) {
    kl_status st = kl__py_module_new(b, out);
    if (st != KL_SUCCESS) return st;
    st = kl_module_load_file(b->kind == KL__PY_CUDA ? &b->cuda.base : &b->record.base, path, &(*out)->m);
    if (st != KL_SUCCESS) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* A variant's module metadata on a recording backend
 * (kl_record_backend_load_variant). */
static kl_status kl__py_module_load_variant(kl__py_backend *b, const kl_variant_info *variants, const char *name,
                                            kl__py_module **out) {
    kl_status st;
    if (b->kind != KL__PY_RECORD)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "klaunch python: variant metadata loads on a recording backend only");
    st = kl__py_module_new(b, out);
    if (st != KL_SUCCESS) return st;
    st = kl_record_backend_load_variant(&b->record, variants, name, &(*out)->m);
    if (st != KL_SUCCESS) {
        free(*out);
        *out = NULL;
    }
    return st;
}

KL__PY_EXPORT const char *kl__py_module_variant(const kl__py_module *m) { return m->m.variant; }
KL__PY_EXPORT const char *kl__py_module_arch(const kl__py_module *m) { return m->m.arch; }

/* Unloads (every kernel handle of the module is refused from then on) and
 * keeps the memory, which kernel handles point at. */
KL__PY_EXPORT void kl__py_module_unload(kl__py_module *m) { kl_module_unload(&m->m); }

/* After every kernel handle of the module is freed. */
KL__PY_EXPORT void kl__py_module_free(kl__py_module *m) {
    if (m == NULL) return;
    kl_module_unload(&m->m);
    free(m);
}

static kl_status kl__py_kernel_get(const kl__py_module *m, kl__py_get_fn get, kl__py_kernel **out) {
    kl_status st;
    *out = (kl__py_kernel *)calloc(1, sizeof **out);
    if (*out == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "klaunch python: a kernel handle");
    (*out)->b = m->b;
    st = get(&(*out)->k, &m->m);
    if (st != KL_SUCCESS) {
        free(*out);
        *out = NULL;
    }
    return st;
}

KL__PY_EXPORT void kl__py_kernel_free(kl__py_kernel *k) { free(k); }

/* Around a launch on a CUDA backend: its device's context current on the
 * calling thread (pushed when another is, popped after), so a launch from
 * Python needs no cudaSetDevice and changes nothing PyTorch sees. */
static int kl__py_enter(const kl__py_kernel *k) {
    kl__cu_context current = NULL;
    const kl_cuda_backend *cb = &k->b->cuda;
    if (k->b->kind != KL__PY_CUDA) return 0;
    if (cb->api.ctx_get_current(&current) == KL__CUDA_SUCCESS && current == cb->ctx) return 0;
    return cb->api.ctx_push_current(cb->ctx) == KL__CUDA_SUCCESS;
}

static void kl__py_leave(const kl__py_kernel *k, int pushed) {
    kl__cu_context popped;
    if (pushed) k->b->cuda.api.ctx_pop_current(&popped);
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_PYTHON_ABI_H */
