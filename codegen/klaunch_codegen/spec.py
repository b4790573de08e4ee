"""Reading a spec: load_spec(path, diags) -> Spec or None, cross_check(specs, diags).

The reader is three modules, as glad keeps its option schema and its
diagnostics out of its parser: schema.py (what a spec may say, as data:
keys, types, CUDA limits, reserved names), validate.py (the checks, every
problem reported with its position) and model.py (the validated spec that
emit.py renders). This module is the entry point the CLI and tools use.
"""

from .model import Check, Expr, Launcher, LauncherResolver, Param, Spec, Type, Variant  # noqa: F401
from .validate import cross_check, load_spec, name_problem, parse_type  # noqa: F401
