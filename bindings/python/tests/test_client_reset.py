"""Client reset (issue 5) through the Python binding, against a real ferry-server.

The server runs with ``FERRY_ADMIN_TOKEN`` (test_sync.py's ``run_server``, one server for this
module). A test triggers a reset the way an operator would: POST
``/api/admin/v1/sync/terminate`` then ``/api/admin/v1/sync/enable``; the server then has a new
identity and has forgotten every client file, so each device's next bind is refused with a
client-reset error and its session runs its ``client_reset_mode``. Devices reconnect quickly
(``reconnect_delay_min_ms=50``). Every wait is on a condition, an event or a binding wait with a
timeout; nothing sleeps to hope.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import subprocess
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

import ferry
from ferry import ClientResetMode, ClientResetOutcome, SyncAction
from ferry import _native

from test_sync import APP_ID, ITEM, REPO, run_server

T = 30.0  # seconds for any one wait; a passing run never waits this long
ADMIN_TOKEN = "an-admin-token-for-the-python-client-reset-tests"
PASSWORD = "password123"
FAST = {"reconnect_delay_min_ms": 50, "reconnect_delay_max_ms": 200}
SERVER_RESET_CODE = 208  # the server's "client file unknown: the device must reset"


# --- the server and its admin API ------------------------------------------------------------


@pytest.fixture(scope="module")
def reset_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_server(tmp_path_factory.mktemp("ferry-reset-server"), {"FERRY_ADMIN_TOKEN": ADMIN_TOKEN}) as url:
        yield url


def admin_post(url: str, path: str) -> bytes:
    request = urllib.request.Request(f"{url}/api/admin/v1/{path}", data=b"", method="POST",
                                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, timeout=T) as response:
        assert 200 <= response.status < 300, f"POST {path}: {response.status}"
        return response.read()


def terminate_and_enable(url: str) -> None:
    """The server forgets every client file: each device's next bind must reset."""
    admin_post(url, "sync/terminate")
    admin_post(url, "sync/enable")


# --- helpers -----------------------------------------------------------------------------------


class Events:
    """Records calls (with their thread) and lets the test wait for a predicate over them."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.threads: list[int] = []
        self._cond = threading.Condition()

    def add(self, item: Any) -> None:
        with self._cond:
            self.items.append(item)
            self.threads.append(threading.get_ident())
            self._cond.notify_all()

    def __call__(self, session: Optional[ferry.SyncSession], error: ferry.SyncError) -> None:
        self.add(error)  # as App.on_sync_error

    def wait_for(self, predicate: Callable[[list[Any]], bool], what: str, timeout: float = T) -> list[Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.items), timeout):
                pytest.fail(f"timed out after {timeout} s waiting for {what}; got {self.items}")
            return list(self.items)

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.items)


def is_reset_outcome(error: Any) -> bool:
    """The error that ends a reset: a finished automatic one (with its report) or a fatal one."""
    return isinstance(error, ferry.SyncError) and (error.is_fatal or error.client_reset_report is not None)


def reset_error(errors: Events) -> ferry.SyncError:
    items = errors.wait_for(lambda e: any(map(is_reset_outcome, e)), "the client reset's error")
    return next(e for e in items if is_reset_outcome(e))


class Device:
    """An App with its own base directory (fast reconnects), a user and a synced Item database
    subscribed to the user's items."""

    def __init__(self, url: str, directory: Path, email: str, *, register: bool = False, **open_options: Any) -> None:
        directory.mkdir()
        self.dir = directory
        self.path = directory / "items.ferry"
        self.app = ferry.App(app_id=APP_ID, base_url=url, base_directory=directory,
                             log_level=ferry.LogLevel.ERROR, **FAST)
        self.errors = Events()
        self.app.on_sync_error = self.errors
        if register:
            self.app.register_email(email, PASSWORD, timeout=T)
        self.user = self.app.log_in(ferry.Credentials.email_password(email, PASSWORD), timeout=T)
        self.databases: list[ferry.Database] = []
        self.session = self.open(**open_options)

    @property
    def owner(self) -> str:
        return self.user.id

    @property
    def db(self) -> ferry.Database:
        return self.session.database

    def open(self, **options: Any) -> ferry.SyncSession:
        owner = self.user.id
        session = self.app.open_synced(
            self.user, self.path, [ITEM], timeout=T,
            initial_subscriptions=lambda subs: subs.add("mine", "Item", f"ownerId == '{owner}'"), **options)
        self.databases.append(session.database)
        session.wait_for_subscriptions(session.subscriptions.version, T)
        return session

    def create(self, pk: ferry.ObjectId, name: str, complexity: int = 1) -> None:
        with self.db.write():
            self.db.create("Item", {"_id": pk, "ownerId": self.owner, "itemName": name, "complexity": complexity})

    def item(self, pk: ferry.ObjectId) -> Optional[ferry.Object]:
        return self.db.get("Item", pk)

    def names(self) -> set[str]:
        return {o["itemName"] for o in self.db.objects("Item")}

    def close(self) -> None:
        self.app.close()
        for db in self.databases:
            if not db.closed:
                db.close()


