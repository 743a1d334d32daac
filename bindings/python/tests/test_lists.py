"""List properties: insert, set, erase, clear."""

from __future__ import annotations

import pytest

import ferry

from conftest import new_item


@pytest.fixture
def item(db):
    with db.write():
        return db.create("Item", new_item(itemName="listy"))


def tags(db, pk):
    return db.get("Item", pk)["tags"]


def test_list_operations(db, item):
    with db.write():
        db.list_insert("Item", item, "tags", 0, "b")
        db.list_insert("Item", item, "tags", 0, "a")
        db.list_insert("Item", item, "tags", 2, "d")  # index == size appends
        db.list_insert("Item", item, "tags", 2, "c")
        assert tags(db, item) == ["a", "b", "c", "d"]
        db.list_set("Item", item, "tags", 1, "B")
        db.list_erase("Item", item, "tags", 0)
        db.list_append("Item", item, "tags", "e")
    assert tags(db, item) == ["B", "c", "d", "e"]
    with db.write():
        db.list_erase("Item", item, "tags", 3)
        db.list_insert("Item", item, "tags", 1, "B")  # duplicates are fine
    assert tags(db, item) == ["B", "B", "c", "d"]
    with db.write():
        db.list_clear("Item", item, "tags")
    assert tags(db, item) == []
    with db.write():
        db.list_clear("Item", item, "tags")  # clearing an empty list is fine
    assert tags(db, item) == []


def test_out_of_range(db, item):
    with db.write():
        db.list_insert("Item", item, "tags", 0, "a")
        with pytest.raises(ferry.OutOfRangeError) as info:
            db.list_insert("Item", item, "tags", 2, "x")
        assert isinstance(info.value, IndexError)
        with pytest.raises(ferry.OutOfRangeError):
            db.list_set("Item", item, "tags", 1, "x")
        with pytest.raises(ferry.OutOfRangeError):
            db.list_erase("Item", item, "tags", 1)
        with pytest.raises(ferry.OutOfRangeError):
            db.list_erase("Item", item, "tags", 2**64 - 1)
        with pytest.raises(ferry.OutOfRangeError):
            db.list_set("Item", item, "tags", -1, "x")
    assert tags(db, item) == ["a"]


def test_wrong_types(db, item):
    with db.write():
        with pytest.raises(ferry.WrongTypeError):
            db.list_insert("Item", item, "tags", 0, 5)
        with pytest.raises((ferry.WrongTypeError, ferry.InvalidArgumentError)):
            db.list_insert("Item", item, "tags", 0, None)  # lists are never optional
        with pytest.raises(ferry.WrongTypeError):
            db.list_insert("Item", item, "itemName", 0, "x")  # not a list
        with pytest.raises(ferry.WrongTypeError):
            db.list_clear("Item", item, "complexity")
        with pytest.raises(ferry.WrongTypeError):
            db.list_erase("Item", item, "itemName", 0)
        with pytest.raises(ferry.WrongTypeError):
            db.list_set("Item", item, "done", 0, True)
    assert tags(db, item) == []


def test_missing_object(db):
    with db.write():
        missing = ferry.ObjectId.generate()
        with pytest.raises(ferry.NotFoundError):
            db.list_insert("Item", missing, "tags", 0, "x")
        with pytest.raises(ferry.NotFoundError):
            db.list_clear("Item", missing, "tags")
        with pytest.raises(ferry.NotFoundError):
            db.list_append("Item", missing, "tags", "x")


def test_create_with_lists_and_replace_by_set(db):
    with db.write():
        pk = db.create("Item", new_item(tags=["x", "y"]))
    assert tags(db, pk) == ["x", "y"]
    with db.write():
        db.set("Item", pk, "tags", ["z"])
    assert tags(db, pk) == ["z"]
    with db.write():
        db.upsert("Item", {"_id": pk, "tags": ("p", "q")})
    assert tags(db, pk) == ["p", "q"]


def test_the_c_api_refuses_lists_in_create(db):
    import ctypes

    from ferry import _native
    from ferry.errors import check

    lib = _native.lib()
    meta = db._class("Item")
    values = (_native.PropertyValue * 2)()
    keep = ferry.values.KeepAlive()
    values[0].property = meta.by_name["_id"].key
    ferry.values.to_native(ferry.ObjectId.generate(), values[0].value, keep)
    values[1].property = meta.by_name["tags"].key
    ferry.values.to_native("a", values[1].value, keep)
    with db.write():
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_object_create(db._handle, meta.key, values, 2))
        # The same property given twice.
        values[1].property = meta.by_name["_id"].key
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_object_create(db._handle, meta.key, values, 2))
    assert len(db.query("Item")) == 0
    out = ctypes.POINTER(_native.Value)()
    count = ctypes.c_size_t()
    with pytest.raises(ferry.InvalidHandleError):
        check(lib.ferry_object_get_list(ctypes.byref(out), ctypes.byref(count), None, 0))


def test_list_changes_are_atomic_with_the_transaction(db, item):
    with pytest.raises(RuntimeError):
        with db.write():
            db.list_insert("Item", item, "tags", 0, "a")
            raise RuntimeError
    assert tags(db, item) == []


def test_long_list(db, item):
    with db.write():
        for i in range(500):
            db.list_insert("Item", item, "tags", i, str(i))
    assert tags(db, item) == [str(i) for i in range(500)]
    with db.write():
        for _ in range(250):
            db.list_erase("Item", item, "tags", 0)
    assert tags(db, item) == [str(i) for i in range(250, 500)]
