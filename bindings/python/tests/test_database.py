"""Opening and closing file and in-memory databases."""

from __future__ import annotations

import ctypes
import os

import pytest

import ferry
from ferry import _native
from ferry.errors import check

from conftest import SCHEMA


def test_file_database_persists(db_path):
    with ferry.Database.open(db_path, schema=SCHEMA) as db:
        assert db_path.exists()
        with db.write():
            db.create("Person", {"_id": "ann", "name": "Ann", "age": 31})
    with ferry.Database.open(str(db_path), schema=SCHEMA) as db:
        assert dict(db.get("Person", "ann")) == {"_id": "ann", "name": "Ann", "age": 31}


def test_path_like_path_with_spaces_and_uri_characters(tmp_path):
    for name in ("with space.ferry", "q?x.ferry", "h#x.ferry", "p%20.ferry"):
        path = tmp_path / name
        with ferry.Database.open(path, schema=SCHEMA) as db:
            assert name in repr(db)
        assert path.exists(), sorted(p.name for p in tmp_path.iterdir())


def test_non_ascii_file_name(tmp_path):
    path = tmp_path / "données.ferry"
    with ferry.Database.open(path, schema=SCHEMA) as db:
        with db.write():
            db.create("Person", {"_id": "a", "name": "A"})
    assert path.exists(), [p.name for p in tmp_path.iterdir()]
    # Another non-ASCII name is another database.
    with ferry.Database.open(tmp_path / "dannées.ferry", schema=SCHEMA) as other:
        assert other.get("Person", "a") is None


def test_non_ascii_directory(tmp_path):
    path = tmp_path / "dossier été" / "x.ferry"
    path.parent.mkdir()
    with ferry.Database.open(path, schema=SCHEMA):
        pass
    assert path.exists()


def test_missing_directory_is_an_io_error(tmp_path):
    with pytest.raises(ferry.FerryIOError) as info:
        ferry.Database.open(tmp_path / "nope" / "x.ferry", schema=SCHEMA)
    assert isinstance(info.value, OSError)
    assert info.value.code == -4


def test_path_is_a_directory(tmp_path):
    with pytest.raises((ferry.FerryIOError, ferry.CorruptError)):
        ferry.Database.open(tmp_path, schema=SCHEMA)


def test_exactly_one_of_path_and_identifier(tmp_path):
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Database.open(schema=SCHEMA)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Database.open(tmp_path / "x.ferry", in_memory="x", schema=SCHEMA)
    assert not (tmp_path / "x.ferry").exists()


def test_bad_delivery():
    with pytest.raises(ValueError):
        ferry.Database.open(in_memory="x", schema=SCHEMA, delivery="sometimes")


def test_options_through_the_c_api(tmp_path):
    lib = _native.lib()
    opts = _native.DbOptions()
    check(lib.ferry_db_options_init(ctypes.byref(opts), 1))
    assert opts.version == 1
    assert opts.path is None and opts.in_memory_identifier is None and opts.schema is None
    assert opts.delivery == _native.FERRY_DELIVERY_LOOP
    assert opts.synced is False
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_options_init(ctypes.byref(opts), 999))
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_options_init(None, 1))
    out = ctypes.c_void_p()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_open(ctypes.byref(out), None))
    # An unknown options version or delivery mode is refused.
    with ferry.Schema(SCHEMA) as schema:
        check(lib.ferry_db_options_init(ctypes.byref(opts), 1))
        opts.in_memory_identifier = b"opts"
        opts.schema = schema.handle
        opts.version = 999
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_db_open(ctypes.byref(out), ctypes.byref(opts)))
        opts.version = 1
        opts.delivery = 7
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_db_open(ctypes.byref(out), ctypes.byref(opts)))
        assert out.value is None
        with pytest.raises(ferry.InvalidArgumentError):
            check(lib.ferry_db_open(None, ctypes.byref(opts)))


def test_in_memory_cannot_be_synced():
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Database.open(in_memory="synced-mem", schema=SCHEMA, synced=True)


def test_in_memory_touches_no_disk(tmp_path, monkeypatch, mem_id):
    monkeypatch.chdir(tmp_path)
    with ferry.Database.open(in_memory=mem_id, schema=SCHEMA) as db:
        with db.write():
            db.create("Person", {"_id": "a", "name": "A"})
        assert db.get("Person", "a")["name"] == "A"
    assert list(tmp_path.iterdir()) == []


