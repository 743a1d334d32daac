"""Links: read and written as the target's primary key."""

from __future__ import annotations

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

from conftest import new_item


@pytest.fixture
def people(db):
    with db.write():
        db.create("Person", {"_id": "ann", "name": "Ann"})
        db.create("Person", {"_id": "bob", "name": "Bob"})


def test_link(db, people):
    with db.write():
        pk = db.create("Item", new_item(itemName="x", owner="ann"))
    assert db.get("Item", pk)["owner"] == "ann"
    with db.write():
        db.set("Item", pk, "owner", "bob")
    assert db.get("Item", pk)["owner"] == "bob"
    with db.write():
        db.set("Item", pk, "owner", None)
    assert db.get("Item", pk)["owner"] is None


def test_list_of_links(db, people):
    with db.write():
        pk = db.create("Item", new_item(watchers=["ann", "bob"]))
        db.list_insert("Item", pk, "watchers", 1, "ann")
    assert db.get("Item", pk)["watchers"] == ["ann", "ann", "bob"]
    with db.write():
        db.list_erase("Item", pk, "watchers", 0)
        db.list_set("Item", pk, "watchers", 1, "ann")
    assert db.get("Item", pk)["watchers"] == ["ann", "ann"]


def test_link_with_a_key_of_the_wrong_type(db, people):
    with db.write():
        pk = db.create("Item", new_item())
        with pytest.raises(ferry.WrongTypeError):
            db.set("Item", pk, "owner", 42)
        with pytest.raises(ferry.WrongTypeError):
            db.list_insert("Item", pk, "watchers", 0, ferry.ObjectId.generate())


def test_query_on_a_link(db, people):
    with db.write():
        a = db.create("Item", new_item(itemName="a", owner="ann"))
        b = db.create("Item", new_item(itemName="b", owner="bob"))
        c = db.create("Item", new_item(itemName="c"))
    assert [o["_id"] for o in db.query("Item", "owner == $0", "ann")] == [a]
    assert sorted(o["itemName"] for o in db.query("Item", "owner != $0", "ann")) == ["b", "c"]
    assert [o["_id"] for o in db.query("Item", "owner == nil")] == [c]
    assert [o["_id"] for o in db.query("Item", 'owner IN {"bob", "nobody"}')] == [b]


def test_links_with_other_key_types(tmp_path):
    schema = [
        ObjectSchema("Node", {
            "_id": Property(Type.INT, primary_key=True),
            "next": Property(Type.LINK, link_target="Node", optional=True),
            "tagged": Property(Type.LINK, link_target="Tag", list=True),
        }),
        ObjectSchema("Tag", {"_id": Property(Type.OBJECT_ID, primary_key=True)}),
    ]
    t = ferry.ObjectId.generate()
    with ferry.Database.open(tmp_path / "l.ferry", schema=schema) as db:
        with db.write():
            db.create("Tag", {"_id": t})
            db.create("Node", {"_id": 1})
            db.create("Node", {"_id": 2, "next": 1, "tagged": [t]})  # a self-referencing class
        assert dict(db.get("Node", 2)) == {"_id": 2, "next": 1, "tagged": [t]}
        assert db.schema == schema


def test_links_are_always_nullable_and_targets_need_not_exist(tmp_path):
    schema = [
        ObjectSchema("A", {
            "_id": Property(Type.INT, primary_key=True),
            "b": Property(Type.LINK, link_target="B"),  # not marked optional
        }),
        ObjectSchema("B", {"_id": Property(Type.STRING, primary_key=True)}),
    ]
    with ferry.Database.open(tmp_path / "n.ferry", schema=schema) as db:
        with db.write():
            db.create("A", {"_id": 1})
            db.create("A", {"_id": 2, "b": "nobody"})  # no B with that key
            db.create("A", {"_id": 3, "b": "x"})
            db.set("A", 3, "b", None)
        assert db.get("A", 1)["b"] is None
        assert db.get("A", 2)["b"] == "nobody"
        assert db.get("A", 3)["b"] is None
        assert [o["_id"] for o in db.query("A", "b == nil SORT(_id ASC)")] == [1, 3]
        assert db.verify_history()
