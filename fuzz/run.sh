#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer and AddressSanitizer and runs each for SECONDS
# (default 60). A crash, a failed round-trip precondition or an ASan report fails the run and
# leaves the input in build/fuzz/<target>/crash-*. Usage: fuzz/run.sh [SECONDS] [TARGET...]
# A target is compiled with Sources/FerryCore plus the files its `// fuzz-sources:` lines list
# (paths from the repository root), so decoders outside FerryCore stay fuzzable if self-contained.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(changeset value schema query protocol http websocket json stamped changelog)
core_sources=$(find Sources/FerryCore -name '*.swift' | sort)
for t in "${targets[@]}"; do
  out=build/fuzz/$t
  extra_sources=$(sed -n 's|^// fuzz-sources:||p' "fuzz/targets/$t.swift" | tr -s ' \n' ' ')
  mkdir -p "$out/corpus"
  [ -d "fuzz/corpus/$t" ] && cp -n fuzz/corpus/$t/* "$out/corpus/" 2>/dev/null || true
  if [ ! -x "$out/fuzz-$t" ] || [ -n "$(find Sources/FerryCore fuzz/targets/$t.swift $extra_sources -newer "$out/fuzz-$t" -print -quit)" ]; then
    echo "building fuzz target $t"
    swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name FerryFuzz \
      $core_sources $extra_sources "fuzz/targets/$t.swift" -o "$out/fuzz-$t" 2>&1 | grep -v "Cannot export local symbol" || true
  fi
  echo "fuzzing $t for ${seconds}s"
  (cd "$out" && ./fuzz-$t -max_total_time="$seconds" -print_final_stats=1 corpus 2>&1 | grep -E "^(Done|stat::number_of_executed_units)|ERROR|SUMMARY|crash" || true)
  if ls "$out"/crash-* >/dev/null 2>&1; then
    echo "fuzz target $t found a crash: $(ls "$out"/crash-*)" >&2
    exit 1
  fi
done
