"""The names the generated headers declare, as declared.py reads them, and
the collisions collisions.py finds in them:

- the scan finds what the templates declare (functions, tables, macros,
  types, each function's parameters and locals) and misses nothing: every
  kl_/KL_ identifier the rendered code uses is declared by the run's
  headers or the runtime, or is one of the few a user or compiler defines;
- the tagged re-rendering that explains a name lines up with the first
  rendering for every spec the project has, and names the spec names
  behind each generated name;
- a name a template adds is covered without a check of its own: with a
  template that declares one more table or local, the spec names that meet
  it are refused.
"""

import glob
import os
import re
import shutil
import tempfile
import unittest

import codegen_test_support as support
import jinja2

from klaunch_codegen import collisions, declared, diag, emit, names
from klaunch_codegen.spec import load_spec

SPECS = sorted(glob.glob(os.path.join(support.GOLDEN, "*", "*.yaml")) + glob.glob(os.path.join(support.TESTS, "stress", "*.yaml"))
               + glob.glob(os.path.join(support.ROOT, "specs", "*.yaml")))

# Defined by the user or the build, not by the headers: the variant, the
# signature-check switches (kernel.cuh.j2's SIGNATURE CHECKS).
CONFIGURATION = re.compile(r"KL_VARIANT_\w+|KL_SIGNATURE_CHECKS_AT_END|KL_CHECK_SIGNATURES|KL_NO_SIGNATURE_CHECKS\Z")


def load(path, text=None):
    d = diag.Diagnostics()
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        if text is not None:
            with open(os.path.basename(path), "w") as f:
                f.write(text)
        s = load_spec(os.path.basename(path), d)
    finally:
        os.chdir(cwd)
    if s is None:
        raise AssertionError([str(x) for x in d.items])
    return s


def check(specs):
    """The report of collisions.check_outputs on freshly rendered specs."""
    d = diag.Diagnostics()
    fatbins = [(s, e.name, e.pos, e.origin, e.what) for s in specs for e in names.emitted(s) if e.space == "c"]
    collisions.check_outputs(specs, [(s, emit.render_header(s), emit.render_cuh(s)) for s in specs], names.runtime().identifiers,
                             fatbins, d)
    return [str(x) for x in d.items]


def spec_text(launchers, params="      - n: u32\n", family="bad", constants=""):
    text = "family: %s\nvariants:\n  v1: {%s}\nlaunchers:\n" % (family, constants)
    for name in launchers:
        text += "  - name: %s\n    params:\n%s    grid: {x: n}\n    block: {x: 32}\n" % (name, params)
    return text


class ScanTest(unittest.TestCase):
    def test_finds_what_the_launcher_templates_declare(self):
        s = load(os.path.join(support.GOLDEN, "launch_only_bool", "scale.yaml"))
        h = declared.scan(emit.render_header(s), "klaunch/scale.h")
        top = {(d.name, d.kind) for d in h.file_scope}
        for want in [("KLAUNCH_SCALE_H", "macro"), ("kl_scale_variant_info", "object"), ("kl_scale_rows_params", "object"),
                     ("kl__scale_rows_checks", "object"), ("kl_scale_rows_desc", "object"), ("kl_scale_rows_get", "function"),
                     ("kl__scale_rows_prepare", "function"), ("kl_scale_rows_check", "function"), ("kl_scale_rows", "function")]:
            self.assertIn(want, top)
        launch = [d for d in h.decls if d.function is not None and d.function.name == "kl_scale_rows"]
        self.assertEqual([d.name for d in launch if d.kind == "param"],
                         ["kernel", "x", "y", "cols", "row_stride", "rows", "alpha", "accumulate", "group", "stream"])
        self.assertEqual(sorted(d.name for d in launch if d.kind == "local"), ["kl__accumulate", "kl__args", "kl__launch", "kl__st"])
        prepare = [d for d in h.decls if d.function is not None and d.function.name == "kl__scale_rows_prepare"]
        values = [d for d in prepare if d.name == "kl__values"]
        self.assertGreaterEqual(len(values), 2)
        self.assertEqual(len({d.block for d in values}), len(values), "each failure path's kl__values is a block of its own")

    def test_finds_what_the_kernel_side_header_declares(self):
        s = load(os.path.join(support.GOLDEN, "variants_constants", "tile.yaml"))
        cuh = declared.scan(emit.render_cuh(s), "klaunch/tile.cuh")
        by = {}
        for d in cuh.file_scope:
            by.setdefault(d.name, []).append(d)
        entry = s.launchers[0].entry
        self.assertEqual(by[entry][0].kind, "prototype")
        self.assertEqual(by["kl__signature_" + entry][0].kind, "type")
        self.assertIn("KL_PARAMS_" + entry, by)
        # A constant is defined once per variant, in exclusive branches.
        const = s.variants[0].constants[0][0]
        self.assertEqual(len(by[const]), len(s.variants))
        self.assertTrue(by[const][0].exclusive_with(by[const][1]))
        # The traits every .cuh carries are inside their include-once guard.
        self.assertEqual(by["kl__fn"][0].guard[0], "KL__SIGNATURE_TRAITS_1")

    def test_comments_and_strings_declare_nothing(self):
        text = ('/* static const int kl_in_comment = 1; */\nstatic const char *kl_s = "static int kl_in_string = 2;";\n'
                "#define KL_M(x) \\\n    x\nstatic inline int kl_f(int a) {\n    int kl__l = a;\n    return kl__l;\n}\n")
        got = [(d.name, d.kind) for d in declared.scan(text, "t.h").decls]
        self.assertEqual(got, [("kl_s", "object"), ("KL_M", "macro"), ("kl_f", "function"), ("a", "param"), ("kl__l", "local")])

    def test_every_klaunch_name_the_generated_code_uses_is_declared(self):
        # A name the scan did not see declared would escape every check.
        runtime = names.runtime().identifiers
        for path in SPECS:
            s = load(path)
            texts = [emit.render_header(s), emit.render_cuh(s)]
            scans = [declared.scan(t, "x", keep_code=True) for t in texts]
            known = {d.name for sc in scans for d in sc.decls}
            for sc in scans:
                code = sc.code
                # Template parameters and members of the shared signature traits.
                code = re.sub(r"#ifndef KL__SIGNATURE_TRAITS_1.*?#endif", " ", code, flags=re.S)
                code = re.sub(r"template <[^>]*>", " ", code)
                used = set(re.findall(r"\b(?:kl_|KL_|KLAUNCH_)\w*", code))
                missing = sorted(n for n in used if n not in known and n not in runtime and not CONFIGURATION.match(n)
                                 and not re.match(r"kl__[FIAHTXY]\Z", n))
                self.assertEqual(missing, [], path)


