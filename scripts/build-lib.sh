#!/usr/bin/env bash
# Builds libferry.so with SwiftPM (Package.swift links the Swift runtime in statically, sets
# SONAME libferry.so and exports only the C API) and copies it to OUTPUT_SO.
# Usage: scripts/build-lib.sh SCRATCH_DIR OUTPUT_SO [release|debug]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=${1:-$here/.build}
output=${2:-$here/build/libferry.so}
config=${3:-release}
cd "$here"
# Package.swift gives the product its link flags: static Swift runtime, SONAME, version script.
swift build -c "$config" --product ferry --scratch-path "$scratch"
mkdir -p "$(dirname "$output")"
cp "$scratch/$config/libferry.so" "$output.tmp"
mv "$output.tmp" "$output"
