/* launch_cost: host time per launch of paged_decode_attn_fp8 (18 launcher
 * parameters, 17 kernel arguments), each launch timed on its own.
 *
 *   launch_cost [--launches N] [--batch B] [--json FILE]
 *
 * Modes, run in turns a batch at a time so that drift on a shared machine
 * hits them alike:
 *   (a) raw       cuLaunchKernel with arguments packed once, the CUfunction
 *                 taken from the kl_kernel
 *   (b) wrapper   kl_paged_decode_attn_fp8 + the CUDA backend
 *   (c) record    kl_paged_decode_attn_fp8 + the recording backend (no driver)
 *   (d) check     kl_paged_decode_attn_fp8_check: the wrapper's checks only
 *   (e) noop      kl_paged_decode_attn_fp8 + a backend whose launch does
 *                 nothing: the wrapper's checks, packing and indirect call
 * After every batch of B launches (default 256) the device is synchronised
 * (a, b) or the records cleared (c), outside the timed region, so the launch
 * queue never fills. N (default 100000) launches per mode are timed, after
 * two batches of warm-up. The kernel runs for real in (a) and (b) on
 * valid buffers (one sequence of one position); its output is checked at
 * the end.
 *
 * The timer is rdtsc between lfences on x86-64 (calibrated against
 * CLOCK_MONOTONIC), clock_gettime(CLOCK_MONOTONIC) elsewhere; the median
 * cost of an empty timed region is subtracted from every sample.
 *
 * Without a CUDA driver or GPU, (a) and (b) are skipped and the rest run.
 * Exit status 1 when a launch fails or the kernel's output is wrong.
 * Targets (printed, not enforced): (b)-(a) <= 100 ns and the wrapper alone
 * <= 20 ns at the median.
 */
#define _POSIX_C_SOURCE 200809L
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/launch/launch_bench.h"
#include "kernels/paged_decode_fatbins.h"

enum { LC_RAW, LC_WRAPPER, LC_RECORD, LC_CHECK, LC_NOOP, LC_MODES };
static const char *const lc_keys[LC_MODES] = {"raw", "wrapper_cuda", "wrapper_record", "check", "wrapper_noop"};
static const char *const lc_labels[LC_MODES] = {
    "(a) raw cuLaunchKernel, packed once",
    "(b) kl wrapper + CUDA backend",
    "(c) kl wrapper + recording backend",
    "(d) kl_..._check only",
    "(e) kl wrapper + no-op backend",
};

/* cuLaunchKernel's type, with the driver's handles as opaque pointers. */
typedef int (*lc_cu_launch_kernel)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, kl_stream stream, void **params, void **extra);

/* ---- timer ------------------------------------------------------------- */

static uint64_t lc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* lfence before: earlier instructions have finished; after: later ones
 * have not started. The memory clobber keeps loads of the arguments after it. */
static inline uint64_t lc_ticks(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
}
#define LC_TIMER "rdtsc"
#else
static inline uint64_t lc_ticks(void) {
    uint64_t t;
    LC_BARRIER();
    t = lc_now_ns();
    LC_BARRIER();
    return t;
}
#define LC_TIMER "clock_gettime(CLOCK_MONOTONIC)"
#endif

static double lc_ticks_per_ns = 1.0;

static void lc_calibrate(void) {
#if defined(__x86_64__)
    const uint64_t n0 = lc_now_ns(), t0 = lc_ticks();
    uint64_t n1, t1;
    do {
        n1 = lc_now_ns();
    } while (n1 - n0 < 100000000u); /* 100 ms */
    t1 = lc_ticks();
    lc_ticks_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
#endif
}

/* ---- samples ------------------------------------------------------------ */

typedef struct lc_stats {
    double median, p99, mean, min;
} lc_stats;

static int lc_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static lc_stats lc_summarise(double *ns, size_t n) {
    lc_stats s;
    double sum = 0.0;
    size_t i;
    qsort(ns, n, sizeof *ns, lc_cmp);
    for (i = 0; i < n; i++) sum += ns[i];
    s.median = ns[n / 2];
    s.p99 = ns[(n * 99) / 100];
    s.mean = sum / (double)n;
    s.min = ns[0];
    return s;
}

/* ---- the benchmark -------------------------------------------------------- */

typedef struct lc_state {
    lc_args args; /* read after the timer on every launch */
    kl_cuda_backend cuda;
    int have_gpu;
    kl_module cuda_mod, rec_mod;
    kl_kernel cuda_k, rec_k, noop_k;
    kl_record_backend rb;
    kl_record *records;
    lc_cu_launch_kernel cu_launch;
    void *raw_params[17];
    void *dev[6]; /* q, k_cache, v_cache, output, block_tables, seq_lens */
    char device[128];
} lc_state;

