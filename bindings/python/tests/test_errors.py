"""Error mapping: codes to exceptions, messages, bad input of every kind."""

from __future__ import annotations

import ctypes
import pickle

import pytest

import ferry
from ferry import _native
from ferry.errors import check, error_for_code

from conftest import SCHEMA, new_item

CODES = {
    -1: ferry.InvalidArgumentError,
    -2: ferry.InvalidHandleError,
    -3: ferry.NoMemoryError,
    -4: ferry.FerryIOError,
    -5: ferry.ClosedError,
    -6: ferry.NotInTransactionError,
    -7: ferry.AlreadyInTransactionError,
    -8: ferry.NoSuchClassError,
    -9: ferry.NoSuchPropertyError,
    -10: ferry.WrongTypeError,
    -11: ferry.NotFoundError,
    -12: ferry.DuplicatePrimaryKeyError,
    -13: ferry.QueryError,
    -14: ferry.InvalidSchemaError,
    -15: ferry.SchemaMismatchError,
    -16: ferry.MultipleSyncAgentsError,
    -17: ferry.OutOfRangeError,
    -18: ferry.CorruptError,
    -19: ferry.BusyError,
    -100: ferry.InternalError,
}


@pytest.mark.parametrize("code", list(CODES))
def test_every_code_has_its_exception(code):
    exc = error_for_code(code, "message")
    assert type(exc) is CODES[code]
    assert isinstance(exc, ferry.FerryError)
    assert exc.code == code == type(exc).CODE
    assert str(exc) == "message"
    assert repr(exc) == f"{type(exc).__name__}('message', code={code})"
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc) and again.code == code and again.message == "message"
    text = ferry.strerror(code)
    assert text and text != "unknown error"


def test_builtin_bases():
    assert issubclass(ferry.NotFoundError, KeyError)
    assert issubclass(ferry.OutOfRangeError, IndexError)
    assert issubclass(ferry.WrongTypeError, TypeError)
    assert issubclass(ferry.InvalidArgumentError, ValueError)
    assert issubclass(ferry.QueryError, ValueError)
    assert issubclass(ferry.FerryIOError, OSError)
    assert issubclass(ferry.NoMemoryError, MemoryError)
    assert str(ferry.NotFoundError("no such object")) == "no such object"  # not KeyError's quotes
    assert ferry.FerryIOError("disk").code == -4


def test_unknown_code():
    exc = error_for_code(-12345, "strange")
    assert type(exc) is ferry.FerryError and exc.code == -12345
    assert ferry.strerror(-12345) == "unknown error"
    assert ferry.strerror(0)


def test_error_last_describes_the_failure_on_this_thread(db):
    lib = _native.lib()
    with pytest.raises(ferry.NoSuchClassError):
        db.query("Nope")
    last = lib.ferry_error_last().contents
    assert last.code == -8
    assert b"Nope" in last.message
    # Successful calls do not clear it.
    db.query("Item")
    assert lib.ferry_error_last().contents.code == -8


def test_version():
    assert ferry.library_version() == "0.1.0"
    assert ferry.library_version_number() == 100
    assert ferry.__version__ == ferry.library_version()


