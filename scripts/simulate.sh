#!/usr/bin/env bash
# Runs the deterministic simulation (Tests/FerrySimulationTests) over many seeds: by default a
# million, from seed 1, in one shard per core. Usage: scripts/simulate.sh [SEEDS] [FIRST] [STEPS]
# A failing seed is printed with the command that replays it and the shortest run of its steps
# that still fails. CI runs 10,000 seeds inside the Swift tests (scripts/test-all.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1000000}
first=${2:-1}
steps=${3:-60}
shards=$(nproc)
swift build --build-tests >/dev/null 2>&1 || { echo "scripts/simulate.sh: the build failed (swift build --build-tests)" >&2; exit 1; }
per=$(( (seeds + shards - 1) / shards ))
pids=()
for s in $(seq 0 $((shards - 1))); do
  start=$((first + s * per))
  count=$(( s == shards - 1 ? seeds - s * per : per ))
  [ "$count" -gt 0 ] || continue
  FERRY_SIM_FIRST_SEED=$start FERRY_SIM_SEEDS=$count FERRY_SIM_STEPS=$steps \
    swift test --skip-build --filter SimulationTests > "build/simulate-$s.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
grep -h "^simulation:\|failed:\|replay:\|shortest" build/simulate-*.log || true
exit $status
