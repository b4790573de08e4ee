/* Kernels of the emulator's own tests (tests/emu/emu_selftest.cc): each
 * exercises one instruction or one check, with results the test derives
 * from the PTX ISA's definitions, not from the emulator. Compiled only for
 * the emulator (kl_emulated_kernels in tests/emu/BUILD). */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/common/kl_ptx.cuh"

/* out[tid] = shfl of value (tid * 3 + 1) with mode 0 idx, 1 up, 2 down, 3 xor. */
extern "C" __global__ void emu_test_shfl(uint32_t *out, uint32_t mode, int arg, int width) {
    const uint32_t t = threadIdx.x;
    const uint32_t v = t * 3u + 1u;
    uint32_t r = 0;
    if (mode == 0) r = __shfl_sync(0xffffffffu, v, arg, width);
    if (mode == 1) r = __shfl_up_sync(0xffffffffu, v, (unsigned)arg, width);
    if (mode == 2) r = __shfl_down_sync(0xffffffffu, v, (unsigned)arg, width);
    if (mode == 3) r = __shfl_xor_sync(0xffffffffu, v, arg, width);
    out[t] = r;
}

/* 8-byte shuffle: doubles move whole. */
extern "C" __global__ void emu_test_shfl_double(double *out) {
    const double v = 0.5 + threadIdx.x;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 1);
}

/* out[3 * tid + {0, 1, 2}] = ballot, any, all of pred[tid]. */
extern "C" __global__ void emu_test_vote(uint32_t *out, const uint32_t *pred) {
    const uint32_t t = threadIdx.x;
    const int p = (int)pred[t];
    out[3 * t] = __ballot_sync(0xffffffffu, p);
    out[3 * t + 1] = (uint32_t)__any_sync(0xffffffffu, p);
    out[3 * t + 2] = (uint32_t)__all_sync(0xffffffffu, p);
}

/* A 16 x 16 b16 matrix M[r][c] = src[r * 16 + c] into shared memory (row r
 * at byte 32 r), then ldmatrix.x4 (or .trans) with lane L giving the
 * address of row L % 8 of matrix L / 8, matrices in the order
 * (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
 * (rows 8-15, cols 8-15); out[4 L + j] = register j of lane L. */
extern "C" __global__ void emu_test_ldmatrix(uint32_t *out, const uint16_t *src, uint32_t trans) {
    __shared__ __align__(16) uint16_t m[16 * 16];
    const uint32_t l = threadIdx.x;
    for (uint32_t i = l; i < 256u; i += 32u) m[i] = src[i];
    __syncthreads();
    const uint32_t j = l / 8u, row = (j & 1u) * 8u + l % 8u, col = (j >> 1) * 8u;
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(&m[row * 16u + col]);
    uint32_t r[4];
    if (trans)
        kl__ldmatrix_x4_trans(r, addr);
    else
        kl__ldmatrix_x4(r, addr);
    for (int k = 0; k < 4; ++k) out[4 * l + k] = r[k];
}

/* movmatrix.trans of M[r][c] = (r << 8) | c, r, c < 8: lane L gives row
 * L / 4, elements 2 (L % 4), 2 (L % 4) + 1; out[L] = what it receives. */
extern "C" __global__ void emu_test_movmatrix(uint32_t *out) {
    const uint32_t l = threadIdx.x, r = l / 4u, c = 2u * (l % 4u);
    out[l] = kl__movmatrix_trans(((r << 8) | c) | (((r << 8) | (c + 1u)) << 16));
}

/* One mma.m16n8k16 with per-lane registers given: regs[10 L + {0..3}] = a,
 * {4, 5} = b, {6..9} = c (floats as bits); d[4 L + i] = d_i of lane L. */
