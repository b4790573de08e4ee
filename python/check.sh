#!/usr/bin/env bash
# python/check.sh -- the pip install path of the Python launchers, as CI runs
# it: `pip install ./python` into a fresh venv (the runtime package klaunch,
# every family's generated module and its library, compiled here with cc),
# then, from a folder outside the checkout, every family imported from the
# venv, a launch on the recording backend checked byte for byte, and a
# refusal with its message. Installs python3-venv where a fresh Debian 12
# lacks it. Exit status: non-zero when any step failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
here=$PWD

say() { echo "python/check.sh: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

work=$(mktemp -d)
# pip builds in place: its build/ and egg-info go with the venv.
trap 'rm -rf "$work" "$here/build" "$here/klaunch.egg-info"' EXIT
if ! python3 -m venv "$work/venv" >/dev/null 2>&1; then
  if [ "$(command -v python3)" = /usr/bin/python3 ]; then
    say "installing python3-venv (Debian packages)"
    as_root apt-get update -qq >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  rm -rf "$work/venv"
  python3 -m venv "$work/venv"
fi
say "pip install ./python into a venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check .
cd "$work"
cp "$here/pip_smoke_test.py" "$work/"
"$work/venv/bin/python" "$work/pip_smoke_test.py" "$work/venv"
