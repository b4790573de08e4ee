// GPU tests of the paged decode family (../shared/notes/kernel-contract.md,
// kernels 9-12) against the float64 CPU reference in paged_decode_reference.h:
//   paged_decode_attn_bf16      paged_decode_attn_fp8          (plain)
//   paged_decode_attn_bf16_gqa  paged_decode_attn_fp8_gqa      (GQA-packed)
// launched through the generated launchers (the seed's geometry) from the
// embedded fatbins of both variants, gqa4_d128 and gqa8_d128.
//
// Every case draws fresh random inputs (seeded per case; KL_TEST_SEED mixes
// in another seed) and puts several sequences in one launch, with lengths
// around the block size (0, 1, block_size, block_size + 1, ...). Physical
// blocks are handed out in shuffled order. The cache holds NaN everywhere a
// kernel must not look: slots past a sequence's length, positions before its
// sliding window, table entries past its last block (they name a block of
// NaNs), the fp8 padding between blocks, the padding of q rows. The output
// starts as NaN (0xFFFF) with guard elements on both sides; after a launch
// every output element must be finite and the guards untouched.
//
// Pass: ||out - ref|| / ||ref|| < 1e-2 and every element within
// 1e-3 * max|ref| + 1e-2 * |ref| (all_close prints the first mismatches);
// sequences of length 0 give rows of exact zeros. The shapes exercise both
// load paths of each kernel: 16-byte (8-byte for packed fp8) when the cache
// pointers, head_dim and cache_stride allow it, element loads otherwise
// (odd head_dim, odd cache_stride, cache pointers off alignment).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/paged_decode_fatbins.h"
#include "klaunch/paged_decode.h"
#include "tests/paged_decode/paged_decode_reference.h"
#include "tests/support/gpu_test_util.h"

