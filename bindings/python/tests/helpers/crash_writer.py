"""Child process for test_crash.py: commits transactions in a loop until it is killed.

After each commit returns it prints the number of the entry that transaction created.
Invariants the parent checks after a kill: every printed entry exists, the counter equals the
number of entries, one changeset per committed transaction, and data and history agree.
"""

import random
import sys

import ferry
from ferry import ObjectSchema, Property, Type

BULK = 200  # objects created by every 7th transaction

SCHEMA = [
    ObjectSchema(
        "Entry",
        {
            "_id": Property(Type.INT, primary_key=True),
            "payload": Property(Type.STRING),
            "blob": Property(Type.BINARY),
            "score": Property(Type.DOUBLE, indexed=True),
            "tags": Property(Type.STRING, list=True),
        },
    ),
    ObjectSchema(
        "Bulk",
        {"_id": Property(Type.STRING, primary_key=True), "entry": Property(Type.INT, indexed=True)},
    ),
    ObjectSchema(
        "Counter",
        {"_id": Property(Type.STRING, primary_key=True), "total": Property(Type.INT)},
    ),
]


def main() -> None:
    path = sys.argv[1]
    rng = random.Random(int(sys.argv[2]))
    db = ferry.Database.open(path, schema=SCHEMA)
    last = db.query("Entry", "TRUEPREDICATE SORT(_id DESC) LIMIT(1)")
    i = last[0]["_id"] + 1 if len(last) else 0
    print("ready", i, flush=True)
    while True:
        with db.write():
            if db.get("Counter", "c") is None:
                db.create("Counter", {"_id": "c", "total": 0})
            db.create("Entry", {
                "_id": i,
                "payload": "p" * rng.randrange(0, 2000),
                "blob": rng.randbytes(rng.randrange(0, 64)),
                "score": rng.random(),
                "tags": [str(i)] * rng.randrange(0, 4),
            })
            db.add("Counter", "c", "total", 1)
            if i % 3 == 0 and i > 0 and db.get("Entry", i - 1) is not None:
                db.set("Entry", i - 1, "payload", f"updated by {i}")
                db.list_insert("Entry", i - 1, "tags", 0, "first")
            if i % 7 == 0:
                # A bigger transaction, so that kills land inside commits too.
                for j in range(BULK):
                    db.create("Bulk", {"_id": f"{i}-{j}", "entry": i})
            if i % 5 == 0:
                db.create("Entry", {"_id": -i - 1})
                db.delete("Entry", -i - 1)
        print(i, flush=True)
        i += 1


if __name__ == "__main__":
    main()
