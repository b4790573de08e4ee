// The bulk copy engine's emulation (tests/emu/sm90_tma.cc) against the PTX
// ISA: tiled-mode boxes of ranks 1 to 5 with traversal (element) strides,
// out-of-boundary elements (zero or OOB-NaN fill on loads, not written by
// stores), the 32B / 64B / 128B swizzle tables, cp.async.bulk, bulk
// async-groups, prefetch.tensormap, complete_tx on the mbarrier; and each
// rule a kernel can break, failing for its reason. Maps are encoded by the
// emulated backend (kl_tensor_map_encode_tiled, klaunch's reference
// encoding). Expected values are worked out here from the ISA's
// definitions and tables (global element (x, y, ...) at address + x *
// element size + y * stride1 + ...; tensors hold their word index), never
// computed by the emulator's code. Kernels: testdata/sm90_tma_kernels.cu.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "klaunch/tensor_map.h"
#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/kernel_table.h"

namespace {

const void *image() { return kl_emu_image("sm90_tma_test_kernels", ""); }

bool has(const emu::Fault &f, const char *text) { return f.message.find(text) != std::string::npos; }

// The ISA's swizzle tables ("Swizzling Modes"): row = the 128-byte line of
// shared memory (modulo the pattern), entry p = the 16-byte chunk that sits
// at position p of that line.
const uint32_t kSwizzle32B[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}};
const uint32_t kSwizzle64B[4][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}, {3, 2, 1, 0, 7, 6, 5, 4}};
const uint32_t kSwizzle128B[8][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5},
                                     {3, 2, 1, 0, 7, 6, 5, 4}, {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
                                     {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};

kl_tensor_map_request request(uint32_t dtype, const void *address, std::vector<uint64_t> extent,
                              std::vector<uint64_t> stride, std::vector<uint32_t> box, uint32_t swizzle = 0,
                              uint32_t fill = 0, std::vector<uint32_t> element_stride = {}) {
    kl_tensor_map_request r;
    memset(&r, 0, sizeof r);
    r.dtype = dtype;
    r.rank = (uint32_t)extent.size();
    r.address = address;
    for (uint32_t i = 0; i < r.rank; ++i) {
        r.extent[i] = extent[i];
        r.box[i] = box[i];
        r.element_stride[i] = element_stride.empty() ? 1u : element_stride[i];
        if (i > 0) r.stride[i - 1] = stride[i - 1];
    }
    r.swizzle = swizzle;
    r.oob_fill = fill;
    return r;
}

// Encoded by the emulated backend, as a kernel receives it.
CUtensorMap encode(const kl_tensor_map_request &r) {
    kl_tensor_map m;
    const kl_status st = kl_tensor_map_encode_tiled(&emu_test::backend()->base, &r, &m);
    EXPECT_EQ(st, KL_SUCCESS) << kl_last_error_message();
    CUtensorMap cm;
    memcpy(&cm, m.opaque, sizeof cm);
    return cm;
}

// A u32 tensor of n words, word i holding i.
struct Tensor {
    emu::Buffer<uint32_t> buf;
    explicit Tensor(size_t n, emu::Access a = emu::Access::kRead) : buf(n, a, "tensor") {
        for (size_t i = 0; i < n; ++i) buf[i] = (uint32_t)i;
    }
};

// 64 words and a map of boxes of 16 (64 bytes), the cases' common tensor.
struct Words64 {
    Tensor t{64};
    CUtensorMap map = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {64}, {}, {16}));
};

struct LoadRun {
    emu::Fault f;
    std::vector<uint32_t> out;  // the shared region after the wait, word by word
};

enum LoadMode : int32_t { kNormal = 0, kNoWait = 1, kArriveThenExpect = 2, kNobodyWaits = 3, kAltMap = 4, kTwice = 5 };

// emu_test_tma_load: one box at `coords`, thread 0 expecting `expect` bytes,
// into the region at dynamic base + 1024 + dst_off (region bytes, prefilled
// with 0xA0000000 + word index).
LoadRun load(const CUtensorMap &map, std::vector<int32_t> coords, int32_t expect, int32_t dst_off, int32_t region,
             int32_t mode = kNormal, const void *alt = nullptr) {
    // cfg: rank, c0..c4, expect, dst offset, region bytes, mode
    emu::Buffer<int32_t> cfg(10, emu::Access::kRead, "cfg");
    for (int i = 0; i < 10; ++i) cfg[i] = 0;
    cfg[0] = (int32_t)coords.size();
    for (size_t i = 0; i < coords.size(); ++i) cfg[1 + i] = coords[i];
    cfg[6] = expect;
    cfg[7] = dst_off;
    cfg[8] = region;
    cfg[9] = mode;
    emu::Buffer<uint32_t> out((size_t)region / 4, emu::Access::kWrite, "out");
    LoadRun r;
    r.f = emu::run(image(), "emu_test_tma_load", {1, 1, 1}, {32, 1, 1}, 1024u + (uint32_t)region, map, out.data(),
                   static_cast<const int32_t *>(cfg.data()), alt);
    r.out.assign(out.data(), out.data() + region / 4);
    return r;
}

constexpr uint32_t kPrefill = 0xA0000000u;

// load() on a fresh Words64.
LoadRun load64(std::vector<int32_t> coords, int32_t expect, int32_t dst_off, int32_t region, int32_t mode = kNormal,
               const void *alt = nullptr) {
    const Words64 w;
    return load(w.map, coords, expect, dst_off, region, mode, alt);
}

// ---- tiled mode: ranks, strides, element strides ------------------------------

// Rank 1: 64 words, box of 16 at 8: words 8..23.
TEST(EmuTmaLoad, Rank1BoxFromItsCoordinate) {
    const LoadRun r = load64({8}, 64, 0, 64);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t j = 0; j < 16; ++j) EXPECT_EQ(r.out[j], 8 + j) << "element " << j;
}