extern "C" __global__ void emu_test_mma(float *d, const uint32_t *regs, uint32_t f16) {
    const uint32_t l = threadIdx.x;
    const uint32_t *r = regs + 10u * l;
    const uint32_t a[4] = {r[0], r[1], r[2], r[3]};
    float c[4] = {__uint_as_float(r[6]), __uint_as_float(r[7]), __uint_as_float(r[8]), __uint_as_float(r[9])};
    if (f16)
        kl__mma_m16n8k16_f16(c, a, r[4], r[5]);
    else
        kl__mma_m16n8k16_bf16(c, a, r[4], r[5]);
    for (int i = 0; i < 4; ++i) d[4u * l + (uint32_t)i] = c[i];
}

/* cp.async: each thread copies its 16 bytes; before[t] = the first word in
 * shared memory before wait_group (the copy has not landed), after[t] after. */
extern "C" __global__ void emu_test_cp_async(uint32_t *before, uint32_t *after, const uint4 *src) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t t = threadIdx.x;
    const uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem) + 16u * t;
    kl__st_shared_u32(dst, 0xdeadbeefu);
    kl__cp_async_cg16(dst, src + t);
    kl__cp_async_commit();
    before[t] = kl__ld_shared_u32(dst);
    kl__cp_async_wait<0>();
    after[t] = kl__ld_shared_u32(dst);
}

/* Conversions: out[i] for input bits in[i] (mode 0: e4m3x2 -> f16x2 of the
 * low 16 bits; 1: the pair of floats in[2i], in[2i+1] -> e4m3x2 satfinite;
 * 2: float -> bf16 round to nearest even; 3: ex2.approx.ftz; 4: cuda_fp8.h's
 * e4m3x2 -> f16x2; 5: e4m3x2 -> f16x2 of in[i] moved to bits 16-31). */
extern "C" __global__ void emu_test_convert(uint32_t *out, const uint32_t *in, uint32_t mode, uint32_t n) {
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        if (mode == 0) out[i] = kl__cvt_f16x2_e4m3x2((uint16_t)in[i]);
        if (mode == 1) out[i] = kl__cvt_e4m3x2_f32(__uint_as_float(in[2 * i]), __uint_as_float(in[2 * i + 1]));
        if (mode == 2) {
            const __nv_bfloat16 b = __float2bfloat16_rn(__uint_as_float(in[i]));
            out[i] = *reinterpret_cast<const unsigned short *>(&b);
        }
        if (mode == 3) out[i] = __float_as_uint(kl__ex2_approx_ftz(__uint_as_float(in[i])));
        if (mode == 5) out[i] = kl__cvt_f16x2_e4m3x2_hi((in[i] << 16) | 0xA5C3u); /* the high half's pair */
        if (mode == 4) {
            const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)in[i], __NV_E4M3);
            out[i] = (uint32_t)r.x | ((uint32_t)r.y << 16);
        }
    }
}

/* Packed and scalar half arithmetic: mode 0 __hfma on f16 bit triples
 * in[3i..3i+2]; mode 1 __hfma2 on bf16x2 words in[3i..3i+2]; mode 2
 * __hmul2 on bf16x2 words in[3i], in[3i+1]. */
extern "C" __global__ void emu_test_half_math(uint32_t *out, const uint32_t *in, uint32_t mode, uint32_t n) {
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint32_t a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2];
        if (mode == 0)
            out[i] = __half_as_ushort(__hfma(__ushort_as_half((unsigned short)a), __ushort_as_half((unsigned short)b),
                                             __ushort_as_half((unsigned short)c)));
        if (mode == 1 || mode == 2) {
            __nv_bfloat162 x, y, z;
            memcpy(&x, &a, 4);
            memcpy(&y, &b, 4);
            memcpy(&z, &c, 4);
            const __nv_bfloat162 r = mode == 1 ? __hfma2(x, y, z) : __hmul2(x, y);
            memcpy(&out[i], &r, 4);
        }
    }
}

/* Atomics on global and shared memory: every thread adds 1 to out[0] and
 * its lane to a shared counter, takes the max of its index into out[1];
 * thread 0 then stores the shared sum into out[2] and a CAS result in out[3]. */
