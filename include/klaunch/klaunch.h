/* klaunch.h - the hand-written runtime under klaunch's generated launchers.
 *
 * USE
 *   In exactly one C or C++ file of your program:
 *       #define KLAUNCH_IMPLEMENTATION
 *       #include "klaunch/klaunch.h"
 *   Everywhere else include the generated header of a kernel family
 *   (e.g. "klaunch/paged_decode.h"); it includes this file.
 *
 *       kl_cuda_backend cuda;                        // klaunch/cuda_backend.h
 *       kl_module mod;
 *       kl_kernel k;
 *       if (kl_cuda_backend_init(&cuda, 0) != KL_SUCCESS ||
 *           kl_module_load_file(&cuda.base, "paged_decode_gqa8_d128.fatbin", &mod) != KL_SUCCESS ||
 *           kl_paged_decode_attn_bf16_gqa_get(&k, &mod) != KL_SUCCESS) {
 *           fprintf(stderr, "%s\n", kl_last_error_message());
 *           return 1;
 *       }
 *       kl_status st = kl_paged_decode_attn_bf16_gqa(&k, q, kc, vc, out, tables, lens,
 *           max_blocks, num_seqs, 32, 4, 128, 16, 0.088f, 4096, 0, stream);
 *
 * OVERRIDABLE MACROS (define before the first include)
 *   KL_MAX_CONSTS        compile-time constants a module may carry (default 8)
 *   KL_MODULE_INFO_BYTES size of the metadata text read from a module (4096)
 *   KL_MODULE_FILE_MAX_BYTES largest file kl_module_load_file reads (1 GiB)
 *
 * ERROR REPORTING
 *   Every function returns a kl_status (see KL_STATUS_LIST below) and never
 *   exits, aborts or launches something it refused. On failure the full
 *   message (kernel, parameter, value, spec file:line) is kept per thread:
 *   kl_last_error_message(). kl_set_error_callback() also receives it: the
 *   callback and its user pointer are swapped as one pair, safely while other
 *   threads fail (a failure that began before the swap may still call the
 *   previous pair, so keep its user data alive until no such failure can be
 *   running). On a compiler without GNU or C11 atomics, set it before
 *   starting threads.
 *
 * BACKENDS
 *   Launchers go through a kl_backend: klaunch/cuda_backend.h (the CUDA
 *   driver, loaded with dlopen) or klaunch/record_backend.h (keeps every
 *   launch in memory, for tests and dry runs).
 */
#ifndef KLAUNCH_KLAUNCH_H
#define KLAUNCH_KLAUNCH_H

#include <stddef.h>
#include <stdint.h>

/* Generated headers refuse to compile against another runtime ABI. */
#define KL_RUNTIME_ABI 4

#ifndef KL_MAX_CONSTS
#define KL_MAX_CONSTS 8
#endif
#ifndef KL_MODULE_INFO_BYTES
#define KL_MODULE_INFO_BYTES 4096
#endif
/* kl_module_load_file reads at most this many bytes (a file past it is
 * KL_ERROR_FILE_IO, read not at all): klaunch's fatbins are a few MB. */
#ifndef KL_MODULE_FILE_MAX_BYTES
#define KL_MODULE_FILE_MAX_BYTES (1024ull * 1024u * 1024u)
#endif
/* Name of the device global each klaunch fatbin carries its metadata in. */
#define KL_MODULE_INFO_SYMBOL "kl__module_info"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statuses: the one list ------------------------------------------- */
#define KL_STATUS_LIST(X)                                                                   \
    X(KL_SUCCESS, "success")                                                                \
    X(KL_ERROR_INVALID_ARGUMENT, "invalid argument to a klaunch function")                  \
    X(KL_ERROR_NULL_POINTER, "a device pointer argument is NULL")                           \
    X(KL_ERROR_OVERFLOW, "a launch value overflows its integer width")                      \
    X(KL_ERROR_DIVISION_BY_ZERO, "a launch expression divides by zero")                     \
    X(KL_ERROR_GRID_LIMIT, "a grid dimension exceeds the CUDA limit")                       \
    X(KL_ERROR_BLOCK_LIMIT, "the block exceeds the CUDA or kernel thread limit")            \
    X(KL_ERROR_SHARED_MEMORY_LIMIT, "dynamic shared memory exceeds the kernel's limit")     \
    X(KL_ERROR_PRECONDITION, "a launcher precondition does not hold")                       \
    X(KL_ERROR_VARIANT_MISMATCH, "the loaded kernel variant does not fit these arguments")  \
    X(KL_ERROR_KERNEL_NOT_LOADED, "the kernel handle was not loaded")                       \
    X(KL_ERROR_KERNEL_NOT_FOUND, "the module has no kernel with that entry symbol")         \
    X(KL_ERROR_FAMILY_MISMATCH, "the module belongs to another kernel family")              \
    X(KL_ERROR_MODULE_INFO, "the module has no or malformed klaunch metadata")              \
    X(KL_ERROR_INVALID_IMAGE, "the image is not a loadable kernel image")                   \
    X(KL_ERROR_FILE_IO, "a file could not be read")                                         \
    X(KL_ERROR_NO_DRIVER, "the CUDA driver library could not be loaded")                    \
    X(KL_ERROR_NO_DEVICE, "no such CUDA device")                                            \
    X(KL_ERROR_DRIVER, "a CUDA driver call failed")                                         \
    X(KL_ERROR_LAUNCH_FAILED, "the kernel launch failed")                                   \
    X(KL_ERROR_OUT_OF_MEMORY, "out of memory")                                              \
    X(KL_ERROR_CAPACITY, "the recording backend is full")                                   \
    X(KL_ERROR_LAYOUT_MISMATCH, "the compiled kernel's parameters differ from its spec")    \
    X(KL_ERROR_STALE_FATBIN, "the fatbin was built from another version of the spec")       \
    X(KL_ERROR_UNSUPPORTED, "the driver or device cannot do what was asked")                \
    X(KL_ERROR_CAPTURE_ACTIVE, "refused during a stream capture; load before capturing")                 \
    X(KL_ERROR_TENSOR_MAP, "a tensor map cannot be encoded or does not fit the kernel")      \
    X(KL_ERROR_CHOICE_TABLE, "a choice table (klaunch/choose.h) is malformed")

typedef enum kl_status {
#define KL__STATUS_ENUM(name, text) name,
    KL_STATUS_LIST(KL__STATUS_ENUM)
#undef KL__STATUS_ENUM
    KL_STATUS_COUNT
} kl_status;

const char *kl_status_name(kl_status status);   /* "KL_ERROR_GRID_LIMIT" */
const char *kl_status_string(kl_status status); /* one-line description */
/* The full message of the last failure on the calling thread ("" if none). */
const char *kl_last_error_message(void);
kl_status kl_last_error(void);
typedef void (*kl_error_callback)(kl_status status, const char *message, void *user);
/* Called on every failure, on the failing thread, after the message is kept. */
void kl_set_error_callback(kl_error_callback callback, void *user);

/* ---- argument types ---------------------------------------------------- */
/* CUstream and cudaStream_t convert to this without a cast. */
typedef struct CUstream_st *kl_stream;
/* Element types of typed device pointers; only their size matters here. */
typedef struct kl_bf16 { uint16_t bits; } kl_bf16;
typedef struct kl_f16 { uint16_t bits; } kl_f16;
typedef struct kl_fp8_e4m3 { uint8_t bits; } kl_fp8_e4m3;

typedef enum kl_param_kind {
    KL_PARAM_PTR = 0, /* 8-byte device pointer */
    KL_PARAM_U32 = 1,
    KL_PARAM_U64 = 2,
    KL_PARAM_F32 = 3,
    KL_PARAM_I32 = 4,
    KL_PARAM_BOOL = 5, /* passed to the kernel as a u32 0 or 1 */
    /* 128 bytes by value, 128-byte aligned: a CUtensorMap (klaunch/tensor_map.h).
     * Its offset is for a parameter buffer that starts 128-byte aligned; the
     * driver places it at the target's own (docs/ARG_ORDER.md). */
    KL_PARAM_TENSOR_MAP = 6
} kl_param_kind;

/* One kernel argument as the compiled kernel sees it. */
typedef struct kl_param_info {
    const char *name;
    kl_param_kind kind;
    uint32_t offset; /* byte offset in the kernel's parameter buffer */
    uint32_t size;   /* bytes */
} kl_param_info;

