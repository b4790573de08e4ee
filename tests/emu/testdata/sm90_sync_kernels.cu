/* Kernels for the sm90 synchronisation emulation's tests
 * (tests/emu/sm90_mbarrier_test.cc): mbarrier, cp.async.mbarrier.arrive,
 * setmaxnreg and elect.sync, through kernels/common/kl_ptx_sm90.cuh. */
#include "../../../kernels/common/kl_ptx.cuh"
#include "../../../kernels/common/kl_ptx_sm90.cuh"

/* mbarrier basics. Thread 0 inits the mbarrier at the dynamic base with
 * `count`; the first `arrivers` threads store tid * 3 + 1 to word tid, then
 * arrive (with `tx` expected bytes each when tx != 0), `rounds` times
 * (round r waits on parity r % 2); after the last round every thread
 * waits on parity `last_parity` and reads word (tid + 1) % arrivers into
 * out[tid]. `uninit`: nobody inits. */
extern "C" __global__ void emu_test_mbarrier(uint32_t *out, uint32_t count, uint32_t arrivers, uint32_t tx,
                                             uint32_t rounds, uint32_t last_parity, uint32_t uninit) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t bar = (uint32_t)__cvta_generic_to_shared(smem), data = bar + 16u;
    const uint32_t t = threadIdx.x;
    if (t == 0u && !uninit) kl__mbar_init(bar, count);
    __syncthreads();
    for (uint32_t r = 0; r < rounds; ++r) {
        if (t < arrivers) {
            kl__st_shared_u32(data + 4u * t, t * 3u + 1u + 100u * r);
            if (tx)
                kl__mbar_arrive_expect_tx(bar, tx);
            else
                kl__mbar_arrive(bar);
        }
        kl__mbar_wait(bar, r & 1u);
        __syncthreads(); /* everyone read round r's words before they change */
    }
    kl__mbar_wait(bar, last_parity);
    out[t] = kl__ld_shared_u32(data + 4u * ((t + 1u) % arrivers));
}

/* A producer warp (warp 1) and a consumer warp (warp 0) over a ring of
 * `stages` stages of 32 x 16 bytes, `items` items: the producer waits for
 * stage s to be empty, cp.asyncs 512 bytes of src (item i) into it (each lane
 * 16 bytes), then cp.async.mbarrier.arrive.noinc on full[s] (count 32); the
 * consumer waits full[s], copies the stage to dst, then arrives on empty[s]
 * (count 32). Rule breakers: `skip_full_wait` (the consumer reads without
 * waiting), `skip_empty_wait` (the producer overwrites without waiting). */
extern "C" __global__ void emu_test_mbarrier_ring(uint4 *dst, const uint4 *src, uint32_t items, uint32_t stages,
                                                  uint32_t skip_full_wait, uint32_t skip_empty_wait) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t full = base, empty = base + 8u * stages, ring = base + 256u;
    const uint32_t t = threadIdx.x, lane = t & 31u;
    if (t == 0u)
        for (uint32_t s = 0; s < stages; ++s) {
            kl__mbar_init(full + 8u * s, 32u);
            kl__mbar_init(empty + 8u * s, 32u);
        }
    __syncthreads();
    if (t >= 32u) {
        for (uint32_t i = 0; i < items; ++i) {
            const uint32_t s = i % stages, n = i / stages;
            if (n > 0u && !skip_empty_wait) kl__mbar_wait(empty + 8u * s, (n - 1u) & 1u);
            kl__cp_async_cg16(ring + s * 512u + lane * 16u, src + i * 32u + lane);
            kl__cp_async_mbar_arrive_noinc(full + 8u * s);
        }
    } else {
        for (uint32_t i = 0; i < items; ++i) {
            const uint32_t s = i % stages, n = i / stages;
            if (!skip_full_wait) kl__mbar_wait(full + 8u * s, n & 1u);
            dst[i * 32u + lane] = kl__ld_shared_v4(ring + s * 512u + lane * 16u);
            kl__mbar_arrive(empty + 8u * s);
        }
    }
}

/* setmaxnreg: the last warpgroup decreases to `dec`, the others increase to
 * `inc`; each thread then writes the count its warpgroup holds
 * (the emulator's record) to out[tid]. `split`: thread 0 asks for inc + 8. */
extern "C" uint32_t kl_emu_sm90_setmaxnreg_count(void);
extern "C" void kl_emu_sm90_setmaxnreg(uint32_t inc, uint32_t count);
extern "C" __global__ void emu_test_setmaxnreg(uint32_t *out, uint32_t inc, uint32_t dec, uint32_t split) {
    const uint32_t t = threadIdx.x, wg = t / 128u, last = blockDim.x / 128u - 1u;
    if (wg == last)
        kl_emu_sm90_setmaxnreg(0u, dec);
    else
        kl_emu_sm90_setmaxnreg(1u, inc + (split && t == 0u ? 8u : 0u));
    out[t] = kl_emu_sm90_setmaxnreg_count();
}

/* elect.sync twice over the full warp: out[2 t] and out[2 t + 1] are 1 in
 * the elected lane, else 0. */
extern "C" __global__ void emu_test_elect(uint32_t *out) {
    const uint32_t t = threadIdx.x;
    out[2u * t] = kl__elect_one() ? 1u : 0u;
    out[2u * t + 1u] = kl__elect_one() ? 1u : 0u;
}
