// emu_test_util.h - what an emulated kernel test needs besides GoogleTest
// and emu.h: the process's emulated backend, a loaded module per family and
// variant, random bf16 data, and the tolerance check the GPU tests use
// (atol + rtol * |ref| per element and a relative-norm bound, first ten
// mismatches printed).
//
//     const kl_module *mod = emu_test::module("paged_decode", "gqa8_d128");
//     kl_kernel k;
//     KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16_get(&k, mod));
//     emu::Buffer<kl_bf16> out(n, emu::Access::kWrite, "output");   // poisoned, guarded
//     KL_EMU_ASSERT_OK(kl_paged_decode_attn_bf16(&k, ..., out.data(), ..., nullptr));
#ifndef KLAUNCH_TESTS_EMU_EMU_TEST_UTIL_H
#define KLAUNCH_TESTS_EMU_EMU_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "klaunch/klaunch.h"
#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"
#include "tests/emu/fp.h"

#define KL_EMU_ASSERT_OK(expr)                                                                              \
    do {                                                                                                    \
        const kl_status kl_emu_st_ = (expr);                                                                \
        ASSERT_EQ(kl_emu_st_, KL_SUCCESS) << #expr << " returned " << kl_last_error_message();              \
    } while (0)

namespace emu_test {

inline kl_emu_backend *backend() {
    static kl_emu_backend *b = [] {
        kl_emu_backend *eb = new kl_emu_backend;
        kl_emu_backend_init(eb);
        return eb;
    }();
    return b;
}

// The family's variant, loaded once per process (kernel handles point into it).
inline const kl_module *module(const std::string &family, const std::string &variant) {
    static std::map<std::string, std::unique_ptr<kl_module>> mods;
    std::unique_ptr<kl_module> &m = mods[family + "/" + variant];
    if (!m) {
        const void *image = kl_emu_image(family.c_str(), variant.c_str());
        if (image == nullptr) {
            ADD_FAILURE() << "no emulated image " << family << "/" << variant << " is linked into this test";
            return nullptr;
        }
        m.reset(new kl_module);
        const kl_status st = kl_module_load(&backend()->base, image, kl_emu_image_size(), m.get());
        if (st != KL_SUCCESS) {
            ADD_FAILURE() << "kl_module_load: " << kl_last_error_message();
            m.reset();
            return nullptr;
        }
    }
    return m.get();
}

inline int64_t module_const(const kl_module *m, const char *name) {
    int64_t v = 0;
    EXPECT_TRUE(kl_module_const(m, name, &v)) << "the module has no constant " << name;
    return v;
}

inline uint32_t env_seed() {
    const char *e = std::getenv("KL_TEST_SEED");
    return e != nullptr ? (uint32_t)std::strtoul(e, nullptr, 0) : 0u;
}

inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale) {
    std::mt19937 gen(seed * 2654435761u + env_seed());
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<uint16_t> out(n);
    for (uint16_t &x : out) x = emu::fp::f32_to_bf16(dist(gen));
    return out;
}

inline double bf16(uint16_t b) { return (double)emu::fp::bf16_to_f32(b); }

// Every element within atol + rtol * |ref|, finite, and ||out - ref|| / ||ref|| < norm_tol.
inline ::testing::AssertionResult close(const char *what, const std::function<double(size_t)> &got,
                                        const std::vector<double> &ref, double atol, double rtol, double norm_tol,
                                        const std::function<std::string(size_t)> &where) {
    double d2 = 0.0, r2 = 0.0;
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double o = got(i), r = ref[i];
        const double d = std::fabs(o - r);
        if (!std::isfinite(o) || !(d <= atol + rtol * std::fabs(r))) {
            if (bad < 10) first << "  " << what << where(i) << ": got " << o << ", want " << r << "\n";
            bad++;
        }
        if (std::isfinite(o)) d2 += d * d;
        r2 += r * r;
    }
    const double rel = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
    if (bad == 0 && rel < norm_tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << bad << " of " << ref.size()
                                         << " elements off; relative norm error " << rel << "\n"
                                         << first.str();
}

// The windows of the last launch reached the last byte of every declared
// extent (the extents are tight for that shape: spec `extent`); lists the
// ones it did not reach, with how far it got. For kernels run directly
// (emu::run with emu::set_declared_extents); a launcher's test names it
// (below).
inline ::testing::AssertionResult windows_reached() {
    std::string missed;
    const auto &ws = emu::last_declared_extents();
    for (const emu::DeclaredExtent &w : ws) {
        if (w.reach != w.bytes())
            missed += "\n  " + w.param + ": reached byte " + std::to_string(w.reach) + " of " +
                      std::to_string(w.bytes()) + " (" + w.expr + " = " + std::to_string(w.elements) + " elements)";
    }
    if (ws.empty()) return ::testing::AssertionFailure() << "the last launch had no declared extent";
    if (!missed.empty()) return ::testing::AssertionFailure() << "extents not reached:" << missed;
    return ::testing::AssertionSuccess();
}