static lc_state S;

static int lc_fail(const char *what) {
    fprintf(stderr, "launch_cost: %s: %s\n", what, kl_last_error_message());
    return 1;
}

/* Device buffers for one sequence of one position: q and every cached k
 * and v element 1.0 (bf16 0x3f80, E4M3 0x38), so each output element is
 * v * v_scale = 1.0 whatever the scores. */
static int lc_setup_gpu(void) {
    lc_args *a = &S.args;
    static uint16_t q[128];
    static uint8_t cache[2048];
    const int32_t table[1] = {0}, lens[1] = {1};
    const size_t bytes[6] = {sizeof q, sizeof cache, sizeof cache, 128 * 2, sizeof table, sizeof lens};
    int i;
    for (i = 0; i < 128; i++) q[i] = 0x3f80;
    memset(cache, 0x38, sizeof cache);
    for (i = 0; i < 6; i++)
        if (kl_cuda_malloc(&S.cuda, &S.dev[i], bytes[i]) != KL_SUCCESS) return lc_fail("kl_cuda_malloc");
    if (kl_cuda_memcpy_htod(&S.cuda, S.dev[0], q, sizeof q) != KL_SUCCESS ||
        kl_cuda_memcpy_htod(&S.cuda, S.dev[1], cache, sizeof cache) != KL_SUCCESS ||
        kl_cuda_memcpy_htod(&S.cuda, S.dev[2], cache, sizeof cache) != KL_SUCCESS ||
        kl_cuda_memset_d8(&S.cuda, S.dev[3], 0xff, bytes[3]) != KL_SUCCESS || /* NaN until written */
        kl_cuda_memcpy_htod(&S.cuda, S.dev[4], table, sizeof table) != KL_SUCCESS ||
        kl_cuda_memcpy_htod(&S.cuda, S.dev[5], lens, sizeof lens) != KL_SUCCESS)
        return lc_fail("uploading the inputs");
    a->q = (const kl_bf16 *)S.dev[0];
    a->k_cache = (const kl_fp8_e4m3 *)S.dev[1];
    a->v_cache = (const kl_fp8_e4m3 *)S.dev[2];
    a->output = (kl_bf16 *)S.dev[3];
    a->block_tables = (const int32_t *)S.dev[4];
    a->seq_lens = (const int32_t *)S.dev[5];

    if (kl_module_load(&S.cuda.base, kl_fatbin_paged_decode_gqa8_d128, kl_fatbin_paged_decode_gqa8_d128_size,
                       &S.cuda_mod) != KL_SUCCESS)
        return lc_fail("kl_module_load(paged_decode gqa8_d128)");
    if (kl_paged_decode_attn_fp8_get(&S.cuda_k, &S.cuda_mod) != KL_SUCCESS)
        return lc_fail("kl_paged_decode_attn_fp8_get");
    {
        void *sym = kl_cuda_backend_symbol(&S.cuda, "cuLaunchKernel");
        if (sym == NULL) {
            fprintf(stderr, "launch_cost: the driver has no cuLaunchKernel\n");
            return 1;
        }
        memcpy(&S.cu_launch, &sym, sizeof sym);
    }
    /* (a)'s arguments, packed once, in kernel order (the launcher's without num_seqs). */
    S.raw_params[0] = &a->q;
    S.raw_params[1] = &a->k_cache;
    S.raw_params[2] = &a->v_cache;
    S.raw_params[3] = &a->output;
    S.raw_params[4] = &a->block_tables;
    S.raw_params[5] = &a->seq_lens;
    S.raw_params[6] = &a->max_blocks_per_seq;
    S.raw_params[7] = &a->num_q_heads;
    S.raw_params[8] = &a->num_kv_heads;
    S.raw_params[9] = &a->head_dim;
    S.raw_params[10] = &a->block_size;
    S.raw_params[11] = &a->inv_sqrt_d;
    S.raw_params[12] = &a->k_scale;
    S.raw_params[13] = &a->v_scale;
    S.raw_params[14] = &a->q_stride;
    S.raw_params[15] = &a->cache_stride;
    S.raw_params[16] = &a->sliding_window;
    kl_cuda_device_name(&S.cuda, S.device, sizeof S.device);
    return 0;
}