namespace {

using kl_test::DeviceBuffer;
using paged_decode_ref::Shape;

// ---- modules ------------------------------------------------------------------

// The variant's fatbin, loaded once per process (the handles keep pointers to it).
const kl_module *module_for(int width) {
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

// ---- cases --------------------------------------------------------------------

enum class Kind { kBf16, kFp8, kBf16Gqa, kFp8Gqa };

bool is_fp8(Kind k) { return k == Kind::kFp8 || k == Kind::kFp8Gqa; }

const char *kind_name(Kind k) {
    switch (k) {
    case Kind::kBf16:
        return "paged_decode_attn_bf16";
    case Kind::kFp8:
        return "paged_decode_attn_fp8";
    case Kind::kBf16Gqa:
        return "paged_decode_attn_bf16_gqa";
    case Kind::kFp8Gqa:
        return "paged_decode_attn_fp8_gqa";
    }
    return "?";
}

struct Case {
    uint32_t num_q_heads = 8, num_kv_heads = 2, head_dim = 128, block_size = 16;
    std::vector<int32_t> seq_lens;
    uint32_t sliding_window = 0;
    uint32_t q_pad = 0;        // q_stride = num_q_heads * head_dim + q_pad
    uint64_t cache_pad = 0;    // fp8: cache_stride = block elements (x2 interleaved) + cache_pad
    bool interleaved = false;  // fp8: K and V blocks alternate in one allocation
    float k_scale = 1.0f, v_scale = 1.0f;
    double inv_sqrt_d = 0.0;  // 0: 1/sqrt(head_dim)
    float q_amp = 1.0f;       // q uniform in [-q_amp, q_amp)
    uint32_t misalign = 0;    // cache pointers this many elements past the allocation's start
    uint32_t seed = 1;
};

std::string describe(Kind kind, const Case &c) {
    std::ostringstream s;
    s << kind_name(kind) << ": heads " << c.num_q_heads << "/" << c.num_kv_heads << ", head_dim " << c.head_dim
      << ", block_size " << c.block_size << ", seq_lens {";
    for (size_t i = 0; i < c.seq_lens.size(); i++) s << (i ? ", " : "") << c.seq_lens[i];
    s << "}, sliding_window " << c.sliding_window << ", q_pad " << c.q_pad;
    if (is_fp8(kind))
        s << ", cache_pad " << c.cache_pad << (c.interleaved ? ", K/V interleaved" : "") << ", k_scale " << c.k_scale
          << ", v_scale " << c.v_scale;
    s << ", misalign " << c.misalign << ", seed " << c.seed;
    return s.str();
}

uint32_t env_seed() {
    const char *e = std::getenv("KL_TEST_SEED");
    return e != nullptr ? static_cast<uint32_t>(std::strtoul(e, nullptr, 0)) : 0u;
}

// ---- host problem -------------------------------------------------------------

constexpr size_t kGuard = 8;             // output guard elements on each side
constexpr uint16_t kPoisonBits = 0xFFFF; // DeviceBuffer::poison() in bf16
constexpr uint16_t kBf16NaN = 0x7fc0;
constexpr uint8_t kFp8NaN = 0x7f;

struct Problem {
    Shape g;
    uint64_t cache_stride = 0;    // elements from one block to the next (fp8 launch argument)
    uint64_t block_elems = 0;     // block_size * num_kv_heads * head_dim
    uint64_t num_blocks = 0;
    std::vector<int32_t> tables, lens;
    std::vector<double> q;        // q_stride values per sequence (padding NaN)
    std::vector<kl_bf16> q_bits;
    std::vector<double> k, v;     // dequantised values at packed index ((b*bs + slot)*nkv + kvh)*D + d
    // Storage as the kernels see it, misalign elements in.
    std::vector<kl_bf16> k_bf16, v_bf16;
    std::vector<kl_fp8_e4m3> k_fp8, v_fp8, kv_fp8;  // kv_fp8: the interleaved allocation
    std::vector<double> ref;
};

uint64_t packed_index(const Shape &g, uint64_t b, uint32_t slot, uint32_t kvh, uint32_t d) {
    return ((b * g.block_size + slot) * g.num_kv_heads + kvh) * g.head_dim + d;
}

Problem build(Kind kind, const Case &c) {
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
    // The launcher takes inv_sqrt_d as f32; the reference uses that very value.
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
    g.max_blocks_per_seq = max_nb + 1;
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

    const bool fp8 = is_fp8(kind);
    // Values as stored: bf16-rounded, or fp8 codes (wider range, to use the
    // exponent bits) times the scale.
    std::vector<uint16_t> kb(packed, kBf16NaN), vb(packed, kBf16NaN);
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
                    for (uint32_t d = 0; d < c.head_dim; d++) fill(packed_index(g, b, slot, kvh, d));
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

    const Problem &cp = p;
    p.ref = paged_decode_ref::attention(
        g, p.q, p.tables, p.lens,
        [&cp](int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) {
            return cp.k[packed_index(cp.g, static_cast<uint64_t>(b), slot, kvh, d)];
        },
        [&cp](int64_t b, uint32_t slot, uint32_t kvh, uint32_t d) {
            return cp.v[packed_index(cp.g, static_cast<uint64_t>(b), slot, kvh, d)];
        });
    return p;
}

// ---- running one case -----------------------------------------------------------

void run_case(Kind kind, int width, const Case &c) {
    SCOPED_TRACE(describe(kind, c) + ", module gqa" + std::to_string(width) + "_d128");
    const Problem p = build(kind, c);
    const Shape &g = p.g;
    const kl_module *mod = module_for(width);

    DeviceBuffer<kl_bf16> q(p.q_bits);
    DeviceBuffer<int32_t> tables(p.tables), lens(p.lens);
    const size_t n_out = static_cast<size_t>(g.num_seqs) * g.num_q_heads * g.head_dim;
    DeviceBuffer<kl_bf16> out(kGuard + n_out + kGuard);
    out.poison();
    kl_bf16 *o = out.get() + kGuard;

    kl_kernel k;
    kl_status st = KL_ERROR_INVALID_ARGUMENT;
    const float inv = static_cast<float>(g.inv_sqrt_d);
    if (!is_fp8(kind)) {
        DeviceBuffer<kl_bf16> kc(p.k_bf16), vc(p.v_bf16);
        const kl_bf16 *kp = kc.get() + c.misalign, *vp = vc.get() + c.misalign;
        if (kind == Kind::kBf16) {
            KL_ASSERT_OK(kl_paged_decode_attn_bf16_get(&k, mod));
            st = kl_paged_decode_attn_bf16(&k, q.get(), kp, vp, o, tables.get(), lens.get(), g.max_blocks_per_seq,
                                           g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                                           g.q_stride, g.sliding_window, nullptr);
        } else {
            KL_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_get(&k, mod));
            st = kl_paged_decode_attn_bf16_gqa(&k, q.get(), kp, vp, o, tables.get(), lens.get(), g.max_blocks_per_seq,
                                               g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size,
                                               inv, g.q_stride, g.sliding_window, nullptr);
        }
        ASSERT_EQ(st, KL_SUCCESS) << kl_last_error_message();
        kl_test::synchronize();
    } else {
        std::unique_ptr<DeviceBuffer<kl_fp8_e4m3>> kc, vc;
        const kl_fp8_e4m3 *kp, *vp;
        if (c.interleaved) {
            kc.reset(new DeviceBuffer<kl_fp8_e4m3>(p.kv_fp8));
            kp = kc->get() + c.misalign;
            vp = kp + p.block_elems;
        } else {
            kc.reset(new DeviceBuffer<kl_fp8_e4m3>(p.k_fp8));
            vc.reset(new DeviceBuffer<kl_fp8_e4m3>(p.v_fp8));
            kp = kc->get() + c.misalign;
            vp = vc->get() + c.misalign;
        }
        if (kind == Kind::kFp8) {
            KL_ASSERT_OK(kl_paged_decode_attn_fp8_get(&k, mod));
            st = kl_paged_decode_attn_fp8(&k, q.get(), kp, vp, o, tables.get(), lens.get(), g.max_blocks_per_seq,
                                          g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size, inv,
                                          c.k_scale, c.v_scale, g.q_stride, p.cache_stride, g.sliding_window, nullptr);
        } else {
            KL_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_get(&k, mod));
            st = kl_paged_decode_attn_fp8_gqa(&k, q.get(), kp, vp, o, tables.get(), lens.get(), g.max_blocks_per_seq,
                                              g.num_seqs, g.num_q_heads, g.num_kv_heads, g.head_dim, g.block_size,
                                              inv, c.k_scale, c.v_scale, g.q_stride, p.cache_stride,
                                              g.sliding_window, nullptr);
        }
        ASSERT_EQ(st, KL_SUCCESS) << kl_last_error_message();
        kl_test::synchronize();
    }

