#!/usr/bin/env python3
"""The steps of bench/mla_decode/flashinfer_prep.sh (run by it, on the
development machine): FlashInfer's MLA decode wrapper and its paged GQA
decode wrapper made small enough to carry to the GPU machine, their kernels
compiled here. One trimmed wheel serves bench/mla_decode/flashinfer_mla.py
and bench/decode/flashinfer_decode.py (both run in the same device call).

    python flashinfer_trim.py build   --out-dir DIR [--backends fa3,fa2] [--decode bf16,e4m3] [--decode-tc]
                                                                          (in the build venv)
    python flashinfer_trim.py modules --out FILE                          (in the build venv)
    python        flashinfer_trim.py trim    --wheel WHL --modules FILE --aot DIR --out WHL [--no-jit-sources]
    python flashinfer_trim.py verify  --wheels DIR [--backends fa3,fa2] [--decode bf16,e4m3] [--decode-tc]
                                                                          (in the build venv)

build: compiles the JIT modules of BatchMLAPagedAttentionWrapper's FA3 (sm_90a)
  and FA2 backends for bf16 q, KV and out, int32 indices, head_dim_ckv 512,
  head_dim_kpe 64 (what flashinfer_mla.py plans), and of
  BatchDecodeWithPagedKVCacheWrapper's default path for each --decode KV
  type (bf16 q and out, a bf16 or fp8 e4m3 cache, int32 indices, head dim
  128, no RoPE, window or soft cap: what flashinfer_decode.py plans). That
  default (use_tensor_cores=False, backend "auto") on sm_90 is FlashInfer's
  CUDA-core decode kernel, module batch_decode_with_kv_cache_*: one module a
  dtype set; the GQA group and page size are runtime arguments (the kernel
  dispatches the group size), so one module serves every head count and
  block size. --decode-tc also builds the tensor-core path
  (use_tensor_cores=True: FA2's batch prefill kernels over the paged cache,
  module batch_prefill_with_kv_cache_*; "auto" resolves to fa2 for a bf16
  query, bf16 or fp8 cache, since FA3 takes an fp8 cache only with an fp8
  query). With this machine's nvcc, for sm_90a only
  (FLASHINFER_CUDA_ARCH_LIST=9.0a); each .so goes to DIR/<module name>.so.
  It only builds: loading needs a GPU driver.
modules: the flashinfer modules that `import flashinfer`, the MLA wrapper's
  and the decode wrapper's modules load (sys.modules after the imports),
  one a line.
trim: a new wheel of the same name and version holding (1) the .py files
  of those modules and of every flashinfer module they import, at module
  level or inside a function (a static closure over the sources: a lazy
  import on the MLA path is kept too); (2) the data files beside them
  (not kernel sources, at most 2 MB each); (3) the MLA and decode JIT
  sources under data/csrc (batch_mla_*.cu, batch_mla_config.jinja,
  batch_decode*.cu and .jinja, the FA2 batch_prefill ones, and what they
  include), which FlashInfer reads and copies into its workspace even when
  it loads a prebuilt module; (4) the prebuilt modules, as data/aot/<name>/<name>.so,
  where FlashInfer's loader looks first (flashinfer/jit/env.py,
  get_aot_artifacts: that file is used whatever the GPU); (5) unless
  --no-jit-sources, the headers a JIT build of these modules needs on the
  GPU machine (data/include, CUTLASS's include and tools/util/include,
  spdlog's include) should the prebuilt module not load there. Every other
  kernel's sources, the vendored CCCL (the CUDA toolkit has its own), the
  cubins, the experimental and training packages are left out. RECORD is
  rewritten for the files kept.
verify: installs the wheels of DIR (the trimmed flashinfer and an
  apache-tvm-ffi for this Python) into a fresh folder, imports flashinfer
  from there, and checks that each MLA backend's module and each decode
  module is found prebuilt (is_aot) and loads (tvm_ffi.load_module; no GPU
  needed for that), with the entry points the wrappers call; and, with
  FLASHINFER_DISABLE_JIT=1, that the decode wrapper's own getters
  (flashinfer.decode.get_batch_decode_module, flashinfer.prefill.
  get_batch_prefill_module("fa2", ...)) load them: the JIT sources they read
  are in the wheel and nothing would be compiled on the GPU machine.
"""
import argparse
import ast
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# What flashinfer_mla.py plans: the JIT module's arguments (get_batch_mla_module).
HEAD_DIM_CKV, HEAD_DIM_KPE = 512, 64
MLA_CSRC = [
    "batch_mla_config.jinja",
    "batch_mla_plan.cu",
    "batch_mla_run.cu",
    "batch_mla_binding.cu",
    "batch_mla_sm90_plan.cu",
    "batch_mla_sm90_run.cu",
    "batch_mla_sm90_binding.cu",
]
# What flashinfer_decode.py plans with BatchDecodeWithPagedKVCacheWrapper:
# bf16 q and out, int32 indices, head dim 128 (q/k and v), no RoPE
# (pos_encoding_mode 0), no sliding window, no soft cap, over each KV type.
DECODE_HEAD_DIM = 128
DECODE_KV = ("bf16", "e4m3")
DECODE_CSRC = [  # gen_customize_batch_decode_module reads these
    "batch_decode_customize_config.jinja",
    "batch_decode_kernel_inst.jinja",
    "batch_decode.cu",
    "batch_decode_jit_binding.cu",
]
DECODE_TC_CSRC = [  # the tensor-core path: gen_customize_batch_prefill_module, fa2
    "batch_prefill_customize_config.jinja",
    "batch_prefill_paged_kernel_inst.jinja",
    "batch_prefill_ragged_kernel_inst.jinja",
    "batch_prefill.cu",
    "batch_prefill_jit_binding.cu",
    "batch_prefill_paged.cu",
    "batch_prefill_paged_jit_binding.cu",
]
JIT_HEADER_TREES = [
    "flashinfer/data/include/",
    "flashinfer/data/cutlass/include/",
    "flashinfer/data/cutlass/tools/util/include/",
    "flashinfer/data/spdlog/include/",
]
SOURCE_EXT = (".cu", ".cuh", ".h", ".hpp", ".inl", ".cpp", ".cc", ".c", ".ptx", ".cubin", ".so", ".a", ".o")
MAX_DATA_FILE = 2 << 20
MLA_MODULE_SEEDS = [
    "flashinfer",
    "flashinfer.mla",
    "flashinfer.mla._batch_mla",
    "flashinfer.mla._batch_mla._wrapper",
    "flashinfer.mla._batch_mla._backends.fa2_backend",
    "flashinfer.mla._batch_mla._backends.fa3_backend",
    "flashinfer.mla._batch_mla._backends._fa_common",
    "flashinfer.jit.attention.modules",
    "flashinfer.jit.core",
    "flashinfer.jit.env",
    "flashinfer.jit.cpp_ext",
]
DECODE_MODULE_SEEDS = [
    "flashinfer.decode",
    "flashinfer.prefill",
    "flashinfer.page",
    "flashinfer.cudnn.decode",
    "flashinfer.cudnn.utils",
]


