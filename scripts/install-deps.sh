#!/usr/bin/env bash
# Installs the Debian packages Ferry builds and tests with, when any is missing. Needs root
# (or sudo). The Swift toolchain itself is expected on the machine (see README).
set -euo pipefail
# chromium and chromium-driver: the admin console's browser test (tests/console).
packages=(libuv1-dev libsqlite3-dev libssl-dev pkg-config cmake valgrind python3 python3-venv postgresql chromium chromium-driver)
command -v cargo >/dev/null 2>&1 || packages+=(cargo)
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
