#!/usr/bin/env bash
# Ferry's main job, for a person to follow: builds the library, then runs the demo from C and
# from Python (a local database, writes, a query, a change notification).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "==> building libferry.so"
scripts/build.sh
cc -std=c11 -O2 -Wall -Iinclude demo/demo.c -Lbuild -lferry -lpthread -Wl,-rpath,"$PWD/build" -o build/demo-c
echo
echo "==> the demo from C (demo/demo.c)"
build/demo-c
echo
echo "==> the demo from Python (demo/demo.py)"
FERRY_LIBRARY="$PWD/build/libferry.so" build/venv/bin/python demo/demo.py
