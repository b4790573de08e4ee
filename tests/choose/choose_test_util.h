// Shared by the chooser tests (tests/choose/): recording-backend modules of
// each family's variants, with the sm_90a image where a test wants the
// copy-engine and wgmma launchers to load, and the two devices the
// project runs on.
#ifndef KLAUNCH_TESTS_CHOOSE_UTIL_H
#define KLAUNCH_TESTS_CHOOSE_UTIL_H

#include <gtest/gtest.h>

#include <string>

#include "klaunch/choose.h"
#include "klaunch/record_backend.h"

namespace choose_test {

// H100 SXM and H200 as the driver describes them (132 SMs each; 50 and 60
// MiB of L2; 80 and 141 GB), with no bandwidth.
inline kl_device h100() { return kl_device{9, 0, 132, 50ull << 20, 85031714816ull, 0}; }
inline kl_device h200() { return kl_device{9, 0, 132, 60ull << 20, 150754820096ull, 0}; }
inline kl_device a100() { return kl_device{8, 0, 108, 40ull << 20, 85899345920ull, 0}; }

// One module of a family's variant on its own recording backend: its
// metadata as the generated variant table writes it, plus `cuda_arch 900a`
// when sm90a (so the sm_90a launchers' kl_X_get succeeds).
class Module {
  public:
    Module(const kl_variant_info *variants, const char *variant, bool sm90a, uint32_t max_dynamic_shared = 227 * 1024) {
        kl_record_backend_init(&rb_, records_, 4);
        rb_.max_dynamic_shared = max_dynamic_shared;
        const kl_variant_info *v = variants;
        while (v->name != nullptr && std::string(v->name) != variant) v++;
        EXPECT_NE(v->name, nullptr) << variant;
        if (v->name == nullptr) return;
        std::string text = v->module_info;
        if (sm90a) text += "cuda_arch 900a\n";
        loaded_ = kl_module_load(&rb_.base, text.c_str(), text.size(), &mod_) == KL_SUCCESS;
        EXPECT_TRUE(loaded_) << kl_last_error_message();
    }
    ~Module() {
        if (loaded_) kl_module_unload(&mod_);
    }
    Module(const Module &) = delete;
    Module &operator=(const Module &) = delete;
    const kl_module *get() const { return &mod_; }

  private:
    kl_record records_[4];
    kl_record_backend rb_;
    kl_module mod_;
    bool loaded_ = false;
};

}  // namespace choose_test

#endif
