"""Write transactions: begin, commit, cancel, isolation between handles."""

from __future__ import annotations

import threading

import pytest

import ferry

from conftest import SCHEMA, TIMEOUT


def person(pk="a", name="A"):
    return {"_id": pk, "name": name}


def test_write_commits(db):
    assert not db.in_transaction
    with db.write() as same:
        assert same is db
        assert db.in_transaction
        db.create("Person", person())
    assert not db.in_transaction
    assert db.get("Person", "a") is not None


def test_nested_begin_is_an_error(db):
    with db.write():
        with pytest.raises(ferry.AlreadyInTransactionError):
            db.begin_write()
        with pytest.raises(ferry.AlreadyInTransactionError):
            with db.write():
                pass
        assert db.in_transaction  # the outer transaction is still open
        db.create("Person", person())
    assert db.get("Person", "a") is not None


def test_begin_on_a_second_handle_on_the_same_thread_is_an_error(db_path):
    a = ferry.Database.open(db_path, schema=SCHEMA)
    b = ferry.Database.open(db_path, schema=SCHEMA)
    with a.write():
        with pytest.raises(ferry.AlreadyInTransactionError):
            b.begin_write()  # waiting for a would deadlock
    with b.write():
        b.create("Person", person())
    a.close()
    b.close()


def test_writes_outside_a_transaction_are_errors(db):
    with db.write():
        db.create("Person", person())
        db.create("Item", {"_id": ferry.ObjectId.generate(), "itemName": "x"})
    item = db.query("Item")[0]["_id"]
    with pytest.raises(ferry.NotInTransactionError):
        db.create("Person", person("b"))
    with pytest.raises(ferry.NotInTransactionError):
        db.upsert("Person", person("b"))
    with pytest.raises(ferry.NotInTransactionError):
        db.set("Person", "a", "name", "Z")
    with pytest.raises(ferry.NotInTransactionError):
        db.add("Person", "a", "age", 1)
    with pytest.raises(ferry.NotInTransactionError):
        db.delete("Person", "a")
    with pytest.raises(ferry.NotInTransactionError):
        db.list_insert("Item", item, "tags", 0, "t")
    with pytest.raises(ferry.NotInTransactionError):
        db.list_set("Item", item, "tags", 0, "t")
    with pytest.raises(ferry.NotInTransactionError):
        db.list_erase("Item", item, "tags", 0)
    with pytest.raises(ferry.NotInTransactionError):
        db.list_clear("Item", item, "tags")
    with pytest.raises(ferry.NotInTransactionError):
        db.commit()
    with pytest.raises(ferry.NotInTransactionError):
        db.cancel()
    assert dict(db.get("Person", "a")) == {"_id": "a", "name": "A", "age": None}


def test_cancel_discards(db):
    with db.write():
        db.create("Person", person())
    db.begin_write()
    db.set("Person", "a", "name", "changed")
    db.create("Person", person("b"))
    db.delete("Person", "a")
    db.cancel()
    assert not db.in_transaction
    assert db.get("Person", "a")["name"] == "A"
    assert db.get("Person", "b") is None


def test_exception_in_write_block_cancels_and_propagates(db):
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with db.write():
            db.create("Person", person())
            raise Boom()
    assert not db.in_transaction
    assert db.get("Person", "a") is None
    # A Ferry error inside the block cancels the whole transaction too.
    with pytest.raises(ferry.DuplicatePrimaryKeyError):
        with db.write():
            db.create("Person", person("x"))
            db.create("Person", person("x"))
    assert db.get("Person", "x") is None


def test_reads_see_own_uncommitted_writes_others_see_last_commit(db_path):
    a = ferry.Database.open(db_path, schema=SCHEMA)
    b = ferry.Database.open(db_path, schema=SCHEMA)
    with a.write():
        a.create("Person", person("a", "first"))
    a.begin_write()
    a.set("Person", "a", "name", "second")
    a.create("Person", person("b"))
    assert a.get("Person", "a")["name"] == "second"
    assert len(a.query("Person")) == 2
    assert b.get("Person", "a")["name"] == "first"  # b does not see uncommitted writes
    assert b.get("Person", "b") is None
    assert len(b.query("Person")) == 1
    a.commit()
    assert b.get("Person", "a")["name"] == "second"  # the commit is visible to b at once
    assert len(b.query("Person")) == 2
    a.close()
    b.close()


def test_commit_is_visible_to_a_handle_in_another_thread(db_path):
    a = ferry.Database.open(db_path, schema=SCHEMA)
    seen = {}

    def reader():
        with ferry.Database.open(db_path, schema=SCHEMA) as b:
            seen["name"] = b.get("Person", "a")["name"]

    with a.write():
        a.create("Person", person("a", "committed"))
    t = threading.Thread(target=reader)
    t.start()
    t.join(TIMEOUT)
    assert seen == {"name": "committed"}
    a.close()


def test_a_transaction_belongs_to_the_handle_not_the_thread(db):
    db.begin_write()
    db.create("Person", person())
    errors = []

    def commit_elsewhere():
        try:
            assert db.in_transaction
            db.create("Person", person("b"))
            db.commit()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=commit_elsewhere)
    t.start()
    t.join(TIMEOUT)
    assert errors == []
    assert not db.in_transaction
    assert len(db.query("Person")) == 2


def test_second_writer_waits_for_the_first(db_path):
    a = ferry.Database.open(db_path, schema=SCHEMA)
    b = ferry.Database.open(db_path, schema=SCHEMA)
    began = threading.Event()
    errors = []

    def writer_b():
        try:
            b.begin_write()
            began.set()
            b.set("Person", "a", "name", "by b")
            b.commit()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            began.set()

    with a.write():
        a.create("Person", person("a", "by a"))
        t = threading.Thread(target=writer_b)
        t.start()
        # b must not get the write lock while a holds it.
        assert not began.wait(0.5)
    assert began.wait(TIMEOUT)
    t.join(TIMEOUT)
    assert errors == []
    assert a.get("Person", "a")["name"] == "by b"
    a.close()
    b.close()


def test_empty_transaction(db):
    with db.write():
        pass
    db.begin_write()
    db.cancel()
    assert db.history_count() == 0
