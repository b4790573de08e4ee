// The eight MLA prefill launchers of the seed (../shared/seed/prefill_attn_a.rs)
// as test fixtures: distinctive valid arguments, calls to the generated
// kl_X_check and kl_X, and the seed's own grid, block and argument packing
// (Seed*), transcribed from the seed's KernelLaunch chains, not from the spec.
#ifndef KLAUNCH_TESTS_MLA_PREFILL_MLA_PREFILL_LAUNCHERS_H
#define KLAUNCH_TESTS_MLA_PREFILL_MLA_PREFILL_LAUNCHERS_H

#include "klaunch/mla_prefill.h"
#include "tests/support/wrapper_support.h"

namespace kltest {

constexpr const char *kMlaSpec = "specs/mla_prefill.yaml";

// Every pointer and u32 differs from the others, so a swap shows.
struct QRopeExtract {
    static constexpr const char *kName = "mla_q_rope_extract_batched";
    static constexpr const char *kEntry = "mla_q_rope_extract_batched";
    const kl_bf16 *q_full = FakePtr<const kl_bf16>(1);
    kl_bf16 *q_rope_out = FakePtr<kl_bf16>(2);
    uint32_t num_tokens = 37, nq = 5, hd = 18, nope = 7, rope = 11, q_dim = 97;

    static const kl_kernel_desc *Desc() { return &kl_mla_q_rope_extract_batched_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_rope_extract_batched_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_rope_extract_batched_check(k, q_full, q_rope_out, num_tokens, nq, hd, nope, rope, q_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_rope_extract_batched(k, q_full, q_rope_out, num_tokens, nq, hd, nope, rope, q_dim, s);
    }
    Dim3 SeedGrid() const { return {DivCeil(uint64_t(num_tokens) * nq * rope, 256), 1, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q_full).Ptr(q_rope_out).U32(num_tokens).U32(nq).U32(hd).U32(nope).U32(rope)
            .U32(q_dim).bytes();
    }
};

struct QRopeWriteback {
    static constexpr const char *kName = "mla_q_rope_writeback_batched";
    static constexpr const char *kEntry = "mla_q_rope_writeback_batched";
    const kl_bf16 *q_rope_in = FakePtr<const kl_bf16>(1);
    kl_bf16 *q_full = FakePtr<kl_bf16>(2);
    uint32_t num_tokens = 41, nq = 3, hd = 19, nope = 6, rope = 13, q_dim = 61;

    static const kl_kernel_desc *Desc() { return &kl_mla_q_rope_writeback_batched_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_rope_writeback_batched_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_rope_writeback_batched_check(k, q_rope_in, q_full, num_tokens, nq, hd, nope, rope, q_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_rope_writeback_batched(k, q_rope_in, q_full, num_tokens, nq, hd, nope, rope, q_dim, s);
    }
    Dim3 SeedGrid() const { return {DivCeil(uint64_t(num_tokens) * nq * rope, 256), 1, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q_rope_in).Ptr(q_full).U32(num_tokens).U32(nq).U32(hd).U32(nope).U32(rope)
            .U32(q_dim).bytes();
    }
};

// num_tokens is launch-only: the seed sizes the grid with it and does not pass it.
struct KvAssemble {
    static constexpr const char *kName = "mla_kv_assemble_batched";
    static constexpr const char *kEntry = "mla_kv_assemble_batched";
    const kl_bf16 *kv_expanded = FakePtr<const kl_bf16>(1);
    const kl_bf16 *k_rope_buf = FakePtr<const kl_bf16>(2);
    kl_bf16 *k_out = FakePtr<kl_bf16>(3);
    kl_bf16 *v_out = FakePtr<kl_bf16>(4);
    uint32_t num_tokens = 13, nkv = 3, nope = 7, v_dim = 5, rope = 11, hd = 18, kv_expanded_stride = 41;

