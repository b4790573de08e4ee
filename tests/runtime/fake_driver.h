// A fake CUDA driver behind a kl_cuda_backend (its entry points are
// function pointers in kl_cuda_backend.api), so kl_module_load's path
// through the CUDA backend runs without a GPU: it counts what reaches
// cuModuleLoadData, and answers cuModuleGetGlobal(kl__module_info) with the
// metadata text found in the image it was given, so an intact image loads.
// Include after klaunch/cuda_backend.h in the file that defines
// KLAUNCH_IMPLEMENTATION (it needs kl__cuda_ops).
#ifndef KLAUNCH_TESTS_RUNTIME_FAKE_DRIVER_H
#define KLAUNCH_TESTS_RUNTIME_FAKE_DRIVER_H

#include <algorithm>
#include <cstring>
#include <string>

namespace kl_fake_driver {

struct State {
    int module_loads = 0;         // calls of cuModuleLoadData
    const void *image = nullptr;  // what the test handed kl_module_load ...
    size_t image_size = 0;        // ... and its size, which the driver is never told
    std::string info;             // the metadata text found in the image
};
inline State &state() {
    static State s;
    return s;
}

inline int push(kl__cu_context) { return 0; }
inline int pop(kl__cu_context *c) {
    *c = nullptr;
    return 0;
}
inline int load(kl__cu_module *mod, const void *image) {
    State &s = state();
    s.module_loads++;
    // The test's own knowledge of the size: find the metadata as a real
    // driver would find the global's initial value.
    s.info.clear();
    if (image == s.image) {
        const char *b = static_cast<const char *>(image), *end = b + s.image_size;
        static const char magic[] = "klaunch-module 1\n";
        const char *at = std::search(b, end, magic, magic + sizeof magic - 1);
        if (at != end) s.info.assign(at, std::find(at, end, '\0'));
    }
    *mod = reinterpret_cast<kl__cu_module>(&s);
    return 0;
}
inline int unload(kl__cu_module) { return 0; }
inline int get_global(kl__cu_deviceptr *dptr, size_t *bytes, kl__cu_module, const char *name) {
    State &s = state();
    if (std::strcmp(name, "kl__module_info") != 0 || s.info.empty()) return 500;  // CUDA_ERROR_NOT_FOUND
    *dptr = reinterpret_cast<kl__cu_deviceptr>(s.info.c_str());
    *bytes = s.info.size() + 1;
    return 0;
}
inline int dtoh(void *dst, kl__cu_deviceptr src, size_t bytes) {
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    return 0;
}
inline int error_name(int, const char **s) {
    *s = "CUDA_ERROR_FAKE";
    return 0;
}

// A backend as kl_cuda_backend_init would leave it, on the fake driver.
inline void init(kl_cuda_backend *cb) {
    static int lib, ctx;
    state() = State();
    std::memset(cb, 0, sizeof *cb);
    cb->base.ops = &kl__cuda_ops;
    cb->lib = &lib;  // only compared with NULL
    cb->ctx = reinterpret_cast<kl__cu_context>(&ctx);
    cb->cc_major = 9;
    cb->api.ctx_push_current = push;
    cb->api.ctx_pop_current = pop;
    cb->api.module_load_data = load;
    cb->api.module_unload = unload;
    cb->api.module_get_global = get_global;
    cb->api.memcpy_dtoh = dtoh;
    cb->api.get_error_name = error_name;
}

// kl_module_load of `size` bytes at `image`, telling the fake the size.
inline kl_status load_module(kl_cuda_backend *cb, const void *image, size_t size, kl_module *out) {
    state().image = image;
    state().image_size = size;
    return kl_module_load(&cb->base, image, size, out);
}

}  // namespace kl_fake_driver

#endif