/* One checked expression of a launcher (grid, block, shared memory,
 * precondition), kept for error messages. */
typedef struct kl_check_info {
    const char *what;    /* "grid.x", "block.x", "shared_bytes", "precondition" */
    const char *expr;    /* the expression as written in the spec */
    const char *message; /* the spec's message for a precondition, or NULL */
    uint32_t line, col;  /* position of the expression in the spec */
    uint32_t num_args;   /* launcher arguments the expression reads ... */
    const char *const *arg_names; /* ... their names (values come at failure) */
} kl_check_info;

/* Launch attributes a spec declares (`launch_attributes`). A launch whose
 * kl_launch.attributes is non-NULL goes through cuLaunchKernelEx; the CUDA
 * backend refuses, at kl_X_get, a kernel whose attributes the driver or the
 * device cannot honour (docs/LAUNCH.md). */
#define KL_LAUNCH_PROGRAMMATIC_SERIALIZATION 1u /* programmatic dependent launch (PDL) */
#define KL_LAUNCH_COOPERATIVE 2u                /* grid-wide synchronisation */
typedef struct kl_launch_attributes {
    uint32_t cluster[3]; /* thread-block cluster, blocks per dimension; {0, 0, 0}: none */
    uint32_t flags;      /* KL_LAUNCH_* */
    uint32_t line, col;  /* position of launch_attributes in the spec */
} kl_launch_attributes;

/* A pointer parameter's extent (the spec's `extent`, docs/DESIGN.md): the
 * elements the kernel may touch through it, counted from the pointer. The
 * launcher computes each for the launch's scalars (kl_launch.extents); an
 * extent that data the host does not see bounds (a paged cache addressed
 * through its block table) is KL_EXTENT_UNKNOWN, and `unknown` says what
 * bounds it. */
#define KL_EXTENT_UNKNOWN UINT64_MAX
typedef struct kl_extent_info {
    const char *param;   /* the pointer parameter's name */
    uint32_t arg;        /* its index in desc->params (pointers are kernel arguments) */
    uint32_t elem_bytes; /* bytes of one element (void and u8: 1) */
    uint32_t check;      /* its entry in desc->checks (expression, position), or UINT32_MAX when unknown */
    const char *unknown; /* for an unknown extent, what bounds it; NULL otherwise */
} kl_extent_info;

/* Everything the generator knows about one launcher. */
typedef struct kl_kernel_desc {
    const char *launcher;  /* C name without the kl_ prefix */
    const char *entry;     /* kernel entry symbol in the fatbin */
    const char *family;    /* spec family; must match the module's */
    const char *spec_file; /* e.g. "specs/paged_decode.yaml" */
    uint32_t spec_line;
    const char *spec_hash; /* hash of the spec file the header came from */
    const kl_param_info *params; /* kernel arguments, in order */
    uint32_t num_params;
    uint32_t param_bytes; /* total size of the kernel's parameter buffer */
    const kl_check_info *checks;
    uint32_t num_checks;
    const char *const *const_names; /* family constants the launcher reads */
    uint32_t num_consts;
    uint32_t max_dynamic_shared; /* opt-in above the default, 0 for none */
    const kl_launch_attributes *attributes; /* NULL: plain launches */
    /* The one target whose machine code the kernel needs ("sm_90a" for
     * wgmma), or NULL: kl_kernel_get refuses a module whose loaded image
     * was compiled for another (its metadata's cuda_arch line). */
    const char *arch;
    /* The declared extents of its pointer parameters, in parameter order
     * (those whose spec gives `extent`). */
    const kl_extent_info *extents;
    uint32_t num_extents;
} kl_kernel_desc;

/* ---- modules, kernels, backends --------------------------------------- */
struct kl_backend;
struct kl_tensor_map_request;

typedef struct kl_module {
    struct kl_backend *backend;
    void *handle; /* backend's module handle */
    char family[64];
    char variant[64];
    char spec_hash[80];
    char source_hash[80];
    char arch[16]; /* "sm_90a": the target of the image the backend loaded; "" if the metadata has no cuda_arch */
    uint32_t num_consts;
    char const_names[KL_MAX_CONSTS][48];
    int64_t const_values[KL_MAX_CONSTS];
    uint32_t magic;
    uint64_t load_id; /* unique per successful kl_module_load in the process; 0 when unloaded */
} kl_module;

typedef struct kl_kernel {
    const kl_kernel_desc *desc;
    const struct kl_backend *backend;
    void *fn;                    /* backend's function handle */
    uint32_t max_threads;        /* the function's own threads-per-block limit */
    uint32_t max_dynamic_shared; /* the function's dynamic shared memory limit */
    int64_t consts[KL_MAX_CONSTS]; /* desc->const_names[i] -> value in the loaded variant */
    /* The module the kernel was looked up in; it must stay a live object
     * (loaded or unloaded, not freed) while this handle may reach a launcher:
     * a launch after kl_module_unload is refused by comparing load ids. */
    const kl_module *module;
    uint32_t magic;
    uint64_t module_load_id; /* module->load_id at lookup */
    /* Another translation unit's copy of desc (kl__desc_same), remembered by
     * the launcher that found it equal, so the next launch from that file
     * compares one pointer. Launchers write it (atomically) through their
     * const pointer: keep kernel handles in objects that are not const. */
    const kl_kernel_desc *desc_alias;
} kl_kernel;

/* What a backend receives for one launch. */
typedef struct kl_launch {
    const kl_kernel *kernel;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes;
    kl_stream stream;
    void **args; /* one pointer per kernel argument, as cuLaunchKernel takes them */
    const kl_launch_attributes *attributes; /* the desc's; NULL: a plain launch */
    /* Elements each declared extent comes to for this launch, one per
     * kernel->desc->extents entry (KL_EXTENT_UNKNOWN where data bounds it);
     * NULL when the desc declares none. The emulator limits each pointer to
     * its extent; the recording backend keeps them. */
    const uint64_t *extents;
} kl_launch;

typedef struct kl_func_attrs {
    uint32_t max_threads;
    uint32_t max_dynamic_shared;
} kl_func_attrs;

typedef struct kl_backend_ops {
    const char *name;
    kl_status (*module_load)(struct kl_backend *be, const void *image, size_t size, void **handle);
    void (*module_unload)(struct kl_backend *be, void *handle);
    /* Copies the module's KL_MODULE_INFO_SYMBOL text (NUL-terminated) into buf. */
    kl_status (*module_info)(struct kl_backend *be, void *handle, char *buf, size_t cap);
    /* Looks up desc->entry, checks it against desc, fills attrs. */
    kl_status (*function_get)(struct kl_backend *be, void *module_handle, const kl_kernel_desc *desc,
                              void **fn, kl_func_attrs *attrs);
    kl_status (*launch)(const struct kl_backend *be, const kl_launch *launch);
    /* Optional (NULL: unknown): the device's architecture, e.g. "sm_90", for messages. */
    void (*device_arch)(const struct kl_backend *be, char *buf, size_t cap);
    /* Optional (NULL: this backend encodes no tensor maps, KL_ERROR_UNSUPPORTED):
     * encodes a request the builder has checked (klaunch/tensor_map.h) into
     * the 128 bytes at `opaque` (128-byte aligned) that the kernel will
     * receive. The CUDA backend calls cuTensorMapEncodeTiled. */
    kl_status (*tensor_map_encode)(const struct kl_backend *be, const struct kl_tensor_map_request *request,
                                   void *opaque);
} kl_backend_ops;

/* Concrete backends embed this as their first member. */
typedef struct kl_backend {
    const kl_backend_ops *ops;
} kl_backend;

/* Loads a fatbin (or, for the recording backend, a metadata text) and reads
 * its klaunch metadata: family, variant, hashes and constants. */
kl_status kl_module_load(kl_backend *backend, const void *image, size_t size, kl_module *out);
/* Reads a regular file of at most KL_MODULE_FILE_MAX_BYTES whole, then as
 * kl_module_load; anything else (a directory, a FIFO, a device) is refused
 * unread, naming the path (docs/LOADING.md). */
kl_status kl_module_load_file(kl_backend *backend, const char *path, kl_module *out);
/* From then on every kernel handle looked up in the module is refused
 * (KL_ERROR_KERNEL_NOT_LOADED), also after the same kl_module object is
 * loaded again: keep the object itself alive (not freed) while such a handle
 * may still reach a launcher. */
