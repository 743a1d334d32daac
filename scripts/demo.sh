#!/usr/bin/env bash
# Ferry's main job, for a person to follow: builds libferry.so and ferry-server, starts the
# server on the embedded SQLite store with the seeds' Item app (examples/item-app), and runs
# the seeds' Flexible Sync scenario with two devices of one user — a C program and a Python
# program — printing the items as they sync and the compensating writes with their reasons.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the demo needs: the test suites' packages (PostgreSQL, Chromium, valgrind, ...)
# and their Python packages are scripts/test-all.sh's business.
scripts/install-deps.sh --demo
echo "==> building libferry.so and ferry-server"
scripts/build.sh --demo
cc -std=c11 -O2 -Wall -Iinclude demo/sync_demo.c -Lbuild -lferry -lpthread -Wl,-rpath,"$PWD/build" -o build/sync-demo-c

work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-demo-XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo
echo "==> ferry-server (app examples/item-app, SQLite store in $work/server)"
jwtSigningKey=demo-signing-key-of-at-least-32-bytes \
  build/ferry-server --app-dir examples/item-app --data "$work/server" --port 0 --port-file "$work/port" \
  --log-level warning > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "ferry-server did not start:"; cat "$work/server.log"; exit 1; }
url="http://127.0.0.1:$(cat "$work/port")"
echo "   listening on $url"
email="ana-$$@example.com"
mkdir -p "$work/device-c" "$work/device-py"

echo
echo "==> 1. the C device (demo/sync_demo.c): registers $email, subscribes, writes two items"
build/sync-demo-c "$url" "$work/device-c" "$email" first
echo
echo "==> 2. the Python device (demo/sync_demo.py): the same user on another device"
# The system python3 with the binding from bindings/python (demo/sync_demo.py puts it on the
# path when no ferry package is installed): the binding is pure ctypes, nothing to install.
PYTHONPATH="$PWD/bindings/python" FERRY_LIBRARY="$PWD/build/libferry.so" python3 demo/sync_demo.py "$url" "$work/device-py" "$email"
echo
echo "==> 3. the C device again (its user from the cache): downloads, then two writes the server rejects"
build/sync-demo-c "$url" "$work/device-c" "$email" second
echo
echo "==> the server's log of the rejected writes (as the seeds show them)"
grep -o '"Item": {.*' "$work/server.log" || true
