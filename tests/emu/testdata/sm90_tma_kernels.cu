/* Kernels for the bulk copy engine's emulation tests (tests/emu/sm90_tma_test.cc):
 * cp.async.bulk.tensor loads and stores, cp.async.bulk, bulk async-groups,
 * prefetch.tensormap and a tensor map passed by value, through
 * kernels/common/kl_ptx_sm90.cuh. */
#include <cuda.h>

#include "../../../kernels/common/kl_ptx.cuh"
#include "../../../kernels/common/kl_ptx_sm90.cuh"

/* A tensor map by value between two other parameters: out[0..15] are its 16
 * words as the kernel received them, out[16] its address modulo 128,
 * out[17] and out[18] the parameters around it. */
extern "C" __global__ void emu_test_tma_param(uint32_t before, const __grid_constant__ CUtensorMap map,
                                              uint64_t *out, uint32_t after) {
    if (threadIdx.x != 0) return;
    for (int i = 0; i < 16; ++i) out[i] = map.opaque[i];
    out[16] = (uint64_t)(uintptr_t)&map % 128u;
    out[17] = before;
    out[18] = after;
}

/* cfg of the load kernel, in words. */
enum {
    LD_RANK,
    LD_C0, /* ... LD_C0 + 4 */
    LD_EXPECT = LD_C0 + 5, /* transaction bytes thread 0 expects with its arrive */
    LD_DST_OFFSET,         /* destination: 1024 + this past the dynamic base */
    LD_REGION,             /* bytes of the region (from 1024) that out receives */
    LD_MODE,               /* 0 normal; 1 read without waiting; 2 arrive without expect_tx (then
                            * expect_tx alone when LD_EXPECT != 0); 3 nobody waits;
                            * 4 the map operand is `alt`; 5 the copy issued twice */
    LD_WORDS
};

static __device__ void tma_load_rank(uint32_t dst, const void *map, const int32_t *cfg, uint32_t bar) {
    const int32_t *c = cfg + LD_C0;
    switch (cfg[LD_RANK]) {
        case 1: kl__tma_load_1d(dst, map, c[0], bar); break;
        case 2: kl__tma_load_2d(dst, map, c[0], c[1], bar); break;
        case 3: kl__tma_load_3d(dst, map, c[0], c[1], c[2], bar); break;
        case 4: kl__tma_load_4d(dst, map, c[0], c[1], c[2], c[3], bar); break;
        default: kl__tma_load_5d(dst, map, c[0], c[1], c[2], c[3], c[4], bar); break;
    }
}

/* One box loaded by thread 0 on an mbarrier at the dynamic base; the region
 * at base + 1024 holds 0xA0000000 + word index before the copy; after the
 * wait every thread copies the region's words to out. */
extern "C" __global__ void emu_test_tma_load(const __grid_constant__ CUtensorMap map, uint32_t *out,
                                             const int32_t *cfg, const void *alt) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem), bar = base, region = base + 1024u;
    const uint32_t t = threadIdx.x, words = (uint32_t)cfg[LD_REGION] / 4u, mode = (uint32_t)cfg[LD_MODE];
    for (uint32_t i = t; i < words; i += blockDim.x) kl__st_shared_u32(region + 4u * i, 0xA0000000u + i);
    if (t == 0) {
        kl__mbar_init(bar, 1);
        kl__fence_proxy_async_shared();
    }
    __syncthreads();
    if (t == 0) {
        if (mode == 2u) {
            if (cfg[LD_EXPECT]) kl__mbar_expect_tx(bar, (uint32_t)cfg[LD_EXPECT]);
            kl__mbar_arrive(bar);
        } else {
            kl__mbar_arrive_expect_tx(bar, (uint32_t)cfg[LD_EXPECT]);
        }
        kl__prefetch_tensormap(&map);
        tma_load_rank(region + (uint32_t)cfg[LD_DST_OFFSET], mode == 4u ? alt : &map, cfg, bar);
        if (mode == 5u) tma_load_rank(region + (uint32_t)cfg[LD_DST_OFFSET], &map, cfg, bar);
    }
    if (mode == 3u) return;
    if (mode != 1u) kl__mbar_wait(bar, 0);
    for (uint32_t i = t; i < words; i += blockDim.x) out[i] = kl__ld_shared_u32(region + 4u * i);
}

/* cfg of the store kernel, in words. */
enum {
    ST_RANK,
    ST_C0,
    ST_SRC_OFFSET = ST_C0 + 5, /* source: 1024 + this past the dynamic base */
    ST_REGION,                 /* bytes at base + 1024 the threads fill from `in` */
    ST_MODE,                   /* 0 normal (wait_group 0); 1 wait_group.read 0 only;
                                * 2 thread 0 rewrites the source before its wait */
    ST_WORDS
};

