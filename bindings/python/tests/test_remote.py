"""User.remote_find and User.remote_count (issue 24): the device asks the server for its data
online, with the user's rules, without subscribing or storing it.

Against ferry-server on Tests/Fixtures/data-api-app (the seeds' Item app with the Data API on and a
Reading class with a property of every value type; owner-only rules). The oracle is what the
test's two users wrote; the Data API off is a server on examples/item-app."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import ferry
from ferry import ObjectSchema, Property, Type
from test_sync import APP_ID, REPO, T, run_server

DATA_API_APP = REPO / "Tests" / "Fixtures" / "data-api-app"

ITEM = ObjectSchema(
    "Item",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING),
        "itemName": Property(Type.STRING),
        "complexity": Property(Type.INT),
    },
)

READING = ObjectSchema(
    "Reading",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING),
        "label": Property(Type.STRING),
        "value": Property(Type.INT),
        "ratio": Property(Type.DOUBLE),
        "taken": Property(Type.TIMESTAMP),
        "blob": Property(Type.BINARY),
        "ref": Property(Type.UUID, optional=True),
        "note": Property(Type.STRING, optional=True),
        "samples": Property(Type.INT, list=True),
    },
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_server(tmp_path_factory.mktemp("ferry-server"), app_dir=DATA_API_APP) as url:
        yield url


class Device:
    """An App, an anonymous user and its synced database subscribed to its own objects."""

    def __init__(self, url: str, directory: Path) -> None:
        directory.mkdir()
        self.app = ferry.App(app_id=APP_ID, base_url=url, base_directory=directory, log_level=ferry.LogLevel.WARN)
        self.user = self.app.log_in(ferry.Credentials.anonymous(), timeout=T)
        self.session = self.app.open_synced(self.user, directory / "db.ferry", [ITEM, READING])
        self.db = self.session.database
        self.session.wait_for_download(T)
        mine = f"ownerId == '{self.user.id}'"
        version = self.session.update_subscriptions(
            lambda s: (s.add("items", "Item", mine), s.add("readings", "Reading", mine)))
        self.session.wait_for_subscriptions(version, T)

    def close(self) -> None:
        self.app.close()
        self.db.close()


@pytest.fixture
def devices(server: str, tmp_path: Path) -> Iterator[tuple[Device, Device]]:
    a, b = Device(server, tmp_path / "a"), Device(server, tmp_path / "b")
    yield a, b
    a.close()
    b.close()


def test_find_and_count_with_the_users_rules(devices: tuple[Device, Device]) -> None:
    a, b = devices
    ids = [ferry.ObjectId.generate() for _ in range(30)]
    taken = dt.datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=dt.timezone.utc)
    reading = {
        "_id": ferry.ObjectId.generate(), "ownerId": a.user.id, "label": 'quote " and \n newline, été ⛵',
        "value": -(2**63), "ratio": 0.1, "taken": taken, "blob": b"\x00\xff\x01", "ref": uuid.UUID(int=2**128 - 1),
        "note": None, "samples": [2**63 - 1, 0, -1],
    }
    with a.db.write():
        for i, pk in enumerate(ids):
            a.db.create("Item", {"_id": pk, "ownerId": a.user.id, "itemName": f"item {i}", "complexity": i})
        a.db.create("Reading", reading)
    with b.db.write():
        b.db.create("Item", {"_id": ferry.ObjectId.generate(), "ownerId": b.user.id, "itemName": "b's", "complexity": 5})
    a.session.wait_for_upload(T)
    b.session.wait_for_upload(T)
    history = a.db.history_count()

    found = a.user.remote_find("Item", limit=1000)
    assert [d["_id"] for d in found] == ids
    assert found[7] == {"_id": ids[7], "ownerId": a.user.id, "itemName": "item 7", "complexity": 7}
    some = a.user.remote_find("Item", "complexity >= $0 AND itemName != $1", 25, "item 26", limit=3)
    assert [d["complexity"] for d in some] == [25, 27, 28]
    assert a.user.remote_count("Item") == 30
    assert a.user.remote_count("Item", "complexity < $0", 10) == 10
    assert b.user.remote_count("Item") == 1
    assert [d["itemName"] for d in b.user.remote_find("Item")] == ["b's"]
    assert b.user.remote_find("Item", "_id == $0", ids[0]) == []  # A's: not readable by B

    (got,) = a.user.remote_find("Reading", "value == $0", -(2**63))
    assert got == reading  # every type as written: Int64's ends, the escapes, the date, bytes, UUID, null, list
    assert a.user.remote_count("Reading", "taken < $0", dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) == 1

    async def both() -> tuple[list[dict[str, Any]], int]:
        return (await a.user.async_remote_find("Item", "complexity == $0", 3),
                await a.user.async_remote_count("Item", "complexity > $0", 3))

    docs, n = asyncio.run(both())
    assert [d["_id"] for d in docs] == [ids[3]] and n == 26
    # nothing was stored or subscribed on the device
    assert a.db.history_count() == history
    assert len(a.db.query("Item")) == 30
    assert [s.name for s in a.session.subscriptions] == ["items", "readings"]


def test_errors(devices: tuple[Device, Device], tmp_path: Path) -> None:
    a, _ = devices
    with pytest.raises(ferry.NoSuchClassError, match="ClassNotFound"):
        a.user.remote_find("Nope")
    with pytest.raises(ferry.QueryError, match="InvalidParameter"):
        a.user.remote_count("Item", "complexity >>> 1")
    with pytest.raises(ferry.QueryError):
        a.user.remote_find("Item", "complexity == $1", 1)
    with pytest.raises(ferry.InvalidArgumentError, match="limit"):
        a.user.remote_find("Item", limit=0)
    with pytest.raises(TypeError):
        a.user.remote_find("Item", "complexity == $0", object())
    # the Data API off: the server's refusal
    (tmp_path / "off").mkdir()
    with run_server(tmp_path / "off") as url:
        app = ferry.App(app_id=APP_ID, base_url=url, base_directory=tmp_path, log_level=ferry.LogLevel.WARN)
        try:
            user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
            with pytest.raises(ferry.SyncServerError, match="DataAPIDisabled"):
                user.remote_find("Item")
            app.log_out(user, timeout=T)
            with pytest.raises(ferry.AuthError, match="logged out"):
                user.remote_count("Item")
        finally:
            app.close()
