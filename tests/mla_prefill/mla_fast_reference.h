/* Float64 CPU reference for the absorbed MLA prefill attention of
 * kl_mla_absorbed_attention_mma, written from its contract
 * (docs/MLA_PREFILL.md, specs/mla_prefill.yaml), not from the kernel:
 *
 *   q [B, S, H, D], kv [B, S, D], out [B, S, H, kv_lora], kv_lora = D - 64
 *   score(t, s) = (q[b, t, h, :] . kv[b, s, :]) * scale      (s <= t if causal)
 *   out[b, t, h, :] = sum_s softmax_s(score) * kv[b, s, 0:kv_lora]
 *
 * Inputs are bf16 bit patterns, read exactly. The grouped GEMM reference is
 * mla_ref::grouped_gemm in mla_reference.h (the same contract).
 */
#ifndef KLAUNCH_TESTS_MLA_ATTENTION_MLA_FAST_REFERENCE_H
#define KLAUNCH_TESTS_MLA_ATTENTION_MLA_FAST_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace mla_fast_ref {

inline double bf16_to_double(uint16_t bits) {
    const uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return (double)f;
}

inline std::vector<double> widen(const std::vector<uint16_t> &v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_double(v[i]);
    return out;
}

inline std::vector<double> absorbed_attention(const std::vector<uint16_t> &q_bits, const std::vector<uint16_t> &kv_bits,
                                              size_t batch, size_t seq, size_t heads, size_t d, size_t kv_lora,
                                              double scale, bool causal, std::vector<double> *abs_mass = nullptr) {
    const std::vector<double> q = widen(q_bits), kv = widen(kv_bits);
    std::vector<double> out(batch * seq * heads * kv_lora, 0.0), score(seq);
    // abs_mass[i] = sum_s p_s |v_s| of element i: the scale of the error that
    // rounding the weights p_s to bf16 (as a tensor-core P @ V must) can make.
    if (abs_mass) abs_mass->assign(out.size(), 0.0);
    for (size_t b = 0; b < batch; ++b)
        for (size_t t = 0; t < seq; ++t)
            for (size_t h = 0; h < heads; ++h) {
                const size_t end = causal ? t + 1 : seq;
                const double *qr = &q[((b * seq + t) * heads + h) * d];
                double mx = -std::numeric_limits<double>::infinity();
                for (size_t s = 0; s < end; ++s) {
                    const double *kr = &kv[(b * seq + s) * d];
                    double dot = 0.0;
                    for (size_t x = 0; x < d; ++x) dot += qr[x] * kr[x];
                    score[s] = dot * scale;
                    mx = std::max(mx, score[s]);
                }
                double sum = 0.0;
                for (size_t s = 0; s < end; ++s) {
                    score[s] = std::exp(score[s] - mx);
                    sum += score[s];
                }
                double *o = &out[((b * seq + t) * heads + h) * kv_lora];
                for (size_t s = 0; s < end; ++s) {
                    const double p = score[s] / sum;
                    const double *vr = &kv[(b * seq + s) * d];
                    for (size_t x = 0; x < kv_lora; ++x) o[x] += p * vr[x];
                    if (abs_mass) {
                        double *m = &(*abs_mass)[((b * seq + t) * heads + h) * kv_lora];
                        for (size_t x = 0; x < kv_lora; ++x) m[x] += p * std::fabs(vr[x]);
                    }
                }
            }
    return out;
}

}  // namespace mla_fast_ref

#endif  // KLAUNCH_TESTS_MLA_ATTENTION_MLA_FAST_REFERENCE_H
