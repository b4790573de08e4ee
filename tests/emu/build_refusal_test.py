"""A kernel the emulator cannot run faithfully must not build for it
(docs/EMULATOR.md): raw inline PTX (asm, __asm__), a CUDA name the emulator
does not define, `extern __shared__`. Each case is a kernel source compiled
here exactly as the emulated unity file compiles it (the prelude first, the
kernel flags, g++ -fsyntax-only); the error must name the problem. A
control kernel that uses the kernels/common/kl_ptx.cuh wrappers must build,
so the refusals are the rule's and not a broken setup."""
import os
import subprocess
import sys
import tempfile
import unittest

from tools import junit_unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = os.environ.get("CXX", "g++")
FLAGS = ["-std=c++17", "-fsyntax-only", "-fsanitize=thread", "-I" + ROOT, "-I" + os.path.join(ROOT, "tests/emu/include")]


def compile_kernel(body):
    src = '#include "tests/emu/kernel_prelude.h"\n#include "kernels/common/kl_ptx.cuh"\n' + body
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel_emu.cc")
        with open(path, "w") as f:
            f.write(src)
        r = subprocess.run([CXX] + FLAGS + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    return r.returncode, r.stderr


class BuildRefusalTest(unittest.TestCase):
    def refused(self, body, needle):
        rc, err = compile_kernel(body)
        self.assertNotEqual(rc, 0, "the kernel built:\n" + body)
        self.assertIn(needle, err)
        return err

    def test_a_kernel_using_the_wrappers_builds(self):
        rc, err = compile_kernel('extern "C" __global__ void k(float *o) {\n'
                                 '    __shared__ float s[32];\n'
                                 '    s[threadIdx.x] = kl__ex2_approx_ftz(1.0f);\n'
                                 '    __syncthreads();\n'
                                 '    o[threadIdx.x] = __shfl_xor_sync(0xffffffffu, s[31 - threadIdx.x], 1);\n'
                                 '}\n')
        self.assertEqual(rc, 0, err)

    def test_raw_asm_is_refused_naming_the_rule(self):
        self.refused('extern "C" __global__ void k() { asm volatile("membar.gl;" ::: "memory"); }\n',
                     "raw asm in a kernel cannot be emulated")

    def test_gnu_asm_spelling_is_refused_too(self):
        self.refused('extern "C" __global__ void k(float *o) { float y; __asm__("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(o[0])); o[0] = y; }\n',
                     "raw asm in a kernel cannot be emulated")

    def test_a_cuda_name_the_emulator_lacks_is_refused_naming_it(self):
        self.refused('extern "C" __global__ void k(unsigned *o) { o[0] = __activemask(); }\n', "__activemask")

    def test_extern_shared_is_refused(self):
        # gcc names the declaration; docs/EMULATOR.md and the prelude say: use KL_DYNAMIC_SHARED.
        self.refused('extern "C" __global__ void k(float *o) { extern __shared__ float s[]; o[0] = s[0]; }\n',
                     "conflicting specifiers in declaration of")


if __name__ == "__main__":
    junit_unittest.main()
