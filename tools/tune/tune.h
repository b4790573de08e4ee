// tune.h: the tuner's pipeline (issue 45), over any backend and any clock.
//
// For every operation (an Op: one spec operation of the generated headers,
// kl_<op>_op, its chooser and its launchers), every shape of its grid,
// every alternative that applies there (the chooser's own test: a one-row
// table naming it, which the chooser takes only when the alternative
// applies with those tunables) and each value of a small candidate set of
// its tunables (candidate_values), a Clock times the alternative's launch
// under each policy (eager: launches one by one; graph: replays of a
// captured graph). Where an alternative has several candidates they are
// screened first (Clock::screen_us, a quick eager estimate) and only the
// fastest and the rule's own value are timed in full (Options::exhaustive:
// all of them), in rounds (Options::rounds: each candidate once a round,
// the order rotated, a time the median of its rounds, so a clock that
// drifts over a shape's launches favours no candidate); "best" below is
// the best of what was timed in full. The
// best time per (shape, policy, alternative) becomes a row of a choice
// table (klaunch/choose.h's format, for the present device), which is
// written, read back with the strict loader, and then the regret of the
// compiled-in chooser (kl_<op>_choose without a table: today the rule) and
// of the chooser given the new table is printed against the exhaustive
// best of every shape: median, worst and the worst shape, per operation and
// policy.
//
// What differs between the GPU program (tools/tune/tune_gpu.cc: CUDA
// events and graphs) and the CPU test (tune_emu_test.cc: the emulator and
// a fake clock) is a Mem (where buffers live), a Clock and the modules the
// Ops take their kernels from; the Ops themselves (ops.h) are shared.
//
// Progress goes to stderr (one line a shape: i/n, elapsed, ETA); results
// to stdout.
#ifndef KLAUNCH_TOOLS_TUNE_TUNE_H
#define KLAUNCH_TOOLS_TUNE_TUNE_H

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "klaunch/choose.h"
#include "klaunch/klaunch.h"

namespace tune {

[[noreturn]] inline void die(const std::string &what) {
    std::fprintf(stderr, "tune: %s\n", what.c_str());
    std::exit(1);
}

inline void ok(kl_status st, const std::string &what) {
    if (st != KL_SUCCESS) die(what + ": " + kl_last_error_message());
}

// ---- where buffers live -------------------------------------------------------------

// Device memory (or the emulator's registered host memory). Buffers are
// freed by free_all() (after each shape) or one by one.
class Mem {
  public:
    virtual ~Mem() {}
    // At least 256-byte aligned; contents unspecified.
    virtual void *alloc(size_t bytes, const char *name) = 0;
    virtual void free(void *p) = 0;
    virtual void free_all() = 0;
    virtual void upload(void *dst, const void *src, size_t bytes) = 0;
    virtual void zero(void *dst, size_t bytes) = 0;
    // dst[0 .. bytes) from `pattern` (a host pattern this Mem may keep a
    // device copy of, keyed by its address: pass long-lived vectors) from
    // offset `offset` (taken modulo the pattern's size, rounded down to a
    // multiple of `unit`), wrapping around.
    virtual void fill(void *dst, size_t bytes, const std::vector<unsigned char> &pattern, size_t offset,
                      size_t unit) = 0;
    virtual void sync() = 0;
    // Rotations: the input sets a shape of `bytes` a set gets (1 on the emulator).
    virtual size_t sets(size_t bytes) const = 0;
};

// Allocation helper: T elements.
template <class T>
T *alloc_n(Mem &m, size_t n, const char *name) {
    return static_cast<T *>(m.alloc(std::max<size_t>(n, 1) * sizeof(T), name));
}

// ---- timing ------------------------------------------------------------------------

// What is being timed, for a clock that computes rather than measures.
struct Trial {
    std::string op, shape;
    std::vector<uint32_t> keys;
    uint32_t alternative = 0;
    std::vector<uint32_t> tunables;
};

// launch(run, stream): queue one run of the alternative (run indexes the
// input sets, modulo their count).
typedef std::function<void(int run, kl_stream stream)> Launch;

class Clock {
  public:
    virtual ~Clock() {}
    // Microseconds one launch takes under `policy`; < 0 when this clock
    // cannot time that policy here.
    virtual double time_us(kl_choice_policy policy, const Trial &trial, const Launch &launch) = 0;
    // A quick eager estimate (a few launches): which candidate of an
    // alternative's tunables to time in full.
    virtual double screen_us(const Trial &trial, const Launch &launch) = 0;
    virtual kl_stream stream() = 0;
    virtual const char *name() const = 0;
};

// A deterministic stand-in (the CPU test): launches once (proving the
// launch works), then returns a time made from the trial alone, in
// microseconds with three decimals (what a table row holds), distinct
// for distinct trials in all but a one-in-a-million chance.
inline double fake_time_us(kl_choice_policy policy, const Trial &t) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) {
        for (int i = 0; i < 8; i++) {
            h ^= (v >> (8 * i)) & 0xffu;
            h *= 1099511628211ull;
        }
    };
    for (char c : t.op) mix(static_cast<unsigned char>(c));
    for (uint32_t k : t.keys) mix(k);
    mix(t.alternative);
    for (uint32_t v : t.tunables) mix(v);
    mix(static_cast<uint64_t>(policy) + 77u);
    return 1.0 + static_cast<double>(h % 1000000u) / 1000.0;
}

