// ops.h: the tuner's operations (tune.h's Op), one class per spec
// operation of the three families: what is particular to each is only its
// grid, the buffers and inputs of a shape and how each alternative is
// launched; choosing, the applicability test and the rule's defaults go
// through the generated kl_<op>_choose (OpOf below).
//
// The same code runs on the GPU (tune_gpu.cc: buffers in device memory,
// the fatbins' kernels) and on the CPU emulator (tune_emu_test.cc: the
// emulator's registered host buffers, its images): a Mem and a Modules say
// where.
//
// Shapes (their inputs as the benchmarks lay them out: bench/common/inputs.h):
//   paged_decode_gqa_{bf16,fp8}  head_dim 128, pages of 16, every sequence
//     max_seq_len long, block tables shuffled; heads 32 q / 8 KV (variant
//     gqa4_d128) and 64 / 8 (gqa8_d128); bf16 in [-1, 1), fp8 codes of
//     magnitude 1/8 to 2 (k_scale = v_scale = 0.05). A split alternative
//     is its partial launch and the combine (combine_pdl where it loads).
//   mla_decode_attn_{bf16,fp8}   a layer's attention + combine (the
//     schedule runs once per step, before the trials of a num_parts); both
//     variants (D 576 and 320), pages of 64, s_q 1.
//   mla_absorbed_attention       causal, both variants.
//   grouped_gemm                 g 128 (q_nope @ w_uk: k_g 128, n_g 512;
//     o_lat @ w_uv^T: k_g 512, n_g 128), contiguous strides.
#ifndef KLAUNCH_TOOLS_TUNE_OPS_H
#define KLAUNCH_TOOLS_TUNE_OPS_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/common/inputs.h"
#include "klaunch/mla_decode.h"
#include "klaunch/mla_decode_layout.h"
#include "klaunch/mla_prefill.h"
#include "klaunch/mla_prefill_grid.h"
#include "klaunch/paged_decode.h"
#include "klaunch/paged_decode_split.h"
#include "tools/tune/tune.h"

namespace tune {

// The modules kernels come from: a family's variant, NULL where not loaded.
class Modules {
  public:
    virtual ~Modules() {}
    virtual const kl_module *get(const char *family, const char *variant) = 0;
};

// Which grid: the GPU's default, its --quick subset, or the emulator's tiny one.
enum class Grid { kFull, kQuick, kTiny };

// A handle of `mod` via get(), or NULL (the launcher does not load there:
// another architecture, KL_ERROR_UNSUPPORTED; any other refusal ends the run).
template <class Get>
const kl_kernel *load(kl_kernel *k, const kl_module *mod, Get get, const char *what) {
    if (mod == nullptr) return nullptr;
    const kl_status st = get(k, mod);
    if (st == KL_ERROR_UNSUPPORTED) return nullptr;
    ok(st, what);
    return k;
}

// The generic part of an operation: its descriptor and chooser. N: its
// alternatives (the kernels struct holds N handles).
template <class ShapeT, class KernelsT, class ChoiceT, size_t N>
class OpOf : public Op {
  public:
    typedef ChoiceT (*ChooseFn)(const ShapeT *, const kl_device *, const kl_choice_table *, kl_choice_policy,
                                const KernelsT *);
    OpOf(const kl_choice_op &d, ChooseFn f) : desc_(d), choose_(f) {
        static_assert(sizeof(KernelsT) == N * sizeof(const kl_kernel *), "a kernels struct is N handles");
        if (d.num_alternatives != N) die(std::string(d.name) + ": the descriptor has another number of alternatives");
        std::memset(&shape_, 0, sizeof shape_);
        std::memset(&kernels_, 0, sizeof kernels_);
    }
    const kl_choice_op &desc() const override { return desc_; }
    Pick choose(const kl_choice_table *table, kl_choice_policy policy, const kl_device &dev, uint32_t mask) override {
        const kl_kernel *h[N];
        std::memcpy(h, &kernels_, sizeof h);
        for (size_t i = 0; i < N; i++)
            if (!(mask & (1u << i))) h[i] = nullptr;
        KernelsT k;
        std::memcpy(&k, h, sizeof k);
        const ChoiceT c = choose_(&shape_, &dev, table, policy, &k);
        Pick p;
        p.alternative = c.alternative;
        p.source = c.source;
        p.tunables.assign(desc_.num_tunables, 0u);
        tunables_of(c, p.tunables.data());
        return p;
    }