/* out[4]: 3 blocks' acquire-release adds of 10; out[5 + b]: block b's old value. */
extern "C" __global__ void emu_test_atomics(int *out) {
    __shared__ int sum;
    if (threadIdx.x == 0) sum = 0;
    __syncthreads();
    atomicAdd(&out[0], 1);
    atomicMax(&out[1], (int)threadIdx.x);
    atomicAdd(&sum, (int)(threadIdx.x & 31u));
    __syncthreads();
    if (threadIdx.x == 0) {
        out[2] = sum;
        out[3] = atomicCAS(&out[1], (int)blockDim.x - 1, -5);
        /* atom.acq_rel.gpu.add: the old value, the sum left behind */
        out[5 + blockIdx.x] = (int)kl__atom_add_acq_rel_gpu(reinterpret_cast<uint32_t *>(&out[4]), 10u);
    }
}

/* %globaltimer (kl__globaltimer): two reads of thread 0, in order. */
extern "C" __global__ void emu_test_globaltimer(unsigned long long *out) {
    if (threadIdx.x == 0) {
        out[0] = kl__globaltimer();
        out[1] = kl__globaltimer();
    }
}

/* More forms: cp.async with zero fill, ldmatrix.x2, bar.red, scalar fp8.
 * out[0..3]: the 16 bytes a zero-filling cp.async of 6 source bytes lands;
 * out[4 + 2 L + j]: ldmatrix.x2 register j of lane L (matrix j = rows 8j..,
 * M[r][c] = (r << 8) | c); out[68..70]: __syncthreads_count/and/or of
 * (tid < 5), (tid < 64), (tid == 3); out[71..74]: __nv_cvt_float_to_fp8 of
 * 500 (satfinite, nosat), 0.1 (satfinite), -0.0 (nosat). */
extern "C" __global__ void emu_test_forms(uint32_t *out, const uint16_t *src) {
    KL_DYNAMIC_SHARED(smem, 16);
    const uint32_t t = threadIdx.x;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    for (uint32_t i = t; i < 256u; i += blockDim.x) kl__st_shared_u32(base + 4u * i, 0xdeadbeefu);
    __syncthreads();
    if (t == 0) {
        kl__cp_async_cg16_zfill(base, src, 6);
        kl__cp_async_commit();
        kl__cp_async_wait<0>();
        for (uint32_t i = 0; i < 4; ++i) out[i] = kl__ld_shared_u32(base + 4u * i);
    }
    __syncthreads();
    for (uint32_t i = t; i < 256u; i += blockDim.x) {
        const uint32_t r = i / 16u, c = i % 16u;
        const uint32_t v = (r << 8) | c;
        if (i % 2u == 0u) kl__st_shared_u32(base + 1024u + 2u * i, v | (((r << 8) | (c + 1u)) << 16));
    }
    __syncthreads();
    if (t < 32u) {
        uint32_t r[2];
        const uint32_t row = (t / 8u) % 2u * 8u + t % 8u;
        kl__ldmatrix_x2(r, base + 1024u + 32u * row);
        out[4 + 2 * t] = r[0];
        out[5 + 2 * t] = r[1];
    }
    const int cnt = __syncthreads_count(t < 5u), all = __syncthreads_and(t < 64u), any = __syncthreads_or(t == 3u);
    if (t == 0) {
        out[68] = (uint32_t)cnt;
        out[69] = (uint32_t)all;
        out[70] = (uint32_t)any;
        out[71] = __nv_cvt_float_to_fp8(500.0f, __NV_SATFINITE, __NV_E4M3);
        out[72] = __nv_cvt_float_to_fp8(500.0f, __NV_NOSAT, __NV_E4M3);
        out[73] = __nv_cvt_float_to_fp8(0.1f, __NV_SATFINITE, __NV_E4M3);
        out[74] = __nv_cvt_float_to_fp8(-0.0f, __NV_NOSAT, __NV_E4M3);
    }
}

/* ---- negative tests: each breaks one rule (case) ---- */

