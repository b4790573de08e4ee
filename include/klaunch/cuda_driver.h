/* cuda_driver.h - private: the CUDA driver as klaunch loads it.
 *
 * The one place that knows libcuda.so.1: the driver types and constants
 * klaunch uses (declared here, not taken from cuda.h, so nothing needs a
 * toolkit to build), the table of entry points, the dlopen/dlsym loader and
 * the driver's error names. klaunch/cuda_backend.h builds the backend on
 * it; nothing here is public API (every name is kl__), as volk keeps its
 * loader apart from the API it serves.
 *
 * Included by klaunch/cuda_backend.h; include that instead.
 */
#ifndef KLAUNCH_CUDA_DRIVER_H
#define KLAUNCH_CUDA_DRIVER_H

#include "klaunch/klaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The driver types klaunch needs, declared here rather than taken from
 * cuda.h (the runtime builds without a toolkit). Private names, so a file
 * may include cuda.h too; the struct tags are cuda.h's own. */
typedef int kl__cu_result;
typedef int kl__cu_device;
typedef unsigned long long kl__cu_deviceptr;
typedef struct CUctx_st *kl__cu_context;
typedef struct CUmod_st *kl__cu_module;
typedef struct CUfunc_st *kl__cu_function;

/* cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and
 * CUlaunchAttribute, CUDA 12.0 and newer): an attribute is its id, padding
 * to 8 bytes, and a 64-byte value union. */
typedef struct kl__cu_launch_attribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        unsigned long long align; /* cuda.h's union holds a pointer: 8-byte alignment */
        int cooperative;
        int programmatic_stream_serialization_allowed;
        struct {
            unsigned int x, y, z;
        } cluster_dim;
    } value;
} kl__cu_launch_attribute;
typedef struct kl__cu_launch_config {
    unsigned int grid_x, grid_y, grid_z;
    unsigned int block_x, block_y, block_z;
    unsigned int shared_bytes;
    kl_stream stream;
    kl__cu_launch_attribute *attrs;
    unsigned int num_attrs;
} kl__cu_launch_config;

/* Driver entry points, resolved by their exported (versioned) names. */
typedef struct kl__cuda_api {
    kl__cu_result (*init)(unsigned int flags);
    kl__cu_result (*device_get_count)(int *count);
    kl__cu_result (*device_get)(kl__cu_device *dev, int ordinal);
    kl__cu_result (*device_get_name)(char *name, int len, kl__cu_device dev);
    kl__cu_result (*device_get_attribute)(int *value, int attrib, kl__cu_device dev);
    kl__cu_result (*primary_ctx_retain)(kl__cu_context *ctx, kl__cu_device dev);
    kl__cu_result (*primary_ctx_release)(kl__cu_device dev);
    kl__cu_result (*ctx_get_current)(kl__cu_context *ctx);
    kl__cu_result (*ctx_set_current)(kl__cu_context ctx);
    kl__cu_result (*ctx_push_current)(kl__cu_context ctx);
    kl__cu_result (*ctx_pop_current)(kl__cu_context *ctx);
    kl__cu_result (*ctx_synchronize)(void);
    kl__cu_result (*module_load_data)(kl__cu_module *mod, const void *image);
    kl__cu_result (*module_unload)(kl__cu_module mod);
    kl__cu_result (*module_get_global)(kl__cu_deviceptr *dptr, size_t *bytes, kl__cu_module mod, const char *name);
    kl__cu_result (*module_get_function)(kl__cu_function *fn, kl__cu_module mod, const char *name);
    kl__cu_result (*func_get_attribute)(int *value, int attrib, kl__cu_function fn);
    kl__cu_result (*func_set_attribute)(kl__cu_function fn, int attrib, int value);
    /* Optional (drivers of CUDA 12.4 and newer); NULL skips the layout check.
     * Resolved through cuGetProcAddress where the driver has it, else dlsym. */
    kl__cu_result (*func_get_param_info)(kl__cu_function fn, size_t index, size_t *offset, size_t *size);
    /* Optional (CUDA 12.0+): launches with attributes; NULL refuses kernels
     * that declare launch_attributes at lookup. */
    kl__cu_result (*launch_kernel_ex)(const kl__cu_launch_config *config, kl__cu_function fn, void **params,
                                      void **extra);
    /* Optional (CUDA 12.0+). */
    kl__cu_result (*get_proc_address)(const char *symbol, void **pfn, int cuda_version, unsigned long long flags,
                                      int *symbol_status);
    /* Optional (CUDA 12.0+): tensor maps (klaunch/tensor_map.h); NULL makes
     * their builders fail with KL_ERROR_UNSUPPORTED. The enums are int. */
    kl__cu_result (*tensor_map_encode_tiled)(void *map, int dtype, unsigned int rank, void *address,
                                             const unsigned long long *extents, const unsigned long long *strides,
                                             const unsigned int *box, const unsigned int *element_strides,
                                             int interleave, int swizzle, int l2_promotion, int oob_fill);
    /* Optional: the capture guard (kl_cuda_backend_guard_stream). */
    kl__cu_result (*stream_is_capturing)(kl_stream stream, int *status);
    kl__cu_result (*launch_kernel)(kl__cu_function fn, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                                   unsigned int block_x, unsigned int block_y, unsigned int block_z,
                                   unsigned int shared_bytes, kl_stream stream, void **params, void **extra);
    kl__cu_result (*mem_alloc)(kl__cu_deviceptr *dptr, size_t bytes);
    kl__cu_result (*mem_free)(kl__cu_deviceptr dptr);
    kl__cu_result (*memcpy_htod)(kl__cu_deviceptr dst, const void *src, size_t bytes);
    kl__cu_result (*memcpy_dtoh)(void *dst, kl__cu_deviceptr src, size_t bytes);
    kl__cu_result (*memset_d8)(kl__cu_deviceptr dst, unsigned char value, size_t count);
    kl__cu_result (*get_error_name)(kl__cu_result err, const char **str);
    kl__cu_result (*get_error_string)(kl__cu_result err, const char **str);
} kl__cuda_api;

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_DRIVER_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_CUDA_DRIVER_IMPLEMENTATION_DONE
#define KLAUNCH_CUDA_DRIVER_IMPLEMENTATION_DONE

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values from cuda.h (CUDA 13.0; stable since they were introduced). */
#define KL__CUDA_SUCCESS 0
#define KL__CUDA_ERROR_INVALID_VALUE 1
#define KL__CUDA_ERROR_OUT_OF_MEMORY 2
#define KL__CUDA_ERROR_NO_DEVICE 100
#define KL__CUDA_ERROR_INVALID_DEVICE 101
#define KL__CUDA_ERROR_INVALID_IMAGE 200
#define KL__CUDA_ERROR_INVALID_CONTEXT 201
#define KL__CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define KL__CUDA_ERROR_INVALID_PTX 218
#define KL__CUDA_ERROR_JIT_COMPILER_NOT_FOUND 221
#define KL__CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define KL__CUDA_ERROR_INVALID_SOURCE 300
#define KL__CUDA_ERROR_NOT_FOUND 500
#define KL__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define KL__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define KL__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define KL__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define KL__CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH 95
#define KL__CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 120
#define KL__CU_LAUNCH_ATTRIBUTE_COOPERATIVE 2
#define KL__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
#define KL__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define KL__CU_STREAM_CAPTURE_STATUS_NONE 0
#define KL__CU_STREAM_CAPTURE_STATUS_ACTIVE 1
#define KL__CU_GET_PROC_ADDRESS_DEFAULT 0
#define KL__CU_GET_PROC_ADDRESS_SUCCESS 0
#define KL__CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE 720
#define KL__FATBIN_MAGIC 0xBA55ED50u

