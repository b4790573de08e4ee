"""pip install ./python: pyproject.toml says what is installed; this adds
what lives outside python/ in a klaunch checkout: every family's generated
module (../generated/python/klaunch_<family>.py) and its library, compiled
from ../generated/python/klaunch_<family>.c against ../include and
../generated, the runtime header the exceptions are read from
(klaunch/include/klaunch/klaunch.h) and, with $KLAUNCH_FATBIN_DIR, the
families' fatbins (klaunch/fatbins/)."""

import glob
import os
import shlex
import shutil
import subprocess
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def _compiler():
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


class BuildPyWithLaunchers(build_py):
    def run(self):
        super().run()
        modules = sorted(glob.glob(os.path.join(ROOT, "generated", "python", "klaunch_*.py")))
        if not modules:
            raise SystemExit("klaunch: no generated Python launchers in %s; install from a klaunch checkout "
                             "(pip install path/to/klaunch/python)" % os.path.join(ROOT, "generated", "python"))
        header = os.path.join(ROOT, "include", "klaunch", "klaunch.h")
        inc = os.path.join(self.build_lib, "klaunch", "include", "klaunch")
        os.makedirs(inc, exist_ok=True)
        shutil.copy(header, inc)
        for module in modules:
            family = os.path.basename(module)[len("klaunch_"):-len(".py")]
            shutil.copy(module, self.build_lib)
            source = module[:-len(".py")] + ".c"
            library = os.path.join(self.build_lib, "libklaunch_%s.so" % family)
            cmd = _compiler() + ["-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
                                 "-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "generated"),
                                 source, "-o", library, "-ldl"]
            self.announce("klaunch: " + " ".join(cmd), level=2)
            subprocess.check_call(cmd)
        fatbins = os.environ.get("KLAUNCH_FATBIN_DIR")
        if fatbins:
            out = os.path.join(self.build_lib, "klaunch", "fatbins")
            os.makedirs(out, exist_ok=True)
            for f in sorted(glob.glob(os.path.join(fatbins, "*_*.fatbin"))):
                if os.path.getsize(f) > 0:
                    shutil.copy(f, out)


class BinaryDistribution(Distribution):
    """The libraries are compiled: the wheel is for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLaunchers}, distclass=BinaryDistribution)
