"""Change notifications on objects and queries, delivered on the loop thread or polled."""

from __future__ import annotations

import ctypes
import logging
import select
import threading

import pytest

import ferry
from ferry import _native
from ferry.database import _registrations
from ferry.errors import check

from conftest import SCHEMA, TIMEOUT, Collector, new_item


def create(db, **values):
    with db.write():
        return db.create("Item", new_item(**values))


# --- Query notifications (loop delivery) ----------------------------------------------------


def test_query_notification_reports_inserted_modified_deleted(db, collector):
    token = db.observe_query("Item", "complexity <= 4", callback=collector)
    main = threading.get_ident()

    a = create(db, itemName="a", complexity=2)
    first = collector.wait_merged(lambda m: a in m.inserted)
    assert first.inserted == [a] and not first.deleted and not first.modified
    assert collector.changes[0].inserted == [a]  # no initial call at registration
    assert all(t != main for t in collector.threads)  # Ferry's loop thread

    with db.write():
        db.set("Item", a, "itemName", "renamed")
    merged = collector.wait_merged(lambda m: a in m.modified)
    assert merged.modified == [a]
    assert merged.modified_properties == ["itemName"]

    with db.write():
        db.set("Item", a, "complexity", 9)  # leaves the results
    collector.wait_merged(lambda m: a in m.deleted)

    with db.write():
        db.set("Item", a, "complexity", 1)  # enters again
    collector.wait_merged(lambda m: m.inserted.count(a) == 2)

    with db.write():
        db.delete("Item", a)
    collector.wait_merged(lambda m: m.deleted.count(a) == 2)
    token.close()
    assert not token.active


def test_changes_outside_the_query_are_not_reported(db, collector):
    db.observe_query("Item", "complexity <= 4", callback=collector)
    outside = create(db, complexity=10)
    with db.write():
        db.set("Item", outside, "itemName", "still outside")
    with db.write():
        db.create("Person", {"_id": "p", "name": "other class"})
    inside = create(db, complexity=1)
    changes = collector.wait_merged(lambda m: inside in m.inserted)
    assert changes.inserted == [inside]
    assert not changes.deleted and not changes.modified
    for c in collector.changes:
        assert not c.empty


def test_modified_properties_are_the_union(db, collector):
    a = create(db, complexity=1)
    b = create(db, complexity=2)
    db.observe_query("Item", "complexity <= 4", callback=collector)
    with db.write():
        db.set("Item", a, "itemName", "x")
        db.set("Item", b, "price", 2.0)
        db.list_insert("Item", b, "tags", 0, "t")
    merged = collector.wait_merged(lambda m: {a, b} <= set(m.modified))
    assert sorted(merged.modified_properties) == ["itemName", "price", "tags"]
    assert sorted(map(str, merged.modified)) == sorted(map(str, [a, b]))


def test_one_transaction_with_many_changes(db, collector):
    db.observe_query("Item", "TRUEPREDICATE", callback=collector)
    with db.write():
        keys = [db.create("Item", new_item(complexity=i)) for i in range(20)]
    merged = collector.wait_merged(lambda m: len(m.inserted) >= 20)
    assert sorted(map(str, merged.inserted)) == sorted(map(str, keys))


def test_query_with_arguments_sort_and_limit(db, collector):
    db.observe_query(
        "Item", "ownerId == $0 SORT(complexity ASC) LIMIT(2)", "me", callback=collector
    )
    five = create(db, ownerId="me", complexity=5)
    collector.wait_merged(lambda m: five in m.inserted)
    create(db, ownerId="someone else", complexity=0)
    three = create(db, ownerId="me", complexity=3)
    collector.wait_merged(lambda m: three in m.inserted)
    one = create(db, ownerId="me", complexity=1)
    merged = collector.wait_merged(lambda m: one in m.inserted and five in m.deleted)
    assert set(map(str, merged.inserted)) == {str(five), str(three), str(one)}


def test_notifications_across_handles(db_path, collector):
    observer = ferry.Database.open(db_path, schema=SCHEMA)
    writer = ferry.Database.open(db_path, schema=SCHEMA)
    observer.observe_query("Item", "TRUEPREDICATE", callback=collector)
    pk = create(writer, itemName="from the other handle")
    collector.wait_merged(lambda m: pk in m.inserted)
    writer.close()
    observer.close()


