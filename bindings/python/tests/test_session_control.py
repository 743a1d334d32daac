"""Session control through the Python binding, against a real ferry-server: connection state,
suspend and resume, progress notifiers, download before open, initial subscriptions, in-memory
synced databases, App options and reconnect.

The server fixture is test_sync.py's (one server for this module). Every wait is on an event
or condition with a timeout; nothing sleeps to hope.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

import ferry
from ferry import ConnectionState as CS
from ferry import DownloadBeforeOpen, ProgressDirection, ProgressMode, SessionState

from test_sync import APP_ID, ITEM, closed_port, new_email, server  # noqa: F401 - server is a fixture

T = 15.0  # seconds for any one wait; every test stays well under 20 s


# --- helpers -------------------------------------------------------------------------------------


class Recorder:
    """A callback that records its calls (with the thread) and lets the test wait for them."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.threads: list[int] = []
        self._cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self._cond:
            self.calls.append(args[0] if len(args) == 1 else args)
            self.threads.append(threading.get_ident())
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[Any]], bool], what: str, timeout: float = T) -> list[Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.calls), timeout):
                pytest.fail(f"timed out after {timeout} s waiting for {what}; got {self.calls}")
            return list(self.calls)

    def snapshot(self) -> list[Any]:
        with self._cond:
            return list(self.calls)


def item(owner: str, name: str, complexity: int = 1) -> dict[str, Any]:
    return {"_id": ferry.ObjectId.generate(), "ownerId": owner, "itemName": name, "complexity": complexity}


def subscribe_mine(subs: ferry.MutableSubscriptionSet) -> None:
    subs.add("items", "Item", "complexity <= 4")


class Devices:
    """Apps, each with its own base directory, closed at the end of the test."""

    def __init__(self, url: str, base: Path) -> None:
        self.url = url
        self.base = base
        self.apps: list[ferry.App] = []
        self.databases: list[ferry.Database] = []

    def app(self, url: Optional[str] = None, directory: Optional[Path] = None, **options: Any) -> ferry.App:
        if directory is None:
            directory = self.base / f"device-{len(self.apps)}"
            directory.mkdir()
        app = ferry.App(app_id=APP_ID, base_url=url or self.url, base_directory=directory,
                        log_level=ferry.LogLevel.WARN, **options)
        app.dir = directory  # type: ignore[attr-defined]
        self.apps.append(app)
        return app

    def user(self, app: ferry.App, email: Optional[str] = None) -> ferry.User:
        if email is None:
            return app.log_in(ferry.Credentials.anonymous(), timeout=T)
        return app.log_in(ferry.Credentials.email_password(email, "password123"), timeout=T)

    def open(self, app: ferry.App, user: ferry.User, name: str = "items.ferry", **options: Any) -> ferry.SyncSession:
        session = app.open_synced(user, app.dir / name, [ITEM], timeout=T, **options)  # type: ignore[attr-defined]
        self.databases.append(session.database)
        return session

    def close(self) -> None:
        for app in self.apps:
            app.close()
        for db in self.databases:
            db.close()


@pytest.fixture
def devices(server: str, tmp_path: Path) -> Iterator[Devices]:  # noqa: F811
    d = Devices(server, tmp_path)
    yield d
    d.close()


def registered(devices: Devices) -> str:
    email = new_email("sc")
    app = devices.app()
    app.register_email(email, "password123", timeout=T)
    return email


# --- connection state, suspend and resume --------------------------------------------------------


def test_connection_state_follows_suspend_and_resume(devices: Devices) -> None:
    app = devices.app()
    session = devices.open(app, devices.user(app), initial_subscriptions=subscribe_mine)
    assert session.state == SessionState.ACTIVE
    session.wait_for_download(T)  # connected now
    assert session.connection_state == CS.CONNECTED

    states = Recorder()
    with session.observe_connection_state(states) as token:
        assert token.active
        session.suspend()
        states.wait_for(lambda c: (CS.CONNECTED, CS.DISCONNECTED) in c, "disconnected after suspend")
        assert session.state == SessionState.PAUSED
        assert session.connection_state == CS.DISCONNECTED
        session.suspend()  # a no-op when paused

        session.resume()
        calls = states.wait_for(lambda c: c[-1:] == [(CS.CONNECTING, CS.CONNECTED)], "connected after resume")
        assert calls == [(CS.CONNECTED, CS.DISCONNECTED), (CS.DISCONNECTED, CS.CONNECTING),
                         (CS.CONNECTING, CS.CONNECTED)]
        assert all(isinstance(x, CS) for pair in calls for x in pair)
        assert session.state == SessionState.ACTIVE
        assert session.connection_state == CS.CONNECTED
        assert all(t != threading.get_ident() for t in states.threads)  # on Ferry's loop thread
    assert not token.active

    # a closed token hears nothing more
    seen = Recorder()
    with session.observe_connection_state(seen):
        session.suspend()
        session.resume()
        seen.wait_for(lambda c: c[-1:] == [(CS.CONNECTING, CS.CONNECTED)], "reconnected")
    assert len(states.snapshot()) == 3