// Rank 3 with padded rows: extents (8, 3, 2), row stride 48 bytes (12 words),
// plane stride 192 (48 words); box (4, 2, 2) at (2, 1, 0): element (x, y, z)
// is word x + 12 y + 48 z, x fastest in shared memory.
TEST(EmuTmaLoad, Rank3StridesInBytesPaddedRows) {
    Tensor t(96);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {8, 3, 2}, {48, 192}, {4, 2, 2}));
    const LoadRun r = load(m, {2, 1, 0}, 64, 0, 64);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t z = 0; z < 2; ++z)
        for (uint32_t y = 0; y < 2; ++y)
            for (uint32_t x = 0; x < 4; ++x)
                EXPECT_EQ(r.out[x + 4 * (y + 2 * z)], (2 + x) + 12 * (1 + y) + 48 * z) << x << "," << y << "," << z;
}

// Rank 4, dense: extents (4, 2, 3, 2), strides 16, 32, 96; box (4, 1, 2, 2)
// at (0, 1, 1, 0): word x + 4 * 1 + 8 (1 + z) + 24 w.
TEST(EmuTmaLoad, Rank4) {
    Tensor t(48);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {4, 2, 3, 2}, {16, 32, 96}, {4, 1, 2, 2}));
    const LoadRun r = load(m, {0, 1, 1, 0}, 64, 0, 64);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t w = 0; w < 2; ++w)
        for (uint32_t z = 0; z < 2; ++z)
            for (uint32_t x = 0; x < 4; ++x) EXPECT_EQ(r.out[x + 4 * (z + 2 * w)], x + 4 + 8 * (1 + z) + 24 * w);
}

// Rank 5, dense: extents (4, 2, 2, 2, 2), strides 16, 32, 64, 128; box (4, 2,
// 1, 1, 2) at (0, 0, 1, 1, 0): word x + 4 y + 8 + 16 + 32 v.
TEST(EmuTmaLoad, Rank5) {
    Tensor t(64);
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {4, 2, 2, 2, 2}, {16, 32, 64, 128}, {4, 2, 1, 1, 2}));
    const LoadRun r = load(m, {0, 0, 1, 1, 0}, 64, 0, 64);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t v = 0; v < 2; ++v)
        for (uint32_t y = 0; y < 2; ++y)
            for (uint32_t x = 0; x < 4; ++x) EXPECT_EQ(r.out[x + 4 * (y + 2 * v)], x + 4 * y + 24 + 32 * v);
}

// Element strides (2, 3), box (4, 7) at (1, 2) of an 8 x 10 tensor (row
// stride 32 bytes): dimension 1 takes every 3rd row, ceil(7 / 3) = 3 of them
// (y = 2, 5, 8); dimension 0's stride is ignored without interleave (the
// driver's rule), so x = 1..4. 4 x 3 words = 48 bytes; word 12.. untouched.
TEST(EmuTmaLoad, ElementStridesSkipRowsAndDimension0IsDense) {
    Tensor t(80);
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {8, 10}, {32}, {4, 7}, 0, 0, {2, 3}));
    const LoadRun r = load(m, {1, 2}, 48, 0, 64);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t k = 0; k < 3; ++k)
        for (uint32_t x = 0; x < 4; ++x) EXPECT_EQ(r.out[x + 4 * k], (1 + x) + 8 * (2 + 3 * k)) << x << "," << k;
    for (uint32_t i = 12; i < 16; ++i) EXPECT_EQ(r.out[i], kPrefill + i);
}

// ---- out-of-boundary elements -----------------------------------------------

// 6 x 5 words in rows of 8 (stride 32 bytes): box (8, 4) at (-2, 3) covers
// x = -2..5, y = 3..6; x < 0 and y >= 5 read as zero.
TEST(EmuTmaLoad, NegativeAndPastEndCoordinatesReadZero) {
    Tensor t(40);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {6, 5}, {32}, {8, 4}));
    const LoadRun r = load(m, {-2, 3}, 128, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (int32_t j = 0; j < 4; ++j)
        for (int32_t i = 0; i < 8; ++i) {
            const int32_t x = -2 + i, y = 3 + j;
            const uint32_t want = x >= 0 && x < 6 && y < 5 ? (uint32_t)(x + 8 * y) : 0u;
            EXPECT_EQ(r.out[i + 8 * j], want) << "x " << x << " y " << y;
        }
}

// The same tensor as f32 with the NaN fill, box at (4, -1): x = 4..11, y =
// -1..2; in-bounds words keep their bits, the others are NaN (the ISA's
// OOB-NaN; its bits, 0x7ff77ff7, are what an H200 writes).
TEST(EmuTmaLoad, NanFillMarksOutOfBoundsElements) {
    Tensor t(40);
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_F32, t.buf.data(), {6, 5}, {32}, {8, 4}, 0, KL_TENSOR_MAP_FILL_NAN));
    const LoadRun r = load(m, {4, -1}, 128, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (int32_t j = 0; j < 4; ++j)
        for (int32_t i = 0; i < 8; ++i) {
            const int32_t x = 4 + i, y = -1 + j;
            const uint32_t got = r.out[i + 8 * j];
            float f;
            memcpy(&f, &got, 4);
            if (x < 6 && y >= 0)
                EXPECT_EQ(got, (uint32_t)(x + 8 * y)) << "x " << x << " y " << y;
            else
                EXPECT_TRUE(std::isnan(f) && got == 0x7ff77ff7u) << "x " << x << " y " << y << ": " << std::hex << got;
        }
}

