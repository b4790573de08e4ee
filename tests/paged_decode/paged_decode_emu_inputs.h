// paged_decode_emu_inputs.h - a paged_decode_problem.h Problem's inputs as
// the CPU emulator's registered read-only buffers (tests/emu), shared by
// the emulated tests of the decode family: q, the block tables, seq_lens
// and the caches (bf16; fp8 apart or K and V interleaved in one
// allocation), with the cache pointers `misalign` elements in; and the
// checks after a persistent launcher's launch (check_emulated_launch).
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/emu/emu_test_util.h"
#include "tests/paged_decode/paged_decode_problem.h"

namespace paged_decode_problem {

// A host vector in a registered read-only buffer (16 guard bytes keep its
// start 16-byte aligned, as a device allocation is).
template <class T> std::unique_ptr<emu::Buffer<T>> emu_input(const std::vector<T> &v, const char *name) {
    std::unique_ptr<emu::Buffer<T>> b(new emu::Buffer<T>(v.size(), emu::Access::kRead, name, 16 / sizeof(T)));
    if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * sizeof(T));
    return b;
}

struct EmuInputs {
    std::unique_ptr<emu::Buffer<kl_bf16>> q, kb, vb;
    std::unique_ptr<emu::Buffer<int32_t>> tables, lens;
    std::unique_ptr<emu::Buffer<kl_fp8_e4m3>> k8, v8;
    const kl_bf16 *kbp = nullptr, *vbp = nullptr;          // bf16 caches as the launchers get them
    const kl_fp8_e4m3 *k8p = nullptr, *v8p = nullptr;      // fp8 caches as the launchers get them

    EmuInputs(const Problem &p, const Case &c, bool fp8) {
        q = emu_input(p.q_bits, "q");
        tables = emu_input(p.tables, "block_tables");
        lens = emu_input(p.lens, "seq_lens");
        if (!fp8) {
            kb = emu_input(p.k_bf16, "k_cache");
            vb = emu_input(p.v_bf16, "v_cache");
            kbp = kb->data() + c.misalign;
            vbp = vb->data() + c.misalign;
        } else if (c.interleaved) {
            k8 = emu_input(p.kv_fp8, "kv_cache");
            k8p = k8->data() + c.misalign;
            v8p = k8p + p.block_elems;
        } else {
            k8 = emu_input(p.k_fp8, "k_cache");
            v8 = emu_input(p.v_fp8, "v_cache");
            k8p = k8->data() + c.misalign;
            v8p = v8->data() + c.misalign;
        }
    }
};

// The fixture of the decode family's emulated tests, parameterised by the
// pack width (4 or 8): the variant's emulated module.
class PackWidthTest : public ::testing::TestWithParam<int> {
  protected:
    int width() const { return GetParam(); }
    const kl_module *mod() { return emu_test::module("paged_decode", width() == 4 ? "gqa4_d128" : "gqa8_d128"); }
};

// The test name of a pack width: gqa4_d128, gqa8_d128.
inline std::string pack_width_name(const ::testing::TestParamInfo<int> &i) {
    return "gqa" + std::to_string(i.param) + "_d128";
}

// What the emulated tests of the persistent launchers check after
// launch(): the guards of the output, workspace and counters, every counter
// back to zero, the output against the float64 reference; with `twice`, a
// second launch on the same (poisoned) workspace and counters bit for bit
// equal to the first. (The seed-grid launchers' cases pass nc = 0.)
template <class Launch>
void check_emulated_launch(const Problem &p, const std::vector<double> &ref, emu::Buffer<kl_bf16> &out,
                           emu::Buffer<float> &ws, emu::Buffer<uint32_t> &counters, uint64_t nc, bool twice,
                           const Launch &launch) {
    const size_t n_out = static_cast<size_t>(p.g.num_seqs) * p.g.num_q_heads * p.g.head_dim;
    launch();
    EXPECT_TRUE(out.guards_intact()) << "a write landed outside the output";
    EXPECT_TRUE(ws.guards_intact()) << "a write landed outside the workspace";
    EXPECT_TRUE(counters.guards_intact()) << "a write landed outside the counters";
    for (uint64_t i = 0; i < nc; i++)
        EXPECT_EQ(counters[i], 0u) << "counter " << i << " (sequence " << i / p.g.num_kv_heads << ", KV head "
                                   << i % p.g.num_kv_heads << ") is not back to zero after the launch";
    std::vector<kl_bf16> all(kGuard + n_out + kGuard, kl_bf16{kPoisonBf16});
    std::memcpy(all.data() + kGuard, out.data(), n_out * sizeof(kl_bf16));
    check_output(p, ref, all);
    if (!twice) return;
    const std::vector<kl_bf16> first(out.data(), out.data() + n_out);
    out.fill_bytes(0xFF);
    ws.fill_bytes(0xFF);
    launch();
    size_t differ = 0;
    for (size_t i = 0; i < n_out; i++) differ += out[i].bits != first[i].bits;
    EXPECT_EQ(differ, 0u) << "a second launch on the same (reset) counters gave another output";
    for (uint64_t i = 0; i < nc; i++) EXPECT_EQ(counters[i], 0u) << "counter " << i << " after the second launch";
}