class FakeClock : public Clock {
  public:
    explicit FakeClock(Mem *mem) : mem_(mem) {}
    double time_us(kl_choice_policy policy, const Trial &trial, const Launch &launch) override {
        if (launched_.insert(key(trial)).second) {
            launch(0, nullptr);
            mem_->sync();
            launches++;
        }
        return fake_time_us(policy, trial);
    }
    // The eager time itself: screening keeps what full timing would find best.
    double screen_us(const Trial &trial, const Launch &launch) override {
        return time_us(KL_CHOICE_EAGER, trial, launch);
    }
    kl_stream stream() override { return nullptr; }
    const char *name() const override { return "fake (deterministic, not a measurement)"; }
    uint64_t launches = 0;

  private:
    static std::string key(const Trial &t) {
        std::ostringstream w;
        w << t.op << '|' << t.shape << '|' << t.alternative;
        for (uint32_t v : t.tunables) w << ',' << v;
        return w.str();
    }
    Mem *mem_;
    std::set<std::string> launched_;
};

// ---- operations ---------------------------------------------------------------------

// A choice as the tuner sees it: the alternative, every tunable of the
// operation (0 where not the alternative's) and its source.
struct Pick {
    int alternative = -1;
    std::vector<uint32_t> tunables;
    kl_choice_source source = KL_CHOICE_NONE;
};

// One spec operation: its descriptor, its grid, its buffers and its launchers.
class Op {
  public:
    virtual ~Op() {}
    virtual const kl_choice_op &desc() const = 0;
    virtual size_t num_shapes() const = 0;
    virtual std::string shape_name(size_t i) const = 0;
    // The shape's keys, in desc()'s key order.
    virtual std::vector<uint32_t> keys(size_t i) const = 0;
    // The chooser's view of shape i (no buffers): choose() and applies() after it.
    virtual void set_shape(size_t i) = 0;
    // Buffers and inputs of the current shape (after set_shape).
    virtual void prepare(Mem &mem) = 0;
    // The chooser of the current shape with `table` (NULL: the compiled-in
    // table, then the rule) and `kernels_mask` (bit a: alternative a's
    // handle passed; others NULL).
    virtual Pick choose(const kl_choice_table *table, kl_choice_policy policy, const kl_device &dev,
                        uint32_t kernels_mask) = 0;
    // Untimed work before an alternative's trials (e.g. a schedule its launches read).
    virtual void before(Mem &, uint32_t /*alternative*/, const std::vector<uint32_t> & /*tunables*/, kl_stream) {}
    // Queues one run of the alternative with these tunables.
    virtual void launch(uint32_t alternative, const std::vector<uint32_t> &tunables, int run, kl_stream stream) = 0;
    // Which launchers each alternative's launch calls (for the report).
    virtual std::string launcher(uint32_t alternative) const = 0;
};

inline uint32_t all_kernels(const kl_choice_op &op) {
    return op.num_alternatives >= 32 ? 0xffffffffu : (1u << op.num_alternatives) - 1u;
}

