// tune_emu_test: the tuner's pipeline (tune.h, ops.h: the code the GPU
// program runs) on the CPU emulator, with a fake clock, over a tiny grid
// (two shapes an operation). Timings are meaningless; what it proves:
//   - every alternative of every operation applies at some shape of the
//     grid and is launched through its launcher on the emulated backend
//     (its checks, its argument packing, the kernel from its own source)
//     without error, each candidate of its tunables once;
//   - screening ran and the fastest screened candidate of each
//     alternative was timed in full;
//   - the table it writes (kl_choice_table_write) is read back by the
//     strict loader (kl_choice_table_load_file) with every row;
//   - at every shape and policy, the chooser given that table picks the
//     alternative and tunables the fake clock made fastest of those timed;
//   - the table's rows hold, per alternative, the least fake time of its
//     candidates;
//   - the regret of the compiled-in chooser (the rule) and of the new
//     table are computed and printed (the table's 0 at its own shapes);
//   - the compiled-in tables have no cell for the emulator: without a
//     table the chooser takes the rule.
//   - full timing runs in rounds: a second run, on a clock that gives each
//     candidate's k-th time as 1.3, 1.0, 1.1 x the fake time, times every
//     candidate once a round, rotates the order between rounds, and keeps
//     the median (1.1 x); given the first run's table (--table), that
//     table's chooser serves every shape at a regret of 0.
// Exit 0 when all hold, 1 otherwise (each failure printed).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/emu/emu.h"
#include "tests/emu/emu_backend.h"
#include "tools/tune/ops.h"

namespace {

int g_failures = 0;

void check(bool cond, const std::string &what) {
    if (!cond) {
        std::fprintf(stderr, "tune_emu_test: FAILED: %s\n", what.c_str());
        g_failures++;
    }
}

// The k-th full time of a (candidate, policy): kScale[k % 3] x the fake
// time, so the median of three rounds is 1.1 x and the first or last round
// alone is not. Records the order of full timings.
const double kScale[3] = {1.3, 1.0, 1.1};

class RoundsClock : public tune::Clock {
  public:
    explicit RoundsClock(tune::Mem *mem) : fake_(mem) {}
    double time_us(kl_choice_policy policy, const tune::Trial &t, const tune::Launch &launch) override {
        fake_.time_us(policy, t, launch);  // launches a candidate once, like the first run
        const std::string k = key(t);
        order.push_back({t.op + "|" + t.shape, k + (policy == KL_CHOICE_GRAPH ? "|graph" : "|eager")});
        const int n = counts[order.back().second]++;
        return tune::fake_time_us(policy, t) * kScale[n % 3];
    }
    double screen_us(const tune::Trial &t, const tune::Launch &launch) override {
        fake_.time_us(KL_CHOICE_EAGER, t, launch);
        return tune::fake_time_us(KL_CHOICE_EAGER, t);
    }
    kl_stream stream() override { return nullptr; }
    const char *name() const override { return "fake, scaled by round (not a measurement)"; }
    static std::string key(const tune::Trial &t) {
        std::string w = t.op + "|" + t.shape + "|" + std::to_string(t.alternative);
        for (uint32_t v : t.tunables) w += "," + std::to_string(v);
        return w;
    }
    std::vector<std::pair<std::string, std::string>> order;  // (op|shape, candidate|policy) per full timing
    std::map<std::string, int> counts;                       // full timings per candidate|policy

