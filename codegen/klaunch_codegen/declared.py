"""The names a rendered output declares, read back from its C text.

The generator's names are not listed by hand: whatever the templates emit
is scanned here (macros, file-scope objects, functions, prototypes, types,
and each function's parameters and locals with their block nesting), so a
name a template adds is checked for collisions without a check of its own
(names.check_outputs). The scanner reads the C the templates write, not C
in general: no function bodies at file scope other than definitions, no
`for` headers, one declaration per statement start. tests/codegen/
test_declared.py checks that every identifier of the generated code that a
spec name reaches is found declared here or in the runtime.

Only text matters here: comments and string literals are blanked first,
so a spec's docs and messages cannot add or hide a declaration.
"""

import re

# Comments and string/character literals, in one pass so that each is seen
# where it starts ("/*" inside a string is text, '"' inside a comment too).
_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z]*)((?:[^\\\n]|\\\n|\\.)*)", re.M)
_MARK = re.compile(r"\x00(\d+)\x00")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MACRO_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\()?")
_TAG = re.compile(r"\b(struct|class|union|enum)\s+([A-Za-z_][A-Za-z0-9_]*)\s*(<)?")
# A statement that declares: [qualifiers] TYPE [*...] NAME then [, = ; or end.
_LOCAL = re.compile(
    r"(?:(?:const|static|volatile|register|unsigned|signed|struct|union|enum)\s+)*"
    r"([A-Za-z_][A-Za-z0-9_]*)\b\s*((?:\*\s*(?:const\s+)?)*)([A-Za-z_][A-Za-z0-9_]*)\s*(?=\[|=|,|$)")
_NOT_TYPES = frozenset("return if else goto while do for switch case default break continue sizeof".split())


class Decl:
    """One declared name."""

    __slots__ = ("name", "kind", "path", "index", "function", "block", "cond", "guard", "text")

    def __init__(self, name, kind, path, index, function=None, block=(), cond=(), guard=None, text=""):
        self.name = name
        # "macro", "function", "prototype", "object", "type"; in a
        # function: "param" or "local"
        self.kind = kind
        self.path = path  # the output file, e.g. klaunch/copy.h
        self.index = index  # order of discovery in its file (same for a re-rendering)
        self.function = function  # the Decl of the function it is in, or None at file scope
        self.block = block  # nesting of blocks inside the function, e.g. (0, 3)
        self.cond = cond  # ((#if id, branch number), ...) around it
        self.guard = guard  # (guard macro, text of the guarded region) of the innermost #ifndef G / #define G
        self.text = text  # a macro's or prototype's text, for identical redefinitions

    @property
    def at_file_scope(self):
        return self.function is None

    def exclusive_with(self, other):
        """True when the two sit in different branches of one #if chain."""
        mine = dict(self.cond)
        return any(i in mine and mine[i] != b for i, b in other.cond)


class Scan:
    """What one output declares: file-scope Decls and each function's."""

    def __init__(self, path, code):
        self.path = path
        self.code = code  # comments and strings blanked; directives kept
        self.decls = []  # every Decl, in order
        self.functions = []  # function Decls

    @property
    def file_scope(self):
        return [d for d in self.decls if d.function is None]


def strip(text):
    """C text with comments blanked (line breaks kept) and literals emptied."""
    def blank(m):
        s = m.group()
        if s[0] in "\"'":
            return s[0] * 2
        return "\n" * s.count("\n") if "\n" in s else " "

    return _NOISE.sub(blank, text)


def _split_commas(text):
    """text split at commas outside () and []."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _declarator_name(text):
    """The declared name of `T *name[...]` / `T name = ...` / `T name`."""
    head = re.split(r"[=\[]", text, 1)[0]
    names = _IDENT.findall(head)
    return names[-1] if names else None


def _params(text):
    """Parameter names of a function header's parameter list."""
    inner = text[text.index("(") + 1: text.rindex(")")] if ")" in text else ""
    out = []
    for part in _split_commas(inner):
        part = part.strip()
        if not part or part == "void" or part == "...":
            continue
        name = _declarator_name(part)
        if name is not None and len(_IDENT.findall(part.split("[", 1)[0])) > 1:
            out.append(name)
    return out


def _function_name(text):
    """The name before the first ( of a function header (past extern "")."""
    head = text.split("(", 1)[0]
    names = _IDENT.findall(head)
    return names[-1] if names else None