// Two problems of one batch shape (num_seqs, num_kv_heads: one set of
// counters serves both) with different lengths, caches, tables and
// queries, for the back-to-back launches below.
inline std::pair<Case, Case> two_problems(uint32_t width, uint32_t seed) {
    Case a, b;
    a.num_kv_heads = b.num_kv_heads = 2;
    a.num_q_heads = b.num_q_heads = 2 * width;
    a.seq_lens = {100, 0, 37};  // 2 x (7, 1, 3) tiles
    b.seq_lens = {5, 90, 61};   // 2 x (1, 6, 4) tiles
    a.seed = seed;
    b.seed = seed + 1;
    return {a, b};
}

// What a persistent launch did about the launch before it, as the
// emulator saw it (emu::last_grid_dependency): a programmatic dependent
// launch (the _bulk and _tma launchers) triggers its dependents in every
// block, so on the GPU the next launch's blocks may start while it runs,
// and no thread of it touches global memory (inputs, output, workspace,
// counters) before its griddepcontrol.wait, which every thread executes; a
// plain one (the _mma launchers) triggers nothing, so a dependent starts
// only as its blocks exit.
inline void expect_dependency(bool programmatic, const char *which) {
    const emu::GridDependency &d = emu::last_grid_dependency();
    EXPECT_EQ(d.programmatic, programmatic) << which;
    if (programmatic) {
        EXPECT_EQ(d.blocks_triggered, d.blocks) << which << ": blocks that never executed launch_dependents";
        EXPECT_EQ(d.threads_waited, d.threads) << which << ": threads that never executed griddepcontrol.wait";
        EXPECT_EQ(d.early_accesses, 0u) << which << ": global accesses before griddepcontrol.wait";
    } else {
        EXPECT_EQ(d.blocks_triggered, 0u) << which;
    }
}

// Launches of a persistent launcher back to back on one workspace and one
// set of counters, with different problems: launch(0) runs a's (inputs,
// output out_a, its grid), launch(1) b's, then launch(0) a's again, with
// nothing between them (no check, no reset). On the emulator a
// programmatic launch's accesses before its wait are checked against the
// launch before it (a conflict fails the launch: emu.h); here, after each,
// its dependency (expect_dependency), and after the three: the guards,
// every counter back to zero, each output against its own float64
// reference, a's second output bit for bit its first.
template <class Launch>
void check_back_to_back(const Problem &a, const Problem &b, emu::Buffer<kl_bf16> &out_a, emu::Buffer<kl_bf16> &out_b,
                        emu::Buffer<float> &ws, emu::Buffer<uint32_t> &counters, uint64_t nc, bool programmatic,
                        const Launch &launch) {
    const std::vector<double> ref_a = reference(a), ref_b = reference(b);
    const size_t na = static_cast<size_t>(a.g.num_seqs) * a.g.num_q_heads * a.g.head_dim;
    const size_t nb = static_cast<size_t>(b.g.num_seqs) * b.g.num_q_heads * b.g.head_dim;
    launch(0);
    expect_dependency(programmatic, "the first launch (a)");
    const std::vector<kl_bf16> first_a(out_a.data(), out_a.data() + na);
    launch(1);
    expect_dependency(programmatic, "the second launch (b)");
    out_a.fill_bytes(0xFF);
    launch(0);
    expect_dependency(programmatic, "the third launch (a again)");
    EXPECT_TRUE(out_a.guards_intact() && out_b.guards_intact()) << "a write landed outside an output";
    EXPECT_TRUE(ws.guards_intact()) << "a write landed outside the workspace";
    EXPECT_TRUE(counters.guards_intact()) << "a write landed outside the counters";
    for (uint64_t i = 0; i < nc; i++) EXPECT_EQ(counters[i], 0u) << "counter " << i << " after the three launches";
    std::vector<kl_bf16> all(kGuard + nb + kGuard, kl_bf16{kPoisonBf16});
    std::memcpy(all.data() + kGuard, out_b.data(), nb * sizeof(kl_bf16));
    {
        SCOPED_TRACE("b's output");
        check_output(b, ref_b, all);
    }
    all.assign(kGuard + na + kGuard, kl_bf16{kPoisonBf16});
    std::memcpy(all.data() + kGuard, out_a.data(), na * sizeof(kl_bf16));
    {
        SCOPED_TRACE("a's output (its second launch)");
        check_output(a, ref_a, all);
    }
    size_t differ = 0;
    for (size_t i = 0; i < na; i++) differ += out_a[i].bits != first_a[i].bits;
    EXPECT_EQ(differ, 0u) << "a's second launch, after b's on the same workspace and counters, gave another output";
}

}  // namespace paged_decode_problem

#endif  // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H