  private:
    tune::FakeClock fake_;
};

// The emulator's registered host buffers.
class EmuMem : public tune::Mem {
  public:
    ~EmuMem() override { free_all(); }
    void *alloc(size_t bytes, const char *name) override {
        bytes = std::max<size_t>(bytes, 16);
        void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        if (p == nullptr) tune::die("out of memory");
        std::memset(p, 0xff, bytes);  // NaN poison: what the kernels read is what was filled
        emu::register_buffer(p, bytes, emu::Access::kReadWrite, name);
        live_.push_back(p);
        return p;
    }
    void free(void *p) override {
        for (size_t i = 0; i < live_.size(); i++)
            if (live_[i] == p) {
                emu::unregister_buffer(p);
                std::free(p);
                live_.erase(live_.begin() + static_cast<long>(i));
                return;
            }
    }
    void free_all() override {
        for (void *p : live_) {
            emu::unregister_buffer(p);
            std::free(p);
        }
        live_.clear();
    }
    void upload(void *dst, const void *src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void zero(void *dst, size_t bytes) override { std::memset(dst, 0, bytes); }
    void fill(void *dst, size_t bytes, const std::vector<unsigned char> &pattern, size_t offset, size_t unit) override {
        const size_t units = pattern.size() / unit;
        size_t off = (offset / unit % units) * unit, done = 0;
        while (done < bytes) {
            const size_t n = std::min(bytes - done, units * unit - off);
            std::memcpy(static_cast<unsigned char *>(dst) + done, pattern.data() + off, n);
            done += n;
            off = 0;
        }
    }
    void sync() override {}
    size_t sets(size_t) const override { return 1; }

  private:
    std::vector<void *> live_;
};

class EmuModules : public tune::Modules {
  public:
    explicit EmuModules(kl_emu_backend *eb) : eb_(eb) {}
    const kl_module *get(const char *family, const char *variant) override {
        const std::string key = std::string(family) + "/" + variant;
        auto it = mods_.find(key);
        if (it != mods_.end()) return &it->second;
        const void *image = kl_emu_image(family, variant);
        if (image == nullptr) tune::die("no emulated image " + key + " is linked in");
        kl_module &m = mods_[key];
        tune::ok(kl_module_load(&eb_->base, image, kl_emu_image_size(), &m), "loading " + key);
        return &m;
    }