def test_in_memory_identifier_that_looks_like_a_path(tmp_path):
    ident = str(tmp_path / "not-a-file.ferry")
    with ferry.Database.open(in_memory=ident, schema=SCHEMA) as db:
        with db.write():
            db.create("Person", {"_id": "a", "name": "A"})
    assert list(tmp_path.iterdir()) == []


def test_in_memory_is_shared_between_handles(mem_id):
    a = ferry.Database.open(in_memory=mem_id, schema=SCHEMA)
    b = ferry.Database.open(in_memory=mem_id, schema=SCHEMA)
    other = ferry.Database.open(in_memory=mem_id + "-other", schema=SCHEMA)
    with a.write():
        a.create("Person", {"_id": "a", "name": "A"})
    assert b.get("Person", "a")["name"] == "A"
    assert other.get("Person", "a") is None
    with b.write():
        b.set("Person", "a", "name", "B")
    assert a.get("Person", "a")["name"] == "B"
    for db in (a, b, other):
        db.close()


def test_in_memory_second_handle_without_schema(mem_id):
    with ferry.Database.open(in_memory=mem_id, schema=SCHEMA) as a:
        with a.write():
            a.create("Person", {"_id": "a", "name": "A"})
        with ferry.Database.open(in_memory=mem_id) as b:
            assert b.schema == SCHEMA
            assert b.get("Person", "a")["name"] == "A"


def test_in_memory_dropped_after_last_close(mem_id):
    a = ferry.Database.open(in_memory=mem_id, schema=SCHEMA)
    b = ferry.Database.open(in_memory=mem_id, schema=SCHEMA)
    with a.write():
        a.create("Person", {"_id": "a", "name": "A"})
    a.close()
    # Still open through b.
    assert b.get("Person", "a")["name"] == "A"
    c = ferry.Database.open(in_memory=mem_id, schema=SCHEMA)
    assert c.get("Person", "a")["name"] == "A"
    b.close()
    c.close()
    with ferry.Database.open(in_memory=mem_id, schema=SCHEMA) as d:
        assert d.get("Person", "a") is None
        assert d.history_count() == 0
    # Nothing is left: without a schema it is a new database.
    with pytest.raises(ferry.InvalidSchemaError):
        ferry.Database.open(in_memory=mem_id)


def test_two_handles_on_one_path_share_a_store(db_path):
    a = ferry.Database.open(db_path, schema=SCHEMA)
    b = ferry.Database.open(db_path, schema=SCHEMA)
    with a.write():
        a.create("Person", {"_id": "a", "name": "A"})
    assert b.get("Person", "a")["name"] == "A"
    a.close()
    assert b.get("Person", "a")["name"] == "A"
    b.close()


