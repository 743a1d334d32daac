"""Reopening with another schema: additive changes migrate, breaking ones are refused and
leave the file unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

V1 = [
    ObjectSchema(
        "Task",
        {
            "_id": Property(Type.INT, primary_key=True),
            "title": Property(Type.STRING),
            "note": Property(Type.STRING, optional=True),
            "tags": Property(Type.STRING, list=True),
            "size": Property(Type.INT),
        },
    )
]


def v1_with(**changes: Property | None) -> list[ObjectSchema]:
    props = dict(V1[0].properties)
    for name, prop in changes.items():
        if prop is None:
            props.pop(name)
        else:
            props[name] = prop
    return [ObjectSchema("Task", props)]


def snapshot(directory: Path) -> dict[str, str]:
    """The content of every database file (main file, WAL) in the directory."""
    out = {}
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.endswith((".lock", "-shm")):
            out[f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


@pytest.fixture
def v1_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.ferry"
    with ferry.Database.open(path, schema=V1) as db:
        with db.write():
            db.create("Task", {"_id": 1, "title": "one", "note": "n", "tags": ["a"], "size": 3})
            db.create("Task", {"_id": 2, "title": "two"})
    return path


def test_additive_changes_migrate(v1_file):
    v2 = v1_with(
        done=Property(Type.BOOL),  # a new required property: existing objects get false
        due=Property(Type.TIMESTAMP, optional=True),  # a new optional one: null
        title=Property(Type.STRING, indexed=True),  # a new index
    ) + [ObjectSchema("Tag", {"_id": Property(Type.STRING, primary_key=True)})]  # a new class
    with ferry.Database.open(v1_file, schema=v2) as db:
        assert db.schema == v2
        one = db.get("Task", 1)
        assert dict(one) == {
            "_id": 1, "title": "one", "note": "n", "tags": ["a"], "size": 3,
            "done": False, "due": None,
        }
        assert [o["_id"] for o in db.query("Task", "title == $0", "two")] == [2]
        with db.write():
            db.create("Tag", {"_id": "t"})
            db.set("Task", 2, "done", True)
        assert db.verify_history()
    # Reopening with the stored schema gives the migrated one.
    with ferry.Database.open(v1_file) as db:
        assert db.schema == v2
        assert db.get("Task", 2)["done"] is True


def test_dropping_an_index_or_an_optional_property_migrates(v1_file):
    with ferry.Database.open(v1_file, schema=v1_with(title=Property(Type.STRING, indexed=True))):
        pass
    v3 = v1_with(note=None)  # the index goes too
    with ferry.Database.open(v1_file, schema=v3) as db:
        assert db.schema == v3
        assert dict(db.get("Task", 1)) == {"_id": 1, "title": "one", "tags": ["a"], "size": 3}
        with pytest.raises(ferry.QueryError):
            db.query("Task", "note == nil")
        assert db.verify_history()


def test_reopening_with_the_same_schema(v1_file):
    with ferry.Database.open(v1_file, schema=V1) as db:
        assert db.schema == V1
        assert db.history_count() == 1
        assert len(db.query("Task")) == 2


BREAKING = {
    "changed type": v1_with(size=Property(Type.STRING)),
    "int to double": v1_with(size=Property(Type.DOUBLE)),
    "required to optional": v1_with(size=Property(Type.INT, optional=True)),
    "optional to required": v1_with(note=Property(Type.STRING)),
    "list to single": v1_with(tags=Property(Type.STRING)),
    "single to list": v1_with(title=Property(Type.STRING, list=True)),
    "dropped required property": v1_with(size=None),
    "changed primary key type": v1_with(_id=Property(Type.STRING, primary_key=True)),
    "changed primary key": [
        ObjectSchema(
            "Task",
            {
                **{k: v for k, v in V1[0].properties.items() if k != "_id"},
                "_id": Property(Type.OBJECT_ID, primary_key=True),
            },
        )
    ],
}


@pytest.mark.parametrize("case", list(BREAKING))
def test_breaking_change_is_refused_and_the_file_is_untouched(v1_file, case):
    before = snapshot(v1_file.parent)
    with pytest.raises(ferry.SchemaMismatchError) as info:
        ferry.Database.open(v1_file, schema=BREAKING[case])
    assert info.value.code == -15 and info.value.message
    assert snapshot(v1_file.parent) == before
    with ferry.Database.open(v1_file, schema=V1) as db:
        assert db.schema == V1
        assert dict(db.get("Task", 1)) == {
            "_id": 1, "title": "one", "note": "n", "tags": ["a"], "size": 3,
        }
        assert len(db.query("Task")) == 2
        assert db.verify_history()


def test_breaking_change_message_names_the_property(v1_file):
    with pytest.raises(ferry.SchemaMismatchError, match="size"):
        ferry.Database.open(v1_file, schema=BREAKING["changed type"])


def test_breaking_change_while_another_handle_has_the_file_open(v1_file):
    with ferry.Database.open(v1_file, schema=V1) as db:
        with pytest.raises(ferry.SchemaMismatchError):
            ferry.Database.open(v1_file, schema=BREAKING["changed type"])
        assert db.get("Task", 1)["size"] == 3


def test_not_a_ferry_file(tmp_path):
    path = tmp_path / "garbage.ferry"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ferry.CorruptError):
        ferry.Database.open(path, schema=V1)
    assert path.read_bytes() == b"this is not a database at all" * 100


def test_an_sqlite_file_that_is_not_ferry(tmp_path):
    import sqlite3

    path = tmp_path / "plain.sqlite"
    con = sqlite3.connect(path)
    con.execute("create table t (x)")
    con.execute("insert into t values (1)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(ferry.CorruptError):
        ferry.Database.open(path, schema=V1)
    assert path.read_bytes() == before
