// paged_decode_emu_inputs.h - a paged_decode_problem.h Problem's inputs as
// the CPU emulator's registered read-only buffers (tests/emu), shared by
// the emulated tests of the decode family: q, the block tables, seq_lens
// and the caches (bf16; fp8 apart or K and V interleaved in one
// allocation), with the cache pointers `misalign` elements in.
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H

#include <cstring>
#include <memory>
#include <vector>

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

}  // namespace paged_decode_problem

#endif  // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_EMU_INPUTS_H
