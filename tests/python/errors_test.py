"""The Python side's tables agree with the C side's and the generator's:

- one exception class per kl_status, made from KL_STATUS_LIST (klaunch.h),
  with the names and descriptions each family's library reports;
- every launcher of every spec (specs/*.yaml, read by the generator) has a
  function in its family's module, with the spec's parameters in order;
- the spec kinds the generator writes (emit.PY_C_PARAM), the runtime's
  ctypes types and converters, and the pointer elements (schema) and their
  framework types (_args.ELEMENTS) are the same sets.

    ./bazelw test //tests/python:errors_test
"""

import ctypes
import glob
import importlib
import inspect
import os
import unittest

import python_test_support as S
from python_test_support import klaunch

from klaunch import _args, _errors, _family
from klaunch_codegen import diag, emit, schema
from klaunch_codegen import spec as specmod


def runfile(*parts):
    root = os.environ.get("TEST_SRCDIR")
    return os.path.join(root, os.environ.get("TEST_WORKSPACE", "klaunch"), *parts)


class Statuses(unittest.TestCase):
    def test_one_class_per_status_of_the_list(self):
        with open(runfile("include", "klaunch", "klaunch.h")) as f:
            text = f.read()
        names = [n for n, _ in _errors.parse_status_list(text)]
        self.assertEqual(names[0], "KL_SUCCESS")
        self.assertGreaterEqual(len(names), 27)
        for code, name in enumerate(names[1:], 1):
            cls = klaunch.error_class(name)
            self.assertIs(klaunch.error_class(code), cls)
            self.assertEqual((cls.status, cls.code), (name, code))
            self.assertIs(getattr(klaunch, cls.__name__), cls)
            self.assertTrue(issubclass(cls, klaunch.Error))
        self.assertEqual(klaunch.PreconditionError.status, "KL_ERROR_PRECONDITION")
        self.assertEqual(klaunch.FileIoError.status, "KL_ERROR_FILE_IO")

    def test_error_class_of_an_unknown_status_is_a_klaunch_error_naming_the_value(self):
        # Not KeyError (which it was): every other refusal of the package is a
        # klaunch.Error, so one `except klaunch.Error` catches them all.
        count = len(_errors.STATUSES)
        for bad in ("KL_ERROR_NO_SUCH_THING", "KL_SUCCESS", 0, count, -1, 2**64, None, 1.0, True, [1]):
            with self.subTest(value=bad):
                with self.assertRaises(klaunch.InvalidArgumentError) as e:
                    klaunch.error_class(bad)
                self.assertNotIsInstance(e.exception, KeyError)
                self.assertIn("KL_ERROR_INVALID_ARGUMENT: klaunch.error_class: %r is no klaunch status name or code"
                              % (bad,), str(e.exception))
                self.assertIn("codes 1..%d" % (count - 1), str(e.exception))
        self.assertIs(klaunch.error_class(count - 1), _errors.BY_CODE[count - 1])

    def test_the_libraries_have_the_same_statuses(self):
        for family in S.FAMILIES:
            lib = family._F.lib
            lib.kl__py_status_string.restype = ctypes.c_char_p
            lib.kl__py_status_string.argtypes = [ctypes.c_int]
            self.assertEqual(lib.kl__py_status_count(), len(_errors.STATUSES))
            for code, (name, description) in enumerate(_errors.STATUSES):
                self.assertEqual(lib.kl__py_status_name(code).decode(), name)
                self.assertEqual(lib.kl__py_status_string(code).decode(), description)

    def test_builtin_bases_name_statuses_of_the_list(self):
        for name, base in _errors.BUILTIN_BASES.items():
            self.assertIn(name, _errors.BY_NAME)
            self.assertTrue(issubclass(_errors.BY_NAME[name], base))

    def test_the_python_checks_are_their_statuses(self):
        for name in _errors.PYTHON_CHECKS:
            cls = getattr(klaunch, name)
            self.assertIn(cls.status, ("KL_ERROR_INVALID_ARGUMENT", "KL_ERROR_NULL_POINTER"))
        self.assertTrue(issubclass(klaunch.DtypeError, klaunch.InvalidArgumentError))
        self.assertTrue(issubclass(klaunch.NoneArgumentError, klaunch.NullPointerError))

    def test_an_unknown_code_is_a_plain_error(self):
        e = _errors.error(999, "KL_UNKNOWN_STATUS: something newer")
        self.assertIs(type(e), klaunch.Error)
        self.assertEqual(e.code, 999)


