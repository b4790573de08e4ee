// kl_image_check and the CUDA backend's load path (issue 15, item 2) on the
// fatbins and cubins nvcc builds for this repository (every architecture of
// --//bazel:cuda_archs, sm_100's .nv.merc sections included): each intact
// one passes and reaches the (fake, fake_driver.h) driver; every damage of
// image_corpus.h, every truncation tried and every one that cuts a cubin by
// a byte is refused before the driver sees a byte. Images end where an
// unreadable page begins, so a read past one faults. Skips where the build
// had no CUDA toolkit (empty images).
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/cuda_backend.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "kernels/mla_prefill_fatbins.h"
#include "kernels/paged_decode_fatbins.h"
#include "tests/runtime/fake_driver.h"
#include "tests/runtime/image_corpus.h"

namespace {

using namespace kl_image_corpus;

struct Named {
    std::string name;
    Bytes bytes;
};

std::vector<Named> fatbins() {
    std::vector<Named> out;
    auto add = [&](const char *name, const unsigned char *b, size_t n) {
        if (n > 0) out.push_back({name, Bytes(b, b + n)});
    };
    add("paged_decode_gqa4_d128.fatbin", kl_fatbin_paged_decode_gqa4_d128, kl_fatbin_paged_decode_gqa4_d128_size);
    add("paged_decode_gqa8_d128.fatbin", kl_fatbin_paged_decode_gqa8_d128, kl_fatbin_paged_decode_gqa8_d128_size);
    add("mla_prefill_mistral_small_4.fatbin", kl_fatbin_mla_prefill_mistral_small_4,
        kl_fatbin_mla_prefill_mistral_small_4_size);
    add("mla_prefill_deepseek_v4_flash.fatbin", kl_fatbin_mla_prefill_deepseek_v4_flash,
        kl_fatbin_mla_prefill_deepseek_v4_flash_size);
    return out;
}

// kernels/*.cubin in the runfiles (//kernels:<family>_cubins).
std::vector<Named> cubins() {
    std::vector<Named> out;
    DIR *d = opendir("kernels");
    if (d == nullptr) return out;
    while (dirent *e = readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() > 6 && n.compare(n.size() - 6, 6, ".cubin") == 0) {
            Bytes b = ReadFile("kernels/" + n);
            if (!b.empty()) out.push_back({n, b});
        }
    }
    closedir(d);
    std::sort(out.begin(), out.end(), [](const Named &a, const Named &b) { return a.name < b.name; });
    return out;
}

class ImageReal : public ::testing::Test {
  protected:
    void SetUp() override {
        all_fatbins = fatbins();
        all_cubins = cubins();
        if (all_fatbins.empty() || all_cubins.empty())
            GTEST_SKIP() << "the fatbins and cubins are empty: built without a CUDA toolkit";
        kl_fake_driver::init(&cb);
    }
    static kl_status check(const Bytes &b) {
        Guarded g(b);
        EXPECT_TRUE(g.ok());
        return kl_image_check(g.data(), g.size(), nullptr);
    }
    // Refused by kl_image_check naming `expect`, and by kl_module_load before the driver.
    void expect_refused(const Damage &d) {
        EXPECT_EQ(check(d.image), KL_ERROR_INVALID_IMAGE) << d.name;
        EXPECT_NE(std::string(kl_last_error_message()).find(d.expect), std::string::npos)
            << d.name << ": expected '" << d.expect << "' in: " << kl_last_error_message();
        Guarded g(d.image);
        kl_module mod;
        const int before = kl_fake_driver::state().module_loads;
        EXPECT_EQ(kl_fake_driver::load_module(&cb, g.data(), g.size(), &mod), KL_ERROR_INVALID_IMAGE) << d.name;
        EXPECT_EQ(kl_fake_driver::state().module_loads, before) << d.name << " reached cuModuleLoadData";
    }
    std::vector<Named> all_fatbins, all_cubins;
    kl_cuda_backend cb;
};