void kl_module_unload(kl_module *module);
/* Value of a module constant; returns 0 when the module does not define it. */
int kl_module_const(const kl_module *module, const char *name, int64_t *value);
/* Generated kl_<launcher>_get() functions call this. It refuses a module of
 * another family (KL_ERROR_FAMILY_MISMATCH), one built from another version
 * of the spec than desc's header (KL_ERROR_STALE_FATBIN: both spec hashes
 * are "sha256:<64 hex>" and differ), one lacking a constant the launcher
 * reads (KL_ERROR_VARIANT_MISMATCH), then asks the backend for the kernel
 * (the CUDA backend also compares its parameter layout with desc's). The
 * handle may be launched from any translation unit: each one that includes
 * a generated header has its own copy of kl_X_desc, and a launcher accepts
 * a copy that says the same (kl__desc_same). A desc with `arch` (e.g.
 * "sm_90a") needs the module's loaded image to be of that target
 * (KL_ERROR_UNSUPPORTED otherwise, naming the device's and the loaded
 * image's architecture). */
kl_status kl_kernel_get(kl_kernel *out, const kl_module *module, const kl_kernel_desc *desc);

/* One variant of a family as its spec defines it: the generated header's
 * kl_<family>_variant_info[] holds one per variant, then one whose name is
 * NULL. module_info is the metadata text that variant's fatbin carries
 * (source_hash "unknown"), e.g. for kl_record_backend_load_variant(). */
typedef struct kl_variant_info {
    const char *name;
    const char *module_info;
    uint32_t num_consts;
    const char *const *const_names;
    const int64_t *const_values;
} kl_variant_info;

/* kl_kernel_get(), and first, for a module of desc's family built from the
 * same spec (or whose hashes are not compared) whose variant has the name
 * of one of `variants` (the spec's): a constant the module defines that
 * this variant does not, or defines with another value, is
 * KL_ERROR_VARIANT_MISMATCH naming both. A constant the module lacks is
 * refused by kl_kernel_get where the launcher reads it; a variant of
 * another name (a test's own metadata) is checked only so. What every
 * generated kl_X_get() calls. */
kl_status kl_kernel_get_checked(kl_kernel *out, const kl_module *module, const kl_kernel_desc *desc,
                                const kl_variant_info *variants);

/* ---- private helpers used by generated code ---------------------------- */
#define KL__MODULE_MAGIC 0x6b6c6d64u /* "klmd" */
#define KL__KERNEL_MAGIC 0x6b6c6b6eu /* "klkn" */
#define KL__GRID_X_MAX 2147483647u
#define KL__GRID_YZ_MAX 65535u
#define KL__BLOCK_XY_MAX 1024u
#define KL__BLOCK_Z_MAX 64u
#define KL__THREADS_MAX 1024u