// The chooser's own applicability test: a table of one row naming the
// alternative with these tunables at this shape; the chooser takes it only
// when the alternative applies with them (choose.h, WHAT A CHOOSER DOES).
inline bool applies(Op &op, const kl_device &dev, size_t shape, uint32_t alt, const std::vector<uint32_t> &tun) {
    const kl_choice_op &d = op.desc();
    kl_choice_device cd;
    std::memset(&cd, 0, sizeof cd);
    std::snprintf(cd.id, sizeof cd.id, "probe");
    cd.cc_major = dev.cc_major;
    cd.cc_minor = dev.cc_minor;
    cd.sm_count = dev.sm_count;
    cd.l2_bytes = dev.l2_bytes;
    cd.mem_gib = kl_choice_mem_gib(dev.mem_bytes);
    kl_choice_row r;
    std::memset(&r, 0, sizeof r);
    r.op = d.name;
    r.alternative = d.alternatives[alt];
    r.time_ns = 1000;
    const std::vector<uint32_t> k = op.keys(shape);
    for (uint32_t i = 0; i < d.num_keys; i++) r.keys[i] = k[i];
    for (uint32_t i = 0; i < d.num_tunables; i++) r.tunables[i] = tun[i];
    bool any = false;
    for (const kl_choice_policy pol : {KL_CHOICE_EAGER, KL_CHOICE_GRAPH}) {
        r.policy = pol;
        const kl_choice_table t = {&cd, 1u, &r, 1u, nullptr, 0u};
        const Pick p = op.choose(&t, pol, dev, all_kernels(d));
        const bool yes = p.source == KL_CHOICE_TABLE && p.alternative == static_cast<int>(alt) && p.tunables == tun;
        if (pol == KL_CHOICE_EAGER) any = yes;
        else if (yes != any) die(std::string(d.name) + ": the chooser's applicability differs between policies");
    }
    return any;
}

// An empty table that stops the chooser before the compiled-in table: the
// rule alone, whatever kl_choice_builtin_table() holds.
inline const kl_choice_table *rule_only() {
    static const kl_choice_table t = {nullptr, 0u, nullptr, 0u, nullptr, KL_CHOICE_TABLE_ONLY};
    return &t;
}

// The rule's tunables for `alt` at the current shape: the chooser with only
// that alternative's handle and no table, which its rule (or the first that
// applies) must then take with its defaults. False when it does not apply.
inline bool rule_defaults(Op &op, const kl_device &dev, uint32_t alt, std::vector<uint32_t> *tun) {
    const Pick p = op.choose(rule_only(), KL_CHOICE_EAGER, dev, 1u << alt);
    if (p.alternative != static_cast<int>(alt) || p.source != KL_CHOICE_RULE) return false;
    *tun = p.tunables;
    return true;
}

// ---- options ----------------------------------------------------------------------

struct Options {
    std::string out;                       // --out FILE (the table)
    std::vector<kl_choice_policy> policies = {KL_CHOICE_EAGER, KL_CHOICE_GRAPH};
    int runs = 16;                         // --runs N
    int rounds = 3;                        // --rounds N: full timing's rounds (a time: the median of its rounds)
    std::string table;                     // --table FILE: a table whose chooser's regret is printed too
    std::vector<std::string> only;         // --only OP[,OP...]
    bool quick = false;                    // --quick
    bool exhaustive = false;               // --exhaustive: every candidate timed in full (no screening)
    std::string device_id;                 // --device-id ID (default: from the device's name)
};

inline const char *policy_name(kl_choice_policy p) { return p == KL_CHOICE_GRAPH ? "graph" : "eager"; }

// Parses argv (exit 2 with the usage on a bad argument). `extra` takes an
// argument it knows (returning the arguments it used, 0 if not its own).
inline Options parse_options(int argc, char **argv, const char *usage,
                             const std::function<int(int, char **)> &extra = nullptr) {
    Options o;
    auto bad = [&](const std::string &why) {
        std::fprintf(stderr, "tune: %s\n%s", why.c_str(), usage);
        std::exit(2);
    };
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) bad(a + " needs a value");
            return argv[++i];
        };
        auto count = [&](long lo, long hi) -> int {
            const std::string v = value();
            char *end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < lo || n > hi)
                bad(a + ": a count of " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + v + "'");
            return static_cast<int>(n);
        };
        if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        } else if (a == "--out") {
            o.out = value();
        } else if (a == "--runs") {
            o.runs = count(1, 10000);
        } else if (a == "--rounds") {
            o.rounds = count(1, 100);
        } else if (a == "--table") {
            o.table = value();
        } else if (a == "--policies") {
            std::stringstream list(value());
            std::string w;
            o.policies.clear();
            while (std::getline(list, w, ',')) {
                if (w == "eager") o.policies.push_back(KL_CHOICE_EAGER);
                else if (w == "graph") o.policies.push_back(KL_CHOICE_GRAPH);
                else bad("--policies: eager and/or graph, not '" + w + "'");
            }
            if (o.policies.empty()) bad("--policies needs eager, graph or both");
        } else if (a == "--only") {
            std::stringstream list(value());
            std::string w;
            while (std::getline(list, w, ','))
                if (!w.empty()) o.only.push_back(w);
            if (o.only.empty()) bad("--only needs an operation");
        } else if (a == "--quick") {
            o.quick = true;
        } else if (a == "--exhaustive") {
            o.exhaustive = true;
        } else if (a == "--device-id") {
            o.device_id = value();
        } else {
            const int used = extra ? extra(i, argv) : 0;
            if (used <= 0) bad("unknown argument '" + a + "'");
            i += used - 1;
        }
    }
    return o;
}