  protected:
    virtual void tunables_of(const ChoiceT &c, uint32_t *t) const = 0;
    const kl_choice_op &desc_;
    ChooseFn choose_;
    ShapeT shape_;
    KernelsT kernels_;
};

inline std::string num(uint32_t x) { return std::to_string(x); }

// ==== paged_decode_gqa_{bf16,fp8} ====================================================

template <bool FP8>
struct PagedTypes;
template <>
struct PagedTypes<false> {
    typedef kl_paged_decode_gqa_bf16_shape Shape;
    typedef kl_paged_decode_gqa_bf16_kernels Kernels;
    typedef kl_paged_decode_gqa_bf16_choice Choice;
    typedef kl_bf16 Elem;
};
template <>
struct PagedTypes<true> {
    typedef kl_paged_decode_gqa_fp8_shape Shape;
    typedef kl_paged_decode_gqa_fp8_kernels Kernels;
    typedef kl_paged_decode_gqa_fp8_choice Choice;
    typedef kl_fp8_e4m3 Elem;
};

template <bool FP8>
class PagedDecodeOp
    : public OpOf<typename PagedTypes<FP8>::Shape, typename PagedTypes<FP8>::Kernels, typename PagedTypes<FP8>::Choice, 9> {
    typedef PagedTypes<FP8> T;
    typedef OpOf<typename T::Shape, typename T::Kernels, typename T::Choice, 9> Base;
    typedef typename T::Elem Elem;
    static constexpr uint32_t kHd = 128, kBs = 16;

    struct PShape {
        uint32_t seqs, len, nq, nkv;
        int variant;  // 0: gqa4_d128, 1: gqa8_d128
    };
    // The launchers of one variant.
    struct VarKernels {
        kl_kernel seed, split, persist, bulk_seed, bulk_persist, tma_seed, tma_persist, scalar_seed, scalar_split,
            combine, combine_pdl;
        typename T::Kernels handles;
        const kl_kernel *combine_h = nullptr, *combine_pdl_h = nullptr;
    };

    static const kl_choice_op &descriptor() {
        if constexpr (FP8) return kl_paged_decode_gqa_fp8_op;
        else return kl_paged_decode_gqa_bf16_op;
    }
    static typename Base::ChooseFn chooser() {
        if constexpr (FP8) return &kl_paged_decode_gqa_fp8_choose;
        else return &kl_paged_decode_gqa_bf16_choose;
    }

  public:
    PagedDecodeOp(Modules &mods, Grid grid, const kl_device &dev)
        : Base(descriptor(), chooser()), dev_(dev) {
        const char *variants[2] = {"gqa4_d128", "gqa8_d128"};
        for (int v = 0; v < 2; v++) load_variant(mods.get("paged_decode", variants[v]), &vk_[v]);
        if (grid == Grid::kTiny) {
            // On the emulator: 4 query heads on 1 KV head (gqa4_d128), 1 and 2
            // sequences of 48 and 20 positions (a ragged last page).
            shapes_ = {{1, 48, 4, 1, 0}, {2, 20, 4, 1, 0}};
            return;
        }
        // A whole grid (a table's cells are every combination of its tabled
        // key values: choose.h, BUCKETS) around the decode benchmark's
        // shapes (bench/decode: 32 query / 8 KV heads, 1 x 2048 .. 32768 and
        // 32 x 256 .. 4096): batch 1 .. 64 by powers of 2 x length 256 ..
        // 32768, and 64 query / 8 KV heads (gqa8_d128) at batch 1 and 32 x
        // 1024 and 4096. 34 GB of K+V a pass over the grid; some 500
        // launches a shape: about a minute on an H100.
        auto add = [&](uint32_t nq, uint32_t seqs, std::initializer_list<uint32_t> lens) {
            for (uint32_t l : lens) shapes_.push_back({seqs, l, nq, 8, nq == 64 ? 1 : 0});
        };
        if (grid == Grid::kQuick) {
            add(32, 1, {2048, 32768});
            add(32, 32, {4096});
            return;
        }
        for (uint32_t b : {1u, 2u, 4u, 8u, 16u, 32u, 64u}) add(32, b, {256, 512, 1024, 2048, 4096, 8192, 16384, 32768});
        for (uint32_t b : {1u, 32u}) add(64, b, {1024, 4096});
    }

    size_t num_shapes() const override { return shapes_.size(); }
    std::string shape_name(size_t i) const override {
        const PShape &s = shapes_[i];
        return num(s.seqs) + "x" + num(s.len) + "_h" + num(s.nq) + "/" + num(s.nkv) + (FP8 ? "_fp8" : "_bf16");
    }
    std::vector<uint32_t> keys(size_t i) const override {
        const PShape &s = shapes_[i];
        return {s.seqs, s.len, s.nq, s.nkv, kBs};
    }
    std::string launcher(uint32_t a) const override {
        static const char *const n[9] = {"attn_%s_gqa_mma", "split_%s_gqa_mma", "persist_%s_gqa_mma",
                                         "attn_%s_gqa_bulk", "persist_%s_gqa_bulk", "attn_%s_gqa_tma",
                                         "persist_%s_gqa_tma", "attn_%s_gqa", "split_%s_gqa"};
        char b[64];
        std::snprintf(b, sizeof b, n[a], FP8 ? "fp8" : "bf16");
        return std::string("kl_paged_decode_") + b;
    }

    void set_shape(size_t i) override {
        cur_ = shapes_[i];
        typename T::Shape &sh = this->shape_;
        std::memset(&sh, 0, sizeof sh);
        sh.num_seqs = cur_.seqs;
        sh.num_q_heads = cur_.nq;
        sh.num_kv_heads = cur_.nkv;
        sh.head_dim = kHd;
        sh.block_size = kBs;
        sh.sliding_window = 0;
        sh.max_seq_len = cur_.len;
        sh.aligned = true;        // every buffer 256-byte aligned, strides of 16-byte multiples
        sh.persistent_ok = true;  // the workspace and zeroed counters below
        if constexpr (FP8) sh.cache_stride = block_elems();
        this->kernels_ = vk_[cur_.variant].handles;
    }

    void prepare(Mem &mem) override {
        const PShape &s = cur_;
        std::mt19937 gen(11);
        const std::vector<int32_t> lens(s.seqs, static_cast<int32_t>(s.len));
        tables_host_ = kl_inputs::block_tables(lens, kBs, false, gen, &mbps_, &nblocks_);
        const size_t cache_bytes = size_t{nblocks_} * block_elems() * sizeof(Elem);
        sets_.assign(mem.sets(2 * cache_bytes), Set());
        for (size_t i = 0; i < sets_.size(); i++) {
            Set &c = sets_[i];
            c.k = static_cast<Elem *>(mem.alloc(cache_bytes, "k_cache"));
            c.v = static_cast<Elem *>(mem.alloc(cache_bytes, "v_cache"));
            mem.fill(c.k, cache_bytes, pattern(), 2 * i * 4099u * 2u, 2);
            mem.fill(c.v, cache_bytes, pattern(), (2 * i + 1) * 4099u * 2u, 2);
            if (i > 0) std::shuffle(tables_host_.begin(), tables_host_.end(), gen);
            c.tables = alloc_n<int32_t>(mem, tables_host_.size(), "block_tables");
            mem.upload(c.tables, tables_host_.data(), tables_host_.size() * 4);
            encode_maps(c);
        }
        q_ = alloc_n<kl_bf16>(mem, size_t{s.seqs} * s.nq * kHd, "q");
        mem.fill(q_, size_t{s.seqs} * s.nq * kHd * 2, kl_bf16_pattern(), 99 * 4099u, 2);
        lens_ = alloc_n<int32_t>(mem, s.seqs, "seq_lens");
        mem.upload(lens_, lens.data(), lens.size() * 4);
        out_ = alloc_n<kl_bf16>(mem, size_t{s.seqs} * s.nq * kHd, "output");
        ws_bytes_ = kl_paged_decode_split_workspace_bytes(s.seqs, s.nq, kHd, KL_PAGED_DECODE_MAX_SPLITS);
        ws_ = static_cast<float *>(mem.alloc(ws_bytes_, "workspace"));
        const uint32_t max_ctas = std::max(4 * dev_.sm_count, 1024u);
        pws_bytes_ = kl_paged_decode_persist_workspace_bytes(s.nq / s.nkv, kHd, max_ctas);
        pws_ = static_cast<float *>(mem.alloc(pws_bytes_, "persist workspace"));
        pcnt_words_ = kl_paged_decode_persist_counter_words(s.seqs, s.nkv);
        pcnt_ = alloc_n<uint32_t>(mem, pcnt_words_, "counters");
        mem.zero(pcnt_, pcnt_words_ * 4);
        mem.sync();
    }

    void launch(uint32_t a, const std::vector<uint32_t> &tun, int run, kl_stream st) override {
        const Set &c = sets_[static_cast<size_t>(run) % sets_.size()];
        const VarKernels &k = vk_[cur_.variant];
        const PShape &s = cur_;
        const float inv = 0.08838834764831845f, ks = 0.05f, vs = 0.05f;
        const uint32_t qs = s.nq * kHd, w = 0, splits = tun[0], ctas = tun[1];
        const uint64_t cs = block_elems();
        (void)ks, (void)vs, (void)cs;
        kl_status r = KL_ERROR_INVALID_ARGUMENT;
        bool combine = false;
        switch (a) {
        case 0:
            if constexpr (FP8)
                r = kl_paged_decode_attn_fp8_gqa_mma(&k.seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs, s.nq,
                                                     s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, st);
            else
                r = kl_paged_decode_attn_bf16_gqa_mma(&k.seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs, s.nq,
                                                      s.nkv, kHd, kBs, inv, qs, w, st);
            break;
        case 1:
            if constexpr (FP8)
                r = kl_paged_decode_split_fp8_gqa_mma(&k.split, q_, c.k, c.v, ws_, c.tables, lens_, mbps_, s.seqs, s.nq,
                                                      s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, splits, ws_bytes_, st);
            else
                r = kl_paged_decode_split_bf16_gqa_mma(&k.split, q_, c.k, c.v, ws_, c.tables, lens_, mbps_, s.seqs,
                                                       s.nq, s.nkv, kHd, kBs, inv, qs, w, splits, ws_bytes_, st);
            combine = true;
            break;
        case 2:
            if constexpr (FP8)
                r = kl_paged_decode_persist_fp8_gqa_mma(&k.persist, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs,
                                                        s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, pws_, pcnt_, ctas,
                                                        pws_bytes_, pcnt_words_, st);
            else
                r = kl_paged_decode_persist_bf16_gqa_mma(&k.persist, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs,
                                                         s.nq, s.nkv, kHd, kBs, inv, qs, w, pws_, pcnt_, ctas, pws_bytes_,
                                                         pcnt_words_, st);
            break;
        case 3:
            if constexpr (FP8)
                r = kl_paged_decode_attn_fp8_gqa_bulk(&k.bulk_seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs,
                                                      s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, st);
            else
                r = kl_paged_decode_attn_bf16_gqa_bulk(&k.bulk_seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs,
                                                       s.nq, s.nkv, kHd, kBs, inv, qs, w, st);
            break;
        case 4:
            if constexpr (FP8)
                r = kl_paged_decode_persist_fp8_gqa_bulk(&k.bulk_persist, q_, c.k, c.v, out_, c.tables, lens_, mbps_,
                                                         s.seqs, s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, pws_,
                                                         pcnt_, ctas, pws_bytes_, pcnt_words_, st);
            else
                r = kl_paged_decode_persist_bf16_gqa_bulk(&k.bulk_persist, q_, c.k, c.v, out_, c.tables, lens_, mbps_,
                                                          s.seqs, s.nq, s.nkv, kHd, kBs, inv, qs, w, pws_, pcnt_, ctas,
                                                          pws_bytes_, pcnt_words_, st);
            break;
        case 5:
            if constexpr (FP8)
                r = kl_paged_decode_attn_fp8_gqa_tma(&k.tma_seed, q_, &c.km_seed, &c.vm_seed, out_, c.tables, lens_,
                                                     mbps_, s.seqs, s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, w, st);
            else
                r = kl_paged_decode_attn_bf16_gqa_tma(&k.tma_seed, q_, &c.km_seed, &c.vm_seed, out_, c.tables, lens_,
                                                      mbps_, s.seqs, s.nq, s.nkv, kHd, kBs, inv, qs, w, st);
            break;
        case 6:
            if constexpr (FP8)
                r = kl_paged_decode_persist_fp8_gqa_tma(&k.tma_persist, q_, &c.km_persist, &c.vm_persist, out_, c.tables,
                                                        lens_, mbps_, s.seqs, s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, w,
                                                        pws_, pcnt_, ctas, pws_bytes_, pcnt_words_, st);
            else
                r = kl_paged_decode_persist_bf16_gqa_tma(&k.tma_persist, q_, &c.km_persist, &c.vm_persist, out_,
                                                         c.tables, lens_, mbps_, s.seqs, s.nq, s.nkv, kHd, kBs, inv, qs, w,
                                                         pws_, pcnt_, ctas, pws_bytes_, pcnt_words_, st);
            break;
        case 7:
            if constexpr (FP8)
                r = kl_paged_decode_attn_fp8_gqa(&k.scalar_seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs, s.nq,
                                                 s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, st);
            else
                r = kl_paged_decode_attn_bf16_gqa(&k.scalar_seed, q_, c.k, c.v, out_, c.tables, lens_, mbps_, s.seqs,
                                                  s.nq, s.nkv, kHd, kBs, inv, qs, w, st);
            break;
        case 8:
            if constexpr (FP8)
                r = kl_paged_decode_split_fp8_gqa(&k.scalar_split, q_, c.k, c.v, ws_, c.tables, lens_, mbps_, s.seqs,
                                                  s.nq, s.nkv, kHd, kBs, inv, ks, vs, qs, cs, w, splits, ws_bytes_, st);
            else
                r = kl_paged_decode_split_bf16_gqa(&k.scalar_split, q_, c.k, c.v, ws_, c.tables, lens_, mbps_, s.seqs,
                                                   s.nq, s.nkv, kHd, kBs, inv, qs, w, splits, ws_bytes_, st);
            combine = true;
            break;
        default: break;
        }
        ok(r, launcher(a));
        if (combine) {
            if (k.combine_pdl_h != nullptr)
                ok(kl_paged_decode_split_combine_pdl(k.combine_pdl_h, ws_, out_, s.seqs, s.nq, kHd, splits, ws_bytes_, st),
                   "kl_paged_decode_split_combine_pdl");
            else
                ok(kl_paged_decode_split_combine(k.combine_h, ws_, out_, s.seqs, s.nq, kHd, splits, ws_bytes_, st),
                   "kl_paged_decode_split_combine");
        }
    }

  protected:
    void tunables_of(const typename T::Choice &c, uint32_t *t) const override {
        t[0] = c.num_splits;
        t[1] = c.num_ctas;
    }

  private:
    struct Set {
        Elem *k = nullptr, *v = nullptr;
        int32_t *tables = nullptr;
        kl_tensor_map km_seed, vm_seed, km_persist, vm_persist;
    };

    uint64_t block_elems() const { return uint64_t{kBs} * cur_.nkv * kHd; }

    static const std::vector<unsigned char> &kl_bf16_pattern() {
        static const std::vector<unsigned char> p = kl_inputs::bf16_pattern(32u << 20, 3);
        return p;
    }
    static const std::vector<unsigned char> &pattern() {
        if (FP8) {
            static const std::vector<unsigned char> p = kl_inputs::fp8_pattern(32u << 20, 7);
            return p;
        }
        return kl_bf16_pattern();
    }

    void encode_maps(Set &c) {
        const VarKernels &k = vk_[cur_.variant];
        const uint64_t s2 = uint64_t{cur_.nkv} * kHd, s3 = block_elems();
        auto enc = [&](const kl_kernel *h, bool persist, kl_tensor_map *km, kl_tensor_map *vm) {
            if (h == nullptr) return;
            if constexpr (FP8) {
                if (persist) {
                    ok(kl_paged_decode_persist_fp8_gqa_tma_k_map_encode(h, km, c.k, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "k_map");
                    ok(kl_paged_decode_persist_fp8_gqa_tma_v_map_encode(h, vm, c.v, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "v_map");
                } else {
                    ok(kl_paged_decode_attn_fp8_gqa_tma_k_map_encode(h, km, c.k, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "k_map");
                    ok(kl_paged_decode_attn_fp8_gqa_tma_v_map_encode(h, vm, c.v, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "v_map");
                }
            } else {
                if (persist) {
                    ok(kl_paged_decode_persist_bf16_gqa_tma_k_map_encode(h, km, c.k, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "k_map");
                    ok(kl_paged_decode_persist_bf16_gqa_tma_v_map_encode(h, vm, c.v, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "v_map");
                } else {
                    ok(kl_paged_decode_attn_bf16_gqa_tma_k_map_encode(h, km, c.k, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "k_map");
                    ok(kl_paged_decode_attn_bf16_gqa_tma_v_map_encode(h, vm, c.v, kHd, cur_.nkv, kBs, nblocks_, kHd, s2, s3), "v_map");
                }
            }
        };
        enc(k.handles.tma_seed, false, &c.km_seed, &c.vm_seed);
        enc(k.handles.tma_persist, true, &c.km_persist, &c.vm_persist);
    }

    void load_variant(const kl_module *m, VarKernels *v) {
        typename T::Kernels &h = v->handles;
        std::memset(&h, 0, sizeof h);
        if constexpr (FP8) {
            h.mma_seed = load(&v->seed, m, kl_paged_decode_attn_fp8_gqa_mma_get, "attn_fp8_gqa_mma");
            h.mma_split = load(&v->split, m, kl_paged_decode_split_fp8_gqa_mma_get, "split_fp8_gqa_mma");
            h.mma_persist = load(&v->persist, m, kl_paged_decode_persist_fp8_gqa_mma_get, "persist_fp8_gqa_mma");
            h.bulk_seed = load(&v->bulk_seed, m, kl_paged_decode_attn_fp8_gqa_bulk_get, "attn_fp8_gqa_bulk");
            h.bulk_persist = load(&v->bulk_persist, m, kl_paged_decode_persist_fp8_gqa_bulk_get, "persist_fp8_gqa_bulk");
            h.tma_seed = load(&v->tma_seed, m, kl_paged_decode_attn_fp8_gqa_tma_get, "attn_fp8_gqa_tma");
            h.tma_persist = load(&v->tma_persist, m, kl_paged_decode_persist_fp8_gqa_tma_get, "persist_fp8_gqa_tma");
            h.scalar_seed = load(&v->scalar_seed, m, kl_paged_decode_attn_fp8_gqa_get, "attn_fp8_gqa");
            h.scalar_split = load(&v->scalar_split, m, kl_paged_decode_split_fp8_gqa_get, "split_fp8_gqa");
        } else {
            h.mma_seed = load(&v->seed, m, kl_paged_decode_attn_bf16_gqa_mma_get, "attn_bf16_gqa_mma");
            h.mma_split = load(&v->split, m, kl_paged_decode_split_bf16_gqa_mma_get, "split_bf16_gqa_mma");
            h.mma_persist = load(&v->persist, m, kl_paged_decode_persist_bf16_gqa_mma_get, "persist_bf16_gqa_mma");
            h.bulk_seed = load(&v->bulk_seed, m, kl_paged_decode_attn_bf16_gqa_bulk_get, "attn_bf16_gqa_bulk");
            h.bulk_persist = load(&v->bulk_persist, m, kl_paged_decode_persist_bf16_gqa_bulk_get, "persist_bf16_gqa_bulk");
            h.tma_seed = load(&v->tma_seed, m, kl_paged_decode_attn_bf16_gqa_tma_get, "attn_bf16_gqa_tma");
            h.tma_persist = load(&v->tma_persist, m, kl_paged_decode_persist_bf16_gqa_tma_get, "persist_bf16_gqa_tma");
            h.scalar_seed = load(&v->scalar_seed, m, kl_paged_decode_attn_bf16_gqa_get, "attn_bf16_gqa");
            h.scalar_split = load(&v->scalar_split, m, kl_paged_decode_split_bf16_gqa_get, "split_bf16_gqa");
        }
        v->combine_h = load(&v->combine, m, kl_paged_decode_split_combine_get, "split_combine");
        v->combine_pdl_h = load(&v->combine_pdl, m, kl_paged_decode_split_combine_pdl_get, "split_combine_pdl");
        if (v->combine_h == nullptr && v->combine_pdl_h == nullptr) h.mma_split = h.scalar_split = nullptr;
    }

    kl_device dev_;
    std::vector<PShape> shapes_;
    PShape cur_{};
    VarKernels vk_[2];
    std::vector<int32_t> tables_host_;
    uint32_t mbps_ = 0, nblocks_ = 0;
    std::vector<Set> sets_;
    kl_bf16 *q_ = nullptr, *out_ = nullptr;
    int32_t *lens_ = nullptr;
    float *ws_ = nullptr, *pws_ = nullptr;
    uint32_t *pcnt_ = nullptr;
    uint64_t ws_bytes_ = 0, pws_bytes_ = 0, pcnt_words_ = 0;
};

// ==== mla_decode_attn_{bf16,fp8} =====================================================

template <bool FP8>
struct MlaDecodeTypes;
template <>
struct MlaDecodeTypes<false> {
    typedef kl_mla_decode_attn_bf16_shape Shape;
    typedef kl_mla_decode_attn_bf16_kernels Kernels;
    typedef kl_mla_decode_attn_bf16_choice Choice;
};
template <>
struct MlaDecodeTypes<true> {
    typedef kl_mla_decode_attn_fp8_shape Shape;
    typedef kl_mla_decode_attn_fp8_kernels Kernels;
    typedef kl_mla_decode_attn_fp8_choice Choice;
};

template <bool FP8>
class MlaDecodeOp : public OpOf<typename MlaDecodeTypes<FP8>::Shape, typename MlaDecodeTypes<FP8>::Kernels,
                                typename MlaDecodeTypes<FP8>::Choice, 2> {
    typedef MlaDecodeTypes<FP8> T;
    typedef OpOf<typename T::Shape, typename T::Kernels, typename T::Choice, 2> Base;
    static constexpr uint32_t kPage = 64;

    struct MShape {
        uint32_t batch, len, s_q, h_q;
        int variant;  // 0: deepseek_v4_flash (D 576), 1: mistral_small_4 (D 320)
    };
    struct VarKernels {
        uint32_t D = 0;
        kl_kernel mma, tma, sched, combine, combine_pdl;
        typename T::Kernels handles;
        const kl_kernel *sched_h = nullptr, *combine_h = nullptr, *combine_pdl_h = nullptr;
    };

    static const kl_choice_op &descriptor() {
        if constexpr (FP8) return kl_mla_decode_attn_fp8_op;
        else return kl_mla_decode_attn_bf16_op;
    }
    static typename Base::ChooseFn chooser() {
        if constexpr (FP8) return &kl_mla_decode_attn_fp8_choose;
        else return &kl_mla_decode_attn_bf16_choose;
    }

  public:
    MlaDecodeOp(Modules &mods, Grid grid)
        : Base(descriptor(), chooser()) {
        const char *variants[2] = {"deepseek_v4_flash", "mistral_small_4"};
        for (int v = 0; v < 2; v++) load_variant(mods.get("mla_decode", variants[v]), &vk_[v], v ? 320u : 576u);
        if (grid == Grid::kTiny) {
            // On the emulator: D 320, 16 heads, 1 and 2 sequences of 100 and 40 positions.
            shapes_ = {{1, 100, 1, 16, 1}, {2, 40, 1, 16, 1}};
            return;
        }
        // Whole grids around bench/mla_decode's shapes: h_q 16 at batch 1,
        // 8, 32, 128 x 1024, 4096, 32768 (long: 1 x 32768; mem: 128 x 4096);
        // h_q 128 at batch 1, 8, 32 x 1024, 4096, 16384 (short: 1 x 1024);
        // both variants. --quick: D 576, h_q 16, 1 x 32768 and 32 x 4096.
        for (int v = 0; v < (grid == Grid::kQuick ? 1 : 2); v++) {
            if (grid == Grid::kQuick) {
                shapes_.push_back({1, 32768, 1, 16, v});
                shapes_.push_back({32, 4096, 1, 16, v});
                continue;
            }
            for (uint32_t b : {1u, 8u, 32u, 128u})
                for (uint32_t l : {1024u, 4096u, 32768u}) shapes_.push_back({b, l, 1, 16, v});
            for (uint32_t b : {1u, 8u, 32u})
                for (uint32_t l : {1024u, 4096u, 16384u}) shapes_.push_back({b, l, 1, 128, v});
        }
    }

    size_t num_shapes() const override { return shapes_.size(); }
    std::string shape_name(size_t i) const override {
        const MShape &s = shapes_[i];
        return num(s.batch) + "x" + num(s.len) + "_h" + num(s.h_q) + "_sq" + num(s.s_q) + "_D" + num(vk_[s.variant].D) +
               (FP8 ? "_fp8" : "_bf16");
    }
    std::vector<uint32_t> keys(size_t i) const override {
        const MShape &s = shapes_[i];
        return {s.batch, s.len, s.s_q, s.h_q, vk_[s.variant].D, kPage};
    }
    std::string launcher(uint32_t a) const override {
        return std::string("kl_mla_decode_attn_") + (FP8 ? "fp8" : "bf16") + (a ? "_tma" : "_mma") + " + combine";
    }

    void set_shape(size_t i) override {
        cur_ = shapes_[i];
        typename T::Shape &sh = this->shape_;
        std::memset(&sh, 0, sizeof sh);
        sh.batch = cur_.batch;
        sh.s_q = cur_.s_q;
        sh.h_q = cur_.h_q;
        sh.head_dim = vk_[cur_.variant].D;
        sh.page_size = kPage;
        sh.seq_len = cur_.len;
        this->kernels_ = vk_[cur_.variant].handles;
    }

    void prepare(Mem &mem) override {
        const MShape &s = cur_;
        const uint32_t D = vk_[s.variant].D;
        tb_ = FP8 ? kl_mla_decode_fp8_token_bytes(D - 64u) : 2u * D;
        std::mt19937 gen(12345);
        lens_host_.assign(s.batch, static_cast<int32_t>(s.len));
        std::vector<int32_t> t = kl_inputs::block_tables(lens_host_, kPage, false, gen, &mbps_, &nblocks_);
        const size_t q_bytes = size_t{s.batch} * s.s_q * s.h_q * D * 2, cache_bytes = size_t{nblocks_} * kPage * tb_;
        sets_.assign(mem.sets(q_bytes + cache_bytes), Set());
        for (size_t i = 0; i < sets_.size(); i++) {
            Set &c = sets_[i];
            c.q = static_cast<kl_bf16 *>(mem.alloc(q_bytes, "q"));
            mem.fill(c.q, q_bytes, bf16(), i * 8191u, 2);
            c.cache = mem.alloc(cache_bytes, "kv_cache");
            if (FP8)
                mem.fill(c.cache, cache_bytes, fp8_tokens(D - 64u), i * 4099u * tb_, tb_);
            else
                mem.fill(c.cache, cache_bytes, bf16(), i * 4099u * 2u + 1000, 2);
            if (i > 0) std::shuffle(t.begin(), t.end(), gen);
            c.table = alloc_n<int32_t>(mem, t.size(), "block_table");
            mem.upload(c.table, t.data(), t.size() * 4);
            const VarKernels &k = vk_[s.variant];
            if (k.handles.tma != nullptr) {
                const uint64_t R = uint64_t{s.s_q} * s.h_q;
                if (FP8) {
                    ok(kl_mla_decode_attn_fp8_tma_q_map_encode(k.handles.tma, &c.qm, c.q, D, R, s.batch, D, R * D), "fp8_tma q_map");
                } else {
                    ok(kl_mla_decode_attn_bf16_tma_q_map_encode(k.handles.tma, &c.qm, c.q, D, R, s.batch, D, R * D), "bf16_tma q_map");
                    ok(kl_mla_decode_attn_bf16_tma_cache_map_encode(k.handles.tma, &c.cm, static_cast<const kl_bf16 *>(c.cache), D,
                                                                    kPage, nblocks_, D, uint64_t{kPage} * D),
                       "bf16_tma cache_map");
                }
            }
        }
        lens_ = alloc_n<int32_t>(mem, s.batch, "lengths");
        mem.upload(lens_, lens_host_.data(), lens_host_.size() * 4);
        out_ = alloc_n<kl_bf16>(mem, size_t{s.batch} * s.s_q * s.h_q * (D - 64u), "out");
        lse_ = alloc_n<float>(mem, size_t{s.batch} * s.s_q * s.h_q, "lse");
        sched_ = nullptr;
        ws_ = nullptr;
        mem.sync();
    }

    // The schedule of this num_parts, once, and a workspace its size.
    void before(Mem &mem, uint32_t, const std::vector<uint32_t> &tun, kl_stream st) override {
        const MShape &s = cur_;
        const VarKernels &k = vk_[s.variant];
        parts_ = tun[0];
        if (sched_ != nullptr) mem.free(sched_);
        if (ws_ != nullptr) mem.free(ws_);
        words_ = kl_mla_decode_schedule_words(s.batch, parts_);
        ws_bytes_ = kl_mla_decode_workspace_bytes(parts_, s.s_q, s.h_q, k.D);
        sched_ = alloc_n<int32_t>(mem, words_, "sched");
        ws_ = static_cast<float *>(mem.alloc(ws_bytes_, "workspace"));
        ok(kl_mla_decode_schedule(k.sched_h, lens_, sched_, s.batch, parts_, words_, st), "kl_mla_decode_schedule");
        mem.sync();
    }

    void launch(uint32_t a, const std::vector<uint32_t> &, int run, kl_stream st) override {
        const Set &c = sets_[static_cast<size_t>(run) % sets_.size()];
        const MShape &s = cur_;
        const VarKernels &k = vk_[s.variant];
        const uint32_t D = k.D;
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        kl_status r;
        if constexpr (FP8) {
            if (a == 0)
                r = kl_mla_decode_attn_fp8_mma(k.handles.mma, c.q, static_cast<const uint8_t *>(c.cache), c.table, lens_,
                                               sched_, out_, lse_, ws_, s.batch, s.s_q, s.h_q, D, kPage, mbps_, nblocks_,
                                               scale, parts_, words_, ws_bytes_, st);
            else
                r = kl_mla_decode_attn_fp8_tma(k.handles.tma, &c.qm, static_cast<const uint8_t *>(c.cache), c.table, lens_,
                                               sched_, out_, lse_, ws_, s.batch, s.s_q, s.h_q, D, kPage, mbps_, nblocks_,
                                               scale, parts_, words_, ws_bytes_, st);
        } else {
            if (a == 0)
                r = kl_mla_decode_attn_bf16_mma(k.handles.mma, c.q, static_cast<const kl_bf16 *>(c.cache), c.table, lens_,
                                                sched_, out_, lse_, ws_, s.batch, s.s_q, s.h_q, D, kPage, mbps_, nblocks_,
                                                scale, parts_, words_, ws_bytes_, st);
            else
                r = kl_mla_decode_attn_bf16_tma(k.handles.tma, &c.qm, &c.cm, c.table, lens_, sched_, out_, lse_, ws_,
                                                s.batch, s.s_q, s.h_q, D, kPage, mbps_, nblocks_, scale, parts_, words_,
                                                ws_bytes_, st);
        }
        ok(r, launcher(a));
        // The _tma launchers' combine is the PDL one (as bench/mla_decode times a step).
        if (a == 1 && k.combine_pdl_h != nullptr)
            ok(kl_mla_decode_combine_pdl(k.combine_pdl_h, sched_, ws_, out_, lse_, s.batch, s.s_q, s.h_q, D, parts_,
                                         words_, ws_bytes_, st),
               "kl_mla_decode_combine_pdl");
        else
            ok(kl_mla_decode_combine(k.combine_h, sched_, ws_, out_, lse_, s.batch, s.s_q, s.h_q, D, parts_, words_,
                                     ws_bytes_, st),
               "kl_mla_decode_combine");
    }

  protected:
    void tunables_of(const typename T::Choice &c, uint32_t *t) const override { t[0] = c.num_parts; }

  private:
    struct Set {
        kl_bf16 *q = nullptr;
        void *cache = nullptr;
        int32_t *table = nullptr;
        kl_tensor_map qm, cm;
    };
    static const std::vector<unsigned char> &bf16() {
        static const std::vector<unsigned char> p = kl_inputs::bf16_pattern(32u << 20, 5);
        return p;
    }
    static const std::vector<unsigned char> &fp8_tokens(uint32_t kv_lora) {
        static const std::vector<unsigned char> p512 = kl_inputs::mla_fp8_pattern(32u << 20, 512, 7 + 512);
        static const std::vector<unsigned char> p256 = kl_inputs::mla_fp8_pattern(32u << 20, 256, 7 + 256);
        return kv_lora == 512 ? p512 : p256;
    }
    void load_variant(const kl_module *m, VarKernels *v, uint32_t D) {
        v->D = D;
        std::memset(&v->handles, 0, sizeof v->handles);
        if constexpr (FP8) {
            v->handles.mma = load(&v->mma, m, kl_mla_decode_attn_fp8_mma_get, "mla_decode_attn_fp8_mma");
            v->handles.tma = load(&v->tma, m, kl_mla_decode_attn_fp8_tma_get, "mla_decode_attn_fp8_tma");
        } else {
            v->handles.mma = load(&v->mma, m, kl_mla_decode_attn_bf16_mma_get, "mla_decode_attn_bf16_mma");
            v->handles.tma = load(&v->tma, m, kl_mla_decode_attn_bf16_tma_get, "mla_decode_attn_bf16_tma");
        }
        v->sched_h = load(&v->sched, m, kl_mla_decode_schedule_get, "mla_decode_schedule");
        v->combine_h = load(&v->combine, m, kl_mla_decode_combine_get, "mla_decode_combine");
        v->combine_pdl_h = load(&v->combine_pdl, m, kl_mla_decode_combine_pdl_get, "mla_decode_combine_pdl");
        if (v->sched_h == nullptr || v->combine_h == nullptr) v->handles.mma = v->handles.tma = nullptr;
    }

    std::vector<MShape> shapes_;
    MShape cur_{};
    VarKernels vk_[2];
    std::vector<int32_t> lens_host_;
    uint32_t tb_ = 0, mbps_ = 0, nblocks_ = 0, parts_ = 0;
    std::vector<Set> sets_;
    int32_t *lens_ = nullptr, *sched_ = nullptr;
    kl_bf16 *out_ = nullptr;
    float *lse_ = nullptr, *ws_ = nullptr;
    uint64_t words_ = 0, ws_bytes_ = 0;
};

// ==== mla_absorbed_attention ========================================================

class AbsorbedAttentionOp : public OpOf<kl_mla_absorbed_attention_shape, kl_mla_absorbed_attention_kernels,
                                        kl_mla_absorbed_attention_choice, 3> {
    struct AShape {
        uint32_t batch, seq, heads;
        int variant;  // 0: deepseek_v4_flash (D 576), 1: mistral_small_4 (D 320)
    };
    struct VarKernels {
        uint32_t D = 0;
        kl_kernel mma, wgmma, tma;
        kl_mla_absorbed_attention_kernels handles;
    };

  public:
    AbsorbedAttentionOp(Modules &mods, Grid grid)
        : OpOf(kl_mla_absorbed_attention_op, &kl_mla_absorbed_attention_choose) {
        const char *variants[2] = {"deepseek_v4_flash", "mistral_small_4"};
        for (int v = 0; v < 2; v++) {
            VarKernels &k = vk_[v];
            const kl_module *m = mods.get("mla_prefill", variants[v]);
            k.D = v ? 320u : 576u;
            std::memset(&k.handles, 0, sizeof k.handles);
            k.handles.mma = load(&k.mma, m, kl_mla_absorbed_attention_mma_get, "mla_absorbed_attention_mma");
            k.handles.wgmma = load(&k.wgmma, m, kl_mla_absorbed_attention_wgmma_get, "mla_absorbed_attention_wgmma");
            k.handles.tma = load(&k.tma, m, kl_mla_absorbed_attention_tma_get, "mla_absorbed_attention_tma");
        }
        if (grid == Grid::kTiny) {
            shapes_ = {{1, 17, 1, 1}, {2, 40, 2, 1}};  // on the emulator: D 320, short sequences
            return;
        }
        // The MLA prefill grid: bench/mla's shapes (128 heads x 4096 and 16
        // heads x 1024, batch 1) over lengths 512 .. 4096 at batch 1 and 4
        // (a whole grid); both variants. --quick: D 576, 1 x 1024 and 1 x 4096.
        for (int v = 0; v < (grid == Grid::kQuick ? 1 : 2); v++)
            for (uint32_t h : {16u, 128u}) {
                if (grid == Grid::kQuick) {
                    if (h == 128) shapes_.push_back({1, 1024, h, v}), shapes_.push_back({1, 4096, h, v});
                    continue;
                }
                for (uint32_t b : {1u, 4u})
                    for (uint32_t s : {512u, 1024u, 2048u, 4096u}) shapes_.push_back({b, s, h, v});
            }
    }

    size_t num_shapes() const override { return shapes_.size(); }
    std::string shape_name(size_t i) const override {
        const AShape &s = shapes_[i];
        return num(s.batch) + "x" + num(s.seq) + "_h" + num(s.heads) + "_D" + num(vk_[s.variant].D);
    }
    std::vector<uint32_t> keys(size_t i) const override {
        const AShape &s = shapes_[i];
        return {s.seq, s.batch, s.heads, vk_[s.variant].D};
    }
    std::string launcher(uint32_t a) const override {
        static const char *const n[3] = {"kl_mla_absorbed_attention_mma", "kl_mla_absorbed_attention_wgmma",
                                         "kl_mla_absorbed_attention_tma"};
        return n[a];
    }
    void set_shape(size_t i) override {
        cur_ = shapes_[i];
        std::memset(&shape_, 0, sizeof shape_);
        shape_.batch = cur_.batch;
        shape_.seq_len = cur_.seq;
        shape_.num_q_heads = cur_.heads;
        shape_.head_dim = vk_[cur_.variant].D;
        shape_.kv_lora = vk_[cur_.variant].D - 64u;
        shape_.aligned = true;
        kernels_ = vk_[cur_.variant].handles;
    }
    void prepare(Mem &mem) override {
        const AShape &s = cur_;
        const uint32_t D = vk_[s.variant].D;
        const size_t nq = size_t{s.batch} * s.seq * s.heads * D, nkv = size_t{s.batch} * s.seq * D;
        sets_.assign(mem.sets(2 * (nq + nkv)), Set());
        for (size_t i = 0; i < sets_.size(); i++) {
            Set &c = sets_[i];
            c.q = alloc_n<kl_bf16>(mem, nq, "q");
            c.kv = alloc_n<kl_bf16>(mem, nkv, "kv");
            mem.fill(c.q, nq * 2, bf16(), i * 8191u, 2);
            mem.fill(c.kv, nkv * 2, bf16(), i * 8191u + 4099u, 2);
            const kl_kernel *t = vk_[s.variant].handles.tma;
            if (t != nullptr) {
                ok(kl_mla_absorbed_attention_tma_q_map_encode(t, &c.qm, c.q, D, s.heads, s.seq, s.batch, D,
                                                              uint64_t{s.heads} * D, uint64_t{s.seq} * s.heads * D),
                   "q_map");
                ok(kl_mla_absorbed_attention_tma_kv_map_encode(t, &c.kvm, c.kv, D, s.seq, s.batch, D, uint64_t{s.seq} * D),
                   "kv_map");
            }
        }
        out_ = alloc_n<kl_bf16>(mem, size_t{s.batch} * s.seq * s.heads * (D - 64u), "output");
        mem.sync();
    }
    void launch(uint32_t a, const std::vector<uint32_t> &tun, int run, kl_stream st) override {
        const Set &c = sets_[static_cast<size_t>(run) % sets_.size()];
        const AShape &s = cur_;
        const VarKernels &k = vk_[s.variant];
        const float inv = 1.0f / std::sqrt(static_cast<float>(k.D));
        kl_status r;
        if (a == 0)
            r = kl_mla_absorbed_attention_mma(k.handles.mma, c.q, c.kv, out_, s.seq, s.batch, s.heads, k.D, k.D - 64u, inv,
                                              true, st);
        else if (a == 1)
            r = kl_mla_absorbed_attention_wgmma(k.handles.wgmma, c.q, c.kv, out_, s.seq, s.batch, s.heads, k.D, k.D - 64u,
                                                inv, true, st);
        else
            r = kl_mla_absorbed_attention_tma(k.handles.tma, &c.qm, &c.kvm, out_, s.seq, s.batch, s.heads, k.D, k.D - 64u,
                                              inv, true, tun[0], st);
        ok(r, launcher(a));
    }

  protected:
    void tunables_of(const kl_mla_absorbed_attention_choice &c, uint32_t *t) const override { t[0] = c.num_ctas; }

  private:
    struct Set {
        kl_bf16 *q = nullptr, *kv = nullptr;
        kl_tensor_map qm, kvm;
    };
    static const std::vector<unsigned char> &bf16() {
        static const std::vector<unsigned char> p = kl_inputs::bf16_pattern(32u << 20, 5);
        return p;
    }
    std::vector<AShape> shapes_;
    AShape cur_{};
    VarKernels vk_[2];
    std::vector<Set> sets_;
    kl_bf16 *out_ = nullptr;
};

// ==== grouped_gemm ==================================================================

class GroupedGemmOp : public OpOf<kl_grouped_gemm_shape, kl_grouped_gemm_kernels, kl_grouped_gemm_choice, 3> {
    struct GShape {
        uint32_t m, g, k_g, n_g;
    };

  public:
    GroupedGemmOp(Modules &mods, Grid grid) : OpOf(kl_grouped_gemm_op, &kl_grouped_gemm_choose) {
        // The kernels are the same in both variants: deepseek_v4_flash's.
        const kl_module *m = mods.get("mla_prefill", "deepseek_v4_flash");
        std::memset(&handles_, 0, sizeof handles_);
        handles_.mma = load(&mma_, m, kl_grouped_gemm_mma_get, "grouped_gemm_mma");
        handles_.wgmma = load(&wgmma_, m, kl_grouped_gemm_wgmma_get, "grouped_gemm_wgmma");
        handles_.tma = load(&tma_, m, kl_grouped_gemm_tma_get, "grouped_gemm_tma");
        if (grid == Grid::kTiny) {
            shapes_ = {{64, 2, 64, 128}, {130, 1, 128, 64}};  // on the emulator
            return;
        }
        // bench/mla's GEMMs (m 4096, g 128: k_g 128 n_g 512 and k_g 512 n_g 128) over m.
        const std::vector<uint32_t> ms = grid == Grid::kQuick ? std::vector<uint32_t>{1024, 4096}
                                                              : std::vector<uint32_t>{256, 1024, 4096, 16384};
        for (auto kn : {std::pair<uint32_t, uint32_t>{128, 512}, {512, 128}})
            for (uint32_t mm : ms) shapes_.push_back({mm, 128, kn.first, kn.second});
    }
    size_t num_shapes() const override { return shapes_.size(); }
    std::string shape_name(size_t i) const override {
        const GShape &s = shapes_[i];
        return "m" + num(s.m) + "_g" + num(s.g) + "_k" + num(s.k_g) + "_n" + num(s.n_g);
    }
    std::vector<uint32_t> keys(size_t i) const override {
        const GShape &s = shapes_[i];
        return {s.m, s.g, s.k_g, s.n_g};
    }
    std::string launcher(uint32_t a) const override {
        static const char *const n[3] = {"kl_grouped_gemm_mma", "kl_grouped_gemm_wgmma", "kl_grouped_gemm_tma"};
        return n[a];
    }
    void set_shape(size_t i) override {
        cur_ = shapes_[i];
        std::memset(&shape_, 0, sizeof shape_);
        shape_.m = cur_.m;
        shape_.g = cur_.g;
        shape_.k_g = cur_.k_g;
        shape_.n_g = cur_.n_g;
        shape_.aligned = cur_.k_g % 8 == 0 && cur_.n_g % 8 == 0;
        kernels_ = handles_;
    }
    void prepare(Mem &mem) override {
        const GShape &s = cur_;
        const size_t na = size_t{s.m} * s.g * s.k_g, nb = size_t{s.g} * s.n_g * s.k_g, nc = size_t{s.m} * s.g * s.n_g;
        sets_.assign(mem.sets(2 * (na + nb + nc)), Set());
        for (size_t i = 0; i < sets_.size(); i++) {
            Set &c = sets_[i];
            c.a = alloc_n<kl_bf16>(mem, na, "a");
            c.b = alloc_n<kl_bf16>(mem, nb, "b");
            c.c = alloc_n<kl_bf16>(mem, nc, "c");
            mem.fill(c.a, na * 2, bf16(), i * 8191u, 2);
            mem.fill(c.b, nb * 2, bf16(), i * 8191u + 4099u, 2);
            if (handles_.tma != nullptr && shape_.aligned) {
                ok(kl_grouped_gemm_tma_a_map_encode(handles_.tma, &c.am, c.a, s.k_g, s.g, s.m, s.k_g, uint64_t{s.g} * s.k_g), "a_map");
                ok(kl_grouped_gemm_tma_b_map_encode(handles_.tma, &c.bm, c.b, s.k_g, s.n_g, s.g, s.k_g, uint64_t{s.n_g} * s.k_g), "b_map");
                ok(kl_grouped_gemm_tma_c_map_encode(handles_.tma, &c.cm, c.c, s.n_g, s.g, s.m, s.n_g, uint64_t{s.g} * s.n_g), "c_map");
            }
        }
        counters_ = alloc_n<uint32_t>(mem, 2, "counters");
        mem.zero(counters_, 8);
        mem.sync();
    }
    void launch(uint32_t a, const std::vector<uint32_t> &tun, int run, kl_stream st) override {
        const Set &c = sets_[static_cast<size_t>(run) % sets_.size()];
        const GShape &s = cur_;
        kl_status r;
        if (a == 0)
            r = kl_grouped_gemm_mma(handles_.mma, c.a, c.b, c.c, s.m, s.g, s.k_g, s.n_g, s.g * s.k_g, s.g * s.n_g, st);
        else if (a == 1)
            r = kl_grouped_gemm_wgmma(handles_.wgmma, c.a, c.b, c.c, s.m, s.g, s.k_g, s.n_g, s.g * s.k_g, s.g * s.n_g, st);
        else
            r = kl_grouped_gemm_tma(handles_.tma, &c.am, &c.bm, &c.cm, s.m, s.g, s.k_g, s.n_g, counters_, tun[0], 2, st);
        ok(r, launcher(a));
    }

  protected:
    void tunables_of(const kl_grouped_gemm_choice &c, uint32_t *t) const override { t[0] = c.num_ctas; }

  private:
    struct Set {
        kl_bf16 *a = nullptr, *b = nullptr, *c = nullptr;
        kl_tensor_map am, bm, cm;
    };
    static const std::vector<unsigned char> &bf16() {
        static const std::vector<unsigned char> p = kl_inputs::bf16_pattern(32u << 20, 5);
        return p;
    }
    kl_kernel mma_, wgmma_, tma_;
    kl_grouped_gemm_kernels handles_;
    std::vector<GShape> shapes_;
    GShape cur_{};
    std::vector<Set> sets_;
    uint32_t *counters_ = nullptr;
};

// Every operation of the three families, in the families' order.
inline std::vector<std::unique_ptr<Op>> make_ops(Modules &mods, Grid grid, const kl_device &dev) {
    std::vector<std::unique_ptr<Op>> ops;
    ops.emplace_back(new PagedDecodeOp<false>(mods, grid, dev));
    ops.emplace_back(new PagedDecodeOp<true>(mods, grid, dev));
    ops.emplace_back(new MlaDecodeOp<false>(mods, grid));
    ops.emplace_back(new MlaDecodeOp<true>(mods, grid));
    ops.emplace_back(new AbsorbedAttentionOp(mods, grid));
    ops.emplace_back(new GroupedGemmOp(mods, grid));
    return ops;
}

// The table's operations: every family's kl_<family>_operations.
inline const kl_choice_op *const *all_operations() {
    static const kl_choice_op *const ops[] = {&kl_paged_decode_gqa_bf16_op, &kl_paged_decode_gqa_fp8_op,
                                              &kl_mla_decode_attn_bf16_op,  &kl_mla_decode_attn_fp8_op,
                                              &kl_mla_absorbed_attention_op, &kl_grouped_gemm_op,
                                              nullptr};
    return ops;
}

}  // namespace tune

#endif  // KLAUNCH_TOOLS_TUNE_OPS_H