extern "C" __global__ void emu_test_fault(uint32_t *out, const uint32_t *in, uint32_t which) {
    __shared__ uint32_t s[64];
    KL_DYNAMIC_SHARED(dyn, 16);
    const uint32_t t = threadIdx.x;
    switch (which) {
        case 0: /* a race: thread 1 reads what thread 0 wrote, no barrier */
            if (t == 0) s[0] = 7u;
            if (t == 1) out[0] = s[0];
            break;
        case 1: /* the same with the barrier: fine */
            if (t == 0) s[0] = 7u;
            __syncthreads();
            if (t == 1) out[0] = s[0];
            break;
        case 2: /* write after read: thread 0 reads s[1], thread 1 overwrites it without a barrier */
            if (t == 0) s[1] = 0u;
            __syncthreads();
            if (t == 0) out[0] = s[1];
            if (t == 1) s[1] = 5u;
            break;
        case 3: /* dynamic shared memory past its end (the launch gives 256 bytes) */
            if (t == 2) reinterpret_cast<uint32_t *>(dyn)[64 + 1] = 1u;
            break;
        case 4: /* a 16-byte shared load at an 8-byte aligned address */
            if (t == 3) {
                kl__st_shared_v4((uint32_t)__cvta_generic_to_shared(dyn), make_uint4(1, 2, 3, 4));
                const uint4 v = kl__ld_shared_v4((uint32_t)__cvta_generic_to_shared(dyn) + 8u);
                out[0] = v.x;
            }
            break;
        case 5: /* a barrier thread 3 never reaches */
            if (t != 3) __syncthreads();
            break;
        case 6: /* a global read past the input's end (in has 32 words) */
            out[t] = in[t + 8u];
            break;
        case 7: /* a store into a read-only buffer */
            if (t == 4) const_cast<uint32_t *>(in)[0] = 1u;
            break;
        case 8: /* a 16-byte global load at a 4-byte aligned address */
            if (t == 5) out[0] = __ldg(reinterpret_cast<const uint4 *>(in + 1)).x;
            break;
        case 9: /* a read of shared memory nobody wrote */
            if (t == 6) out[0] = s[40];
            break;
        case 10: /* lanes of one warp at different shuffles */
            out[t] = t == 7 ? __shfl_xor_sync(0xffffffffu, t, 1) : __shfl_sync(0xffffffffu, t, 0);
            break;
        case 11: /* a shuffle whose mask leaves out the calling lane */
            if (t == 9) out[0] = __shfl_sync(0x1u, t, 0);
            break;
        case 12: /* a named barrier of 64 threads only the first warp reaches (block of 64) */
            if (t < 32u) kl__bar_sync(1, 64);
            break;
        case 14: /* lane 1 reads what lane 0 wrote after __syncwarp: fine */
            if (t == 0) s[2] = 9u;
            __syncwarp();
            if (t == 1) out[0] = s[2];
            break;
        case 15: /* the same with a shuffle instead: shuffles do not order memory */
            if (t == 0) s[2] = 9u;
            (void)__shfl_sync(0xffffffffu, t, 0);
            if (t == 1) out[0] = s[2];
            break;
        case 13: /* a read of the own cp.async destination before wait_group: the copy has not landed */
            if (t < 4u) {
                const uint32_t dst = (uint32_t)__cvta_generic_to_shared(dyn) + 16u * t;
                kl__cp_async_cg16(dst, in + 4u * t);
                kl__cp_async_commit();
                if (t == 0) out[0] = kl__ld_shared_u32(dst);
                kl__cp_async_wait<0>();
            }
            break;
    }
}

/* dst[i] = src[i] for i < n, one thread an element; planted 1: thread 0 also
 * reads src[n] (one element past the extent n); planted 2: element n - 1 is
 * not copied (an extent n one element too large for what the kernel does). */
extern "C" __global__ void emu_test_copy_extent(float *dst, const float *src, uint32_t n, uint32_t planted) {
    const uint32_t i = threadIdx.x;
    if (i < n && !(planted == 2u && i == n - 1u)) dst[i] = src[i];
    if (planted == 1u && i == 0u) dst[0] = src[n];
}