    const std::vector<kl_bf16> all = out.download();
    for (size_t i = 0; i < kGuard; i++) {
        EXPECT_EQ(all[i].bits, kPoisonBits) << "guard element " << i << " before the output was written";
        EXPECT_EQ(all[kGuard + n_out + i].bits, kPoisonBits) << "guard element " << i << " after the output was written";
    }
    const std::vector<kl_bf16> got(all.begin() + kGuard, all.begin() + kGuard + n_out);

    double ref_max = 0.0;
    for (double r : p.ref) ref_max = std::max(ref_max, std::fabs(r));
    EXPECT_TRUE(kl_test::all_close("output", got, p.ref, 1e-3 * ref_max, 1e-2, 1e-2));

    // L == 0: exact zeros (the contract's "all-zero output").
    const size_t row = static_cast<size_t>(g.num_q_heads) * g.head_dim;
    for (uint32_t s = 0; s < g.num_seqs; s++) {
        if (p.lens[s] > 0) continue;
        size_t nonzero = 0;
        for (size_t i = 0; i < row; i++)
            if (!(kl_test::bf16_to_float(got[s * row + i]) == 0.0f)) nonzero++;
        EXPECT_EQ(nonzero, 0u) << "sequence " << s << " has length " << p.lens[s] << " but " << nonzero
                               << " of its " << row << " output elements are not zero";
    }
}

// Lengths around a block size: empty, one position, exactly a block, one past
// it, and a few longer ones that end mid-block.
std::vector<int32_t> lengths_around(uint32_t bs, std::initializer_list<int32_t> more) {
    std::vector<int32_t> v = {0, 1, static_cast<int32_t>(bs), static_cast<int32_t>(bs) + 1};
    v.insert(v.end(), more.begin(), more.end());
    return v;
}

