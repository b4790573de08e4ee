#!/usr/bin/env bash
# examples/external_workspace/check.sh [BAZEL_TEST_ARGS...] -- builds and tests
# this workspace, which uses the klaunch checkout two levels up as
# @klaunch (local_repository), with klaunch's ./bazelw. Its output ends with
# the line "N passed, N failed, N skipped"; the exit status is Bazel's.
# The GPU test skips without a GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec ../../bazelw test //... "$@"