def module_args(torch):
    return (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, HEAD_DIM_CKV, HEAD_DIM_KPE, False)


def kv_dtype(torch, name):
    return {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}[name]


def decode_specs(torch, kvs, tensor_cores):
    """[(label, JitSpec)]: the modules BatchDecodeWithPagedKVCacheWrapper's
    plan() loads for flashinfer_decode.py's arguments (decode.py, plan:
    get_batch_decode_module without tensor cores; with them,
    get_batch_prefill_module("fa2", ...), whose primary module is the one an
    equal-stride K/V pair runs)."""
    from flashinfer.jit.attention.modules import gen_batch_decode_module

    specs = []
    for kv in [k for k in kvs.split(",") if k]:
        args = (torch.bfloat16, kv_dtype(torch, kv), torch.bfloat16, torch.int32, DECODE_HEAD_DIM, DECODE_HEAD_DIM,
                0, False, False)
        specs.append(("decode_" + kv, gen_batch_decode_module(*args)))
        if tensor_cores:
            from flashinfer.jit.attention.modules import _gen_batch_prefill_primary_module

            specs.append(("decode_tc_" + kv, _gen_batch_prefill_primary_module("fa2", *args, False, False)))
    return specs


# ---- build, modules, verify: inside a Python that has torch and flashinfer ----------


