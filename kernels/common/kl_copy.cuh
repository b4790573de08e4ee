/* kl_copy.cuh - device helpers for klaunch's data-movement kernels.
 *
 * Bit-exact copies of bf16 data in chunks of W elements (W = 8, 4, 2 or 1:
 * 16-, 8-, 4- or 2-byte accesses), the choice of W from the run-time
 * alignment of every pointer and offset a kernel touches, 64-bit index
 * arithmetic with a 32-bit fast path, and block groups (one block of a
 * group does the group's work with 16-byte accesses).
 *
 * Kernels of a family are compiled as one translation unit (a unity build),
 * so everything here is static or a template, behind one include guard, and
 * named kl__*. Include it relative to the kernel source:
 *     #include "../common/kl_copy.cuh"
 */
#ifndef KLAUNCH_KERNELS_COMMON_KL_COPY_CUH
#define KLAUNCH_KERNELS_COMMON_KL_COPY_CUH

#include <stdint.h>
#include <cuda_bf16.h>

/* The integer type that holds W bf16 values; copies move raw bits, never
 * values, so NaN payloads and signed zeros survive. */
template <int W> struct kl__bf16_chunk;
template <> struct kl__bf16_chunk<8> { typedef uint4 type; };
template <> struct kl__bf16_chunk<4> { typedef uint2 type; };
template <> struct kl__bf16_chunk<2> { typedef unsigned int type; };
template <> struct kl__bf16_chunk<1> { typedef unsigned short type; };

/* Widest chunk (in elements) that every address is aligned to. `align_bytes`
 * is the OR of all byte addresses and byte offsets a kernel will form; its
 * lowest set bit bounds the alignment of every sum of them. */
static __device__ __forceinline__ int kl__chunk_width(uint64_t align_bytes) {
    if ((align_bytes & 15u) == 0) return 8;
    if ((align_bytes & 7u) == 0) return 4;
    if ((align_bytes & 3u) == 0) return 2;
    return 1;
}

/* Byte-alignment contribution of a pointer and of an element count. */
static __device__ __forceinline__ uint64_t kl__addr_bits(const void *p) { return (uint64_t)(uintptr_t)p; }
static __device__ __forceinline__ uint64_t kl__elem_bits(uint64_t elems) { return elems * sizeof(__nv_bfloat16); }

/* Read-only load through the non-coherent cache (ld.global.nc): every kernel
 * that uses it only reads that buffer, and the contract gives inputs and
 * outputs distinct memory. */
template <int W>
static __device__ __forceinline__ typename kl__bf16_chunk<W>::type kl__load_chunk(const __nv_bfloat16 *p) {
    return __ldg(reinterpret_cast<const typename kl__bf16_chunk<W>::type *>(p));
}

template <int W>
static __device__ __forceinline__ void kl__store_chunk(__nv_bfloat16 *p, typename kl__bf16_chunk<W>::type v) {
    *reinterpret_cast<typename kl__bf16_chunk<W>::type *>(p) = v;
}

/* A 16-byte store that stays one instruction (st.global.wb.v4, the default
 * write-back policy, through inline PTX): a plain uint4 store is sometimes
 * split into four 4-byte stores when the compiler loses track of the
 * destination's alignment. `p` must be 16-byte aligned. */
static __device__ __forceinline__ void kl__store_chunk16(__nv_bfloat16 *p, uint4 v) {
    __stwb(reinterpret_cast<uint4 *>(p), v);
}

/* All-zero bits: +0.0 in every bf16 lane. */
template <int W>
static __device__ __forceinline__ typename kl__bf16_chunk<W>::type kl__zero_chunk() {
    return typename kl__bf16_chunk<W>::type(); /* value-initialised: zero */
}

/* a / b and a % b. Indices can pass 2^32 (num_tokens * nq * rope elements),
 * but most do not, and a 64-bit division costs several times a 32-bit one:
 * take the 32-bit path whenever the dividend fits. `b` must be nonzero. */
static __device__ __forceinline__ uint64_t kl__divmod_u64(uint64_t a, uint32_t b, uint32_t *rem) {
    if ((a >> 32) == 0) {
        uint32_t a32 = (uint32_t)a;
        uint32_t q = a32 / b;
        *rem = a32 - q * b;
        return q;
    }
    uint64_t q = a / b;
    *rem = (uint32_t)(a - q * b);
    return q;
}

/* Global index of this thread in a 1-D grid, in 64 bits: grid x reaches
 * 2^31 - 1 blocks. */
static __device__ __forceinline__ uint64_t kl__global_thread_index() {
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

/* Block groups, for grids the seed sizes at one element (or one row) per
 * thread (or block).
 *
 * Such a block has little to move: 512 bytes to read for 256 threads of one
 * bf16 each. An SM holds at most 2048 threads, 8 of those blocks, so it keeps
 * about 4 KB of loads in flight whatever the instructions; with a block
 * living about a microsecond (DRAM latency and more) that is near a quarter
 * of copy bandwidth, what the one-element kernels measured on an H200 (about
 * 1 TB/s). The grid is the seed's and stays, but which block does which work
 * is the kernel's choice: the first block of each group of KL__BLOCK_GROUP
 * consecutive blocks does the whole group's work, one 16-byte chunk (8 bf16)
 * per thread where a block had one element per thread, and the other blocks
 * return at once. A working block keeps 8 times the bytes in flight; a
 * returning one frees its SM slot after a handful of instructions.
 * KL__BLOCK_GROUP equals the chunk width so a group of blockDim.x-thread
 * blocks, one element each, is exactly blockDim.x chunks. The last group may
 * be short; its first block still exists. */
#define KL__BLOCK_GROUP 8u

static __device__ __forceinline__ bool kl__leads_block_group() { return blockIdx.x % KL__BLOCK_GROUP == 0; }

/* The chunk of 8 elements this thread of a group's first block moves, in a
 * grid of one element per thread: the blocks [blockIdx.x, +KL__BLOCK_GROUP)
 * stand for elements [blockIdx.x * blockDim.x, +KL__BLOCK_GROUP * blockDim.x),
 * chunks [blockIdx.x / KL__BLOCK_GROUP * blockDim.x, +blockDim.x). */
static __device__ __forceinline__ uint64_t kl__group_chunk_index() {
    return (uint64_t)(blockIdx.x / KL__BLOCK_GROUP) * blockDim.x + threadIdx.x;
}

#endif /* KLAUNCH_KERNELS_COMMON_KL_COPY_CUH */
