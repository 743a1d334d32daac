#!/usr/bin/env python3
"""Ferry from Python: create a database, observe a query, write, query, see the notification.

Run:  FERRY_LIBRARY=$PWD/build/libferry.so python3 demo/demo.py
(after `pip install ./bindings/python`; without FERRY_LIBRARY the demo looks for
build/libferry.so next to this folder, then for an installed libferry.so).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Find the library and the binding when run straight from a checkout.
if "FERRY_LIBRARY" not in os.environ and (REPO / "build" / "libferry.so").exists():
    os.environ["FERRY_LIBRARY"] = str(REPO / "build" / "libferry.so")
try:
    import ferry
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import ferry

from ferry import ObjectSchema, Property, Type

ITEM = ObjectSchema(
    "Item",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING),
        "itemName": Property(Type.STRING),
        "complexity": Property(Type.INT, indexed=True),
    },
)

ITEMS = [
    ("alice", "Write the C API", 3),
    ("alice", "Port the query language", 7),
    ("bob", "Draw the architecture", 2),
    ("bob", "Benchmark SQLite", 5),
    ("carol", "Fix the typo in the README", 1),
]


def main() -> int:
    print(f"Ferry {ferry.library_version()} (Python binding {ferry.__version__})")
    with tempfile.TemporaryDirectory(prefix="ferry-demo-") as tmp:
        path = Path(tmp) / "demo.ferry"
        print(f"\n1. Opening a database at {path}")
        with ferry.Database.open(path, schema=[ITEM]) as db:
            print(f"   classes: {db.class_names}")

            print("\n2. Observing the query 'complexity <= 4'")
            arrived = threading.Event()
            received: list[ferry.ChangeSet] = []

            def on_change(changes: ferry.ChangeSet) -> None:
                # Runs on Ferry's loop thread, after the commit.
                received.append(changes)
                arrived.set()

            token = db.observe_query("Item", "complexity <= 4", callback=on_change)

            print(f"\n3. Writing {len(ITEMS)} items in one transaction")
            with db.write():
                for owner, name, complexity in ITEMS:
                    pk = db.create("Item", {
                        "_id": ferry.ObjectId.generate(),
                        "ownerId": owner,
                        "itemName": name,
                        "complexity": complexity,
                    })
                    print(f"   + {pk}  {owner:<6} {name!r} (complexity {complexity})")
            print(f"   committed; history now holds {db.history_count()} changeset(s)")

            print("\n4. Querying 'complexity <= $0' with $0 = 4, sorted by complexity")
            results = db.query("Item", "complexity <= $0 SORT(complexity ASC)", 4)
            print(f"   {len(results)} matching items:")
            for item in results:
                print(f"   - {item['itemName']!r} by {item['ownerId']} "
                      f"(complexity {item['complexity']})")

            print("\n5. Waiting for the notification")
            if not arrived.wait(10):
                print("   ERROR: no notification within 10 seconds", file=sys.stderr)
                return 1
            inserted = [key for changes in received for key in changes.inserted]
            print(f"   notification: {len(inserted)} inserted into the query's results:")
            names = {item["_id"]: item["itemName"] for item in results}
            for key in inserted:
                print(f"   * {key}  {names.get(key, '?')!r}")
            if sorted(map(str, inserted)) != sorted(str(item["_id"]) for item in results):
                print("   ERROR: the notification does not match the query", file=sys.stderr)
                return 1

            print("\n6. Changing one item so that it leaves the results")
            leaving = results[0]
            arrived.clear()
            received.clear()
            with db.write():
                db.set("Item", leaving["_id"], "complexity", 9)
            if not arrived.wait(10):
                print("   ERROR: no notification within 10 seconds", file=sys.stderr)
                return 1
            deleted = [key for changes in received for key in changes.deleted]
            remaining = len(db.query("Item", "complexity <= 4"))
            print(f"   notification: deleted from the results: {deleted}")
            print(f"   the query now matches {remaining} items")
            if deleted != [leaving["_id"]] or remaining != len(results) - 1:
                print(f"   ERROR: expected {leaving['_id']} to leave the results; "
                      f"got {received}", file=sys.stderr)
                return 1
            print(f"   {leaving['itemName']!r} left the results, as expected")

            token.close()
            db.verify_history()
            print(f"\n7. History verified: {db.history_count()} changesets agree with the data")
    print("\nDone.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