/* Each returns nonzero on overflow. */
#if defined(__GNUC__) || defined(__clang__)
static inline int kl__add(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int kl__mul(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_mul_overflow(a, b, r); }
#else
static inline int kl__add(uint64_t a, uint64_t b, uint64_t *r) { *r = a + b; return *r < a; }
static inline int kl__mul(uint64_t a, uint64_t b, uint64_t *r) {
    *r = a * b;
    return a != 0 && *r / a != b;
}
#endif
static inline int kl__sub(uint64_t a, uint64_t b, uint64_t *r) { *r = a - b; return b > a; }

/* Failure reporters: format the message, keep it, call the callback, return
 * the status. Only called on the error path. */
kl_status kl__fail_kernel(const kl_kernel_desc *desc, const kl_kernel *kernel);
/* `values` holds the check's arguments, in check->arg_names order; `value`
 * and `limit` are printed when `has_value` is nonzero. */
kl_status kl__fail_check(const kl_kernel_desc *desc, kl_status status, uint32_t check,
                         const uint64_t *values, int has_value, uint64_t value, uint64_t limit);
/* A tensor map's extent (`have`, the map's) against what the launch needs of
 * it (`need`, check `check`'s expression): at least it, or exactly it;
 * KL_ERROR_TENSOR_MAP naming the map, the dimension, both values and the
 * expression, or `err` (overflow) as kl__fail_check says it. */
kl_status kl__fail_tensor_map_extent(const kl_kernel_desc *desc, uint32_t check, const uint64_t *values, kl_status err,
                                     uint64_t have, uint64_t need, int exact);
kl_status kl__fail_null(const kl_kernel_desc *desc, const char *param);
kl_status kl__fail(kl_status status, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Launch expressions are unsigned 64-bit; these record the first overflow
 * or division by zero in *err (so one test follows a whole expression) and
 * never trap. The generated launchers evaluate every launch expression with
 * them. */
static inline uint64_t kl__x_add(uint64_t a, uint64_t b, kl_status *err) {
    uint64_t r;
    if (kl__add(a, b, &r) && *err == KL_SUCCESS) *err = KL_ERROR_OVERFLOW;
    return r;
}
static inline uint64_t kl__x_sub(uint64_t a, uint64_t b, kl_status *err) {
    uint64_t r;
    if (kl__sub(a, b, &r) && *err == KL_SUCCESS) *err = KL_ERROR_OVERFLOW;
    return r;
}
static inline uint64_t kl__x_mul(uint64_t a, uint64_t b, kl_status *err) {
    uint64_t r;
    if (kl__mul(a, b, &r) && *err == KL_SUCCESS) *err = KL_ERROR_OVERFLOW;
    return r;
}
static inline uint64_t kl__x_div(uint64_t a, uint64_t b, kl_status *err) {
    if (b == 0) {
        if (*err == KL_SUCCESS) *err = KL_ERROR_DIVISION_BY_ZERO;
        return 0;
    }
    return a / b;
}
static inline uint64_t kl__x_mod(uint64_t a, uint64_t b, kl_status *err) {
    if (b == 0) {
        if (*err == KL_SUCCESS) *err = KL_ERROR_DIVISION_BY_ZERO;
        return 0;
    }
    return a % b;
}
/* a / b rounded up, without the a + b - 1 that can overflow. */
static inline uint64_t kl__x_ceil_div(uint64_t a, uint64_t b, kl_status *err) {
    if (b == 0) {
        if (*err == KL_SUCCESS) *err = KL_ERROR_DIVISION_BY_ZERO;
        return 0;
    }
    return a / b + (a % b != 0);
}
static inline uint64_t kl__x_max(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t kl__x_min(uint64_t a, uint64_t b) { return a < b ? a : b; }
/* A signed value (i32 parameter, variant constant) read as unsigned. */
static inline uint64_t kl__x_signed(int64_t v, kl_status *err) {
    if (v < 0 && *err == KL_SUCCESS) *err = KL_ERROR_OVERFLOW;
    return (uint64_t)v;
}
/* Failure of a grid, block or shared-memory value: its expression's own
 * error, else the 32-bit field, else a zero block extent, else the limit. */
static inline kl_status kl__x_fail_value(const kl_kernel_desc *desc, uint32_t check, const uint64_t *values,
                                         kl_status err, uint64_t value, uint64_t limit, kl_status limit_status) {
    const kl_check_info *c = &desc->checks[check];
    if (err != KL_SUCCESS) return kl__fail_check(desc, err, check, values, 0, 0, 0);
    if (value > 4294967295u) return kl__fail_check(desc, KL_ERROR_OVERFLOW, check, values, 1, value, 4294967295u);
    if (value == 0)
        return kl__fail(limit_status, "kl_%s: %s = %s is 0; a block needs at least one thread [%s:%u:%u]",
                        desc->launcher, c->what, c->expr, desc->spec_file, (unsigned)c->line, (unsigned)c->col);
    return kl__fail_check(desc, limit_status, check, values, 1, value, limit);
}

/* Bytes a kernel argument of `kind` is aligned to in the parameter buffer. */
static inline uint32_t kl__param_align(kl_param_kind kind) {
    return kind == KL_PARAM_TENSOR_MAP ? 128u : (kind == KL_PARAM_PTR || kind == KL_PARAM_U64) ? 8u : 4u;
}
/* Offset of desc's parameter i in a parameter buffer that starts `base`
 * bytes past a 128-byte boundary: desc->params[i].offset itself when base
 * is 0 (what the spec's offsets are for), else laid out from the kinds'
 * alignments; the two agree where no parameter is a tensor map (every
 * other alignment divides 16, and every target's parameter area starts
 * 16-byte aligned). */
static inline uint32_t kl__param_offset_at(const kl_kernel_desc *desc, uint32_t i, uint32_t base) {
    uint32_t j, end = 0;
    if (base == 0u) return desc->params[i].offset;
    for (j = 0;; j++) {
        const uint32_t a = kl__param_align(desc->params[j].kind);
        const uint32_t at = (base + end + a - 1u) / a * a - base;
        if (j == i) return at;
        end = at + desc->params[j].size;
    }
}

/* Nonzero when two descriptors describe the same launcher identically:
 * the copies that one generated header gives each translation unit that
 * includes it (each has its own static kl_X_desc). Out of line: only a
 * handle looked up in another translation unit gets here. */
int kl__desc_same(const kl_kernel_desc *a, const kl_kernel_desc *b);
/* kl__desc_same(kernel->desc, desc), remembering desc in kernel->desc_alias
 * when it holds. */
int kl__desc_adopt(const kl_kernel *kernel, const kl_kernel_desc *desc);

static inline const kl_kernel_desc *kl__desc_alias(const kl_kernel *kernel) {
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_load_n(&kernel->desc_alias, __ATOMIC_RELAXED);
#else
    return kernel->desc_alias;
#endif
}

/* Is `kernel` a loaded handle made for `desc` (by this or another
 * translation unit), whose module is still loaded? */
static inline int kl__kernel_ok(const kl_kernel *kernel, const kl_kernel_desc *desc) {
    /* Load ids are never 0 and kl_module_unload zeroes the module, so equal
     * ids mean the module is the one still loaded. The descriptor: this
     * file's own (one pointer), another file's seen before (one more), else
     * compared field by field, out of line and last, so it is a tail call. */
    return kernel != NULL && kernel->magic == KL__KERNEL_MAGIC && kernel->module != NULL &&
           kernel->module->load_id == kernel->module_load_id &&
           (kernel->desc == desc || kl__desc_alias(kernel) == desc || kl__desc_adopt(kernel, desc));
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_KLAUNCH_H */

/* ======================================================================== */
#ifdef KLAUNCH_IMPLEMENTATION
#ifndef KLAUNCH_IMPLEMENTATION_DONE
#define KLAUNCH_IMPLEMENTATION_DONE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus) && __cplusplus >= 201103L
#define KL__THREAD_LOCAL thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define KL__THREAD_LOCAL _Thread_local
#else
#define KL__THREAD_LOCAL __thread
#endif

static KL__THREAD_LOCAL char kl__last_message[1024];
static KL__THREAD_LOCAL kl_status kl__last_status;
/* The error callback and its user pointer, read and written as one pair
 * under a spin lock (held for two loads or two stores), so a refusal on one
 * thread never calls a callback that another thread is replacing, nor pairs
 * one callback with another's user pointer. */
static kl_error_callback kl__callback;
static void *kl__callback_user;
/* A waiter gives its core away at once: the holder may be a thread the
 * scheduler took off the core (more threads than cores, or a sanitizer's
 * slow path), and spinning out the time slice would only keep it waiting. */
#if defined(__unix__) || defined(__APPLE__)
#define KL__CALLBACK_LOCK_WAIT() ((void)sched_yield())
#elif defined(_WIN32)
__declspec(dllimport) int __stdcall SwitchToThread(void); /* <windows.h>'s, declared alike */
#define KL__CALLBACK_LOCK_WAIT() ((void)SwitchToThread())
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__) && \
    !defined(__cplusplus)
#include <threads.h>
#define KL__CALLBACK_LOCK_WAIT() thrd_yield()
#else
#define KL__CALLBACK_LOCK_WAIT() ((void)0)
#endif
#if defined(__GNUC__) || defined(__clang__)
static unsigned char kl__callback_lock_flag;
static void kl__callback_lock(void) {
    while (__atomic_test_and_set(&kl__callback_lock_flag, __ATOMIC_ACQUIRE)) KL__CALLBACK_LOCK_WAIT();
}
static void kl__callback_unlock(void) { __atomic_clear(&kl__callback_lock_flag, __ATOMIC_RELEASE); }
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__) && \
    !defined(__cplusplus)
#include <stdatomic.h>
static atomic_flag kl__callback_lock_flag = ATOMIC_FLAG_INIT;
static void kl__callback_lock(void) {
    while (atomic_flag_test_and_set_explicit(&kl__callback_lock_flag, memory_order_acquire)) KL__CALLBACK_LOCK_WAIT();
}
static void kl__callback_unlock(void) { atomic_flag_clear_explicit(&kl__callback_lock_flag, memory_order_release); }
#else
/* No atomics known to this compiler: set the callback before starting
 * threads (klaunch.h's ERROR REPORTING says so). */
static void kl__callback_lock(void) {}
static void kl__callback_unlock(void) {}
#endif

/* One consistent snapshot of the pair (the callback may be NULL). */
static void kl__error_callback_get(kl_error_callback *callback, void **user) {
    kl__callback_lock();
    *callback = kl__callback;
    *user = kl__callback_user;
    kl__callback_unlock();
}

const char *kl_status_name(kl_status status) {
    switch (status) {
#define KL__STATUS_NAME(name, text) \
    case name:                      \
        return #name;
        KL_STATUS_LIST(KL__STATUS_NAME)
#undef KL__STATUS_NAME
    default:
        return "KL_UNKNOWN_STATUS";
    }
}

const char *kl_status_string(kl_status status) {
    switch (status) {
#define KL__STATUS_TEXT(name, text) \
    case name:                      \
        return text;
        KL_STATUS_LIST(KL__STATUS_TEXT)
#undef KL__STATUS_TEXT
    default:
        return "unknown status";
    }
}

const char *kl_last_error_message(void) { return kl__last_message; }
kl_status kl_last_error(void) { return kl__last_status; }

void kl_set_error_callback(kl_error_callback callback, void *user) {
    kl__callback_lock();
    kl__callback = callback;
    kl__callback_user = user;
    kl__callback_unlock();
}

static kl_status kl__report(kl_status status) {
    kl_error_callback callback;
    void *user;
    kl__last_status = status;
    kl__error_callback_get(&callback, &user);
    if (callback != NULL) callback(status, kl__last_message, user);
    return status;
}

kl_status kl__fail(kl_status status, const char *fmt, ...) {
    int n = snprintf(kl__last_message, sizeof kl__last_message, "%s: ", kl_status_name(status));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof kl__last_message)
        vsnprintf(kl__last_message + n, sizeof kl__last_message - (size_t)n, fmt, ap);
    va_end(ap);
    return kl__report(status);
}

static int kl__str_same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

int kl__desc_same(const kl_kernel_desc *a, const kl_kernel_desc *b) {
    uint32_t i;
    if (a == b) return 1;
    if (a == NULL || b == NULL) return 0;
    /* Everything a launch reads from either copy: names and hash (which
     * launcher, built from which spec), the parameter layout the arguments
     * are packed by, the constants kl_kernel.consts is indexed by, the
     * limits, the attributes and the target arch. */
    if (!kl__str_same(a->launcher, b->launcher) || !kl__str_same(a->entry, b->entry) ||
        !kl__str_same(a->family, b->family) || !kl__str_same(a->spec_hash, b->spec_hash) ||
        a->num_params != b->num_params || a->param_bytes != b->param_bytes || a->num_checks != b->num_checks ||
        a->num_consts != b->num_consts || a->max_dynamic_shared != b->max_dynamic_shared ||
        !kl__str_same(a->arch, b->arch) || a->num_extents != b->num_extents)
        return 0;
    for (i = 0; i < a->num_params; i++) {
        const kl_param_info *p = &a->params[i], *q = &b->params[i];
        if (p->kind != q->kind || p->offset != q->offset || p->size != q->size || !kl__str_same(p->name, q->name))
            return 0;
    }
    for (i = 0; i < a->num_consts; i++)
        if (!kl__str_same(a->const_names[i], b->const_names[i])) return 0;
    if ((a->attributes == NULL) != (b->attributes == NULL)) return 0;
    if (a->attributes != NULL &&
        (a->attributes->flags != b->attributes->flags || a->attributes->cluster[0] != b->attributes->cluster[0] ||
         a->attributes->cluster[1] != b->attributes->cluster[1] ||
         a->attributes->cluster[2] != b->attributes->cluster[2]))
        return 0;
    return 1;
}

int kl__desc_adopt(const kl_kernel *kernel, const kl_kernel_desc *desc) {
    if (!kl__desc_same(kernel->desc, desc)) return 0;
    /* The handle is the caller's object (kl_X_get filled it); launchers see
     * it const. One pointer, written atomically: launches on other threads
     * read either the old alias or this one, and both are right. */
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&((kl_kernel *)(uintptr_t)kernel)->desc_alias, desc, __ATOMIC_RELAXED);
#else
    ((kl_kernel *)(uintptr_t)kernel)->desc_alias = desc;
#endif
    return 1;
}