// 2-byte elements: a bf16 8 x 2 tensor (rows of 16 bytes), box (8, 2) at
// (-4, 1): x = -4..3, y = 1, 2; outside elements are bf16 NaNs (exponent all
// ones, mantissa not zero: 0x7ff7 on an H200), inside ones keep their bits
// (the index x + 8 y).
TEST(EmuTmaLoad, Bf16NanFillPerElement) {
    emu::Buffer<uint16_t> t(16, emu::Access::kRead, "tensor");
    for (uint16_t i = 0; i < 16; ++i) t[i] = i;
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_BF16, t.data(), {8, 2}, {16}, {8, 2}, 0, KL_TENSOR_MAP_FILL_NAN));
    const LoadRun r = load(m, {-4, 1}, 32, 0, 32);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (int32_t j = 0; j < 2; ++j)
        for (int32_t i = 0; i < 8; ++i) {
            const int32_t x = -4 + i, y = 1 + j, e = i + 8 * j;
            const uint16_t h = (uint16_t)(r.out[e / 2] >> (16 * (e % 2)));
            if (x >= 0 && y < 2)
                EXPECT_EQ(h, (uint16_t)(x + 8 * y)) << "x " << x << " y " << y;
            else
                EXPECT_TRUE((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0u && h == 0x7ff7u)
                    << "x " << x << " y " << y << ": " << h;
        }
}

// A box wholly outside the tensor is all fill, and still delivers its 128
// bytes to the mbarrier (the phase completes).
TEST(EmuTmaLoad, BoxWhollyOutsideIsAllZeroAndCompletesItsBytes) {
    Tensor t(40);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {6, 5}, {32}, {8, 4}));
    const LoadRun r = load(m, {100, -50}, 128, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(r.out[i], 0u) << i;
}

// The ragged edge: 10 x 7 words in rows of 12 (stride 48), the last 8 x 4 tile
// at (8, 4): x = 8, 9 and y = 4..6 inside, the rest zero.
TEST(EmuTmaLoad, BoxAtTheRaggedEdge) {
    Tensor t(84);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {10, 7}, {48}, {8, 4}));
    const LoadRun r = load(m, {8, 4}, 128, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t j = 0; j < 4; ++j)
        for (uint32_t i = 0; i < 8; ++i) {
            const uint32_t x = 8 + i, y = 4 + j;
            EXPECT_EQ(r.out[i + 8 * j], x < 10 && y < 7 ? x + 12 * y : 0u) << "x " << x << " y " << y;
        }
}

// ---- swizzle ------------------------------------------------------------------

// The word at byte `off` of the dense (unswizzled) box of `row_words` words
// a row, of a tensor whose element (x, y) is word x + row_words * y, box at y0.
uint32_t dense_word(uint32_t off, uint32_t row_words, uint32_t y0) {
    const uint32_t w = off / 4;
    return (w % row_words) + row_words * (y0 + w / row_words);
}

// Position p of line l holds dense chunk table[l][p]: the region's bytes, 16
// by 16, against the ISA's table (line = (address / 128) % rows, address from
// the 1024-aligned region: lines start at base_line).
template <size_t ROWS>
void expect_swizzled(const LoadRun &r, const uint32_t (&table)[ROWS][8], uint32_t box_bytes, uint32_t row_words,
                     uint32_t y0, uint32_t dst_off) {
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t line = 0; line < box_bytes / 128; ++line)
        for (uint32_t p = 0; p < 8; ++p) {
            const uint32_t addr_line = (dst_off / 128 + line) % ROWS, q = table[addr_line][p];
            for (uint32_t w = 0; w < 4; ++w)
                EXPECT_EQ(r.out[(dst_off + line * 128 + p * 16) / 4 + w], dense_word(line * 128 + q * 16 + 4 * w, row_words, y0))
                    << "line " << line << " position " << p << " word " << w;
        }
}

// A 2-D u32 tensor of rows of row_words (the box as wide), tensor_rows rows;
// box_rows rows from y0 loaded with swizzle `mode` to region + dst_off, and
// checked against the table.
template <size_t ROWS>
LoadRun swizzle_load(const uint32_t (&table)[ROWS][8], uint32_t mode, uint32_t row_words, uint32_t tensor_rows,
                     uint32_t box_rows, int32_t y0, int32_t dst_off) {
    Tensor t(row_words * tensor_rows);
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {row_words, tensor_rows}, {4 * row_words}, {row_words, box_rows}, mode));
    const uint32_t bytes = 4 * row_words * box_rows;
    LoadRun r = load(m, {0, y0}, (int32_t)bytes, dst_off, dst_off + (int32_t)bytes);
    expect_swizzled(r, table, bytes, row_words, (uint32_t)y0, (uint32_t)dst_off);
    return r;
}

// 32B: rows of 8 words (32 bytes), 16 rows = 512 bytes = 4 lines.
TEST(EmuTmaSwizzle, Swizzle32BSwapsChunkPairsInOddLines) {
    const LoadRun r = swizzle_load(kSwizzle32B, KL_TENSOR_MAP_SWIZZLE_32B, 8, 16, 16, 0, 0);
    // Line 1 (rows 4..7), position 0 holds chunk 1: row 4, words 4..7.
    EXPECT_EQ(r.out[32], 4u + 8 * 4);
}

// 64B: rows of 16 words, 8 rows = 4 lines.
TEST(EmuTmaSwizzle, Swizzle64BFollowsTheFourLineTable) {
    const LoadRun r = swizzle_load(kSwizzle64B, KL_TENSOR_MAP_SWIZZLE_64B, 16, 8, 8, 0, 0);
    // Line 3 (rows 6, 7), position 0 holds chunk 3: row 6, words 12..15.
    EXPECT_EQ(r.out[96], 12u + 16 * 6);
}

// 128B: rows of 32 words = one line each; box rows 8..15 of a 32 x 16 tensor.
TEST(EmuTmaSwizzle, Swizzle128BXorsTheChunkWithTheLine) {
    const LoadRun r = swizzle_load(kSwizzle128B, KL_TENSOR_MAP_SWIZZLE_128B, 32, 16, 8, 8, 0);
    // Line 5 (row 13), position 2 holds chunk 7: words 28..31 of row 13.
    EXPECT_EQ(r.out[5 * 32 + 2 * 4], 28u + 32 * 13);
}

