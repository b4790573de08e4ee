// decode_problem.h - a small random paged-decode problem (bf16 cache, no
// sliding window) and its float64 reference, for the launch tests: the
// layout of ../shared/notes/kernel-contract.md (kernels 9-12) as
// specs/paged_decode.yaml documents it:
//   q       [num_seqs][q_stride], head h at h * head_dim
//   k, v    [num_blocks][block_size][num_kv_heads][head_dim]
//   tables  [num_seqs][max_blocks_per_seq] physical block of each logical one
//   out     [num_seqs][num_q_heads][head_dim], softmax(q.k * inv_sqrt_d) v;
//           zeros for a sequence of length 0.
// Physical blocks are dealt out in shuffled order; slots past a sequence's
// length and table entries past its last block hold NaN (a block of NaNs),
// so a kernel reading what it must not shows in the output.
#ifndef KLAUNCH_TESTS_LAUNCH_DECODE_PROBLEM_H
#define KLAUNCH_TESTS_LAUNCH_DECODE_PROBLEM_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tests/support/gpu_test_util.h"

namespace decode_problem {

struct Problem {
    uint32_t num_seqs = 0, num_q_heads = 8, num_kv_heads = 1, head_dim = 128, block_size = 16;
    uint32_t q_stride = 0, max_blocks_per_seq = 0;
    float inv_sqrt_d = 0.0f;
    std::vector<int32_t> lens, tables;
    std::vector<kl_bf16> q, k, v;  // as uploaded

    double qd(size_t i) const { return kl_test::bf16_to_float(q[i]); }
    size_t cache_index(int64_t block, uint32_t slot, uint32_t kvh, uint32_t d) const {
        return ((static_cast<size_t>(block) * block_size + slot) * num_kv_heads + kvh) * head_dim + d;
    }
};

inline Problem build(const std::vector<int32_t> &lens, uint32_t seed, uint32_t num_q_heads = 8,
                     uint32_t num_kv_heads = 1) {
    Problem p;
    p.num_seqs = static_cast<uint32_t>(lens.size());
    p.num_q_heads = num_q_heads;
    p.num_kv_heads = num_kv_heads;
    p.lens = lens;
    p.q_stride = p.num_q_heads * p.head_dim;
    p.inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
    std::mt19937 gen(seed * 2654435761u + 7u);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);

    std::vector<uint32_t> nblocks(p.num_seqs);
    uint32_t max_nb = 0, used = 0;
    for (uint32_t s = 0; s < p.num_seqs; s++) {
        nblocks[s] = (static_cast<uint32_t>(std::max(lens[s], 0)) + p.block_size - 1) / p.block_size;
        max_nb = std::max(max_nb, nblocks[s]);
        used += nblocks[s];
    }
    p.max_blocks_per_seq = max_nb + 1;
    const uint32_t num_blocks = used + 1;  // the last: all NaN
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    const int32_t nan_block = perm[used];

    const size_t cache_elems = static_cast<size_t>(num_blocks) * p.block_size * p.num_kv_heads * p.head_dim;
    const kl_bf16 nan = {0x7fc0};
    p.k.assign(cache_elems, nan);
    p.v.assign(cache_elems, nan);
    p.tables.assign(static_cast<size_t>(p.num_seqs) * p.max_blocks_per_seq, nan_block);
    uint32_t next = 0;
    for (uint32_t s = 0; s < p.num_seqs; s++) {
        for (uint32_t b = 0; b < nblocks[s]; b++) {
            const int32_t phys = perm[next++];
            p.tables[static_cast<size_t>(s) * p.max_blocks_per_seq + b] = phys;
            for (uint32_t slot = 0; slot < p.block_size; slot++) {
                if (b * p.block_size + slot >= static_cast<uint32_t>(lens[s])) continue;  // stays NaN
                for (uint32_t kvh = 0; kvh < p.num_kv_heads; kvh++)
                    for (uint32_t d = 0; d < p.head_dim; d++) {
                        p.k[p.cache_index(phys, slot, kvh, d)] = kl_test::float_to_bf16(unit(gen));
                        p.v[p.cache_index(phys, slot, kvh, d)] = kl_test::float_to_bf16(unit(gen));
                    }
            }
        }
    }
    p.q.resize(static_cast<size_t>(p.num_seqs) * p.q_stride);
    for (auto &x : p.q) x = kl_test::float_to_bf16(unit(gen));
    return p;
}

