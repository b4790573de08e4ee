/* record_backend.h - a klaunch backend that keeps every launch in memory.
 *
 * For tests and dry runs on machines without a GPU: a launcher's checks run
 * exactly as with the CUDA backend, and what would have reached
 * cuLaunchKernel (kernel, grid, block, shared memory, stream and the packed
 * parameter buffer) lands in a caller-owned array of kl_record.
 *
 * USE
 *   In the one file that defines KLAUNCH_IMPLEMENTATION, include this header
 *   after klaunch.h (or alone: it includes klaunch.h).
 *
 *       kl_record recs[16];
 *       kl_record_backend rb;
 *       kl_module mod;
 *       kl_kernel k;
 *       kl_record_backend_init(&rb, recs, 16);
 *       kl_record_backend_load_variant(&rb, kl_mla_prefill_variant_info, "deepseek_v4_flash", &mod);
 *       kl_mla_q_rope_extract_batched_get(&k, &mod);
 *       kl_mla_q_rope_extract_batched(&k, q, out, 7, 16, 192, 128, 64, 3072, NULL);
 *       // rb.count == 1, recs[0].grid[0] == 28 (ceil_div(7*16*64, 256)),
 *       // recs[0].args holds q, out and the six u32 values
 *
 * MODULE IMAGES
 *   The "image" is the module metadata text a fatbin carries in
 *   kl__module_info (docs/DESIGN.md), so any family and variant can be
 *   loaded without compiling a kernel: each generated header lists its
 *   variants' texts (kl_<family>_variant_info[]), which
 *   kl_record_backend_load_variant loads by name; a test may also write
 *   its own (a variant of its own name, or a subset of the constants). Trailing NUL bytes are allowed (pass
 *   sizeof a string literal); a NUL inside the text is KL_ERROR_INVALID_IMAGE
 *   (that is a binary fatbin, not metadata).
 *
 * OVERRIDABLE MACROS
 *   KL_RECORD_ARG_BYTES  parameter buffer bytes kept per launch (default 512)
 *   KL_RECORD_EXTENTS    declared extents kept per launch (default 16)
 *
 * ERROR REPORTING
 *   As klaunch.h: a status, and the message in kl_last_error_message().
 *   launch never allocates; a full array is KL_ERROR_CAPACITY.
 */
#ifndef KLAUNCH_RECORD_BACKEND_H
#define KLAUNCH_RECORD_BACKEND_H

#include "klaunch/klaunch.h"
#include "klaunch/tensor_map.h"

#ifndef KL_RECORD_ARG_BYTES
#define KL_RECORD_ARG_BYTES 512
#endif
#ifndef KL_RECORD_EXTENTS
#define KL_RECORD_EXTENTS 16
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One launch as cuLaunchKernel would have received it. */
typedef struct kl_record {
    const kl_kernel_desc *desc; /* the launcher's descriptor */
    const char *entry;          /* desc->entry */
    uint32_t grid[3], block[3], shared_bytes;
    kl_stream stream;
    /* Launch attributes as cuLaunchKernelEx would have received them:
     * cluster {0, 0, 0} and flags 0 for a plain cuLaunchKernel launch. */
    uint32_t cluster[3];
    uint32_t attribute_flags; /* KL_LAUNCH_* */
    uint32_t arg_bytes;                      /* desc->param_bytes */
    unsigned char args[KL_RECORD_ARG_BYTES]; /* argument i's bytes at desc->params[i].offset, padding zero; bytes past arg_bytes unspecified */
    /* The launch's declared extents in elements, extents[i] for
     * desc->extents[i] (KL_EXTENT_UNKNOWN where data bounds it);
     * kl_record_extent() finds one by parameter name. */
    uint32_t num_extents;
    uint64_t extents[KL_RECORD_EXTENTS];
} kl_record;

typedef struct kl_record_backend {
    kl_backend base; /* first member: pass &rb.base where a kl_backend* is wanted */
    kl_record *records;
    size_t capacity;
    size_t count;
    uint32_t max_threads;        /* reported as every function's own max threads per block (default 1024) */
    uint32_t max_dynamic_shared; /* reported dynamic shared memory limit (default 48 KiB) */
    const char *missing_entry;   /* function_get of this entry fails with KL_ERROR_KERNEL_NOT_FOUND (default NULL) */
    kl_status launch_status;     /* launch returns this when not KL_SUCCESS, recording nothing (default KL_SUCCESS) */
    const char *device_arch;     /* the device architecture messages name, e.g. "sm_80" (default NULL: "none") */
    /* Tensor maps are encoded in klaunch's reference encoding
     * (kl_tensor_map_reference_encode), so a recorded launch's argument
     * bytes show the map's fields. */
    size_t tensor_maps_encoded; /* successful encodes (counted, default 0) */
    kl_status tensor_map_status; /* encode returns this when not KL_SUCCESS, encoding nothing (default KL_SUCCESS) */
} kl_record_backend;

