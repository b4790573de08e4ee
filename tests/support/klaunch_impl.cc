// The one translation unit of a test binary that defines klaunch's runtime
// and both backends. Tests depend on //tests/support:klaunch_impl (or on
// :gpu_test_util, which brings it) and only include headers themselves.
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/klaunch.h"
#include "klaunch/cuda_backend.h"
#include "klaunch/record_backend.h"
#include "klaunch/choose.h"  /* the choice-table loader and writer */
