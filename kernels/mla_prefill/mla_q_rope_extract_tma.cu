/* Reference: tests/mla_prefill/mla_data_movement_reference.h (bit exact)
 * Tests:
 *   tests/mla_prefill/mla_tma_emulated_test.cc (CPU emulator, through the generated builders)
 *   tests/mla_prefill/mla_tma_test.cc (GPU: the driver's tensor maps, the builders' refusals)
 *   tests/mla_prefill/mla_tma_launch_test.cc (launcher and builders over the recording backend)
 *   and mla_tma_sass_test (its sm_90a code: UTMALDG, UTMASTG, no LDL/STL)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test //tests/mla_prefill:mla_tma_emulated_test //tests/mla_prefill:mla_tma_test \
 *     //tests/mla_prefill:mla_tma_launch_test //tests/mla_prefill:mla_tma_sass_test
 */
#include "klaunch/mla_prefill.cuh"

#include "../common/kl_ptx.cuh"
#include "../common/kl_ptx_sm90.cuh"

/* mla_q_rope_extract_tma: mla_q_rope_extract_batched's contract
 * (../shared/notes/kernel-contract.md, kernel 1) by the bulk tensor copy
 * engine:
 *
 *   q_rope_out[t, h, r] = q_full[t*q_dim + h*hd + nope + r]
 *
 * q_map is the 3-D view (r, h, t) of Q at q_full + nope, strides hd and
 * q_dim; out_map the dense (r, h, t) output. Block (x, y, z) moves the box
 * at r0 = 64z, h0 = 8x, t0 = 16y: one thread issues one tensor load into
 * shared memory (completing on an mbarrier that expects the box's bytes,
 * out-of-bounds ones included: the engine fills them with zeros), waits,
 * then one tensor store of the same box, which the engine clips to
 * out_map's extents, so the ragged edges need no code. No register ever
 * holds the data.
 *
 * Bytes: 2 x 2 bytes per element (read once, written once); no FLOPs. The
 * 128-byte swizzle is the same both ways, so it is invisible in the result
 * (the emulated test proves the box lands as the ISA lays it out); it keeps
 * the box's rows in distinct banks for a kernel that would read them.
 * Shared memory: 16 KiB box at a 1024-byte boundary (the swizzle atom) plus
 * its mbarrier: 17416 bytes with the alignment slack; about a dozen blocks
 * an SM, each with 16 KiB in flight.
 */
extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_q_rope_extract_tma)
mla_q_rope_extract_tma(KL_PARAMS_mla_q_rope_extract_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KL_EMULATOR)
    KL_DYNAMIC_SHARED(mla_q_rope_extract_tma__smem, 16);
    enum { BYTES = KL_TMAP_mla_q_rope_extract_tma_q_map_BYTES };
    static_assert(BYTES == KL_TMAP_mla_q_rope_extract_tma_out_map_BYTES, "the load and the store move one box");
    /* A raw launch with less shared memory than the spec's must not write past it. */
    if (threadIdx.x != 0 || kl__dynamic_smem_size() < KL_SHARED_BYTES_mla_q_rope_extract_tma) return;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(mla_q_rope_extract_tma__smem);
    const uint32_t bar = base, box = (base + 8u + 1023u) & ~1023u;
    const int32_t r0 = (int32_t)(blockIdx.z * KL_TMAP_mla_q_rope_extract_tma_q_map_BOX0);
    const int32_t h0 = (int32_t)(blockIdx.x * KL_TMAP_mla_q_rope_extract_tma_q_map_BOX1);
    const int32_t t0 = (int32_t)(blockIdx.y * KL_TMAP_mla_q_rope_extract_tma_q_map_BOX2);

    kl__prefetch_tensormap(&q_map);
    kl__prefetch_tensormap(&out_map);
    kl__mbar_init(bar, 1u);
    kl__fence_proxy_async_shared(); /* the initialised mbarrier, to the copy engine */
    kl__mbar_arrive_expect_tx(bar, (uint32_t)BYTES);
    kl__tma_load_3d(box, &q_map, r0, h0, t0, bar);
    kl__mbar_wait(bar, 0u);
    kl__tma_store_3d(&out_map, r0, h0, t0, box);
    kl__bulk_commit_group();
    /* The block's shared memory must outlive the store's reads of it. */
    kl__bulk_wait_group_read<0>();
#else
    __trap(); /* sm_90a machine code only: kl_mla_q_rope_extract_tma_get refuses other targets */
#endif
}
