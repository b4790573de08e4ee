"""Compiler-style diagnostics: `file:line:col: error: message; hint`."""


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
        return text


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
