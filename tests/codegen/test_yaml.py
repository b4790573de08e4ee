"""The YAML layer (codegen/klaunch_codegen/yamlpos.py): the C and Python
parsers compose the same trees, positions count lines as editors do, and
deep or odd input gives a positioned error, never a Python exception."""

import glob
import os
import time
import unittest

import codegen_test_support as support
import yaml

from klaunch_codegen import yamlpos

# Every spec the project has: the real ones, the golden cases, the errors.
SPECS = sorted(
    glob.glob(os.path.join(support.ROOT, "specs", "*.yaml"))
    + glob.glob(os.path.join(support.GOLDEN, "*", "*.yaml"))
    + glob.glob(os.path.join(support.ERRORS, "*", "*.yaml"))
)


def compose(text, parser):
    """(tree, None) or (None, (pos, message)) with the given parser."""
    old = os.environ.get("KLAUNCH_CODEGEN_YAML")
    os.environ["KLAUNCH_CODEGEN_YAML"] = parser
    try:
        src = yamlpos.Source("t.yaml", text)
        try:
            root = src.compose()
        except yamlpos.YamlSyntaxError as e:
            return None, (e.pos, e.problem)
        return support.yaml_tree(root), src.tag_problems
    finally:
        if old is None:
            del os.environ["KLAUNCH_CODEGEN_YAML"]
        else:
            os.environ["KLAUNCH_CODEGEN_YAML"] = old


@unittest.skipUnless(hasattr(yaml, "CSafeLoader"), "PyYAML was built without libyaml")
class ParsersAgreeTest(unittest.TestCase):
    def test_c_and_python_parsers_compose_every_project_spec_alike(self):
        self.assertGreater(len(SPECS), 80)
        for path in SPECS:
            with open(path, "rb") as f:
                data = f.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            with self.subTest(spec=os.path.relpath(path, support.ROOT)):
                self.assertEqual(compose(text, "c"), compose(text, "python"))

    def test_an_indentless_sequence_is_block_style_in_both_parsers(self):
        # fuzz_test found it (seed 15, after specs/paged_decode.yaml grew):
        # a '- ' list at its key's indentation, here inside an explicit key,
        # was flow_style None from PyYAML's parser and False from libyaml's.
        for text in ("a:\n- 1\n", "? a:\n  - 1\n", "x: 1\n? launchers:\n  - name: f\n    grid: {x: 1}\n"):
            trees = [compose(text, parser)[0] for parser in ("c", "python")]
            self.assertEqual(trees[0], trees[1], text)

    def test_the_c_parser_is_used_where_installed(self):
        self.assertTrue(yamlpos._c_parser_wanted())
        os.environ["KLAUNCH_CODEGEN_YAML"] = "python"
        try:
            self.assertFalse(yamlpos._c_parser_wanted())
        finally:
            del os.environ["KLAUNCH_CODEGEN_YAML"]


def empty_scalar_positions(node):
    """Where each empty scalar of a composed tree (support.yaml_tree) is."""
    if node is None or node[0] == "alias":
        return []
    if node[0] == "scalar":
        return [node[3]] if node[2] == "" else []
    if node[0] == "seq":
        return [p for c in node[3] for p in empty_scalar_positions(c)]
    return [p for k, v in node[3] for p in empty_scalar_positions(k) + empty_scalar_positions(v)]


