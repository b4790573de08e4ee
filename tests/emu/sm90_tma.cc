// sm90_tma.cc - emulation of Hopper's bulk copy engine, from the PTX ISA:
//   - "Tensors" (5.5): tiled mode; the bounding box (box[i] elements per
//     dimension from the instruction's coordinates, which may be negative or
//     past the extent); traversal strides (element_stride[i]: every
//     element_stride[i]-th element, ceil(box[i] / element_stride[i]) of them,
//     cuTensorMapEncodeTiled's rule; dimension 0's is ignored without
//     interleave, as the driver documents); out-of-boundary access (elements
//     outside the tensor read as zero, or as OOB-NaN with the NaN fill, and
//     are not written by stores); swizzling modes (the 32B, 64B and 128B
//     tables: in each 128-byte line of shared memory, 16-byte chunk c holds
//     chunk c ^ (line % 2, % 4, % 8), the line being bits 7.. of the shared
//     address itself, so a box not at the pattern's boundary is swizzled with
//     the ISA's base offset (addr / 128) % 2, 4 or 8; a box row narrower
//     than its swizzle span takes the whole span, as an H200 does);
//   - "cp.async.bulk.tensor" (.tile, global -> shared with
//     .mbarrier::complete_tx::bytes, shared -> global with .bulk_group),
//     "cp.async.bulk" (the same, contiguous: size a multiple of 16, both
//     addresses 16-byte aligned), "cp.async.bulk.commit_group",
//     "cp.async.bulk.wait_group{.read}", "prefetch.tensormap". The shared
//     address of a tensor copy is 128-byte aligned (the CUDA programming
//     guide's rule for the copy engine); the map is 64-byte aligned
//     (cuTensorMapEncodeTiled's) and lies in .param or .global space.
// The map is read in klaunch's reference encoding (kl_tensor_map_reference_
// decode, what the emulated backend's tensor_map_encode writes); any other
// bytes, or a pointer that is not to a parameter or a registered buffer, is a
// kBadOperand fault naming it.
//
// What it makes observable (tests/emu/sm90_tma_test.cc):
//   - every in-bounds global byte a copy reads or writes is checked as a
//     global access of the issuing thread at issue (registered buffer,
//     permission), so a map whose extents overrun its buffer faults naming
//     the buffer;
//   - loads: the global bytes are read at issue; the shared destination is in
//     flight until a wait on the copy's mbarrier lands it (sm90_mbarrier.cc):
//     touching it before is a race fault naming the copy; the landed bytes
//     are the issuer's writes, released into the mbarrier's phase, so a
//     thread that reads them without waiting on that phase is a race;
//   - stores: the shared source is read at issue (as the issuer's reads:
//     unwritten or racy bytes fault) and stays in flight until a
//     wait_group.read (or wait_group) of its group: writing it before is a
//     race fault naming the store; the global bytes are written at
//     wait_group, or when the thread returns (a kernel may end on
//     wait_group.read);
//   - two copies in flight over one shared byte where one writes it fault.
// The shared bytes are checked against the block's shared memory; the
// global bytes of a load are a snapshot at issue (a store of the same
// kernel to them before the load completes is not modelled).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "klaunch/tensor_map.h"
#include "tests/emu/emu.h"
#include "tests/emu/sm90_async.h"
#include "tests/emu/sm90_ptx_emu.h"