// ---- the candidates ---------------------------------------------------------------

// Values tried for one tunable, by its name, around the rule's default d.
inline std::vector<uint32_t> candidate_values(const std::string &name, uint32_t d, uint32_t sms, bool quick) {
    std::vector<uint32_t> v;
    if (name == "num_splits") {
        v = quick ? std::vector<uint32_t>{1, 4} : std::vector<uint32_t>{1, 2, 4, 8, 12, 16, 24, 32};
    } else if (name == "num_ctas") {
        v = {std::max(1u, sms / 2), sms, 2 * sms};
        if (quick) v.resize(1);
    } else if (name == "num_parts") {
        if (!quick) v = {std::max(1u, d / 4), std::max(1u, d / 2), std::min(65535u, d * 2), std::min(65535u, d * 4)};
    }
    v.push_back(d);  // the rule's own value, always: the rule's regret needs its time
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    v.erase(std::remove(v.begin(), v.end(), 0u), v.end());
    return v;
}

// ---- the run ------------------------------------------------------------------------

struct Measure {
    size_t op = 0, shape = 0;
    kl_choice_policy policy = KL_CHOICE_EAGER;
    uint32_t alternative = 0;
    std::vector<uint32_t> tunables;
    double us = 0;
};

struct Regret {
    std::string op;
    kl_choice_policy policy;
    std::vector<double> rule, builtin, table, given;  // per shape, fractions (0.01 = 1%); given: --table's
    std::vector<std::string> shapes;
    std::vector<std::string> rule_pick, builtin_pick, table_pick, given_pick, best_pick;
    size_t builtin_cells = 0;  // shapes where the compiled-in table served (else its pick is the rule's)
    size_t given_cells = 0;    // shapes where --table's table served
};

struct Result {
    std::vector<Measure> measures;        // timed in full
    std::vector<Measure> screens;         // screening estimates (eager), of every candidate screened
    std::vector<kl_choice_row> rows;      // the table written (op/alternative names: the descriptors')
    kl_choice_device device;
    std::vector<Regret> regrets;
    std::string table_text;               // what was written
    kl_choice_table loaded = {nullptr, 0, nullptr, 0, nullptr, 0};  // read back (kl_choice_table_free)
    kl_choice_table given = {nullptr, 0, nullptr, 0, nullptr, 0};   // --table's (kl_choice_table_free)
};

inline std::string pick_text(const kl_choice_op &d, int alt, const std::vector<uint32_t> &tun) {
    if (alt < 0) return "none";
    std::string s = d.alternatives[alt];
    for (uint32_t t = 0; t < d.num_tunables; t++)
        if (d.alternative_tunables[alt] & (1u << t)) s += " " + std::string(d.tunables[t]) + "=" + std::to_string(tun[t]);
    return s;
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string fmt(const char *f, double x) {
    char b[64];
    std::snprintf(b, sizeof b, f, x);
    return b;
}

// The device key of a table from kl_device (name: no spaces, at most 63 characters).
inline kl_choice_device table_device(const kl_device &dev, const std::string &id, const std::string &name) {
    kl_choice_device d;
    std::memset(&d, 0, sizeof d);
    std::snprintf(d.id, sizeof d.id, "%s", id.c_str());
    d.cc_major = dev.cc_major;
    d.cc_minor = dev.cc_minor;
    d.sm_count = dev.sm_count;
    d.l2_bytes = dev.l2_bytes;
    d.mem_gib = kl_choice_mem_gib(dev.mem_bytes);
    d.bandwidth_gbs = dev.mem_bandwidth_gbs;
    std::string n;
    for (char c : name) n += (c == ' ' || c < 0x21 || c == 0x7f) ? '_' : c;
    std::snprintf(d.name, sizeof d.name, "%s", n.c_str());
    return d;
}

// A C identifier from a device name ("NVIDIA H100 80GB HBM3" -> nvidia_h100_80gb_hbm3), at most 31 characters.
inline std::string device_id_of(const std::string &name) {
    std::string id;
    for (char c : name) {
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) id += c;
        else if (c >= 'A' && c <= 'Z') id += static_cast<char>(c - 'A' + 'a');
        else if (!id.empty() && id.back() != '_') id += '_';
    }
    while (!id.empty() && id.back() == '_') id.pop_back();
    if (id.empty() || (id[0] >= '0' && id[0] <= '9')) id = "d_" + id;
    return id.substr(0, 31);
}