class PositionsTest(unittest.TestCase):
    def pos_of(self, text, needle):
        src = yamlpos.Source("t.yaml", text)
        return src.pos_of_index(text.index(needle))

    def test_lf_crlf_and_lone_cr_each_end_a_line(self):
        for nl in ("\n", "\r\n", "\r"):
            text = nl.join(["a: 1", "b: 2", "c: here"])
            self.assertEqual(self.pos_of(text, "here"), (3, 4), repr(nl))

    def test_unicode_line_separators_do_not_end_a_line(self):
        # YAML's own marks count U+0085, U+2028 and U+2029 as line breaks;
        # editors and compilers do not.
        text = 'a: "x\u2028y\u2029z\u0085w"\nb: here\n'
        self.assertEqual(self.pos_of(text, "here"), (2, 4))
        for parser in ("c", "python"):
            tree, _ = compose(text, parser)
            key_b = tree[3][1][0]
            self.assertEqual(key_b[3], (2, 1), parser)

    def test_empty_values_are_positioned_alike_by_both_parsers(self):
        # fuzz_test found libyaml marking an empty flow value at the next
        # token and PyYAML right after the ':': both read the latter now.
        for text, pos in (("a: {x: 1, y:  }\n", (1, 13)), ("a: {y: ,z: 1}\n", (1, 7)), ("[a: ]\n", (1, 4)), ("a:   \nb: 1\n", (1, 3))):
            for parser in ("c", "python"):
                tree, _ = compose(text, parser)
                self.assertEqual(empty_scalar_positions(tree), [pos], (text, parser))

    def test_an_empty_value_before_a_line_break_or_comment_is_positioned_alike_by_both_parsers(self):
        # fuzz_test found it (seed 15, with tests/bazel_rules' rms_norm spec
        # among the seeds): '{x: ' then a line break before the '}' was
        # marked on the next line by libyaml and after the ':' by PyYAML.
        for text, pos in (("a: {x: \n}\n", (1, 7)), ("a: {x: # c\n  }\n", (1, 7)),
                          ("a: {x:\r\n}\r\n", (1, 7)),
                          ("a: {x: '#'\n, y: \n # c \n}\n", (2, 5))):
            for parser in ("c", "python"):
                tree, _ = compose(text, parser)
                self.assertEqual(empty_scalar_positions(tree), [pos], (text, parser))

    def test_a_byte_order_mark_is_not_a_column(self):
        self.assertEqual(self.pos_of("\ufeffa: here", "here"), (1, 4))


class BadInputTest(unittest.TestCase):
    def test_deep_nesting_is_a_positioned_error_not_a_recursion_error(self):
        for parser in ("c", "python"):
            for text in ("a: " + "[" * 100000 + "]" * 100000, "a:\n" + "".join(" " * i + "- \n" for i in range(1, 300))):
                start = time.monotonic()
                tree, problem = compose(text, parser)
                self.assertIsNone(tree)
                self.assertIn("nests deeper than", problem[1])
                self.assertLess(time.monotonic() - start, 10)

    def test_characters_yaml_forbids_are_found_before_parsing(self):
        for ch, name in (("\f", "form feed"), ("\0", "NUL"), ("\x1b", "escape"), ("\x7f", "DEL"), ("\ud800", "")):
            src = yamlpos.Source("t.yaml", "a: 1\n# x%s\n" % ch)
            with self.assertRaises(yamlpos.YamlSyntaxError) as cm:
                src.compose()
            self.assertEqual(cm.exception.pos, (2, 4))
            self.assertIn("U+%04X" % ord(ch), cm.exception.problem)
            self.assertIn(name, cm.exception.problem)

    def test_escapes_that_name_no_character_are_positioned_errors_from_both_parsers(self):
        # Surrogates (alone or paired) and code points past U+10FFFF: libyaml
        # refuses them, Python's reader took surrogates and raised ValueError
        # or OverflowError past U+10FFFF. Keys too.
        for text, col, what in (('a: "x \\ud800 y"', 7, "\\ud800 in a double-quoted string is a UTF-16 surrogate"),
                                ('a: "\\ud83d\\ude00"', 5, "\\ud83d in a double-quoted string is a UTF-16 surrogate"),
                                ('"\\udfff": 1', 2, "\\udfff in a double-quoted string is a UTF-16 surrogate"),
                                ('a: [1, "\\U00110000"]', 9, "\\U00110000 in a double-quoted string is past U+10FFFF"),
                                ('a: "\\UFFFFFFFF"', 5, "\\UFFFFFFFF in a double-quoted string is past U+10FFFF")):
            for parser in ("c", "python"):
                tree, problem = compose(text + "\n", parser)
                self.assertIsNone(tree, (text, parser))
                self.assertEqual(problem[0], (1, col), (text, parser))
                self.assertTrue(problem[1].startswith("escape " + what), (text, parser, problem))
        # What is a character stays one: \U0001F600, \x80, a \u in single quotes.
        for text in ('a: "\\U0001F600 \\x80"', "a: '\\ud800'"):
            self.assertIsNotNone(compose(text + "\n", "python")[0], text)

    def test_explicit_tags_are_reported_with_positions(self):
        for parser in ("c", "python"):
            tree, tags = compose("a: !!bool maybe\nb: !!int two\nc: !custom [1]\nd: ! x\n", parser)
            self.assertEqual([(p, m) for p, m, _ in tags], [
                ((1, 4), "YAML tag '!!bool' is not supported"),
                ((2, 4), "YAML tag '!!int' is not supported"),
                ((3, 4), "YAML tag '!custom' is not supported"),
                ((4, 4), "YAML tag '!' is not supported"),
            ])


if __name__ == "__main__":
    support.main()
