/* choose.h - which launcher of a spec operation to call, from measured
 * times where a table has them and from the operation's rule elsewhere
 * (issue 45). Hand-written, header-only, C99 and C++.
 *
 * A spec's `operations:` (docs/DESIGN.md, "Operations") declares an
 * operation, the launchers that implement it (its alternatives), the shape
 * they are chosen by and the rule for a device no table covers. The
 * generated header of the family then has, per operation OP:
 *   kl_OP_shape, kl_OP_kernels (one handle per alternative; NULL or an
 *   unloaded handle: not available here), kl_OP_choice, the alternatives
 *   as KL_OP_<ALT> (KL_OP_NONE: none applies), kl_OP_op (the descriptor
 *   the table loader checks files against), and
 *       kl_OP_choice kl_OP_choose(const kl_OP_shape *shape, const kl_device *device,
 *                                 const kl_choice_table *table, kl_choice_policy policy,
 *                                 const kl_OP_kernels *kernels);
 *
 * USE
 *       #define KLAUNCH_IMPLEMENTATION   // in one file of the program: the loader and writer
 *       #include "klaunch/paged_decode.h"
 *
 *       kl_device dev = {9, 0, 132, 50u << 20, 80ull << 30, 0};   // or kl_cuda_device_describe(&cuda, &dev)
 *       kl_choice_table t = {0};
 *       if (kl_choice_table_load_file("h100.choices", kl_paged_decode_operations, &t) != KL_SUCCESS)
 *           fprintf(stderr, "%s\n", kl_last_error_message());        // FILE:LINE: what is wrong
 *       kl_paged_decode_gqa_bf16_shape s = {.num_seqs = 32, ...};
 *       kl_paged_decode_gqa_bf16_choice c = kl_paged_decode_gqa_bf16_choose(&s, &dev, &t, KL_CHOICE_GRAPH, &ks);
 *       switch (c.alternative) { case KL_PAGED_DECODE_GQA_BF16_MMA_SPLIT: ... c.num_splits ... }
 *       kl_choice_table_free(&t);
 *
 * WHAT A CHOOSER DOES (in this order; it never fails, reports or touches
 * kl_last_error: a caller may probe shapes freely)
 *   1. Each alternative applies when its handle is loaded for its launcher,
 *      its `when` condition holds and every check of its launcher that the
 *      shape (and its tunables) decide holds: the preconditions, grid,
 *      block, thread count, shared memory and extents that read only shape
 *      parameters, tunables and variant constants, evaluated as the
 *      launcher evaluates them (an overflow fails). Checks that read other
 *      arguments (strides, buffer sizes, pointers, tensor maps) are the
 *      call's, left to kl_X_check: a chosen launcher never refuses the shape.
 *   2. `table` (when not NULL), then the compiled-in table
 *      (kl_choice_builtin_table(); skipped when table->flags has
 *      KL_CHOICE_TABLE_ONLY): the cell of this operation, policy and
 *      device (KEY below) nearest to the shape (BUCKETS below); of its
 *      alternatives that apply with the table's tunables, the least time.
 *   3. Otherwise the operation's rule (its spec `fallback:` list, the hand
 *      rules the project had before: the first entry that applies and
 *      whose `if` holds), with each tunable's default; then the first
 *      alternative in spec order that applies; else KL_OP_NONE.
 *   The choice says where it came from (kl_choice_source).
 *
 * KEY: a table's device matches when compute capability (major, minor),
 *   SM count, L2 bytes and memory in GiB (mem_bytes rounded to the nearest
 *   GiB) are all equal: an H100 SXM (132 SMs, 50 MiB L2, 80 GB) and an
 *   H100 PCIe (114 SMs) or an H200 (60 MiB L2, 141 GB) are different keys,
 *   where an architecture alone would not tell them apart. The bandwidth
 *   is recorded (bw_gbs) and not matched.
 *
 * BUCKETS: an operation's `keys` are shape parameters, each `exact` (a row
 *   matches only that value) or `log2`. For each log2 key on its own, the
 *   table's value nearest to the shape's in log2 among the rows of the
 *   operation, policy, device and exact keys: a value between two tabled
 *   values a < x < b goes to a when x * x <= a * b (the nearer in log2; a
 *   tie to the smaller), below the smallest to the smallest, past the
 *   largest to the largest; 0 is nearest the smallest. The cell is the rows
 *   with those values; the tuner writes whole grids, so every combination
 *   of tabled values is a cell; a combination a hand-made table lacks is
 *   no cell (step 3 then).
 *
 * TABLE FILE (text, version 1; kl_choice_table_write writes it)
 *       klaunch-choices 1
 *       # comments and blank lines are skipped
 *       device h200 cc 9.0 sms 132 l2 62914560 mem_gib 140 bw_gbs 4200 name NVIDIA_H200
 *       row h200 paged_decode_gqa_bf16 graph num_seqs=32 max_seq_len=4096 alt=mma_split us=30.125 num_splits=16
 *       end
 *   Fields are separated by single or repeated spaces; every line ends
 *   with a line feed (a last line without one is a truncated file), at most
 *   KL_CHOICE_LINE_MAX characters, no control characters. A device line:
 *   an id (a C identifier) and each of cc (MAJOR.MINOR), sms, l2 (bytes),
 *   mem_gib once, optionally bw_gbs and name (no spaces); ids and keys are
 *   unique. A row: a declared device id, an operation the loader was given,
 *   eager or graph, then in any order each of the operation's keys as
 *   key=value, alt=<one of its alternatives>, us=<time in microseconds: digits,
 *   at most 3 after a point> and exactly that alternative's tunables as
 *   name=value; one row per (device, operation, policy, keys,
 *   alternative). Numbers are decimal without leading zeros, u32 (l2 u64).
 *   The last line is `end`, and nothing follows it.
 *
 * OVERRIDABLE MACROS (define before the first include)
 *   KL_CHOICE_TABLE_MAX_BYTES  largest table file or text read (16 MiB)
 *   KL_CHOICE_TABLE_MAX_ROWS   most rows a table holds (1 << 20)
 *
 * ERROR REPORTING
 *   The choosers and kl_choice_lookup never fail or report. The loaders
 *   return KL_ERROR_CHOICE_TABLE with "FILE:LINE: what is wrong" (from
 *   kl_last_error_message(), like module metadata's refusals) and leave the
 *   table empty; KL_ERROR_FILE_IO for a file that cannot be read,
 *   KL_ERROR_OUT_OF_MEMORY, KL_ERROR_INVALID_ARGUMENT for NULL arguments.
 */
