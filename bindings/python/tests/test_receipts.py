"""Write receipts through the Python binding: local semantics without a server, and against a
real ferry-server (the module-scoped ``server`` of test_sync.py's helpers): local, uploaded,
acknowledged, rejected with the compensating write, awaited blocking and with asyncio, and
after a restart. Waits have timeouts; nothing sleeps to hope."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import pytest

import ferry
from test_sync import APP_ID, ITEM, T, Device, run_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_server(tmp_path_factory.mktemp("ferry-server")) as url:
        yield url


def _item(db: ferry.Database, owner: str, complexity: int) -> tuple[ferry.ObjectId, int]:
    pk = ferry.ObjectId.generate()
    with db.write():
        db.create("Item", {"_id": pk, "ownerId": owner, "itemName": "x", "complexity": complexity})
    return pk, db.last_receipt


def test_local_receipts(tmp_path: Path) -> None:
    with ferry.Database.open(tmp_path / "local.ferry", schema=[ITEM]) as db:
        _, a = _item(db, "me", 1)
        db.begin_write()
        db.create("Item", {"_id": ferry.ObjectId.generate(), "ownerId": "me", "itemName": "y", "complexity": 2})
        b = db.commit()
        assert 0 < a < b
        assert db.receipt_state(a) == ferry.ReceiptState.LOCAL
        assert db.read_receipt(b) == ferry.Receipt(b, ferry.ReceiptState.LOCAL, [])
        db.begin_write()
        assert db.commit() == 0
        assert db.receipt_state(0) == ferry.ReceiptState.ACKNOWLEDGED
        with pytest.raises(ferry.NotFoundError):
            db.receipt_state(b + 100)
        with pytest.raises(ferry.InvalidArgumentError):
            db.receipt_state(-1)
        with pytest.raises(ferry.InvalidArgumentError):
            db.read_receipt(1 << 64)


def test_receipts_reach_acknowledged_and_rejected(server: str, tmp_path: Path) -> None:
    d = Device(server, tmp_path, ferry.Credentials.anonymous())
    try:
        d.subscribe("complexity <= 4")
        d.session.suspend()
        _, good = _item(d.db, d.user.id, 1)
        bad_pk, bad = _item(d.db, d.user.id, 7)  # outside the view: reverted
        assert d.db.receipt_state(good) == ferry.ReceiptState.LOCAL
        d.session.resume()
        assert d.session.wait_for_receipt(good, ferry.ReceiptState.UPLOADED, T).state >= ferry.ReceiptState.UPLOADED
        assert d.session.wait_for_receipt(good, timeout=T) == ferry.Receipt(good, ferry.ReceiptState.ACKNOWLEDGED, [])
        rejected = asyncio.run(d.session.async_wait_for_receipt(bad, timeout=T))
        assert rejected.state == ferry.ReceiptState.REJECTED
        assert rejected.compensating_writes == [ferry.CompensatingWrite(
            "Item", bad_pk, f'write to "{bad_pk}" in table "Item" not allowed; object is outside of the current query view')]
        assert d.db.read_receipt(bad) == rejected
        with pytest.raises(ferry.NotFoundError):
            d.session.wait_for_receipt(bad + 1000, timeout=T)
    finally:
        d.close()


def test_receipts_survive_a_restart(server: str, tmp_path: Path) -> None:
    d = Device(server, tmp_path, ferry.Credentials.anonymous())
    d.subscribe("complexity <= 4")
    d.session.suspend()
    _, r = _item(d.db, d.user.id, 1)
    assert d.db.receipt_state(r) == ferry.ReceiptState.LOCAL
    directory = d.dir
    d.close()

    app = ferry.App(app_id=APP_ID, base_url=server, base_directory=directory, log_level=ferry.LogLevel.WARN)
    try:
        user = app.current_user
        assert user is not None
        session = app.open_synced(user, directory / "items.ferry", [ITEM])
        db: Any = session.database
        assert session.wait_for_receipt(r, timeout=T).state == ferry.ReceiptState.ACKNOWLEDGED
        assert db.receipt_state(r) == ferry.ReceiptState.ACKNOWLEDGED
        session.close()
    finally:
        app.close()