kl_status kl__fail_kernel(const kl_kernel_desc *desc, const kl_kernel *kernel) {
    if (kernel == NULL)
        return kl__fail(KL_ERROR_KERNEL_NOT_LOADED, "kl_%s: kernel handle is NULL", desc->launcher);
    if (kernel->magic != KL__KERNEL_MAGIC)
        return kl__fail(KL_ERROR_KERNEL_NOT_LOADED,
                        "kl_%s: kernel handle was not loaded (call kl_%s_get first)", desc->launcher,
                        desc->launcher);
    if (kernel->desc != NULL && kl__str_same(kernel->desc->launcher, desc->launcher) &&
        !kl__desc_same(kernel->desc, desc))
        return kl__fail(KL_ERROR_INVALID_ARGUMENT,
                        "kl_%s: kernel handle was loaded through another version of this launcher's header (spec "
                        "%s, this one's %s, or another generator): rebuild every file that includes it from the "
                        "same generated header",
                        desc->launcher, kernel->desc->spec_hash ? kernel->desc->spec_hash : "?",
                        desc->spec_hash ? desc->spec_hash : "?");
    if (!kl__desc_same(kernel->desc, desc))
        return kl__fail(KL_ERROR_INVALID_ARGUMENT,
                        "kl_%s: kernel handle was loaded for kl_%s (entry %s), not for this launcher",
                        desc->launcher, kernel->desc ? kernel->desc->launcher : "?",
                        kernel->desc ? kernel->desc->entry : "?");
    return kl__fail(KL_ERROR_KERNEL_NOT_LOADED,
                    "kl_%s: kernel handle's module was unloaded (kl_module_unload) or loaded again since kl_%s_get; "
                    "look the kernel up again in a loaded module",
                    desc->launcher, desc->launcher);
}

kl_status kl__fail_null(const kl_kernel_desc *desc, const char *param) {
    return kl__fail(KL_ERROR_NULL_POINTER, "kl_%s: parameter %s is NULL [%s:%u]", desc->launcher, param,
                    desc->spec_file, (unsigned)desc->spec_line);
}

/* Is the argument `name` of a check signed (a variant constant, an i32
 * parameter)? Its value then reaches kl__fail_check sign-extended, and is
 * printed as the module or the caller gave it. */
static int kl__arg_is_signed(const kl_kernel_desc *desc, const char *name) {
    uint32_t i;
    for (i = 0; i < desc->num_consts; i++)
        if (strcmp(desc->const_names[i], name) == 0) return 1;
    for (i = 0; i < desc->num_params; i++)
        if (desc->params[i].kind == KL_PARAM_I32 && strcmp(desc->params[i].name, name) == 0) return 1;
    return 0;
}

/* A sign-extended value back to its signed self, without an implementation-
 * defined conversion. */
static long long kl__as_signed(uint64_t v) {
    return v <= (uint64_t)INT64_MAX ? (long long)v : -(long long)(~v) - 1;
}

/* "n = 3, MLA_HDIM = 576": the values of a check's arguments; the first
 * signed one below zero, or NULL, into *negative. */