class OriginTest(unittest.TestCase):
    def test_the_tagged_rendering_lines_up_for_every_spec(self):
        for path in SPECS:
            s = load(path)
            o = collisions._Origins(s)
            o._load()
            for suffix, render in ((".h", emit.render_header), (".cuh", emit.render_cuh)):
                p = "klaunch/%s%s" % (s.family, suffix)
                plain = declared.scan(render(s), p).decls
                self.assertEqual([d.kind for d in o._by_path[p]], [d.kind for d in plain], (path, suffix))
                for d in plain:
                    entity, shape = o.explain(d)
                    if entity is not None:
                        # The spec name is in the generated one (upper-cased for a family's macros).
                        self.assertIn(entity.name.lower(), d.name.lower(), (path, d.name, shape))

    def test_names_the_spec_names_behind_a_generated_name(self):
        s = load(os.path.join(support.GOLDEN, "variants_constants", "tile.yaml"))
        o = collisions._Origins(s)
        h = declared.scan(emit.render_header(s), "klaunch/tile.h")
        got = {}
        for d in h.file_scope:
            e, shape = o.explain(d)
            got[d.name] = (e.kind if e else None, shape)
        l, v = s.launchers[0].name, s.variants[0].name
        self.assertEqual(got["kl_%s_get" % l], ("launcher", "kl_{launcher}_get"))
        self.assertEqual(got["kl__tile_%s_const_names" % v], ("variant", "kl__{family}_{variant}_const_names"))
        self.assertEqual(got["KLAUNCH_TILE_H"], ("family", "KLAUNCH_{FAMILY}_H"))


class NewTemplateNameTest(unittest.TestCase):
    """Templates changed here, not on disk: each new name is refused where
    a spec name meets it, with nothing added to the checks."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        old_env = emit._ENV
        self.addCleanup(setattr, emit, "_ENV", old_env)

    def with_header_template(self, edit):
        with open(os.path.join(os.path.dirname(emit.__file__), "templates", "header.h.j2")) as f:
            text = f.read()
        changed = edit(text)
        self.assertNotEqual(changed, text)
        env = emit._environment()
        env.loader = jinja2.ChoiceLoader([jinja2.DictLoader({"header.h.j2": changed}), env.loader])
        emit._ENV = env

    def test_a_new_file_scope_table(self):
        self.with_header_template(lambda t: t.replace("/* Looks kl_{{ l.name }}'s kernel up",
                                                      "static const int kl_{{ l.name }}_extra = 0;\n/* Looks kl_{{ l.name }}'s kernel up"))
        s = load(os.path.join(self.tmp, "bad.yaml"), spec_text(["k", "k_extra"]))
        self.assertEqual(check([s]), [
            "bad.yaml:10:5: error: launcher 'k_extra' makes kl_k_extra (its launcher), which launcher 'k' also makes "
            "(a static table); rename one of them"])

    def test_a_new_local(self):
        self.with_header_template(lambda t: t.replace("    kl_launch kl__launch;\n{% for p in l.bools %}",
                                                      "    kl_launch kl__launch;\n    int kl__extra = 0;\n{% for p in l.bools %}"))
        s = load(os.path.join(self.tmp, "bad.yaml"), spec_text(["k"], "      - n: u32\n      - extra: bool\n"))
        self.assertEqual(check([s]), [
            "bad.yaml:8:9: error: parameter 'extra' of launcher 'k' makes kl__extra (the u32 copy of a bool parameter, a local of "
            "kl_k()), which the generated code also declares there (a local of kl_k()); rename the parameter"])

    def test_the_unchanged_templates_accept_both(self):
        s = load(os.path.join(self.tmp, "bad.yaml"), spec_text(["k", "k_extra"], "      - n: u32\n      - extra: bool\n"))
        self.assertEqual(check([s]), [])


if __name__ == "__main__":
    support.main()
