/* Kernels for the sm90 emulation's tests (tests/emu/sm90_wgmma_test.cc):
 * wgmma.mma_async and its fences, through kernels/common/kl_ptx_sm90.cuh. */
#include "../../../kernels/common/kl_ptx.cuh"
#include "../../../kernels/common/kl_ptx_sm90.cuh"

/* The descriptors of a few operands, as the wrapper encodes them. */
extern "C" __global__ void emu_test_wgmma_desc(uint64_t *out) {
    if (threadIdx.x != 0) return;
    out[0] = kl__wgmma_desc(0x400u, 16u, 1024u);
    out[1] = kl__wgmma_desc(0x2420u, 8192u, 1024u);
    out[2] = kl__wgmma_desc(0x3fff0u, 0x3fff0u, 0x3fff0u);
}

/* One warpgroup: copies `image` (image_bytes) to a 1024-byte aligned shared
 * base, then for each of `steps` k-steps issues one wgmma with A at
 * base + a_off + 32 * step, B at base + b_off + b_step * step (LBO lbo, SBO
 * 1024), all into one accumulator that starts as `init` (accumulate: scale-d
 * of the first product; the later ones always accumulate), commits once and
 * waits. before[t] = d[0] read between commit and wait; d[t * n/2 + j] after. */
template <int N, int TB>
__device__ void wgmma_case(float *d, float *before, uint32_t base, uint32_t a_off, uint32_t b_off, uint32_t b_step,
                           uint32_t lbo, uint32_t steps, uint32_t accumulate, float init) {
    float acc[N / 2];
    for (int j = 0; j < N / 2; ++j) acc[j] = init;
    kl__wgmma_fence();
    for (uint32_t s = 0; s < steps; ++s)
        kl__wgmma_bf16_ss<N, TB>(acc, kl__wgmma_desc(base + a_off + 32u * s, 16u, 1024u),
                                 kl__wgmma_desc(base + b_off + b_step * s, lbo, 1024u), s > 0 ? 1u : accumulate);
    kl__wgmma_commit();
    before[threadIdx.x] = acc[0];
    kl__wgmma_wait<0>();
    for (int j = 0; j < N / 2; ++j) d[threadIdx.x * (N / 2) + (uint32_t)j] = acc[j];
}

/* The same with A M-major (imm-trans-a 1): m64n16k16, B K-major. */
__device__ void wgmma_case_ta(float *d, float *before, uint32_t base, uint32_t a_off, uint32_t b_off, uint32_t lbo,
                              uint32_t accumulate, float init) {
    float acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = init;
    kl__wgmma_fence();
    kl__wgmma_bf16_ss_ta<16, 0>(acc, kl__wgmma_desc(base + a_off, lbo, 1024u), kl__wgmma_desc(base + b_off, 16u, 1024u),
                                accumulate);
    kl__wgmma_commit();
    before[threadIdx.x] = acc[0];
    kl__wgmma_wait<0>();
    for (int j = 0; j < 8; ++j) d[threadIdx.x * 8u + (uint32_t)j] = acc[j];
}

extern "C" __global__ void emu_test_wgmma(float *d, float *before, const uint4 *image, uint32_t image_bytes,
                                          uint32_t shape, uint32_t a_off, uint32_t b_off, uint32_t b_step,
                                          uint32_t lbo, uint32_t steps, uint32_t accumulate, float init) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
    for (uint32_t i = threadIdx.x; i < image_bytes / 16u; i += blockDim.x) kl__st_shared_v4(base + 16u * i, image[i]);
    kl__fence_proxy_async_shared();
    __syncthreads();
    if (shape == 0)
        wgmma_case<32, 0>(d, before, base, a_off, b_off, b_step, lbo, steps, accumulate, init);
    else if (shape == 1)
        wgmma_case<128, 1>(d, before, base, a_off, b_off, b_step, lbo, steps, accumulate, init);
    else if (shape == 3)
        wgmma_case_ta(d, before, base, a_off, b_off, lbo, accumulate, init);
    else
        wgmma_case<256, 1>(d, before, base, a_off, b_off, b_step, lbo, steps, accumulate, init);
}