def test_in_memory_notifications(mem_db, mem_id, collector):
    mem_db.observe_query("Item", "TRUEPREDICATE", callback=collector)
    with ferry.Database.open(in_memory=mem_id, schema=SCHEMA) as other:
        pk = create(other)
    collector.wait_merged(lambda m: pk in m.inserted)


def test_cancelled_transaction_is_not_reported(db, collector):
    db.observe_query("Item", "TRUEPREDICATE", callback=collector)
    db.begin_write()
    cancelled = db.create("Item", new_item())
    db.cancel()
    pk = create(db)
    merged = collector.wait_merged(lambda m: pk in m.inserted)
    assert cancelled not in merged.inserted


# --- Object notifications -------------------------------------------------------------------


def test_object_notification(db, collector):
    pk = create(db, itemName="watched", complexity=1)
    other = create(db, itemName="other")
    db.observe_object("Item", pk, callback=collector)

    with db.write():
        db.set("Item", other, "itemName", "not watched")
        db.set("Item", pk, "itemName", "changed")
        db.add("Item", pk, "complexity", 2)
    merged = collector.wait_merged(lambda m: pk in m.modified)
    assert merged.modified == [pk]
    assert sorted(merged.modified_properties) == ["complexity", "itemName"]
    assert not merged.inserted and not merged.deleted

    with db.write():
        db.delete("Item", pk)
    merged = collector.wait_merged(lambda m: pk in m.deleted)
    assert merged.deleted == [pk]

    # The registration goes on after a deletion: a re-creation is an insert.
    with db.write():
        db.create("Item", {"_id": pk})
    collector.wait_merged(lambda m: pk in m.inserted)
    with db.write():
        db.set("Item", pk, "itemName", "again")
    merged = collector.wait_merged(lambda m: m.modified.count(pk) == 2)
    assert merged.inserted == [pk] and merged.deleted == [pk]