namespace emu {
namespace sm90 {
namespace {

constexpr uint32_t kMapBytes = 128;

// The shared address where the copy engine puts byte `a` of a box (the ISA's
// swizzle tables: the 16-byte chunk bits 4.. XORed with the line bits 7..).
uint32_t swizzled(uint32_t a, uint32_t mode) {
    if (mode == KL_TENSOR_MAP_SWIZZLE_NONE) return a;
    const uint32_t mask = (1u << mode) - 1u;  // 32B: 1 bit, 64B: 2, 128B: 3
    return a ^ (((a >> 7) & mask) << 4);
}

// Where byte `off` of a box's dense data (rows of row_bytes) lies in shared
// memory: rows `pitch` apart, then swizzled. A swizzled box's rows each take
// the whole swizzle span, also when narrower (an H200 lays out a box of
// 32-byte rows under the 128B swizzle at 128 bytes a row, and 32-byte rows
// under the 64B swizzle at 64; the ISA does not say).
struct Layout {
    uint64_t row_bytes, pitch;
    uint32_t swizzle;
    uint32_t at(uint32_t base, uint64_t off) const {
        return swizzled(base + (uint32_t)(off / row_bytes * pitch + off % row_bytes), swizzle);
    }
};

// A tensor copy's box as the map describes it.
struct Box {
    kl_tensor_map_request r;
    uint32_t esize = 0;
    uint32_t n[KL_TENSOR_MAP_MAX_RANK] = {1, 1, 1, 1, 1};  // elements per dimension in shared memory
    uint64_t rows = 1;                                      // n[1] * ... * n[rank - 1]
    uint64_t row_bytes = 0, bytes = 0;                      // bytes: the data, what complete_tx counts
    Layout shared{0, 0, 0};
};

std::string where_is(const void *p) {
    if (const char *b = buffer_name(p, kMapBytes)) return std::string("in buffer '") + b + "'";
    return "in the thread's own parameters";
}

// The map at `p` for an instruction of `rank` dimensions (0: any).
Box read_map(const void *p, uint32_t rank, const char *op) {
    const uintptr_t a = (uintptr_t)p;
    uint32_t sh = 0;
    if (is_shared(p, &sh))
        fault(FaultKind::kBadOperand, a,
              "%s: the tensor map operand %p is shared memory (address %u); the ISA takes a map in .param, .const or "
              ".global space (the __grid_constant__ kernel parameter, or global memory)",
              op, p, sh);
    if (!on_own_stack(p, kMapBytes)) {
        if (buffer_name(p, kMapBytes) == nullptr)
            fault(FaultKind::kBadOperand, a,
                  "%s: the tensor map operand %p is not a tensor map: it is neither one of the thread's parameters "
                  "nor inside a registered buffer",
                  op, p);
        check_global(p, kMapBytes, 1, Access::kRead);  // the buffer's permission
    }
    if (a % 64u != 0u)
        fault(FaultKind::kMisaligned, a, "%s: the tensor map at %p (%s) is not 64-byte aligned", op, p,
              where_is(p).c_str());
    Box b;
    if (!kl_tensor_map_reference_decode(p, &b.r)) {
        uint32_t magic;
        memcpy(&magic, p, 4);
        fault(FaultKind::kBadOperand, a,
              "%s: the 128 bytes at %p (%s) are not a tensor map in klaunch's reference encoding (first word %#x, "
              "the encoding's is %#x): a map from another encoder (the CUDA driver's is opaque here), or not a map",
              op, p, where_is(p).c_str(), magic, KL_TENSOR_MAP_REFERENCE_MAGIC);
    }
    const kl_tensor_map_request &r = b.r;
    if (rank != 0u && r.rank != rank)
        fault(FaultKind::kBadOperand, a, "%s: the tensor map at %p has rank %u; the instruction copies %u dimensions",
              op, p, r.rank, rank);
    if (r.interleave != KL_TENSOR_MAP_INTERLEAVE_NONE)
        fault(FaultKind::kUnsupported, a, "%s: the tensor map at %p is interleaved (%u); the emulator copies "
              "non-interleaved layouts only", op, p, r.interleave);
    b.esize = kl_tensor_map_dtype_size(r.dtype);
    // The fields the copy relies on, in the ranges cuTensorMapEncodeTiled encodes.
    const bool is_float = r.dtype == KL_TENSOR_MAP_F16 || r.dtype == KL_TENSOR_MAP_BF16 ||
                          r.dtype == KL_TENSOR_MAP_F32 || r.dtype == KL_TENSOR_MAP_F64;
    bool ok = r.swizzle <= KL_TENSOR_MAP_SWIZZLE_128B && r.oob_fill <= KL_TENSOR_MAP_FILL_NAN &&
              (r.oob_fill == KL_TENSOR_MAP_FILL_ZERO || is_float) && (uintptr_t)r.address % 16u == 0u;
    for (uint32_t i = 0; i < r.rank; ++i) {
        ok = ok && r.extent[i] >= 1u && r.extent[i] <= (1ull << 32) && r.box[i] >= 1u && r.box[i] <= 256u &&
             r.element_stride[i] >= 1u && r.element_stride[i] <= 8u;
        if (i > 0) ok = ok && r.stride[i - 1] % 16u == 0u && r.stride[i - 1] < (1ull << 40);
        // Dimension 0 is dense without interleave (its element stride is ignored).
        b.n[i] = i == 0 ? r.box[0] : (r.box[i] + r.element_stride[i] - 1u) / r.element_stride[i];
        if (i > 0) b.rows *= b.n[i];
    }
    b.row_bytes = (uint64_t)b.n[0] * b.esize;
    ok = ok && b.row_bytes % 16u == 0u &&
         (r.swizzle == KL_TENSOR_MAP_SWIZZLE_NONE || b.row_bytes <= (16u << r.swizzle));
    if (!ok)
        fault(FaultKind::kBadOperand, a,
              "%s: the tensor map at %p (%s) holds fields cuTensorMapEncodeTiled does not encode (swizzle %u, fill %u, "
              "dtype %u, box0 %u, a zero or too large extent, box or element stride, or a stride not a multiple of "
              "16): not a map klaunch encoded",
              op, p, where_is(p).c_str(), r.swizzle, r.oob_fill, r.dtype, r.box[0]);
    b.bytes = b.rows * b.row_bytes;
    b.shared = Layout{b.row_bytes, r.swizzle ? 16u << r.swizzle : b.row_bytes, r.swizzle};
    return b;
}

// f(offset in the box, global address, bytes) for each run of in-bounds
// elements: the part of a box row (dimension 0) inside the tensor, for rows
// whose other coordinates all are.
template <class F>
void for_each_run(const Box &b, const int32_t *c, F f) {
    const kl_tensor_map_request &r = b.r;
    const int64_t c0 = c[0];
    const int64_t x0 = std::max<int64_t>(0, -c0), x1 = std::min<int64_t>(b.n[0], (int64_t)r.extent[0] - c0);
    if (x0 >= x1) return;
    for (uint64_t row = 0; row < b.rows; ++row) {
        uint64_t rest = row, goff = 0;
        bool inside = true;
        for (uint32_t i = 1; i < r.rank && inside; ++i) {
            const int64_t ci = (int64_t)c[i] + (int64_t)(rest % b.n[i]) * r.element_stride[i];
            rest /= b.n[i];
            inside = ci >= 0 && ci < (int64_t)r.extent[i];
            goff += (uint64_t)ci * r.stride[i - 1];
        }
        if (!inside) continue;
        f(row * b.row_bytes + (uint64_t)x0 * b.esize,
          static_cast<const unsigned char *>(r.address) + goff + (uint64_t)(c0 + x0) * b.esize,
          (uint64_t)(x1 - x0) * b.esize);
    }
}

// Out-of-bounds elements: zero, or OOB-NaN with the NaN fill. The ISA does
// not give OOB-NaN's bits; an H200 writes 0x7ff7 in every 16 bits (f16 and
// bf16 0x7ff7, f32 0x7ff77ff7, f64 0x7ff77ff77ff77ff7: a NaN in each).
std::vector<unsigned char> filled(const Box &b) {
    std::vector<unsigned char> d(b.bytes, 0);
    if (b.r.oob_fill != KL_TENSOR_MAP_FILL_NAN) return d;
    for (uint64_t i = 0; i < b.bytes; i += 2) {
        d[i] = 0xf7;
        d[i + 1] = 0x7f;
    }
    return d;
}

std::string coords_str(const int32_t *c, uint32_t rank) {
    std::string s = "{";
    for (uint32_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(c[i]);
    return s + "}";
}

// What loads and stores check alike: the map, the shared address's
// alignment, a box that fits the block's shared memory.
struct TensorCopy {
    char op[96];
    Box b;
    std::string what;  // names the copy in reports
};
void begin_tensor_copy(TensorCopy &c, const char *form, const void *map, uint32_t rank, const int32_t *coords,
                       uint32_t smem, const char *role) {
    snprintf(c.op, sizeof c.op, "cp.async.bulk.tensor.%ud.%s", rank, form);
    c.b = read_map(map, rank, c.op);
    if (smem % 128u != 0u)
        fault(FaultKind::kMisaligned, smem, "%s: shared %s %u is not 128-byte aligned", c.op, role, smem);
    const uint64_t window = (uint64_t)dynamic_base() + dynamic_size(), span = c.b.rows * c.b.shared.pitch;
    if (span > window)
        fault(FaultKind::kSharedOutOfBounds, smem, "%s: a box of %llu bytes exceeds the block's shared memory (%llu)",
              c.op, (unsigned long long)span, (unsigned long long)window);
    char what[256];
    snprintf(what, sizeof what, "%s (box at %s, %llu bytes, shared %s %u) of thread %u", c.op,
             coords_str(coords, rank).c_str(), (unsigned long long)c.b.bytes, role, smem, thread());
    c.what = what;
}

void check_bulk(uint32_t smem, const void *g, uint32_t bytes, const char *op) {
    if (bytes == 0u || bytes % 16u != 0u)
        fault(FaultKind::kBadOperand, bytes, "%s: size %u is not a positive multiple of 16", op, bytes);
    if (smem % 16u != 0u) fault(FaultKind::kMisaligned, smem, "%s: shared address %u is not 16-byte aligned", op, smem);
    if ((uintptr_t)g % 16u != 0u)
        fault(FaultKind::kMisaligned, (uintptr_t)g, "%s: global address %p is not 16-byte aligned", op, g);
}

// A load's data land: the bytes at their shared addresses, as the issuer's
// writes (16 at a time: the swizzle's unit; rows are multiples of 16).
struct Landing {
    uint32_t id, issuer, dst;
    Layout layout;
    std::vector<unsigned char> data;
    void operator()() const {
        async_end(id);
        for (uint64_t k = 0; k < data.size(); k += 16)
            memcpy(shared_as(issuer, layout.at(dst, k), 16, 1, Access::kWrite), &data[k], 16);
    }
};

void issue_load(uint32_t dst, const Layout &layout, std::vector<unsigned char> data, uint32_t mbar, const char *op,
                const std::string &what) {
    Landing l{async_begin(Access::kWrite, what), thread(), dst, layout, std::move(data)};
    for (uint64_t k = 0; k < l.data.size(); k += 16) async_mark(l.id, layout.at(dst, k), 16);
    const uint32_t bytes = (uint32_t)l.data.size();
    mbarrier_transaction(mbar, op, bytes, what, std::move(l));
}

// ---- bulk async-groups (stores), per thread ----

struct Store {
    uint32_t id = 0;  // its shared source in flight until read (0: read)
    std::vector<std::pair<unsigned char *, std::vector<unsigned char>>> writes;
};
struct Group {
    std::vector<Store> stores;
};
struct Groups {
    std::vector<Store> open;
    std::vector<Group> committed;  // oldest first
};
struct State : BlockLocalBase {
    std::vector<Groups> threads;
};

const char kKey = 0;
void on_exit(uint32_t tid);

Groups &groups_of(uint32_t tid) {
    on_thread_exit(on_exit);  // kept once
    State &s = block_local<State>(&kKey);
    if (s.threads.size() < block_threads()) s.threads.resize(block_threads());
    return s.threads[tid];
}

void finish_read(Store &st) {
    if (st.id != 0u) async_end(st.id);
    st.id = 0u;
}
void finish(Store &st) {
    finish_read(st);
    for (auto &w : st.writes) memcpy(w.first, w.second.data(), w.second.size());  // checked at issue
    st.writes.clear();
}

// A thread's returning completes its stores (the GPU finishes them; kernels
// may end on wait_group.read).
void on_exit(uint32_t tid) {
    BlockLocalBase *b = block_local_get(&kKey);
    if (b == nullptr) return;
    State &s = *static_cast<State *>(b);
    if (tid >= s.threads.size()) return;
    Groups &g = s.threads[tid];
    for (Group &gr : g.committed)
        for (Store &st : gr.stores) finish(st);
    for (Store &st : g.open) finish(st);
    g = Groups();
}

}  // namespace
}  // namespace sm90
}  // namespace emu

using namespace emu;
using namespace emu::sm90;

extern "C" void kl_emu_sm90_tma_load(uint32_t smem_dst, const void *tensor_map, uint32_t rank, const int32_t *coords,
                                     uint32_t mbar) {
    TensorCopy c;
    begin_tensor_copy(c, "shared::cluster.global.tile", tensor_map, rank, coords, smem_dst, "destination");
    std::vector<unsigned char> data = filled(c.b);
    for_each_run(c.b, coords, [&data](uint64_t off, const unsigned char *g, uint64_t n) {
        check_global(g, n, 1, Access::kRead);
        memcpy(&data[off], g, n);
    });
    issue_load(smem_dst, c.b.shared, std::move(data), mbar, c.op, c.what);
}

extern "C" void kl_emu_sm90_tma_store(const void *tensor_map, uint32_t rank, const int32_t *coords,
                                      uint32_t smem_src) {
    TensorCopy c;
    begin_tensor_copy(c, "global.shared::cta.tile.bulk_group", tensor_map, rank, coords, smem_src, "source");
    const Box &b = c.b;
    Store st;
    st.id = async_begin(Access::kRead, c.what);
    for_each_run(b, coords, [&](uint64_t off, const unsigned char *g, uint64_t n) {
        check_global(g, n, 1, Access::kWrite);
        std::vector<unsigned char> bytes(n);
        // In-bounds elements only: the rest of the box need not be written.
        for (uint64_t k = off; k < off + n;) {
            const uint64_t e = std::min(off + n, (k / 16u + 1u) * 16u);  // to the end of k's 16-byte chunk
            const uint32_t a = b.shared.at(smem_src, k);
            memcpy(&bytes[k - off], shared(a, (uint32_t)(e - k), 1, Access::kRead), e - k);
            async_mark(st.id, a, (uint32_t)(e - k));
            k = e;
        }
        st.writes.emplace_back(const_cast<unsigned char *>(g), std::move(bytes));
    });
    groups_of(thread()).open.push_back(std::move(st));
}

extern "C" void kl_emu_sm90_bulk_load(uint32_t smem_dst, const void *gsrc, uint32_t bytes, uint32_t mbar) {
    const char *op = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes";
    check_bulk(smem_dst, gsrc, bytes, op);
    check_global(gsrc, bytes, 1, Access::kRead);
    const unsigned char *g = static_cast<const unsigned char *>(gsrc);
    char what[200];
    snprintf(what, sizeof what, "%s (%u bytes to shared %u, mbarrier %#x) of thread %u", op, bytes, smem_dst, mbar,
             thread());
    issue_load(smem_dst, Layout{bytes, bytes, KL_TENSOR_MAP_SWIZZLE_NONE}, std::vector<unsigned char>(g, g + bytes), mbar,
               op, what);
}

extern "C" void kl_emu_sm90_bulk_store(void *gdst, uint32_t smem_src, uint32_t bytes) {
    const char *op = "cp.async.bulk.global.shared::cta.bulk_group";
    check_bulk(smem_src, gdst, bytes, op);
    check_global(gdst, bytes, 1, Access::kWrite);
    const unsigned char *s = shared(smem_src, bytes, 16, Access::kRead);
    char what[200];
    snprintf(what, sizeof what, "%s (%u bytes from shared %u) of thread %u", op, bytes, smem_src, thread());
    Store st;
    st.id = async_begin(Access::kRead, what);
    async_mark(st.id, smem_src, bytes);
    st.writes.emplace_back(static_cast<unsigned char *>(gdst), std::vector<unsigned char>(s, s + bytes));
    groups_of(thread()).open.push_back(std::move(st));
}

extern "C" void kl_emu_sm90_bulk_commit(void) {
    Groups &g = groups_of(thread());
    g.committed.push_back(Group{std::move(g.open)});
    g.open.clear();
}

// wait_group N: all but the N most recent groups complete; .read: they have
// read their sources (their global writes may still be pending).
extern "C" void kl_emu_sm90_bulk_wait(uint32_t pending, uint32_t read_only) {
    Groups &g = groups_of(thread());
    if (g.committed.size() <= pending) return;
    const size_t k = g.committed.size() - pending;
    for (size_t i = 0; i < k; ++i)
        for (Store &st : g.committed[i].stores) read_only ? finish_read(st) : finish(st);
    if (!read_only) g.committed.erase(g.committed.begin(), g.committed.begin() + (ptrdiff_t)k);
}

extern "C" void kl_emu_sm90_prefetch_tensormap(const void *tensor_map) {
    read_map(tensor_map, 0u, "prefetch.tensormap");
}
