// inputs.h: the host side of the GPU programs' inputs, shared by the
// benchmarks (bench/decode, bench/mla_decode, bench/mla) and the tuner
// (tools/tune, which also runs them on the CPU emulator): the random
// patterns their buffers are filled from, the fp8 codes and MLA fp8 cache
// tokens, how many input sets make a rotation past L2, and a paged cache's
// shuffled block tables. No driver calls: a program copies the patterns
// where it needs them (bench_driver.h's Buf, the emulator's host buffers).
//
// Header-only, C++17, everything inline in namespace kl_inputs.
#ifndef KLAUNCH_BENCH_COMMON_INPUTS_H
#define KLAUNCH_BENCH_COMMON_INPUTS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "klaunch/mla_decode_layout.h"

namespace kl_inputs {

// bf16 of f, rounded to nearest even (f finite).
inline uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t h) {
    const uint32_t u = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// An OCP E4M3 code of magnitude 1/8 to 2 (sign, exponent field 4..8, any
// mantissa: never NaN) from one random word.
inline uint8_t fp8_code(uint32_t r) {
    return static_cast<uint8_t>(((r & 1u) << 7) | ((4u + (r >> 1) % 5u) << 3) | ((r >> 8) & 7u));
}

// `bytes` bytes of random bf16 in [-1, 1) (bytes even).
inline std::vector<unsigned char> bf16_pattern(size_t bytes, uint32_t seed) {
    std::vector<unsigned char> host(bytes);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i + 1 < bytes; i += 2) {
        const uint16_t h = to_bf16(u(gen));
        host[i] = static_cast<unsigned char>(h & 0xffu);
        host[i + 1] = static_cast<unsigned char>(h >> 8);
    }
    return host;
}

// `bytes` random fp8 codes (fp8_code).
inline std::vector<unsigned char> fp8_pattern(size_t bytes, uint32_t seed) {
    std::vector<unsigned char> host(bytes);
    std::mt19937 gen(seed);
    for (auto &b : host) b = fp8_code(gen());
    return host;
}

// One MLA fp8 cache token of kv_lora latent values (klaunch/mla_decode_layout.h,
// THE FP8 CACHE TOKEN): E4M3 codes, one fp32 scale in [0.25, 1) per 128
// values, bf16 rope in [-1, 1).
inline void mla_fp8_token(uint8_t *t, uint32_t kv_lora, std::mt19937 &gen) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), sc(0.25f, 1.0f);
    const uint32_t tb = kl_mla_decode_fp8_token_bytes(kv_lora), rope = kl_mla_decode_fp8_rope_offset(kv_lora);
    std::memset(t, 0, tb);
    for (uint32_t c = 0; c < kv_lora; c++) t[c] = fp8_code(gen());
    for (uint32_t k = 0; k < kv_lora / 128u; k++) {
        const float s = sc(gen);
        std::memcpy(t + kl_mla_decode_fp8_scales_offset(kv_lora) + 4u * k, &s, 4);
    }
    for (uint32_t d = 0; d < 64u; d++) {
        const uint16_t h = to_bf16(u(gen));
        std::memcpy(t + rope + 2u * d, &h, 2);
    }
}

// Whole MLA fp8 tokens filling at most `bytes` bytes (at least one token).
inline std::vector<unsigned char> mla_fp8_pattern(size_t bytes, uint32_t kv_lora, uint32_t seed) {
    const uint32_t tb = kl_mla_decode_fp8_token_bytes(kv_lora);
    const size_t tokens = std::max<size_t>(1, bytes / tb);
    std::vector<unsigned char> host(tokens * tb);
    std::mt19937 gen(seed);
    for (size_t i = 0; i < tokens; i++) mla_fp8_token(host.data() + i * tb, kv_lora, gen);
    return host;
}

// Input sets of `bytes` each that a rotation needs so no run finds its
// inputs in L2: at least min_sets and at least min_total bytes in all.
inline size_t rotation(size_t bytes, size_t min_sets, size_t min_total = 600ull * 1000 * 1000) {
    size_t n = std::max<size_t>(min_sets, 1);
    while (bytes > 0 && n * bytes < min_total) n++;
    return n;
}

// Block tables for `lengths` (positions per sequence) in pages of `page`
// positions: each sequence's ceil(len / page) pages, max_blocks entries a
// sequence (the longest's count; -1 past a sequence's own), the pages of
// the whole cache (*num_blocks, at least 1) shuffled with `gen` or, with
// in_order, sequence s's pages after s - 1's.
inline std::vector<int32_t> block_tables(const std::vector<int32_t> &lengths, uint32_t page, bool in_order,
                                         std::mt19937 &gen, uint32_t *max_blocks, uint32_t *num_blocks) {
    uint32_t total = 0, longest = 1;
    std::vector<uint32_t> npg(lengths.size());
    for (size_t b = 0; b < lengths.size(); b++) {
        const uint32_t l = static_cast<uint32_t>(std::max<int32_t>(lengths[b], 0));
        npg[b] = (l + page - 1u) / page;
        total += npg[b];
        longest = std::max(longest, npg[b]);
    }
    *max_blocks = longest;
    *num_blocks = std::max(total, 1u);
    std::vector<int32_t> perm(*num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    if (!in_order) std::shuffle(perm.begin(), perm.end(), gen);
    std::vector<int32_t> t(lengths.size() * size_t{longest}, -1);
    uint32_t next = 0;
    for (size_t b = 0; b < lengths.size(); b++)
        for (uint32_t j = 0; j < npg[b]; j++) t[b * longest + j] = perm[next++];
    return t;
}

}  // namespace kl_inputs

#endif  // KLAUNCH_BENCH_COMMON_INPUTS_H