TEST_F(ImageReal, EveryBuiltFatbinAndCubinPassesAndLoads) {
    EXPECT_EQ(all_fatbins.size(), 4u);
    EXPECT_GE(all_cubins.size(), 8u);
    for (const std::vector<Named> *set : {&all_fatbins, &all_cubins}) {
        for (const Named &n : *set) {
            EXPECT_EQ(check(n.bytes), KL_SUCCESS) << n.name << ": " << kl_last_error_message();
            Guarded g(n.bytes);
            kl_module mod;
            const int before = kl_fake_driver::state().module_loads;
            EXPECT_EQ(kl_fake_driver::load_module(&cb, g.data(), g.size(), &mod), KL_SUCCESS)
                << n.name << ": " << kl_last_error_message();
            EXPECT_EQ(kl_fake_driver::state().module_loads, before + 1) << n.name;
            EXPECT_TRUE(std::string(mod.family) == "paged_decode" || std::string(mod.family) == "mla_prefill")
                << n.name << ": " << mod.family;
            kl_module_unload(&mod);
        }
    }
}

// One image per architecture (cubins) and per family (fatbins) is enough to
// meet every layout nvcc writes; the damages are the same for the others.
std::vector<const Named *> one_per(const std::vector<Named> &set, const std::string &(*key)(const Named &, std::string &)) {
    std::vector<const Named *> out;
    std::vector<std::string> seen;
    for (const Named &n : set) {
        std::string k;
        key(n, k);
        if (std::find(seen.begin(), seen.end(), k) == seen.end()) {
            seen.push_back(k);
            out.push_back(&n);
        }
    }
    return out;
}
const std::string &arch_of(const Named &n, std::string &k) {  // "...sm_90.cubin" -> "sm_90"
    k = n.name.substr(n.name.rfind('.', n.name.size() - 7) + 1);
    return k;
}
const std::string &family_of(const Named &n, std::string &k) {  // "paged_decode_gqa4_d128.fatbin" -> "paged"
    k = n.name.substr(0, n.name.find('_'));
    return k;
}

TEST_F(ImageReal, EveryDamageOfABuiltCubinOfEachArchitectureIsRefused) {
    const std::vector<const Named *> picked = one_per(all_cubins, arch_of);
    EXPECT_GE(picked.size(), 4u);
    for (const Named *n : picked)
        for (const Damage &d : CubinDamages(n->bytes, n->name)) expect_refused(d);
}

TEST_F(ImageReal, EveryDamageOfABuiltFatbinOfEachFamilyIsRefused) {
    const std::vector<const Named *> picked = one_per(all_fatbins, family_of);
    EXPECT_EQ(picked.size(), 2u);
    for (const Named *n : picked)
        for (const Damage &d : FatbinDamages(n->bytes, n->name)) expect_refused(d);
}

TEST_F(ImageReal, CutsOfBuiltImagesAreRefused) {
    // Each image cut by one byte, and at 16 seeded lengths: a cubin's program
    // headers are its last bytes and a fatbin's header gives its size, so no
    // cut of either is whole.
    std::mt19937_64 rng(15);
    for (const std::vector<Named> *set : {&all_fatbins, &all_cubins}) {
        for (const Named &n : *set) {
            std::vector<size_t> lengths = {n.bytes.size() - 1, 1, 15, 16, 63, 64};
            for (int i = 0; i < 16; i++) lengths.push_back(1 + rng() % (n.bytes.size() - 1));
            for (size_t len : lengths) {
                const Bytes cut(n.bytes.begin(), n.bytes.begin() + static_cast<long>(len));
                EXPECT_EQ(check(cut), KL_ERROR_INVALID_IMAGE) << n.name << " cut to " << len << " bytes accepted";
            }
        }
    }
}

TEST_F(ImageReal, NeverReadsOutsideARandomlyDamagedBuiltCubin) {
    std::mt19937_64 rng(2);
    const Bytes &cubin = all_cubins.front().bytes;
    // Damage where the driver looks first: the headers and the tables at the end.
    const uint64_t shoff = get(cubin, 0x28, 8);
    for (int round = 0; round < 200; round++) {
        Bytes b = cubin;
        for (int e = 0; e < 3; e++) {
            const uint64_t at = rng() % 2 ? rng() % 64 : shoff + rng() % (b.size() - shoff);
            b[at] = static_cast<unsigned char>(rng());
        }
        const kl_status st = check(b);
        ASSERT_TRUE(st == KL_SUCCESS || st == KL_ERROR_INVALID_IMAGE) << kl_status_name(st);
    }
}

}  // namespace
