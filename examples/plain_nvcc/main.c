/* row_scale_demo: a C program that uses klaunch without Bazel.
 *
 *   row_scale_demo FATBIN     runs row_scale_f32 on GPU 0 from the fatbin file
 *                             and checks every element against the CPU
 *   row_scale_demo --dry-run  the same launch on klaunch's recording backend:
 *                             prints what would reach cuLaunchKernel and a
 *                             refused launch; needs no GPU, driver or fatbin
 *
 * Exit status: 0 when everything matched, 1 on a failure, 2 when there is no
 * CUDA driver or GPU. The Makefile builds it: cc, the generated
 * klaunch/row_scale.h and klaunch's include/ directory; nothing to link but
 * -ldl (the CUDA backend dlopens libcuda.so.1).
 */
#define KLAUNCH_IMPLEMENTATION /* klaunch's runtime lives in this one file */
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"
#include "klaunch/row_scale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 3u
#define N 1000u
#define STRIDE 1003u /* 3 elements per row the kernel must leave alone */
#define SENTINEL 0x7fc0beefu /* a NaN the kernel never writes */

static int fail(const char *what) {
    fprintf(stderr, "row_scale_demo: %s: %s\n", what, kl_last_error_message());
    return 1;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The recording backend loads the metadata text a fatbin of this family
 * carries (klaunch's docs/DESIGN.md) in place of the fatbin. */
static int dry_run(void) {
    /* Device addresses are never dereferenced here. */
    const float *x = (const float *)(uintptr_t)0x100000u;
    float *y = (float *)(uintptr_t)0x200000u;
    const float *scale = (const float *)(uintptr_t)0x300000u;
    kl_record recs[2];
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k;
    kl_status st;
    uint32_t i, n = 0, stride = 0;

    kl_record_backend_init(&rb, recs, 2);
    /* The module metadata the fatbin carries, from the generated header. */
    if (kl_record_backend_load_variant(&rb, kl_row_scale_variant_info, "plain", &mod) != KL_SUCCESS)
        return fail("kl_record_backend_load_variant");
    if (kl_row_scale_f32_get(&k, &mod) != KL_SUCCESS) return fail("kl_row_scale_f32_get");

    if (kl_row_scale_f32(&k, x, y, scale, N, STRIDE, ROWS, NULL) != KL_SUCCESS) return fail("kl_row_scale_f32");
    printf("launch: %s grid (%u, %u, %u) block (%u, %u, %u), %u shared bytes, %u argument bytes:",
           recs[0].entry, (unsigned)recs[0].grid[0], (unsigned)recs[0].grid[1], (unsigned)recs[0].grid[2],
           (unsigned)recs[0].block[0], (unsigned)recs[0].block[1], (unsigned)recs[0].block[2],
           (unsigned)recs[0].shared_bytes, (unsigned)recs[0].arg_bytes);
    for (i = 0; i < recs[0].arg_bytes; i++) printf("%s%02x", i % 8 ? "" : " ", recs[0].args[i]);
    printf("\n");

    /* Refused: a row of STRIDE + 1 elements does not fit in its stride. */
    st = kl_row_scale_f32(&k, x, y, scale, STRIDE + 1, STRIDE, ROWS, NULL);
    printf("refused: %s\n", kl_last_error_message());

    /* What the spec says: grid (ceil_div(1000, 256), 3), block 256; x, y,
     * scale at 0, 8, 16, n at 24, stride at 28 (32 bytes). */
    memcpy(&n, recs[0].args + 24, 4);
    memcpy(&stride, recs[0].args + 28, 4);
    if (rb.count != 1 || recs[0].grid[0] != 4 || recs[0].grid[1] != ROWS || recs[0].grid[2] != 1 ||
        recs[0].block[0] != 256 || recs[0].arg_bytes != 32 || n != N || stride != STRIDE ||
        st != KL_ERROR_PRECONDITION) {
        fprintf(stderr, "row_scale_demo: the dry run differs from row_scale.yaml (%lu launches recorded, %s)\n",
                (unsigned long)rb.count, kl_status_name(st));
        return 1;
    }
    kl_module_unload(&mod);
    printf("dry run ok\n");
    return 0;
}

static int gpu_run(const char *fatbin) {
    static float x[ROWS * STRIDE], y[ROWS * STRIDE], scale[ROWS];
    kl_cuda_backend cuda;
    kl_module mod;
    kl_kernel k;
    kl_status st;
    void *dx = NULL, *dy = NULL, *ds = NULL;
    const size_t bytes = sizeof x;
    uint32_t r, i, bad = 0;
    char name[128] = "", variant[sizeof mod.variant];

    st = kl_cuda_backend_init(&cuda, 0);
    if (st == KL_ERROR_NO_DRIVER || st == KL_ERROR_NO_DEVICE) {
        fprintf(stderr, "row_scale_demo: no CUDA driver/GPU: %s\n", kl_last_error_message());
        return 2;
    }
    if (st != KL_SUCCESS) return fail("kl_cuda_backend_init");
    if (kl_module_load_file(&cuda.base, fatbin, &mod) != KL_SUCCESS) return fail("kl_module_load_file");
    if (kl_row_scale_f32_get(&k, &mod) != KL_SUCCESS) return fail("kl_row_scale_f32_get");

    for (r = 0; r < ROWS; r++) {
        scale[r] = 0.5f + 1.25f * (float)r;
        for (i = 0; i < STRIDE; i++) {
            const uint32_t sentinel = SENTINEL;
            x[r * STRIDE + i] = (float)((r * 7919u + i * 104729u) % 2001u) / 1000.0f - 1.0f;
            memcpy(&y[r * STRIDE + i], &sentinel, 4);
        }
    }
    if (kl_cuda_malloc(&cuda, &dx, bytes) != KL_SUCCESS || kl_cuda_malloc(&cuda, &dy, bytes) != KL_SUCCESS ||
        kl_cuda_malloc(&cuda, &ds, sizeof scale) != KL_SUCCESS)
        return fail("kl_cuda_malloc");
    if (kl_cuda_memcpy_htod(&cuda, dx, x, bytes) != KL_SUCCESS ||
        kl_cuda_memcpy_htod(&cuda, dy, y, bytes) != KL_SUCCESS ||
        kl_cuda_memcpy_htod(&cuda, ds, scale, sizeof scale) != KL_SUCCESS)
        return fail("kl_cuda_memcpy_htod");
    if (kl_row_scale_f32(&k, (const float *)dx, (float *)dy, (const float *)ds, N, STRIDE, ROWS, NULL) != KL_SUCCESS)
        return fail("kl_row_scale_f32");
    if (kl_cuda_synchronize(&cuda) != KL_SUCCESS) return fail("kl_cuda_synchronize");
    if (kl_cuda_memcpy_dtoh(&cuda, y, dy, bytes) != KL_SUCCESS) return fail("kl_cuda_memcpy_dtoh");

    /* One IEEE multiply on either side: equal bit for bit. */
    for (r = 0; r < ROWS; r++) {
        for (i = 0; i < STRIDE; i++) {
            const uint32_t got = bits_of(y[r * STRIDE + i]);
            const uint32_t want = i < N ? bits_of(scale[r] * x[r * STRIDE + i]) : SENTINEL;
            if (got != want && bad++ < 10)
                fprintf(stderr, "row_scale_demo: y[%u][%u] = 0x%08x, want 0x%08x\n", (unsigned)r, (unsigned)i,
                        (unsigned)got, (unsigned)want);
        }
    }
    kl_cuda_device_name(&cuda, name, sizeof name);
    memcpy(variant, mod.variant, sizeof variant);
    kl_cuda_free(&cuda, dx);
    kl_cuda_free(&cuda, dy);
    kl_cuda_free(&cuda, ds);
    kl_module_unload(&mod);
    kl_cuda_backend_destroy(&cuda);
    if (bad) {
        fprintf(stderr, "row_scale_demo: %u of %u elements differ on %s\n", (unsigned)bad,
                (unsigned)(ROWS * STRIDE), name);
        return 1;
    }
    printf("row_scale_f32 on %s: %u rows x %u elements match the CPU (variant %s)\n", name, (unsigned)ROWS,
           (unsigned)N, variant);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--dry-run") == 0) return dry_run();
    if (argc == 2 && argv[1][0] != '-') return gpu_run(argv[1]);
    fprintf(stderr, "usage: %s FATBIN | --dry-run\n", argv[0]);
    return 1;
}