class PagedDecodeTest : public GpuTest {};

// ---- plain bf16 ----------------------------------------------------------------

TEST_F(PagedDecodeTest, Bf16MatchesReferenceAtEveryBlockSize) {
    uint32_t seed = 100;
    for (uint32_t bs : {1u, 16u, 64u}) {
        Case c;
        c.block_size = bs;
        c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 7, 300, 517});
        c.seed = seed++;
        run_case(Kind::kBf16, 8, c);
    }
}

TEST_F(PagedDecodeTest, Bf16SlidingWindowSmallerAndLargerThanTheSequence) {
    uint32_t seed = 200;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {1u, 5u, 40u, 100000u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {3, 77, 300});
            c.sliding_window = sw;
            c.seed = seed++;
            run_case(Kind::kBf16, 8, c);
        }
}

TEST_F(PagedDecodeTest, Bf16HeadDimsAndGroupSizes) {
    // Multiples of 8 take the 16-byte path, the others the element path;
    // 256 is the largest head_dim the plain kernels take.
    struct Dims {
        uint32_t nq, nkv, d;
    };
    uint32_t seed = 300;
    for (Dims dm : {Dims{4, 4, 64}, Dims{6, 2, 256}, Dims{3, 1, 8}, Dims{5, 5, 40}, Dims{8, 1, 96}, Dims{4, 2, 36},
                    Dims{2, 1, 1}, Dims{2, 2, 255}, Dims{3, 3, 130}}) {
        Case c;
        c.num_q_heads = dm.nq;
        c.num_kv_heads = dm.nkv;
        c.head_dim = dm.d;
        c.block_size = 16;
        c.seq_lens = lengths_around(16, {45, 129});
        c.sliding_window = seed % 2 ? 0 : 50;
        c.q_pad = 5;
        c.seed = seed++;
        run_case(Kind::kBf16, 8, c);
    }
}

TEST_F(PagedDecodeTest, Bf16OffAlignmentCacheAndPaddedQRows) {
    uint32_t seed = 400;
    for (uint32_t mis : {1u, 3u, 4u})
        for (uint32_t bs : {1u, 16u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {100});
            c.misalign = mis;
            c.q_pad = 7;
            c.seed = seed++;
            run_case(Kind::kBf16, 8, c);
        }
}

TEST_F(PagedDecodeTest, PlainKernelsMatchInTheGqa4Fatbin) {
    Case c;
    c.seq_lens = lengths_around(16, {250});
    c.sliding_window = 100;
    c.seed = 450;
    run_case(Kind::kBf16, 4, c);
    c.k_scale = 0.5f;
    c.v_scale = 3.0f;
    c.seed = 451;
    run_case(Kind::kFp8, 4, c);
}

// ---- plain fp8 -------------------------------------------------------------------

TEST_F(PagedDecodeTest, Fp8MatchesReferenceWithScalesAndPaddedCacheStride) {
    uint32_t seed = 500;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint64_t pad : {uint64_t{0}, uint64_t{32}, uint64_t{3}}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 5, 260});
            c.cache_pad = pad;
            c.k_scale = 0.37f;
            c.v_scale = 2.5f;
            c.q_pad = 3;
            c.seed = seed++;
            run_case(Kind::kFp8, 8, c);
        }
}

TEST_F(PagedDecodeTest, Fp8SlidingWindow) {
    uint32_t seed = 600;
    for (uint32_t bs : {1u, 16u, 64u})
        for (uint32_t sw : {1u, 9u, 70u, 100000u}) {
            Case c;
            c.block_size = bs;
            c.seq_lens = lengths_around(bs, {3, 150});
            c.sliding_window = sw;
            c.cache_pad = 16;
            c.k_scale = 1.25f;
            c.v_scale = 0.75f;
            c.seed = seed++;
            run_case(Kind::kFp8, 8, c);
        }
}