static __device__ void tma_store_rank(const void *map, const int32_t *cfg, uint32_t src) {
    const int32_t *c = cfg + ST_C0;
    switch (cfg[ST_RANK]) {
        case 1: kl__tma_store_1d(map, c[0], src); break;
        case 2: kl__tma_store_2d(map, c[0], c[1], src); break;
        case 3: kl__tma_store_3d(map, c[0], c[1], c[2], src); break;
        case 4: kl__tma_store_4d(map, c[0], c[1], c[2], c[3], src); break;
        default: kl__tma_store_5d(map, c[0], c[1], c[2], c[3], c[4], src); break;
    }
}

/* The threads fill the region with in[], thread 0 stores one box from it. */
extern "C" __global__ void emu_test_tma_store(const __grid_constant__ CUtensorMap map, const uint32_t *in,
                                              const int32_t *cfg) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t region = (uint32_t)__cvta_generic_to_shared(smem) + 1024u;
    const uint32_t t = threadIdx.x, words = (uint32_t)cfg[ST_REGION] / 4u, mode = (uint32_t)cfg[ST_MODE];
    for (uint32_t i = t; i < words; i += blockDim.x) kl__st_shared_u32(region + 4u * i, in[i]);
    kl__fence_proxy_async_shared();
    __syncthreads();
    if (t != 0) return;
    const uint32_t src = region + (uint32_t)cfg[ST_SRC_OFFSET];
    tma_store_rank(&map, cfg, src);
    kl__bulk_commit_group();
    if (mode == 2u) kl__st_shared_u32(src, 0u);
    if (mode == 1u) {
        kl__bulk_wait_group_read<0>();
    } else {
        kl__bulk_wait_group<0>();
    }
}

/* cp.async.bulk round trip of `bytes` bytes: src -> shared (base + 1024 +
 * dst_off) on an mbarrier -> dst, from thread 0. */
extern "C" __global__ void emu_test_bulk(unsigned char *dst, const unsigned char *src, uint32_t bytes,
                                         uint32_t dst_off) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem), bar = base, stage = base + 1024u + dst_off;
    if (threadIdx.x != 0) return;
    kl__mbar_init(bar, 1);
    kl__mbar_arrive_expect_tx(bar, bytes);
    kl__bulk_load(stage, src, bytes, bar);
    kl__mbar_wait(bar, 0);
    kl__bulk_store(dst, stage, bytes);
    kl__bulk_commit_group();
    kl__bulk_wait_group<0>();
}

/* Bulk async-group order. Thread 0 writes 256 bytes of pattern A at stage 0
 * and B at stage 1 (base + 1024, + 1280), stores stage 0 to dst[0..255]
 * (group 0) and stage 1 to dst[256..511] (group 1), then:
 *   mode 0: wait_group.read 1 (group 0 has read stage 0), rewrites stage 0
 *           with C and stores it to dst[512..767] (group 2); wait_group 0;
 *           seen[0] = dst[0] after the wait_group 1 (group 0 written),
 *   mode 1: rewrites stage 1 after the wait_group.read 1 (group 1 may still
 *           read it). */
extern "C" __global__ void emu_test_bulk_groups(uint32_t *dst, uint32_t *seen, uint32_t mode) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem) + 1024u, s1 = s0 + 256u;
    if (threadIdx.x != 0) return;
    for (uint32_t i = 0; i < 64; ++i) {
        kl__st_shared_u32(s0 + 4u * i, 0xA000u + i);
        kl__st_shared_u32(s1 + 4u * i, 0xB000u + i);
    }
    kl__fence_proxy_async_shared();
    kl__bulk_store(dst, s0, 256);
    kl__bulk_commit_group();
    kl__bulk_store(dst + 64, s1, 256);
    kl__bulk_commit_group();
    kl__bulk_wait_group_read<1>();
    const uint32_t reuse = mode == 0u ? s0 : s1;
    for (uint32_t i = 0; i < 64; ++i) kl__st_shared_u32(reuse + 4u * i, 0xC000u + i);
    kl__fence_proxy_async_shared();
    kl__bulk_store(dst + 128, reuse, 256);
    kl__bulk_commit_group();
    kl__bulk_wait_group<1>();
    seen[0] = dst[0];
    kl__bulk_wait_group<0>();
}

