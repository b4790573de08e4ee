// paged_decode_reference.h - float64 CPU reference of the paged decode
// family (../shared/notes/kernel-contract.md, "Paged decode family",
// kernels 9-12), written from the contract alone:
//
//   q [num_seqs, q_stride], head h at h*head_dim; query head h reads KV head
//   h / (num_q_heads / num_kv_heads); position p of sequence s lives in
//   physical block block_tables[s, p / block_size], slot p % block_size;
//   positions [max(0, L - sliding_window), L), or [0, L) when
//   sliding_window == 0, L = seq_lens[s]; L == 0 gives zeros;
//   out[s, h] = softmax_p(q . k_p * inv_sqrt_d) . v_p,
//   output [num_seqs, num_q_heads, head_dim].
//
// The cache is read through callables k(block, slot, kv_head, d) and
// v(block, slot, kv_head, d) returning the dequantised value, so one
// reference serves the bf16 layout and the fp8 layout (with its stride and
// scales) alike. Everything is double; nothing is rounded.
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_REFERENCE_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace paged_decode_ref {

struct Shape {
    uint32_t num_seqs = 0;
    uint32_t max_blocks_per_seq = 0;
    uint32_t num_q_heads = 0;
    uint32_t num_kv_heads = 0;
    uint32_t head_dim = 0;
    uint32_t block_size = 0;
    uint32_t q_stride = 0;
    uint32_t sliding_window = 0;
    double inv_sqrt_d = 0.0;
};

// First attended position of a sequence of length len.
inline uint32_t window_begin(uint32_t len, uint32_t sliding_window) {
    return (sliding_window != 0 && len > sliding_window) ? len - sliding_window : 0;
}

// The output [num_seqs, num_q_heads, head_dim] in double. q holds q_stride
// values per sequence (the padding is never read).
template <class KFn, class VFn>
std::vector<double> attention(const Shape &g, const std::vector<double> &q, const std::vector<int32_t> &block_tables,
                              const std::vector<int32_t> &seq_lens, KFn k, VFn v) {
    const uint32_t D = g.head_dim;
    const uint32_t group = g.num_q_heads / g.num_kv_heads;
    std::vector<double> out((size_t)g.num_seqs * g.num_q_heads * D, 0.0);
    std::vector<double> score;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        const uint32_t len = seq_lens[s] > 0 ? (uint32_t)seq_lens[s] : 0;
        const uint32_t begin = window_begin(len, g.sliding_window);
        if (begin >= len) continue;  // no position: zeros
        for (uint32_t h = 0; h < g.num_q_heads; h++) {
            const uint32_t kvh = h / group;
            const double *qh = &q[(size_t)s * g.q_stride + (size_t)h * D];
            score.assign(len - begin, 0.0);
            double mx = -INFINITY;
            for (uint32_t p = begin; p < len; p++) {
                const int64_t block = block_tables[(size_t)s * g.max_blocks_per_seq + p / g.block_size];
                const uint32_t slot = p % g.block_size;
                double dot = 0.0;
                for (uint32_t d = 0; d < D; d++) dot += qh[d] * k(block, slot, kvh, d);
                score[p - begin] = dot * g.inv_sqrt_d;
                mx = std::max(mx, score[p - begin]);
            }
            double sum = 0.0;
            for (double &x : score) {
                x = std::exp(x - mx);
                sum += x;
            }
            double *o = &out[((size_t)s * g.num_q_heads + h) * D];
            for (uint32_t p = begin; p < len; p++) {
                const int64_t block = block_tables[(size_t)s * g.max_blocks_per_seq + p / g.block_size];
                const uint32_t slot = p % g.block_size;
                const double w = score[p - begin] / sum;
                for (uint32_t d = 0; d < D; d++) o[d] += w * v(block, slot, kvh, d);
            }
        }
    }
    return out;
}

}  // namespace paged_decode_ref

#endif  // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_REFERENCE_H
