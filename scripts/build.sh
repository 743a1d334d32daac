#!/usr/bin/env bash
# Configures and builds libferry.so (release) with CMake into build/, the C tests and the fault
# proxy, ferry-server (debug, linked as build/ferry-server), and prepares a Python virtual
# environment with the binding installed (build/venv). Idempotent: a rebuild after a small
# change takes seconds.
#
# Usage: scripts/build.sh [--demo]
#   --demo  only libferry.so and ferry-server: what scripts/demo.sh runs (no C tests, no fault
#           proxy, no venv and so nothing downloaded by pip).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --demo) demo=1 ;;
  "") demo=0 ;;
  *) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ "$demo" -eq 1 ]; then
  cmake --build build -j2 --target ferry_swift
else
  # build/ferry-fault-proxy (tools/fault-proxy) and the C tests come with the rest.
  cmake --build build -j2
fi
# The server, for the demo and the sync tests of every language (they start it on a free port).
swift build -q --product ferry-server
ln -sf "$PWD/.build/debug/ferry-server" build/ferry-server
if [ "$demo" -eq 1 ]; then exit 0; fi
if [ ! -x build/venv/bin/python ]; then
  python3 -m venv build/venv
fi
# selenium: the admin console's browser test (tests/console); psycopg: the backend test's SQL
# (tests/backend).
build/venv/bin/python -m pip install -q --disable-pip-version-check ./bindings/python pytest selenium "psycopg[binary]"