/* Every entry point klaunch calls, by its exported (versioned) name; an
 * optional one may be missing (its pointer stays NULL). */
static const struct {
    const char *name;
    size_t offset;
    int optional;
} kl__cuda_symbols[] = {
    {"cuInit", offsetof(kl__cuda_api, init), 0},
    {"cuDeviceGetCount", offsetof(kl__cuda_api, device_get_count), 0},
    {"cuDeviceGet", offsetof(kl__cuda_api, device_get), 0},
    {"cuDeviceGetName", offsetof(kl__cuda_api, device_get_name), 0},
    {"cuDeviceGetAttribute", offsetof(kl__cuda_api, device_get_attribute), 0},
    {"cuDevicePrimaryCtxRetain", offsetof(kl__cuda_api, primary_ctx_retain), 0},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(kl__cuda_api, primary_ctx_release), 0},
    {"cuCtxGetCurrent", offsetof(kl__cuda_api, ctx_get_current), 0},
    {"cuCtxSetCurrent", offsetof(kl__cuda_api, ctx_set_current), 0},
    {"cuCtxPushCurrent_v2", offsetof(kl__cuda_api, ctx_push_current), 0},
    {"cuCtxPopCurrent_v2", offsetof(kl__cuda_api, ctx_pop_current), 0},
    {"cuCtxSynchronize", offsetof(kl__cuda_api, ctx_synchronize), 0},
    {"cuModuleLoadData", offsetof(kl__cuda_api, module_load_data), 0},
    {"cuModuleUnload", offsetof(kl__cuda_api, module_unload), 0},
    {"cuModuleGetGlobal_v2", offsetof(kl__cuda_api, module_get_global), 0},
    {"cuModuleGetFunction", offsetof(kl__cuda_api, module_get_function), 0},
    {"cuFuncGetAttribute", offsetof(kl__cuda_api, func_get_attribute), 0},
    {"cuFuncSetAttribute", offsetof(kl__cuda_api, func_set_attribute), 0},
    {"cuFuncGetParamInfo", offsetof(kl__cuda_api, func_get_param_info), 1},
    {"cuLaunchKernel", offsetof(kl__cuda_api, launch_kernel), 0},
    {"cuLaunchKernelEx", offsetof(kl__cuda_api, launch_kernel_ex), 1},
    {"cuGetProcAddress_v2", offsetof(kl__cuda_api, get_proc_address), 1},
    {"cuStreamIsCapturing", offsetof(kl__cuda_api, stream_is_capturing), 1},
    {"cuTensorMapEncodeTiled", offsetof(kl__cuda_api, tensor_map_encode_tiled), 1},
    {"cuMemAlloc_v2", offsetof(kl__cuda_api, mem_alloc), 0},
    {"cuMemFree_v2", offsetof(kl__cuda_api, mem_free), 0},
    {"cuMemcpyHtoD_v2", offsetof(kl__cuda_api, memcpy_htod), 0},
    {"cuMemcpyDtoH_v2", offsetof(kl__cuda_api, memcpy_dtoh), 0},
    {"cuMemsetD8_v2", offsetof(kl__cuda_api, memset_d8), 0},
    {"cuGetErrorName", offsetof(kl__cuda_api, get_error_name), 0},
    {"cuGetErrorString", offsetof(kl__cuda_api, get_error_string), 0},
};