#ifndef KLAUNCH_CHOOSE_H
#define KLAUNCH_CHOOSE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "klaunch/device.h"
#include "klaunch/klaunch.h"

#ifndef KL_CHOICE_TABLE_MAX_BYTES
#define KL_CHOICE_TABLE_MAX_BYTES (16u << 20)
#endif
#ifndef KL_CHOICE_TABLE_MAX_ROWS
#define KL_CHOICE_TABLE_MAX_ROWS (1u << 20)
#endif
/* The table file's version (its first line), the longest line, the most
 * devices, shape keys and tunables an operation has. */
#define KL_CHOICE_TABLE_VERSION 1
#define KL_CHOICE_LINE_MAX 1023
#define KL_CHOICE_MAX_DEVICES 64
#define KL_CHOICE_MAX_KEYS 6
#define KL_CHOICE_MAX_TUNABLES 4

#ifdef __cplusplus
extern "C" {
#endif

/* kl_device (what a chooser knows of the device): klaunch/device.h. */

/* Launches timed one by one (eager: each launch's host cost counts) or
 * replayed from a CUDA graph (graph: only the GPU's time). */
typedef enum kl_choice_policy { KL_CHOICE_EAGER = 0, KL_CHOICE_GRAPH = 1 } kl_choice_policy;

/* Where a choice came from. */
typedef enum kl_choice_source {
    KL_CHOICE_NONE = 0,    /* no alternative applies */
    KL_CHOICE_TABLE = 1,   /* the table the caller passed */
    KL_CHOICE_BUILTIN = 2, /* the compiled-in table */
    KL_CHOICE_RULE = 3     /* the operation's fallback rule */
} kl_choice_source;

#define KL_CHOICE_KEY_EXACT 0u
#define KL_CHOICE_KEY_LOG2 1u

/* An operation as the generated header describes it (kl_OP_op). */
typedef struct kl_choice_op {
    const char *name;
    uint32_t num_alternatives;
    const char *const *alternatives;       /* their names, KL_OP_<ALT> order */
    const uint32_t *alternative_tunables;  /* per alternative: bit t when tunable t is its */
    uint32_t num_keys;
    const char *const *keys;               /* the shape parameters a table is keyed by */
    const uint8_t *key_kinds;              /* KL_CHOICE_KEY_EXACT or _LOG2 */
    uint32_t num_tunables;
    const char *const *tunables;
} kl_choice_op;

/* A device of a table: its key and what is recorded beside it. */
typedef struct kl_choice_device {
    char id[32];
    uint32_t cc_major, cc_minor, sm_count;
    uint64_t l2_bytes;
    uint32_t mem_gib;
    uint32_t bandwidth_gbs; /* recorded, not matched; 0 when not given */
    char name[64];          /* recorded, not matched; "" when not given */
} kl_choice_device;

/* One measured time: an alternative at one shape of one operation. */
typedef struct kl_choice_row {
    uint32_t device; /* index into the table's devices */
    const char *op;
    uint32_t policy; /* kl_choice_policy */
    uint32_t keys[KL_CHOICE_MAX_KEYS];         /* in the operation's key order */
    const char *alternative;
    uint64_t time_ns;
    uint32_t tunables[KL_CHOICE_MAX_TUNABLES]; /* in the operation's tunable order; 0 where not the alternative's */
    uint32_t line;                             /* of its file; 0 for rows not read from one */
} kl_choice_row;

typedef struct kl_choice_table {
    const kl_choice_device *devices;
    uint32_t num_devices;
    const kl_choice_row *rows;
    size_t num_rows;
    void *storage; /* the loader's allocation (kl_choice_table_free), NULL otherwise */
    uint32_t flags; /* KL_CHOICE_TABLE_ONLY; the loaders set 0 */
} kl_choice_table;

/* A table's flags. TABLE_ONLY: where this table has no cell the chooser
 * takes the rule, not the compiled-in table; an empty table with it asks
 * for the rule alone (the tuner's rule regret, a caller that trusts only
 * its own measurements). */
#define KL_CHOICE_TABLE_ONLY 1u

/* The compiled-in table: kl_choice_builtin_table(), the tuner's tables of
 * the cards the project runs on (tools/tune/tables/<card>.choices), generated
 * into klaunch/choose_tables.h by tools/tune/builtin.cc. A device none of
 * them has (another card, another SM count, L2 or memory size) gets no
 * cell and its operation's rule. Its rows are scanned at each call (a
 * thousand or so a device): choose once per shape and keep the choice. */
#include "klaunch/choose_tables.h"

/* Memory in whole GiB, rounded to the nearest: what a table's key holds. */
static inline uint32_t kl_choice_mem_gib(uint64_t mem_bytes) {
    const uint64_t g = (mem_bytes >> 30) + ((mem_bytes >> 29) & 1u);
    return g > 0xffffffffu ? 0xffffffffu : (uint32_t)g;
}

static inline int kl__choice_device_matches(const kl_choice_device *d, const kl_device *dev) {
    return d->cc_major == dev->cc_major && d->cc_minor == dev->cc_minor && d->sm_count == dev->sm_count &&
           d->l2_bytes == dev->l2_bytes && d->mem_gib == kl_choice_mem_gib(dev->mem_bytes);
}

/* The tabled value of one log2 key nearest x (BUCKETS above), from the
 * largest value <= x (lo, when have_lo) and the smallest > x (hi). */
static inline uint32_t kl__choice_nearest(uint32_t x, int have_lo, uint32_t lo, int have_hi, uint32_t hi) {
    if (have_lo && (lo == x || !have_hi)) return lo;
    if (!have_lo) return hi;
    /* lo < x < hi: lo when x / lo <= hi / x, i.e. x * x <= lo * hi (each below 2^64) */
    return (uint64_t)x * x <= (uint64_t)lo * hi ? lo : hi;
}

/* Does `alternative` (an index of op's) apply with these tunables? The
 * generated chooser's, for kl_choice_lookup. */
typedef int (*kl_choice_fits_fn)(const void *ctx, uint32_t alternative, const uint32_t *tunables);

static inline int kl__choice_row_in(const kl_choice_row *r, const kl_choice_op *op, uint32_t device, uint32_t policy,
                                    const uint32_t *keys, uint32_t skip_log2_from) {
    uint32_t k;
    if (r->device != device || r->policy != policy || r->op == NULL || strcmp(r->op, op->name) != 0) return 0;
    for (k = 0; k < op->num_keys; k++)
        if ((op->key_kinds[k] == KL_CHOICE_KEY_EXACT || k < skip_log2_from) && r->keys[k] != keys[k]) return 0;
    return 1;
}

/* 1 when `table` has a cell of `op` for this device, policy and shape
 * (keys[], in op's key order) and one of the cell's alternatives fits;
 * *alternative and tunables[] (op->num_tunables of them) then hold the one
 * of least time (the first of equals). 0 otherwise. Never reports. */
static inline int kl_choice_lookup(const kl_choice_table *table, const kl_choice_op *op, const kl_device *dev,
                                   uint32_t policy, const uint32_t *keys, kl_choice_fits_fn fits, const void *ctx,
                                   uint32_t *alternative, uint32_t *tunables) {
    uint32_t d, k, cell[KL_CHOICE_MAX_KEYS];
    size_t i;
    int found = 0;
    uint64_t best = 0;
    if (table == NULL || op == NULL || dev == NULL || keys == NULL || fits == NULL || table->num_rows == 0 ||
        op->num_keys > KL_CHOICE_MAX_KEYS || op->num_tunables > KL_CHOICE_MAX_TUNABLES)
        return 0;
    for (d = 0; d < table->num_devices; d++)
        if (kl__choice_device_matches(&table->devices[d], dev)) break;
    if (d == table->num_devices) return 0;
    /* The cell, one key at a time: exact keys as given, log2 keys nearest. */
    for (k = 0; k < op->num_keys; k++) {
        int have_lo = 0, have_hi = 0;
        uint32_t lo = 0, hi = 0;
        cell[k] = keys[k];
        if (op->key_kinds[k] != KL_CHOICE_KEY_LOG2) continue;
        for (i = 0; i < table->num_rows; i++) {
            const kl_choice_row *r = &table->rows[i];
            if (!kl__choice_row_in(r, op, d, policy, keys, 0)) continue; /* exact keys only */
            if (r->keys[k] <= keys[k]) {
                if (!have_lo || r->keys[k] > lo) lo = r->keys[k];
                have_lo = 1;
            } else {
                if (!have_hi || r->keys[k] < hi) hi = r->keys[k];
                have_hi = 1;
            }
        }
        if (!have_lo && !have_hi) return 0;
        cell[k] = kl__choice_nearest(keys[k], have_lo, lo, have_hi, hi);
    }
    for (i = 0; i < table->num_rows; i++) {
        const kl_choice_row *r = &table->rows[i];
        uint32_t a;
        if (!kl__choice_row_in(r, op, d, policy, cell, op->num_keys) || r->alternative == NULL) continue;
        for (a = 0; a < op->num_alternatives; a++)
            if (strcmp(op->alternatives[a], r->alternative) == 0) break;
        if (a == op->num_alternatives) continue;
        if (found && r->time_ns >= best) continue;
        if (!fits(ctx, a, r->tunables)) continue;
        found = 1;
        best = r->time_ns;
        *alternative = a;
        for (k = 0; k < op->num_tunables; k++) tunables[k] = r->tunables[k];
    }
    return found;
}

/* Reads a table from text (`name` is what messages call it, e.g. its
 * path), checking every row against `ops` (a NULL-terminated list, e.g.
 * kl_paged_decode_operations). On failure *out is empty. */
kl_status kl_choice_table_load_text(const char *text, size_t size, const char *name, const kl_choice_op *const *ops,
                                    kl_choice_table *out);
/* The same from a file (a regular file of at most KL_CHOICE_TABLE_MAX_BYTES). */
kl_status kl_choice_table_load_file(const char *path, const kl_choice_op *const *ops, kl_choice_table *out);
/* Frees what a loader allocated and empties the table (an empty or
 * compiled-in table is left as it is). */
void kl_choice_table_free(kl_choice_table *table);
/* Writes `table` in the file format; its rows' operations must be in ops. */
kl_status kl_choice_table_write(FILE *f, const kl_choice_table *table, const kl_choice_op *const *ops);

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_CHOOSE_H */

/* ======================================================================== */
#if defined(KLAUNCH_IMPLEMENTATION) && !defined(KLAUNCH_CHOOSE_IMPLEMENTATION_DONE)
#define KLAUNCH_CHOOSE_IMPLEMENTATION_DONE

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NONBLOCK
#define O_NONBLOCK 0
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One field of a line: where it starts, how long it is. */
typedef struct kl__choice_field {
    const char *s;
    size_t n;
} kl__choice_field;

static int kl__choice_is(const kl__choice_field *f, const char *lit) {
    return f->n == strlen(lit) && memcmp(f->s, lit, f->n) == 0;
}

static int kl__choice_ident(const char *s, size_t n) {
    size_t i;
    if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* Decimal 0|[1-9][0-9]*, at most `max`. */
static int kl__choice_uint(const char *s, size_t n, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    size_t i;
    if (n == 0 || (s[0] == '0' && n > 1)) return 0;
    for (i = 0; i < n; i++) {
        const unsigned d = (unsigned)(unsigned char)s[i] - (unsigned)'0';
        if (d > 9u || v > (max - d) / 10u) return 0;
        v = v * 10u + d;
    }
    *out = v;
    return 1;
}

/* Microseconds: digits, optionally a point and 1 to 3 digits; in ns. */
static int kl__choice_time(const char *s, size_t n, uint64_t *ns) {
    size_t dot = 0;
    uint64_t whole, frac = 0;
    while (dot < n && s[dot] != '.') dot++;
    if (!kl__choice_uint(s, dot, UINT64_MAX / 1000u - 1000u, &whole)) return 0;
    if (dot < n) {
        size_t i, digits = n - dot - 1;
        if (digits == 0 || digits > 3) return 0;
        for (i = dot + 1; i < n; i++) {
            const unsigned d = (unsigned)(unsigned char)s[i] - (unsigned)'0';
            if (d > 9u) return 0;
            frac = frac * 10u + d;
        }
        for (; digits < 3; digits++) frac *= 10u;
    }
    *ns = whole * 1000u + frac;
    return 1;
}

/* The parser's state: where it is, what it has read, what it owns. */
typedef struct kl__choice_parse {
    const char *name;
    unsigned line;
    const kl_choice_op *const *ops;
    kl_choice_device *devices;
    uint32_t num_devices;
    kl_choice_row *rows;
    size_t num_rows, cap_rows;
} kl__choice_parse;

#define KL__CHOICE_FAIL(P, ...) kl__choice_fail((P), __VA_ARGS__)

static kl_status kl__choice_fail(const kl__choice_parse *p, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kl__fail(KL_ERROR_CHOICE_TABLE, "%s:%u: %s", p->name, p->line, msg);
}

static const kl_choice_op *kl__choice_find_op(const kl__choice_parse *p, const kl__choice_field *f) {
    const kl_choice_op *const *o;
    for (o = p->ops; *o != NULL; o++)
        if (kl__choice_is(f, (*o)->name)) return *o;
    return NULL;
}

static kl_status kl__choice_device_line(kl__choice_parse *p, const kl__choice_field *f, int nf) {
    kl_choice_device d;
    uint32_t i;
    int j, have_cc = 0, have_sms = 0, have_l2 = 0, have_mem = 0, have_bw = 0, have_name = 0;
    memset(&d, 0, sizeof d);
    if (nf < 2 || !kl__choice_ident(f[1].s, f[1].n) || f[1].n >= sizeof d.id)
        return KL__CHOICE_FAIL(p, "a device line begins 'device ID' with ID a C identifier of at most %u characters",
                               (unsigned)sizeof d.id - 1);
    memcpy(d.id, f[1].s, f[1].n);
    if (p->num_devices >= KL_CHOICE_MAX_DEVICES)
        return KL__CHOICE_FAIL(p, "more than %u devices (KL_CHOICE_MAX_DEVICES)", (unsigned)KL_CHOICE_MAX_DEVICES);
    for (i = 0; i < p->num_devices; i++)
        if (strcmp(p->devices[i].id, d.id) == 0) return KL__CHOICE_FAIL(p, "device '%s' is declared twice", d.id);
    if ((nf - 2) % 2 != 0) return KL__CHOICE_FAIL(p, "device '%s': fields come in pairs 'key value'", d.id);
    for (j = 2; j < nf; j += 2) {
        const kl__choice_field *k = &f[j], *v = &f[j + 1];
        uint64_t x = 0;
        int *seen;
        if (kl__choice_is(k, "cc")) seen = &have_cc;
        else if (kl__choice_is(k, "sms")) seen = &have_sms;
        else if (kl__choice_is(k, "l2")) seen = &have_l2;
        else if (kl__choice_is(k, "mem_gib")) seen = &have_mem;
        else if (kl__choice_is(k, "bw_gbs")) seen = &have_bw;
        else if (kl__choice_is(k, "name")) seen = &have_name;
        else
            return KL__CHOICE_FAIL(p, "device '%s': unknown key '%.*s' (a device key is cc, sms, l2 and mem_gib; "
                                      "bw_gbs and name are recorded)",
                                   d.id, (int)k->n, k->s);
        if (*seen) return KL__CHOICE_FAIL(p, "device '%s': '%.*s' given twice", d.id, (int)k->n, k->s);
        *seen = 1;
        if (seen == &have_cc) {
            size_t dot = 0;
            uint64_t major, minor;
            while (dot < v->n && v->s[dot] != '.') dot++;
            if (dot == v->n || !kl__choice_uint(v->s, dot, 99u, &major) ||
                !kl__choice_uint(v->s + dot + 1, v->n - dot - 1, 99u, &minor))
                return KL__CHOICE_FAIL(p, "device '%s': cc '%.*s' is not MAJOR.MINOR (e.g. 9.0)", d.id, (int)v->n,
                                       v->s);
            d.cc_major = (uint32_t)major;
            d.cc_minor = (uint32_t)minor;
        } else if (seen == &have_name) {
            if (v->n >= sizeof d.name)
                return KL__CHOICE_FAIL(p, "device '%s': name is %lu characters; at most %u fit", d.id,
                                       (unsigned long)v->n, (unsigned)sizeof d.name - 1);
            memcpy(d.name, v->s, v->n);
        } else if (!kl__choice_uint(v->s, v->n, seen == &have_l2 ? UINT64_MAX : 0xffffffffu, &x)) {
            return KL__CHOICE_FAIL(p, "device '%s': %.*s '%.*s' is not a decimal number (no leading zeros, %s)", d.id,
                                   (int)k->n, k->s, (int)v->n, v->s, seen == &have_l2 ? "64 bits" : "32 bits");
        } else if (seen == &have_sms) {
            d.sm_count = (uint32_t)x;
        } else if (seen == &have_l2) {
            d.l2_bytes = x;
        } else if (seen == &have_mem) {
            d.mem_gib = (uint32_t)x;
        } else {
            d.bandwidth_gbs = (uint32_t)x;
        }
    }
    if (!have_cc || !have_sms || !have_l2 || !have_mem)
        return KL__CHOICE_FAIL(p, "device '%s' lacks %s (a device key is cc, sms, l2 and mem_gib)", d.id,
                               !have_cc ? "cc" : !have_sms ? "sms" : !have_l2 ? "l2" : "mem_gib");
    for (i = 0; i < p->num_devices; i++) {
        const kl_choice_device *o = &p->devices[i];
        if (o->cc_major == d.cc_major && o->cc_minor == d.cc_minor && o->sm_count == d.sm_count &&
            o->l2_bytes == d.l2_bytes && o->mem_gib == d.mem_gib)
            return KL__CHOICE_FAIL(p, "device '%s' has the key of device '%s' (cc, sms, l2, mem_gib)", d.id, o->id);
    }
    p->devices[p->num_devices++] = d;
    return KL_SUCCESS;
}

static kl_status kl__choice_row_line(kl__choice_parse *p, const kl__choice_field *f, int nf) {
    kl_choice_row r;
    const kl_choice_op *op;
    uint32_t i, alt = 0, have_keys = 0, have_tunables = 0;
    int j, have_alt = 0, have_time = 0;
    size_t n;
    memset(&r, 0, sizeof r);
    r.line = p->line;
    if (nf < 4) return KL__CHOICE_FAIL(p, "a row begins 'row DEVICE OPERATION eager|graph'");
    for (i = 0; i < p->num_devices; i++)
        if (kl__choice_is(&f[1], p->devices[i].id)) break;
    if (i == p->num_devices)
        return KL__CHOICE_FAIL(p, "row of unknown device '%.*s' (declare it first: device %.*s cc ... sms ... l2 ... "
                                  "mem_gib ...)",
                               (int)f[1].n, f[1].s, (int)f[1].n, f[1].s);
    r.device = i;
    op = kl__choice_find_op(p, &f[2]);
    if (op == NULL) return KL__CHOICE_FAIL(p, "unknown operation '%.*s'", (int)f[2].n, f[2].s);
    if (op->num_keys > KL_CHOICE_MAX_KEYS || op->num_tunables > KL_CHOICE_MAX_TUNABLES)
        return KL__CHOICE_FAIL(p, "operation %s has more keys or tunables than this runtime holds", op->name);
    r.op = op->name;
    if (kl__choice_is(&f[3], "eager")) r.policy = KL_CHOICE_EAGER;
    else if (kl__choice_is(&f[3], "graph")) r.policy = KL_CHOICE_GRAPH;
    else return KL__CHOICE_FAIL(p, "policy '%.*s' is not eager or graph", (int)f[3].n, f[3].s);
    /* alt= first: it says which tunables belong */
    for (j = 4; j < nf; j++) {
        if (f[j].n > 4 && memcmp(f[j].s, "alt=", 4) == 0) {
            if (have_alt) return KL__CHOICE_FAIL(p, "alt given twice");
            for (alt = 0; alt < op->num_alternatives; alt++)
                if (strlen(op->alternatives[alt]) == f[j].n - 4 && memcmp(op->alternatives[alt], f[j].s + 4, f[j].n - 4) == 0)
                    break;
            if (alt == op->num_alternatives)
                return KL__CHOICE_FAIL(p, "operation %s has no alternative '%.*s'", op->name, (int)f[j].n - 4,
                                       f[j].s + 4);
            have_alt = 1;
            r.alternative = op->alternatives[alt];
        }
    }
    if (!have_alt) return KL__CHOICE_FAIL(p, "row without alt=ALTERNATIVE");
    for (j = 4; j < nf; j++) {
        const char *eq = (const char *)memchr(f[j].s, '=', f[j].n);
        kl__choice_field k, v;
        uint64_t x;
        if (eq == NULL)
            return KL__CHOICE_FAIL(p, "'%.*s' is not NAME=VALUE", (int)f[j].n, f[j].s);
        k.s = f[j].s;
        k.n = (size_t)(eq - f[j].s);
        v.s = eq + 1;
        v.n = f[j].n - k.n - 1;
        if (kl__choice_is(&k, "alt")) continue;
        if (kl__choice_is(&k, "us")) {
            if (have_time) return KL__CHOICE_FAIL(p, "us given twice");
            if (!kl__choice_time(v.s, v.n, &r.time_ns))
                return KL__CHOICE_FAIL(p, "us='%.*s' is not a time in microseconds (digits, at most 3 after a point)",
                                       (int)v.n, v.s);
            have_time = 1;
            continue;
        }
        for (i = 0; i < op->num_keys; i++)
            if (kl__choice_is(&k, op->keys[i])) break;
        if (i < op->num_keys) {
            if (have_keys & (1u << i)) return KL__CHOICE_FAIL(p, "key %s given twice", op->keys[i]);
            if (!kl__choice_uint(v.s, v.n, 0xffffffffu, &x))
                return KL__CHOICE_FAIL(p, "%s='%.*s' is not a decimal u32 (no leading zeros)", op->keys[i], (int)v.n,
                                       v.s);
            have_keys |= 1u << i;
            r.keys[i] = (uint32_t)x;
            continue;
        }
        for (i = 0; i < op->num_tunables; i++)
            if (kl__choice_is(&k, op->tunables[i])) break;
        if (i < op->num_tunables && (op->alternative_tunables[alt] & (1u << i))) {
            if (have_tunables & (1u << i)) return KL__CHOICE_FAIL(p, "tunable %s given twice", op->tunables[i]);
            if (!kl__choice_uint(v.s, v.n, 0xffffffffu, &x))
                return KL__CHOICE_FAIL(p, "%s='%.*s' is not a decimal u32 (no leading zeros)", op->tunables[i],
                                       (int)v.n, v.s);
            have_tunables |= 1u << i;
            r.tunables[i] = (uint32_t)x;
            continue;
        }
        return KL__CHOICE_FAIL(p, "'%.*s' is no key of operation %s%s%s", (int)k.n, k.s, op->name,
                               i < op->num_tunables ? " nor a tunable of its alternative " : "",
                               i < op->num_tunables ? r.alternative : "");
    }
    if (!have_time) return KL__CHOICE_FAIL(p, "row without us=TIME");
    for (i = 0; i < op->num_keys; i++)
        if (!(have_keys & (1u << i))) return KL__CHOICE_FAIL(p, "row without key %s=VALUE", op->keys[i]);
    for (i = 0; i < op->num_tunables; i++)
        if ((op->alternative_tunables[alt] & (1u << i)) && !(have_tunables & (1u << i)))
            return KL__CHOICE_FAIL(p, "row of %s without its tunable %s=VALUE", r.alternative, op->tunables[i]);
    for (n = 0; n < p->num_rows; n++) {
        const kl_choice_row *o = &p->rows[n];
        if (o->device == r.device && o->op == r.op && o->policy == r.policy && o->alternative == r.alternative &&
            memcmp(o->keys, r.keys, sizeof r.keys) == 0)
            return KL__CHOICE_FAIL(p, "duplicate row: line %u times %s at the same shape, device and policy",
                                   (unsigned)o->line, r.alternative);
    }
    if (p->num_rows >= KL_CHOICE_TABLE_MAX_ROWS)
        return KL__CHOICE_FAIL(p, "more than %lu rows (KL_CHOICE_TABLE_MAX_ROWS)",
                               (unsigned long)KL_CHOICE_TABLE_MAX_ROWS);
    if (p->num_rows == p->cap_rows) {
        const size_t cap = p->cap_rows ? 2 * p->cap_rows : 64;
        kl_choice_row *grown = (kl_choice_row *)realloc(p->rows, cap * sizeof *grown);
        if (grown == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "%s: out of memory reading its rows", p->name);
        p->rows = grown;
        p->cap_rows = cap;
    }
    p->rows[p->num_rows++] = r;
    return KL_SUCCESS;
}

kl_status kl_choice_table_load_text(const char *text, size_t size, const char *name, const kl_choice_op *const *ops,
                                    kl_choice_table *out) {
    kl__choice_parse p;
    kl_status st = KL_SUCCESS;
    size_t pos = 0;
    int have_magic = 0, have_end = 0;
    if (out == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_load_text: out is NULL");
    memset(out, 0, sizeof *out);
    if (name == NULL) name = "<table>";
    if (text == NULL || ops == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_load_text: %s is NULL", text == NULL ? "text" : "ops");
    memset(&p, 0, sizeof p);
    p.name = name;
    p.ops = ops;
    if (size > KL_CHOICE_TABLE_MAX_BYTES)
        return kl__fail(KL_ERROR_CHOICE_TABLE, "%s: %lu bytes; at most %lu are read (KL_CHOICE_TABLE_MAX_BYTES)", name,
                        (unsigned long)size, (unsigned long)KL_CHOICE_TABLE_MAX_BYTES);
    p.devices = (kl_choice_device *)calloc(KL_CHOICE_MAX_DEVICES, sizeof *p.devices);
    if (p.devices == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "%s: out of memory", name);
    while (pos < size && st == KL_SUCCESS) {
        const char *line = text + pos;
        const char *eol = (const char *)memchr(line, '\n', size - pos);
        const size_t len = eol ? (size_t)(eol - line) : size - pos;
        kl__choice_field f[2 * KL_CHOICE_MAX_KEYS + 2 * KL_CHOICE_MAX_TUNABLES + 16];
        const int maxf = (int)(sizeof f / sizeof f[0]);
        int nf = 0;
        size_t i = 0;
        p.line++;
        pos += len + (eol ? 1u : 0u);
        for (i = 0; i < len; i++) {
            const unsigned char c = (unsigned char)line[i];
            if (c < 0x20u || c == 0x7fu) {
                st = KL__CHOICE_FAIL(&p, "a control character (byte 0x%02x at column %lu)", (unsigned)c,
                                     (unsigned long)i + 1);
                break;
            }
        }
        if (st != KL_SUCCESS) break;
        if (len > KL_CHOICE_LINE_MAX) {
            st = KL__CHOICE_FAIL(&p, "the line is %lu characters; at most %u are read", (unsigned long)len,
                                 (unsigned)KL_CHOICE_LINE_MAX);
            break;
        }
        if (eol == NULL) {
            st = KL__CHOICE_FAIL(&p, "the last line has no line end (truncated?)");
            break;
        }
        i = 0;
        while (i < len) {
            size_t start;
            while (i < len && line[i] == ' ') i++;
            if (i == len) break;
            start = i;
            while (i < len && line[i] != ' ') i++;
            if (nf == maxf) {
                st = KL__CHOICE_FAIL(&p, "more than %d fields", maxf);
                break;
            }
            f[nf].s = line + start;
            f[nf].n = i - start;
            nf++;
        }
        if (st != KL_SUCCESS) break;
        if (nf == 0 || f[0].s[0] == '#') continue;
        if (have_end) {
            st = KL__CHOICE_FAIL(&p, "text after the 'end' line");
        } else if (!have_magic) {
            if (!kl__choice_is(&f[0], "klaunch-choices") || nf != 2)
                st = KL__CHOICE_FAIL(&p, "not a choice table: the first line is 'klaunch-choices %d'",
                                     KL_CHOICE_TABLE_VERSION);
            else if (!(f[1].n == 1 && f[1].s[0] == '0' + KL_CHOICE_TABLE_VERSION))
                st = KL__CHOICE_FAIL(&p, "table version %.*s; this runtime reads %d", (int)f[1].n, f[1].s,
                                     KL_CHOICE_TABLE_VERSION);
            have_magic = 1;
        } else if (kl__choice_is(&f[0], "device")) {
            st = kl__choice_device_line(&p, f, nf);
        } else if (kl__choice_is(&f[0], "row")) {
            st = kl__choice_row_line(&p, f, nf);
        } else if (kl__choice_is(&f[0], "end")) {
            if (nf != 1) st = KL__CHOICE_FAIL(&p, "'end' takes no fields");
            have_end = 1;
        } else {
            st = KL__CHOICE_FAIL(&p, "unknown line '%.*s' (expected device, row or end)", (int)f[0].n, f[0].s);
        }
    }
    if (st == KL_SUCCESS && !have_magic) {
        p.line = p.line ? p.line : 1u;
        st = KL__CHOICE_FAIL(&p, "empty: not a choice table (its first line is 'klaunch-choices %d')",
                             KL_CHOICE_TABLE_VERSION);
    }
    if (st == KL_SUCCESS && !have_end) st = KL__CHOICE_FAIL(&p, "ends without its 'end' line (truncated?)");
    if (st != KL_SUCCESS) {
        free(p.devices);
        free(p.rows);
        return st;
    }
    {
        /* One allocation the table owns: devices, then rows. */
        const size_t dev_bytes = (p.num_devices ? p.num_devices : 1u) * sizeof(kl_choice_device);
        const size_t align = sizeof(kl_choice_row) >= 8 ? 8u : sizeof(kl_choice_row);
        const size_t rows_at = (dev_bytes + align - 1u) / align * align;
        char *block = (char *)malloc(rows_at + (p.num_rows ? p.num_rows : 1u) * sizeof(kl_choice_row));
        if (block == NULL) {
            free(p.devices);
            free(p.rows);
            return kl__fail(KL_ERROR_OUT_OF_MEMORY, "%s: out of memory", name);
        }
        memcpy(block, p.devices, p.num_devices * sizeof(kl_choice_device));
        if (p.num_rows) memcpy(block + rows_at, p.rows, p.num_rows * sizeof(kl_choice_row));
        free(p.devices);
        free(p.rows);
        out->devices = (const kl_choice_device *)(void *)block;
        out->num_devices = p.num_devices;
        out->rows = (const kl_choice_row *)(void *)(block + rows_at);
        out->num_rows = p.num_rows;
        out->storage = block;
    }
    return KL_SUCCESS;
}

kl_status kl_choice_table_load_file(const char *path, const kl_choice_op *const *ops, kl_choice_table *out) {
    char *buf;
    size_t size = 0;
    kl_status st;
    if (out == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_load_file: out is NULL");
    memset(out, 0, sizeof *out);
    if (path == NULL) return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_load_file: path is NULL");
    buf = (char *)malloc((size_t)KL_CHOICE_TABLE_MAX_BYTES + 1u);
    if (buf == NULL) return kl__fail(KL_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
#if defined(__unix__) || defined(__APPLE__)
    {
        /* Without blocking (a FIFO opens at once), a regular file only. */
        struct stat sb;
        const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            free(buf);
            return kl__fail(KL_ERROR_FILE_IO, "%s: cannot open it (%s)", path, strerror(errno));
        }
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            close(fd);
            free(buf);
            return kl__fail(KL_ERROR_FILE_IO, "%s: not a regular file", path);
        }
        if ((unsigned long long)sb.st_size > (unsigned long long)KL_CHOICE_TABLE_MAX_BYTES) {
            close(fd);
            free(buf);
            return kl__fail(KL_ERROR_CHOICE_TABLE, "%s: %llu bytes; at most %lu are read (KL_CHOICE_TABLE_MAX_BYTES)",
                            path, (unsigned long long)sb.st_size, (unsigned long)KL_CHOICE_TABLE_MAX_BYTES);
        }
        for (;;) {
            const ssize_t n = read(fd, buf + size, (size_t)KL_CHOICE_TABLE_MAX_BYTES + 1u - size);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                close(fd);
                free(buf);
                return kl__fail(KL_ERROR_FILE_IO, "%s: read failed (%s)", path, strerror(errno));
            }
            if (n == 0) break;
            size += (size_t)n;
            if (size > KL_CHOICE_TABLE_MAX_BYTES) break; /* grew while read: refused below */
        }
        close(fd);
    }
#else
    {
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            free(buf);
            return kl__fail(KL_ERROR_FILE_IO, "%s: cannot open it", path);
        }
        size = fread(buf, 1, (size_t)KL_CHOICE_TABLE_MAX_BYTES + 1u, f);
        fclose(f);
    }
#endif
    st = kl_choice_table_load_text(buf, size, path, ops, out);
    free(buf);
    return st;
}

void kl_choice_table_free(kl_choice_table *table) {
    if (table == NULL || table->storage == NULL) return;
    free(table->storage);
    memset(table, 0, sizeof *table);
}

kl_status kl_choice_table_write(FILE *f, const kl_choice_table *t, const kl_choice_op *const *ops) {
    uint32_t d;
    size_t i;
    if (f == NULL || t == NULL || ops == NULL)
        return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_write: a NULL argument");
    fprintf(f, "klaunch-choices %d\n", KL_CHOICE_TABLE_VERSION);
    for (d = 0; d < t->num_devices; d++) {
        const kl_choice_device *x = &t->devices[d];
        fprintf(f, "device %s cc %u.%u sms %u l2 %llu mem_gib %u", x->id, (unsigned)x->cc_major,
                (unsigned)x->cc_minor, (unsigned)x->sm_count, (unsigned long long)x->l2_bytes, (unsigned)x->mem_gib);
        if (x->bandwidth_gbs) fprintf(f, " bw_gbs %u", (unsigned)x->bandwidth_gbs);
        if (x->name[0]) fprintf(f, " name %s", x->name);
        fputc('\n', f);
    }
    for (i = 0; i < t->num_rows; i++) {
        const kl_choice_row *r = &t->rows[i];
        const kl_choice_op *const *o;
        uint32_t k, a;
        for (o = ops; *o != NULL; o++)
            if (r->op != NULL && strcmp((*o)->name, r->op) == 0) break;
        if (*o == NULL || r->device >= t->num_devices || r->alternative == NULL)
            return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_write: row %lu names no known operation or device",
                            (unsigned long)i);
        for (a = 0; a < (*o)->num_alternatives; a++)
            if (strcmp((*o)->alternatives[a], r->alternative) == 0) break;
        if (a == (*o)->num_alternatives)
            return kl__fail(KL_ERROR_INVALID_ARGUMENT, "kl_choice_table_write: row %lu: %s has no alternative %s",
                            (unsigned long)i, (*o)->name, r->alternative);
        fprintf(f, "row %s %s %s", t->devices[r->device].id, (*o)->name, r->policy == KL_CHOICE_GRAPH ? "graph" : "eager");
        for (k = 0; k < (*o)->num_keys; k++) fprintf(f, " %s=%u", (*o)->keys[k], (unsigned)r->keys[k]);
        fprintf(f, " alt=%s us=%llu.%03u", r->alternative, (unsigned long long)(r->time_ns / 1000u),
                (unsigned)(r->time_ns % 1000u));
        for (k = 0; k < (*o)->num_tunables; k++)
            if ((*o)->alternative_tunables[a] & (1u << k)) fprintf(f, " %s=%u", (*o)->tunables[k], (unsigned)r->tunables[k]);
        fputc('\n', f);
    }
    fprintf(f, "end\n");
    return ferror(f) ? kl__fail(KL_ERROR_FILE_IO, "kl_choice_table_write: write failed") : KL_SUCCESS;
}

#ifdef __cplusplus
}
#endif
#endif /* KLAUNCH_IMPLEMENTATION */
