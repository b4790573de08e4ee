// json_fixture: mla_decode_bench's own JSON writer and shapes, without a GPU
// (for json_test.py: ./bazelw test //bench/mla_decode:json_test).
//
//   json_fixture OUT.json SHAPES.json
//
// Compiles mla_decode_bench.cc into this program (its main renamed), fakes
// the one driver call the writer makes (cuDeviceGetAttribute), fills the
// rows a run of every launcher would report, with made-up times, and writes
// OUT.json with the bench's write_json; SHAPES.json gets make_shapes()'s
// lengths (the lengths torch_baselines.py and flashinfer_mla.py must
// reproduce). Nothing here is a measurement.
#define main mla_decode_bench_main
#include "bench/mla_decode/mla_decode_bench.cc"
#undef main

namespace {

kl__cu_result fake_attribute(int *value, int attrib, kl__cu_device) {
    *value = attrib == 16 ? 132 : attrib == 38 ? 52428800 : 0;
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: json_fixture OUT.json SHAPES.json\n");
        return 2;
    }
    g_cuda.api.device_get_attribute = fake_attribute;
    g_cuda.cc_major = 9;
    g_cuda.cc_minor = 0;
    g_sms = 132;
    g_copy_gbps = 3000.0;
    for (Variant &v : g_var)
        for (Attn a : kAttns) v.loaded[static_cast<int>(a)] = a != Attn::kFp8Tma;
    note("fp8_tma D 576 left out: a \"quoted\" reason\\with a backslash");
    report(Row{"copy", "copy", "cuMemcpyDtoD", "cuMemcpyDtoD 1 GiB; bytes = read + write", 0, 715.8, 2.0 * (1 << 30),
               0, 0, 0});
    make_shapes();
    double us = 100.0;
    for (const Shape &sh : g_shapes)
        for (const Variant &v : g_var)
            for (Attn a : kAttns) {
                if (!v.loaded[static_cast<int>(a)]) continue;
                const uint32_t tb = attn_fp8(a) ? kl_mla_decode_fp8_token_bytes(v.D - 64u) : 2u * v.D;
                double tokens = 0;
                for (int32_t l : sh.lengths) tokens += l;
                const double rows = double(sh.lengths.size()) * sh.s_q * sh.h_q;
                const double kv = tokens * tb, io = kv + rows * v.D * 2 + rows * (v.D - 64) * 2;
                const double flops = 2.0 * sh.s_q * sh.h_q * tokens * (2.0 * v.D - 64);
                const std::string base = sh.name + "_" + attn_name(a) + "_" + std::to_string(v.D);
                const std::vector<std::string> names =
                    sh.name == "short" ? std::vector<std::string>{base + "_step", base + "_b2b", base + "_graph"}
                                       : std::vector<std::string>{base};
                for (const std::string &n : names)
                    report(Row{n, sh.name, attn_name(a), "made up", v.D, us += 7.0, io, kv, flops, tokens});
                if (sh.name == "mem" && !attn_fp8(a)) {
                    const std::string suf = std::string(attn_name(a)) + "_" + std::to_string(v.D);
                    for (const char *p : {"sched_", "combine_", "sched_combine_", "sched_combine_pair_"})
                        report(Row{p + suf, "sched_combine", attn_name(a), "made up", v.D, 1.25, 0, 0, 0, 0});
                }
            }
    write_json(argv[1], "FIXTURE (no GPU; not a measurement)");
    FILE *f = std::fopen(argv[2], "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "{");
    for (size_t i = 0; i < g_shapes.size(); i++) {
        const Shape &sh = g_shapes[i];
        std::fprintf(f, "%s\"%s\": {\"s_q\": %u, \"h_q\": %u, \"lengths\": [", i ? ", " : "", sh.name.c_str(), sh.s_q,
                     sh.h_q);
        for (size_t j = 0; j < sh.lengths.size(); j++) std::fprintf(f, "%s%d", j ? ", " : "", sh.lengths[j]);
        std::fprintf(f, "]}");
    }
    std::fprintf(f, "}\n");
    std::fclose(f);
    return 0;
}