/* The recorded extent of pointer parameter `param` (elements, or
 * KL_EXTENT_UNKNOWN) in *out: 1, or 0 when its spec declares none. */
int kl_record_extent(const kl_record *r, const char *param, uint64_t *out);
/* Records go to storage[0 .. capacity); the defaults above are set. */
void kl_record_backend_init(kl_record_backend *rb, kl_record *storage, size_t capacity);
/* Forgets the records (count = 0); settings are kept. */
void kl_record_backend_clear(kl_record_backend *rb);
/* Loads variant `name` of a generated kl_<family>_variant_info[] table (its
 * module metadata) into out: no text to write by hand.
 *     kl_record_backend_load_variant(&rb, kl_paged_decode_variant_info, "gqa8_d128", &mod);
 * A name the table lacks is KL_ERROR_INVALID_ARGUMENT naming the ones it has. */
kl_status kl_record_backend_load_variant(kl_record_backend *rb, const kl_variant_info *variants, const char *name,
                                         kl_module *out);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_RECORD_BACKEND_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_RECORD_BACKEND_IMPLEMENTATION_DONE
#define KLAUNCH_RECORD_BACKEND_IMPLEMENTATION_DONE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static kl_status kl__record_module_load(kl_backend *be, const void *image, size_t size, void **handle) {
    const char *text = (const char *)image;
    const char *nul = (const char *)memchr(text, '\0', size);
    size_t len = nul ? (size_t)(nul - text) : size;
    size_t i;
    char *copy;
    (void)be;
    for (i = len; i < size; i++) {
        if (text[i] != '\0')
            return kl__fail(KL_ERROR_INVALID_IMAGE,
                            "record backend: the image has a NUL byte at offset %lu of %lu; it takes the module "
                            "metadata text, not a fatbin",
                            (unsigned long)len, (unsigned long)size);
    }
    copy = (char *)malloc(len + 1);
    if (copy == NULL)
        return kl__fail(KL_ERROR_OUT_OF_MEMORY, "record backend: %lu bytes for a module", (unsigned long)len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    *handle = copy;
    return KL_SUCCESS;
}

static void kl__record_module_unload(kl_backend *be, void *handle) {
    (void)be;
    free(handle);
}

static kl_status kl__record_module_info(kl_backend *be, void *handle, char *buf, size_t cap) {
    size_t len = strlen((const char *)handle);
    (void)be;
    if (len >= cap)
        return kl__fail(KL_ERROR_MODULE_INFO, "record backend: module metadata of %lu bytes exceeds %lu",
                        (unsigned long)len, (unsigned long)(cap ? cap - 1 : 0));
    memcpy(buf, handle, len + 1);
    return KL_SUCCESS;
}

static kl_status kl__record_function_get(kl_backend *be, void *module_handle, const kl_kernel_desc *desc, void **fn,
                                         kl_func_attrs *attrs) {
    const kl_record_backend *rb = (const kl_record_backend *)be;
    (void)module_handle;
    if (rb->missing_entry != NULL && strcmp(rb->missing_entry, desc->entry) == 0)
        return kl__fail(KL_ERROR_KERNEL_NOT_FOUND, "kl_%s_get: the module has no kernel '%s' (record backend)",
                        desc->launcher, desc->entry);
    /* Any non-NULL handle will do; the descriptor is the natural one. */
    *fn = (void *)(uintptr_t)desc;
    attrs->max_threads = rb->max_threads;
    attrs->max_dynamic_shared = rb->max_dynamic_shared;
    return KL_SUCCESS;
}