static const char *kl__check_args(const kl_kernel_desc *desc, const kl_check_info *c, const uint64_t *values,
                                  char *args, size_t cap) {
    size_t used = 0;
    uint32_t i;
    const char *negative = NULL;
    args[0] = '\0';
    for (i = 0; i < c->num_args && used < cap; i++) {
        const int is_signed = kl__arg_is_signed(desc, c->arg_names[i]);
        int n;
        if (is_signed && kl__as_signed(values[i]) < 0 && negative == NULL) negative = c->arg_names[i];
        if (is_signed)
            n = snprintf(args + used, cap - used, "%s%s = %lld", i ? ", " : "", c->arg_names[i],
                         kl__as_signed(values[i]));
        else
            n = snprintf(args + used, cap - used, "%s%s = %llu", i ? ", " : "", c->arg_names[i],
                         (unsigned long long)values[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return negative;
}

kl_status kl__fail_tensor_map_extent(const kl_kernel_desc *desc, uint32_t check, const uint64_t *values, kl_status err,
                                     uint64_t have, uint64_t need, int exact) {
    const kl_check_info *c = &desc->checks[check];
    char args[512], shown[540];
    if (err != KL_SUCCESS) return kl__fail_check(desc, err, check, values, 0, 0, 0);
    (void)kl__check_args(desc, c, values, args, sizeof args);
    /* "num_tokens = 17", or "2 * n = 34 (n = 17)" */
    if (c->num_args == 0 || (c->num_args == 1 && strcmp(c->expr, c->arg_names[0]) == 0))
        snprintf(shown, sizeof shown, "%s = %llu", c->expr, (unsigned long long)need);
    else
        snprintf(shown, sizeof shown, "%s = %llu (%s)", c->expr, (unsigned long long)need, args);
    /* c->what is "tensor map q_map: extent2" */
    if (exact)
        return kl__fail(KL_ERROR_TENSOR_MAP,
                        "kl_%s: %s = %llu, but the launch needs exactly %s: the kernel relies on the map's bounds "
                        "there (what it loads past them is the map's fill, what it stores past them is dropped), so "
                        "a larger map would feed or write the elements past it; encode the map for this launch "
                        "[%s:%u:%u]",
                        desc->launcher, c->what, (unsigned long long)have, shown, desc->spec_file,
                        (unsigned)c->line, (unsigned)c->col);
    return kl__fail(KL_ERROR_TENSOR_MAP,
                    "kl_%s: %s = %llu, but the launch needs at least %s; encode the map for a tensor this large "
                    "[%s:%u:%u]",
                    desc->launcher, c->what, (unsigned long long)have, shown, desc->spec_file, (unsigned)c->line,
                    (unsigned)c->col);
}

kl_status kl__fail_check(const kl_kernel_desc *desc, kl_status status, uint32_t check,
                         const uint64_t *values, int has_value, uint64_t value, uint64_t limit) {
    const kl_check_info *c = &desc->checks[check];
    char args[512];
    const char *negative = kl__check_args(desc, c, values, args, sizeof args);
    if (status == KL_ERROR_OVERFLOW && !has_value && negative != NULL) {
        /* kl__x_signed's refusal: an unsigned expression cannot take it. */
        return kl__fail(status, "kl_%s: %s `%s` reads %s, which is negative (%s); launch expressions are unsigned "
                                "[%s:%u:%u]",
                        desc->launcher, c->what, c->expr, negative, args, desc->spec_file, (unsigned)c->line,
                        (unsigned)c->col);
    }
    if (status == KL_ERROR_PRECONDITION && has_value && strncmp(c->what, "buffer ", 7) == 0 && c->num_args > 0) {
        /* A buffer's size check (the spec's `buffer:`), SIZE >= NEEDED: SIZE is
         * its first argument, `value`; NEEDED is `limit`. */
        return kl__fail(status, "kl_%s: %s is too small: %s = %llu, %llu needed (`%s`; %s)%s%s [%s:%u:%u]",
                        desc->launcher, c->what + 7, c->arg_names[0], (unsigned long long)value,
                        (unsigned long long)limit, c->expr, args, c->message ? ": " : "",
                        c->message ? c->message : "", desc->spec_file, (unsigned)c->line, (unsigned)c->col);
    }
    if (status == KL_ERROR_PRECONDITION || status == KL_ERROR_VARIANT_MISMATCH) {
        return kl__fail(status, "kl_%s: precondition `%s` does not hold (%s)%s%s [%s:%u:%u]", desc->launcher,
                        c->expr, args, c->message ? ": " : "", c->message ? c->message : "", desc->spec_file,
                        (unsigned)c->line, (unsigned)c->col);
    }
    if (status == KL_ERROR_OVERFLOW && !has_value) {
        return kl__fail(status, "kl_%s: %s = %s overflows 64 bits (%s) [%s:%u:%u]", desc->launcher, c->what,
                        c->expr, args, desc->spec_file, (unsigned)c->line, (unsigned)c->col);
    }
    if (status == KL_ERROR_DIVISION_BY_ZERO) {
        return kl__fail(status, "kl_%s: %s = %s divides by zero (%s) [%s:%u:%u]", desc->launcher, c->what,
                        c->expr, args, desc->spec_file, (unsigned)c->line, (unsigned)c->col);
    }
    return kl__fail(status, "kl_%s: %s = %s = %llu exceeds %llu (%s) [%s:%u:%u]", desc->launcher, c->what, c->expr,
                    (unsigned long long)value, (unsigned long long)limit, args, desc->spec_file,
                    (unsigned)c->line, (unsigned)c->col);
}

/* Module metadata (docs/DESIGN.md), read strictly: what the generated .cuh
 * writes is accepted, anything else is KL_ERROR_MODULE_INFO naming the line,
 * never a silent truncation or a misread number. Lines are "key value"
 * ("const NAME VALUE"), fields separated by spaces, at most
 * KL__MODULE_LINE_MAX characters; the first non-empty line is
 * "klaunch-module 1"; family, variant, spec_hash, source_hash and cuda_arch
 * ("900a": __CUDA_ARCH__ and an optional a or f suffix) appear at most once and must fit their kl_module slot; family, variant and constant
 * names are C identifiers; constant values are decimal int64 (an optional
 * '-', no leading zeros); a constant name appears once. Lines with other
 * keys are left for newer runtimes, within the same line limit. */
#define KL__MODULE_LINE_MAX 255

static int kl__is_ident(const char *s, size_t n) {
    size_t i;
    if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* Decimal int64: -?(0|[1-9][0-9]*), in range. */
static int kl__parse_int64(const char *s, size_t n, int64_t *out) {
    const int neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1u : 0u;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    if (i == n) return 0;
    if (s[i] == '0' && n - i > 1) return 0; /* leading zero: octal to strtoll, nothing the generator writes */
    if (neg && s[i] == '0') return 0;       /* "-0" */
    for (; i < n; i++) {
        const unsigned d = (unsigned)(s[i] - '0');
        if (d > 9u) return 0;
        if (v > (limit - d) / 10u) return 0;
        v = v * 10u + d;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 1;
}

static kl_status kl__copy_field(char *dst, size_t cap, unsigned line, const char *key, const char *value, size_t n) {
    if (n >= cap)
        return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: %s '%.*s' is %lu characters; at most %u fit",
                        line, key, (int)n, value, (unsigned long)n, (unsigned)(cap - 1));
    memcpy(dst, value, n);
    dst[n] = '\0';
    return KL_SUCCESS;
}

static kl_status kl__parse_module_info(const char *text, kl_module *m) {
    const char *p = text;
    unsigned line = 0;
    int have_magic = 0, have_variant = 0, have_spec_hash = 0, have_source_hash = 0;
    while (*p) {
        const char *eol = strchr(p, '\n');
        const size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *field[4];
        size_t flen[4];
        int nf = 0;
        size_t i = 0;
        line++;
        for (i = 0; i < len; i++) {
            const unsigned char c = (unsigned char)p[i];
            if (c < 0x20u || c == 0x7fu)
                return kl__fail(KL_ERROR_MODULE_INFO,
                                "module metadata line %u has a control character (byte 0x%02x at column %lu)", line,
                                (unsigned)c, (unsigned long)i + 1);
        }
        if (len > KL__MODULE_LINE_MAX)
            return kl__fail(KL_ERROR_MODULE_INFO,
                            "module metadata line %u is %lu characters ('%.40s...'); at most %u are read",
                            line, (unsigned long)len, p, (unsigned)KL__MODULE_LINE_MAX);
        /* Fields: runs of non-spaces; more than three is an error below for
         * every key this runtime reads. */
        i = 0;
        while (i < len) {
            size_t start;
            while (i < len && p[i] == ' ') i++;
            if (i == len) break;
            start = i;
            while (i < len && p[i] != ' ') i++;
            if (nf < 4) {
                field[nf] = p + start;
                flen[nf] = i - start;
            }
            nf++;
        }
        if (nf > 0) {
            kl_status st = KL_SUCCESS;
            const char *key = field[0];
            const size_t klen = flen[0];
#define KL__KEY_IS(lit) (klen == sizeof(lit) - 1 && memcmp(key, lit, sizeof(lit) - 1) == 0)
            const int known = KL__KEY_IS("klaunch-module") || KL__KEY_IS("family") || KL__KEY_IS("variant") ||
                              KL__KEY_IS("spec_hash") || KL__KEY_IS("source_hash") || KL__KEY_IS("const") ||
                              KL__KEY_IS("cuda_arch");
            const int want = KL__KEY_IS("const") ? 3 : 2;
            if (!have_magic && !KL__KEY_IS("klaunch-module"))
                return kl__fail(KL_ERROR_MODULE_INFO,
                                "module metadata line %u: '%.*s' before the 'klaunch-module 1' line it must begin "
                                "with",
                                line, (int)len, p);
            if (known && nf != want)
                return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: '%.*s' has %d fields; %.*s takes %d",
                                line, (int)len, p, nf, (int)klen, key, want);
            if (KL__KEY_IS("klaunch-module")) {
                if (have_magic)
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: a second klaunch-module line",
                                    line);
                if (!(flen[1] == 1 && field[1][0] == '1'))
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata version %.*s, this runtime reads 1",
                                    (int)flen[1], field[1]);
                have_magic = 1;
            } else if (KL__KEY_IS("family") || KL__KEY_IS("variant")) {
                const int is_family = KL__KEY_IS("family");
                if (is_family ? m->family[0] != '\0' : have_variant)
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: a second %s line", line,
                                    is_family ? "family" : "variant");
                if (!kl__is_ident(field[1], flen[1]))
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: %s '%.*s' is not a C identifier",
                                    line, is_family ? "family" : "variant", (int)flen[1], field[1]);
                st = is_family ? kl__copy_field(m->family, sizeof m->family, line, "family", field[1], flen[1])
                               : kl__copy_field(m->variant, sizeof m->variant, line, "variant", field[1], flen[1]);
                have_variant |= !is_family;
            } else if (KL__KEY_IS("spec_hash") || KL__KEY_IS("source_hash")) {
                const int is_spec = KL__KEY_IS("spec_hash");
                if (is_spec ? have_spec_hash : have_source_hash)
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: a second %s line", line,
                                    is_spec ? "spec_hash" : "source_hash");
                st = is_spec ? kl__copy_field(m->spec_hash, sizeof m->spec_hash, line, "spec_hash", field[1],
                                              flen[1])
                             : kl__copy_field(m->source_hash, sizeof m->source_hash, line, "source_hash", field[1],
                                              flen[1]);
                have_spec_hash |= is_spec;
                have_source_hash |= !is_spec;
            } else if (KL__KEY_IS("cuda_arch")) {
                /* __CUDA_ARCH__ (decimal, a multiple of 10) and an optional a or f suffix: "900a" -> sm_90a. */
                const char *v = field[1];
                size_t digits = flen[1];
                int64_t n = 0;
                if (m->arch[0] != '\0')
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: a second cuda_arch line", line);
                if (digits > 0 && (v[digits - 1] == 'a' || v[digits - 1] == 'f')) digits--;
                if (!kl__parse_int64(v, digits, &n) || n < 100 || n > 9990 || n % 10 != 0)
                    return kl__fail(KL_ERROR_MODULE_INFO,
                                    "module metadata line %u: cuda_arch '%.*s' is not __CUDA_ARCH__ with an optional a "
                                    "or f suffix",
                                    line, (int)flen[1], v);
                snprintf(m->arch, sizeof m->arch, "sm_%d%.*s", (int)(n / 10), (int)(flen[1] - digits), v + digits);
            } else if (KL__KEY_IS("const")) {
                int64_t v;
                uint32_t j;
                if (!kl__is_ident(field[1], flen[1]))
                    return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: constant name '%.*s' is not a C "
                                                          "identifier",
                                    line, (int)flen[1], field[1]);
                if (!kl__parse_int64(field[2], flen[2], &v))
                    return kl__fail(KL_ERROR_MODULE_INFO,
                                    "module metadata line %u: constant %.*s = '%.*s' is not a decimal 64-bit integer "
                                    "(an optional '-', no leading zeros, at most 9223372036854775807)",
                                    line, (int)flen[1], field[1], (int)flen[2], field[2]);
                for (j = 0; j < m->num_consts; j++)
                    if (strlen(m->const_names[j]) == flen[1] && memcmp(m->const_names[j], field[1], flen[1]) == 0)
                        return kl__fail(KL_ERROR_MODULE_INFO, "module metadata line %u: constant %.*s defined twice",
                                        line, (int)flen[1], field[1]);
                if (m->num_consts >= KL_MAX_CONSTS)
                    return kl__fail(KL_ERROR_MODULE_INFO,
                                    "module metadata line %u: more than %d constants (KL_MAX_CONSTS)", line,
                                    KL_MAX_CONSTS);
                st = kl__copy_field(m->const_names[m->num_consts], sizeof m->const_names[0], line, "constant",
                                    field[1], flen[1]);
                if (st != KL_SUCCESS) return st;
                m->const_values[m->num_consts] = v;
                m->num_consts++;
            }
