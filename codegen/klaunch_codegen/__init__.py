"""klaunch_codegen: C launchers and kernel-side headers from klaunch YAML specs.

The pipeline is load (yamlpos) -> validate (spec, expr) -> emit (emit, with
Jinja2 templates); cli ties them together. Importing this package needs
nothing outside the standard library; the modules that do the work import
PyYAML and Jinja2 themselves, so the CLI can report a missing one cleanly.
"""

__version__ = "0.1.0"

# The runtime ABI (include/klaunch/klaunch.h KL_RUNTIME_ABI) the output targets.
RUNTIME_ABI = 4

REGENERATE_COMMAND = "./bazelw run //:generate"
