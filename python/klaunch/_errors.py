"""klaunch's exceptions: one class per kl_status, made from the one list.

The statuses are read from KL_STATUS_LIST in klaunch/klaunch.h (the X-macro
the C enum and kl_status_name() are expanded from), never written out here:
KL_ERROR_PRECONDITION becomes PreconditionError, KL_ERROR_FILE_IO
FileIoError, and so on (CamelCase of the name after KL_ERROR_, then Error).
Every family's library is checked against the same list when it loads
(_family.py), so a code from C always maps to its class.

Every class derives from klaunch.Error and carries .status (the name),
.code (the enum value), .description (kl_status_string) and .message (the
full message, e.g. kl_last_error_message(); also str(error)). A few also
derive from the built-in exception of the same meaning (BUILTIN_BASES).
The checks only Python can make (element type, address alignment, device,
layout, writability, extent, Python argument types) raise subclasses of
InvalidArgumentError and NullPointerError (PYTHON_CHECKS).
"""

import os
import re

_HEADER = os.path.join("include", "klaunch", "klaunch.h")


def _header_candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    explicit = os.environ.get("KLAUNCH_RUNTIME_HEADER")
    if explicit:
        yield explicit
    yield os.path.join(here, _HEADER)  # pip install ./python copies it here
    yield os.path.join(os.path.dirname(os.path.dirname(here)), _HEADER)  # a checkout: python/klaunch/ -> include/


def _read_header():
    for path in _header_candidates():
        try:
            with open(path, encoding="utf-8") as f:
                return path, f.read()
        except OSError:
            continue
    raise ImportError(
        "klaunch: cannot find the runtime header klaunch/klaunch.h (its KL_STATUS_LIST names the exceptions); "
        "looked in %s; install with pip install <klaunch>/python or set KLAUNCH_RUNTIME_HEADER"
        % ", ".join(_header_candidates()))


_ENTRY = re.compile(r'X\(\s*(KL_[A-Z0-9_]+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)')


def parse_status_list(text):
    """[(name, description)] of KL_STATUS_LIST in the text of klaunch.h, in
    enum order."""
    m = re.search(r"#\s*define\s+KL_STATUS_LIST\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        raise ImportError("klaunch: klaunch.h has no KL_STATUS_LIST(X) X-macro")
    entries = [(n, d.encode("ascii", "backslashreplace").decode("unicode_escape")) for n, d in _ENTRY.findall(m.group(1))]
    if not entries or entries[0][0] != "KL_SUCCESS":
        raise ImportError("klaunch: KL_STATUS_LIST in klaunch.h does not start with KL_SUCCESS")
    return entries


HEADER_PATH, _TEXT = _read_header()
STATUSES = parse_status_list(_TEXT)  # [(name, description)], index = kl_status value
del _TEXT


def class_name(status):
    """KL_ERROR_NULL_POINTER -> NullPointerError."""
    body = status[len("KL_ERROR_"):] if status.startswith("KL_ERROR_") else status[len("KL_"):]
    return "".join(part.capitalize() for part in body.split("_")) + "Error"


class Error(Exception):
    """A klaunch refusal: .status, .code, .description, .message."""

    status = "KL_UNKNOWN_STATUS"
    code = -1
    description = "unknown status"

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message


Error.__module__ = "klaunch"


# The built-in exception each of these statuses also is (a status missing
# from KL_STATUS_LIST is a test failure: tests/python/errors_test.py).
BUILTIN_BASES = {
    "KL_ERROR_INVALID_ARGUMENT": ValueError,
    "KL_ERROR_NULL_POINTER": ValueError,
    "KL_ERROR_OVERFLOW": OverflowError,
    "KL_ERROR_DIVISION_BY_ZERO": ZeroDivisionError,
    "KL_ERROR_OUT_OF_MEMORY": MemoryError,
}

BY_CODE = {}  # code -> class
BY_NAME = {}  # status name -> class
CLASSES = {}  # class name -> class
for _code, (_name, _description) in enumerate(STATUSES):
    if _name == "KL_SUCCESS":
        continue
    _bases = (Error, BUILTIN_BASES[_name]) if _name in BUILTIN_BASES else (Error,)
    _cls = type(class_name(_name), _bases, {
        "status": _name,
        "code": _code,
        "description": _description,
        "__doc__": "%s: %s." % (_name, _description),
        "__module__": "klaunch",
    })
    BY_CODE[_code] = BY_NAME[_name] = CLASSES[_cls.__name__] = _cls


def _python_check(name, base, builtin, doc):
    cls = type(name, (base, builtin) if builtin else (base,), {"__doc__": doc, "__module__": "klaunch"})
    CLASSES[name] = cls
    return cls


# Checks only Python can make, as subclasses of the statuses they are.
_invalid = BY_NAME["KL_ERROR_INVALID_ARGUMENT"]
ArgumentTypeError = _python_check("ArgumentTypeError", _invalid, TypeError,
                                  "An argument of the wrong Python type (a str for a u32, a float for a tensor).")
DtypeError = _python_check("DtypeError", _invalid, TypeError,
                           "A tensor whose element type is not the one its pointer parameter names.")
DeviceError = _python_check("DeviceError", _invalid, None,
                            "A tensor or stream on another device than the launch's (or in host memory).")
LayoutError = _python_check("LayoutError", _invalid, None,
                            "A tensor whose strides are not the layout its parameter needs.")
AlignmentError = _python_check("AlignmentError", _invalid, None,
                               "A tensor whose address is not a multiple of its element's size (a bf16 tensor at an "
                               "odd address).")
ReadOnlyError = _python_check("ReadOnlyError", _invalid, None,
                              "A read-only tensor for a pointer the kernel writes through.")
NoneArgumentError = _python_check("NoneArgumentError", BY_NAME["KL_ERROR_NULL_POINTER"], None,
                                  "None for a pointer parameter that is not nullable.")
ExtentError = _python_check("ExtentError", _invalid, None,
                            "A tensor whose strides reach fewer elements than its pointer's declared extent (the "
                            "spec's `extent`) needs for the launch's scalars: the kernel would touch memory past it.")
PYTHON_CHECKS = ("ArgumentTypeError", "DtypeError", "DeviceError", "AlignmentError", "LayoutError", "ReadOnlyError",
                 "NoneArgumentError", "ExtentError")


def error(code, message):
    """The exception of status `code` with `message`."""
    cls = BY_CODE.get(code)
    if cls is None:
        exc = Error(message)
        exc.code = code
        return exc
    return cls(message)


def error_class(status):
    """The class of a status, by name ("KL_ERROR_PRECONDITION") or code; a
    value that is neither is refused as InvalidArgumentError naming it."""
    if isinstance(status, str):
        cls = BY_NAME.get(status)
    else:  # a code is an int: not a bool, nor a float equal to one
        cls = BY_CODE.get(status) if isinstance(status, int) and not isinstance(status, bool) else None
    if cls is None:
        raise fail(BY_NAME["KL_ERROR_INVALID_ARGUMENT"], "klaunch.error_class", "%r is no klaunch status name or code "
                   "(the statuses are KL_STATUS_LIST in %s: KL_ERROR_* names, codes 1..%d)" % (
                       status, HEADER_PATH, len(STATUSES) - 1))
    return cls


def fail(cls, function, text, where=None):
    """An exception in the C launchers' format: 'STATUS: function: text [where]'."""
    suffix = " [%s]" % where if where else ""
    return cls("%s: %s: %s%s" % (cls.status, function, text, suffix))
