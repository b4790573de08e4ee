// mla_decode_emu_harness.h - one decode step of the MLA decode family on
// the CPU emulator, as a caller runs it: the schedule from the lengths,
// one attention launcher, the combine; every input in a registered
// read-only buffer, every output poisoned and guarded; then the schedule's
// words against the rule's (mla_decode_reference.h), out and lse against
// the float64 reference.
#ifndef KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_EMU_HARNESS_H
#define KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_EMU_HARNESS_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_decode/mla_decode_reference.h"

namespace mla_decode_emu {

enum class Attn { kBf16Mma, kFp8Mma, kBf16Tma, kFp8Tma };

inline const char *attn_name(Attn a) {
    switch (a) {
    case Attn::kBf16Mma: return "bf16_mma";
    case Attn::kFp8Mma: return "fp8_mma";
    case Attn::kBf16Tma: return "bf16_tma";
    case Attn::kFp8Tma: return "fp8_tma";
    }
    return "?";
}
inline bool attn_fp8(Attn a) { return a == Attn::kFp8Mma || a == Attn::kFp8Tma; }
inline kl_mla_decode_kind attn_kind(Attn a) {
    return a == Attn::kBf16Tma ? KL_MLA_DECODE_BF16_TMA : a == Attn::kFp8Tma ? KL_MLA_DECODE_FP8_TMA : KL_MLA_DECODE_MMA;
}

template <class T> std::unique_ptr<emu::Buffer<T>> input(const std::vector<T> &v, const char *name) {
    std::unique_ptr<emu::Buffer<T>> b(new emu::Buffer<T>(v.size(), emu::Access::kRead, name, 16 / sizeof(T)));
    if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * sizeof(T));
    return b;
}

// Launches attention launcher `a` of `mod` on the problem, and the combine
// (its PDL twin with `pdl`); defined by the test, so the coverage test sees
// every launcher called from an emulated test's own file.
kl_status launch_combine(bool pdl, const kl_module *mod, const mla_decode_ref::Problem &p, const int32_t *sched,
                         const float *ws, kl_bf16 *out, float *lse, uint32_t parts, uint64_t words, uint64_t bytes);
kl_status launch_attention(Attn a, const kl_module *mod, const mla_decode_ref::Problem &p, const kl_bf16 *q,
                           const void *cache, const int32_t *table, const int32_t *lens, const int32_t *sched,
                           kl_bf16 *out, float *lse, float *ws, uint32_t parts, uint64_t words, uint64_t bytes);

// What the step's three launches reached of their declared extents
// (emu_test::ExtentsReached), over the steps run() is given it for.
struct StepExtents {
    emu_test::ExtentsReached schedule, attention, combine;
    StepExtents(Attn a, bool pdl)
        : schedule("mla_decode_schedule"), attention(std::string("mla_decode_attn_") + attn_name(a)),
          combine(pdl ? "mla_decode_combine_pdl" : "mla_decode_combine") {}
};

