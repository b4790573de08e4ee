"""The names a rendered output declares, read back from its C text.

The generator's names are not listed by hand: whatever the templates emit
is scanned here (macros, file-scope objects, functions, prototypes, types,
and each function's parameters and locals with their block nesting), so a
name a template adds is checked for collisions without a check of its own
(collisions.check_outputs). The scanner reads the C the templates write,
not C in general: no `for` headers, declarations at a statement's start.
tests/codegen/test_declared.py checks that every kl_/KL_ identifier the
generated code uses is found declared here or in the runtime.

Only code matters here: comments and string literals are emptied first,
so a spec's docs and messages cannot add or hide a declaration.
"""

import hashlib
import re

# Comments and string/character literals, in one pass so that each is seen
# where it starts ("/*" inside a string is text, '"' inside a comment too).
_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z]*)([^\\\n]*(?:\\.[^\\\n]*)*)", re.M | re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MACRO_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\()?")
_TAG = re.compile(r"\b(struct|class|union|enum)\s+([A-Za-z_][A-Za-z0-9_]*)\s*(<)?")
# A statement that declares: [qualifiers] TYPE [*...] NAME then [, = ; or end.
_LOCAL = re.compile(
    r"(?:(?:const|static|volatile|register|unsigned|signed|struct|union|enum)\s+)*"
    r"([A-Za-z_][A-Za-z0-9_]*)\b\s*((?:\*\s*(?:const\s+)?)*)([A-Za-z_][A-Za-z0-9_]*)\s*(?=\[|=|,|$)")
# The same at a statement's start in the code, past blanks and emptied literals.
_LOCAL_AT = re.compile(r'[\s"]*' + _LOCAL.pattern.replace("(?=\\[|=|,|$)", "(?=\\[|=|,|\\s*$)"))
_NOT_TYPES = frozenset("return if else goto while do for switch case default break continue sizeof".split())


class Decl:
    """One declared name."""

    __slots__ = ("name", "kind", "path", "index", "function", "block", "cond", "guard")

    def __init__(self, name, kind, path, index, function=None, block=(), cond=(), guard=None):
        self.name = name
        # "macro", "function", "prototype", "object", "type"; in a
        # function: "param" or "local"
        self.kind = kind
        self.path = path  # the output file, e.g. klaunch/copy.h
        self.index = index  # order of discovery in its file (same for a re-rendering)
        self.function = function  # the Decl of the function it is in, or None at file scope
        self.block = block  # nesting of blocks inside the function, e.g. (0, 3)
        self.cond = cond  # ((#if id, branch number), ...) around it
        self.guard = guard  # (guard macro, digest of the guarded text) of the innermost #ifndef G holding #define G

    def exclusive_with(self, other):
        """True when the two sit in different branches of one #if chain."""
        mine = dict(self.cond)
        return any(i in mine and mine[i] != b for i, b in other.cond)


class Scan:
    """What one output declares: file-scope Decls and each function's."""

    def __init__(self, path, code):
        self.path = path
        self.code = code  # comments and literals emptied, directives kept; None unless asked for
        self.decls = []  # every Decl, in order
        self.functions = []  # function Decls

    @property
    def file_scope(self):
        return [d for d in self.decls if d.function is None]


def strip(text):
    """C text with every comment and literal made `""`: the structure the
    scan reads is left, and one fixed replacement keeps it at C speed (a
    statement's leading `""` is dropped where statements are read)."""
    return _NOISE.sub('""', text)


def _split_commas(text):
    """text split at commas outside () and []."""
    if "(" not in text and "[" not in text:
        return text.split(",")
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
    head = _HEAD.split(text, 1)[0]
    names = _IDENT.findall(head)
    return names[-1] if names else None


_HEAD = re.compile(r"[=\[]")


def _params(text):
    """Parameter names of a function header's parameter list: the last
    identifier of each parameter (the generated code names them all)."""
    if ")" not in text:
        return []
    inner = text[text.index("(") + 1: text.rindex(")")].strip()
    if "(" in inner or "[" in inner:  # a function pointer or an array: with care
        return [n for n in (_declarator_name(p) for p in _split_commas(inner)) if n and n != "void"]
    # `T name`, `const T *name`: the last word, as fast as Python splits.
    out = []
    for part in inner.split(","):
        words = part.replace("*", " ").split()
        if len(words) > 1:
            out.append(words[-1])
    return out


def _function_name(text):
    """The name before the first ( of a function header (past extern "")."""
    head = text.split("(", 1)[0]
    names = _IDENT.findall(head)
    return names[-1] if names else None


_DELIM = re.compile(r"[;{}]")


