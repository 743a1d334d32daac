"""A backend's own SQL on the SQL tables (issue 24): INSERT, UPDATE and DELETE in its own
transactions reach exactly the devices whose view they touch, each transaction as one
changeset; a SQL write and a device write to one field converge to the later one everywhere;
a transaction Ferry cannot take is refused whole, put back in the tables and recorded; and
Ferry's own writes to the tables never come back as SQL writes."""

from __future__ import annotations

import re
import secrets
import urllib.parse
from typing import Any, Callable

import psycopg
import pytest

from conftest import TIMEOUT, Device, Server, wait_until

ITEM = 'ferry_data."Item"'


def row(server: Server, oid: str) -> Any:
    return server.sql.execute(f'SELECT "itemName", complexity, "ownerId" FROM {ITEM} WHERE "_id" = %s', (oid,)).fetchone()


def inbox(server: Server) -> int:
    return server.sql.execute("SELECT count(*) FROM sql_inbox").fetchone()[0]


def events_of(server: Server, oid: str) -> list[dict[str, Any]]:
    return [e for e in server.changes(0) if e["primaryKey"] == {"$oid": oid}]


def settled(server: Server) -> None:
    """Waits until every captured transaction was integrated (the inbox is empty), then
    proves the node is past it: a Data API write made after is in the feed."""
    wait_until(lambda: inbox(server) == 0, message="the SQL writes were integrated")


def test_sql_writes_reach_exactly_the_devices_they_concern(server: Server, devices: Callable[[], Device]) -> None:
    ann, bob = devices(), devices()
    oid = "65f0000000000000000000b1"
    server.sql.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, %s)',
                       (oid, ann.user.id, "typed in SQL", 3))
    wait_until(lambda: oid in ann.items(), message="the SQL insert reached Ann's device")
    assert ann.items()[oid] == {"itemName": "typed in SQL", "complexity": 3, "ownerId": ann.user.id}
    bob.session.wait_for_download(timeout=TIMEOUT)
    assert oid not in bob.items()

    # One transaction of three statements: one changeset, one version, made by SQL.
    other = "65f0000000000000000000b2"
    with server.sql.transaction():
        server.sql.execute(f'UPDATE {ITEM} SET "itemName" = %s WHERE "_id" = %s', ("renamed", oid))
        server.sql.execute(f'UPDATE {ITEM} SET complexity = complexity + 1 WHERE "_id" = %s', (oid,))
        server.sql.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, %s)',
                           (other, bob.user.id, "for Bob", 1))
    wait_until(lambda: ann.items().get(oid, {}).get("complexity") == 4 and other in bob.items(), message="the transaction reached both devices")
    assert ann.items()[oid] == {"itemName": "renamed", "complexity": 4, "ownerId": ann.user.id}
    assert other not in ann.items() and oid not in bob.items()
    settled(server)
    # The feed has each object's last change: both made by SQL, at the transaction's one version.
    events = events_of(server, oid) + events_of(server, other)
    assert [e["by"] for e in events] == [{"sql": True}] * 2
    assert events[0]["version"] == events[1]["version"], "one transaction, one version"
    assert events[0]["document"]["itemName"] == "renamed" and events[0]["document"]["complexity"] == 4

    # Reassigned to Bob in SQL: erased on Ann's device, arrives on Bob's.
    server.sql.execute(f'UPDATE {ITEM} SET "ownerId" = %s WHERE "_id" = %s', (bob.user.id, oid))
    wait_until(lambda: oid not in ann.items() and oid in bob.items(), message="the object moved from Ann's device to Bob's")
    # Deleted in SQL: gone from Bob's device.
    server.sql.execute(f'DELETE FROM {ITEM} WHERE "_id" IN (%s, %s)', (oid, other))
    wait_until(lambda: oid not in bob.items() and other not in bob.items(), message="the SQL delete reached Bob's device")
    settled(server)
    deleted = events_of(server, oid)
    assert [(e["operation"], e["by"]) for e in deleted] == [("delete", {"sql": True})]
    assert row(server, oid) is None and row(server, other) is None
    # No loop: Ferry's own writes of the merged state were not captured again, so the next
    # write's version follows the delete's directly.
    marker = server.call("insertOne", {"class": "Item", "document": {"_id": {"$oid": "65f0000000000000000000b3"}, "ownerId": "nobody",
                                                                     "itemName": "marker", "complexity": 0}})
    assert int(marker["version"]) == deleted[0]["version"] + 1
    assert inbox(server) == 0