// Runs the step and checks it; with `pdl` the combine is mla_decode_combine_pdl;
// the cache starts `misalign` bytes past a 16-byte boundary; `ext`, if
// given, takes each launch's reach of its extents.
inline void run(Attn a, const kl_module *mod, const mla_decode_ref::Problem &p, uint32_t parts, bool pdl = false,
                uint32_t misalign = 0, StepExtents *ext = nullptr) {
    SCOPED_TRACE(::testing::Message() << attn_name(a) << " D " << p.D << " batch " << p.batch << " s_q " << p.s_q
                                      << " h_q " << p.h_q << " page " << p.page << " parts " << parts
                                      << (pdl ? " pdl" : "") << " cache misaligned by " << misalign);
    const uint32_t R = p.rows(), DV = p.dv();
    const uint64_t words = kl_mla_decode_schedule_words(p.batch, parts);
    const uint64_t bytes = kl_mla_decode_workspace_bytes(parts, p.s_q, p.h_q, p.D);

    auto q = input(p.q, "q");
    auto table = input(p.table, "block_table");
    auto lens = input(p.lengths, "lengths");
    std::vector<uint8_t> bytes_in(misalign, 0);
    if (p.fp8)
        bytes_in.insert(bytes_in.end(), p.cache8.begin(), p.cache8.end());
    else
        bytes_in.insert(bytes_in.end(), reinterpret_cast<const uint8_t *>(p.cache.data()),
                        reinterpret_cast<const uint8_t *>(p.cache.data() + p.cache.size()));
    auto c8 = input(bytes_in, "kv_cache");
    const void *cache = c8->data() + misalign;
    emu::Buffer<int32_t> sched((size_t)words, emu::Access::kReadWrite, "sched");
    emu::Buffer<float> ws((size_t)(bytes / 4u), emu::Access::kReadWrite, "workspace");
    emu::Buffer<kl_bf16> out((size_t)p.batch * R * DV, emu::Access::kWrite, "out");
    emu::Buffer<float> lse((size_t)p.batch * R, emu::Access::kWrite, "lse");

    kl_kernel sk;
    KL_EMU_ASSERT_OK(kl_mla_decode_schedule_get(&sk, mod));
    KL_EMU_ASSERT_OK(kl_mla_decode_schedule(&sk, lens->data(), sched.data(), p.batch, parts, words, nullptr));
    if (ext != nullptr) EXPECT_TRUE(ext->schedule.add());
    const std::vector<int32_t> want = mla_decode_ref::schedule(p.lengths, parts);
    size_t wrong = 0;
    std::ostringstream first;
    for (size_t i = 0; i < want.size(); ++i)
        if (sched[i] != want[i] && wrong++ < 8) first << "  word " << i << ": " << sched[i] << ", want " << want[i] << "\n";
    EXPECT_EQ(wrong, 0u) << "the schedule's words differ from the rule's:\n" << first.str();
    EXPECT_TRUE(sched.guards_intact()) << "a write landed outside sched";

    ASSERT_EQ(launch_attention(a, mod, p, reinterpret_cast<const kl_bf16 *>(q->data()), cache, table->data(), lens->data(), sched.data(), out.data(),
                               lse.data(), ws.data(), parts, words, bytes),
              KL_SUCCESS)
        << kl_last_error_message();
    if (ext != nullptr) EXPECT_TRUE(ext->attention.add());
    KL_EMU_ASSERT_OK(launch_combine(pdl, mod, p, sched.data(), ws.data(), out.data(), lse.data(), parts, words, bytes));
    if (ext != nullptr) EXPECT_TRUE(ext->combine.add());
    EXPECT_TRUE(out.guards_intact()) << "a write landed outside out";
    EXPECT_TRUE(lse.guards_intact()) << "a write landed outside lse";
    EXPECT_TRUE(ws.guards_intact()) << "a write landed outside the workspace";

    std::vector<double> ref_o, ref_l, ref_s;
    mla_decode_ref::attention(p, ref_o, ref_l, &ref_s);
    auto where = [&](size_t i, uint32_t w) {
        std::ostringstream s;
        s << "[b " << i / w / R << ", row " << i / w % R << " (token " << i / w % R / p.h_q << ", head "
          << i / w % R % p.h_q << ")";
        if (w > 1) s << ", col " << i % w;
        s << "]";
        return s.str();
    };
    {
        size_t off = 0;
        double d2 = 0.0, r2 = 0.0;
        std::ostringstream of;
        for (size_t i = 0; i < ref_o.size(); ++i) {
            const double g = emu_test::bf16(out[i].bits), r = ref_o[i];
            if (!mla_decode_ref::close(g, r, ref_s[i]) && off++ < 8)
                of << "  out" << where(i, DV) << ": got " << g << ", want " << r << " (terms of size " << ref_s[i]
                   << ")\n";
            if (std::isfinite(g)) d2 += (g - r) * (g - r);
            r2 += r * r;
        }
        const double rel = r2 > 0.0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
        EXPECT_EQ(off, 0u) << off << " of " << ref_o.size() << " outputs off:\n" << of.str();
        EXPECT_LT(rel, 1e-2) << "relative norm error of out";
    }
    size_t bad = 0;
    std::ostringstream lf;
    for (size_t i = 0; i < ref_l.size(); ++i) {
        const double g = lse[i], r = ref_l[i];
        const bool ok = std::isinf(r) ? (std::isinf(g) && g < 0) : (std::isfinite(g) && std::fabs(g - r) <= 1e-2 + 1e-4 * std::fabs(r));
        if (!ok && bad++ < 8) lf << "  lse" << where(i, 1) << ": got " << g << ", want " << r << "\n";
    }
    EXPECT_EQ(bad, 0u) << "lse rows off:\n" << lf.str();
}

}  // namespace mla_decode_emu

#endif  // KLAUNCH_TESTS_MLA_DECODE_MLA_DECODE_EMU_HARNESS_H