class Devices:
    def __init__(self, url: str, base: Path) -> None:
        self.url = url
        self.base = base
        self.made: list[Device] = []

    def pair(self, **a_options: Any) -> tuple[Device, Device]:
        """Two devices of one (new) user; ``a_options`` go to device A's open."""
        email = f"reset-{uuid.uuid4().hex}@example.com"
        a = Device(self.url, self.base / f"a-{len(self.made)}", email, register=True, **a_options)
        self.made.append(a)
        b = Device(self.url, self.base / f"b-{len(self.made)}", email)
        self.made.append(b)
        assert a.user.id == b.user.id
        return a, b

    def single(self, **options: Any) -> Device:
        """One device of a new user; ``options`` go to its open."""
        email = f"reset-{uuid.uuid4().hex}@example.com"
        d = Device(self.url, self.base / f"single-{len(self.made)}", email, register=True, **options)
        self.made.append(d)
        return d

    def close(self) -> None:
        for d in self.made:
            d.close()


@pytest.fixture
def devices(reset_server: str, tmp_path: Path) -> Iterator[Devices]:
    d = Devices(reset_server, tmp_path)
    yield d
    d.close()


# --- recovery ------------------------------------------------------------------------------------


def test_recovery_reports_to_the_handler_and_the_callbacks_and_the_before_copy_keeps_the_old_data(
        devices: Devices, tmp_path: Path) -> None:
    copy_path = tmp_path / "before-the-reset.ferry"
    calls = Events()
    kept: dict[str, Any] = {}

    def before_reset(before: ferry.Database) -> None:
        kept["before"] = before
        kept["before results"] = before.objects("Item")
        calls.add(("before", len(kept["before results"]), before.lent))
        before.write_copy(copy_path)
        try:
            before.close()
        except ferry.FerryError as exc:  # not the host's to close
            calls.add(("close before", type(exc)))
        try:
            with before.write():
                pass
        except ferry.FerryError as exc:  # a read-only snapshot
            calls.add(("write before", type(exc)))

    def after_reset(before: ferry.Database, after: ferry.Database, report: ferry.ClientResetReport) -> None:
        kept["after"], kept["after's before"] = after, before
        calls.add(("after", len(before.objects("Item")), len(after.objects("Item")), report))

    a, b = devices.pair(client_reset_mode=ClientResetMode.RECOVER_UNSYNCED_CHANGES,
                        before_reset=before_reset, after_reset=after_reset)
    ids = [ferry.ObjectId.generate() for _ in range(4)]
    for n, pk in enumerate(ids[:3]):
        a.create(pk, f"item {n}")
    a.session.wait_for_upload(T)
    b.session.wait_for_download(T)
    assert b.names() == {"item 0", "item 1", "item 2"}

    # A goes offline and changes things; B changes some of the same objects.
    a.session.suspend()
    with a.db.write():
        a.db.create("Item", {"_id": ids[3], "ownerId": a.owner, "itemName": "new on a", "complexity": 1})
        a.db.set("Item", ids[0], "itemName", "renamed on a")
        a.db.set("Item", ids[1], "complexity", 4)
        a.db.delete("Item", ids[2])
    with b.db.write():
        b.db.set("Item", ids[0], "itemName", "renamed on b")
        b.db.set("Item", ids[0], "complexity", 3)
        b.db.delete("Item", ids[1])
    b.session.wait_for_upload(T)

    terminate_and_enable(devices.url)
    a.session.resume()
    error = reset_error(a.errors)
    assert error.is_fatal is False
    assert error.action == SyncAction.CLIENT_RESET
    assert error.code == SERVER_RESET_CODE
    assert error.client_reset_backup_path is None and error.client_reset_token is None
    report = error.client_reset_report
    assert report is not None and report.recovered is True
    assert report.unsynced_changesets == 1
    by_pk = {e.primary_key: e for e in report.entries}
    assert len(report.entries) == 4 and set(by_pk) == set(ids)
    assert all(e.object_type == "Item" and isinstance(e.outcome, ClientResetOutcome) for e in report.entries)
    assert by_pk[ids[3]].reason == "created on this device and not yet synced"
    assert by_pk[ids[3]].outcome == ClientResetOutcome.RECOVERED
    assert by_pk[ids[0]].reason == "the device's updates applied over the server's: itemName"
    assert by_pk[ids[0]].outcome == ClientResetOutcome.RECOVERED
    assert by_pk[ids[1]].outcome == ClientResetOutcome.DISCARDED  # deleted on the server
    assert by_pk[ids[2]].outcome == ClientResetOutcome.RECOVERED  # deleted on the device

    # The callbacks ran (on Ferry's loop thread, before the handler), with the same report.
    got = calls.wait_for(lambda c: any(x[0] == "after" for x in c), "after_reset")
    assert got[0] == ("before", 3, True)  # the snapshot: 3 items (4 created, 1 deleted)
    assert ("close before", ferry.InvalidArgumentError) in got
    assert any(x[0] == "write before" and issubclass(x[1], ferry.FerryError) for x in got)
    after_call = next(x for x in got if x[0] == "after")
    assert after_call[1] == 3 and after_call[2] == 2  # after: items 0 and 3
    assert after_call[3] == report
    assert all(t != threading.get_ident() for t in calls.threads)

    # The lent handles are unusable now: never a dangling pointer.
    for name in ("before", "after", "after's before"):
        db = kept[name]
        assert db.lent and db.closed
        with pytest.raises(ferry.ClosedError):
            db.objects("Item")
        with pytest.raises(ferry.ClosedError):
            db.get("Item", ids[0])
        with pytest.raises(ferry.ClosedError):
            db.write_copy(tmp_path / f"never-{name.replace(' ', '-')}.ferry")
    with pytest.raises(ValueError):  # results read from a lent handle were closed with it
        kept["before results"][0]

    # The copy made in before_reset is an ordinary database with A's data before the reset.
    with ferry.Database.open(copy_path) as copy:
        assert copy.get("Item", ids[3])["itemName"] == "new on a"
        assert copy.get("Item", ids[0])["itemName"] == "renamed on a"
        assert copy.get("Item", ids[1])["complexity"] == 4
        assert copy.get("Item", ids[2]) is None

    # Both devices converge: A's update wins the conflicting field, B's other change stays.
    a.session.sync(T)
    b.session.sync(T)
    for d in (a, b):
        assert d.item(ids[0])["itemName"] == "renamed on a", d.dir
        assert d.item(ids[0])["complexity"] == 3, d.dir
        assert d.item(ids[1]) is None, d.dir  # deleted on the server, updated on A: stays deleted
        assert d.item(ids[2]) is None, d.dir  # deleted on A
        assert d.item(ids[3])["itemName"] == "new on a", d.dir
    # The session syncs on as the new client file.
    later = ferry.ObjectId.generate()
    a.create(later, "after the reset")
    a.session.wait_for_upload(T)
    b.session.wait_for_download(T)
    assert b.item(later) is not None
    assert a.session.state == ferry.SessionState.ACTIVE