TEST_F(PagedDecodeTest, Fp8InterleavedKVInOneAllocation) {
    uint32_t seed = 700;
    for (uint32_t bs : {1u, 16u, 64u}) {
        Case c;
        c.block_size = bs;
        c.seq_lens = lengths_around(bs, {333});
        c.interleaved = true;
        c.k_scale = 0.8f;
        c.v_scale = 1.6f;
        c.seed = seed++;
        run_case(Kind::kFp8, 8, c);
    }
}

TEST_F(PagedDecodeTest, Fp8HeadDimsAndOffAlignmentCache) {
    struct Dims {
        uint32_t nq, nkv, d, mis;
    };
    uint32_t seed = 800;
    for (Dims dm : {Dims{4, 4, 64, 0}, Dims{6, 2, 256, 0}, Dims{3, 1, 16, 0}, Dims{4, 2, 72, 0}, Dims{2, 1, 5, 0},
                    Dims{8, 2, 128, 1}, Dims{8, 2, 128, 8}}) {
        Case c;
        c.num_q_heads = dm.nq;
        c.num_kv_heads = dm.nkv;
        c.head_dim = dm.d;
        c.block_size = 16;
        c.seq_lens = lengths_around(16, {61});
        c.misalign = dm.mis;
        c.k_scale = 0.6f;
        c.v_scale = 1.1f;
        c.q_pad = 1;
        c.seed = seed++;
        run_case(Kind::kFp8, 8, c);
    }
}

// ---- GQA-packed ------------------------------------------------------------------

TEST_F(PagedDecodeTest, Bf16GqaMatchesReferenceInBothVariants) {
    uint32_t seed = 900;
    for (int width : {4, 8})
        for (uint32_t bs : {1u, 16u, 64u})
            for (uint32_t sw : {0u, 7u, 100000u}) {
                Case c;
                c.num_kv_heads = bs == 16 ? 3 : 1;
                c.num_q_heads = c.num_kv_heads * width;
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 3, 211});
                c.sliding_window = sw;
                c.q_pad = sw == 7 ? 5 : 0;
                c.seed = seed++;
                run_case(Kind::kBf16Gqa, width, c);
            }
}

TEST_F(PagedDecodeTest, Bf16GqaOffAlignmentCache) {
    uint32_t seed = 1000;
    for (int width : {4, 8})
        for (uint32_t mis : {1u, 4u}) {
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = 2 * width;
            c.seq_lens = lengths_around(16, {90});
            c.misalign = mis;
            c.sliding_window = 40;
            c.seed = seed++;
            run_case(Kind::kBf16Gqa, width, c);
        }
}

TEST_F(PagedDecodeTest, Fp8GqaMatchesReferenceInBothVariants) {
    uint32_t seed = 1100;
    for (int width : {4, 8})
        for (uint32_t bs : {1u, 16u, 64u})
            for (uint64_t pad : {uint64_t{0}, uint64_t{8}, uint64_t{5}}) {
                Case c;
                c.num_kv_heads = bs == 64 ? 2 : 1;
                c.num_q_heads = c.num_kv_heads * width;
                c.block_size = bs;
                c.seq_lens = lengths_around(bs, {2 * static_cast<int32_t>(bs) + 9, 190});
                c.sliding_window = pad == 8 ? 11 : 0;
                c.cache_pad = pad;
                c.k_scale = 0.45f;
                c.v_scale = 2.2f;
                c.q_pad = pad == 5 ? 2 : 0;
                c.seed = seed++;
                run_case(Kind::kFp8Gqa, width, c);
            }
}

TEST_F(PagedDecodeTest, Fp8GqaInterleavedAndOffAlignmentCache) {
    uint32_t seed = 1200;
    for (int width : {4, 8})
        for (uint32_t mis : {0u, 3u}) {
            Case c;
            c.num_kv_heads = 2;
            c.num_q_heads = 2 * width;
            c.seq_lens = lengths_around(16, {123});
            c.interleaved = mis == 0;
            c.misalign = mis;
            c.k_scale = 1.5f;
            c.v_scale = 0.3f;
            c.seed = seed++;
            run_case(Kind::kFp8Gqa, width, c);
        }
}

// ---- every kernel: a long sequence, large scores ----------------------------------

