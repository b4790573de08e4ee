// What the MLA prefill family's float64-checked GPU tests share
// (mla_fast_test.cc, mla_copy_engine_test.cc): device regions between
// poisoned guards, random bf16 inputs, and the closeness check against a
// float64 reference (per element atol + 1e-2 |ref| with atol 1% of the
// reference's RMS, ||out - ref|| / ||ref|| < 1e-2, NaN and inf never pass).
#ifndef KLAUNCH_TESTS_MLA_PREFILL_MLA_GPU_CHECK_H
#define KLAUNCH_TESTS_MLA_PREFILL_MLA_GPU_CHECK_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include "tests/support/gpu_test_util.h"

namespace mla_gpu_check {

using kl_test::DeviceBuffer;

constexpr uint16_t kPoison = 0xFFFF;  // what DeviceBuffer::poison() writes
constexpr size_t kGuard = 8;          // poisoned elements on each side (16 bytes: keeps alignment)

inline std::vector<uint16_t> random_bits(size_t n, uint32_t seed, float scale) {
    const std::vector<kl_bf16> v = kl_test::to_bf16(kl_test::random_uniform(n, seed, -scale, scale));
    std::vector<uint16_t> out(n);
    for (size_t i = 0; i < n; i++) out[i] = v[i].bits;
    return out;
}

// `count` elements a kernel sees, with kGuard poison elements after them and
// kGuard + `misalign` before (an odd misalign moves the start off a 16-byte
// boundary).
struct Region {
    Region(size_t count_, size_t misalign) : count(count_), front(kGuard + misalign), buf(front + count_ + kGuard) {
        buf.poison();
    }
    Region(const std::vector<uint16_t> &data, size_t misalign) : Region(data.size(), misalign) {
        std::vector<kl_bf16> host(buf.size());
        for (kl_bf16 &v : host) v.bits = kPoison;
        std::memcpy(host.data() + front, data.data(), data.size() * sizeof(uint16_t));
        buf.upload(host);
    }
    kl_bf16 *ptr() const { return buf.get() + front; }
    // The kernel-visible elements; *guards_ok says whether all others are still poison.
    std::vector<uint16_t> read(bool *guards_ok) const {
        const std::vector<kl_bf16> all = buf.download();
        *guards_ok = true;
        std::vector<uint16_t> out(count);
        for (size_t i = 0; i < all.size(); i++) {
            if (i >= front && i < front + count)
                out[i - front] = all[i].bits;
            else if (all[i].bits != kPoison)
                *guards_ok = false;
        }
        return out;
    }
    size_t count, front;
    DeviceBuffer<kl_bf16> buf;
};

inline double bf16(uint16_t b) { return kl_test::bf16_to_float(kl_bf16{b}); }

// Per element atol + 1e-2 |ref| (atol: 1% of the reference's RMS, since
// outputs near zero carry their neighbours' error), ||out - ref|| / ||ref||
// < 1e-2, NaN and inf never pass. `where(i)` names element i.
template <class Where>
// `extra`, when given, widens element i's tolerance by extra[i] (an error
// bound of the method, e.g. bf16 attention weights); the norm limit stays.
::testing::AssertionResult close_to(const char *what, const std::vector<uint16_t> &out, const std::vector<double> &ref,
                                    Where where, const std::vector<double> *extra = nullptr) {
    if (out.size() != ref.size()) return ::testing::AssertionFailure() << what << ": size " << out.size() << " vs " << ref.size();
    double r2 = 0.0;
    for (double r : ref) r2 += r * r;
    const double atol = ref.empty() ? 0.0 : 1e-2 * std::sqrt(r2 / static_cast<double>(ref.size()));
    double d2 = 0.0;
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < ref.size(); i++) {
        const double o = bf16(out[i]), d = std::fabs(o - ref[i]);
        const double tol = atol + 1e-2 * std::fabs(ref[i]) + (extra ? (*extra)[i] : 0.0);
        if (!std::isfinite(o) || !(d <= tol)) {
            if (bad < 10) first << "  " << what << where(i) << ": got " << o << ", want " << ref[i] << "\n";
            bad++;
        }
        if (std::isfinite(o)) d2 += d * d;
    }
    const double rel = r2 > 0.0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    if (bad == 0 && rel < 1e-2) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << bad << " of " << ref.size() << " elements outside atol "
                                         << atol << " + 1e-2 |ref|; ||out - ref|| / ||ref|| = " << rel
                                         << " (limit 1e-2)\n"
                                         << first.str() << (bad > 10 ? "  ...\n" : "");
}

// An absorbed attention output [batch, seq, heads, dv] against its float64
// reference: `mass` (sum_s p_s |v_s| per element, from the reference) scaled
// to P @ V's bound on tensor cores, whose weights p_s are bf16 (unit
// roundoff 2^-8) under an unrounded normaliser: at most 2 * 2^-8 * mass.
// Rows with few keys have large |out| and feel this most; the RMS-based atol
// alone is too tight for them.
inline ::testing::AssertionResult attention_close_to(const std::vector<uint16_t> &got, const std::vector<double> &ref,
                                                     std::vector<double> mass, uint32_t seq, uint32_t heads,
                                                     uint32_t dv) {
    for (double &m : mass) m *= 2.0 / 256.0;
    return close_to(
        "out", got, ref,
        [&](size_t i) {
            std::ostringstream s;
            s << "[b " << i / dv / heads / seq << ", t " << i / dv / heads % seq << ", h " << i / dv % heads
              << ", col " << i % dv << "]";
            return s.str();
        },
        &mass);
}

}  // namespace mla_gpu_check

#endif