class EveryLauncher(unittest.TestCase):
    def test_every_launcher_of_every_spec_has_a_python_function(self):
        specs = sorted(glob.glob(runfile("specs", "*.yaml")))
        self.assertTrue(specs)
        d = diag.Diagnostics()
        cwd = os.getcwd()
        os.chdir(runfile())
        try:
            loaded = [specmod.load_spec(os.path.relpath(p, runfile()), d) for p in specs]
        finally:
            os.chdir(cwd)
        self.assertFalse(d.items, [str(x) for x in d.items])
        for spec in loaded:
            try:
                module = importlib.import_module("klaunch_" + spec.family)
            except ImportError as e:
                self.fail("no Python module for family %s: %s" % (spec.family, e))
            self.assertEqual([l.name for l in module.LAUNCHERS], [l.name for l in spec.launchers])
            for l in spec.launchers:
                fn = getattr(module, l.name)
                sig = inspect.signature(fn)
                positional = [n for n, p in sig.parameters.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
                keywords = [n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY]
                self.assertEqual(positional, [p.name for p in l.params], l.name)
                self.assertEqual(keywords, list(schema.PY_LAUNCH_KEYWORDS), l.name)
                self.assertIn("kl_%s" % l.name, fn.__doc__)
                for p, q in zip(l.params, module.LAUNCHERS[[x.name for x in module.LAUNCHERS].index(l.name)].params):
                    self.assertEqual(p.layout, q.layout, "%s.%s" % (l.name, p.name))
            self.assertEqual(module.SPEC_HASH, "sha256:" + spec.sha256)
            self.assertEqual(module.VARIANTS, {v.name: dict(v.constants) for v in spec.variants})


class ReadmeExample(unittest.TestCase):
    """README.md's Python example calls launchers that exist, with their
    parameter counts (it runs on a GPU only: examples/python does that)."""

    def test_the_readme_example_calls_real_launchers(self):
        import ast
        import re

        with open(runfile("README.md")) as f:
            text = f.read()
        section = text[text.index("## Calling from Python"):]
        code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
        tree = ast.parse(code)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "pd"]
        self.assertTrue(calls)
        for c in calls:
            launcher = S.klaunch_paged_decode._F.by_name[c.func.attr]
            self.assertEqual(len(c.args), len(launcher.params), c.func.attr)
        self.assertIn("klaunch.DtypeError", code)


class Tables(unittest.TestCase):
    def test_kinds_are_one_set_everywhere(self):
        kinds = set(schema.SCALAR_TYPES) | {"ptr", schema.TENSOR_MAP}
        self.assertEqual(set(emit.PY_C_PARAM), kinds)
        self.assertEqual(set(_family.CTYPES), kinds)
        self.assertEqual(set(_args.CONVERTERS), kinds)

    def test_every_pointer_element_has_its_framework_types(self):
        self.assertEqual(set(_args.ELEMENTS), set(schema.POINTER_ELEMENTS))
        for elem, e in _args.ELEMENTS.items():
            if e is None:
                continue
            torch_name, (code, bits), typestrs, size = e
            self.assertEqual(bits, 8 * size, elem)
            for t in typestrs:
                self.assertEqual(int(t[2:]), size, elem)

    def test_layouts_are_the_schemas(self):
        self.assertEqual(set(schema.LAYOUTS), {"contiguous", "rows", "any"})
        from klaunch._args import layout_problem, Tensor
        t = Tensor(0, "f32", "", "cuda", 0, (2, 3), (5, 1), False, "test")
        self.assertIsNone(layout_problem(t, "rows"))
        self.assertIsNotNone(layout_problem(t, "contiguous"))
        self.assertIsNone(layout_problem(t, "any"))


if __name__ == "__main__":
    S.main()
