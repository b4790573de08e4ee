"""YAML composed into nodes that keep their line:col (1-based).

PyYAML's constructors drop positions and silently keep the last of
duplicate keys, so specs are composed (anchors and aliases resolved, an
alias being the same node object as its anchor) and walked as nodes.

The composer is our own and iterative: PyYAML's recursive one raises
RecursionError on deeply nested input, and a nesting limit here gives a
positioned error instead. Events come from libyaml's C parser
(yaml.CSafeLoader) where PyYAML was built with it, else from PyYAML's
Python parser; the C parser is about ten times faster on a large spec.
When the C parser finds a problem the spec is parsed again with the Python
one, so a syntax error reads the same on every machine.

Positions are computed from character offsets with our own line table:
a line ends at LF, CR LF or a lone CR (as editors and compilers count),
while YAML's own marks also end lines at U+0085, U+2028 and U+2029.
"""

import bisect
import os
import re
import unicodedata

import yaml

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
FLOAT = "tag:yaml.org,2002:float"
MERGE = "tag:yaml.org,2002:merge"

# A spec nests about six levels (launchers > launcher > preconditions >
# item > key); far deeper input is a mistake or an attack.
MAX_DEPTH = 64

SYNTAX_HINT = "check the indentation, quoting and brackets here"


class Node:
    """A composed YAML node: tag, value, where it starts and ends (character
    offsets into the text), its position (line, col), its style. Slots, not
    PyYAML's node objects with two Marks each: a 10,000-launcher spec has
    some 600,000 nodes."""

    __slots__ = ("tag", "value", "start", "end", "pos", "style", "flow_style")

    def __init__(self, tag, value, start, end, pos, style=None, flow_style=None):
        self.tag, self.value, self.start, self.end, self.pos = tag, value, start, end, pos
        self.style, self.flow_style = style, flow_style


class ScalarNode(Node):
    __slots__ = ()


class SequenceNode(Node):
    __slots__ = ()


class MappingNode(Node):
    __slots__ = ()


class YamlSyntaxError(Exception):
    def __init__(self, pos, problem, hint=SYNTAX_HINT, prefix="YAML syntax: "):
        super().__init__(problem)
        self.pos = pos
        self.problem = problem
        self.hint = hint
        self.prefix = prefix


def _c_parser_wanted():
    """libyaml's parser unless KLAUNCH_CODEGEN_YAML=python asks for PyYAML's
    (the speed benchmark's baseline, and the tests that compare the two)."""
    return os.environ.get("KLAUNCH_CODEGEN_YAML", "") != "python" and hasattr(yaml, "CSafeLoader")


