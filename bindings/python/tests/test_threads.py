"""Thread safety: several threads writing and reading, through their own handles or one."""

from __future__ import annotations

import threading

import ferry

from conftest import SCHEMA, TIMEOUT

WRITERS = 4
TRANSACTIONS = 25
PER_TRANSACTION = 4


def run_threads(targets):
    errors: list[BaseException] = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 6)
        assert not t.is_alive(), "a thread is stuck"
    assert errors == [], errors


def test_writers_and_readers_with_their_own_handles(db_path):
    with ferry.Database.open(db_path, schema=SCHEMA):
        pass
    remaining = [WRITERS]
    lock = threading.Lock()
    done = threading.Event()
    seen: list[int] = []

    def writer(w):
        def run():
            try:
                with ferry.Database.open(db_path, schema=SCHEMA) as db:
                    for t in range(TRANSACTIONS):
                        with db.write():
                            for i in range(PER_TRANSACTION):
                                db.create("Person", {"_id": f"{w}-{t}-{i}", "name": "x", "age": t})
            finally:
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        done.set()
        return run

    def reader():
        with ferry.Database.open(db_path, schema=SCHEMA) as db:
            last = 0
            while not done.is_set():
                n = len(db.query("Person"))
                # A consistent snapshot: whole transactions only, and never going back.
                assert n % PER_TRANSACTION == 0, n
                assert n >= last, (n, last)
                last = n
                seen.append(n)

    run_threads([writer(w) for w in range(WRITERS)] + [reader, reader])
    assert seen
    with ferry.Database.open(db_path, schema=SCHEMA) as db:
        assert len(db.query("Person")) == WRITERS * TRANSACTIONS * PER_TRANSACTION
        assert db.history_count() == WRITERS * TRANSACTIONS
        assert db.verify_history()


def test_one_handle_shared_by_threads(mem_db):
    stop = threading.Event()

    def writer():
        try:
            for i in range(200):
                with mem_db.write():
                    mem_db.create("Person", {"_id": str(i), "name": "n"})
                    mem_db.add("Person", str(i), "age", i)
        finally:
            stop.set()

    def reader():
        while not stop.is_set():
            for obj in mem_db.query("Person", "age >= 0 SORT(age DESC) LIMIT(5)"):
                assert obj["name"] == "n"
            mem_db.get("Person", "0")

    run_threads([writer, reader, reader, reader])
    assert len(mem_db.query("Person")) == 200


def test_counters_from_many_threads(db_path):
    with ferry.Database.open(db_path, schema=SCHEMA) as db:
        with db.write():
            db.create("Person", {"_id": "c", "name": "counter", "age": 0})

    def adder():
        with ferry.Database.open(db_path, schema=SCHEMA) as db:
            for _ in range(50):
                with db.write():
                    db.add("Person", "c", "age", 1)

    run_threads([adder] * 4)
    with ferry.Database.open(db_path, schema=SCHEMA) as db:
        assert db.get("Person", "c")["age"] == 200


def test_errors_are_per_thread(mem_db):
    # Each thread's exception carries its own message (ferry_error_last is thread-local).
    barrier = threading.Barrier(4)

    def failing(kind):
        def run():
            barrier.wait(TIMEOUT)
            for _ in range(200):
                if kind == 0:
                    try:
                        mem_db.query("Person", "nope == 1")
                    except ferry.QueryError as e:
                        assert "nope" in e.message, e.message
                elif kind == 1:
                    try:
                        mem_db.query("NoSuchClass")
                    except ferry.NoSuchClassError as e:
                        assert "NoSuchClass" in e.message, e.message
                elif kind == 2:
                    try:
                        mem_db.commit()
                    except ferry.NotInTransactionError as e:
                        assert e.message
                else:
                    try:
                        mem_db.get("Person", 5)
                    except ferry.WrongTypeError as e:
                        assert e.message
        return run

    run_threads([failing(k) for k in range(4)])


def test_object_ids_from_many_threads():
    out: list[list[ferry.ObjectId]] = [[] for _ in range(4)]

    def gen(i):
        return lambda: out[i].extend(ferry.ObjectId.generate() for _ in range(2000))

    run_threads([gen(i) for i in range(4)])
    everything = [o for chunk in out for o in chunk]
    assert len(set(everything)) == len(everything)


def test_notifications_while_threads_write(db_path, collector):
    with ferry.Database.open(db_path, schema=SCHEMA) as observer:
        observer.observe_query("Person", "TRUEPREDICATE", callback=collector)

        def writer(w):
            def run():
                with ferry.Database.open(db_path, schema=SCHEMA) as db:
                    for t in range(10):
                        with db.write():
                            db.create("Person", {"_id": f"{w}-{t}", "name": "x"})
            return run

        run_threads([writer(w) for w in range(3)])
        merged = collector.wait_merged(lambda m: len(set(m.inserted)) >= 30)
        assert len(set(merged.inserted)) == 30
