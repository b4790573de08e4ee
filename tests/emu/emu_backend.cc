// emu_backend.cc - kl_emu_backend (emu_backend.h): klaunch's backend
// interface over the CPU emulator.
#include "tests/emu/emu_backend.h"

#include <string.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "klaunch/tensor_map.h"
#include "tests/emu/kernel_table.h"

namespace emu {
namespace {
std::vector<const Image *> &registry() {
    static std::vector<const Image *> r;
    return r;
}
Fault g_last;
constexpr const char *kMagic = "klaunch-emulated-image 1";
BackendLaunch g_launch;
// Launchers (with a computable extent) this program launched to
// completion, and those whose extents a test saw reached.
std::set<std::string> &launched() {
    static std::set<std::string> s;
    return s;
}
std::set<std::string> &asserted() {
    static std::set<std::string> s;
    return s;
}

// At the program's end: every launcher with a computable extent that some
// test launched had its extents asserted reached in some test of this
// program (emu_test::extents_reached(launcher)), so a launcher an emulated
// test runs cannot go without a tightness test (issue 44). Only for a whole
// run: a --gtest_filter (or bazel's --test_filter) or a shard runs a part.
class ExtentsAssertedEnvironment : public ::testing::Environment {
  public:
    void TearDown() override {
        const std::string filter = GTEST_FLAG_GET(filter);
        if ((filter != "*" && !filter.empty()) || std::getenv("GTEST_TOTAL_SHARDS") != nullptr) return;
        for (const std::string &l : launched())
            if (asserted().count(l) == 0)
                ADD_FAILURE() << "kl_" << l << " ran on the emulator in this test, but no test here asserted "
                              << "its declared extents reached: add EXPECT_TRUE(emu_test::extents_reached(\"" << l
                              << "\")) after a launch whose shape touches the last element of each (docs/EMULATOR.md)";
    }
};
::testing::Environment *const g_extents_env = ::testing::AddGlobalTestEnvironment(new ExtentsAssertedEnvironment);
}  // namespace

const BackendLaunch &last_backend_launch() { return g_launch; }
void note_extents_asserted(const std::string &launcher) { asserted().insert(launcher); }

ImageRegistration::ImageRegistration(const Image *image) { registry().push_back(image); }

const Fault &last_fault() { return g_last; }

Fault run_packed(const void *image, const char *entry, Dim3 grid, Dim3 block, uint32_t dynamic_shared,
                 const void *const *args, const size_t *sizes, uint32_t n) {
    const Image *im = static_cast<const Image *>(image);
    Fault f;
    f.kind = FaultKind::kLaunch;
    if (im == nullptr) {
        f.message = "emulator: run: no such image";
        return f;
    }
    const KernelEntry *k = nullptr;
    for (uint32_t i = 0; i < im->num_kernels; ++i)
        if (strcmp(im->kernels[i].name, entry) == 0) k = &im->kernels[i];
    if (k == nullptr) {
        f.message = std::string("emulator: run: the image has no kernel ") + entry;
        return f;
    }
    if (k->num_params != n) {
        f.message = std::string("emulator: run: ") + entry + " takes " + std::to_string(k->num_params) +
                    " arguments, given " + std::to_string(n);
        return f;
    }
    uint32_t bytes = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (k->params[i].size != sizes[i]) {
            f.message = std::string("emulator: run: argument ") + std::to_string(i + 1) + " of " + entry + " has " +
                        std::to_string(sizes[i]) + " bytes, the kernel's parameter " +
                        std::to_string(k->params[i].size);
            return f;
        }
        bytes = std::max(bytes, k->params[i].offset + k->params[i].size);
    }
    std::vector<unsigned char> packed(bytes + 8, 0);
    for (uint32_t i = 0; i < n; ++i) memcpy(packed.data() + k->params[i].offset, args[i], sizes[i]);
    g_last = launch(grid, block, dynamic_shared, k->call, packed.data());
    return g_last;
}
}  // namespace emu