// Which declared extents of a launcher some launch reached, over one or
// more launches: where no one shape reaches the end of every buffer (an
// attention that writes out only for the sequences it does not split, and
// reads a split sequence's schedule words only when it splits one), each
// launch adds what it reached and all() asks that every extent was reached
// by one of them (issue 44: for each buffer some shape touches its last
// declared element).
//
//     emu_test::ExtentsReached ext("mla_decode_attn_bf16_mma");
//     launch(shape_a); EXPECT_TRUE(ext.add());
//     launch(shape_b); EXPECT_TRUE(ext.add());
//     EXPECT_TRUE(ext.all());
//
// add() takes the last launch through the emulated backend: it must be of
// kl_<launcher>, complete, and pass no NULL for a pointer of a computable
// extent. An extent of 0 elements (an empty part of that shape) counts as
// reached by no launch: some launch must reach it non-empty. all() succeeding is noted for the program's end-of-run check
// (emu::note_extents_asserted, emu_backend.h): every launcher with a
// computable extent that ran must have had it succeed once.
class ExtentsReached {
  public:
    explicit ExtentsReached(std::string launcher) : launcher_(std::move(launcher)) {}

    ::testing::AssertionResult add() {
        const emu::BackendLaunch &l = emu::last_backend_launch();
        if (l.launcher != launcher_)
            return ::testing::AssertionFailure() << "the last emulated launch was "
                                                 << (l.launcher.empty() ? std::string("none") : "kl_" + l.launcher)
                                                 << ", not kl_" << launcher_;
        if (!l.completed) return ::testing::AssertionFailure() << "the last launch of kl_" << launcher_ << " failed";
        if (l.computable == 0)
            return ::testing::AssertionFailure() << "kl_" << launcher_ << " declares no computable extent";
        if (!l.null_params.empty()) {
            std::string names;
            for (const std::string &n : l.null_params) names += (names.empty() ? "" : ", ") + n;
            return ::testing::AssertionFailure() << "kl_" << launcher_ << ": NULL passed for " << names
                                                 << ", whose extent is then not checked";
        }
        launches_++;
        for (const emu::DeclaredExtent &w : emu::last_declared_extents()) {
            Param &p = params_[w.param];
            if (w.bytes() == 0) {  // an empty extent shows nothing
                if (p.best.empty()) p.best = "empty (" + w.expr + " = 0)";
            } else if (w.reach == w.bytes()) {
                p.reached = true;
            } else if (!p.reached && (p.best_reach == 0 || w.reach > p.best_reach)) {
                p.best_reach = w.reach;
                p.best = "reached byte " + std::to_string(w.reach) + " of " + std::to_string(w.bytes()) + " (" +
                         w.expr + " = " + std::to_string(w.elements) + " elements)";
            }
        }
        return ::testing::AssertionSuccess();
    }

    ::testing::AssertionResult all() const {
        if (launches_ == 0 || params_.empty())
            return ::testing::AssertionFailure() << "kl_" << launcher_ << ": no launch was added";
        std::string missed;
        for (const auto &kv : params_)
            if (!kv.second.reached) missed += "\n  " + kv.first + ": at best " + kv.second.best;
        if (!missed.empty())
            return ::testing::AssertionFailure() << "kl_" << launcher_ << ": extents not reached in "
                                                 << launches_ << " launch(es):" << missed;
        emu::note_extents_asserted(launcher_);
        return ::testing::AssertionSuccess();
    }

  private:
    struct Param {
        bool reached = false;
        uint64_t best_reach = 0;
        std::string best;
    };
    std::string launcher_;
    uint32_t launches_ = 0;
    std::map<std::string, Param> params_;
};

// The last launch was kl_<launcher> and reached the last element of every
// declared (computable) extent: the spec's extents of that launcher are
// tight for its shape (issue 44). Call it right after a launch whose shape
// reaches each buffer's end (a full last row, the last split's record, ...).
inline ::testing::AssertionResult extents_reached(const std::string &launcher) {
    ExtentsReached e(launcher);
    ::testing::AssertionResult r = e.add();
    if (!r) return r;
    return e.all();
}

}  // namespace emu_test

#endif  // KLAUNCH_TESTS_EMU_EMU_TEST_UTIL_H