# --- discard -------------------------------------------------------------------------------------


def test_discard_drops_the_unsynced_changes_and_reports_each_one(devices: Devices) -> None:
    reports = Events()
    a, b = devices.pair(client_reset_mode=ClientResetMode.DISCARD_UNSYNCED_CHANGES,
                        after_reset=lambda before, after, report: reports.add(report))
    kept, dropped = ferry.ObjectId.generate(), ferry.ObjectId.generate()
    a.create(kept, "synced")
    a.session.wait_for_upload(T)
    a.session.suspend()
    a.create(dropped, "never synced")
    with a.db.write():
        a.db.set("Item", kept, "itemName", "renamed offline")
    terminate_and_enable(devices.url)
    a.session.resume()

    error = reset_error(a.errors)
    assert error.is_fatal is False
    assert error.action == SyncAction.CLIENT_RESET
    report = error.client_reset_report
    assert report is not None
    assert report.recovered is False
    assert report.unsynced_changesets == 2
    assert [e.primary_key for e in report.entries] == [dropped, kept]
    for e in report.entries:
        assert e.outcome == ClientResetOutcome.DISCARDED
        assert e.reason == "the client reset mode is discardUnsyncedChanges"
    assert reports.wait_for(lambda r: len(r) == 1, "after_reset") == [report]
    assert a.item(dropped) is None
    assert a.item(kept)["itemName"] == "synced"
    a.session.wait_for_upload(T)
    b.session.wait_for_download(T)
    assert b.names() == {"synced"}