/* dlopen("libcuda.so.1") and every entry point of kl__cuda_symbols into
 * *api. On failure nothing stays loaded and *lib is NULL. */
static kl_status kl__cuda_driver_open(void **lib, kl__cuda_api *api) {
    size_t i;
    void *handle;
    *lib = NULL;
    memset(api, 0, sizeof *api);
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        return kl__fail(KL_ERROR_NO_DRIVER, "kl_cuda_backend_init: cannot load libcuda.so.1 (%s); is the NVIDIA "
                                            "driver installed?",
                        why ? why : "no reason given");
    }
    for (i = 0; i < sizeof kl__cuda_symbols / sizeof kl__cuda_symbols[0]; i++) {
        void *sym = dlsym(handle, kl__cuda_symbols[i].name);
        if (sym == NULL && !kl__cuda_symbols[i].optional) {
            dlclose(handle);
            memset(api, 0, sizeof *api);
            return kl__fail(KL_ERROR_NO_DRIVER, "kl_cuda_backend_init: libcuda.so.1 lacks %s (driver too old?)",
                            kl__cuda_symbols[i].name);
        }
        /* memcpy: ISO C has no conversion from void* to a function pointer. */
        memcpy((char *)api + kl__cuda_symbols[i].offset, &sym, sizeof sym);
    }
    *lib = handle;
    return KL_SUCCESS;
}

/* After cuInit: cuGetProcAddress gives the entry point of the ABI a CUDA
 * version names (issue 3); dlsym of the exported name stays the fallback. */
static void kl__cuda_driver_resolve_versioned(kl__cuda_api *api) {
    static const struct {
        const char *name;
        int version;
        size_t offset;
    } procs[] = {
        {"cuFuncGetParamInfo", 12040, offsetof(kl__cuda_api, func_get_param_info)},
        {"cuLaunchKernelEx", 12000, offsetof(kl__cuda_api, launch_kernel_ex)},
        {"cuTensorMapEncodeTiled", 12000, offsetof(kl__cuda_api, tensor_map_encode_tiled)},
    };
    size_t i;
    if (api->get_proc_address == NULL) return;
    for (i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        void *fn = NULL;
        int found = -1;
        if (api->get_proc_address(procs[i].name, &fn, procs[i].version, KL__CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
                KL__CUDA_SUCCESS &&
            found == KL__CU_GET_PROC_ADDRESS_SUCCESS && fn != NULL)
            memcpy((char *)api + procs[i].offset, &fn, sizeof fn);
    }
}

/* "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)" */
static void kl__cuda_error_text(const kl__cuda_api *api, kl__cu_result r, char *buf, size_t cap) {
    const char *name = NULL, *desc = NULL;
    if (api->get_error_name) api->get_error_name(r, &name);
    if (api->get_error_string) api->get_error_string(r, &desc);
    if (name)
        snprintf(buf, cap, "%s (%s)", name, desc ? desc : "no description");
    else if (r == 34) /* the stub library answers no names */
        snprintf(buf, cap, "CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is the toolkit's stub, not a driver)");
    else
        snprintf(buf, cap, "CUresult %d", r);
}

/* Out of memory and kernel faults (sticky errors that later calls return)
 * have statuses of their own; anything else is `otherwise`. */
static kl_status kl__cuda_status(kl__cu_result r, kl_status otherwise) {
    switch (r) {
    case KL__CUDA_ERROR_OUT_OF_MEMORY:
        return KL_ERROR_OUT_OF_MEMORY;
    case 700: /* ILLEGAL_ADDRESS */
    case 701: /* LAUNCH_OUT_OF_RESOURCES */
    case 702: /* LAUNCH_TIMEOUT */
    case 710: /* ASSERT */
    case 714: /* HARDWARE_STACK_ERROR */
    case 715: /* ILLEGAL_INSTRUCTION */
    case 716: /* MISALIGNED_ADDRESS */
    case 717: /* INVALID_ADDRESS_SPACE */
    case 718: /* INVALID_PC */
    case 719: /* LAUNCH_FAILED */
        return KL_ERROR_LAUNCH_FAILED;
    default:
        return otherwise;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CUDA_DRIVER_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
