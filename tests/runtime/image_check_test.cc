// kl_image_check (issue 15, item 2) on images built here from the ELF64 and
// fatbin layouts (image_corpus.h), so it runs without a CUDA toolkit and
// under --config=asan: the intact cubin and fatbin pass; every damaged one,
// every truncation and every randomly damaged one is refused or passes
// without a read outside the image (each image ends where an unreadable
// page begins, so a read past it faults). image_real_test does the same
// with the fatbins and cubins nvcc builds.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/image.h"
#include "klaunch/klaunch.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/runtime/image_corpus.h"

namespace {

using namespace kl_image_corpus;

kl_status check(const Bytes &b, kl_image_kind *kind = nullptr) {
    Guarded g(b);
    EXPECT_TRUE(g.ok());
    return kl_image_check(g.data(), g.size(), kind);
}

void expect_refused(const Damage &d, const std::string &prefix) {
    const kl_status st = check(d.image);
    EXPECT_EQ(st, KL_ERROR_INVALID_IMAGE) << d.name << ": " << kl_status_name(st);
    const std::string msg = kl_last_error_message();
    EXPECT_EQ(msg.rfind("KL_ERROR_INVALID_IMAGE: kl_image_check: " + prefix, 0), 0u) << d.name << ": " << msg;
    EXPECT_NE(msg.find(d.expect), std::string::npos) << d.name << ": expected '" << d.expect << "' in: " << msg;
}

TEST(ImageCheck, AcceptsTheIntactCubinAndFatbin) {
    kl_image_kind kind = KL_IMAGE_UNKNOWN;
    EXPECT_EQ(check(SyntheticCubin(), &kind), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kind, KL_IMAGE_CUBIN);
    EXPECT_EQ(check(SyntheticFatbin(), &kind), KL_SUCCESS) << kl_last_error_message();
    EXPECT_EQ(kind, KL_IMAGE_FATBIN);
}

TEST(ImageCheck, TakesAnythingElseAsPtxText) {
    const std::string ptx = ".version 9.0\n.target sm_90\n";
    kl_image_kind kind = KL_IMAGE_UNKNOWN;
    EXPECT_EQ(check(Bytes(ptx.begin(), ptx.end()), &kind), KL_SUCCESS);
    EXPECT_EQ(kind, KL_IMAGE_PTX);
}

TEST(ImageCheck, RefusesAnEmptyImage) {
    EXPECT_EQ(kl_image_check(nullptr, 0, nullptr), KL_ERROR_INVALID_IMAGE);
    EXPECT_EQ(kl_image_check("x", 0, nullptr), KL_ERROR_INVALID_IMAGE);
}

TEST(ImageCheck, RefusesEveryDamagedCubinNamingWhatIsWrong) {
    const std::vector<Damage> damages = CubinDamages(SyntheticCubin(), "synthetic cubin");
    ASSERT_GE(damages.size(), 45u);
    for (const Damage &d : damages) expect_refused(d, "cubin: ");
}

TEST(ImageCheck, RefusesEveryDamagedFatbinNamingWhatIsWrong) {
    const std::vector<Damage> damages = FatbinDamages(SyntheticFatbin(), "synthetic fatbin");
    ASSERT_GE(damages.size(), 25u);
    for (const Damage &d : damages) expect_refused(d, "fatbin");
}

TEST(ImageCheck, TheCubinInsideAFatbinIsNamedByItsEntry) {
    for (const Damage &d : FatbinDamages(SyntheticFatbin(), "synthetic fatbin")) {
        if (d.name.find("its cubin's e_phoff") == std::string::npos) continue;
        EXPECT_EQ(check(d.image), KL_ERROR_INVALID_IMAGE);
        EXPECT_NE(std::string(kl_last_error_message()).find("fatbin entry 1 (ELF for sm_90 at byte 16): "),
                  std::string::npos)
            << kl_last_error_message();
        return;
    }
    FAIL() << "no such damage";
}

TEST(ImageCheck, RefusesEveryTruncation) {
    // Program headers close the cubin, and a fatbin's header gives its size:
    // no prefix of either is a whole image.
    for (const Bytes &whole : {SyntheticCubin(), SyntheticFatbin()}) {
        for (size_t n = 1; n < whole.size(); n++) {
            const Bytes cut(whole.begin(), whole.begin() + static_cast<long>(n));
            ASSERT_EQ(check(cut), KL_ERROR_INVALID_IMAGE) << n << " of " << whole.size() << " bytes accepted";
        }
    }
}

// Seeded random damage to the bytes the checks read (headers and tables):
// whatever comes out, the check answers without reading outside the image.
TEST(ImageCheck, NeverReadsOutsideARandomlyDamagedImage) {
    std::mt19937_64 rng(20261201);
    int refused = 0, accepted = 0;
    const Bytes cubin = SyntheticCubin(), fatbin = SyntheticFatbin();
    for (int round = 0; round < 20000; round++) {
        Bytes b = round % 2 ? cubin : fatbin;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; e++) {
            const size_t at = rng() % b.size();
            switch (rng() % 4) {
            case 0: b[at] = static_cast<unsigned char>(rng()); break;
            case 1: b[at] = 0xff; break;
            case 2: b[at] ^= static_cast<unsigned char>(1u << (rng() % 8)); break;
            default: b.resize(1 + rng() % b.size()); break;
            }
        }
        const kl_status st = check(b);
        ASSERT_TRUE(st == KL_SUCCESS || st == KL_ERROR_INVALID_IMAGE) << kl_status_name(st);
        if (st == KL_SUCCESS) accepted++;
        else refused++;
    }
    EXPECT_GT(refused, 10000);
    RecordProperty("refused", refused);
    RecordProperty("accepted", accepted);
}

}  // namespace
