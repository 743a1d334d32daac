#!/usr/bin/env bash
# Builds libferry.so with SwiftPM: the Swift runtime linked in statically, SONAME libferry.so,
# only the C API exported. Usage: scripts/build-lib.sh SCRATCH_DIR OUTPUT_SO [release|debug]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=${1:-$here/.build}
output=${2:-$here/build/libferry.so}
config=${3:-release}
cd "$here"
swift build -c "$config" --product ferry --scratch-path "$scratch" \
  -Xswiftc -static-stdlib \
  -Xlinker -soname -Xlinker libferry.so \
  -Xlinker --version-script="$here/scripts/ferry.map"
mkdir -p "$(dirname "$output")"
cp "$scratch/$config/libferry.so" "$output.tmp"
mv "$output.tmp" "$output"
