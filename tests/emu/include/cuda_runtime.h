/* Stand-in for CUDA's <cuda_runtime.h> in a kernel compiled by the CPU
 * emulator (tests/emu): the vector types. A kernel needs nothing else of
 * the runtime API; host calls (cudaMalloc ...) do not belong in kernels. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_CUDA_RUNTIME_H
#define KLAUNCH_TESTS_EMU_INCLUDE_CUDA_RUNTIME_H
#include "vector_types.h"
#endif