    static const kl_kernel_desc *Desc() { return &kl_mla_kv_assemble_batched_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_kv_assemble_batched_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_kv_assemble_batched_check(k, kv_expanded, k_rope_buf, k_out, v_out, num_tokens, nkv, nope, v_dim,
                                                rope, hd, kv_expanded_stride);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_kv_assemble_batched(k, kv_expanded, k_rope_buf, k_out, v_out, num_tokens, nkv, nope, v_dim, rope,
                                          hd, kv_expanded_stride, s);
    }
    Dim3 SeedGrid() const { return {num_tokens, 2, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(kv_expanded).Ptr(k_rope_buf).Ptr(k_out).Ptr(v_out).U32(nkv).U32(nope)
            .U32(v_dim).U32(rope).U32(hd).U32(kv_expanded_stride).bytes();
    }
};

// num_tokens is launch-only; the block is mla_cache_dim.max(256).
struct CacheAssemble {
    static constexpr const char *kName = "mla_cache_assemble_batched";
    static constexpr const char *kEntry = "mla_cache_assemble_batched";
    const kl_bf16 *kv_latent = FakePtr<const kl_bf16>(1);
    const kl_bf16 *k_rope = FakePtr<const kl_bf16>(2);
    kl_bf16 *k_cache = FakePtr<kl_bf16>(3);
    kl_bf16 *v_cache = FakePtr<kl_bf16>(4);
    uint32_t num_tokens = 13, kv_lora = 17, rope = 11, mla_cache_dim = 28;

