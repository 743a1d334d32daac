"""Create, upsert, set, add, delete and get."""

from __future__ import annotations

import uuid

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

from conftest import new_item


def test_create_and_get(db):
    oid = ferry.ObjectId.generate()
    with db.write():
        pk = db.create("Item", {"_id": oid, "ownerId": "me", "itemName": "x", "complexity": 3})
    assert pk == oid
    obj = db.get("Item", oid)
    assert isinstance(obj, ferry.Object)
    assert obj["itemName"] == "x" and obj["complexity"] == 3
    assert obj.primary_key == oid
    assert obj.get("nope", "default") == "default"
    with pytest.raises(KeyError):
        obj["nope"]
    d = dict(obj)
    assert d["ownerId"] == "me"
    assert d["tags"] == [] and d["watchers"] == [] and d["owner"] is None
    assert "Item" in repr(obj)
    assert obj == d  # a Mapping compares as a dict


def test_get_missing_is_none(db):
    assert db.get("Item", ferry.ObjectId.generate()) is None
    assert db.get("Person", "nobody") is None


def test_get_with_a_key_of_the_wrong_type(db):
    with pytest.raises(ferry.WrongTypeError):
        db.get("Item", "not an object id")
    with pytest.raises(ferry.WrongTypeError):
        db.get("Person", 12)


def test_duplicate_primary_key(db):
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
        with pytest.raises(ferry.DuplicatePrimaryKeyError):
            db.create("Person", {"_id": "a", "name": "again"})
    assert db.get("Person", "a")["name"] == "A"


def test_create_needs_a_primary_key(db):
    with db.write():
        with pytest.raises(ferry.InvalidArgumentError):
            db.create("Person", {"name": "no key"})


def test_create_with_a_wrong_type(db):
    with db.write():
        with pytest.raises(ferry.WrongTypeError):
            db.create("Item", new_item(complexity="high"))
        with pytest.raises(ferry.WrongTypeError):
            db.create("Item", new_item(itemName=5))
        with pytest.raises(ferry.WrongTypeError):
            db.create("Item", new_item(done=1))
        with pytest.raises(ferry.WrongTypeError):
            db.create("Item", {"_id": "not an oid"})
        with pytest.raises(ferry.WrongTypeError):
            db.create("Item", new_item(itemName=None))  # required
        with pytest.raises(ferry.NoSuchPropertyError):
            db.create("Item", new_item(nope=1))
    assert len(db.query("Item")) == 0


def test_upsert(db):
    with db.write():
        assert db.upsert("Person", {"_id": "a", "name": "A", "age": 1}) == "a"
    assert dict(db.get("Person", "a")) == {"_id": "a", "name": "A", "age": 1}
    with db.write():
        db.upsert("Person", {"_id": "a", "age": 2})  # only the given properties change
    assert dict(db.get("Person", "a")) == {"_id": "a", "name": "A", "age": 2}
    assert len(db.query("Person")) == 1


def test_upsert_with_identical_values_records_nothing(db):
    with db.write():
        db.upsert("Person", {"_id": "a", "name": "A", "age": 1})
    before = db.history_count()
    with db.write():
        db.upsert("Person", {"_id": "a", "name": "A", "age": 1})
    assert db.history_count() == before
    with db.write():
        db.upsert("Person", {"_id": "a", "name": "A", "age": 5})
    assert db.history_count() == before + 1


def test_set_and_update(db):
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
        db.set("Person", "a", "age", 40)
        db.update("Person", "a", {"name": "Ann", "age": None})
    assert dict(db.get("Person", "a")) == {"_id": "a", "name": "Ann", "age": None}