_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE
_LINE_BREAK = re.compile("\r\n|\r|\n")
# A double-quoted scalar's \u and \U escapes (\x cannot leave U+00FF), and
# the UTF-16 surrogates an escape may name, which are not characters.
_ESCAPE = re.compile(r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL_NAMES = {0: "NUL", 0x7F: "DEL", 0x0B: "vertical tab", 0x0C: "form feed", 0x1B: "escape", 0x08: "backspace"}


def character_name(ch):
    """`U+000C (form feed)`: how a message names a character."""
    o = ord(ch)
    name = _CONTROL_NAMES.get(o) or unicodedata.name(ch, "").lower() or ("control character" if o < 32 or 0x7F <= o < 0xA0 else "")
    return "U+%04X%s" % (o, " (%s)" % name if name else "")


_BREAKS = "\r\n\x85\u2028\u2029"


def _before_blanks(text, index):
    """The index just past the last token before `index`: back over blanks,
    line breaks and the comments that end the lines crossed (libyaml marks an
    empty value at the next token, which may sit lines further on)."""
    while True:
        while index > 0 and text[index - 1] in " \t":
            index -= 1
        if index == 0 or text[index - 1] not in _BREAKS:
            return index
        index -= 1
        if text[index] == "\n" and index > 0 and text[index - 1] == "\r":
            index -= 1
        line_start = index
        while line_start > 0 and text[line_start - 1] not in _BREAKS:
            line_start -= 1
        index = line_start + _comment_free_length(text[line_start:index])


def _comment_free_length(line):
    """Length of `line` without a trailing comment ('#' after a blank or at
    the start, outside quotes)."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                if quote == "'" and line[i + 1:i + 2] == "'":
                    i += 1
                else:
                    quote = None
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"" and (i == 0 or line[i - 1] in " \t[{,:"):
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
        i += 1
    return len(line)


class Source:
    """A spec file's text and the display path used in every message."""

    def __init__(self, path, text):
        self.path = path
        self.text = text
        # LF, CR LF and a lone CR end a line; nothing else does. A
        # byte-order mark is not a column.
        starts = [1 if text.startswith("\ufeff") else 0]
        starts += [m.end() for m in _LINE_BREAK.finditer(text)]
        self._line_starts = starts

    def pos_of_index(self, index):
        line = bisect.bisect_right(self._line_starts, index) - 1
        if line < 0:
            return (1, 1)
        return (line + 1, index - self._line_starts[line] + 1)

    def check_characters(self):
        """Raises YamlSyntaxError at the first character YAML does not allow."""
        m = _NON_PRINTABLE.search(self.text)
        if m:
            raise YamlSyntaxError(
                self.pos_of_index(m.start()),
                "character %s is not allowed in YAML, not even in a comment" % character_name(m.group()),
                "remove it; a spec holds printable text, tabs and line breaks",
                prefix="",
            )

    def compose(self):
        """The document's root node, or None for an empty document.

        Raises YamlSyntaxError. Explicit tags (`!!int x`) are collected in
        self.tag_problems, [(pos, message, hint)], for the validator."""
        self.check_characters()
        self.tag_problems = []
        if _c_parser_wanted():
            try:
                return self._compose(yaml.CSafeLoader)
            except YamlSyntaxError:
                self.tag_problems = []
        return self._compose(yaml.SafeLoader)

    def _error(self, e):
        mark = e.problem_mark or e.context_mark
        problem = e.problem or "malformed YAML"
        if e.context and e.problem_mark is not None:
            problem = "%s %s" % (e.context, problem)
        pos = self.pos_of_index(mark.index) if mark is not None else (1, 1)
        return YamlSyntaxError(pos, problem)

    def _compose(self, loader_class):
        loader = loader_class(self.text)
        try:
            return self._compose_events(loader)
        except yaml.MarkedYAMLError as e:
            raise self._error(e)
        except (ValueError, OverflowError):
            # PyYAML's own scanner on a \U escape past U+10FFFF (chr() fails;
            # libyaml refuses it as a syntax error, then this parser reads it).
            raise self._bad_escape(loader.get_mark().index)
        finally:
            loader.dispose()

    def _bad_escape(self, index, value_hint=None):
        """YamlSyntaxError at the escape (backslash u or U) that starts at or before index."""
        start = max(self.text.rfind("\\", 0, index + 1), 0)
        m = _ESCAPE.match(self.text, start)
        if m is None:  # not an escape after all: still no traceback
            return YamlSyntaxError(self.pos_of_index(index), "malformed double-quoted string")
        escape = m.group()
        code = int(escape[2:], 16)
        if 0xD800 <= code <= 0xDFFF:
            problem = "escape %s in a double-quoted string is a UTF-16 surrogate, not a character" % escape
            hint = value_hint or "write the character itself, or \\U and its 8-digit code point"
        else:
            problem = "escape %s in a double-quoted string is past U+10FFFF, the last Unicode character" % escape
            hint = "write the character itself, or \\U and its 8-digit code point"
        return YamlSyntaxError(self.pos_of_index(start), problem, hint, prefix="")

    def _surrogate(self, start, end):
        """YamlSyntaxError at the first surrogate escape of a double-quoted
        scalar's source: its value cannot be UTF-8 or C text."""
        for m in _ESCAPE.finditer(self.text, start, end):
            code = int(m.group()[2:], 16)
            if 0xD800 <= code <= 0xDBFF:
                low = _ESCAPE.match(self.text, m.end())
                if low and 0xDC00 <= int(low.group()[2:], 16) <= 0xDFFF and len(low.group()) == 6:
                    pair = 0x10000 + ((code - 0xD800) << 10) + (int(low.group()[2:], 16) - 0xDC00)
                    return self._bad_escape(m.start(), "a YAML escape is one code point: for U+%04X write \\U%08X" % (pair, pair))
            if 0xD800 <= code <= 0xDFFF:
                return self._bad_escape(m.start())
        return YamlSyntaxError(self.pos_of_index(start), "a double-quoted string holds a UTF-16 surrogate, not a character",
                               "write the character itself", prefix="")

    def _compose_events(self, loader):
        # One pass over the parser's events, kept lean: a 10,000-launcher
        # spec is some 900,000 events (bench/codegen/speed.py).
        get = loader.get_event
        text = self.text
        line_starts = self._line_starts
        n_lines = len(line_starts)
        ScalarEvent, AliasEvent = yaml.ScalarEvent, yaml.AliasEvent
        SequenceStartEvent, MappingStartEvent = yaml.SequenceStartEvent, yaml.MappingStartEvent
        SequenceEndEvent, MappingEndEvent = yaml.SequenceEndEvent, yaml.MappingEndEvent
        resolve_plain = _plain_resolver(loader)
        anchors = {}
        # Open collections, innermost last: [node, the mapping key waiting
        # for its value, or None].
        stack = []
        frame = None
        # Events come in text order (an alias makes no node), so the line
        # of each start is found by walking on, not by a search.
        line = 0

        def pos_of(index):
            return self.pos_of_index(index)

        get()  # StreamStart
        if isinstance(get(), yaml.StreamEndEvent):  # else the DocumentStart
            return None
        while True:
            ev = get()
            cls = ev.__class__
            if cls is MappingEndEvent or cls is SequenceEndEvent:
                node = stack.pop()[0]
                node.end = ev.end_mark.index
                if not stack:
                    break
                frame = stack[-1]
                continue
            if cls is AliasEvent:
                node = anchors.get(ev.anchor)
                if node is None:
                    raise YamlSyntaxError(pos_of(ev.start_mark.index), "found undefined alias %r" % ev.anchor)
                if not stack:
                    break
            else:
                tag = ev.tag
                start = ev.start_mark.index
                if cls is ScalarEvent:
                    value = ev.value
                    end = ev.end_mark.index
                    if not value and start == end:
                        # An empty value: libyaml marks it at the next token,
                        # PyYAML right after the ':'; both now read the latter.
                        start = _before_blanks(text, start)
                        end = start
                else:
                    end = start
                while line + 1 < n_lines and line_starts[line + 1] <= start:
                    line += 1
                if line_starts[line] > start:  # not in text order: search
                    pos = pos_of(start)
                else:
                    pos = (line + 1, start - line_starts[line] + 1)
                if cls is ScalarEvent:
                    if ev.style == '"' and _SURROGATE.search(value):
                        raise self._surrogate(start, end)
                    if tag is not None and tag != "!":
                        rtag = STR
                    elif ev.implicit[0]:
                        rtag = resolve_plain(value)
                    else:
                        rtag = STR
                    node = ScalarNode(rtag, value, start, end, pos, ev.style or None)
                elif cls is MappingStartEvent:
                    node = MappingNode("tag:yaml.org,2002:map", [], start, start, pos, None, ev.flow_style)
                elif cls is SequenceStartEvent:
                    # PyYAML's pure-Python parser leaves an indentless
                    # sequence's flow_style None where libyaml says False.
                    node = SequenceNode("tag:yaml.org,2002:seq", [], start, start, pos, None, ev.flow_style is True)
                else:
                    raise YamlSyntaxError(pos, "unexpected %s" % cls.__name__)
                if tag is not None:
                    self.tag_problems.append((
                        pos,
                        "YAML tag '%s' is not supported" % _short_tag(tag),
                        "write the value without a tag: a spec reads true/false, integers and text as they are written",
                    ))
                anchor = ev.anchor
                if anchor is not None:
                    if anchor in anchors:
                        line0, col0 = anchors[anchor].pos
                        raise YamlSyntaxError(
                            pos,
                            "anchor &%s is defined twice" % anchor,
                            "the first is at line %d, column %d; give each anchor its own name" % (line0, col0),
                            prefix="",
                        )
                    anchors[anchor] = node
                if cls is not ScalarEvent:
                    if frame is not None:
                        _attach(frame, node)
                    if len(stack) >= MAX_DEPTH:
                        raise YamlSyntaxError(
                            pos,
                            "the spec nests deeper than %d levels here" % MAX_DEPTH,
                            "a spec needs about six levels; flatten it",
                            prefix="",
                        )
                    frame = [node, None]
                    stack.append(frame)
                    continue
                if frame is None:
                    break
            _attach(frame, node)  # a scalar or an alias, inside a collection
        root = node
        get()  # DocumentEnd
        ev = get()
        if not isinstance(ev, yaml.StreamEndEvent):
            raise YamlSyntaxError(pos_of(ev.start_mark.index), "expected a single document in the stream but found another document")
        return root

    def value_offsets(self, node):
        """Source index of each character of a scalar's value, or None.

        Quoting, folding and indentation change the characters between
        source and value but not the order of the non-blank ones, so they
        are matched one by one; a mismatch (an escape) gives None.
        """
        src = self.text
        i = node.start
        end = node.end
        if node.style in ("'", '"'):
            i += 1
        out = []
        for ch in node.value:
            if ch.isspace():
                out.append(None)
                continue
            while i < end and src[i] != ch:
                if not src[i].isspace() and src[i] not in "|>-+0123456789":
                    return None
                i += 1
            if i >= end:
                return None
            out.append(i)
            i += 1
        return out

    def pos_in_scalar(self, node, offset):
        """Position in the file of character `offset` of a scalar's value."""
        value = node.value
        if offset < len(value) and "\n" not in value and "\r" not in value:
            # The common case: the value stands in the file as it is, on
            # one line (plain, or quoted without escapes).
            start = node.start + (1 if node.style in ("'", '"') else 0)
            if self.text.startswith(value, start):
                line, col = node.pos
                return (line, col + (start - node.start) + offset)
        offsets = self.value_offsets(node)
        if not offsets or all(o is None for o in offsets):
            return node_pos(node)
        if offset < len(offsets) and offsets[offset] is not None:
            return self.pos_of_index(offsets[offset])
        # A blank or the end: count on from the last character before it.
        prev = min(offset, len(offsets)) - 1
        while prev >= 0 and offsets[prev] is None:
            prev -= 1
        if prev < 0:
            return node_pos(node)
        line, col = self.pos_of_index(offsets[prev])
        return (line, col + (offset - prev))


def _attach(frame, node):
    """Puts node into the open collection of frame ([node, pending key])."""
    parent = frame[0]
    if parent.__class__ is SequenceNode:  # this module's classes
        parent.value.append(node)
    elif frame[1] is None:
        frame[1] = node
    else:
        parent.value.append((frame[1], node))
        frame[1] = None


def _plain_resolver(loader):
    """value -> tag of a plain scalar, as loader.resolve gives it, memoised:
    a spec repeats its plain values (types, names, numbers) thousands of
    times, and PyYAML's resolver is a loop of regular expressions."""
    memo = {}
    resolve, ScalarNode_ = loader.resolve, yaml.ScalarNode

    def tag_of(value):
        tag = memo.get(value)
        if tag is None:
            tag = memo[value] = resolve(ScalarNode_, value, (True, False))
        return tag

    return tag_of


def _short_tag(tag):
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def node_pos(node):
    return node.pos


_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}


def scalar_bool(node):
    """A boolean scalar's value (YAML 1.1: true/false, yes/no, on/off)."""
    return _BOOLS[node.value.lower()]


def kind_of(node):
    """How a value reads in a message: 'a mapping', 'a list', 'an integer'."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        INT: "an integer",
        BOOL: "a boolean",
        NULL: "nothing",
        FLOAT: "a number with a fraction",
        STR: "text",
    }.get(node.tag, "a %s" % node.tag.rsplit(":", 1)[-1])


def is_mapping(node):
    return isinstance(node, MappingNode)


def is_sequence(node):
    return isinstance(node, SequenceNode)


def is_scalar(node):
    return isinstance(node, ScalarNode)