def scan(text, path):
    """The Scan of one rendered C or CUDA file."""
    code = strip(text)
    result = Scan(path, code)
    decls = result.decls

    # Directives first: their #if structure, guards (#ifndef G then #define G
    # with nothing between) and the text each guard encloses.
    directives = []
    for m in _DIRECTIVE.finditer(code):
        directives.append((m.group(1), m.group(2), m.start(), m.end()))
    guards = {}  # index of an #ifndef -> (G, region text)
    opens = []
    for i, (word, rest, start, end) in enumerate(directives):
        if word in ("if", "ifdef", "ifndef"):
            opens.append(i)
        elif word == "endif" and opens:
            j = opens.pop()
            w, r, s, _ = directives[j]
            g = r.strip()
            if w == "ifndef" and any(directives[x][0] == "define" and _MACRO_NAME.match(directives[x][1]).group(1) == g
                                     for x in range(j + 1, i) if _MACRO_NAME.match(directives[x][1])):
                guards[j] = (g, code[s:end])
    marked = _DIRECTIVE.sub(lambda m, n=iter(range(len(directives))): "\x00%d\x00" % next(n), code)

    cond = []  # [(if id, branch)] open around the current point
    guard_stack = []  # (G, region) or None per open #if
    frames = [("file", None)]  # kind, function Decl
    blocks = []  # block path inside the current function
    counter = [0]

    def add(name, kind, function=None, text=""):
        guard = next((g for g in reversed(guard_stack) if g is not None), None)
        d = Decl(name, kind, path, len(decls), function, tuple(blocks) if function else (), tuple(cond), guard, text)
        decls.append(d)
        return d

    def directive(i):
        word, rest, _, _ = directives[i]
        if word in ("if", "ifdef", "ifndef"):
            cond.append((i, 0))
            guard_stack.append(guards.get(i))
        elif word in ("elif", "else"):
            if cond:
                cond[-1] = (cond[-1][0], cond[-1][1] + 1)
        elif word == "endif":
            if cond:
                cond.pop()
                guard_stack.pop()
        elif word == "define":
            m = _MACRO_NAME.match(rest)
            if m:
                add(m.group(1), "macro", text=" ".join(rest.split()))

    def function_of():
        for kind, fn in reversed(frames):
            if kind == "function":
                return fn
        return None

    pieces = re.split(r"([;{}])", marked)
    for k in range(0, len(pieces), 2):
        piece = pieces[k]
        delim = pieces[k + 1] if k + 1 < len(pieces) else None
        if "\x00" in piece:
            parts = _MARK.split(piece)
            for j in range(1, len(parts), 2):
                directive(int(parts[j]))
            piece = " ".join(parts[0::2])
        s = piece.strip()
        top = frames[-1][0]
        if delim == "{":
            if top in ("init", "opaque"):
                frames.append(("init", None))
            elif s.endswith("="):
                if top in ("file", "linkage"):
                    name = _declarator_name(s[:-1])
                    if name:
                        add(name, "object")
                elif top in ("function", "block"):
                    _local(s[:-1], add, function_of())
                frames.append(("init", None))
            elif top in ("file", "linkage"):
                tag = _TAG.search(_without_template_head(s))
                if re.fullmatch(r'extern\s*""', s):
                    frames.append(("linkage", None))
                elif tag and "(" not in _without_template_head(s).split(tag.group(0), 1)[0]:
                    if tag.group(2) and not tag.group(3):  # X<...> specialises an X declared before
                        add(tag.group(2), "type")
                    frames.append(("opaque", None))
                elif "(" in s:
                    name = _function_name(s)
                    fn = add(name, "function") if name else None
                    frames.append(("function", fn))
                    counter[0] += 1
                    blocks[:] = [counter[0]]
                    if fn is not None:
                        result.functions.append(fn)
                        for p in _params(s):
                            add(p, "param", fn)
                else:
                    frames.append(("opaque", None))
            elif top in ("function", "block"):
                if s:
                    _local(s, add, function_of())  # `if (...) {` declares nothing; kept for `T x; {`
                counter[0] += 1
                blocks.append(counter[0])
                frames.append(("block", None))
            else:
                frames.append(("opaque", None))
        elif delim == ";":
            if not s or top in ("init", "opaque"):
                continue
            if top in ("file", "linkage"):
                if s.startswith("static_assert") or s.startswith("template"):
                    continue
                if s.startswith("typedef"):
                    name = _declarator_name(s)
                    if name:
                        add(name, "type")
                elif "(" in s.split("=", 1)[0]:
                    name = _function_name(s)
                    if name:
                        add(name, "prototype", text=" ".join(s.split()))
                else:
                    name = _declarator_name(s)
                    if name:
                        add(name, "object")
            elif top in ("function", "block"):
                _local(s, add, function_of())
        elif delim == "}":
            if len(frames) > 1:
                kind = frames.pop()[0]
                if kind in ("function", "block"):
                    blocks.pop()
    return result


def _without_template_head(s):
    """s without a leading `template <...>` (its parameters name no type)."""
    if not s.startswith("template"):
        return s
    i, depth = s.find("<"), 0
    for j in range(i, len(s)):
        if s[j] == "<":
            depth += 1
        elif s[j] == ">":
            depth -= 1
            if depth == 0:
                return s[j + 1:]
    return s


def _local(statement, add, fn):
    """The locals a statement inside a function declares."""
    m = _LOCAL.match(statement)
    if not m or m.group(1) in _NOT_TYPES:
        return
    parts = _split_commas(statement[m.start(3):])
    for i, part in enumerate(parts):
        name = m.group(3) if i == 0 else _declarator_name(part.split("=", 1)[0].replace("*", " "))
        if name:
            add(name, "local", fn)


def identifiers(code):
    """Every identifier token of stripped code."""
    return _IDENT.findall(code)
