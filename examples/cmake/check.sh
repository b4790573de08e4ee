#!/usr/bin/env bash
# examples/cmake/check.sh [CMAKE_CONFIGURE_ARGS...] -- what CI runs: the
# generator installed with `pip install ./codegen` into a fresh venv, then
# this CMake project configured with it (KLAUNCH_GEN=<venv>/bin/klaunch-gen),
# built, and its tests run (ctest: the dry run; the GPU run skips without a
# GPU). Installs what a fresh Debian 12 lacks (cmake, python3-venv) with
# apt-get. Exit status: non-zero when any step failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

say() { echo "examples/cmake: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  say "installing $* (Debian packages)"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v cmake >/dev/null 2>&1 || apt_install cmake make

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! python3 -m venv "$work/venv" >/dev/null 2>&1; then
  [ "$(command -v python3)" = /usr/bin/python3 ] && apt_install python3-venv
  rm -rf "$work/venv"
  python3 -m venv "$work/venv"
fi
say "pip install ../../codegen into a venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check ../../codegen
"$work/venv/bin/klaunch-gen" --version

say "cmake $(cmake --version | head -n 1 | cut -d' ' -f3)"
cmake -S . -B "$work/build" -DKLAUNCH_GEN="$work/venv/bin/klaunch-gen" "$@" >/dev/null
grep -q "^KLAUNCH_GEN:STRING=$work/venv/bin/klaunch-gen\$" "$work/build/CMakeCache.txt" || {
  say "the build does not use the venv's klaunch-gen"
  exit 1
}
cmake --build "$work/build" -- -j2
(cd "$work/build" && ctest --output-on-failure)
