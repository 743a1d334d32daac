#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer and AddressSanitizer and runs each for SECONDS
# (default 60). A crash, a failed round-trip precondition or an ASan report fails the run and
# leaves the input in build/fuzz/<target>/crash-*. Usage: fuzz/run.sh [SECONDS] [TARGET...]
# Every target is compiled into one binary (build/fuzz/ferry-fuzz, FERRY_FUZZ_TARGET picks the
# target; fuzz/FuzzEntry.swift) with Sources/FerryCore plus the files the targets' `// fuzz-sources:`
# lines list (paths from the repository root), so decoders outside FerryCore stay fuzzable if
# self-contained. A new target is a file in fuzz/targets and a line in FuzzEntry.swift.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(ls fuzz/targets | sed 's/\.swift$//'))
core_sources=$(find Sources/FerryCore -name '*.swift' | sort)
all_targets=$(ls fuzz/targets/*.swift)
extra_sources=$(sed -n 's|^// fuzz-sources:||p' $all_targets | tr -s ' \n' '\n' | sort -u | tr '\n' ' ')
binary=build/fuzz/ferry-fuzz
mkdir -p build/fuzz
if [ ! -x "$binary" ] || [ -n "$(find Sources/FerryCore fuzz/FuzzEntry.swift $all_targets $extra_sources -newer "$binary" -print -quit)" ]; then
  echo "building the fuzz binary (every target)"
  rm -f "$binary"  # a failed build must not leave the old binary to be run
  swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name FerryFuzz -package-name ferry \
    $core_sources $extra_sources $all_targets fuzz/FuzzEntry.swift -o "$binary" 2>&1 | grep -v "Cannot export local symbol" || true
  [ -x "$binary" ] || { echo "fuzz/run.sh: the fuzz binary did not build" >&2; exit 1; }
fi
for t in "${targets[@]}"; do
  [ -f "fuzz/targets/$t.swift" ] || { echo "fuzz/run.sh: no target $t (fuzz/targets/$t.swift)" >&2; exit 2; }
  out=build/fuzz/$t
  mkdir -p "$out/corpus"
  [ -d "fuzz/corpus/$t" ] && cp -n fuzz/corpus/$t/* "$out/corpus/" 2>/dev/null || true
  echo "fuzzing $t for ${seconds}s"
  (cd "$out" && FERRY_FUZZ_TARGET=$t ../ferry-fuzz -max_total_time="$seconds" -print_final_stats=1 corpus 2>&1 | grep -E "^(Done|stat::number_of_executed_units)|ERROR|SUMMARY|crash" || true)
  if ls "$out"/crash-* >/dev/null 2>&1; then
    echo "fuzz target $t found a crash: $(ls "$out"/crash-*)" >&2
    exit 1
  fi
done