// A box 256 bytes past a 1024-byte boundary starts at line 2 of the pattern
// (the ISA's base offset (dstMem / 128) % 8 = 2); the 256 bytes before it
// keep their prefill.
TEST(EmuTmaSwizzle, Swizzle128BAtAnOffsetUsesTheAddressLine) {
    const LoadRun r = swizzle_load(kSwizzle128B, KL_TENSOR_MAP_SWIZZLE_128B, 32, 16, 8, 0, 256);
    for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(r.out[i], kPrefill + i);
    // Box row 0 sits in address line 2: position 0 holds chunk 2 (words 8..11).
    EXPECT_EQ(r.out[64], 8u);
}

// Rows narrower than the swizzle span take the whole span (as an H200 lays
// them out; the ISA does not say): box (8, 8) of u32 (32-byte rows) under the
// 128B swizzle puts row r in line r, its two chunks where line r's table has
// 0 and 1; the rest of each line keeps its prefill. 256 bytes of data.
TEST(EmuTmaSwizzle, Swizzle128BNarrowRowsTakeTheWholeSpan) {
    Tensor t(32 * 16);
    const CUtensorMap m =
        encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {32, 16}, {128}, {8, 8}, KL_TENSOR_MAP_SWIZZLE_128B));
    const LoadRun r = load(m, {0, 0}, 256, 0, 1024);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t line = 0; line < 8; ++line)
        for (uint32_t p = 0; p < 8; ++p) {
            const uint32_t q = kSwizzle128B[line][p];
            for (uint32_t w = 0; w < 4; ++w) {
                const uint32_t word = line * 32 + p * 4 + w;
                EXPECT_EQ(r.out[word], q < 2 ? 32 * line + 4 * q + w : kPrefill + word)
                    << "line " << line << " position " << p << " word " << w;
            }
        }
}

// ---- stores -------------------------------------------------------------------

struct StoreRun {
    emu::Fault f;
    std::vector<uint32_t> g;  // the global tensor afterwards
    bool guards = false;
};

constexpr uint32_t kUntouched = 0xEEEEEEEEu;
constexpr uint32_t kSource = 0x7000u;

// emu_test_tma_store: the region (region bytes at base + 1024) holds
// kSource + word index; thread 0 stores the box at `coords` from region +
// src_off into the tensor (tensor words start as kUntouched).
StoreRun store(const kl_tensor_map_request &req_without_address, size_t tensor_words, std::vector<int32_t> coords,
               int32_t src_off, int32_t region, int32_t mode = 0) {
    emu::Buffer<uint32_t> g(tensor_words, emu::Access::kReadWrite, "tensor");
    for (size_t i = 0; i < tensor_words; ++i) g[i] = kUntouched;
    kl_tensor_map_request req = req_without_address;
    req.address = g.data();
    const CUtensorMap m = encode(req);
    emu::Buffer<uint32_t> in((size_t)region / 4, emu::Access::kRead, "in");
    for (int32_t i = 0; i < region / 4; ++i) in[i] = kSource + (uint32_t)i;
    // cfg: rank, c0..c4, src offset, region bytes, mode
    emu::Buffer<int32_t> cfg(9, emu::Access::kRead, "cfg");
    for (int i = 0; i < 9; ++i) cfg[i] = 0;
    cfg[0] = (int32_t)coords.size();
    for (size_t i = 0; i < coords.size(); ++i) cfg[1 + i] = coords[i];
    cfg[6] = src_off;
    cfg[7] = region;
    cfg[8] = mode;
    StoreRun r;
    r.f = emu::run(image(), "emu_test_tma_store", {1, 1, 1}, {32, 1, 1}, 1024u + (uint32_t)region, m,
                   static_cast<const uint32_t *>(in.data()), static_cast<const int32_t *>(cfg.data()));
    r.g.assign(g.data(), g.data() + tensor_words);
    r.guards = g.guards_intact();
    return r;
}

// The last 8 x 4 tile of a 10 x 7 tensor (rows of 12 words): only x = 8, 9,
// y = 4..6 are written, from box element (x - 8, y - 4) = region word
// (x - 8) + 8 (y - 4); the padding words (x = 10, 11) and the rest keep theirs.
TEST(EmuTmaStore, BoxAtTheRaggedEdgeWritesOnlyTheTensor) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {10, 7}, {48}, {8, 4}), 84, {8, 4}, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    EXPECT_TRUE(r.guards);
    for (uint32_t y = 0; y < 7; ++y)
        for (uint32_t x = 0; x < 12; ++x) {
            const bool in = x >= 8 && x < 10 && y >= 4;
            EXPECT_EQ(r.g[x + 12 * y], in ? kSource + (x - 8) + 8 * (y - 4) : kUntouched) << "x " << x << " y " << y;
        }
}

// Negative coordinates: box (8, 4) at (-4, -2) writes x = 0..3, y = 0, 1 from
// box element (x + 4, y + 2).
TEST(EmuTmaStore, NegativeCoordinatesWriteOnlyTheInsidePart) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {10, 7}, {48}, {8, 4}), 84, {-4, -2}, 0, 128);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    EXPECT_TRUE(r.guards);
    for (uint32_t y = 0; y < 7; ++y)
        for (uint32_t x = 0; x < 12; ++x) {
            const bool in = x < 4 && y < 2;
            EXPECT_EQ(r.g[x + 12 * y], in ? kSource + (x + 4) + 8 * (y + 2) : kUntouched) << "x " << x << " y " << y;
        }
}

// A 64B-swizzled store reads element (x, y) (dense byte y * 64 + 4 x, line
// l = that / 128, chunk q) from the position p of line l where the table has
// q. Rank 2, 16 x 8 words.
TEST(EmuTmaStore, Swizzle64BReadsTheSourceThroughTheTable) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {16, 8}, {64}, {16, 8}, KL_TENSOR_MAP_SWIZZLE_64B),
                             128, {0, 0}, 0, 512);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t y = 0; y < 8; ++y)
        for (uint32_t x = 0; x < 16; ++x) {
            const uint32_t off = y * 64 + 4 * x, line = off / 128, q = (off % 128) / 16;
            uint32_t p = 0;
            while (kSwizzle64B[line % 4][p] != q) ++p;
            EXPECT_EQ(r.g[x + 16 * y], kSource + (line * 128 + p * 16 + off % 16) / 4) << "x " << x << " y " << y;
        }
}