def test_closed_database(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    with db.write():
        pk = db.create("Item", new_item())
    db.close()
    calls = [
        lambda: db.begin_write(),
        lambda: db.commit(),
        lambda: db.cancel(),
        lambda: db.in_transaction,
        lambda: db.create("Item", new_item()),
        lambda: db.upsert("Item", new_item()),
        lambda: db.set("Item", pk, "itemName", "x"),
        lambda: db.add("Item", pk, "complexity", 1),
        lambda: db.delete("Item", pk),
        lambda: db.list_insert("Item", pk, "tags", 0, "x"),
        lambda: db.list_set("Item", pk, "tags", 0, "x"),
        lambda: db.list_erase("Item", pk, "tags", 0),
        lambda: db.list_clear("Item", pk, "tags"),
        lambda: db.get("Item", pk),
        lambda: db.query("Item"),
        lambda: db.observe_query("Item", "TRUEPREDICATE", callback=print),
        lambda: db.observe_object("Item", pk, callback=print),
        lambda: db.history_count(),
        lambda: db.verify_history(),
        lambda: db.class_names,
        lambda: db.query("Person"),  # not cached: find_class must fail too
    ]
    for i, call in enumerate(calls):
        with pytest.raises(ferry.ClosedError):
            call()
            pytest.fail(f"call {i} did not raise")
    assert db.closed


def test_invalid_handles_through_the_c_api():
    lib = _native.lib()
    # Every function taking a handle refuses NULL with FERRY_ERR_INVALID_HANDLE.
    b = ctypes.c_bool()
    n = ctypes.c_size_t()
    k = ctypes.c_uint32()
    u64 = ctypes.c_uint64()
    fd = ctypes.c_int()
    v = _native.Value()
    out = ctypes.c_void_p()
    ci = _native.ClassInfo()
    pi = _native.PropertyInfo()
    lst = ctypes.POINTER(_native.Value)()
    calls = {
        "ferry_db_close": lambda: lib.ferry_db_close(None),
        "ferry_db_is_closed": lambda: lib.ferry_db_is_closed(ctypes.byref(b), None),
        "ferry_db_class_count": lambda: lib.ferry_db_class_count(ctypes.byref(n), None),
        "ferry_db_find_class": lambda: lib.ferry_db_find_class(ctypes.byref(k), None, b"Item"),
        "ferry_db_get_class": lambda: lib.ferry_db_get_class(ctypes.byref(ci), None, 0),
        "ferry_db_find_property": lambda: lib.ferry_db_find_property(ctypes.byref(k), None, 0, b"x"),
        "ferry_db_get_property": lambda: lib.ferry_db_get_property(ctypes.byref(pi), None, 0, 0),
        "ferry_db_begin_write": lambda: lib.ferry_db_begin_write(None),
        "ferry_db_commit": lambda: lib.ferry_db_commit(None),
        "ferry_db_cancel": lambda: lib.ferry_db_cancel(None),
        "ferry_db_is_in_transaction": lambda: lib.ferry_db_is_in_transaction(ctypes.byref(b), None),
        "ferry_object_create": lambda: lib.ferry_object_create(None, 0, None, 0),
        "ferry_object_upsert": lambda: lib.ferry_object_upsert(None, 0, None, 0),
        "ferry_object_set": lambda: lib.ferry_object_set(None, 0, ctypes.byref(v), 0, ctypes.byref(v)),
        "ferry_object_add_int": lambda: lib.ferry_object_add_int(None, 0, ctypes.byref(v), 0, 1),
        "ferry_object_delete": lambda: lib.ferry_object_delete(None, 0, ctypes.byref(v)),
        "ferry_list_insert": lambda: lib.ferry_list_insert(None, 0, ctypes.byref(v), 0, 0, ctypes.byref(v)),
        "ferry_list_set": lambda: lib.ferry_list_set(None, 0, ctypes.byref(v), 0, 0, ctypes.byref(v)),
        "ferry_list_erase": lambda: lib.ferry_list_erase(None, 0, ctypes.byref(v), 0, 0),
        "ferry_list_clear": lambda: lib.ferry_list_clear(None, 0, ctypes.byref(v), 0),
        "ferry_object_get": lambda: lib.ferry_object_get(ctypes.byref(out), None, 0, ctypes.byref(v)),
        "ferry_object_get_class": lambda: lib.ferry_object_get_class(ctypes.byref(k), None),
        "ferry_object_get_value": lambda: lib.ferry_object_get_value(ctypes.byref(v), None, 0),
        "ferry_object_get_list": lambda: lib.ferry_object_get_list(ctypes.byref(lst), ctypes.byref(n), None, 0),
        "ferry_db_query": lambda: lib.ferry_db_query(ctypes.byref(out), None, 0, b"TRUEPREDICATE", None, 0),
        "ferry_results_count": lambda: lib.ferry_results_count(ctypes.byref(n), None),
        "ferry_results_get": lambda: lib.ferry_results_get(ctypes.byref(out), None, 0),
        "ferry_db_notification_fd": lambda: lib.ferry_db_notification_fd(ctypes.byref(fd), None),
        "ferry_db_deliver_notifications": lambda: lib.ferry_db_deliver_notifications(ctypes.byref(n), None),
        "ferry_db_history_count": lambda: lib.ferry_db_history_count(ctypes.byref(u64), None),
        "ferry_db_verify_history": lambda: lib.ferry_db_verify_history(None),
    }
    for name, call in calls.items():
        rc = call()
        assert rc == ferry.InvalidHandleError.CODE, (name, rc)
        with pytest.raises(ferry.InvalidHandleError):
            check(rc)
    # The free functions accept NULL.
    for free in ("ferry_db_free", "ferry_schema_free", "ferry_object_free", "ferry_results_free",
                 "ferry_notification_token_free"):
        getattr(lib, free)(None)
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_object_id_generate(None))