def scan(text, path, keep_code=False):
    """The Scan of one rendered C or CUDA file (with its stripped code, for
    token searches, when keep_code)."""
    code = strip(text)
    result = Scan(path, code if keep_code else None)
    decls = result.decls

    # Directives first: their #if structure, guards (#ifndef G that holds a
    # #define G) and the text each guard encloses.
    directives = [(m.group(1), m.group(2), m.start(), m.end()) for m in _DIRECTIVE.finditer(code)]
    guards = {}  # index of an #ifndef -> (G, region text)
    opens = []
    for i, (word, rest, start, end) in enumerate(directives):
        if word in ("if", "ifdef", "ifndef"):
            opens.append(i)
        elif word == "endif" and opens:
            j = opens.pop()
            w, r, s, _ = directives[j]
            g = r.strip()
            if w == "ifndef":
                for x in range(j + 1, i):
                    m = directives[x][0] == "define" and _MACRO_NAME.match(directives[x][1])
                    if m and m.group(1) == g:
                        # The region's text by its digest: the file's own guard holds all of it.
                        guards[j] = (g, hashlib.sha256(code[s:end].encode("utf-8", "surrogatepass")).hexdigest())
                        break

    state = {"cond": (), "guard": None}
    cond = []  # [(if id, branch)] open around the current point
    guard_stack = []  # (G, digest) or None per open #if
    frames = [("file", None)]  # kind, function Decl
    blocks = []  # block path inside the current function
    counter = [0]

    def conditions_changed():
        state["cond"] = tuple(cond)
        state["guard"] = next((g for g in reversed(guard_stack) if g is not None), None)

    def add(name, kind, function=None):
        d = Decl(name, kind, path, len(decls), function, tuple(blocks) if function else (), state["cond"], state["guard"])
        decls.append(d)
        return d

    def directive(i):
        word, rest, _, _ = directives[i]
        if word in ("if", "ifdef", "ifndef"):
            cond.append((i, 0))
            guard_stack.append(guards.get(i))
            conditions_changed()
        elif word in ("elif", "else"):
            if cond:
                cond[-1] = (cond[-1][0], cond[-1][1] + 1)
                conditions_changed()
        elif word == "endif":
            if cond:
                cond.pop()
                guard_stack.pop()
                conditions_changed()
        elif word == "define":
            m = _MACRO_NAME.match(rest)
            if m:
                add(m.group(1), "macro")

    def function_of():
        for kind, fn in reversed(frames):
            if kind == "function":
                return fn
        return None

    def statement(s, delim):
        """One piece of code up to `delim` ({, ; or }) at the current nesting."""
        if s.startswith('"'):  # a comment's or a literal's remains
            s = s.lstrip('" \t\n')
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
                bare = _without_template_head(s)
                tag = _TAG.search(bare)
                if _LINKAGE.fullmatch(s):
                    frames.append(("linkage", None))
                elif tag and "(" not in bare[: tag.start()]:
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
                    _local(s, add, function_of())  # `if (...) {` declares nothing
                counter[0] += 1
                blocks.append(counter[0])
                frames.append(("block", None))
            else:
                frames.append(("opaque", None))
        elif delim == ";":
            if not s or top in ("init", "opaque"):
                return
            if top in ("file", "linkage"):
                if s.startswith("static_assert") or s.startswith("template"):
                    return
                if s.startswith("typedef"):
                    name = _declarator_name(s)
                    if name:
                        add(name, "type")
                elif "(" in s.split("=", 1)[0]:
                    name = _function_name(s)
                    if name:
                        add(name, "prototype")
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

    # The code between directives, cut at ; { and }; a statement that a
    # directive interrupts is carried over it.
    pending = ""
    last = 0
    for i in range(len(directives) + 1):
        end = directives[i][2] if i < len(directives) else len(code)
        # One piece at a time (a header is up to 80 MB: no list of its pieces).
        for m in _DELIM.finditer(code, last, end):
            delim = m.group()
            top = frames[-1][0]
            if top == "init" and not pending:  # an initializer's { ... }: nothing declared inside
                if delim == "{":
                    frames.append(("init", None))
                elif delim == "}":
                    frames.pop()
                last = m.end()
                continue
            if delim == ";" and top in ("function", "block") and not pending:
                # The common case, inline and unsliced: a statement in a function body.
                lm = _LOCAL_AT.match(code, last, m.start())
                if lm and lm.group(1) not in _NOT_TYPES:
                    _local(code[lm.start(1):m.start()].rstrip(), add, function_of())
                last = m.end()
                continue
            piece = code[last:m.start()]
            last = m.end()
            if pending:
                piece, pending = pending + piece, ""
            statement(piece.strip(), delim)
        pending += code[last:end] + " "
        if i < len(directives):
            directive(i)
            last = directives[i][3]
    return result


_LINKAGE = re.compile(r'extern\s*""')


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
    add(m.group(3), "local", fn)
    rest = statement[m.end(3):]
    if "," not in rest:
        return
    while "(" in rest:  # calls in initializers hold commas too
        shorter = _PARENS.sub("", rest)
        if shorter == rest:
            break
        rest = shorter
    for part in rest.split(",")[1:]:
        name = _declarator_name(part.split("=", 1)[0].replace("*", " "))
        if name:
            add(name, "local", fn)


_PARENS = re.compile(r"\([^()]*\)")