TEST_F(PagedDecodeTest, LongSequenceOf32768Positions) {
    // One KV head keeps the float64 reference quick in an unoptimised build.
    uint32_t seed = 1300;
    int i = 0;
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa}) {
        Case c;
        const bool packed = kind == Kind::kBf16Gqa || kind == Kind::kFp8Gqa;
        c.num_kv_heads = 1;
        c.num_q_heads = packed ? 8 : 3;
        c.block_size = i++ % 2 ? 64 : 16;
        c.seq_lens = {32768, 0};
        c.k_scale = 0.9f;
        c.v_scale = 1.3f;
        c.seed = seed++;
        run_case(kind, 8, c);
        if (kind == Kind::kBf16 || kind == Kind::kFp8Gqa) {
            // A window that starts and ends mid-block.
            c.seq_lens = {32767};
            c.sliding_window = 20000;
            c.seed = seed++;
            run_case(kind, 8, c);
        }
    }
}

// Scores of several hundred: exp() overflows fp32 unless the running max is
// subtracted (the contract's safe softmax), and the output follows the
// largest scores closely.
TEST_F(PagedDecodeTest, LargeScoresNeedTheRunningMax) {
    uint32_t seed = 1400;
    for (Kind kind : {Kind::kBf16, Kind::kFp8, Kind::kBf16Gqa, Kind::kFp8Gqa}) {
        for (int width : {4, 8}) {
            Case c;
            const bool packed = kind == Kind::kBf16Gqa || kind == Kind::kFp8Gqa;
            c.num_kv_heads = 2;
            c.num_q_heads = packed ? 2 * width : 6;
            c.seq_lens = lengths_around(16, {700});
            c.inv_sqrt_d = 1.0;
            c.q_amp = 8.0f;
            c.k_scale = 2.0f;
            c.seed = seed++;
            run_case(kind, width, c);
        }
    }
}

// ---- refusals -----------------------------------------------------------------------

