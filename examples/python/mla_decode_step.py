#!/usr/bin/env python3
"""One MLA decode step from PyTorch (schedule, attention, combine) against a torch reference.

    python3 examples/python/mla_decode_step.py [--fp8] [--variant deepseek_v4_flash] [--batch 16] [--len 4096]
                                               [--s-q 2] [--h-q 16] [--page 64] [--launcher auto|mma|tma]
                                               [--runs 20] [--dry-run]

Needs a CUDA GPU (sm_80 or newer), PyTorch with CUDA, and klaunch's Python
launchers, staged (`bash tools/gpu/stage_python.sh`; this script finds
.gpu/python) or installed (`pip install ./python`; docs/PYTHON.md).
--dry-run needs neither a GPU nor torch: the same launches go to klaunch's
recording backend, and it checks what each kernel would receive.

It builds a paged latent cache (bf16, or with --fp8 the E4M3 token of
include/klaunch/mla_decode_layout.h), its pages shuffled over a pool, NaN in
the pages no table names and past every length, and ragged lengths (one 0,
one 1). A step (docs/MLA_DECODE.md) is mla_decode_schedule, one attention
launcher (_tma on Hopper where its sm_90a kernel loaded and pages are a
multiple of 64 positions, else the portable _mma: it says which) and
mla_decode_combine (_pdl on sm_90+). It compares out and lse with a float32
torch reference, times the step eagerly and as a CUDA graph replay (median
of --runs), and shows two refused launches.
Exit status: 0 the outputs match, 1 they do not, 2 something it needs is missing.
"""

import argparse
import ctypes
import math
import os
import random
import struct
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
STAGED = os.path.join(HERE, "..", "..", ".gpu", "python")


def need(what):
    print("mla_decode_step: %s" % what, file=sys.stderr)
    sys.exit(2)


try:
    import torch
except ImportError:
    torch = None  # --dry-run does without
try:
    import klaunch
    import klaunch_mla_decode as kl
except ImportError:
    sys.path.insert(0, os.path.abspath(STAGED))
    try:
        import klaunch
        import klaunch_mla_decode as kl
    except ImportError as e:
        need("klaunch's Python launchers are not importable (%s): run bash tools/gpu/stage_python.sh, or "
             "pip install ./python" % e)

LAUNCHER = {launcher.name: launcher for launcher in kl.LAUNCHERS}

# include/klaunch/mla_decode_layout.h, whose C functions klaunch_mla_decode does not
# expose: kl_mla_decode_rows_per_block and _blocks_per_sm by kind, _num_parts,
# _schedule_words, _workspace_bytes, _fp8_rope_offset.
KINDS = {"mma": (16, 2), "bf16_tma": (64, 1), "fp8_tma": (16, 1)}  # rows a block, blocks a multiprocessor


