"""docs/DESIGN.md's table of spec type -> host C type -> kernel-side type
says what the generator emits: each row against codegen's type tables
(klaunch_codegen.schema through model.Type), and every spec type has a row.

    types_table_test.py docs/DESIGN.md
"""

import re
import sys
import unittest

import junit_unittest
from klaunch_codegen import schema
from klaunch_codegen.model import Type

DESIGN = None


def rows():
    """{spec type: (host, kernel, bytes)} of the table."""
    with open(DESIGN) as f:
        text = f.read()
    out = {}
    for m in re.finditer(r"^\| `([^`]+)` \| `([^`]+)` \| `([^`]+)`[^|]*\| (\d+) \|$", text, flags=re.M):
        out[m.group(1)] = (m.group(2), m.group(3), int(m.group(4)))
    return out


def types():
    out = [Type(n) for n in schema.SCALAR_TYPES]
    out += [Type("ptr", e) for e in schema.POINTER_ELEMENTS]
    out.append(Type(schema.TENSOR_MAP))
    return out


class TypesTable(unittest.TestCase):
    def test_every_spec_type_has_a_row_that_says_what_is_emitted(self):
        table = rows()
        for t in types():
            with self.subTest(type=t.spec):
                self.assertIn(t.spec, table, "docs/DESIGN.md has no row for %s" % t.spec)
                host, kernel, size = table[t.spec]
                self.assertEqual(host.replace(" *", "*"), t.c.replace(" *", "*").strip())
                self.assertEqual(kernel.replace(" *", "*"), t.cuda.replace(" *", "*").strip())
                self.assertEqual(size, t.size)

    def test_const_pointers_add_const_on_both_sides(self):
        t = Type("ptr", "bf16", const=True)
        self.assertEqual(t.c, "const kl_bf16 *")
        self.assertEqual(t.cuda, "const __nv_bfloat16 *")

    def test_no_row_names_a_type_the_generator_lacks(self):
        known = {t.spec for t in types()}
        self.assertEqual(sorted(set(rows()) - known), [])


if __name__ == "__main__":
    DESIGN = sys.argv[1]
    junit_unittest.main(argv=sys.argv[2:])
