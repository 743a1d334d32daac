#!/usr/bin/env bash
# Runs the deterministic simulation (Tests/FerrySimulationTests) over many seeds: by default a
# million, from seed 1 (the test splits them over one thread per core). Usage:
# scripts/simulate.sh [SEEDS] [FIRST] [STEPS]. A failing seed is printed with the command that
# replays it and the shortest run of its steps that still fails. CI runs 10,000 seeds
# (scripts/test-all.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests >/dev/null 2>&1 || { echo "scripts/simulate.sh: the build failed (swift build --build-tests)" >&2; exit 1; }
FERRY_SIM_SEEDS=${1:-1000000} FERRY_SIM_FIRST_SEED=${2:-1} FERRY_SIM_STEPS=${3:-60} \
  swift test --skip-build --filter SimulationTests 2>&1 | grep -E "^simulation|failed|replay:|shortest|^ *[0-9]+: |=>|✔ Test run|✘ Test run"