# --- manual --------------------------------------------------------------------------------------


def test_manual_mode_hands_the_reset_to_the_host(devices: Devices) -> None:
    callbacks = Events()
    a, b = devices.pair(client_reset_mode=ClientResetMode.MANUAL,
                        before_reset=lambda before: callbacks.add("before"),
                        after_reset=lambda before, after, report: callbacks.add("after"))
    synced, unsynced = ferry.ObjectId.generate(), ferry.ObjectId.generate()
    a.create(synced, "synced")
    a.session.wait_for_upload(T)
    a.session.suspend()
    a.create(unsynced, "unsynced")
    terminate_and_enable(devices.url)
    a.session.resume()

    error = reset_error(a.errors)
    assert error.is_fatal is True
    assert error.action == SyncAction.CLIENT_RESET
    assert error.code == SERVER_RESET_CODE
    assert error.client_reset_report is None
    token, backup = error.client_reset_token, error.client_reset_backup_path
    assert isinstance(token, str) and isinstance(backup, str)
    assert token == os.fsdecode(a.path)
    assert a.session.state == ferry.SessionState.INACTIVE
    assert a.item(unsynced) is not None  # nothing changed
    assert callbacks.snapshot() == []  # the callbacks are for the automatic modes
    assert not os.path.exists(backup)

    # The file is still open: the reset refuses, clearly.
    with pytest.raises(ferry.InvalidArgumentError, match="still open"):
        a.app.handle_client_reset(token)
    a.session.close()  # the session and its database handle
    a.app.handle_client_reset(token)
    assert not a.path.exists()
    with pytest.raises(ferry.NotFoundError):
        a.app.handle_client_reset(token)  # performed already

    # The backup is an ordinary database holding the device's data as it was.
    with ferry.Database.open(backup) as old:
        assert old.get("Item", unsynced)["itemName"] == "unsynced"
        assert old.get("Item", synced)["itemName"] == "synced"

    # The next open downloads a fresh copy: the server's state, nothing of the old file.
    a.session = a.open()
    a.session.wait_for_download(T)
    assert a.names() == {"synced"}
    assert a.item(unsynced) is None
    assert a.session.state == ferry.SessionState.ACTIVE
    with pytest.raises(ferry.NotFoundError):
        a.app.handle_client_reset(token + ".nothing")


def test_a_manual_reset_never_handled_happens_at_the_next_open(devices: Devices) -> None:
    a, _ = devices.pair(client_reset_mode=ClientResetMode.MANUAL)
    unsynced = ferry.ObjectId.generate()
    a.session.suspend()
    a.create(unsynced, "unsynced")
    terminate_and_enable(devices.url)
    a.session.resume()
    error = reset_error(a.errors)
    assert error.is_fatal and error.client_reset_backup_path
    a.session.close()
    a.session = a.open()
    assert os.path.exists(error.client_reset_backup_path)
    assert a.item(unsynced) is None
    a.session.wait_for_download(T)
    assert a.session.state == ferry.SessionState.ACTIVE