namespace {

const char *kind_name(kl_param_kind k) {
    switch (k) {
        case KL_PARAM_PTR: return "pointer";
        case KL_PARAM_U32: return "u32";
        case KL_PARAM_U64: return "u64";
        case KL_PARAM_F32: return "f32";
        case KL_PARAM_I32: return "i32";
        case KL_PARAM_BOOL: return "bool";
        case KL_PARAM_TENSOR_MAP: return "tensor map";
    }
    return "?";
}

kl_status emu_module_load(kl_backend *, const void *image, size_t size, void **handle) {
    const emu::Image *im = static_cast<const emu::Image *>(image);
    if (size != sizeof(emu::Image) || im->magic == nullptr || strcmp(im->magic, emu::kMagic) != 0)
        return kl__fail(KL_ERROR_INVALID_IMAGE,
                        "emulated backend: the image (%lu bytes) is not an emulated image; pass kl_emu_image(family, "
                        "variant) and kl_emu_image_size()",
                        (unsigned long)size);
    *handle = const_cast<emu::Image *>(im);
    return KL_SUCCESS;
}

void emu_module_unload(kl_backend *, void *) {}

kl_status emu_module_info(kl_backend *, void *handle, char *buf, size_t cap) {
    const emu::Image *im = static_cast<const emu::Image *>(handle);
    const size_t len = strlen(im->module_info);
    if (len >= cap)
        return kl__fail(KL_ERROR_MODULE_INFO, "emulated backend: module metadata of %lu bytes exceeds %lu",
                        (unsigned long)len, (unsigned long)(cap ? cap - 1 : 0));
    memcpy(buf, im->module_info, len + 1);
    return KL_SUCCESS;
}

kl_status emu_function_get(kl_backend *be, void *handle, const kl_kernel_desc *desc, void **fn, kl_func_attrs *attrs) {
    const kl_emu_backend *eb = reinterpret_cast<const kl_emu_backend *>(be);
    const emu::Image *im = static_cast<const emu::Image *>(handle);
    const emu::KernelEntry *k = nullptr;
    for (uint32_t i = 0; i < im->num_kernels; ++i)
        if (strcmp(im->kernels[i].name, desc->entry) == 0) k = &im->kernels[i];
    if (k == nullptr)
        return kl__fail(KL_ERROR_KERNEL_NOT_FOUND, "kl_%s_get: the emulated module %s/%s has no kernel '%s'",
                        desc->launcher, im->family, im->variant, desc->entry);
    // The kernel's parameters as its C++ signature lays them out against the spec's.
    for (uint32_t i = 0; i < desc->num_params; ++i) {
        const kl_param_info *p = &desc->params[i];
        if (i >= k->num_params)
            return kl__fail(KL_ERROR_LAYOUT_MISMATCH,
                            "kl_%s_get: kernel %s has %u parameters, its spec %u: parameter %u (%s, offset %u, %u "
                            "bytes, %s) is missing [%s:%u]",
                            desc->launcher, desc->entry, (unsigned)k->num_params, (unsigned)desc->num_params,
                            (unsigned)i + 1, p->name, (unsigned)p->offset, (unsigned)p->size, kind_name(p->kind),
                            desc->spec_file, (unsigned)desc->spec_line);
        if (k->params[i].offset != p->offset || k->params[i].size != p->size)
            return kl__fail(KL_ERROR_LAYOUT_MISMATCH,
                            "kl_%s_get: kernel %s differs from its spec at parameter %u (%s): the kernel has offset "
                            "%u, %u bytes; the spec says offset %u, %u bytes (%s) [%s:%u]",
                            desc->launcher, desc->entry, (unsigned)i + 1, p->name, (unsigned)k->params[i].offset,
                            (unsigned)k->params[i].size, (unsigned)p->offset, (unsigned)p->size, kind_name(p->kind),
                            desc->spec_file, (unsigned)desc->spec_line);
    }
    if (k->num_params != desc->num_params)
        return kl__fail(KL_ERROR_LAYOUT_MISMATCH, "kl_%s_get: kernel %s has %u parameters, its spec %u [%s:%u]",
                        desc->launcher, desc->entry, (unsigned)k->num_params, (unsigned)desc->num_params,
                        desc->spec_file, (unsigned)desc->spec_line);
    if (desc->max_dynamic_shared > eb->max_dynamic_shared)
        return kl__fail(KL_ERROR_UNSUPPORTED,
                        "kl_%s_get: the kernel needs %u bytes of dynamic shared memory, the emulated device grants %u",
                        desc->launcher, (unsigned)desc->max_dynamic_shared, (unsigned)eb->max_dynamic_shared);
    *fn = const_cast<emu::KernelEntry *>(k);
    attrs->max_threads = 1024;
    attrs->max_dynamic_shared = desc->max_dynamic_shared > 48u * 1024u ? desc->max_dynamic_shared : 48u * 1024u;
    return KL_SUCCESS;
}

kl_status emu_launch(const kl_backend *be, const kl_launch *l) {
    kl_emu_backend *eb = reinterpret_cast<kl_emu_backend *>(const_cast<kl_backend *>(be));
    const kl_kernel_desc *desc = l->kernel->desc;
    const emu::KernelEntry *k = static_cast<const emu::KernelEntry *>(l->kernel->fn);
    emu::g_launch = emu::BackendLaunch();
    emu::g_launch.launcher = desc->launcher;
    if (l->attributes != nullptr && (l->attributes->cluster[0] | l->attributes->cluster[1] | l->attributes->cluster[2]))
        return kl__fail(KL_ERROR_UNSUPPORTED, "kl_%s: thread-block clusters are not emulated", desc->launcher);
    // Packed as the driver packs: each argument at the kernel's own offset, its own size.
    uint32_t bytes = 0;
    for (uint32_t i = 0; i < k->num_params; ++i)
        bytes = k->params[i].offset + k->params[i].size > bytes ? k->params[i].offset + k->params[i].size : bytes;
    std::vector<unsigned char> packed(bytes + 8, 0);
    for (uint32_t i = 0; i < k->num_params; ++i) memcpy(packed.data() + k->params[i].offset, l->args[i], k->params[i].size);
    // Each pointer argument limited to its declared extent (kl_launch.extents;
    // unknown ones and NULL pointers are not limited).
    std::vector<emu::DeclaredExtent> windows;
    for (uint32_t i = 0; l->extents != nullptr && i < desc->num_extents; ++i) {
        const kl_extent_info *e = &desc->extents[i];
        if (l->extents[i] == KL_EXTENT_UNKNOWN || e->check >= desc->num_checks) continue;
        emu::g_launch.computable++;
        emu::DeclaredExtent w;
        memcpy(&w.base, l->args[e->arg], sizeof w.base);
        if (w.base == nullptr) {
            emu::g_launch.null_params.push_back(e->param);
            continue;
        }
        w.elements = l->extents[i];
        w.elem_bytes = e->elem_bytes;
        w.param = e->param;
        w.expr = desc->checks[e->check].expr;
        windows.push_back(w);
    }
    emu::set_declared_extents(std::string(desc->entry) + " (kl_" + desc->launcher + ")", std::move(windows));
    // A programmatic dependent launch (programmatic_serialization): its
    // threads' global accesses before griddepcontrol.wait are checked against
    // the grids still in flight (emu.h, programmatic dependent launch).
    emu::set_programmatic_launch(l->attributes != nullptr &&
                                 (l->attributes->flags & KL_LAUNCH_PROGRAMMATIC_SERIALIZATION) != 0u);
    const emu::Fault f = emu::launch(emu::Dim3{l->grid[0], l->grid[1], l->grid[2]},
                                     emu::Dim3{l->block[0], l->block[1], l->block[2]}, l->shared_bytes, k->call,
                                     packed.data());
    emu::g_last = f;
    if (!f.ok()) return kl__fail(KL_ERROR_LAUNCH_FAILED, "kl_%s: emulated launch failed: %s", desc->launcher, f.message.c_str());
    emu::g_launch.completed = true;
    if (emu::g_launch.computable > 0) emu::launched().insert(desc->launcher);
    eb->launches++;
    return KL_SUCCESS;
}

// klaunch's reference encoding: what the emulated copy engine (sm90_tma.cc) reads.
kl_status emu_tensor_map_encode(const kl_backend *, const kl_tensor_map_request *request, void *opaque) {
    kl_tensor_map_reference_encode(request, opaque);
    return KL_SUCCESS;
}

const kl_backend_ops kEmuOps = {
    "emulator",        emu_module_load, emu_module_unload, emu_module_info, emu_function_get, emu_launch,
    nullptr,  // device_arch
    emu_tensor_map_encode,
};

}  // namespace

void kl_emu_backend_init(kl_emu_backend *eb) {
    memset(eb, 0, sizeof *eb);
    eb->base.ops = &kEmuOps;
    eb->max_dynamic_shared = 232448u;
}

const void *kl_emu_image(const char *family, const char *variant) {
    for (const emu::Image *im : emu::registry())
        if (strcmp(im->family, family) == 0 && strcmp(im->variant, variant ? variant : "") == 0) return im;
    return nullptr;
}

size_t kl_emu_image_size(void) { return sizeof(emu::Image); }