def test_set_errors(db):
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
        with pytest.raises(ferry.NotFoundError) as info:
            db.set("Person", "b", "name", "B")
        assert isinstance(info.value, KeyError)
        with pytest.raises(ferry.WrongTypeError):
            db.set("Person", "a", "age", "old")
        with pytest.raises(ferry.WrongTypeError):
            db.set("Person", "a", "name", None)  # null for a required property
        with pytest.raises(ferry.NoSuchPropertyError):
            db.set("Person", "a", "nope", 1)
        with pytest.raises(ferry.InvalidArgumentError):
            db.set("Person", "a", "_id", "z")  # not the primary key
        db.create("Item", {"_id": ferry.ObjectId("65f1a2b3c4d5e6f708192a3b")})
        with pytest.raises(ferry.WrongTypeError):
            db.set("Item", ferry.ObjectId("65f1a2b3c4d5e6f708192a3b"), "tags", "x")  # a list
    assert dict(db.get("Person", "a")) == {"_id": "a", "name": "A", "age": None}


def test_add(db):
    with db.write():
        pk = db.create("Item", new_item(complexity=5))
        db.add("Item", pk, "complexity", 3)
        db.add("Item", pk, "complexity", -10)
        db.add("Item", pk, "counter")  # a null optional counter counts as 0
    obj = db.get("Item", pk)
    assert obj["complexity"] == -2
    assert obj["counter"] == 1


def test_add_errors(db):
    with db.write():
        pk = db.create("Item", new_item(complexity=2**63 - 2))
        with pytest.raises(ferry.OutOfRangeError):
            db.add("Item", pk, "complexity", 2)
        db.add("Item", pk, "counter", -(2**63))
        with pytest.raises(ferry.OutOfRangeError):
            db.add("Item", pk, "counter", -1)
        with pytest.raises(ferry.WrongTypeError):
            db.add("Item", pk, "itemName", 1)
        with pytest.raises(ferry.WrongTypeError):
            db.add("Item", pk, "price", 1)
        with pytest.raises(ferry.NotFoundError):
            db.add("Item", ferry.ObjectId.generate(), "complexity", 1)
        with pytest.raises(TypeError):
            db.add("Item", pk, "complexity", 1.5)  # type: ignore[arg-type]
        with pytest.raises(OverflowError):
            db.add("Item", pk, "complexity", 2**64)
    obj = db.get("Item", pk)
    assert obj["complexity"] == 2**63 - 2
    assert obj["counter"] == -(2**63)


def test_delete(db):
    with db.write():
        pk = db.create("Item", new_item(itemName="doomed"))
    with db.write():
        db.delete("Item", pk)
        assert db.get("Item", pk) is None
        with pytest.raises(ferry.NotFoundError):
            db.delete("Item", pk)
    assert db.get("Item", pk) is None
    with db.write():  # the key may be used again
        db.create("Item", {"_id": pk, "itemName": "reborn"})
    assert db.get("Item", pk)["itemName"] == "reborn"


@pytest.mark.parametrize(
    "pk_type,key",
    [
        (Type.INT, -5),
        (Type.STRING, "ключ"),
        (Type.UUID, uuid.uuid4()),
        (Type.OBJECT_ID, ferry.ObjectId("65f1a2b3c4d5e6f708192a3b")),
    ],
)
def test_primary_key_types(tmp_path, pk_type, key):
    schema = [ObjectSchema("K", {"_id": Property(pk_type, primary_key=True), "v": Property(Type.INT)})]
    with ferry.Database.open(tmp_path / "k.ferry", schema=schema) as db:
        with db.write():
            db.create("K", {"_id": key, "v": 1})
            db.add("K", key, "v", 1)
        assert db.get("K", key)["v"] == 2
        assert [o.primary_key for o in db.query("K", "_id == $0", key)] == [key]
        with db.write():
            db.delete("K", key)
        assert db.get("K", key) is None


def test_objects_are_snapshots(db):
    with db.write():
        db.create("Person", {"_id": "a", "name": "before"})
    snap = db.get("Person", "a")
    with db.write():
        db.set("Person", "a", "name", "after")
    assert snap["name"] == "before"
    assert db.get("Person", "a")["name"] == "after"
