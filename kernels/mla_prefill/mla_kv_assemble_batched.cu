/* Reference: tests/mla_prefill/mla_data_movement_reference.h (bit exact)
 * Tests:
 *   tests/mla_prefill/mla_data_movement_emulated_test.cc (CPU emulator)
 *   tests/mla_prefill/mla_data_movement_test.cc (GPU)
 *   tests/mla_prefill/mla_prefill_launch_test.cc (launcher)
 * Run them (a GPU test skips without a GPU, saying so; tools/gpu/ runs it on one):
 *   ./bazelw test \
 *     //tests/mla_prefill:mla_data_movement_emulated_test \
 *     //tests/mla_prefill:mla_data_movement_test \
 *     //tests/mla_prefill:mla_prefill_launch_test
 */
#include "klaunch/mla_prefill.cuh"

#include "../common/kl_copy.cuh"

/* mla_kv_assemble_batched (docs: ../shared/notes/kernel-contract.md, kernel 3)
 *
 * kv_expanded [num_tokens, kv_expanded_stride] holds, for KV head h, the
 * group [k_nope (nope) | v (v_dim)] at column h*(nope + v_dim); k_rope_buf
 * [num_tokens, rope] is shared by all heads. Writes
 *
 *   k_out [num_tokens, nkv, hd]:    k_out[t, h] = [k_nope(t, h) | k_rope_buf[t]]
 *   v_out [num_tokens, nkv, v_dim]: v_out[t, h] = v(t, h)
 *
 * and nothing else (columns of kv_expanded past nkv*(nope+v_dim) are never
 * read). hd = nope + rope is a launcher precondition.
 *
 * Geometry (the seed's): grid (num_tokens, 2), 256 threads. Block (t, 0)
 * builds token t's K rows, block (t, 1) its V rows; num_tokens is launch-only
 * and reaches the kernel as gridDim.x.
 *
 * A block owns a whole token, so its threads stride over the token's output
 * in chunks of W elements: W = 8 (16-byte loads and stores) when every
 * pointer and every row and segment offset is 16-byte aligned, else the
 * widest of 4, 2, 1 that is. The check runs once per block, at run time,
 * because it depends on the caller's pointers and sizes. With W dividing
 * nope, v_dim and rope, a chunk never straddles the k_nope / k_rope boundary
 * or two heads.
 */

template <int W>
static __device__ __forceinline__ void mla_kv_assemble_batched__k(const __nv_bfloat16 *kv_row,
                                                                  const __nv_bfloat16 *rope_row,
                                                                  __nv_bfloat16 *out_row, uint32_t nkv,
                                                                  uint32_t nope, uint64_t group, uint32_t hd) {
    const uint64_t chunks = (uint64_t)nkv * hd / W;
    const uint32_t head_chunks = hd / W;
    const uint32_t nope_chunks = nope / W;
    for (uint64_t i = threadIdx.x; i < chunks; i += blockDim.x) {
        uint32_t c;
        const uint64_t h = kl__divmod_u64(i, head_chunks, &c);
        const __nv_bfloat16 *src = c < nope_chunks ? kv_row + h * group + (uint64_t)c * W
                                                   : rope_row + (uint64_t)(c - nope_chunks) * W;
        kl__store_chunk<W>(out_row + i * W, kl__load_chunk<W>(src));
    }
}

template <int W>
static __device__ __forceinline__ void mla_kv_assemble_batched__v(const __nv_bfloat16 *kv_row,
                                                                  __nv_bfloat16 *out_row, uint32_t nkv,
                                                                  uint32_t nope, uint64_t group,
                                                                  uint32_t v_dim) {
    const uint64_t chunks = (uint64_t)nkv * v_dim / W;
    const uint32_t head_chunks = v_dim / W;
    for (uint64_t i = threadIdx.x; i < chunks; i += blockDim.x) {
        uint32_t c;
        const uint64_t h = kl__divmod_u64(i, head_chunks, &c);
        const __nv_bfloat16 *src = kv_row + h * group + nope + (uint64_t)c * W;
        kl__store_chunk<W>(out_row + i * W, kl__load_chunk<W>(src));
    }
}

extern "C" __global__ void __launch_bounds__(KL_THREADS_mla_kv_assemble_batched)
mla_kv_assemble_batched(KL_PARAMS_mla_kv_assemble_batched) {
    const uint64_t t = blockIdx.x;
    const uint64_t group = (uint64_t)nope + v_dim; /* one head's [k_nope | v] */
    const __nv_bfloat16 *kv_row = kv_expanded + t * kv_expanded_stride;
    if (blockIdx.y == 0) {
        const __nv_bfloat16 *rope_row = k_rope_buf + t * rope;
        __nv_bfloat16 *out_row = k_out + t * nkv * hd;
        const uint64_t align = kl__addr_bits(kv_expanded) | kl__addr_bits(k_rope_buf) | kl__addr_bits(k_out) |
                               kl__elem_bits(kv_expanded_stride) | kl__elem_bits(nope) | kl__elem_bits(v_dim) |
                               kl__elem_bits(rope) | kl__elem_bits(hd);
        switch (kl__chunk_width(align)) {
        case 8: mla_kv_assemble_batched__k<8>(kv_row, rope_row, out_row, nkv, nope, group, hd); break;
        case 4: mla_kv_assemble_batched__k<4>(kv_row, rope_row, out_row, nkv, nope, group, hd); break;
        case 2: mla_kv_assemble_batched__k<2>(kv_row, rope_row, out_row, nkv, nope, group, hd); break;
        default: mla_kv_assemble_batched__k<1>(kv_row, rope_row, out_row, nkv, nope, group, hd); break;
        }
    } else {
        __nv_bfloat16 *out_row = v_out + t * nkv * v_dim;
        const uint64_t align = kl__addr_bits(kv_expanded) | kl__addr_bits(v_out) |
                               kl__elem_bits(kv_expanded_stride) | kl__elem_bits(nope) | kl__elem_bits(v_dim);
        switch (kl__chunk_width(align)) {
        case 8: mla_kv_assemble_batched__v<8>(kv_row, out_row, nkv, nope, group, v_dim); break;
        case 4: mla_kv_assemble_batched__v<4>(kv_row, out_row, nkv, nope, group, v_dim); break;
        case 2: mla_kv_assemble_batched__v<2>(kv_row, out_row, nkv, nope, group, v_dim); break;
        default: mla_kv_assemble_batched__v<1>(kv_row, out_row, nkv, nope, group, v_dim); break;
        }
    }
}