def test_a_write_made_while_suspended_is_uploaded_after_resume(devices: Devices) -> None:
    email = registered(devices)
    a_app, b_app = devices.app(), devices.app()
    a = devices.open(a_app, devices.user(a_app, email), initial_subscriptions=subscribe_mine)
    b = devices.open(b_app, devices.user(b_app, email), initial_subscriptions=subscribe_mine)
    assert a.user.id == b.user.id
    a.wait_for_subscriptions(a.subscriptions.version, T)
    b.wait_for_subscriptions(b.subscriptions.version, T)

    a.suspend()
    value = item(a.user.id, "written while paused")
    with a.database.write():
        a.database.create("Item", value)
    # a wait for upload stays pending while paused...
    uploaded = threading.Event()
    failure: list[BaseException] = []

    def upload() -> None:
        try:
            a.wait_for_upload(T)
        except BaseException as exc:  # noqa: BLE001
            failure.append(exc)
        uploaded.set()

    waiter = threading.Thread(target=upload)
    waiter.start()
    b.sync(T)  # a full round trip of the other device: the server has nothing from a
    assert b.database.get("Item", value["_id"]) is None
    assert not uploaded.is_set()
    assert a.state == SessionState.PAUSED

    # ...and completes after resume, with the write on the server
    a.resume()
    assert uploaded.wait(T), "the upload did not complete after resume"
    waiter.join(T)
    assert failure == []
    b.wait_for_download(T)
    got = b.database.get("Item", value["_id"])
    assert got is not None and got["itemName"] == "written while paused"


# --- progress ------------------------------------------------------------------------------------


def write_items(session: ferry.SyncSession, count: int) -> None:
    db = session.database
    for i in range(count):
        with db.write():
            db.create("Item", item(session.user.id, f"item {i}", i % 5))


def test_upload_progress_for_current_work_is_monotonic_and_ends_at_one(devices: Devices) -> None:
    app = devices.app()
    session = devices.open(app, devices.user(app), initial_subscriptions=subscribe_mine)
    session.wait_for_download(T)
    session.suspend()
    write_items(session, 2000)

    reports = Recorder()
    token = session.observe_progress(ProgressDirection.UPLOAD, ProgressMode.FOR_CURRENT_WORK, reports)
    assert isinstance(token, ferry.ProgressToken)
    first = reports.wait_for(lambda c: len(c) >= 1, "the first report")[0]
    assert first.progress_estimate < 1.0 and first.transferable_bytes > 0  # nothing moves while paused
    session.resume()
    got = reports.wait_for(lambda c: c[-1].progress_estimate >= 1.0, "progress 1.0")
    session.wait_for_upload(T)
    assert got == reports.snapshot()  # nothing after 1.0: the notifier stopped by itself
    estimates = [p.progress_estimate for p in got]
    assert all(0.0 <= e <= 1.0 for e in estimates)
    assert estimates == sorted(estimates), estimates
    assert estimates[-1] == 1.0 and estimates.count(1.0) == 1
    last = got[-1]
    assert last.is_complete and last.transferred_bytes == last.transferable_bytes == first.transferable_bytes
    assert all(t != threading.get_ident() for t in reports.threads)
    token.close()
    token.close()  # idempotent


