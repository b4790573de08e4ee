/* launch_driver MODE N: N launches of paged_decode_attn_fp8 without a GPU,
 * for bench/launch/callgrind.sh, which counts instructions per launch as
 * (instructions at 2N - instructions at N) / N, so start-up cancels.
 *
 * MODE:
 *   baseline        the loop alone (barrier, batch bookkeeping)
 *   check           kl_paged_decode_attn_fp8_check: the wrapper's checks
 *   wrapper_noop    kl_paged_decode_attn_fp8 + a backend whose launch does
 *                   nothing: checks, argument packing, the indirect call
 *   record          the recording backend's launch alone, given a packed
 *                   kl_launch (what the wrapper hands a backend)
 *   wrapper_record  kl_paged_decode_attn_fp8 + the recording backend
 * Records are cleared every 256 launches in every mode (the baseline too).
 * Exit status 1 when a launch fails.
 */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/klaunch.h"
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/launch/launch_bench.h"

#define LD_BATCH 256

static lc_args A; /* read after a compiler barrier on every launch */
static kl_record records[LD_BATCH];

int main(int argc, char **argv) {
    kl_record_backend rb;
    kl_module mod;
    kl_kernel k, noop;
    kl_launch launch;
    void *params[17];
    const char *mode = argc == 3 ? argv[1] : "";
    unsigned long n, i, in_batch = 0;
    int which;
    kl_status st = KL_SUCCESS;

    static const char *const modes[] = {"baseline", "check", "wrapper_noop", "record", "wrapper_record"};
    for (which = 0; which < 5; which++)
        if (strcmp(mode, modes[which]) == 0) break;
    if (which == 5) {
        fprintf(stderr, "usage: %s baseline|check|wrapper_noop|record|wrapper_record N\n", argv[0]);
        return 1;
    }
    n = strtoul(argv[2], NULL, 10);

    lc_args_init(&A);
    A.q = (const kl_bf16 *)(uintptr_t)0x1000;
    A.k_cache = A.v_cache = (const kl_fp8_e4m3 *)(uintptr_t)0x2000;
    A.output = (kl_bf16 *)(uintptr_t)0x3000;
    A.block_tables = A.seq_lens = (const int32_t *)(uintptr_t)0x4000;
    kl_record_backend_init(&rb, records, LD_BATCH);
    if (lc_record_kernel(&rb, &mod, &k, &noop) != KL_SUCCESS) {
        fprintf(stderr, "launch_driver: %s\n", kl_last_error_message());
        return 1;
    }

    /* "record": the kl_launch the wrapper would build for A. */
    memset(&launch, 0, sizeof launch);
    launch.kernel = &k;
    launch.grid[0] = launch.grid[1] = launch.grid[2] = 1;
    launch.block[0] = 256;
    launch.block[1] = launch.block[2] = 1;
    launch.args = params;
    params[0] = &A.q;
    params[1] = &A.k_cache;
    params[2] = &A.v_cache;
    params[3] = &A.output;
    params[4] = &A.block_tables;
    params[5] = &A.seq_lens;
    params[6] = &A.max_blocks_per_seq;
    params[7] = &A.num_q_heads;
    params[8] = &A.num_kv_heads;
    params[9] = &A.head_dim;
    params[10] = &A.block_size;
    params[11] = &A.inv_sqrt_d;
    params[12] = &A.k_scale;
    params[13] = &A.v_scale;
    params[14] = &A.q_stride;
    params[15] = &A.cache_stride;
    params[16] = &A.sliding_window;

    for (i = 0; i < n && st == KL_SUCCESS; i++) {
        LC_BARRIER();
        switch (which) {
        case 1:
            st = lc_check(&k, &A);
            break;
        case 2:
            st = lc_launch(&noop, &A, NULL);
            break;
        case 3:
            st = rb.base.ops->launch(&rb.base, &launch);
            break;
        case 4:
            st = lc_launch(&k, &A, NULL);
            break;
        default:
            break;
        }
        if (++in_batch == LD_BATCH) {
            kl_record_backend_clear(&rb);
            in_batch = 0;
        }
    }
    if (st != KL_SUCCESS) {
        fprintf(stderr, "launch_driver %s: %s\n", mode, kl_last_error_message());
        return 1;
    }
    if ((which == 3 || which == 4) && rb.count != in_batch) {
        fprintf(stderr, "launch_driver %s: %lu records, expected %lu\n", mode, (unsigned long)rb.count, in_batch);
        return 1;
    }
    kl_module_unload(&mod);
    return 0;
}
