// mla_decode_reference.h - the MLA decode family's references, written
// from specs/mla_decode.yaml's contract and include/klaunch/mla_decode_layout.h's
// rules (never from the kernels): a decode problem with shuffled page
// tables and NaN wherever the kernels must not read (pages no table names,
// positions past a sequence's length on its last page, table entries past
// its pages), the attention in float64, and the schedule's words.
// Shared by the emulated tests and the GPU tests of tests/mla_decode/.
#ifndef KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_REFERENCE_H
#define KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "klaunch/mla_decode_layout.h"

namespace mla_decode_ref {

inline double bf16(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// float -> bf16, round to nearest even (NaN stays NaN).
inline uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// OCP E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; S.1111.111 is NaN, no infinities.
inline double e4m3(uint8_t c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
    const double v = e == 0 ? std::ldexp((double)m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}

// The nearest E4M3 to x (|x| <= 448), ties to the even code: the codes'
// values rise with the code, so a binary search over the 127 positive ones.
inline uint8_t to_e4m3(double x) {
    const double a = std::fabs(x);
    int lo = 0, hi = 126; /* e4m3(hi) = 448; code 127 is NaN */
    while (lo < hi) {     /* the first code whose value is >= a */
        const int mid = (lo + hi) / 2;
        if (e4m3((uint8_t)mid) < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    int c = lo;
    if (c > 0) {
        const double below = a - e4m3((uint8_t)(c - 1)), above = e4m3((uint8_t)c) - a;
        if (below < above || (below == above && ((c - 1) & 1) == 0)) c = c - 1;
    }
    return (uint8_t)(c | (x < 0 ? 0x80 : 0));
}

struct Problem {
    uint32_t batch = 0, s_q = 1, h_q = 8, D = 576, page = 64, num_blocks = 0, mbps = 0;
    bool fp8 = false;
    float scale = 0.0f;
    std::vector<int32_t> lengths, table;  // table [batch][mbps]
    std::vector<uint16_t> q;              // [batch][s_q * h_q][D] bf16 bits
    std::vector<uint16_t> cache;          // bf16: [num_blocks][page][D]
    std::vector<uint8_t> cache8;          // fp8: [num_blocks][page][token bytes]

    uint32_t rows() const { return s_q * h_q; }
    uint32_t dv() const { return D - 64u; }
    uint32_t token_bytes() const { return kl_mla_decode_fp8_token_bytes(dv()); }
    uint64_t max_len() const { return (uint64_t)mbps * page; }
    uint32_t len(uint32_t b) const {
        const int64_t l = std::max<int32_t>(lengths[b], 0);
        return (uint32_t)std::min<uint64_t>((uint64_t)l, max_len());
    }
    // The cache row of position p of sequence b as the tensor cores see it
    // (bf16 values; fp8 dequantised: fp32 e4m3 * scale, rounded to bf16),
    // or false when its page is outside [0, num_blocks).
    bool key(uint32_t b, uint32_t p, std::vector<double> &k) const {
        const int32_t pg = table[(size_t)b * mbps + p / page];
        if (pg < 0 || (uint32_t)pg >= num_blocks) return false;
        const size_t row = (size_t)pg * page + p % page;
        k.resize(D);
        if (!fp8) {
            for (uint32_t d = 0; d < D; ++d) k[d] = bf16(cache[row * D + d]);
            return true;
        }
        const uint8_t *t = cache8.data() + row * token_bytes();
        const uint32_t dvv = dv();
        for (uint32_t c = 0; c < dvv; ++c) {
            float sc;
            std::memcpy(&sc, t + kl_mla_decode_fp8_scales_offset(dvv) + 4u * (c / 128u), 4);
            k[c] = bf16(to_bf16((float)e4m3(t[c]) * sc));
        }
        const uint8_t *rope = t + kl_mla_decode_fp8_rope_offset(dvv);
        for (uint32_t d = 0; d < 64u; ++d) {
            uint16_t h;
            std::memcpy(&h, rope + 2u * d, 2);
            k[dvv + d] = bf16(h);
        }
        return true;
    }
};

struct Spec {
    uint32_t s_q = 1, h_q = 8, D = 576, page = 64;
    bool fp8 = false;
    std::vector<int32_t> lengths;
    uint32_t spare_pages = 3;   // pages no table names (NaN)
    uint32_t spare_table = 1;   // table entries past the longest sequence's pages (-1)
    double fp8_log_scale = 3.0; // fp8 scales 10^U(-x, x)
    uint32_t seed = 1;
};

// A problem: random q and cache values in [-1, 1], each sequence's pages a
// random permutation of the cache's blocks, NaN everywhere the kernels
// must not read.
inline Problem make(const Spec &s) {
    Problem p;
    p.batch = (uint32_t)s.lengths.size();
    p.s_q = s.s_q;
    p.h_q = s.h_q;
    p.D = s.D;
    p.page = s.page;
    p.fp8 = s.fp8;
    p.lengths = s.lengths;
    p.scale = 1.0f / std::sqrt((float)s.D);
    std::mt19937 gen(s.seed * 2654435761u + 12345u);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    uint32_t pages = 0, longest = 1;
    std::vector<uint32_t> npg(p.batch);
    for (uint32_t b = 0; b < p.batch; ++b) {
        const uint32_t l = (uint32_t)std::max<int32_t>(s.lengths[b], 0);
        npg[b] = (l + s.page - 1u) / s.page;
        pages += npg[b];
        longest = std::max(longest, npg[b]);
    }
    p.mbps = longest + s.spare_table;
    p.num_blocks = pages + s.spare_pages;
    std::vector<int32_t> perm(p.num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    p.table.assign((size_t)p.batch * p.mbps, -1);
    std::vector<int> named(p.num_blocks, 0);
    std::vector<uint32_t> valid_rows(p.num_blocks, 0);
    uint32_t next = 0;
    for (uint32_t b = 0; b < p.batch; ++b) {
        const uint32_t l = (uint32_t)std::max<int32_t>(s.lengths[b], 0);
        for (uint32_t j = 0; j < npg[b]; ++j) {
            const int32_t pg = perm[next++];
            p.table[(size_t)b * p.mbps + j] = pg;
            named[pg] = 1;
            valid_rows[pg] = std::min(s.page, l - j * s.page);
        }
    }
    p.q.resize((size_t)p.batch * p.rows() * p.D);
    for (uint16_t &x : p.q) x = to_bf16(u(gen));
    const size_t nrows = (size_t)p.num_blocks * p.page;
    if (!s.fp8) {
        p.cache.resize(nrows * p.D);
        for (size_t r = 0; r < nrows; ++r) {
            const bool live = named[r / p.page] && r % p.page < valid_rows[r / p.page];
            for (uint32_t d = 0; d < p.D; ++d) p.cache[r * p.D + d] = live ? to_bf16(u(gen)) : 0x7fc0u;
        }
    } else {
        const uint32_t tb = p.token_bytes(), dvv = p.dv();
        std::uniform_real_distribution<double> ls(-s.fp8_log_scale, s.fp8_log_scale);
        p.cache8.resize(nrows * tb);
        for (size_t r = 0; r < nrows; ++r) {
            uint8_t *t = p.cache8.data() + r * tb;
            const bool live = named[r / p.page] && r % p.page < valid_rows[r / p.page];
            if (!live) {
                std::memset(t, 0xff, tb); /* E4M3 NaN, fp32 NaN scales, bf16 NaN rope */
                continue;
            }
            for (uint32_t c = 0; c < dvv; ++c) t[c] = to_e4m3(u(gen));
            for (uint32_t k = 0; k < dvv / 128u; ++k) {
                const float sc = (float)std::pow(10.0, ls(gen));
                std::memcpy(t + dvv + 4u * k, &sc, 4);
            }
            for (uint32_t x = dvv + dvv / 32u; x < kl_mla_decode_fp8_rope_offset(dvv); ++x) t[x] = 0xff; /* padding */
            for (uint32_t d = 0; d < 64u; ++d) {
                const uint16_t h = to_bf16(u(gen));
                std::memcpy(t + kl_mla_decode_fp8_rope_offset(dvv) + 2u * d, &h, 2);
            }
        }
    }
    return p;
}

// out [batch][rows][dv] and lse [batch][rows] (natural log; -inf and zeros
// where a row sees no position) in float64; and `scale`, per element the
// same softmax average of |v| (sum_p w_p |v_pc| / sum_p w_p): the size of
// the terms an element sums, which bounds the error of weights rounded to
// bf16 (the kernels round P so, as FlashAttention does) where they cancel.
inline void attention(const Problem &p, std::vector<double> &out, std::vector<double> &lse,
                      std::vector<double> *scale = nullptr) {
    const uint32_t R = p.rows(), DV = p.dv();
    out.assign((size_t)p.batch * R * DV, 0.0);
    if (scale) scale->assign(out.size(), 0.0);
    lse.assign((size_t)p.batch * R, -std::numeric_limits<double>::infinity());
    std::vector<double> k;
    std::vector<std::vector<double>> keys;
    std::vector<char> ok;
    for (uint32_t b = 0; b < p.batch; ++b) {
        const uint32_t len = p.len(b);
        keys.assign(len, std::vector<double>());
        ok.assign(len, 0);
        for (uint32_t pos = 0; pos < len; ++pos) ok[pos] = p.key(b, pos, keys[pos]);
        for (uint32_t r = 0; r < R; ++r) {
            const uint32_t i = r / p.h_q, hidden = p.s_q - 1u - i;
            const uint32_t vis = len > hidden ? len - hidden : 0u;
            const uint16_t *qr = p.q.data() + ((size_t)b * R + r) * p.D;
            std::vector<double> sc(vis, -std::numeric_limits<double>::infinity());
            double m = -std::numeric_limits<double>::infinity();
            for (uint32_t pos = 0; pos < vis; ++pos) {
                if (!ok[pos]) continue;
                double acc = 0.0;
                for (uint32_t d = 0; d < p.D; ++d) acc += bf16(qr[d]) * keys[pos][d];
                sc[pos] = acc * (double)p.scale;
                m = std::max(m, sc[pos]);
            }
            if (m == -std::numeric_limits<double>::infinity()) continue;
            double l = 0.0;
            double *o = out.data() + ((size_t)b * R + r) * DV;
            double *a = scale ? scale->data() + ((size_t)b * R + r) * DV : nullptr;
            for (uint32_t pos = 0; pos < vis; ++pos) {
                if (!ok[pos]) continue;
                const double w = std::exp(sc[pos] - m);
                l += w;
                for (uint32_t c = 0; c < DV; ++c) o[c] += w * keys[pos][c];
                if (a)
                    for (uint32_t c = 0; c < DV; ++c) a[c] += w * std::fabs(keys[pos][c]);
            }
            for (uint32_t c = 0; c < DV; ++c) o[c] /= l;
            if (a)
                for (uint32_t c = 0; c < DV; ++c) a[c] /= l;
            lse[(size_t)b * R + r] = m + std::log(l);
        }
    }
}

// The schedule's words for these lengths and parts, by the rule of
// klaunch/mla_decode_layout.h (THE SCHEDULE), walked unit by unit where
// that is clearer than the closed forms.
inline std::vector<int32_t> schedule(const std::vector<int32_t> &lengths, uint32_t P) {
    const uint32_t B = (uint32_t)lengths.size();
    const uint64_t F = KL_MLA_DECODE_SCHED_FIXED_COST;
    std::vector<uint64_t> T(B), C(B + 1, 0);
    for (uint32_t b = 0; b < B; ++b) {
        T[b] = lengths[b] > 0 ? ((uint64_t)lengths[b] + 63u) / 64u : 0u;
        C[b + 1] = C[b] + T[b] + F;
    }
    const uint64_t total = C[B], per = (total + P - 1u) / P;
    struct Cut {
        uint32_t b, t;
    };
    std::vector<Cut> cuts(P + 1);
    for (uint32_t p = 0; p <= P; ++p) {
        const uint64_t x = (uint64_t)p * per;
        if (p == P || x >= total) {
            cuts[p] = {B, 0};
            continue;
        }
        uint32_t b = 0;
        while (C[b + 1] <= x) ++b;
        const uint64_t off = x - C[b];
        cuts[p] = {b, off <= F ? 0u : (uint32_t)(off - F)};
    }
    // splits: a cut strictly inside a sequence's tiles starts a new split
    std::vector<uint32_t> splits(B, 1), base(B, 0), first_split(P, 0);
    for (uint32_t p = 1; p < P; ++p)
        if (cuts[p].b < B && cuts[p].t > 0) first_split[p] = splits[cuts[p].b]++;
    uint32_t slots = 0;
    for (uint32_t b = 0; b < B; ++b) {
        base[b] = slots;
        if (splits[b] > 1) slots += splits[b];
    }
    std::vector<int32_t> w(kl_mla_decode_schedule_words(B, P), 0);
    w[0] = KL_MLA_DECODE_SCHED_MAGIC;
    w[1] = (int32_t)B;
    w[2] = (int32_t)P;
    w[3] = (int32_t)slots;
    for (uint32_t p = 0; p < P; ++p) {
        int32_t *r = w.data() + 16 + 8 * p;
        r[0] = (int32_t)cuts[p].b;
        r[1] = (int32_t)cuts[p].t;
        r[2] = (int32_t)cuts[p + 1].b;
        r[3] = (int32_t)cuts[p + 1].t;
        r[4] = (int32_t)(cuts[p].t > 0 ? first_split[p] : 0u);
    }
    for (uint32_t b = 0; b < B; ++b) {
        w[16 + 8 * P + b] = (int32_t)splits[b];
        w[16 + 8 * P + B + b] = (int32_t)base[b];
    }
    w[4] = (int32_t)(uint32_t)total;
    w[5] = (int32_t)(uint32_t)(total >> 32);
    for (uint32_t b = 0; b < B; ++b) {
        w[16 + 8 * P + 2 * B + 2 * b] = (int32_t)(uint32_t)C[b];
        w[16 + 8 * P + 2 * B + 2 * b + 1] = (int32_t)(uint32_t)(C[b] >> 32);
    }
    return w;
}

// Whether an output element is right: within 1e-2 |ref| (two bf16
// roundings) + 4e-3 scale (weights rounded to bf16, 2^-9 each, where the
// terms cancel) + 1e-3, finite.
inline bool close(double got, double ref, double scale) {
    return std::isfinite(got) && std::fabs(got - ref) <= 1e-2 * std::fabs(ref) + 4e-3 * scale + 1e-3;
}

}  // namespace mla_decode_ref

#endif  // KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_REFERENCE_H