// out [num_seqs][num_q_heads][head_dim] in float64 from the bf16 values.
inline std::vector<double> reference(const Problem &p) {
    const uint32_t D = p.head_dim, group = p.num_q_heads / p.num_kv_heads;
    std::vector<double> out(static_cast<size_t>(p.num_seqs) * p.num_q_heads * D, 0.0);
    std::vector<double> score;
    for (uint32_t s = 0; s < p.num_seqs; s++) {
        const uint32_t len = static_cast<uint32_t>(std::max(p.lens[s], 0));
        if (len == 0) continue;
        for (uint32_t h = 0; h < p.num_q_heads; h++) {
            const uint32_t kvh = h / group;
            const size_t q0 = static_cast<size_t>(s) * p.q_stride + static_cast<size_t>(h) * D;
            score.assign(len, 0.0);
            double mx = -INFINITY;
            for (uint32_t pos = 0; pos < len; pos++) {
                const int64_t b = p.tables[static_cast<size_t>(s) * p.max_blocks_per_seq + pos / p.block_size];
                double dot = 0.0;
                for (uint32_t d = 0; d < D; d++)
                    dot += p.qd(q0 + d) * kl_test::bf16_to_float(p.k[p.cache_index(b, pos % p.block_size, kvh, d)]);
                score[pos] = dot * static_cast<double>(p.inv_sqrt_d);
                mx = std::max(mx, score[pos]);
            }
            double sum = 0.0;
            for (double &x : score) {
                x = std::exp(x - mx);
                sum += x;
            }
            double *o = &out[(static_cast<size_t>(s) * p.num_q_heads + h) * D];
            for (uint32_t pos = 0; pos < len; pos++) {
                const int64_t b = p.tables[static_cast<size_t>(s) * p.max_blocks_per_seq + pos / p.block_size];
                const double w = score[pos] / sum;
                for (uint32_t d = 0; d < D; d++)
                    o[d] += w * kl_test::bf16_to_float(p.v[p.cache_index(b, pos % p.block_size, kvh, d)]);
            }
        }
    }
    return out;
}

constexpr size_t kGuard = 8;  // poisoned output elements on each side

// An output as downloaded (kGuard elements, the outputs, kGuard elements)
// against the reference: guards untouched (still 0xFFFF), ||out - ref|| /
// ||ref|| < 1e-2, every element within 1e-3 * max|ref| + 1e-2 * |ref|, exact
// zeros for empty sequences.
inline ::testing::AssertionResult check_output(const Problem &p, const std::vector<double> &ref,
                                               const std::vector<kl_bf16> &all) {
    const size_t n = ref.size();
    if (all.size() != n + 2 * kGuard) return ::testing::AssertionFailure() << "output size " << all.size();
    for (size_t i = 0; i < kGuard; i++)
        if (all[i].bits != 0xFFFF || all[kGuard + n + i].bits != 0xFFFF)
            return ::testing::AssertionFailure() << "a guard element around the output was written";
    const std::vector<kl_bf16> got(all.begin() + kGuard, all.begin() + kGuard + n);
    const size_t row = static_cast<size_t>(p.num_q_heads) * p.head_dim;
    for (uint32_t s = 0; s < p.num_seqs; s++) {
        if (p.lens[s] > 0) continue;
        for (size_t i = 0; i < row; i++)
            if (got[s * row + i].bits != 0 && got[s * row + i].bits != 0x8000)
                return ::testing::AssertionFailure() << "sequence " << s << " is empty but its output is not zero";
    }
    double ref_max = 0.0;
    for (double r : ref) ref_max = std::max(ref_max, std::fabs(r));
    return kl_test::all_close("output", got, ref, 1e-3 * ref_max, 1e-2, 1e-2);
}

}  // namespace decode_problem

#endif  // KLAUNCH_TESTS_LAUNCH_DECODE_PROBLEM_H
