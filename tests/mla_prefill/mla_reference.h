/* Float64 CPU references for the MLA prefill compute kernels, written from
 * ../shared/notes/kernel-contract.md (kernels 5, 7 and 8), not from the
 * kernels. Inputs and expected cache rows are bf16 bit patterns (uint16_t);
 * the references read them exactly and compute in double.
 */
#ifndef KLAUNCH_TESTS_MLA_ATTENTION_MLA_REFERENCE_H
#define KLAUNCH_TESTS_MLA_ATTENTION_MLA_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace mla_ref {

inline double bf16_to_double(uint16_t bits) {
    const uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return (double)f;
}

/* A whole bf16 tensor as doubles, so the loops below convert each element once. */
inline std::vector<double> widen(const std::vector<uint16_t> &v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_double(v[i]);
    return out;
}

/* Kernel 8: q [B, S, Hq, D], k and v [B, S, Hkv, D]; returns [B, S, Hq, D]. */
inline std::vector<double> attention(const std::vector<uint16_t> &q_bits, const std::vector<uint16_t> &k_bits,
                                     const std::vector<uint16_t> &v_bits, size_t batch, size_t seq, size_t hq,
                                     size_t hkv, size_t d, double inv_sqrt_d, bool causal) {
    const std::vector<double> q = widen(q_bits), k = widen(k_bits), v = widen(v_bits);
    std::vector<double> out(batch * seq * hq * d, 0.0);
    std::vector<double> score(seq);
    const size_t group = hq / hkv;
    for (size_t b = 0; b < batch; ++b)
        for (size_t h = 0; h < hq; ++h) {
            const size_t kvh = h / group;
            for (size_t t = 0; t < seq; ++t) {
                const size_t end = causal ? t + 1 : seq;
                const double *qr = &q[((b * seq + t) * hq + h) * d];
                double mx = -std::numeric_limits<double>::infinity();
                for (size_t s = 0; s < end; ++s) {
                    const double *kr = &k[((b * seq + s) * hkv + kvh) * d];
                    double dot = 0.0;
                    for (size_t x = 0; x < d; ++x) dot += qr[x] * kr[x];
                    score[s] = dot * inv_sqrt_d;
                    mx = std::max(mx, score[s]);
                }
                double sum = 0.0;
                for (size_t s = 0; s < end; ++s) {
                    score[s] = std::exp(score[s] - mx);
                    sum += score[s];
                }
                double *o = &out[((b * seq + t) * hq + h) * d];
                for (size_t s = 0; s < end; ++s) {
                    const double *vr = &v[((b * seq + s) * hkv + kvh) * d];
                    const double p = score[s] / sum;
                    for (size_t x = 0; x < d; ++x) o[x] += p * vr[x];
                }
            }
        }
    return out;
}

/* Kernel 7: C[i, g*n_g + j] = sum_k A[i*a_stride + g*k_g + k] * B[(g*n_g + j)*k_g + k].
 * Returns a dense [m, g*n_g]. */
inline std::vector<double> grouped_gemm(const std::vector<uint16_t> &a_bits, const std::vector<uint16_t> &b_bits,
                                        size_t m, size_t g, size_t k_g, size_t n_g, size_t a_stride) {
    const std::vector<double> a = widen(a_bits), b = widen(b_bits);
    std::vector<double> c(m * g * n_g, 0.0);
    for (size_t i = 0; i < m; ++i)
        for (size_t gi = 0; gi < g; ++gi)
            for (size_t j = 0; j < n_g; ++j) {
                double acc = 0.0;
                for (size_t kk = 0; kk < k_g; ++kk)
                    acc += a[i * a_stride + gi * k_g + kk] * b[(gi * n_g + j) * k_g + kk];
                c[i * g * n_g + gi * n_g + j] = acc;
            }
    return c;
}

struct FusedShape {
    size_t seq, nq, nope, rope, kv_lora, v_dim;
    size_t hd() const { return nope + rope; }
    size_t cache_dim() const { return kv_lora + rope; }
};

/* Kernel 5: returns v_out [seq, nq, v_dim]. q_full [seq, nq*hd], q_rope
 * [seq, nq, rope], kv_latent [seq, kv_lora], k_rope [seq, rope], w_uk [nq,
 * nope, kv_lora], w_uv [nq, v_dim, kv_lora]. Causal. */
