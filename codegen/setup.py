"""pip install ./codegen: pyproject.toml says what is installed; this adds
klaunch's runtime headers (../include/klaunch/*.h) to the package, as
klaunch_codegen/include/klaunch/, because the generator reads the runtime's
names and limits from them (klaunch_codegen/names.py) and an installed
package has no checkout beside it."""

import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "include", "klaunch")


class BuildPyWithRuntime(build_py):
    def run(self):
        super().run()
        headers = sorted(glob.glob(os.path.join(RUNTIME, "*.h")))
        if not headers:
            raise SystemExit("klaunch-codegen: no runtime headers at %s; install from a klaunch checkout "
                             "(pip install path/to/klaunch/codegen)" % os.path.normpath(RUNTIME))
        out = os.path.join(self.build_lib, "klaunch_codegen", "include", "klaunch")
        os.makedirs(out, exist_ok=True)
        for h in headers:
            shutil.copy(h, out)


setup(cmdclass={"build_py": BuildPyWithRuntime})
