// paged_decode_problem.h - a random paged-decode problem on the host, laid
// out as the paged decode kernels read it (../shared/notes/kernel-contract.md,
// kernels 9-12), for GPU tests that compare with paged_decode_reference.h.
//
// build(fp8, case) draws q and the cache (seeded per case; KL_TEST_SEED
// mixes in another seed), deals out every sequence's cache blocks in
// shuffled physical order, and leaves NaN everywhere a kernel must not
// look: slots past a sequence's length, positions before its sliding
// window, table entries past its last block (they name a block of NaNs),
// the fp8 padding between blocks, the padding of q rows. The dequantised
// values (p.k, p.v, p.q as double) feed the float64 reference
// (reference(p)).
//
// Also what the GPU tests of the seed kernels (paged_decode_test.cc) and of
// the split launchers (paged_decode_split_test.cc) share: the lengths of a
// case around a block size, the variants' modules, and the check of an
// output row block against the reference.
#ifndef KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_PROBLEM_H
#define KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_PROBLEM_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/paged_decode_fatbins.h"
#include "klaunch/klaunch.h"
#include "tests/paged_decode/paged_decode_reference.h"
#include "tests/support/gpu_test_util.h"

namespace paged_decode_problem {

using paged_decode_ref::Shape;

struct Case {
    uint32_t num_q_heads = 8, num_kv_heads = 2, head_dim = 128, block_size = 16;
    std::vector<int32_t> seq_lens;
    uint32_t sliding_window = 0;
    uint32_t q_pad = 0;        // q_stride = num_q_heads * head_dim + q_pad
    uint64_t cache_pad = 0;    // fp8: cache_stride = block elements (x2 interleaved) + cache_pad
    bool interleaved = false;  // fp8: K and V blocks alternate in one allocation
    float k_scale = 1.0f, v_scale = 1.0f;
    double inv_sqrt_d = 0.0;  // 0: 1/sqrt(head_dim)
    float q_amp = 1.0f;       // q uniform in [-q_amp, q_amp); 0 gives q = 0 (every score 0)
    uint32_t misalign = 0;    // cache pointers this many elements past the allocation's start
    uint32_t table_slack = 1; // max_blocks_per_seq = the longest sequence's blocks + table_slack
    uint32_t seed = 1;
};

inline std::string describe(const Case &c, bool fp8) {
    std::ostringstream s;
    s << "heads " << c.num_q_heads << "/" << c.num_kv_heads << ", head_dim " << c.head_dim << ", block_size "
      << c.block_size << ", seq_lens {";
    for (size_t i = 0; i < c.seq_lens.size(); i++) s << (i ? ", " : "") << c.seq_lens[i];
    s << "}, sliding_window " << c.sliding_window << ", q_pad " << c.q_pad << ", q_amp " << c.q_amp;
    if (fp8)
        s << ", cache_pad " << c.cache_pad << (c.interleaved ? ", K/V interleaved" : "") << ", k_scale " << c.k_scale
          << ", v_scale " << c.v_scale;
    s << ", misalign " << c.misalign;
    if (c.table_slack != 1) s << ", table_slack " << c.table_slack;
    s << ", seed " << c.seed;
    return s.str();
}

inline uint32_t env_seed() {
    const char *e = std::getenv("KL_TEST_SEED");
    return e != nullptr ? static_cast<uint32_t>(std::strtoul(e, nullptr, 0)) : 0u;
}

constexpr uint16_t kBf16NaN = 0x7fc0;
constexpr uint8_t kFp8NaN = 0x7f;

struct Problem {
    Shape g;
    uint64_t cache_stride = 0;  // elements from one block to the next (fp8 launch argument)
    uint64_t block_elems = 0;   // block_size * num_kv_heads * head_dim
    uint64_t num_blocks = 0;
    std::vector<int32_t> tables, lens;
    std::vector<double> q;  // q_stride values per sequence (padding NaN)
    std::vector<kl_bf16> q_bits;
    std::vector<double> k, v;  // dequantised values at packed index ((b*bs + slot)*nkv + kvh)*D + d
    // Storage as the kernels see it, misalign elements in.
    std::vector<kl_bf16> k_bf16, v_bf16;
    std::vector<kl_fp8_e4m3> k_fp8, v_fp8, kv_fp8;  // kv_fp8: the interleaved allocation