// The whole pipeline. `ops_list` (NULL-terminated) is what the table is
// written and read against (every family's kl_<family>_operations).
inline Result run(const std::vector<Op *> &ops, const kl_choice_op *const *ops_list, const kl_device &dev,
                  const kl_choice_device &table_dev, Mem &mem, Clock &clock, const Options &opt) {
    Result res;
    res.device = table_dev;
    std::vector<Op *> chosen;
    for (Op *op : ops) {
        bool want = opt.only.empty();
        for (const std::string &w : opt.only) want = want || w == op->desc().name;
        if (want) chosen.push_back(op);
    }
    for (const std::string &w : opt.only) {
        bool found = false;
        for (Op *op : ops) found = found || w == op->desc().name;
        if (!found) {
            std::string names;
            for (Op *op : ops) names += std::string(names.empty() ? "" : ", ") + op->desc().name;
            die("--only: no operation '" + w + "' (the operations: " + names + ")");
        }
    }
    const bool has_given = !opt.table.empty();
    if (has_given) ok(kl_choice_table_load_file(opt.table.c_str(), ops_list, &res.given), "--table");
    size_t total = 0, done = 0;
    for (Op *op : chosen) total += op->num_shapes();
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("tune: %zu shapes over %zu operations, policies", total, chosen.size());
    for (kl_choice_policy p : opt.policies) std::printf(" %s", policy_name(p));
    std::printf(", %d runs, %d rounds, clock %s; device %s (cc %u.%u, %u SMs, L2 %llu bytes, %u GiB, %u GB/s)\n", opt.runs,
                opt.rounds, clock.name(), table_dev.name, dev.cc_major, dev.cc_minor, dev.sm_count,
                static_cast<unsigned long long>(dev.l2_bytes), kl_choice_mem_gib(dev.mem_bytes), dev.mem_bandwidth_gbs);
    if (has_given) std::printf("tune: --table %s: %zu rows\n", opt.table.c_str(), res.given.num_rows);
    std::fflush(stdout);

    // The table: the best of each (shape, policy, alternative) timed so far,
    // as rows and as the file's text.
    auto make_table = [&]() {
        res.rows.clear();
        std::map<std::tuple<size_t, size_t, int, uint32_t>, const Measure *> best;
        for (const Measure &m : res.measures) {
            auto k = std::make_tuple(m.op, m.shape, static_cast<int>(m.policy), m.alternative);
            auto it = best.find(k);
            if (it == best.end() || m.us < it->second->us) best[k] = &m;
        }
        std::set<std::string> seen_keys;
        for (const auto &kv : best) {
            const Measure &m = *kv.second;
            Op &op = *ops[m.op];
            const kl_choice_op &d = op.desc();
            kl_choice_row r;
            std::memset(&r, 0, sizeof r);
            r.device = 0;
            r.op = d.name;
            r.policy = m.policy;
            const std::vector<uint32_t> k = op.keys(m.shape);
            std::string key = std::string(d.name) + "/" + policy_name(m.policy) + "/" + d.alternatives[m.alternative];
            for (uint32_t i = 0; i < d.num_keys; i++) r.keys[i] = k[i], key += "/" + std::to_string(k[i]);
            if (!seen_keys.insert(key).second)
                die(std::string(d.name) + ": two shapes of the grid have the same keys (" + op.shape_name(m.shape) +
                    "): a table holds one row per key");
            r.alternative = d.alternatives[m.alternative];
            r.time_ns = static_cast<uint64_t>(m.us * 1000.0 + 0.5);
            if (r.time_ns == 0) r.time_ns = 1;
            for (uint32_t t = 0; t < d.num_tunables; t++)
                if (d.alternative_tunables[m.alternative] & (1u << t)) r.tunables[t] = m.tunables[t];
            res.rows.push_back(r);
        }
        {
            const kl_choice_table t = {&res.device, 1u, res.rows.data(), res.rows.size(), nullptr, 0u};
            char *buf = nullptr;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            if (f == nullptr) die("open_memstream failed");
            ok(kl_choice_table_write(f, &t, ops_list), "kl_choice_table_write");
            std::fclose(f);
            res.table_text.assign(buf, len);
            std::free(buf);
        }
    };
    auto write_table = [&]() {
        std::FILE *f = std::fopen(opt.out.c_str(), "w");
        if (f == nullptr) die("cannot write " + opt.out);
        std::fwrite(res.table_text.data(), 1, res.table_text.size(), f);
        if (std::fclose(f) != 0) die("writing " + opt.out + " failed");
    };

    for (size_t oi = 0; oi < ops.size(); oi++) {
        Op &op = *ops[oi];
        if (std::find(chosen.begin(), chosen.end(), &op) == chosen.end()) continue;
        const kl_choice_op &d = op.desc();
        for (size_t si = 0; si < op.num_shapes(); si++) {
            const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double eta = done ? el / done * (total - done) : 0.0;
            std::fprintf(stderr, "tune: shape %zu/%zu %s %s: %.0f s elapsed, ETA %s\n", done + 1, total, d.name,
                         op.shape_name(si).c_str(), el, done ? (fmt("%.0f", eta) + " s").c_str() : "unknown");
            done++;
            op.set_shape(si);
            // What to time: each alternative that applies, each candidate.
            std::vector<std::pair<uint32_t, std::vector<uint32_t>>> trials;
            std::set<std::pair<uint32_t, std::vector<uint32_t>>> must;  // timed in full whatever screening says
            for (uint32_t a = 0; a < d.num_alternatives; a++) {
                std::vector<uint32_t> def;
                if (!rule_defaults(op, dev, a, &def)) continue;  // does not apply with its defaults
                must.insert({a, def});
                std::vector<std::vector<uint32_t>> cands = {def};
                for (uint32_t t = 0; t < d.num_tunables; t++) {
                    if (!(d.alternative_tunables[a] & (1u << t))) continue;
                    std::vector<std::vector<uint32_t>> next;
                    for (const auto &c : cands)
                        for (uint32_t v : candidate_values(d.tunables[t], def[t], dev.sm_count, opt.quick)) {
                            std::vector<uint32_t> x = c;
                            x[t] = v;
                            next.push_back(x);
                        }
                    cands = next;
                }
                std::sort(cands.begin(), cands.end());
                cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
                for (const auto &c : cands)
                    if (applies(op, dev, si, a, c)) trials.push_back({a, c});
            }
            // The rule's pick, the compiled-in table's (every handle passed)
            // and --table's are timed in full: their regrets need their times.
            std::vector<const kl_choice_table *> judged = {rule_only(), nullptr};
            if (has_given) judged.push_back(&res.given);
            for (kl_choice_policy p : opt.policies)
                for (const kl_choice_table *from : judged) {
                    const Pick rp = op.choose(from, p, dev, all_kernels(d));
                    if (rp.alternative < 0) continue;
                    const auto pick = std::make_pair(static_cast<uint32_t>(rp.alternative), rp.tunables);
                    must.insert(pick);
                    if (std::find(trials.begin(), trials.end(), pick) == trials.end()) trials.push_back(pick);
                }
            if (trials.empty()) {
                std::printf("  %s %s: no alternative applies (skipped)\n", d.name, op.shape_name(si).c_str());
                continue;
            }
            op.prepare(mem);
            auto trial_of = [&](uint32_t a, const std::vector<uint32_t> &tun) {
                Trial t;
                t.op = d.name;
                t.shape = op.shape_name(si);
                t.keys = op.keys(si);
                t.alternative = a;
                t.tunables = tun;
                return t;
            };
            // Screening: of an alternative's candidates, only the two a quick
            // eager estimate puts first (one, were it alone, could be a noisy
            // draw) and the rule's and compiled-in table's are timed in full.
            std::vector<std::pair<uint32_t, std::vector<uint32_t>>> full;
            size_t screened = 0;
            for (uint32_t a = 0; a < d.num_alternatives; a++) {
                std::vector<size_t> mine;
                for (size_t i = 0; i < trials.size(); i++)
                    if (trials[i].first == a) mine.push_back(i);
                if (mine.size() <= 1 || opt.exhaustive) {
                    for (size_t i : mine) full.push_back(trials[i]);
                    continue;
                }
                std::vector<std::pair<double, size_t>> est;
                for (size_t i : mine) {
                    op.before(mem, a, trials[i].second, clock.stream());
                    const double us = clock.screen_us(trial_of(a, trials[i].second), [&](int run, kl_stream s) {
                        op.launch(a, trials[i].second, run, s);
                    });
                    screened++;
                    res.screens.push_back(Measure{oi, si, KL_CHOICE_EAGER, a, trials[i].second, us});
                    est.push_back({us, i});
                }
                std::stable_sort(est.begin(), est.end(),
                                 [](const std::pair<double, size_t> &x, const std::pair<double, size_t> &y) {
                                     return x.first < y.first;
                                 });
                for (size_t r = 0; r < est.size(); r++)
                    if (r < 2 || must.count(trials[est[r].second])) full.push_back(trials[est[r].second]);
            }
            // Full timing in rounds: each candidate once a round, the order
            // rotated a place a round, a time the median of its rounds. Timed
            // one after the other, whichever candidate came first after a run
            // of heavy launches looked faster: the clock sags (13% at a 600 us
            // absorbed attention shape, eager against graph of one candidate,
            // H100, 2026-12-07).
            std::map<std::pair<size_t, int>, std::vector<double>> samples;  // (index in full, policy)
            for (int r = 0; r < opt.rounds; r++)
                for (size_t j = 0; j < full.size(); j++) {
                    const size_t fi = (j + static_cast<size_t>(r)) % full.size();
                    const auto &tr = full[fi];
                    const Trial t = trial_of(tr.first, tr.second);
                    op.before(mem, tr.first, tr.second, clock.stream());
                    for (kl_choice_policy p : opt.policies) {
                        const double us =
                            clock.time_us(p, t, [&](int run, kl_stream s) { op.launch(tr.first, tr.second, run, s); });
                        if (us >= 0) samples[{fi, static_cast<int>(p)}].push_back(us);
                    }
                }
            for (size_t fi = 0; fi < full.size(); fi++)
                for (kl_choice_policy p : opt.policies) {
                    auto it = samples.find({fi, static_cast<int>(p)});
                    if (it == samples.end()) continue;
                    res.measures.push_back(Measure{oi, si, p, full[fi].first, full[fi].second, median(it->second)});
                }
            std::fprintf(stderr, "tune:   %zu candidates screened, %zu timed in full\n", screened, full.size());
            mem.sync();
            mem.free_all();
            // The shape's line: each policy's best and the rule's pick.
            for (kl_choice_policy p : opt.policies) {
                double best = -1, rule_us = -1, built_us = -1;
                std::string best_s;
                const Pick rp = op.choose(rule_only(), p, dev, all_kernels(d));
                const Pick bp = op.choose(nullptr, p, dev, all_kernels(d));
                const Pick gp = has_given ? op.choose(&res.given, p, dev, all_kernels(d)) : Pick();
                double given_us = -1;
                for (const Measure &m : res.measures) {
                    if (m.op != oi || m.shape != si || m.policy != p) continue;
                    if (best < 0 || m.us < best) best = m.us, best_s = pick_text(d, m.alternative, m.tunables);
                    if (static_cast<int>(m.alternative) == rp.alternative && m.tunables == rp.tunables) rule_us = m.us;
                    if (static_cast<int>(m.alternative) == bp.alternative && m.tunables == bp.tunables) built_us = m.us;
                    if (has_given && static_cast<int>(m.alternative) == gp.alternative && m.tunables == gp.tunables)
                        given_us = m.us;
                }
                if (best < 0) continue;
                auto timed = [&](double us) {
                    return us >= 0 ? fmt("%.3f us", us) + fmt(" (+%.2f%%)", 100.0 * (us / best - 1)) : std::string("not timed");
                };
                std::printf("  %-22s %-28s %s: best %s %.3f us; rule %s %s", d.name, op.shape_name(si).c_str(),
                            policy_name(p), best_s.c_str(), best, pick_text(d, rp.alternative, rp.tunables).c_str(),
                            timed(rule_us).c_str());
                if (bp.source == KL_CHOICE_BUILTIN)
                    std::printf("; compiled-in %s %s", pick_text(d, bp.alternative, bp.tunables).c_str(),
                                timed(built_us).c_str());
                if (has_given)
                    std::printf("; --table %s %s", pick_text(d, gp.alternative, gp.tunables).c_str(), timed(given_us).c_str());
                std::printf("\n");
            }
            std::fflush(stdout);
        }
    }

    make_table();
    if (!opt.out.empty()) {
        write_table();
        ok(kl_choice_table_load_file(opt.out.c_str(), ops_list, &res.loaded), "reading back " + opt.out);
        std::printf("tune: wrote %s: %zu rows (read back: %zu rows)\n", opt.out.c_str(), res.rows.size(),
                    res.loaded.num_rows);
    } else {
        ok(kl_choice_table_load_text(res.table_text.data(), res.table_text.size(), "<the new table>", ops_list,
                                     &res.loaded),
           "reading back the new table");
    }
    if (res.loaded.num_rows != res.rows.size()) die("the table read back has another number of rows");

    // ---- regret: the compiled-in chooser and the new table against the exhaustive best
    std::printf("\ntune: regret against the best alternative timed at each shape (time of the pick / best - 1)\n");
    std::printf("  %-22s %-6s %-14s %8s %8s  %s\n", "operation", "policy", "chooser", "median", "worst", "worst shape");
    for (size_t oi = 0; oi < ops.size(); oi++) {
        Op &op = *ops[oi];
        if (std::find(chosen.begin(), chosen.end(), &op) == chosen.end()) continue;
        const kl_choice_op &d = op.desc();
        for (kl_choice_policy p : opt.policies) {
            Regret rg;
            rg.op = d.name;
            rg.policy = p;
            for (size_t si = 0; si < op.num_shapes(); si++) {
                double b = -1;
                const Measure *bm = nullptr;
                for (const Measure &m : res.measures)
                    if (m.op == oi && m.shape == si && m.policy == p && (b < 0 || m.us < b)) b = m.us, bm = &m;
                if (bm == nullptr) continue;
                op.set_shape(si);
                auto time_of = [&](const Pick &pk) -> double {
                    for (const Measure &m : res.measures)
                        if (m.op == oi && m.shape == si && m.policy == p && static_cast<int>(m.alternative) == pk.alternative &&
                            m.tunables == pk.tunables)
                            return m.us;
                    return -1;
                };
                const Pick rp = op.choose(rule_only(), p, dev, all_kernels(d));
                const Pick bp = op.choose(nullptr, p, dev, all_kernels(d));
                const Pick tp = op.choose(&res.loaded, p, dev, all_kernels(d));
                const Pick gp = has_given ? op.choose(&res.given, p, dev, all_kernels(d)) : Pick();
                const double ru = time_of(rp), bu = time_of(bp), tu = time_of(tp), gu = has_given ? time_of(gp) : 0;
                if (gu < 0) die(std::string(d.name) + " " + op.shape_name(si) + ": --table's pick was not timed");
                if (ru < 0) die(std::string(d.name) + " " + op.shape_name(si) + ": the rule's pick was not timed");
                if (bu < 0) die(std::string(d.name) + " " + op.shape_name(si) + ": the compiled-in pick was not timed");
                if (tu < 0) die(std::string(d.name) + " " + op.shape_name(si) + ": the table's pick was not timed");
                if (tp.source != KL_CHOICE_TABLE)
                    die(std::string(d.name) + " " + op.shape_name(si) + ": the chooser did not take the new table");
                rg.shapes.push_back(op.shape_name(si));
                rg.rule.push_back(ru / b - 1);
                rg.builtin.push_back(bu / b - 1);
                rg.table.push_back(tu / b - 1);
                rg.builtin_cells += bp.source == KL_CHOICE_BUILTIN;
                rg.rule_pick.push_back(pick_text(d, rp.alternative, rp.tunables));
                rg.builtin_pick.push_back(pick_text(d, bp.alternative, bp.tunables));
                rg.table_pick.push_back(pick_text(d, tp.alternative, tp.tunables));
                rg.best_pick.push_back(pick_text(d, static_cast<int>(bm->alternative), bm->tunables));
                if (has_given) {
                    rg.given.push_back(gu / b - 1);
                    rg.given_pick.push_back(pick_text(d, gp.alternative, gp.tunables));
                    rg.given_cells += gp.source == KL_CHOICE_TABLE;
                }
            }
            if (rg.shapes.empty()) continue;
            for (int which = 0; which < (has_given ? 4 : 3); which++) {
                const std::vector<double> &v = which == 0 ? rg.rule : which == 1 ? rg.builtin : which == 2 ? rg.table : rg.given;
                const std::vector<std::string> &picks =
                    which == 0 ? rg.rule_pick : which == 1 ? rg.builtin_pick : which == 2 ? rg.table_pick : rg.given_pick;
                const size_t w = static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
                size_t misses = 0;
                for (double x : v) misses += x > 0;
                std::printf("  %-22s %-6s %-14s %7.2f%% %7.2f%%  %s (%s, best %s); %zu of %zu shapes off the best",
                            d.name, policy_name(p),
                            which == 0 ? "rule" : which == 1 ? "compiled-in" : which == 2 ? "new table" : "--table",
                            100 * median(v), 100 * v[w], rg.shapes[w].c_str(), picks[w].c_str(), rg.best_pick[w].c_str(),
                            misses, v.size());
                if (which == 1) std::printf("; its table served %zu of %zu", rg.builtin_cells, v.size());
                if (which == 3) std::printf("; its table served %zu of %zu", rg.given_cells, v.size());
                std::printf("\n");
            }
            res.regrets.push_back(rg);
        }
    }
    std::printf("  (rule: kl_<op>_choose with an empty KL_CHOICE_TABLE_ONLY table; compiled-in: without a table,\n"
                "   kl_choice_builtin_table()'s cell where it has this device's, else the rule: measured in an\n"
                "   earlier run, so its regret here is the target's; new table: the table just written, at the\n"
                "   grid's own shapes, 0 by construction%s)\n",
                has_given ? ";\n   --table: the chooser given that table, where it has this device's cell, else compiled-in or rule" : "");
    std::fflush(stdout);
    return res;
}

}  // namespace tune

#endif  // KLAUNCH_TOOLS_TUNE_TUNE_H