def test_notifications_report_the_net_effect(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        fd = db.notification_fd()
        db.observe_query("Item", "TRUEPREDICATE", callback=collector)
        kept = ferry.ObjectId.generate()
        gone = ferry.ObjectId.generate()
        with db.write():
            db.create("Item", {"_id": kept})
            db.create("Item", {"_id": gone})
        with db.write():
            db.set("Item", kept, "itemName", "changed after creation")
            db.delete("Item", gone)
        assert readable(fd, TIMEOUT)
        db.deliver_notifications()
        merged = collector.merged()
        # Created and deleted between two deliveries: not reported; created then changed: an
        # insert.
        assert merged.inserted == [kept]
        assert gone not in merged.deleted and gone not in merged.inserted
        assert merged.modified == []


def test_pending_notifications_of_a_closed_token_run_nothing(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        fd = db.notification_fd()
        token = db.observe_query("Item", "TRUEPREDICATE", callback=collector)
        create(db)
        assert readable(fd, TIMEOUT)
        token.close()
        assert db.deliver_notifications() == 0
        assert collector.changes == []


def test_object_notification_for_an_object_created_later(db, collector):
    pk = ferry.ObjectId.generate()
    db.observe_object("Item", pk, callback=collector)
    with db.write():
        db.create("Item", {"_id": pk, "itemName": "born"})
    merged = collector.wait_merged(lambda m: pk in m.inserted)
    assert merged.inserted == [pk]
    with db.write():
        db.list_insert("Item", pk, "tags", 0, "t")
    merged = collector.wait_merged(lambda m: pk in m.modified)
    assert merged.modified_properties == ["tags"]


def test_object_notification_with_other_key_types(db, collector):
    db.observe_object("Person", "ann", callback=collector)
    with db.write():
        db.create("Person", {"_id": "ann", "name": "Ann"})
    collector.wait_merged(lambda m: "ann" in m.inserted)
    with pytest.raises(ferry.WrongTypeError):
        db.observe_object("Person", 5, callback=collector)


# --- Tokens and callbacks -------------------------------------------------------------------


def test_closed_token_stops_notifications(db):
    stopped = Collector()
    sentinel = Collector()
    token = db.observe_query("Item", "TRUEPREDICATE", callback=stopped)
    db.observe_query("Item", "TRUEPREDICATE", callback=sentinel)
    first = create(db)
    stopped.wait_merged(lambda m: first in m.inserted)
    sentinel.wait_merged(lambda m: first in m.inserted)
    token.close()
    token.close()  # idempotent
    count = len(stopped.changes)
    for _ in range(3):
        pk = create(db)
        sentinel.wait_merged(lambda m: pk in m.inserted)
    assert len(stopped.changes) == count


def test_token_as_context_manager_and_registry_cleanup(db, collector):
    before = len(_registrations)
    with db.observe_query("Item", "TRUEPREDICATE", callback=collector) as token:
        assert len(_registrations) == before + 1
        assert "active" in repr(token)
    # userdata_free ran exactly once: the registration is gone.
    assert len(_registrations) == before
    assert token not in db._tokens


def test_closing_the_database_closes_its_tokens(db_path, collector):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    before = len(_registrations)
    token = db.observe_query("Item", "TRUEPREDICATE", callback=collector)
    db.close()
    assert not token.active
    assert len(_registrations) == before


def test_failed_registration_releases_userdata(db):
    before = len(_registrations)
    with pytest.raises(ferry.QueryError):
        db.observe_query("Item", "complexity <=", callback=print)
    with pytest.raises(ferry.NoSuchClassError):
        db.observe_query("Nope", "TRUEPREDICATE", callback=print)
    with pytest.raises(TypeError):
        db.observe_query("Item", "TRUEPREDICATE", callback=None)  # type: ignore[arg-type]
    assert len(_registrations) == before


def test_c_api_registration_without_callback_frees_userdata(db):
    freed = []
    free_fn = _native.FREE_FN(lambda userdata: freed.append(userdata))
    meta = db._class("Item")
    out = ctypes.c_void_p()
    rc = _native.lib().ferry_db_observe_query(
        ctypes.byref(out), db._handle, meta.key, b"TRUEPREDICATE", None, 0,
        _native.CHANGE_CB(), 1234, free_fn,
    )
    assert rc == ferry.InvalidArgumentError.CODE
    assert freed == [1234]  # before the failing call returned
    with pytest.raises(ferry.InvalidArgumentError):
        check(rc)
    # Bad query: userdata_free runs too.
    rc = _native.lib().ferry_db_observe_query(
        ctypes.byref(out), db._handle, meta.key, b"((", None, 0,
        _native.CHANGE_CB(lambda u, c: None), 99, free_fn,
    )
    assert rc == ferry.QueryError.CODE
    assert freed == [1234, 99]
    _native.lib().ferry_notification_token_free(None)  # a no-op


def test_c_api_userdata_free_runs_once_when_the_token_is_freed(db):
    freed = []
    free_fn = _native.FREE_FN(lambda userdata: freed.append(userdata))
    change_cb = _native.CHANGE_CB(lambda userdata, changes: None)
    meta = db._class("Item")
    out = ctypes.c_void_p()
    check(
        _native.lib().ferry_db_observe_query(
            ctypes.byref(out), db._handle, meta.key, b"TRUEPREDICATE", None, 0,
            change_cb, 7, free_fn,
        )
    )
    assert freed == []
    _native.lib().ferry_notification_token_free(out.value)
    assert freed == [7]


def test_exception_in_callback_is_logged_and_not_propagated(db, caplog):
    good = Collector()
    calls = []
    raised = threading.Event()

    def bad(changes):
        calls.append(changes)
        raised.set()
        raise RuntimeError("boom in callback")

    with caplog.at_level(logging.ERROR, logger="ferry"):
        db.observe_query("Item", "TRUEPREDICATE", callback=bad)
        db.observe_query("Item", "TRUEPREDICATE", callback=good)
        first = create(db)
        assert raised.wait(TIMEOUT)
        good.wait_merged(lambda m: first in m.inserted)
        # Later notifications still arrive, to both callbacks.
        raised.clear()
        second = create(db)
        assert raised.wait(TIMEOUT)
        good.wait_merged(lambda m: second in m.inserted)
        # The first call (and its logging) finished before the loop thread made the second.
        records = [r for r in caplog.records if r.name == "ferry" and r.exc_info]
        assert records
        assert isinstance(records[0].exc_info[1], RuntimeError)
        assert "boom in callback" in str(records[0].exc_info[1])


def test_callback_may_call_ferry(db):
    seen: list[str] = []
    done = threading.Event()

    def callback(changes):
        for pk in changes.inserted:
            seen.append(db.get("Item", pk)["itemName"])
        seen.append(str(len(db.query("Item"))))
        done.set()

    db.observe_query("Item", "TRUEPREDICATE", callback=callback)
    create(db, itemName="read me from the loop")
    assert done.wait(TIMEOUT)
    assert seen[0] == "read me from the loop"


def test_callback_may_close_its_own_token(db):
    calls = []
    first_call = threading.Event()
    holder: dict[str, ferry.NotificationToken] = {}

    def callback(changes):
        calls.append(changes)
        holder["token"].close()
        first_call.set()

    holder["token"] = db.observe_query("Item", "TRUEPREDICATE", callback=callback)
    sentinel = Collector()
    db.observe_query("Item", "TRUEPREDICATE", callback=sentinel)
    create(db)
    assert first_call.wait(TIMEOUT)
    for _ in range(3):
        pk = create(db)
        sentinel.wait_merged(lambda m: pk in m.inserted)
    assert len(calls) == 1
    assert not holder["token"].active


def test_callback_may_close_the_database(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    closed = threading.Event()
    errors = []

    def callback(changes):
        try:
            db.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        closed.set()

    db.observe_query("Item", "TRUEPREDICATE", callback=callback)
    create(db)
    assert closed.wait(TIMEOUT)
    assert errors == []
    assert db.closed


def test_observe_on_a_closed_database(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    db._class("Item")  # cached: the error must come from the library
    db.close()
    before = len(_registrations)
    with pytest.raises(ferry.ClosedError):
        db.observe_query("Item", "TRUEPREDICATE", callback=print)
    with pytest.raises(ferry.ClosedError):
        db.observe_object("Item", ferry.ObjectId.generate(), callback=print)
    assert len(_registrations) == before


# --- Poll delivery --------------------------------------------------------------------------


def readable(fd: int, timeout: float) -> bool:
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r)


def test_poll_delivery(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        assert db.delivery is ferry.Delivery.POLL
        fd = db.notification_fd()
        assert fd >= 0
        assert db.notification_fd() == fd
        db.observe_query("Item", "complexity <= 4", callback=collector)
        assert not readable(fd, 0)
        assert db.deliver_notifications() == 0

        pk = create(db, complexity=1)
        assert readable(fd, TIMEOUT)
        assert collector.changes == []  # nothing runs until we deliver
        assert db.deliver_notifications() >= 1
        assert collector.merged().inserted == [pk]
        assert collector.threads == [threading.get_ident()]  # on the calling thread
        assert not readable(fd, 0)  # readiness cleared
        assert db.deliver_notifications() == 0


def deliver_until(db, fd, collector, predicate):
    """Polls the descriptor and delivers until predicate(merged changes) holds."""
    delivered = 0
    while not predicate(collector.merged()):
        assert readable(fd, TIMEOUT), f"nothing to deliver; so far {collector.changes}"
        delivered += db.deliver_notifications()
    return delivered


def test_poll_delivery_of_another_handles_commit(db_path, collector):
    poller = ferry.Database.open(db_path, schema=SCHEMA, delivery=ferry.Delivery.POLL)
    writer = ferry.Database.open(db_path, schema=SCHEMA)
    fd = poller.notification_fd()
    poller.observe_object("Person", "p", callback=collector)
    with writer.write():
        writer.create("Person", {"_id": "p", "name": "P"})
    assert deliver_until(poller, fd, collector, lambda m: "p" in m.inserted) == 1
    with writer.write():
        writer.set("Person", "p", "name", "Q")
    assert deliver_until(poller, fd, collector, lambda m: "p" in m.modified) == 1
    merged = collector.merged()
    assert merged.inserted == ["p"]
    assert merged.modified == ["p"] and merged.modified_properties == ["name"]
    assert collector.threads == [threading.get_ident()] * 2
    writer.close()
    poller.close()


def test_poll_delivery_coalesces_pending_commits(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        fd = db.notification_fd()
        db.observe_query("Item", "TRUEPREDICATE", callback=collector)
        keys = [create(db) for _ in range(5)]
        assert readable(fd, TIMEOUT)
        deliver_until(db, fd, collector, lambda m: len(m.inserted) >= 5)
        assert sorted(map(str, collector.merged().inserted)) == sorted(map(str, keys))
        assert not readable(fd, 0)


def test_poll_delivery_from_a_worker_thread(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        fd = db.notification_fd()
        db.observe_query("Item", "TRUEPREDICATE", callback=collector)
        pk = create(db)
        result = {}

        def deliver():
            if readable(fd, TIMEOUT):
                result["n"] = db.deliver_notifications()
                result["thread"] = threading.get_ident()

        t = threading.Thread(target=deliver)
        t.start()
        t.join(TIMEOUT)
        assert result["n"] >= 1
        assert collector.threads == [result["thread"]]
        assert collector.merged().inserted == [pk]


def test_poll_functions_on_a_loop_database(db):
    with pytest.raises(ferry.InvalidArgumentError):
        db.notification_fd()
    with pytest.raises(ferry.InvalidArgumentError):
        db.deliver_notifications()


def test_deliver_on_a_closed_poll_database(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA, delivery="poll")
    db.close()
    with pytest.raises(ferry.ClosedError):
        db.deliver_notifications()


def test_closing_the_database_stops_its_notifications(db_path):
    observer = ferry.Database.open(db_path, schema=SCHEMA)
    stopped = Collector()
    observer.observe_query("Item", "TRUEPREDICATE", callback=stopped)
    with ferry.Database.open(db_path, schema=SCHEMA) as writer:
        sentinel = Collector()
        writer.observe_query("Item", "TRUEPREDICATE", callback=sentinel)
        first = create(writer)
        stopped.wait_merged(lambda m: first in m.inserted)
        observer.close()
        count = len(stopped.changes)
        for _ in range(3):
            pk = create(writer)
            sentinel.wait_merged(lambda m: pk in m.inserted)
        assert len(stopped.changes) == count


def test_raw_token_survives_database_close(db_path):
    # ferry.h: after ferry_db_close the registrations stop firing but their tokens must still
    # be freed; freeing them after the close (and after ferry_db_free) is fine.
    freed = []
    free_fn = _native.FREE_FN(lambda userdata: freed.append(userdata))
    change_cb = _native.CHANGE_CB(lambda userdata, changes: None)
    db = ferry.Database.open(db_path, schema=SCHEMA)
    meta = db._class("Item")
    out = ctypes.c_void_p()
    check(_native.lib().ferry_db_observe_query(
        ctypes.byref(out), db._handle, meta.key, b"TRUEPREDICATE", None, 0, change_cb, 5, free_fn,
    ))
    db.close()
    assert freed == []
    db._finalizer()  # ferry_db_free
    _native.lib().ferry_notification_token_free(out.value)
    assert freed == [5]


def test_upsert_reports_only_the_changed_properties(db, collector):
    with db.write():
        db.create("Person", {"_id": "a", "name": "A", "age": 1})
    db.observe_object("Person", "a", callback=collector)
    with db.write():
        db.upsert("Person", {"_id": "a", "name": "A", "age": 2})
    merged = collector.wait_merged(lambda m: "a" in m.modified)
    assert merged.modified_properties == ["age"]


def test_deliver_with_a_null_count(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA, delivery="poll") as db:
        fd = db.notification_fd()
        db.observe_query("Item", "TRUEPREDICATE", callback=collector)
        pk = create(db)
        assert readable(fd, TIMEOUT)
        check(_native.lib().ferry_db_deliver_notifications(None, db._handle))
        assert collector.merged().inserted == [pk]
