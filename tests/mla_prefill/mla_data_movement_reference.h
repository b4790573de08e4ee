// mla_data_movement_reference.h - CPU references of the MLA data-movement
// kernels (../shared/notes/kernel-contract.md, kernels 1-4 and 6), written
// from the contract, bit exact: shared by the GPU test
// (mla_data_movement_test.cc) and the emulated one
// (tests/mla_prefill/mla_data_movement_emulated_test.cc).
#ifndef KLAUNCH_TESTS_KERNELS_MLA_DATA_MOVEMENT_REFERENCE_H
#define KLAUNCH_TESTS_KERNELS_MLA_DATA_MOVEMENT_REFERENCE_H

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>

#include "klaunch/klaunch.h"

namespace mla_dm_ref {

inline kl_bf16 bits(uint16_t b) {
    kl_bf16 v;
    v.bits = b;
    return v;
}

struct RopeCase {
    uint32_t num_tokens, nq, nope, rope, q_dim_pad;
    size_t misalign;
    uint32_t hd() const { return nope + rope; }
    uint32_t q_dim() const { return nq * hd() + q_dim_pad; }
};

inline std::ostream &operator<<(std::ostream &os, const RopeCase &c) {
    return os << "num_tokens " << c.num_tokens << ", nq " << c.nq << ", nope " << c.nope << ", rope " << c.rope
              << ", q_dim " << c.q_dim() << ", misalign " << c.misalign;
}

// Kernel 1: out[t, h, r] = q_full[t*q_dim + h*hd + nope + r].
inline void ref_rope_extract(const kl_bf16 *q_full, kl_bf16 *out, const RopeCase &c) {
    for (uint64_t t = 0; t < c.num_tokens; t++)
        for (uint64_t h = 0; h < c.nq; h++)
            for (uint64_t r = 0; r < c.rope; r++)
                out[(t * c.nq + h) * c.rope + r] = q_full[t * c.q_dim() + h * c.hd() + c.nope + r];
}

// Kernel 2: q_full[t*q_dim + h*hd + nope + r] = in[t, h, r]; nothing else.
inline void ref_rope_writeback(const kl_bf16 *in, kl_bf16 *q_full, const RopeCase &c) {
    for (uint64_t t = 0; t < c.num_tokens; t++)
        for (uint64_t h = 0; h < c.nq; h++)
            for (uint64_t r = 0; r < c.rope; r++)
                q_full[t * c.q_dim() + h * c.hd() + c.nope + r] = in[(t * c.nq + h) * c.rope + r];
}

struct KvCase {
    uint32_t num_tokens, nkv, nope, v_dim, rope, stride_pad;
    size_t misalign;
    uint32_t hd() const { return nope + rope; }
    uint32_t stride() const { return nkv * (nope + v_dim) + stride_pad; }
};

inline std::ostream &operator<<(std::ostream &os, const KvCase &c) {
    return os << "num_tokens " << c.num_tokens << ", nkv " << c.nkv << ", nope " << c.nope << ", v_dim " << c.v_dim
              << ", rope " << c.rope << ", kv_expanded_stride " << c.stride() << ", misalign " << c.misalign;
}

// Kernel 3: head h's [k_nope | v] group starts at column h*(nope + v_dim) of
// kv_expanded's row; k_out[t, h] = [k_nope | k_rope_buf[t]], v_out[t, h] = v.
inline void ref_kv_assemble(const kl_bf16 *kv_expanded, const kl_bf16 *k_rope_buf, kl_bf16 *k_out, kl_bf16 *v_out,
                     const KvCase &c) {
    for (uint64_t t = 0; t < c.num_tokens; t++) {
        for (uint64_t h = 0; h < c.nkv; h++) {
            const kl_bf16 *group = kv_expanded + t * c.stride() + h * (c.nope + c.v_dim);
            kl_bf16 *k = k_out + (t * c.nkv + h) * c.hd();
            for (uint64_t d = 0; d < c.nope; d++) k[d] = group[d];
            for (uint64_t r = 0; r < c.rope; r++) k[c.nope + r] = k_rope_buf[t * c.rope + r];
            kl_bf16 *v = v_out + (t * c.nkv + h) * c.v_dim;
            for (uint64_t e = 0; e < c.v_dim; e++) v[e] = group[c.nope + e];
        }
    }
}

struct CacheCase {
    uint32_t num_tokens, kv_lora, rope;
    size_t misalign;
    uint32_t dim() const { return kv_lora + rope; }
};

inline std::ostream &operator<<(std::ostream &os, const CacheCase &c) {
    return os << "num_tokens " << c.num_tokens << ", kv_lora " << c.kv_lora << ", rope " << c.rope
              << ", mla_cache_dim " << c.dim() << ", misalign " << c.misalign;
}

// Kernel 4: k_cache[t] = [kv_latent[t] | k_rope[t]], v_cache[t] =
// [kv_latent[t] | k_rope[t]] when the variant's V has rope, else
// [kv_latent[t] | 0] (+0.0, bits 0x0000).
inline void ref_cache_assemble(const kl_bf16 *kv_latent, const kl_bf16 *k_rope, kl_bf16 *k_cache, kl_bf16 *v_cache,
                        const CacheCase &c, bool v_has_rope) {
    for (uint64_t t = 0; t < c.num_tokens; t++) {
        for (uint64_t i = 0; i < c.kv_lora; i++) {
            k_cache[t * c.dim() + i] = kv_latent[t * c.kv_lora + i];
            v_cache[t * c.dim() + i] = kv_latent[t * c.kv_lora + i];
        }
        for (uint64_t r = 0; r < c.rope; r++) {
            k_cache[t * c.dim() + c.kv_lora + r] = k_rope[t * c.rope + r];
            v_cache[t * c.dim() + c.kv_lora + r] = v_has_rope ? k_rope[t * c.rope + r] : bits(0x0000);
        }
    }
}

struct QFinalCase {
    uint32_t num_tokens, nq, kv_lora, rope;
    size_t misalign;
    uint32_t dim() const { return kv_lora + rope; }
};

inline std::ostream &operator<<(std::ostream &os, const QFinalCase &c) {
    return os << "num_tokens " << c.num_tokens << ", nq " << c.nq << ", kv_lora " << c.kv_lora << ", rope "
              << c.rope << ", mla_cache_dim " << c.dim() << ", misalign " << c.misalign;
}

// Kernel 6: q_final[t, h] = [q_absorbed[t, h] | q_rope[t, h]].
inline void ref_q_final_assemble(const kl_bf16 *q_absorbed, const kl_bf16 *q_rope, kl_bf16 *q_final, const QFinalCase &c) {
    for (uint64_t th = 0; th < (uint64_t)c.num_tokens * c.nq; th++) {
        for (uint64_t i = 0; i < c.kv_lora; i++) q_final[th * c.dim() + i] = q_absorbed[th * c.kv_lora + i];
        for (uint64_t r = 0; r < c.rope; r++) q_final[th * c.dim() + c.kv_lora + r] = q_rope[th * c.rope + r];
    }
}

template <class Case>
inline std::string describe(const Case &c) {
    std::ostringstream os;
    os << c;
    return os.str();
}

}  // namespace mla_dm_ref

#endif  // KLAUNCH_TESTS_KERNELS_MLA_DATA_MOVEMENT_REFERENCE_H
