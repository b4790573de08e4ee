// The four paged decode launchers of the seed (../shared/seed/prefill_attn_a.rs)
// as test fixtures: distinctive valid arguments, calls to the generated
// kl_X_check and kl_X, and the seed's own grid, block and argument packing
// (Seed*), transcribed from the seed's KernelLaunch chains, not from the spec.
// num_seqs is launch-only everywhere: grid y, never a kernel argument.
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_LAUNCHERS_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_LAUNCHERS_H

#include "klaunch/paged_decode.h"
#include "tests/support/wrapper_support.h"

namespace kltest {

constexpr const char *kDecodeSpec = "specs/paged_decode.yaml";

// The bf16 argument list, shared by the plain and the GQA-packed launcher.
struct DecodeBf16Args {
    const kl_bf16 *q = FakePtr<const kl_bf16>(1);
    const kl_bf16 *k_cache = FakePtr<const kl_bf16>(2);
    const kl_bf16 *v_cache = FakePtr<const kl_bf16>(3);
    kl_bf16 *output = FakePtr<kl_bf16>(4);
    const int32_t *block_tables = FakePtr<const int32_t>(5);
    const int32_t *seq_lens = FakePtr<const int32_t>(6);
    uint32_t max_blocks_per_seq = 3, num_seqs = 5, num_q_heads = 14, num_kv_heads = 7, head_dim = 9, block_size = 11;
    float inv_sqrt_d = 0.125f;
    uint32_t q_stride = 131, sliding_window = 13;

    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q).Ptr(k_cache).Ptr(v_cache).Ptr(output).Ptr(block_tables).Ptr(seq_lens)
            .U32(max_blocks_per_seq).U32(num_q_heads).U32(num_kv_heads).U32(head_dim).U32(block_size)
            .F32(inv_sqrt_d).U32(q_stride).U32(sliding_window).bytes();
    }
};

// The fp8 argument list: two scales after inv_sqrt_d and a u64 cache_stride
// (above 2^32, so both halves are seen) before sliding_window.
struct DecodeFp8Args {
    const kl_bf16 *q = FakePtr<const kl_bf16>(1);
    const kl_fp8_e4m3 *k_cache = FakePtr<const kl_fp8_e4m3>(2);
    const kl_fp8_e4m3 *v_cache = FakePtr<const kl_fp8_e4m3>(3);
    kl_bf16 *output = FakePtr<kl_bf16>(4);
    const int32_t *block_tables = FakePtr<const int32_t>(5);
    const int32_t *seq_lens = FakePtr<const int32_t>(6);
    uint32_t max_blocks_per_seq = 3, num_seqs = 5, num_q_heads = 14, num_kv_heads = 7, head_dim = 9, block_size = 11;
    float inv_sqrt_d = 0.125f, k_scale = 0.75f, v_scale = 1.5f;
    uint32_t q_stride = 131;
    uint64_t cache_stride = 0x123456789ull;
    uint32_t sliding_window = 13;

    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q).Ptr(k_cache).Ptr(v_cache).Ptr(output).Ptr(block_tables).Ptr(seq_lens)
            .U32(max_blocks_per_seq).U32(num_q_heads).U32(num_kv_heads).U32(head_dim).U32(block_size)
            .F32(inv_sqrt_d).F32(k_scale).F32(v_scale).U32(q_stride).U64(cache_stride).U32(sliding_window).bytes();
    }
};

struct DecodeBf16 : DecodeBf16Args {
    static constexpr const char *kName = "paged_decode_attn_bf16";
    static constexpr const char *kEntry = "paged_decode_attn_bf16";
    static const kl_kernel_desc *Desc() { return &kl_paged_decode_attn_bf16_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_paged_decode_attn_bf16_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_paged_decode_attn_bf16_check(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                               max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                               block_size, inv_sqrt_d, q_stride, sliding_window);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_paged_decode_attn_bf16(k, q, k_cache, v_cache, output, block_tables, seq_lens, max_blocks_per_seq,
                                         num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, inv_sqrt_d,
                                         q_stride, sliding_window, s);
    }
    Dim3 SeedGrid() const { return {num_q_heads, num_seqs, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
};

struct DecodeFp8 : DecodeFp8Args {
    static constexpr const char *kName = "paged_decode_attn_fp8";
    static constexpr const char *kEntry = "paged_decode_attn_fp8";
    static const kl_kernel_desc *Desc() { return &kl_paged_decode_attn_fp8_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_paged_decode_attn_fp8_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_paged_decode_attn_fp8_check(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                              max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                              block_size, inv_sqrt_d, k_scale, v_scale, q_stride, cache_stride,
                                              sliding_window);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_paged_decode_attn_fp8(k, q, k_cache, v_cache, output, block_tables, seq_lens, max_blocks_per_seq,
                                        num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, inv_sqrt_d, k_scale,
                                        v_scale, q_stride, cache_stride, sliding_window, s);
    }
    Dim3 SeedGrid() const { return {num_q_heads, num_seqs, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
};

// GQA-packed shapes for the gqa8_d128 variant: 16 query heads = 2 KV heads * 8,
// head dim 128. The grid's x extent is num_kv_heads.
struct DecodeBf16Gqa : DecodeBf16Args {
    static constexpr const char *kName = "paged_decode_attn_bf16_gqa";
    static constexpr const char *kEntry = "paged_decode_attn_bf16_gqa";
    DecodeBf16Gqa() {
        num_kv_heads = 2;
        num_q_heads = 16;
        head_dim = 128;
        q_stride = 2053; // >= 16 * 128
    }
    static const kl_kernel_desc *Desc() { return &kl_paged_decode_attn_bf16_gqa_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_paged_decode_attn_bf16_gqa_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_paged_decode_attn_bf16_gqa_check(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                                   max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                                   block_size, inv_sqrt_d, q_stride, sliding_window);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_paged_decode_attn_bf16_gqa(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                             max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                             block_size, inv_sqrt_d, q_stride, sliding_window, s);
    }
    Dim3 SeedGrid() const { return {num_kv_heads, num_seqs, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
};

struct DecodeFp8Gqa : DecodeFp8Args {
    static constexpr const char *kName = "paged_decode_attn_fp8_gqa";
    static constexpr const char *kEntry = "paged_decode_attn_fp8_gqa";
    DecodeFp8Gqa() {
        num_kv_heads = 2;
        num_q_heads = 16;
        head_dim = 128;
        q_stride = 2053;
    }
    static const kl_kernel_desc *Desc() { return &kl_paged_decode_attn_fp8_gqa_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_paged_decode_attn_fp8_gqa_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_paged_decode_attn_fp8_gqa_check(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                                  max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                                  block_size, inv_sqrt_d, k_scale, v_scale, q_stride, cache_stride,
                                                  sliding_window);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_paged_decode_attn_fp8_gqa(k, q, k_cache, v_cache, output, block_tables, seq_lens,
                                            max_blocks_per_seq, num_seqs, num_q_heads, num_kv_heads, head_dim,
                                            block_size, inv_sqrt_d, k_scale, v_scale, q_stride, cache_stride,
                                            sliding_window, s);
    }
    Dim3 SeedGrid() const { return {num_kv_heads, num_seqs, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
};

} // namespace kltest

#endif // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_LAUNCHERS_H
