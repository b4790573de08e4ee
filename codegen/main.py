#!/usr/bin/env python3
"""Entry point: python3 codegen/main.py --include-dir DIR [--docs FILE] [--check] SPEC..."""

import os
import sys

# realpath: under Bazel this file is a runfiles symlink, and the runfiles
# entry codegen/klaunch_codegen is the py_binary's launcher, not this package;
# the package sits beside the real main.py.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from klaunch_codegen.cli import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main())