static kl_status kl__record_launch(const kl_backend *be, const kl_launch *launch) {
    /* The ops table takes a const backend (launching does not change the
     * CUDA backend); recording is this backend's one mutation. */
    kl_record_backend *rb = (kl_record_backend *)(uintptr_t)be;
    const kl_kernel_desc *desc = launch->kernel->desc;
    kl_record *r;
    uint32_t i;
    if (rb->launch_status != KL_SUCCESS)
        return kl__fail(rb->launch_status, "kl_%s: launch failed as the record backend was told to (%s)",
                        desc->launcher, kl_status_name(rb->launch_status));
    if (rb->count >= rb->capacity)
        return kl__fail(KL_ERROR_CAPACITY, "kl_%s: the record backend is full (%lu of %lu records)", desc->launcher,
                        (unsigned long)rb->count, (unsigned long)rb->capacity);
    if (desc->param_bytes > KL_RECORD_ARG_BYTES)
        return kl__fail(KL_ERROR_CAPACITY, "kl_%s: %u parameter bytes exceed KL_RECORD_ARG_BYTES (%u)",
                        desc->launcher, (unsigned)desc->param_bytes, (unsigned)KL_RECORD_ARG_BYTES);
    if (desc->num_extents > KL_RECORD_EXTENTS)
        return kl__fail(KL_ERROR_CAPACITY, "kl_%s: %u declared extents exceed KL_RECORD_EXTENTS (%u)", desc->launcher,
                        (unsigned)desc->num_extents, (unsigned)KL_RECORD_EXTENTS);
    /* Check the whole layout before writing, so a refused launch leaves no
     * half-written record behind. */
    for (i = 0; i < desc->num_params; i++) {
        const kl_param_info *p = &desc->params[i];
        if (p->offset > desc->param_bytes || p->size > desc->param_bytes - p->offset)
            return kl__fail(KL_ERROR_INVALID_ARGUMENT,
                            "kl_%s: parameter %s (offset %u, %u bytes) lies outside the %u-byte parameter buffer",
                            desc->launcher, p->name, (unsigned)p->offset, (unsigned)p->size,
                            (unsigned)desc->param_bytes);
    }
    r = &rb->records[rb->count];
    /* Zero only the parameter buffer's used bytes (its padding must read as
     * zero); bytes past arg_bytes mean nothing, and clearing the whole
     * record made up most of this backend's cost per launch. */
    memset(r->args, 0, desc->param_bytes);
    r->desc = desc;
    r->entry = desc->entry;
    for (i = 0; i < 3; i++) {
        r->grid[i] = launch->grid[i];
        r->block[i] = launch->block[i];
    }
    r->shared_bytes = launch->shared_bytes;
    r->stream = launch->stream;
    for (i = 0; i < 3; i++) r->cluster[i] = launch->attributes ? launch->attributes->cluster[i] : 0u;
    r->attribute_flags = launch->attributes ? launch->attributes->flags : 0u;
    r->arg_bytes = desc->param_bytes;
    for (i = 0; i < desc->num_params; i++)
        memcpy(r->args + desc->params[i].offset, launch->args[i], desc->params[i].size);
    r->num_extents = launch->extents != NULL ? desc->num_extents : 0u;
    for (i = 0; i < r->num_extents; i++) r->extents[i] = launch->extents[i];
    rb->count++;
    return KL_SUCCESS;
}

static void kl__record_device_arch(const kl_backend *be, char *buf, size_t cap) {
    const kl_record_backend *rb = (const kl_record_backend *)be;
    snprintf(buf, cap, "%s", rb->device_arch ? rb->device_arch : "none (record backend)");
}

static kl_status kl__record_tensor_map_encode(const kl_backend *be, const kl_tensor_map_request *request,
                                              void *opaque) {
    kl_record_backend *rb = (kl_record_backend *)(uintptr_t)be;
    if (rb->tensor_map_status != KL_SUCCESS)
        return kl__fail(rb->tensor_map_status, "record backend: tensor map encode refused (tensor_map_status %s)",
                        kl_status_name(rb->tensor_map_status));
    kl_tensor_map_reference_encode(request, opaque);
    rb->tensor_maps_encoded++;
    return KL_SUCCESS;
}

static const kl_backend_ops kl__record_ops = {
    "record",
    kl__record_module_load,
    kl__record_module_unload,
    kl__record_module_info,
    kl__record_function_get,
    kl__record_launch,
    kl__record_device_arch,
    kl__record_tensor_map_encode,
};

void kl_record_backend_init(kl_record_backend *rb, kl_record *storage, size_t capacity) {
    memset(rb, 0, sizeof *rb);
    rb->base.ops = &kl__record_ops;
    rb->records = storage;
    rb->capacity = storage ? capacity : 0;
    rb->count = 0;
    rb->max_threads = KL__THREADS_MAX;
    rb->max_dynamic_shared = 48u * 1024u;
    rb->missing_entry = NULL;
    rb->launch_status = KL_SUCCESS;
    rb->tensor_maps_encoded = 0;
    rb->tensor_map_status = KL_SUCCESS;
}

void kl_record_backend_clear(kl_record_backend *rb) { rb->count = 0; }

int kl_record_extent(const kl_record *r, const char *param, uint64_t *out) {
    uint32_t i;
    if (r == NULL || r->desc == NULL || param == NULL) return 0;
    for (i = 0; i < r->num_extents && i < r->desc->num_extents; i++) {
        if (strcmp(r->desc->extents[i].param, param) == 0) {
            if (out != NULL) *out = r->extents[i];
            return 1;
        }
    }
    return 0;
}

static const char *kl__record_variant_list(const kl_variant_info *variants, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (; variants->name != NULL && n + 1 < cap; variants++) {
        int w = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", variants->name);
        if (w < 0) break;
        n += (size_t)w;
    }
    return buf;
}

kl_status kl_record_backend_load_variant(kl_record_backend *rb, const kl_variant_info *variants, const char *name,
                                         kl_module *out) {
    const kl_variant_info *v;
    char list[256];
    if (rb == NULL || variants == NULL || name == NULL || out == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_record_backend_load_variant: NULL argument");
    for (v = variants; v->name != NULL; v++) {
        if (strcmp(v->name, name) == 0) return kl_module_load(&rb->base, v->module_info, strlen(v->module_info), out);
    }
    return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_record_backend_load_variant: no variant '%s' in the table (%s)",
                    name, kl__record_variant_list(variants, list, sizeof list));
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_RECORD_BACKEND_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