def cmd_build(args):
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    import torch  # noqa: F401  (flashinfer needs it; a CPU-only machine is fine for building)
    from flashinfer.jit.attention.modules import gen_batch_mla_module

    os.makedirs(args.out_dir, exist_ok=True)
    specs = [(b, gen_batch_mla_module(b, *module_args(torch))) for b in args.backends.split(",") if b]
    specs += decode_specs(torch, args.decode, args.decode_tc)
    for label, spec in specs:
        spec.build(verbose=args.verbose)
        dst = os.path.join(args.out_dir, spec.name + ".so")
        shutil.copyfile(spec.jit_library_path, dst)
        print(json.dumps({"backend": label, "module": spec.name, "so": dst, "bytes": os.path.getsize(dst)}),
              flush=True)


def cmd_modules(args):
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    import importlib

    for m in MLA_MODULE_SEEDS + DECODE_MODULE_SEEDS:
        importlib.import_module(m)
    names = sorted(m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer."))
    with open(args.out, "w") as f:
        f.write("\n".join(names) + "\n")
    print("%d flashinfer modules imported" % len(names))


def cmd_verify(args):
    wheels = sorted(os.path.join(args.wheels, w) for w in os.listdir(args.wheels) if w.endswith(".whl"))
    tag = "cp%d%d" % sys.version_info[:2]
    local = [w for w in wheels if "flashinfer" in os.path.basename(w) or tag in os.path.basename(w)]
    if args.extra_wheel:
        local += args.extra_wheel
    site = tempfile.mkdtemp(prefix="fi-verify-")
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--target", site] + local, check=True)
        code = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch, tvm_ffi, flashinfer
from flashinfer.mla import BatchMLAPagedAttentionWrapper, MLAPlanMetadata
from flashinfer.jit.attention.modules import gen_batch_mla_module
assert flashinfer.__file__.startswith(sys.argv[1]), flashinfer.__file__
out = {"flashinfer": flashinfer.__version__, "from": os.path.dirname(flashinfer.__file__)}
for backend in [b for b in sys.argv[2].split(",") if b]:
    spec = gen_batch_mla_module(backend, torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, 512, 64, False)
    mod = spec.try_load()
    out[backend] = {"module": spec.name, "is_aot": spec.is_aot, "aot_path": str(spec.aot_path),
                    "loads": mod is not None, "has_run": hasattr(mod, "run"), "has_plan": hasattr(mod, "plan")}
import flashinfer_trim
from flashinfer import BatchDecodeWithPagedKVCacheWrapper
for label, spec in flashinfer_trim.decode_specs(torch, sys.argv[3], sys.argv[4] == "1"):
    mod = spec.try_load()
    out[label] = {"module": spec.name, "is_aot": spec.is_aot, "aot_path": str(spec.aot_path),
                  "loads": mod is not None, "has_run": hasattr(mod, "run") or hasattr(mod, "paged_run"),
                  "has_plan": hasattr(mod, "plan")}
# What the decode wrapper's plan() calls (decode.py, prefill.py), JIT off:
# the prebuilt module loads, its torch ops register, the JIT sources it reads are there.
from flashinfer.decode import get_batch_decode_module
from flashinfer.prefill import get_batch_prefill_module
os.environ["FLASHINFER_DISABLE_JIT"] = "1"
for kv in [k for k in sys.argv[3].split(",") if k]:
    dt = flashinfer_trim.kv_dtype(torch, kv)
    args = (torch.bfloat16, dt, torch.bfloat16, torch.int32, 128, 128, 0, False, False)
    m = get_batch_decode_module(*args)
    out["decode_" + kv]["wrapper_getter"] = all(hasattr(m, f) for f in ("plan", "run"))
    if sys.argv[4] == "1":
        m = get_batch_prefill_module("fa2", *args, False, False)
        out["decode_tc_" + kv]["wrapper_getter"] = all(hasattr(m, f) for f in ("plan", "paged_run"))
print(json.dumps(out, indent=1))
ok = all(v["is_aot"] and v["loads"] and v["has_run"] and v["has_plan"] and v.get("wrapper_getter", True)
         for k, v in out.items() if isinstance(v, dict))
sys.exit(0 if ok else 1)
"""
        env = dict(os.environ)
        env["FLASHINFER_WORKSPACE_BASE"] = tempfile.mkdtemp(prefix="fi-verify-ws-")
        env.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
        # This file (decode_specs) importable from the check, which runs from the site.
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
        r = subprocess.run([sys.executable, "-c", code, site, args.backends, args.decode,
                            "1" if args.decode_tc else "0"], env=env)
        if r.returncode != 0:
            sys.exit("verify: the trimmed wheel does not import or does not find its prebuilt modules")
        print("verify: the trimmed flashinfer imports and loads its prebuilt MLA modules (%s) and decode modules "
              "(%s%s)" % (args.backends, args.decode, ", tensor cores too" if args.decode_tc else ""))
    finally:
        shutil.rmtree(site, ignore_errors=True)


# ---- trim: the standard library only --------------------------------------------------


def module_table(names):
    """{module name: zip path} for the .py files of the wheel."""
    mods = {}
    for n in names:
        if n.startswith("flashinfer/") and n.endswith(".py"):
            m = n[:-3].replace("/", ".")
            if m.endswith(".__init__"):
                m = m[: -len(".__init__")]
            mods[m] = n
    return mods


def imports_of(zf, mods, m):
    """Every flashinfer module m's source names: imports anywhere in the file
    (module level or in a function), relative ones resolved, and string
    constants that are module names (importlib.import_module)."""
    path = mods[m]
    try:
        tree = ast.parse(zf.read(path).decode("utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return set()
    pkg = m if path.endswith("__init__.py") else m.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                b = base + ("." + node.module if node.module else "")
            else:
                b = node.module or ""
            names.add(b)
            names.update(b + "." + a.name for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("flashinfer."):
            names.add(node.value)
    found = set()
    for x in names:
        while x:  # the module itself, else the package that holds the name
            if x in mods:
                found.add(x)
                break
            x = x.rpartition(".")[0]
    return found


def closure(zf, mods, seeds):
    seen, todo = set(), list(seeds)
    while todo:
        m = todo.pop()
        if m in seen or m not in mods:
            continue
        seen.add(m)
        p = m.rpartition(".")[0]
        while p:  # importing a module runs its packages' __init__
            todo.append(p)
            p = p.rpartition(".")[0]
        todo.extend(imports_of(zf, mods, m))
    return seen


def csrc_closure(zf, names):
    """The MLA and decode csrc files and the csrc files they #include "..." (recursively)."""
    csrc = "flashinfer/data/csrc/"
    have = set(n for n in names if n.startswith(csrc))
    keep, todo = set(), [csrc + f for f in MLA_CSRC + DECODE_CSRC + DECODE_TC_CSRC]
    while todo:
        n = todo.pop()
        if n in keep or n not in have:
            continue
        keep.add(n)
        for line in zf.read(n).decode("utf-8", "replace").splitlines():
            s = line.strip()
            if s.startswith("#include") and '"' in s:
                inc = s.split('"')[1]
                todo.append(os.path.normpath(os.path.join(os.path.dirname(n), inc)))
    return keep


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def cmd_trim(args):
    src = zipfile.ZipFile(args.wheel)
    infos = {i.filename: i for i in src.infolist() if not i.is_dir()}
    names = sorted(infos)
    dist = [n for n in names if n.split("/")[0].endswith(".dist-info")]
    record = [n for n in dist if n.endswith("/RECORD")]
    if len(record) != 1:
        sys.exit("trim: %s has no single RECORD" % args.wheel)
    mods = module_table(names)
    seeds = [l.strip() for l in open(args.modules) if l.strip()] + MLA_MODULE_SEEDS + DECODE_MODULE_SEEDS
    kept_mods = closure(src, mods, seeds)
    keep = set(mods[m] for m in kept_mods)
    py_dirs = set(os.path.dirname(p) for p in keep)
    pkg_dirs = set(os.path.dirname(p) for p in mods.values())
    for n in names:  # data files beside kept modules, or in data-only folders below them
        if n.startswith("flashinfer/data/") or n.endswith(".py") or n.endswith(SOURCE_EXT):
            continue
        d = os.path.dirname(n)
        while d and d not in py_dirs and d not in pkg_dirs:
            d = os.path.dirname(d)
        if d in py_dirs and infos[n].file_size <= MAX_DATA_FILE:
            keep.add(n)
    keep |= csrc_closure(src, names)
    if not args.no_jit_sources:
        keep |= set(n for n in names if any(n.startswith(t) for t in JIT_HEADER_TREES))
    keep |= set(n for n in dist if n not in record)
    aot = {}
    for f in sorted(os.listdir(args.aot)) if args.aot else []:
        if f.endswith(".so"):
            name = f[:-3]
            aot["flashinfer/data/aot/%s/%s.so" % (name, name)] = os.path.join(args.aot, f)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    lines = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for n in sorted(keep):
            data = src.read(n)
            out.writestr(infos[n], data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            lines.append(record_line(n, data))
        for n, path in sorted(aot.items()):
            data = open(path, "rb").read()
            zi = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = 0o755 << 16
            out.writestr(zi, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            lines.append(record_line(n, data))
        lines.append("%s,," % record[0])
        out.writestr(infos[record[0]], "\n".join(lines) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    os.replace(tmp, args.out)
    kept_bytes = sum(infos[n].file_size for n in keep)
    summary = {
        "source_wheel": os.path.basename(args.wheel),
        "source_bytes": os.path.getsize(args.wheel),
        "source_files": len(names),
        "source_modules": len(mods),
        "kept_modules": len(kept_mods),
        "kept_files": len(keep) + len(aot),
        "kept_uncompressed_bytes": kept_bytes + sum(os.path.getsize(p) for p in aot.values()),
        "prebuilt_modules": sorted(os.path.basename(p) for p in aot.values()),
        "jit_sources": not args.no_jit_sources,
        "out": os.path.basename(args.out),
        "out_bytes": os.path.getsize(args.out),
    }
    print(json.dumps(summary, indent=1))
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out-dir", required=True)
    b.add_argument("--backends", default="fa3,fa2")
    b.add_argument("--decode", default=",".join(DECODE_KV), help="decode KV types (bf16, e4m3); '' for none")
    b.add_argument("--decode-tc", action="store_true", help="also the decode wrapper's tensor-core modules")
    b.add_argument("--verbose", action="store_true")
    m = sub.add_parser("modules")
    m.add_argument("--out", required=True)
    t = sub.add_parser("trim")
    t.add_argument("--wheel", required=True)
    t.add_argument("--modules", required=True)
    t.add_argument("--aot", help="folder of prebuilt <module name>.so files")
    t.add_argument("--out", required=True)
    t.add_argument("--summary", help="also write the summary JSON here")
    t.add_argument("--no-jit-sources", action="store_true", help="leave out the headers of a JIT fallback")
    v = sub.add_parser("verify")
    v.add_argument("--wheels", required=True)
    v.add_argument("--backends", default="fa3,fa2")
    v.add_argument("--decode", default=",".join(DECODE_KV))
    v.add_argument("--decode-tc", action="store_true")
    v.add_argument("--extra-wheel", action="append", help="another wheel for this Python (its apache-tvm-ffi)")
    args = ap.parse_args()
    {"build": cmd_build, "modules": cmd_modules, "trim": cmd_trim, "verify": cmd_verify}[args.cmd](args)


if __name__ == "__main__":
    main()
