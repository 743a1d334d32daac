"""Sync end to end through the Python binding, against a real ferry-server.

The server ($FERRY_SERVER, default <repo>/build/ferry-server) runs on the seeds' Item app
(examples/item-app) for the whole module: port 0, a port file polled with a deadline, SIGTERM
at teardown. Every device is an App with its own base directory. Completions are waited for
with timeouts (the binding's blocking calls), errors reported to ``on_sync_error`` on a
condition variable: nothing sleeps to hope.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

from conftest import child_env

REPO = Path(__file__).resolve().parents[3]
APP_ID = "item-app-seeds"
SIGNING_KEY = "a-host-signing-key-of-at-least-32-bytes!"
T = 60.0  # seconds for any wait; a passing run never waits this long
REVERT_MESSAGE = (
    "Client attempted a write that is outside of permissions or query filters; it has been reverted"
)

ITEM = ObjectSchema(
    "Item",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING),
        "itemName": Property(Type.STRING),
        "complexity": Property(Type.INT),
    },
)


# --- the server --------------------------------------------------------------------------------


def _server_binary() -> Path:
    return Path(os.environ.get("FERRY_SERVER") or REPO / "build" / "ferry-server")


@contextlib.contextmanager
def run_server(work: Path, extra_env: Optional[dict[str, str]] = None,
               app_dir: Optional[Path] = None, tls: Optional[tuple[Path, Path]] = None) -> Iterator[str]:
    """Runs ferry-server on ``app_dir`` (default examples/item-app) with its data in ``work``
    (port 0, a port file polled with a deadline, SIGTERM at the end) and yields its base URL.
    ``extra_env`` adds to its environment (e.g. ``FERRY_ADMIN_TOKEN``, which enables the admin
    API). ``tls`` (a PEM certificate and its key) serves https and wss instead."""
    exe = _server_binary()
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no ferry-server at {exe} (set FERRY_SERVER)")
    port_file = work / "port"
    env = {**os.environ, "jwtSigningKey": SIGNING_KEY, **(extra_env or {})}
    proc = subprocess.Popen(
        [str(exe), "--app-dir", str(app_dir or REPO / "examples" / "item-app"), "--data", str(work / "data"),
         "--port", "0", "--port-file", str(port_file), "--log-level", "warning",
         "--weak-password-hashing-for-tests"]
        + (["--tls-certificate", str(tls[0]), "--tls-key", str(tls[1])] if tls else []),
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        port = 0
        while port == 0:
            if proc.poll() is not None:
                pytest.fail(f"ferry-server exited with {proc.returncode} before writing its port")
            try:
                text = port_file.read_text().strip()
                port = int(text) if text else 0
            except (FileNotFoundError, ValueError):
                port = 0
            if port == 0:
                if time.monotonic() > deadline:
                    pytest.fail("ferry-server wrote no port file within 60 s")
                time.sleep(0.02)  # polling a file with a deadline
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_server(tmp_path_factory.mktemp("ferry-server")) as url:
        yield url


# --- devices ----------------------------------------------------------------------------------


class ErrorLog:
    """``on_sync_error``: records every error and, for compensating writes, whether the object
    was already gone locally when the handler ran."""

    def __init__(self) -> None:
        self.errors: list[ferry.SyncError] = []
        self.gone_at_handler: list[bool] = []
        self.sessions: list[Optional[ferry.SyncSession]] = []
        self.threads: list[int] = []
        self.db: Optional[ferry.Database] = None
        self._cond = threading.Condition()

    def __call__(self, session: Optional[ferry.SyncSession], error: ferry.SyncError) -> None:
        gone = [self.db.get(w.object_type, w.primary_key) is None for w in error.compensating_writes] if self.db else []
        with self._cond:
            self.errors.append(error)
            self.gone_at_handler.extend(gone)
            self.sessions.append(session)
            self.threads.append(threading.get_ident())
            self._cond.notify_all()

    def wait(self, count: int, timeout: float = T) -> list[ferry.SyncError]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.errors) >= count, timeout):
                pytest.fail(f"timed out waiting for {count} sync errors; got {self.errors}")
            return list(self.errors)


class Device:
    """An App with its own base directory, a logged-in user and a synced Item database."""

    counter = 0

    def __init__(self, url: str, base: Path, credentials: ferry.Credentials,
                 register: Optional[tuple[str, str]] = None) -> None:
        Device.counter += 1
        self.dir = base / f"device-{Device.counter}"
        self.dir.mkdir()
        self.path = self.dir / "items.ferry"
        self.app = ferry.App(app_id=APP_ID, base_url=url, base_directory=self.dir,
                             log_level=ferry.LogLevel.WARN)
        self.errors = ErrorLog()
        self.app.on_sync_error = self.errors
        if register:
            self.app.register_email(*register, timeout=T)
        self.user = self.app.log_in(credentials, timeout=T)
        self.open_session()

    def open_session(self) -> None:
        self.session = self.app.open_synced(self.user, self.path, [ITEM])
        self.db = self.session.database
        self.errors.db = self.db
        # A first download: the device starts from the server's state.
        self.session.wait_for_download(T)

    def subscribe(self, query: str, name: str = "items") -> None:
        version = self.session.update_subscriptions(lambda s: s.add(name, "Item", query))
        self.session.wait_for_subscriptions(version, T)

    def sync(self) -> None:
        self.session.wait_for_upload(T)
        self.session.wait_for_download(T)

    def create(self, pk: ferry.ObjectId, owner: str, name: str, complexity: int) -> None:
        with self.db.write():
            self.db.create("Item", {"_id": pk, "ownerId": owner, "itemName": name, "complexity": complexity})

    def item(self, pk: ferry.ObjectId) -> Optional[ferry.Object]:
        return self.db.get("Item", pk)

    def close(self) -> None:
        self.app.close()  # closes the session first
        self.db.close()


@pytest.fixture
def devices(server: str, tmp_path: Path) -> Iterator[Any]:
    made: list[Device] = []

    def make(credentials: ferry.Credentials, register: Optional[tuple[str, str]] = None) -> Device:
        d = Device(server, tmp_path, credentials, register)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def new_email(who: str) -> str:
    return f"{who}-{uuid.uuid4().hex}@example.com"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the scenarios -------------------------------------------------------------------------------


def test_two_devices_of_one_user_sync_both_ways(devices: Any) -> None:
    email = new_email("ana")
    a = devices(ferry.Credentials.email_password(email, "password123"), register=(email, "password123"))
    b = devices(ferry.Credentials.email_password(email, "password123"))
    assert a.user == b.user and a.user.id == b.user.id
    assert a.user.state == ferry.UserState.LOGGED_IN
    a.subscribe("complexity <= 4")
    b.subscribe("complexity <= 4")
    assert a.session.subscriptions.state == ferry.SubscriptionState.COMPLETE
    pk = ferry.ObjectId.generate()
    a.create(pk, a.user.id, "Write code", 3)
    a.sync()
    b.sync()
    assert dict(b.item(pk)) == {"_id": pk, "ownerId": a.user.id, "itemName": "Write code", "complexity": 3}
    with b.db.write():
        b.db.set("Item", pk, "itemName", "Write tests")
    b.sync()
    a.sync()
    assert a.item(pk)["itemName"] == "Write tests"
    assert a.errors.errors == [] and b.errors.errors == []


def test_another_user_never_receives_the_items(devices: Any) -> None:
    a = devices(ferry.Credentials.anonymous())
    other = devices(ferry.Credentials.anonymous())
    assert a.user.id != other.user.id
    a.subscribe("complexity <= 4")
    a.create(ferry.ObjectId.generate(), a.user.id, "mine", 1)
    a.create(ferry.ObjectId.generate(), a.user.id, "mine too", 4)
    a.sync()
    assert len(a.db.objects("Item")) == 2
    for i, query in enumerate(["TRUEPREDICATE", "complexity >= 0", "complexity <= 4", f'ownerId == "{a.user.id}"']):
        other.subscribe(query, name=f"try-{i}")
        other.sync()
        assert len(other.db.objects("Item")) == 0, query
    assert len(other.session.subscriptions) == 4
    a.create(ferry.ObjectId.generate(), a.user.id, "written later", 2)
    a.sync()
    other.sync()
    assert len(other.db.objects("Item")) == 0
    assert other.errors.errors == []


def test_out_of_view_and_wrong_owner_writes_are_reverted(devices: Any) -> None:
    a = devices(ferry.Credentials.anonymous())
    a.subscribe("complexity <= 4")
    fine, complex_, foreign = (ferry.ObjectId.generate() for _ in range(3))
    a.create(fine, a.user.id, "Fine", 2)
    a.create(complex_, a.user.id, "Do the dishes", 7)
    a.errors.wait(1)
    a.create(foreign, "This string does not match the user.id", "Write code that generates a permission error", 1)
    errors = a.errors.wait(2)
    a.sync()
    assert len(a.errors.errors) == 2
    for e in errors:
        assert e.code == 231
        assert e.message == REVERT_MESSAGE
        assert e.is_fatal is False
        assert e.action == ferry.SyncAction.WARNING
    assert errors[0].compensating_writes == [ferry.CompensatingWrite(
        "Item", complex_, f'write to "{complex_}" in table "Item" not allowed; object is outside of the current query view')]
    assert errors[1].compensating_writes == [ferry.CompensatingWrite(
        "Item", foreign, f'write to "{foreign}" in table "Item" was denied by write filter in role "owner-read-write"')]
    # the handler ran on the loop thread, with the session, after the revert was integrated
    assert a.errors.gone_at_handler == [True, True]
    assert all(s is a.session for s in a.errors.sessions)
    assert all(t != threading.get_ident() for t in a.errors.threads)
    assert a.item(complex_) is None and a.item(foreign) is None
    assert a.item(fine) is not None


def test_offline_edits_converge(devices: Any) -> None:
    email = new_email("bo")
    a = devices(ferry.Credentials.email_password(email, "password123"), register=(email, "password123"))
    b = devices(ferry.Credentials.email_password(email, "password123"))
    a.subscribe("complexity <= 4")
    b.subscribe("complexity <= 4")
    pk, erased = ferry.ObjectId.generate(), ferry.ObjectId.generate()
    a.create(pk, a.user.id, "start", 0)
    a.create(erased, a.user.id, "to erase", 0)
    a.sync()
    b.sync()
    assert b.item(erased) is not None
    # offline: the sessions stop; the databases stay usable locally
    a.session.close(close_database=False)
    b.session.close(close_database=False)
    with a.db.write():  # a first...
        a.db.set("Item", pk, "itemName", "from a")
        a.db.add("Item", pk, "complexity", 1)
        a.db.delete("Item", erased)
    with b.db.write():  # ...b later: b's name wins, the adds sum up, the erase wins
        b.db.set("Item", pk, "itemName", "from b")
        b.db.add("Item", pk, "complexity", 2)
        b.db.set("Item", erased, "itemName", "updated")
    old = [a.db, b.db]
    b.open_session()  # back online, b uploading first
    b.sync()
    a.open_session()
    a.sync()
    b.sync()
    a.sync()
    for d in (a, b):
        assert d.item(pk)["itemName"] == "from b"
        assert d.item(pk)["complexity"] == 3
        assert d.item(erased) is None
    assert a.session.subscriptions.find("items") == ferry.Subscription("items", "Item", "complexity <= 4")
    for db in old:
        db.close()
    assert a.errors.errors == [] and b.errors.errors == []


def test_subscription_on_a_non_queryable_field_is_rejected(devices: Any) -> None:
    a = devices(ferry.Credentials.anonymous())
    version = a.session.update_subscriptions(lambda s: s.add("by-name", "Item", 'itemName == "x"'))
    with pytest.raises(ferry.SyncServerError, match="itemName") as info:
        a.session.wait_for_subscriptions(version, T)
    assert info.value.code == -22
    subs = a.session.subscriptions
    assert subs.version == version
    assert subs.state == ferry.SubscriptionState.ERROR
    assert "itemName" in subs.error
    assert list(subs) == [ferry.Subscription("by-name", "Item", 'itemName == "x"')]
    errors = a.errors.wait(1)
    assert errors[0].code == 226 and not errors[0].is_fatal and "itemName" in errors[0].message

    def replace(s: ferry.MutableSubscriptionSet) -> None:
        assert s.remove("by-name")
        s.add("items", "Item", "complexity <= 4")

    good = a.session.update_subscriptions(replace)
    assert good == version + 1
    a.session.wait_for_subscriptions(good, T)  # the session kept syncing
    assert a.session.subscriptions.state == ferry.SubscriptionState.COMPLETE


def test_users_are_cached_and_log_out(server: str, tmp_path: Path) -> None:
    email = new_email("cy")
    d = Device(server, tmp_path, ferry.Credentials.email_password(email, "secret-pass"), register=(email, "secret-pass"))
    d.subscribe("complexity <= 4")
    pk = ferry.ObjectId.generate()
    d.create(pk, d.user.id, "cached", 1)
    d.sync()
    user_id = d.user.id
    d.close()

    with ferry.App(app_id=APP_ID, base_url=server, base_directory=d.dir) as app:
        user = app.current_user
        assert user is not None and user.id == user_id and user.logged_in
        assert [u.id for u in app.users] == [user_id]
        with app.open_synced(user, d.path, [ITEM]) as session:
            session.sync(T)  # with the cached tokens
            assert session.database.get("Item", pk) is not None
        app.log_out(user, timeout=T)
        assert user.state == ferry.UserState.LOGGED_OUT
        assert app.current_user is None
        assert len(app.users) == 1
        with pytest.raises(ferry.AuthError):
            app.open_synced(user, d.path, [ITEM])
    with ferry.App(app_id=APP_ID, base_url=server, base_directory=d.dir) as app:
        assert app.current_user is None


def test_login_failures(server: str, tmp_path: Path) -> None:
    with ferry.App(app_id=APP_ID, base_url=server, base_directory=tmp_path) as app:
        email = new_email("dee")
        app.register_email(email, "right-password", timeout=T)
        with pytest.raises(ferry.AuthError):
            app.log_in(ferry.Credentials.email_password(email, "wrong-password"), timeout=T)
        with pytest.raises(ferry.AuthError):
            app.log_in(ferry.Credentials.email_password(new_email("nobody"), "whatever1"), timeout=T)
        with pytest.raises(ferry.AuthError):
            app.log_in(ferry.Credentials.jwt("not.a.jwt"), timeout=T)
        with pytest.raises(ferry.AuthError):
            app.log_in(ferry.Credentials.api_key("no-such-key"), timeout=T)
        with pytest.raises(ferry.FerryError):
            app.register_email(email, "right-password", timeout=T)
        assert app.users == []
        # bad arguments fail at the call, before anything is sent
        with pytest.raises(ferry.InvalidArgumentError):
            app.log_in(ferry.Credentials(kind=99), timeout=T)


def test_closed_port_is_a_network_error(tmp_path: Path) -> None:
    with ferry.App(app_id=APP_ID, base_url=f"http://127.0.0.1:{closed_port()}", base_directory=tmp_path) as app:
        with pytest.raises(ferry.NetworkError):
            app.log_in(ferry.Credentials.anonymous(), timeout=T)


def test_closed_port_fails_fast(tmp_path: Path) -> None:
    """Whatever its code, a refused connection is an error at once, not a timeout."""
    with ferry.App(app_id=APP_ID, base_url=f"http://127.0.0.1:{closed_port()}", base_directory=tmp_path) as app:
        with pytest.raises((ferry.NetworkError, ferry.FerryIOError)) as info:
            app.log_in(ferry.Credentials.anonymous(), timeout=T)
        assert "127.0.0.1" in str(info.value)


def test_asyncio_variants(server: str, tmp_path: Path) -> None:
    async def main() -> None:
        with ferry.App(app_id=APP_ID, base_url=server, base_directory=tmp_path) as app:
            user = await app.async_log_in(ferry.Credentials.anonymous())
            with app.open_synced(user, tmp_path / "a.ferry", [ITEM]) as session:
                await session.async_wait_for_download()
                v = session.update_subscriptions(lambda s: s.add("items", "Item", "complexity <= 4"))
                await session.async_wait_for_subscriptions(v)
                with session.database.write():
                    session.database.create("Item", {"_id": ferry.ObjectId.generate(), "ownerId": user.id,
                                                     "itemName": "async", "complexity": 1})
                await asyncio.gather(session.async_wait_for_upload(), session.async_wait_for_download())
            with pytest.raises(ferry.AuthError):
                await app.async_log_in(ferry.Credentials.api_key("no-such-key"))

    asyncio.run(main())


def test_session_and_app_lifetimes(server: str, tmp_path: Path) -> None:
    app = ferry.App(app_id=APP_ID, base_url=server, base_directory=tmp_path)
    user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
    session, db = app.open_synced(user, tmp_path / "l.ferry", [ITEM])
    session.wait_for_download(T)
    app.on_sync_error = lambda s, e: None
    app.on_sync_error = None
    app.close()  # closes the session first (the library needs that order)
    assert session.closed
    with pytest.raises(ValueError):
        session.wait_for_upload(T)
    assert len(db.objects("Item")) == 0  # the database stays usable locally
    db.close()
    app.close()  # idempotent


_FREE_APP_FIRST = r"""
import ctypes, sys, threading
import ferry
from ferry import _native
url, path = sys.argv[1], sys.argv[2]
lib = _native.lib()
app = ferry.App(app_id="item-app-seeds", base_url=url, base_directory=path)
user = app.log_in(ferry.Credentials.anonymous(), timeout=60)
schema = ferry.Schema([ferry.ObjectSchema("Item", {"_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True)})])
opts = _native.SyncOptions(); lib.ferry_sync_options_init(ctypes.byref(opts), 1)
opts.path = (path + "/x.ferry").encode(); opts.schema = schema.handle
session, db = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.ferry_sync_open(ctypes.byref(session), ctypes.byref(db), user.handle, ctypes.byref(opts)) == 0
lib.ferry_app_free(app.handle)          # the App first: ferry.h allows any order
lib.ferry_sync_session_free(session)    # then the session
lib.ferry_db_free(db)
print("ok")
"""


def test_freeing_the_app_before_its_session_does_not_crash(server: str, tmp_path: Path) -> None:
    env = child_env()
    env["SWIFT_BACKTRACE"] = "enable=no"
    r = subprocess.run([sys.executable, "-c", _FREE_APP_FIRST, server, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-500:]}"