    uint64_t packed_index(uint64_t b, uint32_t slot, uint32_t kvh, uint32_t d) const {
        return ((b * g.block_size + slot) * g.num_kv_heads + kvh) * g.head_dim + d;
    }
    // The cache as the reference reads it.
    double kval(int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) const {
        return k[packed_index(static_cast<uint64_t>(b), slot, kvh, d)];
    }
    double vval(int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) const {
        return v[packed_index(static_cast<uint64_t>(b), slot, kvh, d)];
    }
};

inline Problem build(bool fp8, const Case &c) {
    Problem p;
    Shape &g = p.g;
    g.num_seqs = static_cast<uint32_t>(c.seq_lens.size());
    g.num_q_heads = c.num_q_heads;
    g.num_kv_heads = c.num_kv_heads;
    g.head_dim = c.head_dim;
    g.block_size = c.block_size;
    g.q_stride = c.num_q_heads * c.head_dim + c.q_pad;
    g.sliding_window = c.sliding_window;
    g.inv_sqrt_d = c.inv_sqrt_d != 0.0 ? c.inv_sqrt_d : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    // The launchers take inv_sqrt_d as f32; the reference uses that very value.
    g.inv_sqrt_d = static_cast<float>(g.inv_sqrt_d);
    p.lens = c.seq_lens;

    std::mt19937 gen(c.seed * 2654435761u + env_seed());
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);

    // Blocks: every sequence's blocks in shuffled physical order, one block of
    // NaNs that unused table entries name, and two spare NaN blocks.
    std::vector<uint32_t> nblocks(g.num_seqs);
    uint32_t max_nb = 0;
    uint64_t used = 0;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        nblocks[s] = (static_cast<uint32_t>(std::max(c.seq_lens[s], 0)) + c.block_size - 1) / c.block_size;
        max_nb = std::max(max_nb, nblocks[s]);
        used += nblocks[s];
    }
    g.max_blocks_per_seq = max_nb + c.table_slack;
    p.num_blocks = used + 3;
    std::vector<int32_t> perm(p.num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    const int32_t nan_block = perm[used];

    p.block_elems = static_cast<uint64_t>(c.block_size) * c.num_kv_heads * c.head_dim;
    const size_t packed = p.num_blocks * p.block_elems;
    p.k.assign(packed, NAN);
    p.v.assign(packed, NAN);
    p.tables.assign(static_cast<size_t>(g.num_seqs) * g.max_blocks_per_seq, nan_block);

    std::vector<uint16_t> kb(packed, kBf16NaN), vb(packed, kBf16NaN);
    // Values as stored: bf16-rounded, or fp8 codes (wider range than [-1, 1),
    // to use the exponent bits) times the scale.
    std::vector<uint8_t> k8(packed, kFp8NaN), v8(packed, kFp8NaN);
    auto fill = [&](uint64_t idx) {
        if (fp8) {
            const kl_fp8_e4m3 a = kl_test::float_to_fp8_e4m3(4.0f * unit(gen));
            const kl_fp8_e4m3 b = kl_test::float_to_fp8_e4m3(4.0f * unit(gen));
            k8[idx] = a.bits;
            v8[idx] = b.bits;
            p.k[idx] = static_cast<double>(kl_test::fp8_e4m3_to_float(a)) * c.k_scale;
            p.v[idx] = static_cast<double>(kl_test::fp8_e4m3_to_float(b)) * c.v_scale;
        } else {
            const kl_bf16 a = kl_test::float_to_bf16(unit(gen));
            const kl_bf16 b = kl_test::float_to_bf16(unit(gen));
            kb[idx] = a.bits;
            vb[idx] = b.bits;
            p.k[idx] = kl_test::bf16_to_float(a);
            p.v[idx] = kl_test::bf16_to_float(b);
        }
    };
    uint64_t next = 0;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        const uint32_t len = static_cast<uint32_t>(std::max(c.seq_lens[s], 0));
        const uint32_t begin = paged_decode_ref::window_begin(len, c.sliding_window);
        for (uint32_t j = 0; j < nblocks[s]; j++) {
            const int32_t b = perm[next++];
            p.tables[static_cast<size_t>(s) * g.max_blocks_per_seq + j] = b;
            for (uint32_t slot = 0; slot < c.block_size; slot++) {
                const uint32_t pos = j * c.block_size + slot;
                if (pos < begin || pos >= len) continue;  // stays NaN
                for (uint32_t kvh = 0; kvh < c.num_kv_heads; kvh++)
                    for (uint32_t d = 0; d < c.head_dim; d++) fill(p.packed_index(b, slot, kvh, d));
            }
        }
    }

    // q, NaN in the padding of each row.
    p.q.assign(static_cast<size_t>(g.num_seqs) * g.q_stride, NAN);
    p.q_bits.assign(p.q.size(), kl_bf16{kBf16NaN});
    for (uint32_t s = 0; s < g.num_seqs; s++)
        for (uint32_t i = 0; i < c.num_q_heads * c.head_dim; i++) {
            const size_t at = static_cast<size_t>(s) * g.q_stride + i;
            p.q_bits[at] = kl_test::float_to_bf16(c.q_amp * unit(gen));
            p.q[at] = kl_test::bf16_to_float(p.q_bits[at]);
        }

    // Storage.
    if (!fp8) {
        p.cache_stride = p.block_elems;
        p.k_bf16.assign(c.misalign + packed, kl_bf16{kBf16NaN});
        p.v_bf16.assign(c.misalign + packed, kl_bf16{kBf16NaN});
        for (size_t i = 0; i < packed; i++) {
            p.k_bf16[c.misalign + i].bits = kb[i];
            p.v_bf16[c.misalign + i].bits = vb[i];
        }
    } else {
        p.cache_stride = (c.interleaved ? 2 : 1) * p.block_elems + c.cache_pad;
        const size_t total = c.misalign + p.num_blocks * p.cache_stride;
        std::vector<kl_fp8_e4m3> &ks = c.interleaved ? p.kv_fp8 : p.k_fp8;
        ks.assign(total, kl_fp8_e4m3{kFp8NaN});
        if (!c.interleaved) p.v_fp8.assign(total, kl_fp8_e4m3{kFp8NaN});
        std::vector<kl_fp8_e4m3> &vs = c.interleaved ? p.kv_fp8 : p.v_fp8;
        const uint64_t v_off = c.interleaved ? p.block_elems : 0;
        for (uint64_t b = 0; b < p.num_blocks; b++)
            for (uint64_t i = 0; i < p.block_elems; i++) {
                // (slot*nkv + kvh)*D + d == i within a block.
                ks[c.misalign + b * p.cache_stride + i].bits = k8[b * p.block_elems + i];
                vs[c.misalign + b * p.cache_stride + v_off + i].bits = v8[b * p.block_elems + i];
            }
    }
    return p;
}

