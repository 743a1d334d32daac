#!/usr/bin/env python3
"""The insert benchmark through the Python binding (package ``ferry`` in bindings/python).

Inserts N Item objects (default 200,000: Python is slower, so fewer rows than the C run) in
write transactions of 10,000 with ``db.create`` inside ``with db.write():``, on a fresh file,
and prints rows/s. For scale it also inserts the same rows through Python's own ``sqlite3``
module (prepared statement, same pragmas, same table DDL as Ferry's), and prints the ratio.

The ObjectIds are generated before the timed part. The library is found through
``FERRY_LIBRARY`` (bench/run sets it to build/libferry.so). If ``import ferry`` fails, a SKIP
line says why and the script exits 0.

Usage: insert.py [--rows N] [--batch B] [--dir DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def import_ferry():
    try:
        import ferry  # installed with pip install ./bindings/python
        return ferry, None
    except ImportError:
        pass
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
    try:
        import ferry
        return ferry, None
    except Exception as e:  # ImportError, or OSError when the library cannot be loaded
        return None, f"{type(e).__name__}: {e}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=int(os.environ.get("FERRY_BENCH_PY_ROWS", 200_000)))
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()

    ferry, why = import_ferry()
    if ferry is None:
        print(f"SKIP python insert: cannot import the ferry binding ({why})")
        return 0
    try:
        version = ferry.library_version()
    except Exception as e:
        print(f"SKIP python insert: the ferry binding cannot load libferry.so ({type(e).__name__}: {e};"
              f" set FERRY_LIBRARY to build/libferry.so)")
        return 0

    rows, batch = args.rows, args.batch
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ferry-bench-py-"))
    try:
        print(f"python insert: {rows} Item objects in transactions of {batch} through the ferry "
              f"binding (libferry {version}, Python {sys.version.split()[0]})")
        item = ferry.ObjectSchema("Item", {
            "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
            "ownerId": ferry.Property(ferry.Type.STRING),
            "itemName": ferry.Property(ferry.Type.STRING),
            "complexity": ferry.Property(ferry.Type.INT),
        })
        ids = [ferry.ObjectId.generate() for _ in range(rows)]
        owners = [f"user-{u:02d}" for u in range(100)]

        path = workdir / "insert-python.ferry"
        with ferry.Database.open(str(path), schema=[item]) as db:
            t0 = time.perf_counter()
            for start in range(0, rows, batch):
                with db.write():
                    for n in range(start, min(start + batch, rows)):
                        db.create("Item", {"_id": ids[n], "ownerId": owners[n % 100],
                                           "itemName": f"item-{n}", "complexity": n % 10})
            t_ferry = time.perf_counter() - t0
            history = db.history_count()
            count = len(db.query("Item", "TRUEPREDICATE"))
        if count != rows:
            print(f"python insert: FAILED: {count} objects stored, expected {rows}")
            return 1

        # The same rows through Python's sqlite3 module, with Ferry's DDL and pragmas.
        with sqlite3.connect(str(path)) as src:
            ddl = src.execute("SELECT sql FROM sqlite_master WHERE type='table' AND "
                              "name NOT LIKE '\\_\\_%' ESCAPE '\\'").fetchone()[0]
            table = src.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                                "name NOT LIKE '\\_\\_%' ESCAPE '\\'").fetchone()[0]
        raw_path = workdir / "insert-python-raw.sqlite"
        con = sqlite3.connect(str(raw_path), isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute(ddl)
        sql = (f'INSERT INTO "{table}" ("_id", "ownerId", "itemName", "complexity") '
               "VALUES (?, ?, ?, ?)")
        raw_ids = [i.binary for i in ids]  # the same 12 bytes Ferry stores
        t0 = time.perf_counter()
        for start in range(0, rows, batch):
            con.execute("BEGIN IMMEDIATE")
            for n in range(start, min(start + batch, rows)):
                con.execute(sql, (raw_ids[n], owners[n % 100], f"item-{n}", n % 10))
            con.execute("COMMIT")
        t_raw = time.perf_counter() - t0
        con.close()

        rf, rr = rows / t_ferry, rows / t_raw
        print(f"  ferry binding (with history): {rf:9.0f} rows/s  ({t_ferry:.2f} s, {history} changesets)")
        print(f"  python sqlite3 module:        {rr:9.0f} rows/s  ({t_raw:.2f} s, table {table})")
        print(f"  ratio binding/sqlite3:        {rf / rr:9.2f}")
        print(f"RESULT python_insert_rows_per_s={rf:.0f} python_sqlite3_rows_per_s={rr:.0f} "
              f"ratio={rf / rr:.2f}")
        return 0
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