def num_parts(kind, sm_count, s_q, h_q):
    rows, per_sm = KINDS[kind]
    return min(65535, max(1, sm_count * per_sm // max(1, -(-s_q * h_q // rows))))  # blocks at once / blocks a part


def sizes(d, kind, sm_count):
    """num_parts, the schedule's int32 words and the workspace's bytes, into d."""
    d.parts = num_parts(kind, sm_count, d.s_q, d.h_q)
    d.words = 16 + 8 * d.parts + 4 * d.batch
    d.ws_bytes = 8 * d.parts * d.s_q * d.h_q * (d.D - 63)  # 2 * parts slots of s_q * h_q rows of kv_lora + 1 floats


def fp8_rope_offset(kv_lora):
    return (kv_lora + kv_lora // 32 + 15) & ~15  # after the e4m3 values and one fp32 scale per 128, 16-aligned


def choose(mod, want, fp8, cc_major, page):
    """(attention launcher, kind, why); launcher None when --launcher tma cannot run.
    The rule of kl_mla_decode_attn_*_choose without a table (specs/mla_decode.yaml's fallback): _tma where its
    kl_X_get succeeded, on sm_90, pages a multiple of 64 positions."""
    cache = "fp8" if fp8 else "bf16"
    tma, mma = "mla_decode_attn_%s_tma" % cache, "mla_decode_attn_%s_mma" % cache
    if want == "mma":
        return mma, "mma", "asked for"
    why = mod.kernel_status(tma)  # None, or the klaunch.Error of its kl_X_get (UnsupportedError off sm_90a)
    why = str(why) if why is not None else ("compute capability %d.x, not 9.x" % cc_major if cc_major != 9 else
                                            "page_size %d is not a multiple of 64" % page if page % 64 else None)
    if why is None:
        return tma, cache + "_tma", "Hopper: its sm_90a kernel loaded"
    return (None if want == "tma" else mma), "mma", "%s is unavailable: %s" % (tma, why)


def pick_combine(mod, cc_major):
    pdl = "mla_decode_combine_pdl"  # a programmatic dependent launch: its kl_X_get fails below sm_90
    return pdl if cc_major >= 9 and mod.kernel_status(pdl) is None else "mla_decode_combine"


def decode_step(mod, attn, combine, t, d):
    """The launches of one step, (launcher, arguments) in order; a _tma
    launcher's tensor maps are encoded here, once, before any capture."""
    if attn.endswith("_tma"):
        # t.q3 is q viewed [batch][s_q * h_q][D]: extents (D, s_q * h_q, batch), strides (D, s_q * h_q * D).
        q_arg = getattr(kl, attn + "_q_map_encode")(t.q3, module=mod)
        # The bf16 cache [blocks][page][D]: (D, page, num_blocks), strides (D, page * D); fp8 goes as bytes.
        cache_arg = t.cache if d.fp8 else kl.mla_decode_attn_bf16_tma_cache_map_encode(t.cache, module=mod)
    else:
        q_arg, cache_arg = t.q, t.cache
    tail = (d.parts, d.words, d.ws_bytes)
    return [("mla_decode_schedule", (t.lengths, t.sched, d.batch, d.parts, d.words)),
            (attn, (q_arg, cache_arg, t.table, t.lengths, t.sched, t.out, t.lse, t.workspace, d.batch, d.s_q,
                    d.h_q, d.D, d.page, d.max_blocks, d.num_blocks, d.scale) + tail),
            (combine, (t.sched, t.workspace, t.out, t.lse, d.batch, d.s_q, d.h_q, d.D) + tail)]


def run(mod, step):
    for name, args in step:
        getattr(kl, name)(*args, module=mod)


def show_refusals(mod, step, t):
    """Two refused launches and what they say; False if one was not refused."""
    name, args = step[1]
    bad = list(args)
    bad[[p.name for p in LAUNCHER[name].params].index("s_q")] = 9
    tries = [(klaunch.PreconditionError, lambda: getattr(kl, name)(*bad, module=mod, check_only=True)),
             (klaunch.DtypeError,  # a float32 q; a _tma launcher takes q as a map, whose builder checks it
              (lambda: getattr(kl, name + "_q_map_encode")(t.q3_f32, module=mod)) if name.endswith("_tma") else
              (lambda: getattr(kl, name)(t.q_f32, *args[1:], module=mod, check_only=True)))]
    ok = True
    for cls, attempt in tries:
        try:
            attempt()
            print("NOT refused: expected %s" % cls.__name__)
            ok = False
        except cls as e:
            print("refused (%s): %s" % (cls.__name__, e))
    return ok


# ---- on the GPU ----

def build(d, dev):
    """Tensors of the step, the lengths, and the key rows the kernels compute with."""
    g = torch.Generator(device=dev).manual_seed(0)
    rng = random.Random(0)
    lens = [rng.randint(1, d.len) for _ in range(d.batch)]
    if d.batch > 1:
        lens[0], lens[-1] = 0, d.len  # length 0: reads nothing, writes zeros and -inf
    if d.batch > 2:
        lens[1] = 1  # with s_q > 1, its first tokens see no position
    nb, page, kv_lora = d.num_blocks, d.page, d.kv_lora
    if d.fp8:
        latent = torch.randn(nb, page, kv_lora, device=dev, generator=g)
        scale = latent.view(nb, page, -1, 128).abs().amax(-1).clamp_min(1e-6) / 448  # e4m3's largest is 448
        e4m3 = (latent / scale.repeat_interleave(128, -1)).to(torch.float8_e4m3fn)
        rope = torch.randn(nb, page, 64, device=dev, generator=g).to(torch.bfloat16)
        cache = torch.zeros(nb, page, d.token_bytes, dtype=torch.uint8, device=dev)  # padding stays 0
        cache[..., :kv_lora] = e4m3.view(torch.uint8)
        cache[..., kv_lora:kv_lora + kv_lora // 32] = scale.view(torch.uint8)  # fp32 [.., n] as bytes [.., 4n]
        cache[..., fp8_rope_offset(kv_lora):] = rope.view(torch.uint8)
        # float(e4m3) * scale, rounded to bf16 for the tensor cores, then the rope part.
        keys = torch.cat([(e4m3.float() * scale.repeat_interleave(128, -1)).to(torch.bfloat16), rope], -1)
    else:
        cache = keys = torch.randn(nb, page, d.D, device=dev, generator=g).to(torch.bfloat16)
    perm = torch.randperm(nb, device=dev, generator=g).to(torch.int32)
    table = perm[:d.batch * d.max_blocks].view(d.batch, d.max_blocks).contiguous()
    # Poison what a step must not read (NaN in bf16; bytes 0xff are NaN as e4m3, fp32 and bf16):
    # the pages no table names, and every position past a sequence's length.
    flat, poison = cache.view(nb * page, -1), 0xff if d.fp8 else float("nan")
    cache[perm[d.batch * d.max_blocks:].long()] = poison
    for b, n in enumerate(lens):
        pos = torch.arange(n, d.max_blocks * page, device=dev)
        flat[table[b, pos // page].long() * page + pos % page] = poison
    q = torch.randn(d.batch, d.s_q, d.h_q, d.D, device=dev, generator=g).to(torch.bfloat16)
    R = d.s_q * d.h_q
    t = SimpleNamespace(
        q=q, q3=q.view(d.batch, R, d.D), q_f32=q.float(), q3_f32=q.float().view(d.batch, R, d.D), cache=cache,
        table=table, lengths=torch.tensor(lens, dtype=torch.int32, device=dev),
        sched=torch.empty(d.words, dtype=torch.int32, device=dev),
        workspace=torch.empty(d.ws_bytes // 4, dtype=torch.float32, device=dev),  # needs no initialisation
        out=torch.empty(d.batch, d.s_q, d.h_q, d.kv_lora, dtype=torch.bfloat16, device=dev),
        lse=torch.empty(d.batch, d.s_q, d.h_q, dtype=torch.float32, device=dev))
    return t, lens, keys


def reference(t, lens, keys, d):
    """out and lse in float32, each sequence's rows gathered through its block table."""
    R, dev = d.s_q * d.h_q, t.q.device
    out = torch.zeros(d.batch, R, d.kv_lora, device=dev)
    lse = torch.full((d.batch, R), -math.inf, device=dev)
    token = torch.arange(d.s_q, device=dev).repeat_interleave(d.h_q)  # row r = i * h_q + h is token i
    rows = keys.view(d.num_blocks * d.page, d.D)
    for b, n in enumerate(lens):
        pos = torch.arange(n, device=dev)
        k = rows[t.table[b, pos // d.page].long() * d.page + pos % d.page].float()  # [n][D]
        s = (t.q[b].reshape(R, d.D).float() @ k.T) * d.scale
        s = s.masked_fill(pos[None, :] >= (n - d.s_q + 1 + token)[:, None], -math.inf)  # causal among the s_q
        lse[b] = torch.logsumexp(s, -1)  # -inf where nothing is visible
        out[b] = torch.softmax(s, -1).nan_to_num(0.0) @ k[:, :d.kv_lora]  # V: the latent columns
    return out.view(t.out.shape), lse.view(t.lse.shape)


def compare(what, t, ref_out, ref_lse):
    out, lse, empty = t.out.float(), t.lse, torch.isneginf(ref_lse)
    rel = ((out - ref_out).norm() / ref_out.norm().clamp_min(1e-30)).item()
    err = (lse[~empty] - ref_lse[~empty]).abs().max().item() if (~empty).any() else 0.0
    empty_ok = torch.equal(torch.isneginf(lse), empty) and bool((out[empty] == 0).all())
    print("%-5s out relative L2 %.3g, lse max |diff| %.3g, %d rows seeing nothing: %s" % (
        what, rel, err, int(empty.sum()), "-inf and zeros" if empty_ok else "WRONG"))
    return rel < 1e-2 and err < 1e-2 and empty_ok


def median_us(fn, runs):
    for _ in range(3):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for a, b in zip(starts, stops):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    us = sorted(1000.0 * a.elapsed_time(b) for a, b in zip(starts, stops))
    return us[len(us) // 2]


def gpu_run(args, d):
    if torch is None or not torch.cuda.is_available():
        need("PyTorch with a CUDA GPU is needed (or run --dry-run)")
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    try:
        mod = kl.load(dev, d.variant)  # every kl_X_get now: nothing loads later, nor during the capture
    except klaunch.Error as e:
        need("cannot load %s: %s" % (d.variant, e))
    attn, kind, why = choose(mod, args.launcher, d.fp8, props.major, d.page)
    if attn is None:
        need(why)
    combine = pick_combine(mod, props.major)
    sizes(d, kind, props.multi_processor_count)
    print("%s (sm_%d%d, %d SMs), torch %s; %s, %s cache, batch %d, lengths <= %d, s_q %d, h_q %d, page %d" % (
        props.name, props.major, props.minor, props.multi_processor_count, torch.__version__, d.variant,
        "fp8" if d.fp8 else "bf16", d.batch, d.len, d.s_q, d.h_q, d.page))
    print("attention %s (%s), then %s; %d parts" % (attn, why, combine, d.parts))
    torch.backends.cuda.matmul.allow_tf32 = False  # a float32 reference
    t, lens, keys = build(d, dev)
    try:
        step = decode_step(mod, attn, combine, t, d)
        run(mod, step)
    except klaunch.Error as e:
        need("klaunch refused this shape: %s" % e)
    torch.cuda.synchronize()
    ref_out, ref_lse = reference(t, lens, keys, d)
    ok = compare("eager", t, ref_out, ref_lse)

    t_eager = median_us(lambda: run(mod, step), args.runs)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # warm up on a side stream, as torch asks before a capture
    with torch.cuda.stream(side):
        run(mod, step)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):  # launches go to torch's current stream: the capturing one
        run(mod, step)
    t.out.zero_()
    t.lse.zero_()
    graph.replay()  # the schedule reads the lengths again, on the device
    torch.cuda.synchronize()
    ok = compare("graph", t, ref_out, ref_lse) and ok
    t_graph = median_us(graph.replay, args.runs)
    read = sum(lens) * (d.token_bytes if d.fp8 else 2 * d.D)
    print("eager %8.1f us  (3 launches from Python: at small sizes mostly their host cost)" % t_eager)
    print("graph %8.1f us  %6.0f GB/s of cache rows" % (t_graph, read / t_graph / 1e3))
    ok = show_refusals(mod, step, t) and ok
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


# ---- --dry-run: the recording backend; no GPU, no torch ----

class _DLTensor(ctypes.Structure):  # DLPack's DLTensor with its DLDevice and DLDataType flattened
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]  # the rest of DLManagedTensor


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DryTensor:
    """An address, a shape and an element type on cuda:0, exported through
    DLPack (bf16 has no __cuda_array_interface__ type). The recording backend
    reads no memory, so there is none."""
    DL = {"bf16": (4, 16), "f32": (2, 32), "i32": (0, 32), "u8": (1, 8)}
    next_address = 0x7f0000000000

    def __init__(self, element, *shape, address=None):
        self.element, self.shape, self._keep = element, shape, []
        self.address = address or DryTensor.next_address
        DryTensor.next_address += (math.prod(shape) * self.DL[element][1] // 8 >> 20) + 1 << 20

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None, max_version=None):
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        m = _DLTensor(self.address, 2, 0, len(self.shape), *self.DL[self.element], 1, shape, None, 0, None, None)
        self._keep += [shape, m]
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)  # unversioned; no strides: row-major


def dry_run(args, d):
    T, R = DryTensor, d.s_q * d.h_q
    q = T("bf16", d.batch, d.s_q, d.h_q, d.D)
    t = SimpleNamespace(
        q=q, q3=T("bf16", d.batch, R, d.D, address=q.address), q_f32=T("f32", d.batch, d.s_q, d.h_q, d.D),
        q3_f32=T("f32", d.batch, R, d.D), table=T("i32", d.batch, d.max_blocks), lengths=T("i32", d.batch),
        cache=T("u8", d.num_blocks, d.page, d.token_bytes) if d.fp8 else T("bf16", d.num_blocks, d.page, d.D),
        out=T("bf16", d.batch, d.s_q, d.h_q, d.kv_lora), lse=T("f32", d.batch, d.s_q, d.h_q))
    # An sm_90a fatbin's metadata (what load_record's image= takes): the variant's, and its cuda_arch line.
    meta = "klaunch-module 1\nfamily %s\nvariant %s\nspec_hash %s\ncuda_arch 900a\n" % (
        kl.FAMILY, d.variant, kl.SPEC_HASH) + "".join("const %s %d\n" % c for c in kl.VARIANTS[d.variant].items())
    ok = True
    # Twice: as that image, and as the variant's own metadata (no sm_90a: its _tma kl_X_get fails, as off Hopper).
    for label, image in (("sm_90a image", meta), ("no sm_90a", None)):
        # An H100's 227 KiB of shared memory a block (the backend's default 48 KiB refuses the attention kernels).
        mod = kl.load_record(None if image else d.variant, image=image, max_dynamic_shared=227 * 1024)
        attn, kind, why = choose(mod, args.launcher, d.fp8, 9, d.page)
        print("[%s] attention %s (%s)" % (label, attn, why))
        if attn is None:
            continue
        sizes(d, kind, 132)  # as on an H100 SXM
        t.sched, t.workspace = T("i32", d.words), T("f32", d.ws_bytes // 4)
        try:
            step = decode_step(mod, attn, pick_combine(mod, 9), t, d)
            run(mod, step)
        except klaunch.Error as e:
            print("  WRONG: refused: %s" % e)
            ok = False
            continue
        # What each kernel parameter must hold, by name (so an argument out of order shows).
        want = dict(q=t.q, kv_cache=t.cache, block_table=t.table, lengths=t.lengths, sched=t.sched, out=t.out,
                    lse=t.lse, workspace=t.workspace, batch=d.batch, s_q=d.s_q, h_q=d.h_q, head_dim=d.D,
                    page_size=d.page, max_blocks_per_seq=d.max_blocks, num_blocks=d.num_blocks,
                    softmax_scale=d.scale, num_parts=d.parts, q_map=(t.q3, (d.D, R, d.batch), (d.D, R * d.D)),
                    cache_map=(t.cache, (d.D, d.page, d.num_blocks), (d.D, d.page * d.D)))
        records = mod.records()
        ok = ok and [r.launcher for r in records] == [n for n, _ in step]
        for r, (name, a) in zip(records, step):
            given = dict(zip((p.name for p in LAUNCHER[name].params), a))
            bad = []
            # (name, KL_PARAM_* kind, offset, size) of kl_X_params: only the private _F has it.
            for p, pk, off, size in kl._F.kernel_params(name):
                raw, w = r.args[off:off + size], want[p]
                if pk == 6:  # a tensor map: its 128 bytes, encoded for the right tensor and shape
                    m = given[p]
                    good = raw == m.opaque() and (m.tensor, m.extents, m.strides) == w
                else:
                    good = raw == struct.pack({0: "<Q", 1: "<I", 3: "<f"}[pk], w.address if pk == 0 else w)
                bad += [] if good else [p]
            if name == attn and r.grid[1] != d.parts:  # num_parts is not a kernel argument: it is grid y
                bad.append("num_parts (grid y %d)" % r.grid[1])
            ok = ok and not bad
            print("  %-24s grid %-13s block %-13s %6d shared bytes, %3d argument bytes %s" % (
                name, r.grid, r.block, r.shared_bytes, len(r.args),
                "as expected" if not bad else "WRONG: %s" % bad))
        ok = show_refusals(mod, step, t) and ok
    print("dry run ok" if ok else "dry run: WRONG")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fp8", action="store_true", help="an fp8 E4M3 cache (MLA_FP8_TOKEN_BYTES a token)")
    ap.add_argument("--variant", default="deepseek_v4_flash", choices=sorted(kl.VARIANTS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--len", type=int, default=4096, help="the longest sequence; the others are shorter")
    ap.add_argument("--s-q", type=int, default=2, help="new tokens a sequence (1 to 8)")
    ap.add_argument("--h-q", type=int, default=16, help="query heads (1 to 128)")
    ap.add_argument("--page", type=int, default=64, help="positions a cache page")
    ap.add_argument("--launcher", default="auto", choices=("auto", "mma", "tma"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true", help="the recording backend: no GPU, no torch")
    args = ap.parse_args()
    c = kl.VARIANTS[args.variant]
    max_blocks = max(1, -(-args.len // args.page))
    d = SimpleNamespace(
        variant=args.variant, fp8=args.fp8, batch=args.batch, len=args.len, s_q=args.s_q, h_q=args.h_q,
        page=args.page, D=c["MLA_HDIM"], kv_lora=c["MLA_HDIM"] - 64, token_bytes=c["MLA_FP8_TOKEN_BYTES"],
        max_blocks=max_blocks, num_blocks=args.batch * max_blocks + 4,  # 4 pages no table names
        scale=c["MLA_HDIM"] ** -0.5)  # any scale would do; this one keeps random scores near 1
    assert fp8_rope_offset(d.kv_lora) + 128 == d.token_bytes  # the header's token is the variant's
    return dry_run(args, d) if args.dry_run else gpu_run(args, d)


if __name__ == "__main__":
    sys.exit(main())