// The store side of the same layout: element (x, y) of a box (8, 8) of u32
// under the 128B swizzle comes from line y, at the position where the table
// has chunk x / 4 (an H200 stores 0x24 + 0x5000 at (0, 1): line 1,
// position 1).
TEST(EmuTmaStore, Swizzle128BNarrowRowsReadTheWholeSpan) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {8, 8}, {32}, {8, 8}, KL_TENSOR_MAP_SWIZZLE_128B), 64,
                             {0, 0}, 0, 1024);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t y = 0; y < 8; ++y)
        for (uint32_t x = 0; x < 8; ++x) {
            uint32_t p = 0;
            while (kSwizzle128B[y][p] != x / 4) ++p;
            EXPECT_EQ(r.g[x + 8 * y], kSource + y * 32 + p * 4 + x % 4) << "x " << x << " y " << y;
        }
    EXPECT_EQ(r.g[8], kSource + 0x24);
}

// Ranks 1, 3, 4 and 5 store the words of their boxes in x-fastest order.
TEST(EmuTmaStore, Ranks1To5) {
    const StoreRun r1 = store(request(KL_TENSOR_MAP_U32, nullptr, {32}, {}, {8}), 32, {20}, 0, 32);
    ASSERT_TRUE(r1.f.ok()) << r1.f.message;
    for (uint32_t x = 0; x < 32; ++x) EXPECT_EQ(r1.g[x], x >= 20 && x < 28 ? kSource + x - 20 : kUntouched);
    // Rank 3: extents (4, 3, 2), strides 16, 48; box (4, 2, 1) at (0, 1, 1).
    const StoreRun r3 = store(request(KL_TENSOR_MAP_U32, nullptr, {4, 3, 2}, {16, 48}, {4, 2, 1}), 24, {0, 1, 1}, 0, 32);
    ASSERT_TRUE(r3.f.ok()) << r3.f.message;
    for (uint32_t z = 0; z < 2; ++z)
        for (uint32_t y = 0; y < 3; ++y)
            for (uint32_t x = 0; x < 4; ++x) {
                const bool in = z == 1 && y >= 1;
                EXPECT_EQ(r3.g[x + 4 * y + 12 * z], in ? kSource + x + 4 * (y - 1) : kUntouched);
            }
    // Rank 4: extents (4, 2, 2, 2), strides 16, 32, 64; box (4, 1, 2, 1) at (0, 1, 0, 1).
    const StoreRun r4 = store(request(KL_TENSOR_MAP_U32, nullptr, {4, 2, 2, 2}, {16, 32, 64}, {4, 1, 2, 1}), 32,
                              {0, 1, 0, 1}, 0, 32);
    ASSERT_TRUE(r4.f.ok()) << r4.f.message;
    for (uint32_t w = 0; w < 2; ++w)
        for (uint32_t z = 0; z < 2; ++z)
            for (uint32_t y = 0; y < 2; ++y)
                for (uint32_t x = 0; x < 4; ++x) {
                    const bool in = y == 1 && w == 1;
                    EXPECT_EQ(r4.g[x + 4 * y + 8 * z + 16 * w], in ? kSource + x + 4 * z : kUntouched);
                }
    // Rank 5: extents (4, 1, 1, 2, 2), strides 16, 16, 16, 32; box (4, 1, 1, 1, 2) at (0, 0, 0, 1, 0).
    const StoreRun r5 = store(request(KL_TENSOR_MAP_U32, nullptr, {4, 1, 1, 2, 2}, {16, 16, 16, 32}, {4, 1, 1, 1, 2}),
                              16, {0, 0, 0, 1, 0}, 0, 32);
    ASSERT_TRUE(r5.f.ok()) << r5.f.message;
    for (uint32_t v = 0; v < 2; ++v)
        for (uint32_t w = 0; w < 2; ++w)
            for (uint32_t x = 0; x < 4; ++x)
                EXPECT_EQ(r5.g[x + 4 * w + 8 * v], w == 1 ? kSource + x + 4 * v : kUntouched);
}

// A kernel may end on wait_group.read: the global writes still land.
TEST(EmuTmaStore, WritesLandWhenTheThreadReturnsAfterWaitGroupRead) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {8, 2}, {32}, {8, 2}), 16, {0, 0}, 0, 64, 1);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(r.g[i], kSource + i);
}

// ---- cp.async.bulk and bulk async-groups ----------------------------------------

emu::Fault bulk(uint32_t bytes, uint32_t dst_off, size_t src_misalign, std::vector<unsigned char> *got) {
    // Guards of 16 bytes keep the data 16-byte aligned (plus src_misalign).
    emu::Buffer<unsigned char> src(512, emu::Access::kRead, "src", 16, src_misalign);
    emu::Buffer<unsigned char> dst(512, emu::Access::kWrite, "dst", 16);
    for (uint32_t i = 0; i < 512; ++i) src[i] = (unsigned char)(i * 7 + 3);
    dst.fill_bytes(0);
    const emu::Fault f = emu::run(image(), "emu_test_bulk", {1, 1, 1}, {32, 1, 1}, 2048, dst.data(),
                                  static_cast<const unsigned char *>(src.data()), bytes, dst_off);
    if (got) got->assign(dst.data(), dst.data() + 512);
    return f;
}

TEST(EmuBulk, LoadOnAnMbarrierThenStoreRoundTrips) {
    std::vector<unsigned char> got;
    const emu::Fault f = bulk(208, 16, 0, &got);
    ASSERT_TRUE(f.ok()) << f.message;
    for (uint32_t i = 0; i < 512; ++i) EXPECT_EQ(got[i], i < 208 ? (unsigned char)(i * 7 + 3) : 0) << i;
}

TEST(EmuBulk, SizeNotAMultipleOf16Faults) {
    const emu::Fault f = bulk(200, 0, 0, nullptr);
    EXPECT_EQ(f.kind, emu::FaultKind::kBadOperand) << f.message;
    EXPECT_TRUE(has(f, "size 200 is not a positive multiple of 16")) << f.message;
}