/* Every output element must be 1.0 (see lc_setup_gpu); NaN means unwritten. */
static int lc_verify_output(void) {
    uint16_t out[128];
    int i, bad = 0;
    if (kl_cuda_memcpy_dtoh(&S.cuda, out, S.dev[3], sizeof out) != KL_SUCCESS) return lc_fail("downloading output");
    for (i = 0; i < 128; i++) {
        const uint32_t u = (uint32_t)out[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        if (!(f > 0.99f && f < 1.01f)) {
            if (bad++ < 5) fprintf(stderr, "launch_cost: output[%d] = %g (bf16 0x%04x), want 1.0\n", i, f, out[i]);
        }
    }
    if (bad) {
        fprintf(stderr, "launch_cost: the kernel's output is wrong in %d of 128 elements\n", bad);
        return 1;
    }
    return 0;
}

/* Times `count` launches of one mode into ns[0..count); returns nonzero on a failed launch. */
static int lc_batch(int mode, double *ns, size_t count, double overhead) {
    const lc_args *a = &S.args;
    size_t i;
    for (i = 0; i < count; i++) {
        uint64_t t0, t1;
        kl_status st;
        int r = 0;
        switch (mode) {
        case LC_RAW:
            t0 = lc_ticks();
            r = S.cu_launch(S.cuda_k.fn, 1, 1, 1, 256, 1, 1, 0, NULL, S.raw_params, NULL);
            t1 = lc_ticks();
            st = r == 0 ? KL_SUCCESS : KL_ERROR_LAUNCH_FAILED;
            break;
        case LC_WRAPPER:
            t0 = lc_ticks();
            st = lc_launch(&S.cuda_k, a, NULL);
            t1 = lc_ticks();
            break;
        case LC_RECORD:
            t0 = lc_ticks();
            st = lc_launch(&S.rec_k, a, NULL);
            t1 = lc_ticks();
            break;
        case LC_CHECK:
            t0 = lc_ticks();
            st = lc_check(&S.rec_k, a);
            t1 = lc_ticks();
            break;
        default:
            t0 = lc_ticks();
            st = lc_launch(&S.noop_k, a, NULL);
            t1 = lc_ticks();
            break;
        }
        if (st != KL_SUCCESS) {
            if (mode == LC_RAW)
                fprintf(stderr, "launch_cost: (a) cuLaunchKernel returned CUresult %d\n", r);
            else
                fprintf(stderr, "launch_cost: %s: %s\n", lc_labels[mode], kl_last_error_message());
            return 1;
        }
        if (ns != NULL) ns[i] = (double)(t1 - t0) / lc_ticks_per_ns - overhead;
    }
    if (mode == LC_RAW || mode == LC_WRAPPER) {
        if (kl_cuda_synchronize(&S.cuda) != KL_SUCCESS) return lc_fail("kl_cuda_synchronize");
    } else if (mode == LC_RECORD) {
        if (S.rb.count != count) {
            fprintf(stderr, "launch_cost: (c) recorded %lu launches of %lu\n", (unsigned long)S.rb.count,
                    (unsigned long)count);
            return 1;
        }
        kl_record_backend_clear(&S.rb);
    }
    return 0;
}

static double lc_timer_overhead(void) {
    enum { N = 100000 };
    static double ns[N];
    size_t i;
    for (i = 0; i < N; i++) {
        const uint64_t t0 = lc_ticks(), t1 = lc_ticks();
        ns[i] = (double)(t1 - t0) / lc_ticks_per_ns;
    }
    return lc_summarise(ns, N).median;
}

int main(int argc, char **argv) {
    size_t launches = 100000, batch = 256, done, i;
    const char *json = NULL;
    double overhead, *samples[LC_MODES] = {NULL};
    lc_stats stats[LC_MODES];
    int mode, run[LC_MODES];
    kl_status st;

    for (i = 1; i < (size_t)argc; i++) {
        if (strcmp(argv[i], "--launches") == 0 && i + 1 < (size_t)argc)
            launches = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < (size_t)argc)
            batch = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < (size_t)argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--launches N] [--batch B] [--json FILE]\n", argv[0]);
            return 1;
        }
    }
    if (launches == 0 || batch == 0) {
        fprintf(stderr, "launch_cost: --launches and --batch must be positive\n");
        return 1;
    }

    lc_args_init(&S.args);
    /* Placeholders for the modes that never touch the device. */
    S.args.q = (const kl_bf16 *)(uintptr_t)0x1000;
    S.args.k_cache = S.args.v_cache = (const kl_fp8_e4m3 *)(uintptr_t)0x2000;
    S.args.output = (kl_bf16 *)(uintptr_t)0x3000;
    S.args.block_tables = S.args.seq_lens = (const int32_t *)(uintptr_t)0x4000;

    st = kl_cuda_backend_init(&S.cuda, 0);
    S.have_gpu = st == KL_SUCCESS;
    if (!S.have_gpu)
        printf("launch_cost: no CUDA driver/GPU, so no (a) and (b): %s\n", kl_last_error_message());
    else if (lc_setup_gpu() != 0)
        return 1;

    S.records = (kl_record *)calloc(batch, sizeof *S.records);
    if (S.records == NULL) return 1;
    kl_record_backend_init(&S.rb, S.records, batch);
    if (lc_record_kernel(&S.rb, &S.rec_mod, &S.rec_k, &S.noop_k) != KL_SUCCESS)
        return lc_fail("recording backend module");

    for (mode = 0; mode < LC_MODES; mode++) {
        run[mode] = S.have_gpu || (mode != LC_RAW && mode != LC_WRAPPER);
        if (run[mode] && (samples[mode] = (double *)malloc(launches * sizeof(double))) == NULL) return 1;
    }

    lc_calibrate();
    overhead = lc_timer_overhead();

    /* Warm-up: caches, branch predictors, the driver's first launches. */
    for (i = 0; i < 2; i++)
        for (mode = 0; mode < LC_MODES; mode++)
            if (run[mode] && lc_batch(mode, NULL, batch, 0.0) != 0) return 1;
    for (done = 0; done < launches; done += batch) {
        const size_t n = launches - done < batch ? launches - done : batch;
        for (mode = 0; mode < LC_MODES; mode++)
            if (run[mode] && lc_batch(mode, samples[mode] + done, n, overhead) != 0) return 1;
    }
    if (S.have_gpu && lc_verify_output() != 0) return 1;

    printf("launch_cost: paged_decode_attn_fp8 (18 launcher parameters, 17 kernel arguments), grid (1, 1), "
           "block 256, stream NULL\n");
    printf("device: %s; %lu launches per mode, synchronised every %lu (not timed); timer %s, %.3f ticks/ns, "
           "%.1f ns timer overhead subtracted\n",
           S.have_gpu ? S.device : "none", (unsigned long)launches, (unsigned long)batch, LC_TIMER,
           lc_ticks_per_ns, overhead);
    printf("%-38s %10s %10s %10s %10s\n", "mode", "median ns", "p99 ns", "mean ns", "min ns");
    for (mode = 0; mode < LC_MODES; mode++) {
        if (!run[mode]) {
            printf("%-38s %10s\n", lc_labels[mode], "skipped");
            continue;
        }
        stats[mode] = lc_summarise(samples[mode], launches);
        printf("%-38s %10.1f %10.1f %10.1f %10.1f\n", lc_labels[mode], stats[mode].median, stats[mode].p99,
               stats[mode].mean, stats[mode].min);
    }
    if (S.have_gpu) {
        const double d = stats[LC_WRAPPER].median - stats[LC_RAW].median;
        printf("overhead (b)-(a) at the median: %.1f ns (target <= 100 ns): %s\n", d, d <= 100.0 ? "met" : "MISSED");
    }
    printf("wrapper alone, (c) recording backend: %.1f ns (target <= 20 ns): %s\n", stats[LC_RECORD].median,
           stats[LC_RECORD].median <= 20.0 ? "met" : "MISSED");
    printf("wrapper alone, (e) no-op backend:     %.1f ns (target <= 20 ns): %s\n", stats[LC_NOOP].median,
           stats[LC_NOOP].median <= 20.0 ? "met" : "MISSED");

    if (json != NULL) {
        FILE *f = fopen(json, "w");
        if (f == NULL) {
            perror(json);
            return 1;
        }
        fprintf(f, "{\"benchmark\": \"launch_cost\", \"kernel\": \"paged_decode_attn_fp8\", \"device\": \"%s\", "
                   "\"launches\": %lu, \"batch\": %lu, \"timer\": \"%s\", \"timer_overhead_ns\": %.2f, \"results\": [",
                S.have_gpu ? S.device : "none", (unsigned long)launches, (unsigned long)batch, LC_TIMER, overhead);
        for (mode = 0, i = 0; mode < LC_MODES; mode++) {
            if (!run[mode]) continue;
            fprintf(f, "%s\n  {\"key\": \"%s\", \"name\": \"%s\", \"median_ns\": %.2f, \"p99_ns\": %.2f, "
                       "\"mean_ns\": %.2f, \"min_ns\": %.2f}",
                    i++ ? "," : "", lc_keys[mode], lc_labels[mode], stats[mode].median, stats[mode].p99,
                    stats[mode].mean, stats[mode].min);
        }
        fprintf(f, "\n]}\n");
        fclose(f);
    }
    return 0;
}