def test_close(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    assert db.closed is False
    db.close()
    assert db.closed is True
    db.close()  # closing twice is allowed
    with pytest.raises(ferry.ClosedError):
        db.get("Person", "a")
    with pytest.raises(ferry.ClosedError):
        db.begin_write()


def test_context_manager_closes(db_path):
    with ferry.Database.open(db_path, schema=SCHEMA) as db:
        pass
    assert db.closed


def test_close_cancels_the_open_transaction(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    db.begin_write()
    db.create("Person", {"_id": "a", "name": "A"})
    db.close()
    with ferry.Database.open(db_path, schema=SCHEMA) as again:
        assert again.get("Person", "a") is None
        # The write lock was released: another handle can write.
        with again.write():
            again.create("Person", {"_id": "b", "name": "B"})


def test_class_names_and_schema(db):
    assert db.class_names == ["Person", "Item"]
    assert db.schema == SCHEMA


def test_garbage_collected_handle_is_freed(db_path):
    import gc

    db = ferry.Database.open(db_path, schema=SCHEMA)
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
    finalizer = db._finalizer
    del db
    gc.collect()
    assert not finalizer.alive
    with ferry.Database.open(db_path, schema=SCHEMA) as again:
        with again.write():  # nothing holds the write lock
            again.create("Person", {"_id": "b", "name": "B"})


def test_handle_api_through_the_c_api(db):
    lib = _native.lib()
    out = ctypes.c_bool()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_is_closed(None, db._handle))
    with pytest.raises(ferry.InvalidHandleError):
        check(lib.ferry_db_is_closed(ctypes.byref(out), None))
    count = ctypes.c_size_t()
    check(lib.ferry_db_class_count(ctypes.byref(count), db._handle))
    assert count.value == 2
    info = _native.ClassInfo()
    check(lib.ferry_db_get_class(ctypes.byref(info), db._handle, 1))
    assert info.name == b"Item"
    assert info.property_count == len(SCHEMA[1].properties)
    assert not info.properties  # not filled in
    with pytest.raises((ferry.NoSuchClassError, ferry.OutOfRangeError)):
        check(lib.ferry_db_get_class(ctypes.byref(info), db._handle, 2))
    prop = _native.PropertyInfo()
    with pytest.raises((ferry.NoSuchPropertyError, ferry.OutOfRangeError)):
        check(lib.ferry_db_get_property(ctypes.byref(prop), db._handle, 1, 999))
    key = ctypes.c_uint32()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_db_find_class(ctypes.byref(key), db._handle, None))
    with pytest.raises(ferry.NoSuchClassError):
        check(lib.ferry_db_find_class(ctypes.byref(key), db._handle, b"Nope"))
    with pytest.raises(ferry.NoSuchPropertyError):
        check(lib.ferry_db_find_property(ctypes.byref(key), db._handle, 0, b"nope"))
    with pytest.raises(ferry.NoSuchClassError):
        check(lib.ferry_db_find_property(ctypes.byref(key), db._handle, 77, b"name"))
    check(lib.ferry_db_find_property(ctypes.byref(key), db._handle, 1, b"complexity"))
    assert key.value == list(SCHEMA[1].properties).index("complexity")


def test_results_read_before_close_stay_readable(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA)
    with db.write():
        db.create("Person", {"_id": "a", "name": "A"})
        db.create("Person", {"_id": "b", "name": "B"})
    results = db.query("Person", "TRUEPREDICATE SORT(_id ASC)")
    db.close()
    assert len(results) == 2
    assert [o["name"] for o in results] == ["A", "B"]


def test_calls_that_work_after_close(db_path):
    db = ferry.Database.open(db_path, schema=SCHEMA, delivery="poll")
    fd = db.notification_fd()
    db.close()
    assert db.closed
    assert db.notification_fd() == fd  # valid until the handle is freed
    db.close()


SHM = "/dev/shm"

IN_MEMORY_CHILD = r"""
import os, sys, ferry
schema = [ferry.ObjectSchema("C", {"_id": ferry.Property(ferry.Type.INT, primary_key=True)})]
a = ferry.Database.open(in_memory="shm-test", schema=schema)
b = ferry.Database.open(in_memory="shm-test", schema=schema)
with a.write():
    a.create("C", {"_id": 1})
print(os.getpid(), flush=True)
if sys.argv[1] == "close":
    a.close()
    b.close()
    print("closed", flush=True)
else:
    sys.stdin.readline()  # wait to be killed
"""


def _shm_files_of(pid: int) -> list[str]:
    return [n for n in os.listdir(SHM) if n.startswith("ferry-") and f"-{pid}-" in n]


@pytest.mark.skipif(not os.access(SHM, os.W_OK), reason="no writable /dev/shm")
def test_in_memory_files_are_removed_on_last_close():
    import subprocess

    from conftest import PYTHON, child_env

    done = subprocess.run([PYTHON, "-c", IN_MEMORY_CHILD, "close"], env=child_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    assert _shm_files_of(pid) == []


@pytest.mark.skipif(not os.access(SHM, os.W_OK), reason="no writable /dev/shm")
def test_in_memory_files_of_a_killed_process_are_removed_by_the_next(mem_id):
    import signal
    import subprocess

    from conftest import PYTHON, child_env

    child = subprocess.Popen([PYTHON, "-c", IN_MEMORY_CHILD, "kill"], env=child_env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    left = _shm_files_of(pid)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert left, "the in-memory database did not use /dev/shm"
    assert _shm_files_of(pid) == left  # nobody cleaned up for the dead process yet
    # The next process that makes an in-memory database removes them.
    done = subprocess.run([PYTHON, "-c", IN_MEMORY_CHILD, "close"], env=child_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert _shm_files_of(pid) == []
