"""A backend that knows SQL and HTTP, and nothing of Ferry's protocol (issue 24), against a
ferry-server on PostgreSQL and real devices: it reads the devices' writes in the SQL tables,
the Data API and the change feed, and its Data API writes reach exactly the devices whose
view they touch (an object moved out of a device's view is erased there)."""

from __future__ import annotations

from typing import Any, Callable

from conftest import TIMEOUT, Device, Server, wait_until


def test_the_backend_reads_what_devices_wrote(server: Server, devices: Callable[[], Device]) -> None:
    ann = devices()
    written = {}
    with ann.db.write():
        for n in range(3):
            key = ann.db.create("Item", {"_id": __import__("ferry").ObjectId.generate(), "ownerId": ann.user.id,
                                         "itemName": f"item {n} \"quoted\"", "complexity": n})
            written[str(key)] = {"itemName": f"item {n} \"quoted\"", "complexity": n, "ownerId": ann.user.id}
    ann.session.wait_for_upload(timeout=TIMEOUT)

    # The SQL table: exactly the oracle, as plain columns.
    rows = server.sql.execute('SELECT "_id", "itemName", complexity, "ownerId" FROM ferry_data."Item" WHERE "ownerId" = %s',
                              (ann.user.id,)).fetchall()
    assert {r[0]: {"itemName": r[1], "complexity": r[2], "ownerId": r[3]} for r in rows} == written
    # The Data API.
    found = server.call("find", {"class": "Item", "filter": "ownerId == $0", "arguments": [ann.user.id]})["documents"]
    assert {d["_id"]["$oid"]: {"itemName": d["itemName"], "complexity": d["complexity"], "ownerId": d["ownerId"]} for d in found} == written
    # The change feed: each an upsert, made by the device's user.
    events = [e for e in server.changes(0) if e["primaryKey"]["$oid"] in written]
    assert sorted(e["primaryKey"]["$oid"] for e in events) == sorted(written)
    assert all(e["operation"] == "upsert" and e["by"] == {"user": ann.user.id} for e in events)


def test_backend_writes_reach_exactly_the_devices_they_concern(server: Server, devices: Callable[[], Device]) -> None:
    ann, bob = devices(), devices()
    oid = "65f0000000000000000000a1"
    server.call("insertOne", {"class": "Item", "document": {"_id": {"$oid": oid}, "ownerId": ann.user.id, "itemName": "from the office", "complexity": 2}})
    ann.session.wait_for_download(timeout=TIMEOUT)
    bob.session.wait_for_download(timeout=TIMEOUT)
    assert ann.items()[oid] == {"itemName": "from the office", "complexity": 2, "ownerId": ann.user.id}
    assert oid not in bob.items()
    assert server.sql.execute('SELECT "itemName" FROM ferry_data."Item" WHERE "_id" = %s', (oid,)).fetchone() == ("from the office",)

    # Reassigned to Bob: it leaves Ann's view (erased on her device) and enters Bob's.
    server.call("updateOne", {"class": "Item", "primaryKey": {"$oid": oid}, "set": {"ownerId": bob.user.id}})
    ann.session.wait_for_download(timeout=TIMEOUT)
    bob.session.wait_for_download(timeout=TIMEOUT)
    wait_until(lambda: oid not in ann.items() and oid in bob.items(), message="the object moved from Ann's device to Bob's")
    assert bob.items()[oid]["ownerId"] == bob.user.id
    assert server.sql.execute('SELECT "ownerId" FROM ferry_data."Item" WHERE "_id" = %s', (oid,)).fetchone() == (bob.user.id,)

    # Deleted by the backend: gone from Bob's device and from the table.
    server.call("deleteOne", {"class": "Item", "primaryKey": {"$oid": oid}})
    bob.session.wait_for_download(timeout=TIMEOUT)
    assert oid not in bob.items()
    assert server.sql.execute('SELECT count(*) FROM ferry_data."Item" WHERE "_id" = %s', (oid,)).fetchone() == (0,)