inline std::vector<double> fused_prefill(const FusedShape &sh, const std::vector<uint16_t> &q_full_bits,
                                         const std::vector<uint16_t> &q_rope_bits,
                                         const std::vector<uint16_t> &kv_latent_bits,
                                         const std::vector<uint16_t> &k_rope_bits,
                                         const std::vector<uint16_t> &w_uk_bits,
                                         const std::vector<uint16_t> &w_uv_bits, double inv_sqrt_d) {
    const std::vector<double> q_full = widen(q_full_bits), q_rope = widen(q_rope_bits),
                              kv_latent = widen(kv_latent_bits), k_rope = widen(k_rope_bits), w_uk = widen(w_uk_bits),
                              w_uv = widen(w_uv_bits);
    const size_t hd = sh.hd();
    std::vector<double> out(sh.seq * sh.nq * sh.v_dim, 0.0);
    std::vector<double> q_abs(sh.kv_lora), o_lat(sh.kv_lora), score(sh.seq);
    for (size_t t = 0; t < sh.seq; ++t)
        for (size_t h = 0; h < sh.nq; ++h) {
            std::fill(q_abs.begin(), q_abs.end(), 0.0);
            for (size_t d = 0; d < sh.nope; ++d) {
                const double qd = q_full[t * sh.nq * hd + h * hd + d];
                for (size_t c = 0; c < sh.kv_lora; ++c) q_abs[c] += qd * w_uk[(h * sh.nope + d) * sh.kv_lora + c];
            }
            double mx = -std::numeric_limits<double>::infinity();
            for (size_t s = 0; s <= t; ++s) {
                double dot = 0.0;
                for (size_t c = 0; c < sh.kv_lora; ++c) dot += q_abs[c] * kv_latent[s * sh.kv_lora + c];
                for (size_t r = 0; r < sh.rope; ++r)
                    dot += q_rope[(t * sh.nq + h) * sh.rope + r] * k_rope[s * sh.rope + r];
                score[s] = dot * inv_sqrt_d;
                mx = std::max(mx, score[s]);
            }
            double sum = 0.0;
            for (size_t s = 0; s <= t; ++s) {
                score[s] = std::exp(score[s] - mx);
                sum += score[s];
            }
            std::fill(o_lat.begin(), o_lat.end(), 0.0);
            for (size_t s = 0; s <= t; ++s)
                for (size_t c = 0; c < sh.kv_lora; ++c)
                    o_lat[c] += score[s] / sum * kv_latent[s * sh.kv_lora + c];
            for (size_t e = 0; e < sh.v_dim; ++e) {
                double acc = 0.0;
                for (size_t c = 0; c < sh.kv_lora; ++c)
                    acc += o_lat[c] * w_uv[(h * sh.v_dim + e) * sh.kv_lora + c];
                out[(t * sh.nq + h) * sh.v_dim + e] = acc;
            }
        }
    return out;
}

/* The cache rows kernel 4 writes (and kernel 5 with it), as bit patterns:
 * K = [kv_latent | k_rope]; V = [kv_latent | zeros] (v_has_rope false) or
 * [kv_latent | k_rope]. */
inline void cache_rows(const FusedShape &sh, const std::vector<uint16_t> &kv_latent,
                       const std::vector<uint16_t> &k_rope, bool v_has_rope, std::vector<uint16_t> *k_cache,
                       std::vector<uint16_t> *v_cache) {
    const size_t cd = sh.cache_dim();
    k_cache->assign(sh.seq * cd, 0);
    v_cache->assign(sh.seq * cd, 0);
    for (size_t t = 0; t < sh.seq; ++t) {
        for (size_t c = 0; c < sh.kv_lora; ++c) {
            (*k_cache)[t * cd + c] = kv_latent[t * sh.kv_lora + c];
            (*v_cache)[t * cd + c] = kv_latent[t * sh.kv_lora + c];
        }
        for (size_t r = 0; r < sh.rope; ++r) {
            (*k_cache)[t * cd + sh.kv_lora + r] = k_rope[t * sh.rope + r];
            (*v_cache)[t * cd + sh.kv_lora + r] = v_has_rope ? k_rope[t * sh.rope + r] : (uint16_t)0;
        }
    }
}

}  // namespace mla_ref

#endif