TEST(EmuBulk, SharedAddressNot16ByteAlignedFaults) {
    const emu::Fault f = bulk(64, 8, 0, nullptr);
    EXPECT_EQ(f.kind, emu::FaultKind::kMisaligned) << f.message;
    EXPECT_TRUE(has(f, "shared address")) << f.message;
}

TEST(EmuBulk, GlobalAddressNot16ByteAlignedFaults) {
    const emu::Fault f = bulk(64, 0, 4, nullptr);
    EXPECT_EQ(f.kind, emu::FaultKind::kMisaligned) << f.message;
    EXPECT_TRUE(has(f, "global address")) << f.message;
}

struct GroupRun {
    emu::Fault f;
    std::vector<uint32_t> dst;
    uint32_t seen = 0;
};

GroupRun groups(uint32_t mode) {
    emu::Buffer<uint32_t> dst(192, emu::Access::kReadWrite, "dst");
    emu::Buffer<uint32_t> seen(1, emu::Access::kWrite, "seen");
    for (uint32_t i = 0; i < 192; ++i) dst[i] = 0;
    GroupRun r;
    r.f = emu::run(image(), "emu_test_bulk_groups", {1, 1, 1}, {32, 1, 1}, 2048, dst.data(), seen.data(), mode);
    r.dst.assign(dst.data(), dst.data() + 192);
    r.seen = seen[0];
    return r;
}

// Groups 0 and 1 store stages A and B; after wait_group.read 1 (group 0 has
// read its source) stage 0 is rewritten with C and stored as group 2; after
// wait_group 1 groups 0 and 1 have written: the kernel reads A back.
TEST(EmuBulkGroups, WaitGroupReadFreesTheOlderGroupsSources) {
    const GroupRun r = groups(0);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 64; ++i) {
        EXPECT_EQ(r.dst[i], 0xA000u + i);
        EXPECT_EQ(r.dst[64 + i], 0xB000u + i);
        EXPECT_EQ(r.dst[128 + i], 0xC000u + i);
    }
    EXPECT_EQ(r.seen, 0xA000u);
}

// ... but group 1, the most recent, may still be reading stage 1.
TEST(EmuBulkGroups, RewritingASourceBeforeItsWaitGroupReadIsARace) {
    const GroupRun r = groups(1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
    EXPECT_TRUE(has(r.f, "while cp.async.bulk.global.shared::cta.bulk_group (256 bytes from shared")) << r.f.message;
    EXPECT_TRUE(has(r.f, "is still reading it")) << r.f.message;
}

TEST(EmuTmaStore, SourceRewrittenBeforeWaitGroupReadIsARace) {
    const StoreRun r = store(request(KL_TENSOR_MAP_U32, nullptr, {8, 2}, {32}, {8, 2}), 16, {0, 0}, 0, 64, 2);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
    EXPECT_TRUE(has(r.f, "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group (box at {0, 0}")) << r.f.message;
    EXPECT_EQ(r.f.thread, 0u);
}

// ---- transactions on the mbarrier ---------------------------------------------------

// Expecting 64 bytes more than the box delivers: the phase never completes.
TEST(EmuTmaTransactions, ExpectingMoreThanDeliveredIsADeadlockNamingTheTxCount) {
    const LoadRun r = load64({0}, 64 + 64, 0, 64);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "(phase 0 in progress: 0 of 1 arrivals pending, tx-count 64: transaction bytes expected"))
        << r.f.message;
}

// Expecting 16 bytes fewer: the 64 delivered leave the tx-count at -16.
TEST(EmuTmaTransactions, ExpectingFewerThanDeliveredIsADeadlockWithANegativeTxCount) {
    const LoadRun r = load64({0}, 48, 0, 64);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kDeadlock) << r.f.message;
    EXPECT_TRUE(has(r.f, "tx-count -16: more transaction bytes completed than were expected")) << r.f.message;
}

// mbarrier.expect_tx (no arrival) then a plain arrive: the same as arrive.expect_tx.
TEST(EmuTmaTransactions, ExpectTxWithoutArriveCountsTheBytes) {
    const LoadRun r = load64({16}, 64, 0, 64, kArriveThenExpect);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t j = 0; j < 16; ++j) EXPECT_EQ(r.out[j], 16 + j);
}

// No bytes expected: phase 0 completes at the arrive, before the data; the
// waits on it pass without landing the copy (as on the GPU, the phase was
// over), so the reads meet the copy still in flight.
TEST(EmuTmaTransactions, ArriveWithoutExpectingTheBytesIsARace) {
    const LoadRun r = load64({0}, 0, 0, 64, kArriveThenExpect);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
    EXPECT_TRUE(has(r.f, "is still writing it")) << r.f.message;
}

// Reading the stage without waiting: the copy is still in flight.
TEST(EmuTmaTransactions, ReadingAStageBeforeItsBarrierCompletesIsARace) {
    const LoadRun r = load64({0}, 64, 0, 64, kNoWait);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
    EXPECT_TRUE(has(r.f, "read of shared byte")) << r.f.message;
    EXPECT_TRUE(has(r.f, "while cp.async.bulk.tensor.1d.shared::cluster.global.tile (box at {0}, 64 bytes"))
        << r.f.message;
    EXPECT_TRUE(has(r.f, "is still writing it")) << r.f.message;
}

TEST(EmuTmaTransactions, ACopyNobodyWaitsForFaultsWhenTheBlockEnds) {
    const LoadRun r = load64({0}, 64, 0, 64, kNobodyWaits);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kUnsupported) << r.f.message;
    EXPECT_TRUE(has(r.f, "nobody waited on that mbarrier")) << r.f.message;
}

struct RingRun {
    emu::Fault f;
    std::vector<uint32_t> out;
};