#undef KL__KEY_IS
            /* Other keys are left for newer runtimes. */
            if (st != KL_SUCCESS) return st;
        }
        p = eol ? eol + 1 : p + len;
    }
    if (!have_magic) return kl__fail(KL_ERROR_MODULE_INFO, "module metadata lacks its 'klaunch-module 1' line");
    if (m->family[0] == '\0') return kl__fail(KL_ERROR_MODULE_INFO, "module metadata names no family");
    return KL_SUCCESS;
}

/* Never 0 (the id of an unloaded module), never repeated in a process. */
static uint64_t kl__next_load_id(void) {
    static uint64_t last;
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
#else
    return ++last; /* see ERROR REPORTING: no atomics, load before starting threads */
#endif
}

kl_status kl_module_load(kl_backend *backend, const void *image, size_t size, kl_module *out) {
    char info[KL_MODULE_INFO_BYTES];
    kl_status st;
    if (out == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_module_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (backend == NULL || backend->ops == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_module_load: backend is NULL or not initialised");
    if (image == NULL || size == 0)
        return kl__fail(KL_ERROR_INVALID_IMAGE,
                        "kl_module_load: the image is empty (was the fatbin built without a CUDA toolkit?)");
    st = backend->ops->module_load(backend, image, size, &out->handle);
    if (st != KL_SUCCESS) return st;
    info[0] = '\0';
    st = backend->ops->module_info(backend, out->handle, info, sizeof info);
    if (st == KL_SUCCESS) st = kl__parse_module_info(info, out);
    if (st != KL_SUCCESS) {
        backend->ops->module_unload(backend, out->handle);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->backend = backend;
    out->load_id = kl__next_load_id();
    out->magic = KL__MODULE_MAGIC;
    return KL_SUCCESS;
}

/* Reads `path` whole into a malloc'ed buffer with one NUL byte past its
 * `*len` bytes. Refuses what is not a regular file (asked without blocking:
 * open(O_NONBLOCK) returns at once on a FIFO with no writer, where fopen
 * would wait for one) and one larger than KL_MODULE_FILE_MAX_BYTES, before
 * reading a byte; a file stat sizes as 0 after reading one byte (empty, or a
 * pseudo-file such as /proc/self/maps, whose size stat does not know); a file
 * whose first byte is NUL (zeros: no image starts so) after reading its first
 * block, not the whole. Every message names the path. */
static kl_status kl__check_file_size(const char *path, uint64_t len) {
    if (len == 0)
        return kl__fail(KL_ERROR_INVALID_IMAGE,
                        "kl_module_load_file: '%s' is empty (was the fatbin built without a CUDA toolkit?)", path);
    if (len > (uint64_t)KL_MODULE_FILE_MAX_BYTES)
        return kl__fail(KL_ERROR_FILE_IO,
                        "kl_module_load_file: '%s' is %llu bytes, more than KL_MODULE_FILE_MAX_BYTES (%llu); define "
                        "it higher before including klaunch.h to load it",
                        path, (unsigned long long)len, (unsigned long long)KL_MODULE_FILE_MAX_BYTES);
    return KL_SUCCESS;
}

#if defined(__unix__) || defined(__APPLE__)
static const char *kl__file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
#ifdef S_ISSOCK
    if (S_ISSOCK(mode)) return "a socket";
#endif
    return "not a regular file";
}

static kl_status kl__read_file(const char *path, char **out, size_t *out_len) {
    struct stat sb;
    uint64_t len;
    size_t got = 0;
    char *buf;
    kl_status st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        /* A socket cannot be opened at all (ENXIO): say what it is. */
        if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
            return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: '%s' is %s, not a regular file", path,
                            kl__file_kind(sb.st_mode));
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: cannot open '%s': %s", path, strerror(e));
    }
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: '%s' is %s, not a regular file", path,
                        kl__file_kind(sb.st_mode));
    }
    len = sb.st_size > 0 ? (uint64_t)sb.st_size : 0u;
    if (len == 0) {
        /* Empty, or a pseudo-file (procfs, sysfs) that stat sizes as 0 and
         * that reads as text made when read: one byte tells them apart. */
        char probe;
        ssize_t n;
        int e;
        do {
            n = read(fd, &probe, 1);
        } while (n < 0 && errno == EINTR);
        e = errno;
        close(fd);
        if (n > 0)
            return kl__fail(KL_ERROR_FILE_IO,
                            "kl_module_load_file: '%s' is a file whose size stat gives as 0 but that has content (a "
                            "procfs or sysfs file?), not a module image: a fatbin is a regular file of known size",
                            path);
        if (n < 0)
            return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: reading '%s' (a file stat sizes as 0): %s", path,
                            strerror(e));
        return kl__check_file_size(path, 0);
    }
    st = kl__check_file_size(path, len);
    if (st != KL_SUCCESS) {
        close(fd);
        return st;
    }
    /* One byte more than the size, to see a file that grew since fstat. */
    buf = (char *)malloc((size_t)len + 1);
    if (buf == NULL) {
        close(fd);
        return kl__fail(KL_ERROR_OUT_OF_MEMORY, "kl_module_load_file: %llu bytes for '%s'", (unsigned long long)len,
                        path);
    }
    while (got < (size_t)len + 1) {
        /* The first block alone, to look at its first byte before the rest. */
        const size_t want = (size_t)len + 1 - got, first = 4096;
        const ssize_t n = read(fd, buf + got, got == 0 && want > first ? first : want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            close(fd);
            free(buf);
            return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: reading '%s': %s", path, strerror(e));
        }
        if (n == 0) break;
        if (got == 0 && buf[0] == '\0') {
            /* A fatbin starts with its magic (0x50 first), a cubin with 0x7f
             * 'E' 'L' 'F', PTX and module metadata with text: nothing this
             * loads starts with a NUL byte. Refused before reading the rest
             * (a sparse file of the cap's size would be read whole). */
            close(fd);
            free(buf);
            return kl__fail(KL_ERROR_INVALID_IMAGE,
                            "kl_module_load_file: '%s' (%llu bytes) starts with a NUL byte: not a fatbin (magic "
                            "0xBA55ED50), cubin (ELF), PTX or module metadata text (a file of zeros?)",
                            path, (unsigned long long)len);
        }
        got += (size_t)n;
    }
    close(fd);
    if (got != (size_t)len) {
        free(buf);
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: '%s' %s while it was read (%s %llu bytes)", path,
                        got > (size_t)len ? "grew" : "shrank", got > (size_t)len ? "more than" : "fewer than",
                        (unsigned long long)len);
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = (size_t)len;
    return KL_SUCCESS;
}
#else
/* Without POSIX: the size as fseek/ftell see it; the cap still holds. */
static kl_status kl__read_file(const char *path, char **out, size_t *out_len) {
    long len;
    char *buf;
    kl_status st;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: cannot open '%s'", path);
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: cannot size '%s'", path);
    }
    st = kl__check_file_size(path, (uint64_t)len);
    if (st != KL_SUCCESS) {
        fclose(f);
        return st;
    }
    buf = (char *)malloc((size_t)len + 1);
    if (buf == NULL) {
        fclose(f);
        return kl__fail(KL_ERROR_OUT_OF_MEMORY, "kl_module_load_file: %ld bytes for '%s'", len, path);
    }
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return kl__fail(KL_ERROR_FILE_IO, "kl_module_load_file: short read of '%s'", path);
    }
    fclose(f);
    buf[len] = '\0';
    *out = buf;
    *out_len = (size_t)len;
    return KL_SUCCESS;
}
#endif

