"""Helpers of the argument-order tests: tools, and positions in a spec found
by reading its text (not through the generator, whose output is under test).
"""

import os
import re
import shutil


def nvcc():
    """nvcc as bazel/cuda_configure.bzl finds it ($CUDA_PATH, PATH,
    /usr/local/cuda), or None."""
    base = os.environ.get("CUDA_PATH")
    if base and os.path.exists(os.path.join(base, "bin", "nvcc")):
        return os.path.join(base, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    if os.path.exists("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda/bin/nvcc"
    return None


def launcher_pos(spec_text, launcher):
    """(line, col) of `name` in `- name: <launcher>`."""
    for n, line in enumerate(spec_text.splitlines(), 1):
        m = re.match(r"^(\s*-\s+)name:\s*%s\s*$" % re.escape(launcher), line)
        if m:
            return n, len(m.group(1)) + 1
    raise KeyError("launcher %s not in the spec" % launcher)


def param_pos(spec_text, launcher, param):
    """(line, col) of parameter `param` (short form `- name: type`) in the
    params list of `launcher`."""
    lines = spec_text.splitlines()
    start, _ = launcher_pos(spec_text, launcher)
    for n in range(start, len(lines)):
        line = lines[n]
        if n > start and re.match(r"^\s*-\s+name:", line):
            break
        m = re.match(r"^(\s*-\s+)%s:" % re.escape(param), line)
        if m:
            return n + 1, len(m.group(1)) + 1
    raise KeyError("parameter %s of %s not in the spec" % (param, launcher))


def split_args(argv, *options):
    """(values, rest): `--option VALUE` pairs (each option once) taken out of argv."""
    values, rest, i = {}, [], 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv):
            values[argv[i]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return values, rest
