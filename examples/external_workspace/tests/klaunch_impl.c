/* The one file of each test binary that compiles klaunch's runtime and both
 * backends (klaunch.h: define KLAUNCH_IMPLEMENTATION in exactly one file). */
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/klaunch.h"
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"
