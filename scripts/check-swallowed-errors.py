#!/usr/bin/env python3
"""Fails when a `try?` in Sources/ does not say why swallowing its error is harmless.

Issue 25, point 6: after a failure Ferry handles it, surfaces it, or logs it with what it cost;
`try?` is kept only where the error changes nothing (a rollback, closing what is given up on, a
parse whose nil is the answer, a sleep that throws only when cancelled). Each such `try?` carries
the reason as a comment on its line or within the six lines above it (one comment may cover a
few `try?` in a row). Prints every `try?` without one, and the count of those with one.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
swallow = re.compile(r"(^|[^A-Za-z_])try\?")
documented, bare = 0, []
for path in sorted((root / "Sources").rglob("*.swift")):
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if not swallow.search(code):
            continue
        above = lines[max(0, i - 6):i]
        if "//" in line or any(l.strip().startswith("//") for l in above):
            documented += 1
        else:
            bare.append(f"{path.relative_to(root)}:{i + 1}: {line.strip()}")
for b in bare:
    print(b)
print(f"try? in Sources: {documented} documented, {len(bare)} without a reason")
sys.exit(1 if bare else 0)