def test_a_sql_write_and_a_device_write_converge_to_the_later(server: Server, devices: Callable[[], Device]) -> None:
    ann = devices()
    import ferry
    first, second = ferry.ObjectId.generate(), ferry.ObjectId.generate()
    with ann.db.write():
        for oid in (first, second):
            ann.db.create("Item", {"_id": oid, "ownerId": ann.user.id, "itemName": "start", "complexity": 0})
    ann.session.wait_for_upload(timeout=TIMEOUT)
    wait_until(lambda: row(server, str(second)) is not None, message="the device's items are rows")

    # The device writes offline first, the backend later: the backend's value is the later.
    ann.session.suspend()
    _set(ann, first, "device, earlier")
    server.sql.execute(f'UPDATE {ITEM} SET "itemName" = %s WHERE "_id" = %s', ("backend, later", str(first)))
    # The backend writes first, the device later, offline.
    server.sql.execute(f'UPDATE {ITEM} SET "itemName" = %s WHERE "_id" = %s', ("backend, earlier", str(second)))
    settled(server)
    _set(ann, second, "device, later")
    ann.session.resume()
    ann.session.wait_for_upload(timeout=TIMEOUT)
    ann.session.wait_for_download(timeout=TIMEOUT)

    oracle = {str(first): "backend, later", str(second): "device, later"}
    for oid, name in oracle.items():
        wait_until(lambda: row(server, oid)[0] == name, message=f"the table shows the later write of {oid}")
        assert ann.items()[oid]["itemName"] == name
        found = server.call("findOne", {"class": "Item", "primaryKey": {"$oid": oid}})["document"]
        assert found["itemName"] == name


def _set(device: Device, oid: Any, name: str) -> None:
    with device.db.write():
        device.db.set("Item", oid, "itemName", name)


def test_a_sql_write_ferry_cannot_take_is_refused_whole_restored_and_recorded(server: Server) -> None:
    reading = "65f0000000000000000000c1"
    item = "65f0000000000000000000c2"
    server.call("transaction", {"operations": [
        {"action": "insertOne", "class": "Reading", "document": {"_id": {"$oid": reading}, "ownerId": "u", "label": "before", "value": 1,
                                                                  "ratio": 0.5, "taken": {"$date": "2026-01-01T00:00:00Z"}, "blob": {"$binary": {"base64": "AA==", "subType": "00"}}}},
        {"action": "insertOne", "class": "Item", "document": {"_id": {"$oid": item}, "ownerId": "u", "itemName": "before", "complexity": 1}},
    ]})
    wait_until(lambda: row(server, item) is not None, message="the rows exist")

    # PostgreSQL refuses what its types and checks can: nothing is captured.
    with pytest.raises(psycopg.errors.NotNullViolation):
        server.sql.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", complexity) VALUES (%s, %s, 1)', ("65f0000000000000000000c3", "u"))
    with pytest.raises(psycopg.errors.CheckViolation):
        server.sql.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, 1)', ("not-an-object-id", "u", "x"))
    with pytest.raises(psycopg.errors.RaiseException, match="TRUNCATE"):
        server.sql.execute(f"TRUNCATE {ITEM}")

    # A value PostgreSQL holds and Ferry does not (a timestamp at infinity), in a transaction
    # with a good write: the whole transaction is refused, and both rows are put back.
    with server.sql.transaction():
        server.sql.execute(f'UPDATE {ITEM} SET "itemName" = %s WHERE "_id" = %s', ("after", item))
        server.sql.execute('UPDATE ferry_data."Reading" SET taken = %s, label = %s WHERE "_id" = %s', ("infinity", "after", reading))
    wait_until(lambda: inbox(server) == 0 and row(server, item)[0] == "before", message="the refused transaction was put back")
    assert server.sql.execute('SELECT label, taken = %s FROM ferry_data."Reading" WHERE "_id" = %s',
                              ("2026-01-01T00:00:00Z", reading)).fetchone() == ("before", True)
    assert server.call("findOne", {"class": "Item", "primaryKey": {"$oid": item}})["document"]["itemName"] == "before"
    assert not any(e["operation"] == "upsert" and e["document"].get("itemName") == "after" for e in events_of(server, item))

    log = wait_until(lambda: [e for e in server.admin("users/sql-writes/sync-log?kind=sql_write")["entries"] if "refused" in e["message"]],
                     message="the refusal is in the sync log")
    assert "taken" in log[0]["message"] and "Reading" in log[0]["message"]
    assert re.search(r'ferry_sql_writes_total\{result="refused"\} [1-9]', server.metrics())


