"""SPEC F-NOLOSS through the Python binding, against a real ferry-server (the seeds' Item app,
started by test_sync's module fixture): a compensating write reports what its revert took from
the device, and ``Database.reapply_reverted`` puts it back; lists and a reverted delete on the
convergence app's Doc with deletes refused (a server of its own). The writes of a case are made while
the session is suspended, so they reach the server in one upload; the oracle is what the test
wrote. Errors are waited for on a condition variable with a timeout.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

import ferry
from ferry import ObjectSchema, Property, Type
from test_sync import REPO, T, Device, ErrorLog, devices, run_server, server  # noqa: F401  (fixtures)


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


# --- lists and a reverted delete: the convergence app's Doc (a list of tags), deletes refused ---

DOC = ObjectSchema("Doc", {
    "_id": Property(Type.STRING, primary_key=True),
    "ownerId": Property(Type.STRING),
    "title": Property(Type.STRING),
    "counter": Property(Type.INT),
    "rank": Property(Type.INT),
    "tags": Property(Type.STRING, list=True),
})


@pytest.fixture(scope="module")
def doc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = tmp_path_factory.mktemp("doc-app") / "app"
    shutil.copytree(REPO / "Tests" / "Fixtures" / "convergence-app", app)
    rules = app / "data_sources" / "mongodb-atlas" / "todo" / "Doc" / "rules.json"
    rules.write_text(rules.read_text().replace('"delete": true', '"delete": false'))
    with run_server(tmp_path_factory.mktemp("doc-server"), app_dir=app) as url:
        yield url


@pytest.fixture
def doc_device(doc_server: str, tmp_path: Path) -> Iterator[Any]:
    app = ferry.App(app_id="convergence", base_url=doc_server, base_directory=tmp_path, log_level=ferry.LogLevel.WARN)
    errors = ErrorLog()
    app.on_sync_error = errors
    user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
    session = app.open_synced(user, tmp_path / "docs.ferry", [DOC])
    session.wait_for_download(T)
    session.wait_for_subscriptions(session.update_subscriptions(lambda s: s.add("docs", "Doc", "rank <= 10")), T)

    class D:
        pass
    d = D()
    d.app, d.user, d.session, d.db, d.errors = app, user, session, session.database, errors  # type: ignore[attr-defined]
    d.sync = lambda: (session.wait_for_upload(T), session.wait_for_download(T))  # type: ignore[attr-defined]
    yield d
    app.close()
    d.db.close()  # type: ignore[attr-defined]


def test_a_reverted_create_keeps_its_lists(doc_device: Any) -> None:
    d = doc_device
    error, v = offline(d, [
        lambda db: db.create("Doc", {"_id": "doc-a", "ownerId": "someone else", "title": "A", "rank": 1}),
        lambda db: db.list_insert("Doc", "doc-a", "tags", 0, "x"),
        lambda db: db.list_insert("Doc", "doc-a", "tags", 1, "y"),
    ])
    r = error.compensating_writes[0].reverted
    assert r is not None and r.revert == ferry.RevertKind.REMOVED
    assert r.values["tags"] == ["x", "y"] and r.values["ownerId"] == "someone else"
    assert [(w.local_version, w.kind, w.index, w.value) for w in r.writes[1:]] == [
        (v[1], ferry.WriteKind.LIST_INSERT, 0, "x"), (v[2], ferry.WriteKind.LIST_INSERT, 1, "y")]
    assert d.db.get("Doc", "doc-a") is None
    # Overrides may be lists too.
    d.db.reapply_reverted(r, {"ownerId": d.user.id, "tags": ["x", "y", "z"]})
    d.sync()
    d.sync()
    doc = d.db.get("Doc", "doc-a")
    assert doc is not None and doc["tags"] == ["x", "y", "z"] and doc["ownerId"] == d.user.id
    assert len(d.errors.errors) == 1


def test_a_reverted_delete_is_restored_and_reported(doc_device: Any) -> None:
    d = doc_device
    with d.db.write():
        d.db.create("Doc", {"_id": "doc-b", "ownerId": d.user.id, "title": "keep", "rank": 2, "tags": ["t"]})
    d.sync()
    error, v = offline(d, [lambda db: db.delete("Doc", "doc-b")])
    r = error.compensating_writes[0].reverted
    assert r is not None and r.revert == ferry.RevertKind.RESTORED and r.values == {}
    assert r.writes == [ferry.LocalWrite(v[0], ferry.WriteKind.DELETE, None)]
    doc = d.db.get("Doc", "doc-b")
    assert doc is not None and doc["tags"] == ["t"]