/* A producer thread (thread 32) streams `items` boxes of a 2-D map (box {32,
 * 4} of u32: item i at {0, 4 i}) through `stages` 512-byte stages behind full
 * / empty mbarriers; the consumer warp copies each stage to out. Rule
 * breakers: skip_full_from (the consumer stops waiting on full from that
 * item), skip_empty (the producer does not wait for the stage's release). */
extern "C" __global__ void emu_test_tma_ring(const __grid_constant__ CUtensorMap map, uint4 *out, uint32_t items,
                                             uint32_t stages, uint32_t skip_full_from, uint32_t skip_empty) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t full = base, empty = base + 8u * stages, ring = base + 1024u;
    const uint32_t t = threadIdx.x, lane = t & 31u;
    if (t == 0u)
        for (uint32_t s = 0; s < stages; ++s) {
            kl__mbar_init(full + 8u * s, 1u);
            kl__mbar_init(empty + 8u * s, 32u);
        }
    __syncthreads();
    if (t == 32u) {
        for (uint32_t i = 0; i < items; ++i) {
            const uint32_t s = i % stages, n = i / stages;
            if (n > 0u && !skip_empty) kl__mbar_wait(empty + 8u * s, (n - 1u) & 1u);
            kl__mbar_arrive_expect_tx(full + 8u * s, 512u);
            kl__tma_load_2d(ring + 512u * s, &map, 0, (int32_t)(4u * i), full + 8u * s);
        }
    } else if (t < 32u) {
        for (uint32_t i = 0; i < items; ++i) {
            const uint32_t s = i % stages, n = i / stages;
            if (i < skip_full_from) kl__mbar_wait(full + 8u * s, n & 1u);
            out[i * 32u + lane] = kl__ld_shared_v4(ring + 512u * s + 16u * lane);
            kl__mbar_arrive(empty + 8u * s);
        }
    }
}

/* Two consumers on a 2-stage ring of 4 items: thread 0 takes items 0 and 1,
 * thread 64 items 2 and 3 (stage i % 2, round i / 2), each waiting on its
 * item's full phase; thread 32 produces in order behind the empty barriers
 * (count 1: the item's consumer). With ahead_ok == 0 thread 64 first waits
 * for thread 0's release of the item two before (what keeps a waiter within
 * one round of the producer); with ahead_ok != 0 it does not, so its wait
 * for item 2 (stage 0, parity 1) comes while stage 0's first phase is in
 * progress, passes at once, and reads a stage still in flight. */
extern "C" __global__ void emu_test_tma_two_consumers(const __grid_constant__ CUtensorMap map, uint4 *out,
                                                      uint32_t ahead_ok) {
    KL_DYNAMIC_SHARED(smem, 1024);
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t full = base, empty = base + 16u, turn = base + 32u, ring = base + 1024u;
    const uint32_t t = threadIdx.x;
    if (t == 0u) {
        for (uint32_t s = 0; s < 2u; ++s) {
            kl__mbar_init(full + 8u * s, 1u);
            kl__mbar_init(empty + 8u * s, 1u);
        }
        kl__mbar_init(turn, 1u);
    }
    __syncthreads();
    if (t == 32u) {
        for (uint32_t i = 0; i < 4u; ++i) {
            const uint32_t s = i % 2u, n = i / 2u;
            if (n > 0u) kl__mbar_wait(empty + 8u * s, (n - 1u) & 1u);
            kl__mbar_arrive_expect_tx(full + 8u * s, 512u);
            kl__tma_load_2d(ring + 512u * s, &map, 0, (int32_t)(4u * i), full + 8u * s);
        }
    } else if (t == 0u || t == 64u) {
        const uint32_t first = t == 0u ? 0u : 2u;
        if (t == 64u && !ahead_ok) kl__mbar_wait(turn, 0u);
        for (uint32_t i = first; i < first + 2u; ++i) {
            const uint32_t s = i % 2u, n = i / 2u;
            kl__mbar_wait(full + 8u * s, n & 1u);
            for (uint32_t w = 0; w < 32u; ++w) out[i * 32u + w] = kl__ld_shared_v4(ring + 512u * s + 16u * w);
            kl__mbar_arrive(empty + 8u * s);
        }
        if (t == 0u) kl__mbar_arrive(turn);
    }
}

/* prefetch.tensormap of the parameter (p == NULL) or of p. */
extern "C" __global__ void emu_test_tma_prefetch(const __grid_constant__ CUtensorMap map, const void *p,
                                                 uint32_t shared_operand) {
    KL_DYNAMIC_SHARED(smem, 1024);
    if (shared_operand) {
        kl__prefetch_tensormap(smem);
        return;
    }
    kl__prefetch_tensormap(p ? p : &map);
}