def test_progress_as_an_async_iterator(devices: Devices) -> None:
    app = devices.app()
    session = devices.open(app, devices.user(app), initial_subscriptions=subscribe_mine)
    session.wait_for_download(T)

    async def main() -> list[ferry.Progress]:
        session.suspend()
        write_items(session, 300)
        seen: list[ferry.Progress] = []
        stream = session.progress(ProgressDirection.UPLOAD, ProgressMode.FOR_CURRENT_WORK)
        session.resume()

        async def consume() -> None:
            async for p in stream:
                seen.append(p)

        await asyncio.wait_for(consume(), T)  # ends by itself after 1.0
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        return seen

    seen = asyncio.run(main())
    assert seen[-1].progress_estimate == 1.0
    estimates = [p.progress_estimate for p in seen]
    assert estimates == sorted(estimates)

    # nothing outstanding: one report of 1.0, then the end
    async def idle() -> list[ferry.Progress]:
        return [p async for p in session.progress(ProgressDirection.DOWNLOAD, ProgressMode.FOR_CURRENT_WORK)]

    done = asyncio.run(asyncio.wait_for(idle(), T))
    assert [p.progress_estimate for p in done] == [1.0]

    # an indefinite stream runs until it is closed
    async def indefinite() -> ferry.Progress:
        async with session.progress(ProgressDirection.UPLOAD, ProgressMode.REPORT_INDEFINITELY) as stream:
            first = await asyncio.wait_for(stream.__anext__(), T)
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        return first

    assert asyncio.run(indefinite()).progress_estimate == 1.0
    assert session._tokens == set()  # every stream closed its token

    # closing the session ends a stream that is waiting
    async def ended_by_close() -> list[ferry.Progress]:
        got = []
        async with session.progress(ProgressDirection.UPLOAD, ProgressMode.REPORT_INDEFINITELY) as stream:
            got.append(await asyncio.wait_for(stream.__anext__(), T))
            asyncio.get_running_loop().call_soon(lambda: session.close(close_database=False))
            async for p in stream:  # ends when the session closes its token
                got.append(p)
        return got

    assert len(asyncio.run(asyncio.wait_for(ended_by_close(), T))) >= 1


# --- opening --------------------------------------------------------------------------------------


def test_async_open_downloading_first_has_the_other_devices_data(devices: Devices) -> None:
    email = registered(devices)
    writer_app = devices.app()
    writer = devices.open(writer_app, devices.user(writer_app, email), initial_subscriptions=subscribe_mine)
    ids = []
    with writer.database.write():
        for i in range(20):
            value = item(writer.user.id, f"from the writer {i}", i % 5)
            writer.database.create("Item", value)
            ids.append(value["_id"])
    writer.wait_for_upload(T)

    app = devices.app()
    user = devices.user(app, email)
    calls: list[int] = []

    def initial(subs: ferry.MutableSubscriptionSet) -> None:
        calls.append(threading.get_ident())
        subscribe_mine(subs)

    async def main() -> tuple[int, list[Any], ferry.SubscriptionSet]:
        session = await app.async_open_synced(user, app.dir / "first.ferry", [ITEM],  # type: ignore[attr-defined]
                                              download_before_open=DownloadBeforeOpen.ALWAYS,
                                              initial_subscriptions=initial, timeout=T)
        try:
            # at completion, before any further wait
            names = [session.database.get("Item", pk) for pk in ids]
            return len(session.database.objects("Item")), names, session.subscriptions
        finally:
            session.close()

    count, objects, subs = asyncio.run(main())
    assert count == 20
    assert all(o is not None for o in objects)
    assert subs.state == ferry.SubscriptionState.COMPLETE
    assert [s.query for s in subs] == ["complexity <= 4"]
    assert calls == [threading.get_ident()]  # on the opening thread, before the call returned

    # the blocking open downloads first too; the set exists, so initial_subscriptions is not rerun
    calls.clear()
    again = devices.open(app, user, "first.ferry", download_before_open=DownloadBeforeOpen.ALWAYS,
                         initial_subscriptions=initial)
    assert len(again.database.objects("Item")) == 20
    assert calls == [] and again.subscriptions.version == 1
    again.close()
    rerun = devices.open(app, user, "first.ferry", download_before_open=DownloadBeforeOpen.ONCE,
                         initial_subscriptions=initial, rerun_initial_subscriptions=True)
    assert len(calls) == 1 and rerun.subscriptions.version == 2