/* Rule breakers: only the first `issuers` threads issue and wait
 * (wgmma is .sync.aligned over the warpgroup); with `skip_wait` nobody waits. */
extern "C" __global__ void emu_test_wgmma_broken(uint32_t issuers, uint32_t skip_wait) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
    for (uint32_t i = threadIdx.x; i < 8192u / 4u; i += blockDim.x) kl__st_shared_u32(base + 4u * i, 0u);
    __syncthreads();
    if (threadIdx.x >= issuers) return;
    float acc[16];
    for (int j = 0; j < 16; ++j) acc[j] = 0.0f;
    kl__wgmma_bf16_ss<32, 0>(acc, kl__wgmma_desc(base, 16u, 1024u), kl__wgmma_desc(base, 16u, 1024u), 0u);
    kl__wgmma_commit();
    if (!skip_wait) kl__wgmma_wait<0>();
}

/* The RS form (A from registers), m64n256k16 with B N-major at base + b_off
 * (four 64-column slabs `lbo` apart, SBO 1024). `mode`:
 *   0: thread t's A register i holds the bf16 pair (lo, hi) =
 *      (ra(t, 2i), ra(t, 2i + 1)), ra(t, e) = (t * 8 + e) % 13 - 6;
 *   1: the same, and a[1] is rewritten between commit and wait (a fault);
 *   2: A is the first 16 columns of an m64n32 accumulator S = Aslab Bk^T
 *      (SS, A K-major at base, B K-major at base + 8192): a[i] packs
 *      s[2i], s[2i + 1] (each exact in bf16 by the test's choice of values).
 * d[t * 128 + j] = the product's register j of thread t, onto `init` when
 * `accumulate`. */
extern "C" __global__ void emu_test_wgmma_rs(float *d, const uint4 *image, uint32_t image_bytes, uint32_t b_off,
                                             uint32_t lbo, uint32_t accumulate, float init, uint32_t mode) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
    for (uint32_t i = threadIdx.x; i < image_bytes / 16u; i += blockDim.x) kl__st_shared_v4(base + 16u * i, image[i]);
    kl__fence_proxy_async_shared();
    __syncthreads();
    const uint32_t t = threadIdx.x;
    uint32_t a[4];
    if (mode == 2u) {
        float s[16];
        for (int j = 0; j < 16; ++j) s[j] = 0.0f;
        kl__wgmma_fence();
        kl__wgmma_bf16_ss<32, 0>(s, kl__wgmma_desc(base, 16u, 1024u), kl__wgmma_desc(base + 8192u, 16u, 1024u), 0u);
        kl__wgmma_commit();
        kl__wgmma_wait<0>();
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = __float_as_uint(s[2 * i]) >> 16, hi = __float_as_uint(s[2 * i + 1]) >> 16;
            a[i] = lo | (hi << 16);
        }
    } else {
        for (int i = 0; i < 4; ++i) {
            const int lo = (int)((t * 8u + 2u * (uint32_t)i) % 13u) - 6, hi = (int)((t * 8u + 2u * (uint32_t)i + 1u) % 13u) - 6;
            a[i] = (__float_as_uint((float)lo) >> 16) | ((__float_as_uint((float)hi) >> 16) << 16);
        }
    }
    float acc[128];
    for (int j = 0; j < 128; ++j) acc[j] = init;
    kl__wgmma_fence();
    kl__wgmma_bf16_rs<256, 1>(acc, a, kl__wgmma_desc(base + b_off, lbo, 1024u), accumulate);
    kl__wgmma_commit();
    if (mode == 1u) a[1] ^= 0x00010001u;
    kl__wgmma_wait<0>();
    for (int j = 0; j < 128; ++j) d[t * 128u + (uint32_t)j] = acc[j];
}
