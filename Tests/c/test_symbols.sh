#!/usr/bin/env bash
# test_symbols.sh HEADER LIBRARY [CC] [BAD_ARGS_TEST_SOURCE]
#
# Checks the shape of the built libferry.so against include/ferry.h:
#  1. the functions declared in the header and the symbols the library exports
#     (nm -D --defined-only) are exactly the same set; both differences are printed;
#  2. every exported symbol is a function;
#  3. ldd lists no libswift* (the Swift runtime is linked in statically);
#  4. readelf -d shows SONAME libferry.so;
#  5. (given the source of test_bad_args.c) every declared function is called there.
set -u
header=${1:?usage: test_symbols.sh HEADER LIBRARY [CC] [BAD_ARGS_SOURCE]}
lib=${2:?usage: test_symbols.sh HEADER LIBRARY [CC] [BAD_ARGS_SOURCE]}
cc=${3:-cc}
bad_args=${4:-}
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-symbols-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; failed=1; }

[ -f "$header" ] || { echo "FAIL: no header at $header"; exit 1; }
[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }

# Declared functions: preprocess the header (comments and macros gone), then take every
# identifier ferry_* directly followed by "(" — a function pointer typedef such as
# "(*ferry_free_fn)(" is followed by ")" and so is not taken.
if ! "$cc" -E -P -x c "$header" -o "$tmp/header.i"; then
  echo "FAIL: cannot preprocess $header with $cc"
  exit 1
fi
tr '\n' ' ' < "$tmp/header.i" | grep -oE '\bferry_[A-Za-z0-9_]+[[:space:]]*\(' \
  | sed -E 's/[[:space:]]*\($//' | sort -u > "$tmp/declared"

# Exported symbols: every defined dynamic symbol with global or weak binding, without version
# suffixes. nm prints local symbols in lower case (except u, v, w and i, which are unique
# global, weak and indirect): a LOCAL entry left in .dynsym cannot be bound by anyone, so it
# is not an export; such entries are listed as a note.
nm -D --defined-only "$lib" | awk 'NF >= 3 { print $2, $3 }' | sed -E 's/@.*$//' > "$tmp/nm_all"
awk '$1 ~ /^[A-Zuvwi]$/' "$tmp/nm_all" > "$tmp/nm"
awk '$1 !~ /^[A-Zuvwi]$/ { print $2 }' "$tmp/nm_all" | sort -u > "$tmp/local"
awk '{ print $2 }' "$tmp/nm" | sort -u > "$tmp/exported"
if [ -s "$tmp/local" ]; then
  echo "note: $(wc -l < "$tmp/local") LOCAL symbols remain in .dynsym (not exported, so not compared):"
  head -5 "$tmp/local" | sed 's/^/    /'
  [ "$(wc -l < "$tmp/local")" -gt 5 ] && echo "    ..."
fi

declared_count=$(wc -l < "$tmp/declared")
exported_count=$(wc -l < "$tmp/exported")
echo "declared in $(basename "$header"): $declared_count functions; exported by $(basename "$lib"): $exported_count symbols"
[ "$declared_count" -gt 0 ] || fail "no functions found in the header"

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
  fail "declared in the header but not exported by the library:"
  echo "$missing" | sed 's/^/    /'
fi
if [ -n "$extra" ]; then
  fail "exported by the library but not declared in the header:"
  echo "$extra" | sed 's/^/    /'
fi

not_functions=$(awk '$1 != "T" && $1 != "i" && $1 != "W" { print "    " $2 " (nm type " $1 ")" }' "$tmp/nm")
if [ -n "$not_functions" ]; then
  fail "exported symbols that are not functions:"
  echo "$not_functions"
fi

if ldd "$lib" > "$tmp/ldd" 2>&1; then
  if grep -q 'libswift' "$tmp/ldd"; then
    fail "ldd lists Swift runtime libraries (the runtime should be linked in statically):"
    grep 'libswift' "$tmp/ldd" | sed 's/^/    /'
  fi
  if grep -q 'not found' "$tmp/ldd"; then
    fail "ldd cannot resolve some dependencies:"
    grep 'not found' "$tmp/ldd" | sed 's/^/    /'
  fi
else
  fail "ldd $lib failed: $(cat "$tmp/ldd")"
fi

soname=$(readelf -d "$lib" | sed -nE 's/.*\(SONAME\).*\[(.*)\].*/\1/p')
if [ "$soname" != "libferry.so" ]; then
  fail "SONAME is '${soname:-<none>}', expected libferry.so"
fi

if [ -n "$bad_args" ]; then
  never=""
  while read -r fn; do
    grep -qE "\b$fn\b" "$bad_args" || never="$never $fn"
  done < "$tmp/declared"
  if [ -n "$never" ]; then
    fail "functions never named in $(basename "$bad_args"):$never"
  fi
fi

if [ "$failed" -eq 0 ]; then
  echo "test_symbols: exports == header ($declared_count functions), no libswift*, SONAME libferry.so"
fi
exit "$failed"
