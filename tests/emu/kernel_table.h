// kernel_table.h - how an emulated kernel translation unit (unity.py)
// describes itself to the emulated backend: one KernelEntry per kernel (its
// entry name, its parameters' layout as its own C++ signature gives it, a
// caller that unpacks the packed argument bytes into those parameters) and
// one Image per family and variant, registered at static initialisation.
#ifndef KLAUNCH_TESTS_EMU_KERNEL_TABLE_H
#define KLAUNCH_TESTS_EMU_KERNEL_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <utility>

namespace emu {

struct ParamSlot {
    uint32_t offset, size;
};

struct KernelEntry {
    const char *name;
    void (*call)(const void *packed);  // runs the kernel as the calling emulated thread
    uint32_t num_params;
    const ParamSlot *params;  // offsets and sizes by the kernel's parameter types (CUDA: natural alignment)
};

struct Image {
    const char *magic;  // "klaunch-emulated-image 1"
    const char *family, *variant;
    const char *module_info;  // the family's kl__module_info text for this variant
    const KernelEntry *kernels;
    uint32_t num_kernels;
};

// Registers an image for kl_emu_image() (emu_backend.h).
struct ImageRegistration {
    explicit ImageRegistration(const Image *image);
};

template <class F>
struct KernelSig;
template <class... A>
struct KernelSig<void(A...)> {
    static constexpr uint32_t n = sizeof...(A);
    struct Layout {
        ParamSlot p[n > 0 ? n : 1];
    };
    static constexpr Layout layout() {
        Layout l{};
        const uint32_t sizes[n > 0 ? n : 1] = {(uint32_t)sizeof(A)...};
        const uint32_t aligns[n > 0 ? n : 1] = {(uint32_t)alignof(A)...};
        uint32_t off = 0;
        for (uint32_t i = 0; i < n; ++i) {
            off = (off + aligns[i] - 1u) / aligns[i] * aligns[i];
            l.p[i] = ParamSlot{off, sizes[i]};
            off += sizes[i];
        }
        return l;
    }
    static constexpr Layout kLayout = layout();

    template <class T>
    __attribute__((no_sanitize_thread)) static T load(const unsigned char *buf, uint32_t off) {
        T v;
        memcpy(&v, buf + off, sizeof(T));
        return v;
    }
    template <void (*fn)(A...), size_t... I>
    __attribute__((no_sanitize_thread)) static void call_with(const unsigned char *buf, std::index_sequence<I...>) {
        fn(load<A>(buf, kLayout.p[I].offset)...);
    }
    template <void (*fn)(A...)>
    __attribute__((no_sanitize_thread)) static void call(const void *packed) {
        call_with<fn>(static_cast<const unsigned char *>(packed), std::index_sequence_for<A...>{});
    }
};

}  // namespace emu

#define KL_EMU_KERNEL(sym, name)                                                                            \
    {                                                                                                     \
        name, &::emu::KernelSig<decltype(sym)>::template call<&sym>, ::emu::KernelSig<decltype(sym)>::n, \
            ::emu::KernelSig<decltype(sym)>::kLayout.p                                                   \
    }

#endif  // KLAUNCH_TESTS_EMU_KERNEL_TABLE_H
