"""Compiler-style diagnostics: `file:line:col: error: message; hint`.

A diagnostic is one line whatever its text holds: a name or message with
a line break (a YAML | block keeps its last newline) would split it, or
forge a second diagnostic, so line breaks and other control characters
are written as escapes (\\n, \\u2028).
"""

import re

# C0 and C1 controls and the Unicode line and paragraph separators; a tab
# stays a tab.
_BREAKING = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def one_line(text):
    """`text` with every character that could end a line escaped."""
    if not _BREAKING.search(text):
        return text
    return _BREAKING.sub(lambda m: _ESCAPES.get(m.group()) or ("\\x%02x" % ord(m.group()) if ord(m.group()) < 0x100 else "\\u%04x" % ord(m.group())), text)


class Diagnostic:
    __slots__ = ("path", "line", "col", "message", "hint")

    def __init__(self, path, line, col, message, hint):
        self.path = path
        self.line = line
        self.col = col
        self.message = message
        self.hint = hint

    def key(self):
        return (self.path, self.line, self.col, self.message, self.hint)

    def __str__(self):
        text = "%s:%d:%d: error: %s" % (self.path, self.line, self.col, self.message)
        if self.hint:
            text += "; " + self.hint
        return one_line(text)


class Diagnostics:
    """Collects every problem; nothing is written while any is present."""

    def __init__(self):
        self.items = []
        self._seen = set()

    def error(self, path, pos, message, hint):
        line, col = pos
        d = Diagnostic(path, line, col, message, hint)
        # A node reached through a YAML alias is checked once per use.
        if d.key() in self._seen:
            return
        self._seen.add(d.key())
        self.items.append(d)

    def __bool__(self):
        return bool(self.items)

    def __len__(self):
        return len(self.items)

    def sorted(self, path_order):
        """By file (in argument order), then position; ties keep discovery order."""
        rank = {p: i for i, p in enumerate(path_order)}
        return sorted(self.items, key=lambda d: (rank.get(d.path, len(rank)), d.line, d.col))