def test_wrong_kind_of_handle(db):
    lib = _native.lib()
    results = db.query("Item")
    # A results handle where a database handle is expected, and the other way round.
    with pytest.raises(ferry.InvalidHandleError):
        check(lib.ferry_db_begin_write(results._handle))
    n = ctypes.c_size_t()
    with pytest.raises(ferry.InvalidHandleError):
        check(lib.ferry_results_count(ctypes.byref(n), db._handle))
    with pytest.raises(ferry.InvalidHandleError):
        check(lib.ferry_object_get_class(ctypes.byref(ctypes.c_uint32()), db._handle))


def test_null_out_parameters(db):
    lib = _native.lib()
    v = _native.Value()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_class_count(None, db._handle))
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_history_count(None, db._handle))
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_query(None, db._handle, 1, b"TRUEPREDICATE", None, 0))
    out = ctypes.c_void_p()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_query(ctypes.byref(out), db._handle, 1, None, None, 0))
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_query(ctypes.byref(out), db._handle, 1, b"n == $0", None, 1))
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_object_get(ctypes.byref(out), db._handle, 1, None))
    with db.write():
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_object_create(db._handle, 1, None, 1))
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_object_set(db._handle, 1, None, 1, ctypes.byref(v)))


def test_bad_values_through_the_c_api(db):
    lib = _native.lib()
    pk = _native.Value()
    pk.type = 42  # not a ferry_type_t: FERRY_ERR_WRONG_TYPE wherever a value is passed in
    out = ctypes.c_void_p()
    rc = lib.ferry_object_get(ctypes.byref(out), db._handle, 1, ctypes.byref(pk))
    assert rc == ferry.WrongTypeError.CODE
    args = (_native.Value * 1)(pk)
    rc = lib.ferry_db_query(ctypes.byref(out), db._handle, 1, b"complexity == $0", args, 1)
    assert rc == ferry.WrongTypeError.CODE
    with db.write():
        values = (_native.PropertyValue * 1)()
        values[0].property = 0
        values[0].value.type = -3
        assert lib.ferry_object_create(db._handle, 1, values, 1) == ferry.WrongTypeError.CODE
    # A LINK is never a value.
    pk.type = 9
    rc = lib.ferry_object_get(ctypes.byref(out), db._handle, 1, ctypes.byref(pk))
    assert rc in (ferry.InvalidArgumentError.CODE, ferry.WrongTypeError.CODE)
    # A string that is not UTF-8, and a NULL string with a size.
    bad = b"\xff\xfe"
    keep = ctypes.c_char_p(bad)
    pk.type = 4
    pk.u.string.data = ctypes.cast(keep, ctypes.c_void_p).value
    pk.u.string.size = 2
    rc = lib.ferry_object_get(ctypes.byref(out), db._handle, 0, ctypes.byref(pk))
    assert rc in (ferry.InvalidArgumentError.CODE, ferry.WrongTypeError.CODE)
    args = (_native.Value * 1)(pk)
    rc = lib.ferry_db_query(ctypes.byref(out), db._handle, 0, b"name == $0", args, 1)
    assert rc == ferry.InvalidArgumentError.CODE  # malformed argument bytes
    pk.u.string.data = None
    pk.u.string.size = 5
    rc = lib.ferry_object_get(ctypes.byref(out), db._handle, 0, ctypes.byref(pk))
    assert rc == ferry.InvalidArgumentError.CODE
    # Timestamp nanoseconds out of range.
    v = _native.Value()
    v.type = 6
    v.u.timestamp.seconds = 0
    v.u.timestamp.nanoseconds = 1_000_000_000
    args = (_native.Value * 1)(v)
    rc = lib.ferry_db_query(ctypes.byref(out), db._handle, 1, b"due == $0", args, 1)
    assert rc in (ferry.InvalidArgumentError.CODE, ferry.QueryError.CODE)