    static const kl_kernel_desc *Desc() { return &kl_mla_cache_assemble_batched_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_cache_assemble_batched_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_cache_assemble_batched_check(k, kv_latent, k_rope, k_cache, v_cache, num_tokens, kv_lora, rope,
                                                   mla_cache_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_cache_assemble_batched(k, kv_latent, k_rope, k_cache, v_cache, num_tokens, kv_lora, rope,
                                             mla_cache_dim, s);
    }
    Dim3 SeedGrid() const { return {num_tokens, 1, 1}; }
    Dim3 SeedBlock() const { return {mla_cache_dim > 256 ? mla_cache_dim : 256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(kv_latent).Ptr(k_rope).Ptr(k_cache).Ptr(v_cache).U32(kv_lora).U32(rope)
            .U32(mla_cache_dim).bytes();
    }
};

struct FusedPrefill {
    static constexpr const char *kName = "mla_fused_prefill";
    static constexpr const char *kEntry = "mla_fused_prefill";
    const kl_bf16 *q_full = FakePtr<const kl_bf16>(1);
    const kl_bf16 *q_rope = FakePtr<const kl_bf16>(2);
    const kl_bf16 *kv_latent = FakePtr<const kl_bf16>(3);
    const kl_bf16 *k_rope = FakePtr<const kl_bf16>(4);
    const kl_bf16 *w_uk = FakePtr<const kl_bf16>(5);
    const kl_bf16 *w_uv = FakePtr<const kl_bf16>(6);
    kl_bf16 *v_out = FakePtr<kl_bf16>(7);
    kl_bf16 *k_cache_out = FakePtr<kl_bf16>(8);
    kl_bf16 *v_cache_out = FakePtr<kl_bf16>(9);
    // num_kv_heads must be 1 (a precondition); nothing else is 1.
    uint32_t seq_len = 19, nq = 23, nope = 7, rope = 11, kv_lora = 29, v_dim = 31, hd = 18, num_kv_heads = 1;
    float inv_sqrt_d = 0.125f;

    static const kl_kernel_desc *Desc() { return &kl_mla_fused_prefill_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_fused_prefill_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_fused_prefill_check(k, q_full, q_rope, kv_latent, k_rope, w_uk, w_uv, v_out, k_cache_out,
                                          v_cache_out, seq_len, nq, nope, rope, kv_lora, v_dim, hd, num_kv_heads,
                                          inv_sqrt_d);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_fused_prefill(k, q_full, q_rope, kv_latent, k_rope, w_uk, w_uv, v_out, k_cache_out, v_cache_out,
                                    seq_len, nq, nope, rope, kv_lora, v_dim, hd, num_kv_heads, inv_sqrt_d, s);
    }
    Dim3 SeedGrid() const { return {nq, seq_len, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q_full).Ptr(q_rope).Ptr(kv_latent).Ptr(k_rope).Ptr(w_uk).Ptr(w_uv).Ptr(v_out)
            .Ptr(k_cache_out).Ptr(v_cache_out).U32(seq_len).U32(nq).U32(nope).U32(rope).U32(kv_lora).U32(v_dim)
            .U32(hd).U32(num_kv_heads).F32(inv_sqrt_d).bytes();
    }
};

struct QFinalAssemble {
    static constexpr const char *kName = "mla_q_final_assemble_batched";
    static constexpr const char *kEntry = "mla_q_final_assemble_batched";
    const kl_bf16 *q_absorbed = FakePtr<const kl_bf16>(1);
    const kl_bf16 *q_rope = FakePtr<const kl_bf16>(2);
    kl_bf16 *q_final = FakePtr<kl_bf16>(3);
    uint32_t num_tokens = 3, nq = 5, kv_lora = 17, rope = 11, mla_cache_dim = 28;

    static const kl_kernel_desc *Desc() { return &kl_mla_q_final_assemble_batched_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *m) { return kl_mla_q_final_assemble_batched_get(k, m); }
    kl_status Check(const kl_kernel *k) const {
        return kl_mla_q_final_assemble_batched_check(k, q_absorbed, q_rope, q_final, num_tokens, nq, kv_lora, rope,
                                                     mla_cache_dim);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_mla_q_final_assemble_batched(k, q_absorbed, q_rope, q_final, num_tokens, nq, kv_lora, rope,
                                               mla_cache_dim, s);
    }
    Dim3 SeedGrid() const { return {DivCeil(uint64_t(num_tokens) * nq * mla_cache_dim, 256), 1, 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q_absorbed).Ptr(q_rope).Ptr(q_final).U32(num_tokens).U32(nq).U32(kv_lora)
            .U32(rope).U32(mla_cache_dim).bytes();
    }
};

struct GroupedGemm {
    static constexpr const char *kName = "grouped_gemm_mla";
    static constexpr const char *kEntry = "grouped_gemm_mla";
    const kl_bf16 *a = FakePtr<const kl_bf16>(1);
    const kl_bf16 *b = FakePtr<const kl_bf16>(2);
    kl_bf16 *c = FakePtr<kl_bf16>(3);
    uint32_t m = 3, g = 5, k_g = 7, n_g = 11, a_stride = 37, c_stride = 59;

    static const kl_kernel_desc *Desc() { return &kl_grouped_gemm_mla_desc; }
    static kl_status Get(kl_kernel *k, const kl_module *mod) { return kl_grouped_gemm_mla_get(k, mod); }
    kl_status Check(const kl_kernel *k) const {
        return kl_grouped_gemm_mla_check(k, a, b, c, m, g, k_g, n_g, a_stride, c_stride);
    }
    kl_status Launch(const kl_kernel *k, kl_stream s) const {
        return kl_grouped_gemm_mla(k, a, b, c, m, g, k_g, n_g, a_stride, c_stride, s);
    }
    Dim3 SeedGrid() const { return {uint64_t(m) * g, DivCeil(n_g, 4), 1}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(a).Ptr(b).Ptr(c).U32(m).U32(g).U32(k_g).U32(n_g).U32(a_stride).U32(c_stride)
            .bytes();
    }
};

// batch is launch-only (grid z); br = 16; causal goes as a u32 1/0.
// head_dim must equal the loaded variant's MLA_HDIM; 576 suits deepseek_v4_flash.
struct PrefillAttention {
    static constexpr const char *kName = "mla_prefill_attention_320";
    static constexpr const char *kEntry = "mla_prefill_attn_320";
    const kl_bf16 *q = FakePtr<const kl_bf16>(1);
    const kl_bf16 *k = FakePtr<const kl_bf16>(2);
    const kl_bf16 *v = FakePtr<const kl_bf16>(3);
    kl_bf16 *output = FakePtr<kl_bf16>(4);
    uint32_t seq_len = 37, batch = 5, num_q_heads = 14, num_kv_heads = 7, head_dim = 576;
    float inv_sqrt_d = 0.125f;
    bool causal = true;

    static const kl_kernel_desc *Desc() { return &kl_mla_prefill_attention_320_desc; }
    static kl_status Get(kl_kernel *kh, const kl_module *m) { return kl_mla_prefill_attention_320_get(kh, m); }
    kl_status Check(const kl_kernel *kh) const {
        return kl_mla_prefill_attention_320_check(kh, q, k, v, output, seq_len, batch, num_q_heads, num_kv_heads,
                                                  head_dim, inv_sqrt_d, causal);
    }
    kl_status Launch(const kl_kernel *kh, kl_stream s) const {
        return kl_mla_prefill_attention_320(kh, q, k, v, output, seq_len, batch, num_q_heads, num_kv_heads, head_dim,
                                            inv_sqrt_d, causal, s);
    }
    Dim3 SeedGrid() const { return {num_q_heads, DivCeil(seq_len, 16), batch}; }
    Dim3 SeedBlock() const { return {256, 1, 1}; }
    std::vector<unsigned char> SeedArgs() const {
        return kltest::SeedArgs().Ptr(q).Ptr(k).Ptr(v).Ptr(output).U32(seq_len).U32(num_q_heads).U32(num_kv_heads)
            .U32(head_dim).F32(inv_sqrt_d).U32(causal ? 1 : 0).bytes();
    }
};

} // namespace kltest

#endif // KLAUNCH_TESTS_MLA_PREFILL_MLA_PREFILL_LAUNCHERS_H