// The packed launchers refuse a shape their variant was not compiled for
// (the spec's preconditions on DECODE_GQA_PACK_WIDTH and
// DECODE_GQA_PACK_HEAD_DIM) and launch nothing: the output stays poisoned.
TEST_F(PagedDecodeTest, PackedLaunchersRefuseNonMatchingShape) {
    const uint32_t nkv = 2, bs = 16, mbps = 4, num_seqs = 2;
    DeviceBuffer<kl_bf16> q(static_cast<size_t>(num_seqs) * 16 * 128);
    DeviceBuffer<kl_bf16> kb(8 * bs * nkv * 128), vb(8 * bs * nkv * 128);
    DeviceBuffer<kl_fp8_e4m3> k8(8 * bs * nkv * 128), v8(8 * bs * nkv * 128);
    DeviceBuffer<int32_t> tables(std::vector<int32_t>(num_seqs * mbps, 0)), lens(std::vector<int32_t>{5, 9});
    DeviceBuffer<kl_bf16> out(static_cast<size_t>(num_seqs) * 16 * 128);
    out.poison();
    const uint64_t stride = static_cast<uint64_t>(bs) * nkv * 128;

    for (int width : {4, 8}) {
        SCOPED_TRACE("module gqa" + std::to_string(width) + "_d128");
        const kl_module *mod = module_for(width);
        kl_kernel kbf, kfp;
        KL_ASSERT_OK(kl_paged_decode_attn_bf16_gqa_get(&kbf, mod));
        KL_ASSERT_OK(kl_paged_decode_attn_fp8_gqa_get(&kfp, mod));
        const uint32_t other = width == 4 ? 8 : 4;
        struct Shape2 {
            uint32_t nq, d;
            const char *why;
        };
        for (Shape2 sh : {Shape2{nkv * other, 128, "the other variant's pack width"},
                          Shape2{nkv * width, 64, "head_dim 64"}, Shape2{nkv * width + 1, 128, "one head more"},
                          Shape2{nkv, 128, "one query head per KV head"}}) {
            SCOPED_TRACE(sh.why);
            const uint32_t q_stride = 16 * 128;
            EXPECT_EQ(kl_paged_decode_attn_bf16_gqa(&kbf, q.get(), kb.get(), vb.get(), out.get(), tables.get(),
                                                    lens.get(), mbps, num_seqs, sh.nq, nkv, sh.d, bs, 0.1f, q_stride,
                                                    0, nullptr),
                      KL_ERROR_VARIANT_MISMATCH)
                << kl_last_error_message();
            EXPECT_EQ(kl_paged_decode_attn_bf16_gqa_check(&kbf, q.get(), kb.get(), vb.get(), out.get(), tables.get(),
                                                          lens.get(), mbps, num_seqs, sh.nq, nkv, sh.d, bs, 0.1f,
                                                          q_stride, 0),
                      KL_ERROR_VARIANT_MISMATCH);
            EXPECT_EQ(kl_paged_decode_attn_fp8_gqa(&kfp, q.get(), k8.get(), v8.get(), out.get(), tables.get(),
                                                   lens.get(), mbps, num_seqs, sh.nq, nkv, sh.d, bs, 0.1f, 1.0f,
                                                   1.0f, q_stride, stride, 0, nullptr),
                      KL_ERROR_VARIANT_MISMATCH)
                << kl_last_error_message();
            EXPECT_EQ(kl_paged_decode_attn_fp8_gqa_check(&kfp, q.get(), k8.get(), v8.get(), out.get(), tables.get(),
                                                         lens.get(), mbps, num_seqs, sh.nq, nkv, sh.d, bs, 0.1f, 1.0f,
                                                         1.0f, q_stride, stride, 0),
                      KL_ERROR_VARIANT_MISMATCH);
        }
        // The matching shape passes the same checks.
        KL_EXPECT_OK(kl_paged_decode_attn_bf16_gqa_check(&kbf, q.get(), kb.get(), vb.get(), out.get(), tables.get(),
                                                         lens.get(), mbps, num_seqs, nkv * width, nkv, 128, bs, 0.1f,
                                                         16 * 128, 0));
        KL_EXPECT_OK(kl_paged_decode_attn_fp8_gqa_check(&kfp, q.get(), k8.get(), v8.get(), out.get(), tables.get(),
                                                        lens.get(), mbps, num_seqs, nkv * width, nkv, 128, bs, 0.1f,
                                                        1.0f, 1.0f, 16 * 128, stride, 0));
    }
    kl_test::synchronize();
    const std::vector<kl_bf16> after = out.download();
    size_t written = 0;
    for (const kl_bf16 &x : after) written += x.bits != kPoisonBits;
    EXPECT_EQ(written, 0u) << "a refused launch wrote the output";
}

// The plain kernels keep a head of at most 256 elements (spec precondition
// head_dim <= 256).
TEST_F(PagedDecodeTest, PlainLaunchersRefuseHeadDimAbove256) {
    const kl_module *mod = module_for(8);
    kl_kernel kbf, kfp;
    KL_ASSERT_OK(kl_paged_decode_attn_bf16_get(&kbf, mod));
    KL_ASSERT_OK(kl_paged_decode_attn_fp8_get(&kfp, mod));
    DeviceBuffer<kl_bf16> q(2 * 264), kb(264), out(2 * 264);
    DeviceBuffer<kl_fp8_e4m3> k8(264);
    DeviceBuffer<int32_t> tables(std::vector<int32_t>{0}), lens(std::vector<int32_t>{1});
    for (uint32_t d : {256u, 264u}) {
        const kl_status want = d <= 256 ? KL_SUCCESS : KL_ERROR_PRECONDITION;
        EXPECT_EQ(kl_paged_decode_attn_bf16_check(&kbf, q.get(), kb.get(), kb.get(), out.get(), tables.get(),
                                                  lens.get(), 1, 1, 2, 1, d, 1, 0.1f, 2 * d, 0),
                  want)
            << "head_dim " << d << ": " << kl_last_error_message();
        EXPECT_EQ(kl_paged_decode_attn_fp8_check(&kfp, q.get(), k8.get(), k8.get(), out.get(), tables.get(),
                                                 lens.get(), 1, 1, 2, 1, d, 1, 0.1f, 1.0f, 1.0f, 2 * d, d, 0),
                  want)
            << "head_dim " << d << ": " << kl_last_error_message();
    }
}

}  // namespace