kl_status kl_module_load_file(kl_backend *backend, const char *path, kl_module *out) {
    char *buf = NULL;
    size_t len = 0;
    kl_status st;
    if (out) memset(out, 0, sizeof *out);
    if (path == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_module_load_file: path is NULL");
    if (out == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_module_load_file: out is NULL ('%s')", path);
    st = kl__read_file(path, &buf, &len);
    if (st != KL_SUCCESS) return st;
    st = kl_module_load(backend, buf, len, out);
    free(buf); /* the driver copies the image */
    return st;
}

void kl_module_unload(kl_module *module) {
    if (module == NULL || module->magic != KL__MODULE_MAGIC) return;
    module->backend->ops->module_unload(module->backend, module->handle);
    memset(module, 0, sizeof *module);
}

int kl_module_const(const kl_module *module, const char *name, int64_t *value) {
    uint32_t i;
    if (module == NULL || module->magic != KL__MODULE_MAGIC) return 0;
    for (i = 0; i < module->num_consts; i++) {
        if (strcmp(module->const_names[i], name) == 0) {
            if (value) *value = module->const_values[i];
            return 1;
        }
    }
    return 0;
}

/* "sha256:" and 64 hex digits, as the generator writes spec hashes. Only such
 * hashes are compared for staleness: hand-written metadata (tests, the
 * recording backend) may leave the hash out or use a placeholder. */
static int kl__is_sha256(const char *s) {
    int i;
    if (s == NULL || strncmp(s, "sha256:", 7) != 0) return 0;
    for (i = 7; i < 7 + 64; i++) {
        const char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return s[7 + 64] == '\0';
}

kl_status kl_kernel_get(kl_kernel *out, const kl_module *module, const kl_kernel_desc *desc) {
    kl_func_attrs attrs;
    void *fn = NULL;
    kl_status st;
    uint32_t i;
    if (out == NULL || desc == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_kernel_get: NULL argument");
    memset(out, 0, sizeof *out);
    if (module == NULL || module->magic != KL__MODULE_MAGIC)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_%s_get: module is NULL or not loaded", desc->launcher);
    if (strcmp(module->family, desc->family) != 0)
        return kl__fail(KL_ERROR_FAMILY_MISMATCH,
                        "kl_%s_get: module is of family '%s' (variant '%s'); this launcher needs family '%s' [%s:%u]",
                        desc->launcher, module->family, module->variant, desc->family, desc->spec_file,
                        (unsigned)desc->spec_line);
    if (kl__is_sha256(desc->spec_hash) && kl__is_sha256(module->spec_hash) &&
        strcmp(module->spec_hash, desc->spec_hash) != 0)
        return kl__fail(KL_ERROR_STALE_FATBIN,
                        "kl_%s_get: module %s/%s was built from spec %s, this launcher's header from spec %s "
                        "[%s:%u]: one of them is stale; rebuild both from the same spec: ./bazelw build "
                        "//kernels:%s (or ./bazelw run //:generate)",
                        desc->launcher, module->family, module->variant, module->spec_hash, desc->spec_hash,
                        desc->spec_file, (unsigned)desc->spec_line, desc->family);
    if (desc->num_consts > KL_MAX_CONSTS)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_%s_get: %u constants exceed KL_MAX_CONSTS",
                        desc->launcher, (unsigned)desc->num_consts);
    for (i = 0; i < desc->num_consts; i++) {
        if (!kl_module_const(module, desc->const_names[i], &out->consts[i]))
            return kl__fail(KL_ERROR_VARIANT_MISMATCH,
                            "kl_%s_get: module variant '%s' does not define constant %s, which this launcher checks "
                            "[%s:%u]",
                            desc->launcher, module->variant, desc->const_names[i], desc->spec_file,
                            (unsigned)desc->spec_line);
    }
    if (desc->arch != NULL && desc->arch[0] != '\0' && strcmp(module->arch, desc->arch) != 0) {
        char device[32];
        strcpy(device, "unknown");
        if (module->backend->ops->device_arch != NULL)
            module->backend->ops->device_arch(module->backend, device, sizeof device);
        if (module->arch[0] == '\0')
            return kl__fail(KL_ERROR_UNSUPPORTED,
                            "kl_%s_get: kernel %s needs %s machine code, but module %s/%s does not say which "
                            "target the image loaded on device %s was compiled for (no cuda_arch line in its "
                            "metadata: rebuild it) [%s:%u]",
                            desc->launcher, desc->entry, desc->arch, module->family, module->variant, device,
                            desc->spec_file, (unsigned)desc->spec_line);
        return kl__fail(KL_ERROR_UNSUPPORTED,
                        "kl_%s_get: kernel %s needs %s machine code, but on device %s the driver loaded the %s "
                        "image of module %s/%s [%s:%u]",
                        desc->launcher, desc->entry, desc->arch, device, module->arch, module->family,
                        module->variant, desc->spec_file, (unsigned)desc->spec_line);
    }
    attrs.max_threads = KL__THREADS_MAX;
    attrs.max_dynamic_shared = 48u * 1024u;
    st = module->backend->ops->function_get(module->backend, module->handle, desc, &fn, &attrs);
    if (st != KL_SUCCESS) return st;
    out->desc = desc;
    out->backend = module->backend;
    out->fn = fn;
    out->max_threads = attrs.max_threads;
    out->max_dynamic_shared = attrs.max_dynamic_shared;
    out->module = module;
    out->module_load_id = module->load_id;
    out->magic = KL__KERNEL_MAGIC;
    return KL_SUCCESS;
}

kl_status kl_kernel_get_checked(kl_kernel *out, const kl_module *module, const kl_kernel_desc *desc,
                                const kl_variant_info *variants) {
    const kl_variant_info *v;
    uint32_t i, j;
    if (out != NULL) memset(out, 0, sizeof *out);
    /* What kl_kernel_get refuses first (a bad module, another family, a
     * stale one) it reports itself. */
    if (out == NULL || desc == NULL || variants == NULL || module == NULL || module->magic != KL__MODULE_MAGIC ||
        strcmp(module->family, desc->family) != 0 ||
        (kl__is_sha256(desc->spec_hash) && kl__is_sha256(module->spec_hash) &&
         strcmp(module->spec_hash, desc->spec_hash) != 0))
        return kl_kernel_get(out, module, desc);
    for (v = variants; v->name != NULL && strcmp(v->name, module->variant) != 0; v++) {
    }
    /* A variant of another name (a test's own, loaded as metadata text) is
     * checked by what the launcher reads of it, as before. */
    if (v->name == NULL) return kl_kernel_get(out, module, desc);
    for (i = 0; i < module->num_consts; i++) {
        for (j = 0; j < v->num_consts && strcmp(v->const_names[j], module->const_names[i]) != 0; j++) {
        }
        if (j == v->num_consts)
            return kl__fail(KL_ERROR_VARIANT_MISMATCH,
                            "kl_%s_get: module %s/%s defines constant %s, which variant %s of %s does not [%s:%u]",
                            desc->launcher, module->family, module->variant, module->const_names[i], v->name,
                            desc->spec_file, desc->spec_file, (unsigned)desc->spec_line);
        if (v->const_values[j] != module->const_values[i])
            return kl__fail(KL_ERROR_VARIANT_MISMATCH,
                            "kl_%s_get: module %s/%s has %s = %lld; variant %s of %s has %s = %lld [%s:%u]",
                            desc->launcher, module->family, module->variant, module->const_names[i],
                            (long long)module->const_values[i], v->name, desc->spec_file, v->const_names[j],
                            (long long)v->const_values[j], desc->spec_file, (unsigned)desc->spec_line);
    }
    return kl_kernel_get(out, module, desc);
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_IMPLEMENTATION_DONE */
#endif /* KLAUNCH_IMPLEMENTATION */
