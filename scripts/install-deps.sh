#!/usr/bin/env bash
# Installs the Debian packages Ferry needs, when any is missing. Needs root (or sudo). The
# Swift toolchain itself is expected on the machine (see README).
#
# Usage: scripts/install-deps.sh [--demo]
#   --demo  only what scripts/demo.sh needs: building libferry.so and ferry-server, and the
#           demo's C and Python devices (the Python one runs the binding from bindings/python
#           with the system python3, so no venv).
#   (none)  everything scripts/test-all.sh needs besides.
set -euo pipefail
demo=(libuv1-dev libsqlite3-dev libssl-dev pkg-config cmake python3)
# valgrind: the C tests' leak checker. python3-venv: build/venv with pytest and selenium.
# openssl: test certificates (openssl req). postgresql: the storage conformance, multi-node
# and load tests. chromium and chromium-driver: the admin console's browser test
# (tests/console). cargo: the Rust binding.
tests=(valgrind python3-venv openssl postgresql chromium chromium-driver)
case "${1:-}" in
  --demo) packages=("${demo[@]}") ;;
  "")
    packages=("${demo[@]}" "${tests[@]}")
    command -v cargo >/dev/null 2>&1 || packages+=(cargo)
    ;;
  *) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null 2>&1 || { echo "error: the Swift toolchain (swift 6.3) is not on PATH" >&2; exit 1; }
