/* Stand-in for CUDA's <cuda.h> in a kernel compiled by the CPU emulator
 * (tests/emu): the tensor map type a kernel takes by value as
 * `const __grid_constant__ CUtensorMap`, declared as CUDA 13.0's cuda.h
 * declares it (128 bytes, 128-byte aligned), so the emulated kernel's
 * parameter has the layout of the real one. The driver API (cu*
 * functions, the encoding enums) is host code and is not here: a kernel
 * that names it fails to build. The emulated copy engine reads the bytes in
 * klaunch's reference encoding (kl_tensor_map_reference_encode), which the
 * emulated backend writes. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_CUDA_H
#define KLAUNCH_TESTS_EMU_INCLUDE_CUDA_H

#include <stdint.h>

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

#define CU_TENSOR_MAP_NUM_QWORDS 16

typedef struct CUtensorMap_st {
#if defined(__cplusplus) && (__cplusplus >= 201103L)
    alignas(128)
#elif __STDC_VERSION__ >= 201112L
    _Alignas(128)
#endif
    cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS];
} CUtensorMap;

#endif
