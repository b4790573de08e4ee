// The one translation unit of the wrapper tests that holds the runtime's
// implementation (klaunch.h and the recording backend).
#define KLAUNCH_IMPLEMENTATION
#include "tests/support/wrapper_support.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kltest {

std::string ModuleText(const std::string &family, const std::string &variant,
                       const std::vector<std::pair<std::string, long long>> &consts) {
    std::ostringstream s;
    s << "klaunch-module 1\nfamily " << family << "\nvariant " << variant
      << "\nspec_hash sha256:test\nsource_hash unknown\n";
    for (const auto &c : consts) s << "const " << c.first << " " << c.second << "\n";
    return s.str();
}

// Variant constants as the contract gives them (kernel-contract.md).
std::string MlaPrefillModuleText(const std::string &variant) {
    if (variant == "mistral_small_4") return ModuleText("mla_prefill", variant, {{"MLA_HDIM", 320}, {"MLA_V_HAS_ROPE", 0}});
    return ModuleText("mla_prefill", variant, {{"MLA_HDIM", 576}, {"MLA_V_HAS_ROPE", 1}});
}

std::string PagedDecodeModuleText(const std::string &variant) {
    long long width = variant == "gqa4_d128" ? 4 : 8;
    return ModuleText("paged_decode", variant, {{"DECODE_GQA_PACK_WIDTH", width}, {"DECODE_GQA_PACK_HEAD_DIM", 128}});
}

RecordHarness::RecordHarness() {
    std::memset(records_, 0xa5, sizeof records_);
    kl_record_backend_init(&rb_, records_, kCapacity);
}

RecordHarness::~RecordHarness() {
    for (kl_module *m : modules_) {
        kl_module_unload(m);
        delete m;
    }
}

const kl_module *RecordHarness::Load(const std::string &text) {
    kl_module *m = new kl_module;
    modules_.push_back(m);
    kl_status st = kl_module_load(&rb_.base, text.c_str(), text.size(), m);
    EXPECT_STREQ("KL_SUCCESS", kl_status_name(st)) << kl_last_error_message();
    return m;
}

void RecordHarness::Clear() {
    kl_record_backend_clear(&rb_);
    std::memset(records_, 0xa5, sizeof records_);
}

unsigned SpecLine(const std::string &file, const std::string &launcher, const std::vector<std::string> &fragments) {
    std::ifstream in(file);
    if (!in) {
        ADD_FAILURE() << "cannot read " << file << " (run from the workspace root)";
        return 0;
    }
    std::string line;
    unsigned n = 0;
    const std::string head = "- name: " + launcher;
    bool in_launcher = false;
    size_t next = 0;
    while (std::getline(in, line)) {
        n++;
        if (!in_launcher) {
            size_t at = line.find(head);
            // The name must end there: mla_fused_prefill is not mla_fused_prefill_x.
            if (at != std::string::npos && line.find_first_not_of(" \t\r", at + head.size()) == std::string::npos) {
                in_launcher = true;
                if (fragments.empty()) return n;
            }
            continue;
        }
        if (line.find("- name: ") != std::string::npos) break; // next launcher
        if (line.find(fragments[next]) != std::string::npos && ++next == fragments.size()) return n;
    }
    ADD_FAILURE() << file << ": no line with '" << (fragments.empty() ? head : fragments.back()) << "' under '" << head
                  << "'";
    return 0;
}

std::string SpecRef(const std::string &file, const std::string &launcher, const std::vector<std::string> &fragments) {
    return file + ":" + std::to_string(SpecLine(file, launcher, fragments));
}

bool HasSpecRef(const std::string &message, const std::string &ref) {
    for (size_t at = message.find(ref); at != std::string::npos; at = message.find(ref, at + 1)) {
        size_t end = at + ref.size();
        if (end == message.size() || message[end] < '0' || message[end] > '9') return true;
    }
    return false;
}

void LogError(kl_status status, const char *message, void *user) {
    CallbackLog *log = static_cast<CallbackLog *>(user);
    log->calls++;
    log->status = status;
    log->message = message ? message : "(null)";
}

void ExpectRefusal(const Refusal &r, kl_status status, const std::vector<std::string> &fragments,
                   const std::string &spec_ref, const char *which) {
    SCOPED_TRACE(which);
    EXPECT_STREQ(kl_status_name(status), kl_status_name(r.status));
    EXPECT_STREQ(kl_status_name(status), kl_status_name(kl_last_error()));
    EXPECT_EQ(0u, r.records) << "a refused call recorded a launch";
    EXPECT_EQ(1, r.callbacks) << "the error callback should run once per refusal";
    EXPECT_STREQ(kl_status_name(status), kl_status_name(r.callback_status));
    EXPECT_EQ(r.message, r.callback_message) << "the callback saw another message than kl_last_error_message()";
    for (const std::string &f : fragments)
        EXPECT_NE(std::string::npos, r.message.find(f)) << "message lacks '" << f << "': " << r.message;
    if (!spec_ref.empty()) {
        EXPECT_TRUE(HasSpecRef(r.message, spec_ref)) << "message lacks " << spec_ref << ": " << r.message;
    }
}

void ExpectTestedChecks(const kl_kernel_desc *desc, const std::vector<std::string> &tested) {
    SCOPED_TRACE(desc->launcher);
    std::vector<std::string> declared;
    for (uint32_t i = 0; i < desc->num_checks; i++) {
        const kl_check_info &c = desc->checks[i];
        if (std::strcmp(c.what, "precondition") == 0) declared.push_back(c.expr);
        EXPECT_STRNE("shared_bytes", c.what) << "the seed launches with no shared memory; test " << c.expr;
    }
    EXPECT_EQ(tested, declared) << "preconditions declared by the spec vs those the tests cover";
}

void ExpectSeedLaunch(const RecordHarness &h, const kl_kernel_desc *desc, const char *entry, Dim3 grid, Dim3 block,
                      const std::vector<unsigned char> &args) {
    ASSERT_EQ(1u, h.count()) << "one launch, one record";
    const kl_record &r = h.record(0);
    EXPECT_EQ(desc, r.desc);
    ASSERT_NE(nullptr, r.entry);
    EXPECT_STREQ(entry, r.entry);
    EXPECT_EQ(grid.x, r.grid[0]);
    EXPECT_EQ(grid.y, r.grid[1]);
    EXPECT_EQ(grid.z, r.grid[2]);
    EXPECT_EQ(block.x, r.block[0]);
    EXPECT_EQ(block.y, r.block[1]);
    EXPECT_EQ(block.z, r.block[2]);
    EXPECT_EQ(0u, r.shared_bytes) << "the seed launches with no dynamic shared memory";
    EXPECT_EQ(FakeStream(), r.stream);
    ASSERT_EQ(args.size(), r.arg_bytes) << "size of the kernel's parameter buffer";
    ASSERT_LE(args.size(), sizeof r.args);
    if (std::memcmp(args.data(), r.args, args.size()) != 0) {
        std::ostringstream s;
        for (size_t i = 0; i < args.size(); i++) {
            char row[64];
            std::snprintf(row, sizeof row, "  %3zu: seed %02x  recorded %02x%s\n", i, args[i], r.args[i],
                          args[i] != r.args[i] ? "  <--" : "");
            s << row;
        }
        ADD_FAILURE() << "argument bytes differ from the seed's packing:\n" << s.str();
    }
}

} // namespace kltest