RingRun ring(uint32_t items, uint32_t stages, uint32_t skip_full_from, uint32_t skip_empty) {
    Tensor t(32 * 4 * items);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {32, 4 * items}, {128}, {32, 4}));
    emu::Buffer<uint32_t> out(128 * items, emu::Access::kWrite, "out");
    RingRun r;
    r.f = emu::run(image(), "emu_test_tma_ring", {1, 1, 1}, {64, 1, 1}, 1024 + 512 * stages, m,
                   static_cast<void *>(out.data()), items, stages, skip_full_from, skip_empty);
    r.out.assign(out.data(), out.data() + 128 * items);
    return r;
}

// 7 items through 2 stages (each stage refilled 3 or 4 times): out == tensor.
TEST(EmuTmaRing, ProducerAndConsumerBehindFullAndEmptyBarriers) {
    const RingRun r = ring(7, 2, 7, 0);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 7 * 128; ++i) ASSERT_EQ(r.out[i], i) << "word " << i;
}

TEST(EmuTmaRing, ConsumerSkippingTheFullWaitIsARace) {
    const RingRun r = ring(4, 2, 1, 0);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
}

// Without the empty wait the producer re-arms stage 0's full barrier while
// its phase still waits for the first item's bytes: one arrival too many.
TEST(EmuTmaRing, ProducerRefillingBeforeTheEmptyWaitArrivesTwiceInAPhase) {
    const RingRun r = ring(5, 2, 5, 1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kCollective) << r.f.message;
    EXPECT_TRUE(has(r.f, "mbarrier.arrive.expect_tx: mbarrier")) << r.f.message;
    EXPECT_TRUE(has(r.f, "one arrival too many")) << r.f.message;
}

// Regression (the H200 failed a grouped_gemm_tma build that the emulator
// passed): a consumer waiting on the parity of a stage's round two ahead of
// the one in progress passes at once, as on the GPU, and reads bytes in
// flight; waiting for its turn (one round behind at most) it reads them all.
RingRun two_consumers(uint32_t ahead_ok) {
    Tensor t(32 * 4 * 4);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {32, 16}, {128}, {32, 4}));
    emu::Buffer<uint32_t> out(128 * 4, emu::Access::kWrite, "out");
    RingRun r;
    r.f = emu::run(image(), "emu_test_tma_two_consumers", {1, 1, 1}, {96, 1, 1}, 1024 + 1024, m,
                   static_cast<void *>(out.data()), ahead_ok);
    r.out.assign(out.data(), out.data() + 128 * 4);
    return r;
}

TEST(EmuTmaRing, AConsumerWithinOneRoundOfTheProducerReadsEveryItem) {
    const RingRun r = two_consumers(0);
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t i = 0; i < 4 * 128; ++i) ASSERT_EQ(r.out[i], i) << "word " << i;
}

TEST(EmuTmaRing, AWaitOnTheParityOfARoundTwoAheadPassesAtOnceAndReadsInFlightBytes) {
    const RingRun r = two_consumers(1);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
}

// A second copy into a stage the first is still writing.
TEST(EmuTmaTransactions, TwoCopiesInFlightIntoOneStageFault) {
    const LoadRun r = load64({0}, 128, 0, 64, kTwice);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kSharedRace) << r.f.message;
    EXPECT_TRUE(has(r.f, "cp.async.bulk.tensor.1d.shared::cluster.global.tile (box at {0}, 64 bytes")) << r.f.message;
    EXPECT_TRUE(has(r.f, "is still writing")) << r.f.message;
}

// ---- operands -------------------------------------------------------------------

TEST(EmuTmaOperands, DestinationNot128ByteAlignedFaults) {
    const LoadRun r = load64({0}, 64, 64, 256);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kMisaligned) << r.f.message;
    EXPECT_TRUE(has(r.f, "is not 128-byte aligned")) << r.f.message;
}

// Extents of 8 x 10 over a 40-word buffer (rows 5..9 lie past it).
TEST(EmuTmaOperands, MapOverrunningItsBufferFaultsNamingTheBuffer) {
    Tensor t(40);
    const CUtensorMap m = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {8, 10}, {32}, {8, 4}));
    const LoadRun r = load(m, {0, 4}, 128, 0, 128);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kGlobalOutOfBounds) << r.f.message;
    EXPECT_TRUE(has(r.f, "'tensor' + 160, past its end (160 bytes)")) << r.f.message;
}

// A map in a registered global buffer works like the parameter.
TEST(EmuTmaOperands, MapInGlobalMemoryIsRead) {
    const Words64 w;
    const CUtensorMap &m = w.map;
    emu::Buffer<CUtensorMap> gm(1, emu::Access::kRead, "maps");
    gm[0] = m;
    const LoadRun r = load(m, {4}, 64, 0, 64, kAltMap, gm.data());
    ASSERT_TRUE(r.f.ok()) << r.f.message;
    for (uint32_t j = 0; j < 16; ++j) EXPECT_EQ(r.out[j], 4 + j);
}

// 128 bytes that are no reference encoding (a driver's map, or anything).
TEST(EmuTmaOperands, BytesInAnotherEncodingAreNotAMap) {
    emu::Buffer<uint64_t> junk(16, emu::Access::kRead, "junk");
    for (uint32_t i = 0; i < 16; ++i) junk[i] = 0x0123456789abcdefull * (i + 1);
    const LoadRun r = load64({0}, 64, 0, 64, kAltMap, junk.data());
    EXPECT_EQ(r.f.kind, emu::FaultKind::kBadOperand) << r.f.message;
    EXPECT_TRUE(has(r.f, "are not a tensor map in klaunch's reference encoding")) << r.f.message;
    EXPECT_TRUE(has(r.f, "in buffer 'junk'")) << r.f.message;
}

// A pointer to memory the kernel may not read at all.
TEST(EmuTmaOperands, PointerToNoParameterOrBufferIsNotAMap) {
    alignas(128) static unsigned char host_only[128];
    const LoadRun r = load64({0}, 64, 0, 64, kAltMap, host_only);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kBadOperand) << r.f.message;
    EXPECT_TRUE(has(r.f, "is not a tensor map: it is neither one of the thread's parameters nor inside a registered "
                         "buffer"))
        << r.f.message;
}