# --- recovery disabled on the server ---------------------------------------------------------------


@pytest.fixture
def no_recovery_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose sync config disables recovery (``is_recovery_mode_disabled``)."""
    app_dir = tmp_path_factory.mktemp("no-recovery-app") / "item-app"
    shutil.copytree(REPO / "examples" / "item-app", app_dir)
    config = app_dir / "sync" / "config.json"
    text = config.read_text()
    assert '"is_recovery_mode_disabled": false' in text
    config.write_text(text.replace('"is_recovery_mode_disabled": false', '"is_recovery_mode_disabled": true'))
    with run_server(tmp_path_factory.mktemp("no-recovery-server"), {"FERRY_ADMIN_TOKEN": ADMIN_TOKEN},
                    app_dir=app_dir) as url:
        yield url


def test_recovery_disabled_on_the_server_discards_or_hands_over_by_mode(
        no_recovery_server: str, tmp_path: Path) -> None:
    devices = Devices(no_recovery_server, tmp_path)
    try:
        discarding = devices.single(client_reset_mode=ClientResetMode.RECOVER_OR_DISCARD_UNSYNCED_CHANGES)
        strict = devices.single(client_reset_mode=ClientResetMode.RECOVER_UNSYNCED_CHANGES)
        id1, id2 = ferry.ObjectId.generate(), ferry.ObjectId.generate()
        for d, pk in ((discarding, id1), (strict, id2)):
            d.session.suspend()
            d.create(pk, "unsynced")
        terminate_and_enable(no_recovery_server)
        discarding.session.resume()
        strict.session.resume()

        e1 = reset_error(discarding.errors)
        assert e1.is_fatal is False
        assert e1.action == SyncAction.CLIENT_RESET_NO_RECOVERY
        assert e1.client_reset_report is not None and e1.client_reset_report.recovered is False
        assert [(e.primary_key, e.outcome, e.reason) for e in e1.client_reset_report.entries] == [
            (id1, ClientResetOutcome.DISCARDED, "the server disabled recovery")]
        assert discarding.item(id1) is None

        e2 = reset_error(strict.errors)  # the fallback of RECOVER_UNSYNCED_CHANGES: handed over
        assert e2.is_fatal is True
        assert e2.action == SyncAction.CLIENT_RESET_NO_RECOVERY
        assert e2.client_reset_report is None
        assert e2.client_reset_token == os.fsdecode(strict.path) and e2.client_reset_backup_path
        assert strict.item(id2) is not None
        strict.session.close()
        strict.app.handle_client_reset(e2.client_reset_token)
        with ferry.Database.open(e2.client_reset_backup_path) as old:
            assert old.get("Item", id2)["itemName"] == "unsynced"
    finally:
        devices.close()


# --- asyncio -------------------------------------------------------------------------------------


def test_asyncio_open_and_waits_around_a_reset(devices: Devices, tmp_path: Path) -> None:
    """``async_open_synced`` with the reset options; the after_reset callback (loop thread)
    writes on the reset database and wakes the event loop; the awaits carry on after it."""
    email = f"reset-async-{uuid.uuid4().hex}@example.com"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ferry.ClientResetReport] = loop.create_future()
        written = ferry.ObjectId.generate()
        dirs = [tmp_path / "async-a", tmp_path / "async-b"]
        for d in dirs:
            d.mkdir()
        with ferry.App(app_id=APP_ID, base_url=devices.url, base_directory=dirs[0], **FAST) as app_a, \
                ferry.App(app_id=APP_ID, base_url=devices.url, base_directory=dirs[1], **FAST) as app_b:
            await app_a.async_register_email(email, PASSWORD)
            user = await app_a.async_log_in(ferry.Credentials.email_password(email, PASSWORD))
            mine = f"ownerId == '{user.id}'"

            def after_reset(before: ferry.Database, after: ferry.Database, report: ferry.ClientResetReport) -> None:
                with after.write():  # allowed on the reset database
                    after.create("Item", {"_id": written, "ownerId": user.id, "itemName": "written in after_reset",
                                          "complexity": 2})
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(report))

            session = await app_a.async_open_synced(
                user, dirs[0] / "items.ferry", [ITEM], download_before_open=ferry.DownloadBeforeOpen.ALWAYS,
                initial_subscriptions=lambda s: s.add("mine", "Item", mine),
                client_reset_mode=ClientResetMode.RECOVER_OR_DISCARD_UNSYNCED_CHANGES, after_reset=after_reset,
                timeout=T)
            db = session.database
            try:
                synced, offline = ferry.ObjectId.generate(), ferry.ObjectId.generate()
                with db.write():
                    db.create("Item", {"_id": synced, "ownerId": user.id, "itemName": "synced", "complexity": 1})
                await session.async_sync(T)
                session.suspend()
                with db.write():
                    db.create("Item", {"_id": offline, "ownerId": user.id, "itemName": "made offline",
                                       "complexity": 1})
                await asyncio.to_thread(terminate_and_enable, devices.url)
                session.resume()
                report = await asyncio.wait_for(done, T)
                assert report.recovered is True
                assert [(e.primary_key, e.outcome) for e in report.entries] == [(offline, ClientResetOutcome.RECOVERED)]
                await session.async_wait_for_upload(T)
                assert db.get("Item", written)["itemName"] == "written in after_reset"

                # Another device of the user, opened after downloading, has everything.
                user_b = await app_b.async_log_in(ferry.Credentials.email_password(email, PASSWORD))
                other = await app_b.async_open_synced(
                    user_b, dirs[1] / "items.ferry", [ITEM], download_before_open=ferry.DownloadBeforeOpen.ALWAYS,
                    initial_subscriptions=lambda s: s.add("mine", "Item", mine), timeout=T)
                try:
                    names = {o["itemName"] for o in other.database.objects("Item")}
                    assert names == {"synced", "made offline", "written in after_reset"}
                finally:
                    other.close()
            finally:
                session.close()

    asyncio.run(main())


# --- callbacks that raise ---------------------------------------------------------------------


def test_exceptions_in_reset_callbacks_are_logged_and_the_reset_completes(
        devices: Devices, caplog: pytest.LogCaptureFixture) -> None:
    def before_reset(before: ferry.Database) -> None:
        raise RuntimeError("boom before")

    def after_reset(before: ferry.Database, after: ferry.Database, report: ferry.ClientResetReport) -> None:
        raise RuntimeError("boom after")

    with caplog.at_level(logging.ERROR, logger="ferry"):
        a, _ = devices.pair(before_reset=before_reset, after_reset=after_reset)
        unsynced = ferry.ObjectId.generate()
        a.session.suspend()
        a.create(unsynced, "unsynced")
        terminate_and_enable(devices.url)
        a.session.resume()
        error = reset_error(a.errors)
    assert error.is_fatal is False and error.client_reset_report is not None
    assert [e.primary_key for e in error.client_reset_report.entries] == [unsynced]
    logged = [r for r in caplog.records if r.name == "ferry" and r.exc_info]
    assert {str(r.exc_info[1]) for r in logged} == {"boom before", "boom after"}
    assert any("before_reset" in r.getMessage() for r in logged)
    assert any("after_reset" in r.getMessage() for r in logged)
    a.session.wait_for_upload(T)  # the session lives on
    assert a.item(unsynced) is not None


# --- bad arguments -----------------------------------------------------------------------------


def test_bad_client_reset_arguments_are_refused_before_anything_opens(reset_server: str, tmp_path: Path) -> None:
    hooks_before = dict(ferry.sync._reset_hooks)
    with ferry.App(app_id=APP_ID, base_url=reset_server, base_directory=tmp_path) as app:
        user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
        path = tmp_path / "never.ferry"
        for mode in (-1, 4, 99, 2**31 - 1):
            with pytest.raises(ValueError):
                app.open_synced(user, path, [ITEM], client_reset_mode=mode)
        with pytest.raises(TypeError):
            app.open_synced(user, path, [ITEM], client_reset_mode=True)
        with pytest.raises(TypeError, match="before_reset"):
            app.open_synced(user, path, [ITEM], before_reset="not callable")
        with pytest.raises(TypeError, match="after_reset"):
            app.open_synced(user, path, [ITEM], after_reset=42)

        async def asynchronous() -> None:
            with pytest.raises(ValueError):
                await app.async_open_synced(user, path, [ITEM], client_reset_mode=7)
            with pytest.raises(TypeError, match="after_reset"):
                await app.async_open_synced(user, path, [ITEM], after_reset=object())

        asyncio.run(asynchronous())
        assert not path.exists()
        assert ferry.sync._reset_hooks == hooks_before  # nothing kept for failed opens

        # handle_client_reset: no reset pending, a bad token
        with pytest.raises(ferry.NotFoundError):
            app.handle_client_reset(tmp_path / "no-such-file.ferry")
        with pytest.raises(ferry.NotFoundError):
            app.handle_client_reset("")
        with pytest.raises(TypeError):
            app.handle_client_reset(None)  # type: ignore[arg-type]

        # An open that fails in the library drops its callbacks too.
        app.log_out(user, timeout=T)
        with pytest.raises(ferry.AuthError):
            app.open_synced(user, path, [ITEM], before_reset=lambda db: None)
        assert ferry.sync._reset_hooks == hooks_before


def test_every_mode_opens_and_the_callbacks_are_dropped_with_the_session(reset_server: str, tmp_path: Path) -> None:
    with ferry.App(app_id=APP_ID, base_url=reset_server, base_directory=tmp_path) as app:
        user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
        for mode in ClientResetMode:
            session = app.open_synced(user, tmp_path / f"{mode.name}.ferry", [ITEM], client_reset_mode=mode,
                                      before_reset=lambda db: None, after_reset=lambda b, a, r: None)
            key = session._hooks_key  # the session's reset callbacks
            assert key in ferry.sync._reset_hooks
            session.close()
            assert key not in ferry.sync._reset_hooks
        session = app.open_synced(user, tmp_path / "plain.ferry", [ITEM])  # no callbacks: nothing kept
        assert session._hooks_key == 0
        session.close()


# --- write_copy and the lent-handle wrapper, without a server --------------------------------------


def test_write_copy_of_a_local_database(tmp_path: Path) -> None:
    schema = [ITEM]
    pk = ferry.ObjectId.generate()
    copy_path = tmp_path / "copy.ferry"
    with ferry.Database.open(tmp_path / "orig.ferry", schema=schema) as db:
        with db.write():
            db.create("Item", {"_id": pk, "ownerId": "me", "itemName": "copied", "complexity": 2})
        db.write_copy(copy_path)
        with pytest.raises(ferry.InvalidArgumentError):
            db.write_copy(copy_path)  # exists
        with pytest.raises(ferry.InvalidArgumentError):
            db.write_copy("")
        with pytest.raises((ferry.FerryIOError, ferry.InvalidArgumentError)):
            db.write_copy(tmp_path / "no-such-dir" / "copy.ferry")
        with db.write():
            db.set("Item", pk, "itemName", "changed after the copy")
    with ferry.Database.open(copy_path) as copy:  # the file's own schema
        assert copy.get("Item", pk)["itemName"] == "copied"
        assert copy.class_names == ["Item"]
    db.close()
    with pytest.raises(ferry.ClosedError):
        db.write_copy(tmp_path / "after-close.ferry")
    assert not (tmp_path / "after-close.ferry").exists()


def test_a_lent_wrapper_refuses_other_threads_and_everything_after_its_loan(tmp_path: Path) -> None:
    """The wrapper the reset callbacks get, on an ordinary handle: usable on its thread while
    the loan lasts; afterwards every use raises and the handle is never touched (nor freed)."""
    pk = ferry.ObjectId.generate()
    with ferry.Database.open(tmp_path / "lent.ferry", schema=[ITEM]) as owner:
        with owner.write():
            owner.create("Item", {"_id": pk, "ownerId": "me", "itemName": "x", "complexity": 1})
        lent = ferry.Database._lend(owner._handle, "a lent handle")
        assert lent.lent and not owner.lent
        assert lent.get("Item", pk)["itemName"] == "x"
        results = lent.objects("Item")
        token = lent.observe_object("Item", pk, callback=lambda changes: None)
        lent.begin_write()  # left open: the end of the loan cancels it

        seen: list[BaseException] = []
        thread = threading.Thread(target=lambda: seen.extend(_raises(lambda: lent.objects("Item"))))
        thread.start()
        thread.join(T)
        assert len(seen) == 1 and isinstance(seen[0], ferry.InvalidArgumentError)
        with pytest.raises(ferry.InvalidArgumentError, match="lent"):
            lent.close()

        lent._end_loan()
        assert lent.closed
        assert not token.active
        with pytest.raises(ValueError):
            results[0]
        for use in (lambda: lent.objects("Item"), lambda: lent.get("Item", pk), lent.begin_write,
                    lambda: lent.write_copy(tmp_path / "never.ferry"), lent.close, lent.history_count):
            with pytest.raises(ferry.ClosedError):
                use()
        lent._end_loan()  # idempotent
        assert not owner.in_transaction  # cancelled, so the owner can write
        with owner.write():
            owner.set("Item", pk, "itemName", "y")


def _raises(fn: Callable[[], Any]) -> list[BaseException]:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        return [exc]
    return []


# --- the ctypes structs match the header -------------------------------------------------------------

_LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "ferry.h"
#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f));
#define S(T) printf("%s %zu\n", #T, sizeof(T));
int main(void) {
  S(ferry_sync_options_t) S(ferry_sync_error_t) S(ferry_client_reset_entry_t) S(ferry_client_reset_report_t)
  F(ferry_sync_options_t, rerun_initial_subscriptions) F(ferry_sync_options_t, client_reset_mode)
  F(ferry_sync_options_t, before_reset) F(ferry_sync_options_t, before_reset_userdata)
  F(ferry_sync_options_t, after_reset) F(ferry_sync_options_t, after_reset_userdata)
  F(ferry_sync_error_t, compensating_writes_count) F(ferry_sync_error_t, client_reset_report)
  F(ferry_sync_error_t, client_reset_backup_path) F(ferry_sync_error_t, client_reset_token)
  F(ferry_client_reset_entry_t, object_type) F(ferry_client_reset_entry_t, primary_key)
  F(ferry_client_reset_entry_t, outcome) F(ferry_client_reset_entry_t, reason)
  F(ferry_client_reset_report_t, recovered) F(ferry_client_reset_report_t, unsynced_changesets)
  F(ferry_client_reset_report_t, entries) F(ferry_client_reset_report_t, entries_count)
  printf("FERRY_SYNC_OPTIONS_VERSION %d\n", FERRY_SYNC_OPTIONS_VERSION);
  return 0;
}
"""


def test_the_client_reset_structs_match_the_header(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    header = REPO / "include" / "ferry.h"
    if cc is None or not header.exists():
        pytest.skip("no C compiler or no include/ferry.h")
    source, exe = tmp_path / "layout.c", tmp_path / "layout"
    source.write_text(_LAYOUT_C)
    subprocess.run([cc, "-std=c11", f"-I{header.parent}", str(source), "-o", str(exe)], check=True, timeout=120)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    structs = {"ferry_sync_options_t": _native.SyncOptions, "ferry_sync_error_t": _native.SyncErrorInfo,
               "ferry_client_reset_entry_t": _native.ClientResetEntry,
               "ferry_client_reset_report_t": _native.ClientResetReport}
    py: dict[str, str] = {}
    for name, struct in structs.items():
        py[name] = str(ctypes.sizeof(struct))
        for field_name, *_ in struct._fields_:
            if f"{name}.{field_name}" in c:
                py[f"{name}.{field_name}"] = str(getattr(struct, field_name).offset)
    py["FERRY_SYNC_OPTIONS_VERSION"] = str(_native.FERRY_SYNC_OPTIONS_VERSION)
    assert py == c