def test_an_abandoned_open_frees_the_late_session(devices: Devices) -> None:
    app = devices.app()
    user = devices.user(app)
    path = app.dir / "late.ferry"  # type: ignore[attr-defined]
    always = DownloadBeforeOpen.ALWAYS

    def initial(subs: ferry.MutableSubscriptionSet) -> None:
        subscribe_mine(subs)

    with pytest.raises(ferry.FerryTimeoutError):  # the Python wait gives up at once
        app.open_synced(user, path, [ITEM], download_before_open=always, initial_subscriptions=initial, timeout=0)

    async def main() -> None:
        task = asyncio.ensure_future(app.async_open_synced(user, path, [ITEM], download_before_open=always))
        await asyncio.sleep(0)  # started: the open is under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    # Both completions arrive later on the loop thread and free what they bring; the file
    # opens normally afterwards.
    session = devices.open(app, user, "late.ferry", download_before_open=always)
    assert session.subscriptions.version == 1
    deadline = time.monotonic() + T
    while ferry.sync._pending:  # the late completions took their entries
        assert time.monotonic() < deadline, "a late open completion never arrived"
        time.sleep(0.01)


def test_download_before_open_against_a_closed_port_times_out(devices: Devices) -> None:
    # a user cached by a login against the real server...
    online = devices.app()
    user_id = devices.user(online).id
    online.close()
    # ...then the same device with the server unreachable
    app = devices.app(url=f"http://127.0.0.1:{closed_port()}", directory=online.dir)  # type: ignore[attr-defined]
    user = app.current_user
    assert user is not None and user.id == user_id
    start = time.monotonic()
    with pytest.raises(ferry.FerryTimeoutError, match="1000 ms"):
        app.open_synced(user, app.dir / "x.ferry", [ITEM], download_before_open=DownloadBeforeOpen.ALWAYS,  # type: ignore[attr-defined]
                        open_timeout_ms=1000, timeout=T)
    assert time.monotonic() - start < 10

    async def main() -> None:
        with pytest.raises(ferry.FerryTimeoutError):
            await app.async_open_synced(user, app.dir / "x.ferry", [ITEM],  # type: ignore[attr-defined]
                                        download_before_open=DownloadBeforeOpen.ALWAYS, open_timeout_ms=1000)

    asyncio.run(main())
    # never: opens at once, offline
    offline = devices.open(app, user, "x.ferry")
    assert offline.connection_state in (CS.DISCONNECTED, CS.CONNECTING)
    with offline.database.write():
        offline.database.create("Item", item(user.id, "offline"))
    assert len(offline.database.objects("Item")) == 1


def test_initial_subscriptions_that_raise_fail_the_open(devices: Devices) -> None:
    app = devices.app()
    user = devices.user(app)

    class Oops(Exception):
        pass

    def bad(subs: ferry.MutableSubscriptionSet) -> None:
        subs.add("items", "Item", "complexity <= 4")
        raise Oops("no")

    with pytest.raises(Oops):
        app.open_synced(user, app.dir / "bad.ferry", [ITEM], initial_subscriptions=bad)  # type: ignore[attr-defined]

    async def main() -> None:
        with pytest.raises(Oops):
            await app.async_open_synced(user, app.dir / "bad.ferry", [ITEM],  # type: ignore[attr-defined]
                                        download_before_open=DownloadBeforeOpen.ALWAYS, initial_subscriptions=bad)

    asyncio.run(main())
    with pytest.raises(ferry.InvalidArgumentError):  # not with the blocking ferry_sync_open
        app.open_synced(user, app.dir / "ok.ferry", [ITEM], open_timeout_ms=0)  # type: ignore[attr-defined]
    # the failed opens left the file usable
    session = devices.open(app, user, "bad.ferry", initial_subscriptions=subscribe_mine)
    assert session.subscriptions.version == 1


def test_an_in_memory_synced_database_creates_no_file(devices: Devices) -> None:
    email = registered(devices)
    writer_app = devices.app()
    writer = devices.open(writer_app, devices.user(writer_app, email), initial_subscriptions=subscribe_mine)
    app = devices.app()
    user = devices.user(app, email)
    before = sorted(p.name for p in app.dir.iterdir())  # type: ignore[attr-defined]
    identifier = str(app.dir / f"memory-{uuid.uuid4().hex}")  # type: ignore[attr-defined]
    session = app.open_synced(user, identifier, [ITEM], in_memory=True, initial_subscriptions=subscribe_mine)
    try:
        value = item(user.id, "from memory")
        with session.database.write():
            session.database.create("Item", value)
        session.wait_for_upload(T)
        writer.wait_for_download(T)
        assert writer.database.get("Item", value["_id"]) is not None
        assert sorted(p.name for p in app.dir.iterdir()) == before  # type: ignore[attr-defined]
        assert not Path(identifier).exists()
    finally:
        session.close()
    # the last handle is gone: the same identifier starts empty
    again = app.open_synced(user, identifier, [ITEM], in_memory=True)
    try:
        assert len(again.database.objects("Item")) == 0 and again.subscriptions.version == 0
    finally:
        again.close()


