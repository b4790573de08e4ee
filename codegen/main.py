#!/usr/bin/env python3
"""Entry point: python3 codegen/main.py --include-dir DIR [--docs FILE] [--check] SPEC..."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from klaunch_codegen.cli import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main())
