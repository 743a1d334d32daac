#!/usr/bin/env bash
# Configures and builds libferry.so (release) with CMake into build/, and prepares a Python
# virtual environment with the binding installed (build/venv). Idempotent: a rebuild after a
# small change takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2
# The server, for the sync tests of every language (they start it on a free port).
swift build -q --product ferry-server
ln -sf "$PWD/.build/debug/ferry-server" build/ferry-server
# build/ferry-fault-proxy (tools/fault-proxy) comes from the CMake build above.
if [ ! -x build/venv/bin/python ]; then
  python3 -m venv build/venv
fi
# selenium: the admin console's browser test (tests/console).
build/venv/bin/python -m pip install -q --disable-pip-version-check ./bindings/python pytest selenium