# --- App options and reconnect ----------------------------------------------------------------


def test_reconnect_is_harmless_when_connected(devices: Devices) -> None:
    app = devices.app(multiplex_sessions=False, read_timeout_ms=30_000, ping_interval_ms=5_000,
                      reconnect_delay_min_ms=200, reconnect_delay_max_ms=2_000)
    user = devices.user(app)
    one = devices.open(app, user, "one.ferry", initial_subscriptions=subscribe_mine)
    two = devices.open(app, user, "two.ferry", initial_subscriptions=subscribe_mine)
    one.sync(T)
    two.sync(T)
    states = Recorder()
    with one.observe_connection_state(states):
        app.reconnect()
        app.reconnect()
        value = item(user.id, "after reconnect")
        with one.database.write():
            one.database.create("Item", value)
        one.sync(T)
        two.sync(T)
        assert two.database.get("Item", value["_id"]) is not None
        assert one.connection_state == CS.CONNECTED
    assert states.snapshot() == []  # the connection was never dropped


def test_reconnect_retries_at_once_after_a_failed_connection(devices: Devices) -> None:
    online = devices.app()
    devices.user(online)
    online.close()
    # The test ends the connection attempt itself: it waits in this listener's queue until the
    # test accepts and closes it, so the failure comes after the observer is registered. (With
    # a port nothing listens on, the refusal could come before, and no transition was seen.)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(T)
        # a backoff of a minute: any retry seen within the test is the reconnect's
        app = devices.app(url=f"http://127.0.0.1:{listener.getsockname()[1]}", directory=online.dir,  # type: ignore[attr-defined]
                          reconnect_delay_min_ms=60_000, reconnect_delay_max_ms=60_000)
        user = app.current_user
        assert user is not None
        session = devices.open(app, user, "offline.ferry")
        states = Recorder()
        with session.observe_connection_state(states):
            attempt, _ = listener.accept()
            attempt.close()
            states.wait_for(lambda c: any(new == CS.DISCONNECTED for _, new in c), "the failed connection")
            failed = len(states.snapshot())
            app.reconnect()
            states.wait_for(lambda c: (CS.DISCONNECTED, CS.CONNECTING) in c[failed:], "a retry after reconnect", 5.0)
            retry, _ = listener.accept()
            retry.close()
        assert session.state == SessionState.ACTIVE


def test_bad_app_options_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.App(app_id=APP_ID, base_url="http://127.0.0.1:1", base_directory=tmp_path,
                  reconnect_delay_min_ms=5_000, reconnect_delay_max_ms=1_000)
    with pytest.raises(ValueError):
        ferry.App(app_id=APP_ID, base_url="http://127.0.0.1:1", base_directory=tmp_path, read_timeout_ms=-1)
    with ferry.App(app_id=APP_ID, base_url="http://127.0.0.1:1", base_directory=tmp_path,
                   multiplex_sessions=False, ping_interval_ms=1_000) as app:
        app.reconnect()  # nothing to reconnect


# --- write_copy ----------------------------------------------------------------------------------


def test_write_copy_opens_for_another_user(devices: Devices) -> None:
    a_app = devices.app()
    a = devices.open(a_app, devices.user(a_app), initial_subscriptions=subscribe_mine)
    with a.database.write():
        a.database.create("Item", item(a.user.id, "copied"))
    a.wait_for_upload(T)
    b_app = devices.app()
    b_user = devices.user(b_app)
    target = b_app.dir / "copy.ferry"  # type: ignore[attr-defined]
    a.write_copy(target)
    with pytest.raises(ferry.FerryError):
        a.write_copy(target)  # the path exists now
    copy = b_app.open_synced(b_user, target, [ITEM], timeout=T)
    devices.databases.append(copy.database)
    assert len(copy.database.query("Item", "TRUEPREDICATE")) == 1
