/* Stand-in for CUDA's <vector_types.h> in a kernel compiled by the CPU
 * emulator (tests/emu): the built-in vector types with CUDA's sizes and
 * alignments, and their make_* functions. */
#ifndef KLAUNCH_TESTS_EMU_INCLUDE_VECTOR_TYPES_H
#define KLAUNCH_TESTS_EMU_INCLUDE_VECTOR_TYPES_H

#define KL_EMU__VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N##2 { T x, y; };
#define KL_EMU__VEC3(T, N) \
    struct N##3 { T x, y, z; };
#define KL_EMU__VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };
#define KL_EMU__VEC1(T, N) \
    struct N##1 { T x; };

KL_EMU__VEC1(signed char, char)
KL_EMU__VEC1(unsigned char, uchar)
KL_EMU__VEC1(short, short)
KL_EMU__VEC1(unsigned short, ushort)
KL_EMU__VEC1(int, int)
KL_EMU__VEC1(unsigned int, uint)
KL_EMU__VEC1(float, float)
KL_EMU__VEC2(signed char, char, 2)
KL_EMU__VEC2(unsigned char, uchar, 2)
KL_EMU__VEC2(short, short, 4)
KL_EMU__VEC2(unsigned short, ushort, 4)
KL_EMU__VEC2(int, int, 8)
KL_EMU__VEC2(unsigned int, uint, 8)
KL_EMU__VEC2(float, float, 8)
KL_EMU__VEC2(long long, longlong, 16)
KL_EMU__VEC2(unsigned long long, ulonglong, 16)
KL_EMU__VEC2(double, double, 16)
KL_EMU__VEC3(int, int)
KL_EMU__VEC3(float, float)
KL_EMU__VEC4(signed char, char, 4)
KL_EMU__VEC4(unsigned char, uchar, 4)
KL_EMU__VEC4(short, short, 8)
KL_EMU__VEC4(unsigned short, ushort, 8)
KL_EMU__VEC4(int, int, 16)
KL_EMU__VEC4(unsigned int, uint, 16)
KL_EMU__VEC4(float, float, 16)

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

#undef KL_EMU__VEC1
#undef KL_EMU__VEC2
#undef KL_EMU__VEC3
#undef KL_EMU__VEC4

static inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
    return uint4{x, y, z, w};
}
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline ushort2 make_ushort2(unsigned short x, unsigned short y) { return ushort2{x, y}; }
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

#endif
