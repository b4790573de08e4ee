/* emu_backend.h - a klaunch backend that runs kernels on the CPU emulator.
 *
 * The generated launchers (kl_<name>(...)) go through it exactly as through
 * the CUDA backend: their checks, then kl_launch (grid, block, shared
 * memory, one pointer per argument). The backend packs the arguments by the
 * kernel's OWN parameter types (as the driver packs by the cubin's
 * parameter records) and runs the kernel from its source on the emulator
 * (tests/emu/emu.h), so an emulated test also proves that the launcher's
 * packing and the kernel's parameters agree; kl_X_get compares the two
 * layouts first (KL_ERROR_LAYOUT_MISMATCH, as the CUDA backend does with
 * cuFuncGetParamInfo).
 *
 * USE (C++; the emulated kernels are C++ compiled from CUDA sources)
 *     #include "tests/emu/emu_backend.h"
 *     kl_emu_backend eb;
 *     kl_emu_backend_init(&eb);
 *     kl_module mod;
 *     kl_module_load(&eb.base, kl_emu_image("paged_decode", "gqa8_d128"), kl_emu_image_size(), &mod);
 *     kl_paged_decode_attn_bf16_get(&k, &mod);
 *     emu::Buffer<kl_bf16> out(n, emu::Access::kWrite, "output");   // host memory the kernel may touch
 *     kl_paged_decode_attn_bf16(&k, q.data(), ..., out.data(), ..., NULL);   // runs now, on the CPU
 *
 * Images: every kl_emulated_family library (tests/emu/emu.bzl) linked into
 * the program registers one per variant; kl_emu_image(family, variant)
 * finds it (NULL if not linked). The image's metadata is the family's real
 * kl__module_info, so loading checks family, variant, spec hash and
 * constants as for a fatbin.
 *
 * ERROR REPORTING
 *   As klaunch.h. A fault of the emulated kernel (out-of-bounds access,
 *   shared-memory race, deadlock, ...) is KL_ERROR_LAUNCH_FAILED with the
 *   emulator's report (what, thread, block, address) in
 *   kl_last_error_message(); emu::last_fault() has it as a struct. Thread-
 *   block clusters are not emulated: such a launch is KL_ERROR_UNSUPPORTED.
 */
#ifndef KLAUNCH_TESTS_EMU_EMU_BACKEND_H
#define KLAUNCH_TESTS_EMU_EMU_BACKEND_H

#include <stddef.h>

#include <string>
#include <vector>

#include "klaunch/klaunch.h"
#include "tests/emu/emu.h"

typedef struct kl_emu_backend {
    kl_backend base;             /* first member: pass &eb.base where a kl_backend* is wanted */
    uint32_t max_dynamic_shared; /* the emulated device's opt-in limit (default 232448, an H200's 227 KiB) */
    uint32_t launches;           /* launches run to completion */
} kl_emu_backend;

void kl_emu_backend_init(kl_emu_backend *eb);
/* The emulated image of `family`/`variant` linked into this program, or NULL. */
const void *kl_emu_image(const char *family, const char *variant);
size_t kl_emu_image_size(void);

namespace emu {
/* The outcome of the last emulated launch (kind kNone after a clean one). */
const Fault &last_fault();

/* The last launch through the backend: its launcher (desc->launcher),
 * whether it ran to completion, how many of its pointers declare a
 * computable extent, and those of them passed NULL (not limited, so not
 * shown reached). emu_test::extents_reached(launcher) reads it. */
struct BackendLaunch {
    std::string launcher;
    bool completed = false;
    uint32_t computable = 0;
    std::vector<std::string> null_params;
};
const BackendLaunch &last_backend_launch();
/* A test saw every declared extent of a launch of `launcher` reached
 * (emu_test::extents_reached). At the end of a whole run (no test filter,
 * no sharding) every launcher with a computable extent that ran to
 * completion in the program must have been noted, else the run fails
 * naming it: a launcher an emulated test runs has a tightness test. */
void note_extents_asserted(const std::string &launcher);

/* Runs kernel `entry` of an image directly (kernels without a spec, the
 * emulator's own tests): the arguments are packed by the kernel's own
 * parameter layout; their count and sizes must match it (kLaunch fault). */
Fault run_packed(const void *image, const char *entry, Dim3 grid, Dim3 block, uint32_t dynamic_shared,
                 const void *const *args, const size_t *sizes, uint32_t n);
template <class... A>
Fault run(const void *image, const char *entry, Dim3 grid, Dim3 block, uint32_t dynamic_shared, const A &...args) {
    const void *ptrs[sizeof...(A) + 1] = {static_cast<const void *>(&args)..., nullptr};
    const size_t sizes[sizeof...(A) + 1] = {sizeof(A)..., 0};
    return run_packed(image, entry, grid, block, dynamic_shared, ptrs, sizes, (uint32_t)sizeof...(A));
}
}  // namespace emu

#endif /* KLAUNCH_TESTS_EMU_EMU_BACKEND_H */
