// kl_mla_q_rope_extract_tma from its own source on the CPU emulator
// (tests/emu/sm90_tma.cc emulates the copy engine from the PTX ISA), through
// the generated launcher and the generated tensor-map builders on the
// emulated backend, in both variants, bit exact against the contract's
// reference (tests/mla_prefill/mla_data_movement_reference.h). Inputs are
// random bit patterns, the output poisoned with guards on both sides: an
// element past a ragged edge that the store failed to clip, or one the
// kernel never wrote, shows. Shapes reach boxes mostly outside the tensor
// (1 token, 1 head), ragged heads and tokens, a rope wider than one box and
// one shorter, padded rows. A map that overruns its buffer faults, naming it.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/mla_prefill.h"
#include "tests/emu/emu_test_util.h"
#include "tests/mla_prefill/mla_data_movement_reference.h"

namespace {

using emu::Access;
using namespace mla_dm_ref;

class MlaTmaEmulated : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override { KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma_get(&k_, emu_test::module("mla_prefill", GetParam()))); }
    kl_kernel k_;
};

// num_tokens, nq, nope, rope, q_dim_pad, misalign (0: the maps need 16-byte alignment)
const RopeCase kCases[] = {
    {1, 1, 128, 64, 0, 0},   // the models' head, one token: the box is 1 of 128 rows
    {17, 9, 128, 64, 8, 0},  // ragged in heads (9 of 16) and tokens (17 of 32), padded rows
    {16, 8, 0, 64, 0, 0},    // exactly one box, no nope part
    {3, 16, 128, 96, 0, 0},  // two boxes in z, the second half outside the tensor
    {5, 3, 8, 24, 16, 0},    // rope 24: 40 of each box row outside the tensor
};

::testing::AssertionResult bit_equal(const emu::Buffer<kl_bf16> &got, const std::vector<kl_bf16> &want) {
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < want.size(); ++i)
        if (got[i].bits != want[i].bits) {
            if (bad < 10) first << "  [" << i << "]: got " << std::hex << got[i].bits << ", want " << want[i].bits << std::dec << "\n";
            bad++;
        }
    if (!got.guards_intact()) return ::testing::AssertionFailure() << "a guard element was written (a store past the tensor's edge)";
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << want.size() << " elements differ\n" << first.str();
}

TEST_P(MlaTmaEmulated, CopiesEachHeadsRopeSliceThroughTheCopyEngine) {
    uint32_t seed = 900;
    for (const RopeCase &c : kCases) {
        std::ostringstream what;
        what << c;
        SCOPED_TRACE(what.str());
        std::mt19937 gen(seed++ * 2654435761u + emu_test::env_seed());
        emu::Buffer<kl_bf16> q((size_t)c.num_tokens * c.q_dim(), Access::kRead, "q_full");
        emu::Buffer<kl_bf16> out((size_t)c.num_tokens * c.nq * c.rope, Access::kWrite, "q_rope_out");
        std::uniform_int_distribution<uint32_t> dist(0, 0xFFFE);
        for (size_t i = 0; i < q.size(); ++i) q[i].bits = (uint16_t)dist(gen);
        std::vector<kl_bf16> want(out.size(), bits(0xFFFF));
        ref_rope_extract(q.data(), want.data(), c);

        kl_tensor_map qm, om;
        KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma_q_map_encode(&k_, &qm, q.data() + c.nope, c.rope, c.nq,
                                                                c.num_tokens, c.hd(), c.q_dim()));
        KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma_out_map_encode(&k_, &om, out.data(), c.rope, c.nq, c.num_tokens,
                                                                  c.rope, (uint64_t)c.nq * c.rope));
        KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma(&k_, &qm, &om, c.num_tokens, c.nq, c.rope, nullptr));
        EXPECT_TRUE(bit_equal(out, want));
    }
}

// A map describing one token more than its buffer holds: the engine would
// read past it; the emulator faults at the first load outside q_full (the
// bytes past it may belong to no buffer, or to another one, which is named).
TEST_P(MlaTmaEmulated, AMapOverrunningItsBufferFaultsNamingIt) {
    const RopeCase c = {4, 2, 128, 64, 0, 0};
    emu::Buffer<kl_bf16> q((size_t)c.num_tokens * c.q_dim(), Access::kRead, "q_full");
    emu::Buffer<kl_bf16> out((size_t)(c.num_tokens + 1) * c.nq * c.rope, Access::kWrite, "q_rope_out");
    for (size_t i = 0; i < q.size(); ++i) q[i].bits = (uint16_t)(i * 7919u);
    kl_tensor_map qm, om;
    KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma_q_map_encode(&k_, &qm, q.data() + c.nope, c.rope, c.nq,
                                                            c.num_tokens + 1, c.hd(), c.q_dim()));
    KL_EMU_ASSERT_OK(kl_mla_q_rope_extract_tma_out_map_encode(&k_, &om, out.data(), c.rope, c.nq, c.num_tokens + 1,
                                                              c.rope, (uint64_t)c.nq * c.rope));
    EXPECT_EQ(KL_ERROR_LAUNCH_FAILED, kl_mla_q_rope_extract_tma(&k_, &qm, &om, c.num_tokens + 1, c.nq, c.rope, nullptr));
    const std::string msg = kl_last_error_message();
    EXPECT_NE(std::string::npos, msg.find("emulated launch failed: emulator: ")) << msg;
    EXPECT_NE(std::string::npos, msg.find("load of ")) << msg;
    EXPECT_EQ(std::string::npos, msg.find("'q_full' + 0")) << "the first token's copy is inside q_full: " << msg;
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaTmaEmulated, ::testing::Values("mistral_small_4", "deepseek_v4_flash"));

}  // namespace