  private:
    kl_emu_backend *eb_;
    std::map<std::string, kl_module> mods_;
};

}  // namespace

int main() {
    kl_emu_backend eb;
    kl_emu_backend_init(&eb);
    // An emulated Hopper of 4 SMs (small persistent grids and part counts).
    kl_device dev;
    std::memset(&dev, 0, sizeof dev);
    dev.cc_major = 9;
    dev.cc_minor = 0;
    dev.sm_count = 4;
    dev.l2_bytes = 50u << 20;
    dev.mem_bytes = 80ull << 30;
    dev.mem_bandwidth_gbs = 0;
    const kl_choice_device td = tune::table_device(dev, "emu", "CPU emulator");

    const char *tmp = std::getenv("TEST_TMPDIR");
    tune::Options opt;
    opt.out = std::string(tmp ? tmp : "/tmp") + "/tune_emu.choices";
    opt.runs = 1;
    opt.quick = true;

    EmuMem mem;
    tune::FakeClock clock(&mem);
    EmuModules mods(&eb);
    std::vector<std::unique_ptr<tune::Op>> owned = tune::make_ops(mods, tune::Grid::kTiny, dev);
    std::vector<tune::Op *> ops;
    for (auto &o : owned) ops.push_back(o.get());
    tune::Result res = tune::run(ops, tune::all_operations(), dev, td, mem, clock, opt);

    // Every candidate screened or timed was launched once (the fake clock's
    // first time of it), and every alternative of every operation somewhere.
    size_t trials = 0;
    {
        std::map<std::pair<size_t, std::string>, int> distinct;
        std::vector<tune::Measure> all = res.measures;
        all.insert(all.end(), res.screens.begin(), res.screens.end());
        for (const tune::Measure &m : all) {
            std::string k = std::to_string(m.shape) + "/" + std::to_string(m.alternative);
            for (uint32_t v : m.tunables) k += "," + std::to_string(v);
            distinct[{m.op, k}]++;
        }
        trials = distinct.size();
    }
    check(clock.launches == trials, "the fake clock launched " + std::to_string(clock.launches) + " trials of " +
                                        std::to_string(trials));
    check(eb.launches >= clock.launches, "the emulated backend ran every launch");
    for (size_t oi = 0; oi < ops.size(); oi++) {
        const kl_choice_op &d = ops[oi]->desc();
        for (uint32_t a = 0; a < d.num_alternatives; a++) {
            bool timed = false;
            for (const tune::Measure &m : res.measures) timed = timed || (m.op == oi && m.alternative == a);
            check(timed, std::string(d.name) + ": alternative " + d.alternatives[a] + " (" + ops[oi]->launcher(a) +
                             ") was not launched at any shape of the tiny grid");
        }
    }

    // Screening ran, and of each alternative's screened candidates the
    // fastest was timed in full.
    check(!res.screens.empty(), "some candidates were screened");
    {
        std::map<std::tuple<size_t, size_t, uint32_t>, const tune::Measure *> fastest;
        for (const tune::Measure &m : res.screens) {
            auto k = std::make_tuple(m.op, m.shape, m.alternative);
            if (!fastest.count(k) || m.us < fastest[k]->us) fastest[k] = &m;
        }
        for (const auto &kv : fastest) {
            bool timed = false;
            for (const tune::Measure &m : res.measures)
                timed = timed || (m.op == kv.second->op && m.shape == kv.second->shape &&
                                  m.alternative == kv.second->alternative && m.tunables == kv.second->tunables);
            check(timed, std::string(ops[kv.second->op]->desc().name) + ": the screening's fastest candidate was not timed in full");
        }
    }

    // The file read back, every row.
    kl_choice_table t = {nullptr, 0, nullptr, 0, nullptr, 0};
    const kl_status st = kl_choice_table_load_file(opt.out.c_str(), tune::all_operations(), &t);
    check(st == KL_SUCCESS, "kl_choice_table_load_file(" + opt.out + "): " + kl_last_error_message());
    check(t.num_rows == res.rows.size() && t.num_rows > 0,
          "the table read back has " + std::to_string(t.num_rows) + " rows, " + std::to_string(res.rows.size()) + " written");
    check(t.num_devices == 1 && std::string(t.devices[0].id) == "emu", "the table's one device is the emulator's");

    // Each row: the least fake time of its alternative's candidates at its shape.
    for (size_t i = 0; i < t.num_rows; i++) {
        const kl_choice_row &r = t.rows[i];
        double least = -1;
        for (const tune::Measure &m : res.measures) {
            const kl_choice_op &d = ops[m.op]->desc();
            if (std::string(d.name) != r.op || m.policy != r.policy || std::string(d.alternatives[m.alternative]) != r.alternative)
                continue;
            const std::vector<uint32_t> k = ops[m.op]->keys(m.shape);
            bool same = true;
            for (uint32_t j = 0; j < d.num_keys; j++) same = same && k[j] == r.keys[j];
            if (same && (least < 0 || m.us < least)) least = m.us;
        }
        check(least >= 0 && std::llround(least * 1000) == static_cast<long long>(r.time_ns),
              std::string("row ") + r.op + " " + r.alternative + ": " + std::to_string(r.time_ns) +
                  " ns is not the least fake time of its candidates");
    }

    // At every shape and policy the chooser given the table picks the fastest.
    size_t picks = 0, rule_off = 0;
    for (size_t oi = 0; oi < ops.size(); oi++) {
        tune::Op &op = *ops[oi];
        const kl_choice_op &d = op.desc();
        for (size_t si = 0; si < op.num_shapes(); si++) {
            op.set_shape(si);
            for (kl_choice_policy p : opt.policies) {
                const tune::Measure *best = nullptr;
                for (const tune::Measure &m : res.measures)
                    if (m.op == oi && m.shape == si && m.policy == p && (best == nullptr || m.us < best->us)) best = &m;
                check(best != nullptr, std::string(d.name) + " " + op.shape_name(si) + ": nothing timed");
                if (best == nullptr) continue;
                check(std::fabs(best->us - tune::fake_time_us(p, tune::Trial{d.name, op.shape_name(si), op.keys(si),
                                                                             best->alternative, best->tunables})) < 1e-9,
                      "a measure is the fake clock's time");
                const tune::Pick c = op.choose(&t, p, dev, tune::all_kernels(d));
                const std::string where = std::string(d.name) + " " + op.shape_name(si) + " " + tune::policy_name(p);
                check(c.source == KL_CHOICE_TABLE, where + ": the chooser did not take the table");
                check(c.alternative == static_cast<int>(best->alternative) && c.tunables == best->tunables,
                      where + ": the chooser picked " + tune::pick_text(d, c.alternative, c.tunables) +
                          ", the fake clock's fastest is " + tune::pick_text(d, best->alternative, best->tunables));
                picks++;
                const tune::Pick r = op.choose(nullptr, p, dev, tune::all_kernels(d));
                check(r.source == KL_CHOICE_RULE, where + ": without a table, on a device no compiled-in table has, the rule");
                rule_off += !(r.alternative == c.alternative && r.tunables == c.tunables);
            }
        }
    }
    std::printf("tune_emu_test: %zu picks checked against the fake clock's fastest (the rule differs at %zu)\n", picks,
                rule_off);

    // The regrets: one line a chooser, operation and policy; the table's 0.
    check(res.regrets.size() == ops.size() * opt.policies.size(), "a regret for every operation and policy");
    for (const tune::Regret &rg : res.regrets) {
        for (double x : rg.table) check(x == 0.0, rg.op + ": the new table's regret at its own shapes is 0");
        for (double x : rg.rule) check(x >= 0.0, rg.op + ": a regret is not negative");
        check(rg.builtin == rg.rule && rg.builtin_cells == 0, rg.op + ": no compiled-in cell for the emulator");
    }

    // Rounds, and --table: a second run given the first run's table.
    {
        tune::Options o2 = opt;
        o2.out = std::string(tmp ? tmp : "/tmp") + "/tune_emu_rounds.choices";
        o2.rounds = 3;
        o2.table = opt.out;
        RoundsClock rc(&mem);
        tune::Result r2 = tune::run(ops, tune::all_operations(), dev, td, mem, rc, o2);
        check(!rc.counts.empty(), "the rounds run timed something in full");
        for (const auto &kv : rc.counts)
            check(kv.second == o2.rounds, kv.first + ": timed in full " + std::to_string(kv.second) + " times, not once a round");
        for (const tune::Measure &m : r2.measures) {
            const kl_choice_op &d = ops[m.op]->desc();
            ops[m.op]->set_shape(m.shape);
            const double f = tune::fake_time_us(m.policy, tune::Trial{d.name, ops[m.op]->shape_name(m.shape),
                                                                      ops[m.op]->keys(m.shape), m.alternative, m.tunables});
            check(m.us == f * kScale[2], std::string(d.name) + " " + ops[m.op]->shape_name(m.shape) +
                                             ": a time is not the median of its rounds (" + std::to_string(m.us) +
                                             " us, fake " + std::to_string(f) + " us)");
        }
        // Per shape: the rounds' orders hold the same timings, and where a
        // shape has two candidates or more, round 1 starts elsewhere than round 0.
        std::map<std::string, std::vector<std::string>> per_shape;
        for (const auto &e : rc.order) per_shape[e.first].push_back(e.second);
        size_t rotated = 0;
        for (const auto &kv : per_shape) {
            const std::vector<std::string> &v = kv.second;
            check(v.size() % 3 == 0, kv.first + ": the full timings do not split into three rounds");
            const size_t n = v.size() / 3;
            std::vector<std::string> r0(v.begin(), v.begin() + n), r1(v.begin() + n, v.begin() + 2 * n);
            std::vector<std::string> s0 = r0, s1 = r1;
            std::sort(s0.begin(), s0.end());
            std::sort(s1.begin(), s1.end());
            check(s0 == s1, kv.first + ": round 1 timed other candidates than round 0");
            std::set<std::string> cands;
            for (const std::string &x : r0) cands.insert(x.substr(0, x.rfind('|')));
            if (cands.size() >= 2) {
                check(r0[0] != r1[0], kv.first + ": round 1 starts with round 0's first candidate");
                rotated++;
            }
        }
        check(rotated > 0, "some shape had two candidates timed in full");
        check(r2.regrets.size() == res.regrets.size(), "the rounds run has a regret for every operation and policy");
        for (const tune::Regret &rg : r2.regrets) {
            check(rg.given.size() == rg.shapes.size() && rg.given_cells == rg.shapes.size(),
                  rg.op + ": --table's table served " + std::to_string(rg.given_cells) + " of " +
                      std::to_string(rg.shapes.size()) + " shapes");
            for (double x : rg.given) check(x == 0.0, rg.op + ": --table's regret is not 0 where its times keep their order");
        }
        kl_choice_table_free(&r2.loaded);
        kl_choice_table_free(&r2.given);
    }

    kl_choice_table_free(&t);
    kl_choice_table_free(&res.loaded);
    if (g_failures) {
        std::fprintf(stderr, "tune_emu_test: %d failure(s)\n", g_failures);
        return 1;
    }
    std::printf("tune_emu_test: PASS\n");
    return 0;
}
