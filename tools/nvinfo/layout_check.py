"""layout_check: a spec's kernels against the parameter records of cubins.

The build-time layer of docs/ARG_ORDER.md. For every launcher of the spec
(its kernel parameters, offsets and sizes as the generator computes them,
klaunch_codegen) and every cubin given:

- the kernel is in the cubin (a `.nv.info.<entry>` section);
- parameter i of the cubin (EIATTR_KPARAM_INFO, ordinal i) has the spec's
  offset and size, for every i; none is missing, none is extra;
- the parameter buffer (EIATTR_CBANK_PARAM_SIZE) is the spec's size;
- a kernel with a tensor map (128-byte aligned in the constant bank) is
  laid out from where the cubin's parameters start (EIATTR_PARAM_CBANK):
  the spec's offsets are for a 128-byte-aligned start, and each target's
  start moves the map and what follows it;
- the cubin's module metadata names the spec's family and was built from
  this very spec (its spec_hash), else the cubin is stale.

Each problem is one line, compiler style, at the spec's file:line:col:

    specs/x.yaml:14:9: error: x_v1.sm_90.cubin: kernel k, parameter 3 (n): the cubin has offset 16, 8 bytes; the spec says offset 16, 4 bytes (u32)

    python3 tools/nvinfo/layout_check.py --spec specs/paged_decode.yaml bazel-bin/kernels/paged_decode_*.cubin
"""

import argparse
import os
import sys

try:
    from cubin_nvinfo import CubinError, load
except ImportError:  # run as tools/nvinfo/layout_check.py from elsewhere
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cubin_nvinfo import CubinError, load


def _codegen():
    """klaunch_codegen's spec loader (from //codegen:klaunch_codegen_lib, or
    the workspace's codegen/ when run by hand)."""
    try:
        from klaunch_codegen import diag, spec
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "..", "codegen"))
        from klaunch_codegen import diag, spec
    return diag, spec


class Problem:
    def __init__(self, path, pos, cubin, message):
        self.path = path
        self.line, self.col = pos
        self.cubin = cubin
        self.message = message

    def __str__(self):
        return "%s:%d:%d: error: %s: %s" % (self.path, self.line, self.col, os.path.basename(self.cubin), self.message)


def load_spec(path):
    """The validated spec; ValueError with the generator's diagnostics otherwise."""
    diag, spec = _codegen()
    diags = diag.Diagnostics()
    s = spec.load_spec(path, diags)
    if s is None:
        raise ValueError("\n".join(str(d) for d in diags.items))
    return s


def rebuild_hint(family):
    return "rebuild: ./bazelw build //kernels:%s (or ./bazelw run //:generate)" % family


def layout_at(params, base):
    """([offset], size) of kernel parameters in a buffer starting `base`
    bytes into the constant bank, each at its alignment there."""
    offsets, end = [], 0
    for p in params:
        a = p.type.align
        at = (base + end + a - 1) // a * a - base
        offsets.append(at)
        end = at + p.type.size
    return offsets, end


def check_cubin(spec, cubin):
    """[Problem] of one parsed cubin (nvinfo.Cubin) against one spec."""
    out = []
    path = spec.path

    def problem(pos, message):
        out.append(Problem(path, pos, cubin.path, message))

    if cubin.module_info is None:
        problem(spec.family_pos, "no %s: not built from klaunch/%s.cuh" % ("kl__module_info", spec.family))
    else:
        family = cubin.module_field("family")
        if family != spec.family:
            problem(spec.family_pos, "the cubin's module is of family %s; this spec is family %s" % (family, spec.family))
        built_from = cubin.module_field("spec_hash")
        if built_from != "sha256:" + spec.sha256:
            problem(
                spec.family_pos,
                "stale: the cubin was built from spec %s; %s is sha256:%s; %s"
                % (built_from, path, spec.sha256, rebuild_hint(spec.family)),
            )

    for l in spec.launchers:
        kernel = cubin.kernels.get(l.entry)
        want = l.kernel_params
        if kernel is None:
            problem(l.pos, "kernel %s is not in the cubin (no .nv.info.%s section): no kernel source of the family defines it" % (l.entry, l.entry))
            continue
        got = kernel.params
        offsets, param_bytes = [p.offset for p in want], l.param_bytes
        if any(p.type.is_tensor_map for p in want):
            if kernel.param_base is None:
                problem(l.pos, "kernel %s has a tensor map but no EIATTR_PARAM_CBANK record: where its parameters start is unknown" % l.entry)
                continue
            offsets, param_bytes = layout_at(want, kernel.param_base)
        for i, p in enumerate(want):
            if i >= len(got):
                problem(
                    p.pos,
                    "kernel %s lacks parameter %d (%s, offset %d, %d bytes, %s): the cubin's kernel has %d parameters, the spec %d"
                    % (l.entry, i + 1, p.name, p.offset, p.type.size, p.type.spec, len(got), len(want)),
                )
                break
            c = got[i]
            if (c.offset, c.size) != (offsets[i], p.type.size):
                problem(
                    p.pos,
                    "kernel %s, parameter %d (%s): the cubin has offset %d, %d bytes; the spec says offset %d, %d bytes (%s)"
                    % (l.entry, i + 1, p.name, c.offset, c.size, offsets[i], p.type.size, p.type.spec),
                )
        if len(got) > len(want):
            extra = got[len(want)]
            problem(
                l.pos,
                "kernel %s has %d parameters, the spec %d: parameter %d (offset %d, %d bytes) is not in the spec"
                % (l.entry, len(got), len(want), len(want) + 1, extra.offset, extra.size),
            )
        if kernel.param_size is None:
            problem(l.pos, "kernel %s has no EIATTR_CBANK_PARAM_SIZE record" % l.entry)
        elif kernel.param_size != param_bytes:
            problem(
                l.pos,
                "kernel %s takes a %d-byte parameter buffer (EIATTR_CBANK_PARAM_SIZE); the spec's is %d bytes"
                % (l.entry, kernel.param_size, param_bytes),
            )
    return out


def check_files(spec, cubin_paths):
    """[str]: every problem of every cubin (unreadable cubins included)."""
    lines = []
    for c in cubin_paths:
        try:
            cubin = load(c)
        except (OSError, CubinError) as e:
            lines.append("%s: error: %s" % (c, e))
            continue
        lines += [str(p) for p in check_cubin(spec, cubin)]
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="layout_check", description="Check cubins' kernel parameter layouts against a klaunch spec.")
    ap.add_argument("--spec", required=True, help="specs/<family>.yaml")
    ap.add_argument("cubins", nargs="+", metavar="CUBIN")
    args = ap.parse_args(argv)
    try:
        spec = load_spec(args.spec)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    lines = check_files(spec, args.cubins)
    for line in lines:
        print(line, file=sys.stderr)
    if not lines:
        print("%s: %d cubins match the spec's %d kernels" % (args.spec, len(args.cubins), len(spec.launchers)))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
