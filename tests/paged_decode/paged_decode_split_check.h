// paged_decode_split_check.h - the split-KV workspace checked against its
// documented contents (klaunch/paged_decode_split.h), split by split, and
// the documented split of a window; shared by the GPU test
// (paged_decode_split_test.cc) and the emulated one
// (paged_decode_emulated_test.cc).
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_SPLIT_CHECK_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_SPLIT_CHECK_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/paged_decode/paged_decode_problem.h"
#include "tests/paged_decode/paged_decode_reference.h"

namespace paged_decode_problem {

using paged_decode_ref::Shape;

// ---- the documented split of a window ------------------------------------------------

struct Range {
    uint32_t begin = 0, end = 0;
    bool empty() const { return begin >= end; }
    uint32_t size() const { return empty() ? 0 : end - begin; }
};

// Split j of num_splits of the window [begin, end) (specs/paged_decode.yaml):
// blocks b0 = begin / bs .. b1 = ceil_div(end, bs), per = ceil_div(b1 - b0,
// num_splits), positions [max(begin, (b0 + j*per)*bs), min(end, (b0 +
// (j+1)*per)*bs)).
inline Range split_of(uint32_t begin, uint32_t end, uint32_t bs, uint32_t num_splits, uint32_t j) {
    Range r;
    if (begin >= end) return r;
    const uint64_t b0 = begin / bs, b1 = (static_cast<uint64_t>(end) + bs - 1) / bs;
    const uint64_t per = (b1 - b0 + num_splits - 1) / num_splits;
    const uint64_t lo = (b0 + j * per) * bs, hi = (b0 + (j + 1) * per) * bs;
    const uint64_t sb = std::max<uint64_t>(begin, lo), se = std::min<uint64_t>(end, hi);
    if (sb < se) {
        r.begin = static_cast<uint32_t>(sb);
        r.end = static_cast<uint32_t>(se);
    }
    return r;
}

// ---- checks ---------------------------------------------------------------------------

constexpr size_t kWsGuard = 64;       // guard floats after the workspace
constexpr uint32_t kPoisonF32 = 0xFFFFFFFFu;
constexpr double kLog2e = 1.4426950408889634;

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// The workspace of one launch against its documented contents.
inline void check_workspace(const Problem &p, const Case &c, uint32_t splits, const std::vector<float> &ws) {
    const Shape &g = p.g;
    const uint32_t D = g.head_dim, group = g.num_q_heads / g.num_kv_heads;
    const uint64_t R = static_cast<uint64_t>(g.num_seqs) * splits * g.num_q_heads;
    ASSERT_EQ(ws.size(), R * (D + 2) + kWsGuard);
    const float *acc = ws.data();
    const float *ml = ws.data() + R * D;

    size_t guard_bad = 0;
    for (size_t i = R * (D + 2); i < ws.size(); i++) guard_bad += f32_bits(ws[i]) != kPoisonF32;
    EXPECT_EQ(guard_bad, 0u) << "floats past the workspace's " << R * (D + 2) << " were written";

    std::ostringstream bad;
    size_t n_bad = 0, n_empty = 0, n_full = 0;
    auto fail = [&](const std::string &what) {
        if (n_bad++ < 10) bad << "  " << what << "\n";
    };
    std::vector<double> got_mean, ref_mean, score, mean;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        const uint32_t len = static_cast<uint32_t>(std::max(p.lens[s], 0));
        const uint32_t wb = paged_decode_ref::window_begin(len, g.sliding_window);
        for (uint32_t j = 0; j < splits; j++) {
            const Range r = split_of(wb, len, g.block_size, splits, j);
            for (uint32_t h = 0; h < g.num_q_heads; h++) {
                const uint64_t row = (static_cast<uint64_t>(s) * splits + j) * g.num_q_heads + h;
                const float m = ml[2 * row], l = ml[2 * row + 1];
                const float *a = acc + row * D;
                std::ostringstream where;
                where << "seq " << s << " (window [" << wb << ", " << len << ")), split " << j << " [" << r.begin
                      << ", " << r.end << "), head " << h << " (row " << row << "): ";
                if (r.empty()) {
                    n_empty++;
                    if (!(m == -INFINITY && l == 0.0f))
                        fail(where.str() + "empty split has (m, l) = (" + std::to_string(m) + ", " +
                             std::to_string(l) + "), want (-inf, 0)");
                    size_t touched = 0;
                    for (uint32_t d = 0; d < D; d++) touched += f32_bits(a[d]) != kPoisonF32;
                    if (touched != 0)
                        fail(where.str() + "empty split wrote " + std::to_string(touched) + " acc elements");
                    continue;
                }
                n_full++;
                // Base-2 scores of the split's positions, in float64.
                const uint32_t kvh = h / group;
                const double *qh = &p.q[static_cast<size_t>(s) * g.q_stride + static_cast<size_t>(h) * D];
                score.assign(r.size(), 0.0);
                double m_ref = -INFINITY, abs_max = 0.0;
                for (uint32_t pos = r.begin; pos < r.end; pos++) {
                    const int64_t b = p.tables[static_cast<size_t>(s) * g.max_blocks_per_seq + pos / g.block_size];
                    const uint32_t slot = pos % g.block_size;
                    double dot = 0.0, mag = 0.0;
                    for (uint32_t d = 0; d < D; d++) {
                        const double t = qh[d] * p.kval(b, slot, kvh, d);
                        dot += t;
                        mag += std::fabs(t);
                    }
                    score[pos - r.begin] = dot * g.inv_sqrt_d * kLog2e;
                    m_ref = std::max(m_ref, score[pos - r.begin]);
                    abs_max = std::max(abs_max, mag * g.inv_sqrt_d * kLog2e);
                }
                double l_ref = 0.0;
                for (double x : score) l_ref += std::exp2(x - m_ref);
                // fp32 scores: 128-term dot products, error well under
                // 2^-24 * 128 * sum|terms|; the log-sum-exp adds ex2.approx
                // and the fp32 sums.
                const double tol_s = 4e-5 * abs_max + 1e-5;
                if (!(std::fabs(m - m_ref) <= tol_s))
                    fail(where.str() + "m = " + std::to_string(m) + ", want " + std::to_string(m_ref) + " +- " +
                         std::to_string(tol_s));
                const double lse = m + std::log2(static_cast<double>(l)), lse_ref = m_ref + std::log2(l_ref);
                if (!(l > 0.0f) || !(std::fabs(lse - lse_ref) <= tol_s + 3e-4))
                    fail(where.str() + "m + log2(l) = " + std::to_string(lse) + ", want " + std::to_string(lse_ref) +
                         " (l = " + std::to_string(l) + "; a position missing or counted twice?)");
                if (c.q_amp == 0.0f) {
                    // Every score is 0: m = 0 and l counts the positions.
                    if (!(m == 0.0f) || !(std::fabs(l - static_cast<double>(r.size())) < 0.25))
                        fail(where.str() + "q = 0: (m, l) = (" + std::to_string(m) + ", " + std::to_string(l) +
                             "), want (0, " + std::to_string(r.size()) + ")");
                }
                // acc / l: the split's own softmax-weighted mean of v.
                mean.assign(D, 0.0);
                for (uint32_t pos = r.begin; pos < r.end; pos++) {
                    const int64_t b = p.tables[static_cast<size_t>(s) * g.max_blocks_per_seq + pos / g.block_size];
                    const double w = std::exp2(score[pos - r.begin] - m_ref) / l_ref;
                    for (uint32_t d = 0; d < D; d++) mean[d] += w * p.vval(b, pos % g.block_size, kvh, d);
                }
                for (uint32_t d = 0; d < D; d++) {
                    ref_mean.push_back(mean[d]);
                    got_mean.push_back(static_cast<double>(a[d]) / static_cast<double>(l));
                }
            }
        }
    }
    EXPECT_EQ(n_bad, 0u) << n_bad << " workspace records of " << n_empty + n_full << " are wrong:\n"
                         << bad.str();
    if (!ref_mean.empty()) {
        double mx = 0.0;
        for (double x : ref_mean) mx = std::max(mx, std::fabs(x));
        EXPECT_TRUE(kl_test::all_close("acc / l of the non-empty splits", got_mean, ref_mean, 1e-3 * mx, 1e-2, 1e-2));
    }
}

}  // namespace paged_decode_problem

#endif  // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_SPLIT_CHECK_H