def test_unknown_names(db):
    with pytest.raises(ferry.NoSuchClassError):
        db.get("Nope", 1)
    with db.write():
        with pytest.raises(ferry.NoSuchClassError):
            db.create("Nope", {"_id": 1})
        with pytest.raises(ferry.NoSuchPropertyError):
            db.create("Person", {"_id": "a", "nope": 1})
        db.create("Person", {"_id": "a", "name": "A"})
        with pytest.raises(ferry.NoSuchPropertyError):
            db.set("Person", "a", "nope", 1)
        with pytest.raises(ferry.NoSuchPropertyError):
            db.add("Person", "a", "nope", 1)
        with pytest.raises(ferry.NoSuchPropertyError):
            db.list_clear("Person", "a", "nope")
    with pytest.raises(TypeError):
        db.get(5, "a")  # type: ignore[arg-type]


def test_get_class_and_property_out_of_range_keys(db):
    lib = _native.lib()
    out = ctypes.c_void_p()
    v = _native.Value()
    v.type = 4
    with pytest.raises(ferry.NoSuchClassError):
        check(lib.ferry_db_query(ctypes.byref(out), db._handle, 99, b"TRUEPREDICATE", None, 0))
    with pytest.raises(ferry.NoSuchClassError):
        check(lib.ferry_object_get(ctypes.byref(out), db._handle, 99, ctypes.byref(v)))
    with db.write():
        with pytest.raises(ferry.NoSuchPropertyError):
            db.create("Person", {"_id": "a"})
            check(lib.ferry_object_set(db._handle, 0, ctypes.byref(v), 99, ctypes.byref(v)))


def test_object_and_results_handles_through_the_c_api(db):
    lib = _native.lib()
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
    results = db.query("Person")
    obj = ctypes.c_void_p()
    with pytest.raises(ferry.OutOfRangeError):
        check(lib.ferry_results_get(ctypes.byref(obj), results._handle, 1))
    check(lib.ferry_results_get(ctypes.byref(obj), results._handle, 0))
    v = _native.Value()
    with pytest.raises(ferry.NoSuchPropertyError):
        check(lib.ferry_object_get_value(ctypes.byref(v), obj.value, 99))
    lst = ctypes.POINTER(_native.Value)()
    n = ctypes.c_size_t()
    with pytest.raises(ferry.WrongTypeError):
        check(lib.ferry_object_get_list(ctypes.byref(lst), ctypes.byref(n), obj.value, 1))
    lib.ferry_object_free(obj.value)
    # Not found: *out is set to NULL.
    missing = _native.Value()
    keep = ferry.values.KeepAlive()
    ferry.values.to_native("zzz", missing, keep)
    out = ctypes.c_void_p(1234)
    rc = lib.ferry_object_get(ctypes.byref(out), db._handle, 0, ctypes.byref(missing))
    assert rc == ferry.NotFoundError.CODE
    assert out.value is None


FREED_HANDLES = r"""
import ctypes, sys, ferry
from ferry import _native
lib = _native.lib()
db = ferry.Database.open(in_memory="freed", schema=[ferry.ObjectSchema("C", {
    "_id": ferry.Property(ferry.Type.INT, primary_key=True)})])
with db.write():
    db.create("C", {"_id": 1})
results = db.query("C")
handle, rhandle = db._handle, results._handle
results.close()                     # ferry_results_free
n = ctypes.c_size_t()
print(lib.ferry_results_count(ctypes.byref(n), rhandle))
db.close()
db._finalizer()                     # ferry_db_free
print(lib.ferry_db_close(handle))
print(lib.ferry_db_begin_write(handle))
print(lib.ferry_db_query(ctypes.byref(ctypes.c_void_p()), handle, 0, b"TRUEPREDICATE", None, 0))
"""


def test_freed_handles_are_invalid_not_a_crash():
    import subprocess

    from conftest import PYTHON, child_env

    done = subprocess.run([PYTHON, "-c", FREED_HANDLES], env=child_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-2"] * 4