TEST(EmuTmaOperands, MapWhoseRankIsNotTheInstructionsFaults) {
    Tensor t(64);
    const CUtensorMap m1 = encode(request(KL_TENSOR_MAP_U32, t.buf.data(), {64}, {}, {16}));
    const LoadRun r = load(m1, {0, 0}, 64, 0, 64);
    EXPECT_EQ(r.f.kind, emu::FaultKind::kBadOperand) << r.f.message;
    EXPECT_TRUE(has(r.f, "has rank 1; the instruction copies 2 dimensions")) << r.f.message;
}

emu::Fault prefetch(const CUtensorMap &m, const void *p, uint32_t shared_operand) {
    return emu::run(image(), "emu_test_tma_prefetch", {1, 1, 1}, {1, 1, 1}, 1024, m, p, shared_operand);
}

TEST(EmuTmaPrefetch, AcceptsTheParameterAndAMapInGlobalMemory) {
    const Words64 w;
    const CUtensorMap &m = w.map;
    emu::Buffer<CUtensorMap> gm(1, emu::Access::kRead, "maps");
    gm[0] = m;
    EXPECT_TRUE(prefetch(m, nullptr, 0).ok());
    const emu::Fault f = prefetch(m, gm.data(), 0);
    EXPECT_TRUE(f.ok()) << f.message;
}

TEST(EmuTmaPrefetch, RefusesSharedMemoryMisalignmentAndNonMaps) {
    const Words64 w;
    const CUtensorMap &m = w.map;
    const emu::Fault sh = prefetch(m, nullptr, 1);
    EXPECT_EQ(sh.kind, emu::FaultKind::kBadOperand) << sh.message;
    EXPECT_TRUE(has(sh, "prefetch.tensormap: the tensor map operand")) << sh.message;
    EXPECT_TRUE(has(sh, "is shared memory")) << sh.message;
    emu::Buffer<unsigned char> two(256, emu::Access::kRead, "two maps", 64);  // data 64-byte aligned
    memcpy(two.data(), &m, 128);
    const emu::Fault mis = prefetch(m, two.data() + 16, 0);
    EXPECT_EQ(mis.kind, emu::FaultKind::kMisaligned) << mis.message;
    EXPECT_TRUE(has(mis, "is not 64-byte aligned")) << mis.message;
    two.fill_bytes(0);
    const emu::Fault zero = prefetch(m, two.data(), 0);
    EXPECT_EQ(zero.kind, emu::FaultKind::kBadOperand) << zero.message;
}

// ---- the parameter itself -----------------------------------------------------------

const emu::KernelEntry *entry(const char *name) {
    const emu::Image *im = static_cast<const emu::Image *>(image());
    for (uint32_t i = 0; i < im->num_kernels; ++i)
        if (strcmp(im->kernels[i].name, name) == 0) return &im->kernels[i];
    return nullptr;
}

// (u32, CUtensorMap, u64 *, u32): the map at the next 128-byte boundary, 128
// bytes, as CUDA lays out a 128-byte-aligned parameter.
TEST(EmuTmaParam, ATensorMapParameterIs128BytesAt128ByteAlignment) {
    const emu::KernelEntry *k = entry("emu_test_tma_param");
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->num_params, 4u);
    EXPECT_EQ(k->params[0].offset, 0u);
    EXPECT_EQ(k->params[1].offset, 128u);
    EXPECT_EQ(k->params[1].size, 128u);
    EXPECT_EQ(k->params[2].offset, 256u);
    EXPECT_EQ(k->params[3].offset, 264u);
}

// Through the emulated backend's launch (the arguments packed as the driver
// packs them): the kernel receives all 128 bytes, at a 128-byte-aligned
// address (the type's alignment; the copy engine needs 64).
TEST(EmuTmaParam, TheBackendsLaunchCopiesAll128Bytes) {
    CUtensorMap m;
    for (uint32_t i = 0; i < 16; ++i) m.opaque[i] = 0x1111111111111111ull * (i + 1) + i;
    emu::Buffer<uint64_t> out(19, emu::Access::kWrite, "out");
    uint32_t before = 0xB4, after = 0xAF;
    uint64_t *outp = out.data();
    void *args[4] = {&before, &m, &outp, &after};
    kl_kernel_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.launcher = "emu_test_tma_param";
    desc.entry = "emu_test_tma_param";
    kl_kernel k;
    memset(&k, 0, sizeof k);
    k.desc = &desc;
    k.backend = &emu_test::backend()->base;
    k.fn = const_cast<emu::KernelEntry *>(entry("emu_test_tma_param"));
    ASSERT_NE(k.fn, nullptr);
    kl_launch l;
    memset(&l, 0, sizeof l);
    l.kernel = &k;
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    l.args = args;
    ASSERT_EQ(emu_test::backend()->base.ops->launch(&emu_test::backend()->base, &l), KL_SUCCESS)
        << kl_last_error_message();
    for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(out[i], m.opaque[i]) << "word " << i;
    EXPECT_EQ(out[16], 0u) << "the parameter's address modulo 128";
    EXPECT_EQ(out[17], 0xB4u);
    EXPECT_EQ(out[18], 0xAFu);
}

// The emulated backend encodes in klaunch's reference encoding.
TEST(EmuTmaParam, TheEmulatedBackendEncodesTheReferenceEncoding) {
    Tensor t(64);
    const kl_tensor_map_request req = request(KL_TENSOR_MAP_BF16, t.buf.data(), {128}, {}, {64}, 0, 1);
    const CUtensorMap m = encode(req);
    unsigned char want[128];
    kl_tensor_map_reference_encode(&req, want);
    EXPECT_EQ(memcmp(&m, want, 128), 0);
    uint32_t magic;
    memcpy(&magic, &m, 4);
    EXPECT_EQ(magic, 0x72746c6bu);  // "kltr"
}

}  // namespace
