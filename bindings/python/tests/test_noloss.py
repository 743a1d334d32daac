"""SPEC F-NOLOSS through the Python binding, against a real ferry-server (the seeds' Item app,
started by test_sync's module fixture): a compensating write reports what its revert took from
the device, and ``Database.reapply_reverted`` puts it back. The writes of a case are made while
the session is suspended, so they reach the server in one upload; the oracle is what the test
wrote. Errors are waited for on a condition variable with a timeout.
"""
from __future__ import annotations

from typing import Any

import ferry
from test_sync import Device, devices, server  # noqa: F401  (fixtures)


def offline(d: Device, writes: list[Any], errors_before: int = 0) -> tuple[ferry.SyncError, list[int]]:
    d.session.suspend()
    versions = []
    for w in writes:
        with d.db.write():
            w(d.db)
        versions.append(d.db.history_count())
    d.session.resume()
    return d.errors.wait(errors_before + 1)[errors_before], versions


def test_a_reverted_create_keeps_its_values_and_later_writes(devices: Any) -> None:
    d = devices(ferry.Credentials.anonymous())
    d.subscribe("complexity <= 4")
    pk = ferry.ObjectId.generate()
    error, v = offline(d, [
        lambda db: db.create("Item", {"_id": pk, "ownerId": "someone else", "itemName": "draft", "complexity": 1}),
        lambda db: db.set("Item", pk, "itemName", "Write the report"),
        lambda db: db.add("Item", pk, "complexity", 2),
    ])
    assert error.code == 231
    [w] = error.compensating_writes
    assert w.reason == f'write to "{pk}" in table "Item" was denied by write filter in role "owner-read-write"'
    r = w.reverted
    assert r is not None
    assert (r.object_type, r.primary_key, r.revert) == ("Item", pk, ferry.RevertKind.REMOVED)
    assert r.values == {"ownerId": "someone else", "itemName": "Write the report", "complexity": 3}
    assert r.writes == [
        ferry.LocalWrite(v[0], ferry.WriteKind.CREATE, None),
        ferry.LocalWrite(v[1], ferry.WriteKind.SET, "itemName", "Write the report"),
        ferry.LocalWrite(v[2], ferry.WriteKind.ADD_INT, "complexity", 2),
    ]
    assert d.item(pk) is None
    # Put back with the owner fixed (after the handler: the record is a copy): it syncs and stays.
    d.db.reapply_reverted(r, {"ownerId": d.user.id})
    d.sync()
    d.sync()
    item = d.item(pk)
    assert item is not None
    assert (item["ownerId"], item["itemName"], item["complexity"]) == (d.user.id, "Write the report", 3)
    assert len(d.errors.errors) == 1


def test_a_reverted_update_followed_by_legal_and_illegal_updates(devices: Any) -> None:
    d = devices(ferry.Credentials.anonymous())
    d.subscribe("complexity <= 4")
    pk = ferry.ObjectId.generate()
    d.create(pk, d.user.id, "start", 1)
    d.sync()
    error, v = offline(d, [
        lambda db: db.set("Item", pk, "ownerId", "someone else"),  # denied
        lambda db: db.set("Item", pk, "itemName", "legal"),        # stands
        lambda db: db.set("Item", pk, "complexity", 7),            # out of view
    ])
    assert [w.primary_key for w in error.compensating_writes] == [pk, pk]
    r = error.compensating_writes[0].reverted
    assert r is not None and r is error.compensating_writes[1].reverted
    assert r.revert == ferry.RevertKind.CHANGED
    assert r.values == {"ownerId": "someone else", "complexity": 7}
    assert [(w.local_version, w.property, w.value) for w in r.writes] == [(v[0], "ownerId", "someone else"), (v[2], "complexity", 7)]
    item = d.item(pk)
    assert item is not None and (item["ownerId"], item["itemName"], item["complexity"]) == (d.user.id, "legal", 1)
    d.db.reapply_reverted(r, {"ownerId": d.user.id, "complexity": 4})
    d.sync()
    d.sync()
    item = d.item(pk)
    assert item is not None and (item["ownerId"], item["itemName"], item["complexity"]) == (d.user.id, "legal", 4)
    assert len(d.errors.errors) == 1


def test_reapply_refuses_what_is_not_a_record(devices: Any) -> None:
    d = devices(ferry.Credentials.anonymous())
    try:
        d.db.reapply_reverted(object())
    except TypeError:
        pass
    else:
        raise AssertionError("reapply_reverted accepted a non-record")