def test_two_nodes_integrate_each_sql_transaction_once(server: Server, tmp_path_factory: pytest.TempPathFactory,
                                                       devices: Callable[[], Device]) -> None:
    second = Server(tmp_path_factory.mktemp("ferry-backend-node-2"), database_url=server.database_url)
    try:
        ann = devices()
        def integrated() -> int:
            entries = server.admin("users/sql-writes/sync-log?kind=sql_write&limit=1000")["entries"]
            return sum(1 for e in entries if "integrated" in e["message"])
        before = integrated()
        keys = [f"65f00000000000000000{n:04x}" for n in range(0xd000, 0xd000 + 40)]
        for n, oid in enumerate(keys):
            with server.sql.transaction():
                server.sql.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, %s)',
                                   (oid, ann.user.id, f"n{n}", n))
                server.sql.execute(f'UPDATE {ITEM} SET complexity = complexity + 100 WHERE "_id" = %s', (oid,))
        wait_until(lambda: all(k in ann.items() for k in keys), message="every SQL transaction reached the device")
        assert {k: ann.items()[k]["complexity"] for k in keys} == {k: n + 100 for n, k in enumerate(keys)}
        settled(server)
        # Each transaction is one version, whichever node integrated it: 40 upserts, no repeat.
        events = [e for k in keys for e in events_of(server, k)]
        assert len(events) == 40 and len({e["version"] for e in events}) == 40
        # Integrated once each: the node that lost a race to the other wrote nothing.
        wait_until(lambda: integrated() >= before + 40, message="every integration is in the sync log")
        assert integrated() == before + 40
    finally:
        second.stop()


def test_a_backend_role_granted_as_the_docs_say_writes_and_cannot_hide_its_writes(server: Server, devices: Callable[[], Device]) -> None:
    role = "office_" + secrets.token_hex(3)
    password = secrets.token_hex(16)
    # docs/backend.md's grants, word for word but the role's name.
    server.sql.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    try:
        server.sql.execute(f"GRANT USAGE ON SCHEMA ferry_data TO {role}")
        server.sql.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA ferry_data TO {role}")
        server.sql.execute(f"GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ferry_data TO {role}")
        parts = urllib.parse.urlsplit(server.database_url)
        office_url = urllib.parse.urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
        ann = devices()
        oid = "65f0000000000000000000e1"
        with psycopg.connect(office_url, autocommit=True) as office:
            office.execute(f'INSERT INTO {ITEM} ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, 1)', (oid, ann.user.id, "from the office"))
            wait_until(lambda: ann.items().get(oid, {}).get("itemName") == "from the office", message="the office's insert reached Ann's device")
            # Marking its own transaction as Ferry's does not hide a write from the capture:
            # only the server's role is skipped.
            with office.transaction():
                office.execute("SELECT set_config('ferry.origin', 'ferry', true)")
                office.execute(f'UPDATE {ITEM} SET "itemName" = %s WHERE "_id" = %s', ("not hidden", oid))
            wait_until(lambda: ann.items().get(oid, {}).get("itemName") == "not hidden", message="the marked write reached Ann's device")
            # The inbox is the server's: the backend reaches it only through the capture.
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                office.execute("DELETE FROM sql_inbox")
    finally:
        server.sql.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA ferry_data FROM {role}")
        server.sql.execute(f"REVOKE ALL ON SCHEMA ferry_data FROM {role}")
        server.sql.execute(f"DROP ROLE {role}")
