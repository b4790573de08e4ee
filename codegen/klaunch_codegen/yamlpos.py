"""YAML composed into nodes that keep their line:col (1-based).

PyYAML's constructors drop positions and silently keep the last of
duplicate keys, so specs are composed (anchors and aliases resolved, an
alias being the same node object as its anchor) and walked as nodes.
"""

import bisect

import yaml
from yaml.constructor import SafeConstructor

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
FLOAT = "tag:yaml.org,2002:float"
MERGE = "tag:yaml.org,2002:merge"


class YamlSyntaxError(Exception):
    def __init__(self, pos, problem):
        super().__init__(problem)
        self.pos = pos
        self.problem = problem


class Source:
    """A spec file's text and the display path used in every message."""

    def __init__(self, path, text):
        self.path = path
        self.text = text
        self._line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(i + 1)

    def pos_of_index(self, index):
        line = bisect.bisect_right(self._line_starts, index) - 1
        return (line + 1, index - self._line_starts[line] + 1)

    def compose(self):
        """The document's root node, or None for an empty document."""
        loader = yaml.SafeLoader(self.text)
        try:
            return loader.get_single_node()
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            problem = e.problem or "malformed YAML"
            if e.context and e.problem_mark is not None:
                problem = "%s %s" % (e.context, problem)
            pos = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
            raise YamlSyntaxError(pos, problem)
        except yaml.reader.ReaderError as e:
            raise YamlSyntaxError(self.pos_of_index(e.position), "unreadable character: %s" % e.reason)
        finally:
            loader.dispose()

    def value_offsets(self, node):
        """Source index of each character of a scalar's value, or None.

        Quoting, folding and indentation change the characters between
        source and value but not the order of the non-blank ones, so they
        are matched one by one; a mismatch (an escape) gives None.
        """
        src = self.text
        i = node.start_mark.index
        end = node.end_mark.index
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


def node_pos(node):
    return (node.start_mark.line + 1, node.start_mark.column + 1)


_constructor = SafeConstructor()


def scalar_python(node):
    """The scalar as PyYAML would construct it (int, bool, str, None, ...)."""
    return _constructor.construct_object(node, deep=True)


def kind_of(node):
    """How a value reads in a message: 'a mapping', 'a list', 'an integer'."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {
        INT: "an integer",
        BOOL: "a boolean",
        NULL: "nothing",
        FLOAT: "a number with a fraction",
        STR: "text",
    }.get(node.tag, "a %s" % node.tag.rsplit(":", 1)[-1])


def is_mapping(node):
    return isinstance(node, yaml.MappingNode)


def is_sequence(node):
    return isinstance(node, yaml.SequenceNode)


def is_scalar(node):
    return isinstance(node, yaml.ScalarNode)