// Lengths around a block size: empty, one position, exactly a block, one past
// it, and the given longer ones.
inline std::vector<int32_t> lengths_around(uint32_t bs, std::initializer_list<int32_t> more) {
    std::vector<int32_t> v = {0, 1, static_cast<int32_t>(bs), static_cast<int32_t>(bs) + 1};
    v.insert(v.end(), more.begin(), more.end());
    return v;
}

// The float64 reference output of p (paged_decode_ref::attention on the
// dequantised values), num_seqs * num_q_heads * head_dim values.
inline std::vector<double> reference(const Problem &p) {
    return paged_decode_ref::attention(
        p.g, p.q, p.tables, p.lens,
        [&p](int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) { return p.kval(b, slot, kvh, d); },
        [&p](int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) { return p.vval(b, slot, kvh, d); });
}

// The variant's fatbin (pack width 4 or 8, head_dim 128), loaded once per
// process (the handles keep pointers to it).
inline const kl_module *module_for(int width) {
    static std::unique_ptr<kl_test::Module> m4, m8;
    std::unique_ptr<kl_test::Module> &m = width == 4 ? m4 : m8;
    if (!m) {
        if (width == 4)
            m.reset(new kl_test::Module(kl_fatbin_paged_decode_gqa4_d128, kl_fatbin_paged_decode_gqa4_d128_size));
        else
            m.reset(new kl_test::Module(kl_fatbin_paged_decode_gqa8_d128, kl_fatbin_paged_decode_gqa8_d128_size));
    }
    return m->get();
}

constexpr size_t kGuard = 8;              // output guard elements on each side
constexpr uint16_t kPoisonBf16 = 0xFFFF;  // DeviceBuffer::poison() in bf16

// An output as downloaded (kGuard poisoned elements, the num_seqs *
// num_q_heads * head_dim outputs, kGuard more) against the reference:
// the guards untouched, ||out - ref|| / ||ref|| < 1e-2 and every element
// within 1e-3 * max|ref| + 1e-2 * |ref|, exact zeros for L == 0 (the
// contract's "all-zero output").
inline void check_output(const Problem &p, const std::vector<double> &ref, const std::vector<kl_bf16> &all) {
    const Shape &g = p.g;
    const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
    ASSERT_EQ(all.size(), kGuard + n_out + kGuard);
    for (size_t i = 0; i < kGuard; i++) {
        EXPECT_EQ(all[i].bits, kPoisonBf16) << "guard element " << i << " before the output was written";
        EXPECT_EQ(all[kGuard + n_out + i].bits, kPoisonBf16) << "guard element " << i << " after the output was written";
    }
    const std::vector<kl_bf16> got(all.begin() + kGuard, all.begin() + kGuard + n_out);
    double ref_max = 0.0;
    for (double r : ref) ref_max = std::max(ref_max, std::fabs(r));
    EXPECT_TRUE(kl_test::all_close("output", got, ref, 1e-3 * ref_max, 1e-2, 1e-2));
    const size_t row = static_cast<size_t>(g.num_q_heads) * g.head_dim;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        if (p.lens[s] > 0) continue;
        size_t nonzero = 0;
        for (size_t i = 0; i < row; i++) nonzero += !(kl_test::bf16_to_float(got[s * row + i]) == 0.0f);
        EXPECT_EQ(nonzero, 0u) << "sequence " << s << " has length " << p.lens[s] << " but " << nonzero << " of its "
                               << row << " output elements are not zero";
    }
}

}  // namespace paged_decode_problem

#endif  // KLAUNCH_TESTS_PAGED_DECODE_PAGED_DECODE_PROBLEM_H
