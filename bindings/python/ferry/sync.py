"""Sync: Apps, users, synced databases, subscriptions, sync errors, session control
(connection state, suspend and resume, progress, download before open) and client reset.

Example::

    import ferry

    app = ferry.App(app_id="item-app-seeds", base_url="http://127.0.0.1:8080",
                    base_directory="/var/lib/myapp")           # the directory must exist
    app.on_sync_error = lambda session, error: print(error)
    user = app.current_user or app.log_in(ferry.Credentials.anonymous(), timeout=30)
    with app.open_synced(user, "/var/lib/myapp/items.ferry", schema=[item]) as session:
        db = session.database                                   # an ordinary ferry.Database
        version = session.update_subscriptions(
            lambda subs: subs.add("items", "Item", "complexity <= 4"))
        session.wait_for_subscriptions(version, timeout=30)
        with db.write():
            db.create("Item", {"_id": ferry.ObjectId.generate(), "ownerId": user.id,
                               "itemName": "write code", "complexity": 3})
        session.wait_for_upload(timeout=30)
    app.close()

Threads: the library runs network work, completions, the sync error handler, the session
observers (connection state, progress) and the client-reset callbacks on Ferry's loop thread.
The blocking methods here (``log_in``, ``wait_for_upload``, ...) wait on a
``threading.Event`` with a timeout and raise :class:`~ferry.FerryTimeoutError` when it runs
out; each has an ``async_`` twin for asyncio, woken with ``call_soon_threadsafe``. Do not call
the blocking methods, :meth:`App.close` or :meth:`SyncSession.close` from inside
``on_sync_error``, an observer or a client-reset callback (they run on the loop thread that
would have to complete them).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import enum
import functools
import itertools
import logging
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Union

from . import _native
from .database import Database, Delivery, _key_buffer, _receipt_id, _wipe
from .receipts import Receipt, ReceiptState
from .errors import FerryError, FerryTimeoutError, check, error_for_code
from .schema import Schema, SchemaLike
from .values import KeepAlive, from_native, make_native_array

__all__ = [
    "App",
    "User",
    "UserState",
    "Credentials",
    "LogLevel",
    "SyncSession",
    "SyncError",
    "SyncAction",
    "CompensatingWrite",
    "RevertedObject",
    "RevertKind",
    "LocalWrite",
    "WriteKind",
    "Subscription",
    "SubscriptionSet",
    "MutableSubscriptionSet",
    "SubscriptionState",
    "ConnectionState",
    "SessionState",
    "DownloadBeforeOpen",
    "ProgressDirection",
    "ProgressMode",
    "Progress",
    "ConnectionStateToken",
    "ProgressToken",
    "ProgressStream",
    "ClientResetMode",
    "PrecheckMode",
    "ClientResetOutcome",
    "ClientResetEntry",
    "ClientResetReport",
]

_log = logging.getLogger("ferry")

DEFAULT_TIMEOUT = 60.0


class LogLevel(enum.IntEnum):
    """``ferry_log_level_t``."""

    ALL = 0
    TRACE = 1
    DEBUG = 2
    DETAIL = 3
    INFO = 4
    WARN = 5
    ERROR = 6
    FATAL = 7
    OFF = 8


class UserState(enum.IntEnum):
    """``ferry_user_state_t``."""

    LOGGED_OUT = 0
    LOGGED_IN = 1
    REMOVED = 2


class SyncAction(enum.IntEnum):
    """``ferry_sync_action_t``: what the host should do about a sync error."""

    WARNING = 0
    TRANSIENT = 1
    APPLICATION_BUG = 2
    PROTOCOL_VIOLATION = 3
    DELETE_DATABASE = 4
    CLIENT_RESET = 5
    CLIENT_RESET_NO_RECOVERY = 6
    REVERT_TO_PBS = 7
    REFRESH_USER = 8
    REFRESH_LOCATION = 9
    LOG_OUT_USER = 10


class SubscriptionState(enum.IntEnum):
    """``ferry_subscription_state_t``."""

    PENDING = 0
    COMPLETE = 1
    ERROR = 2
    SUPERSEDED = 3


class ConnectionState(enum.IntEnum):
    """``ferry_connection_state_t``: the state of the connection a session syncs over
    (``DISCONNECTED`` while the session is paused or ended)."""

    DISCONNECTED = 0
    CONNECTING = 1
    CONNECTED = 2


class SessionState(enum.IntEnum):
    """``ferry_session_state_t``."""

    ACTIVE = 0
    """Syncing, or trying to while offline."""
    PAUSED = 1
    """Suspended by the host (:meth:`SyncSession.suspend`)."""
    INACTIVE = 2
    """Ended: closed App, logged-out user, or a fatal error."""


class DownloadBeforeOpen(enum.IntEnum):
    """``ferry_download_before_open_t``: whether opening a synced database waits for the
    server."""

    NEVER = 0
    """Open at once, offline too; sync in the background."""
    ALWAYS = 1
    """Download everything the subscriptions match first, at every open."""
    ONCE = 2
    """Download first at the file's first successful open only."""


class ProgressDirection(enum.IntEnum):
    """``ferry_progress_direction_t``."""

    UPLOAD = 0
    DOWNLOAD = 1


class ProgressMode(enum.IntEnum):
    """``ferry_progress_mode_t``."""

    REPORT_INDEFINITELY = 0
    """Every unit of work, until the token is closed."""
    FOR_CURRENT_WORK = 1
    """The work outstanding at registration; the last report is 1.0."""


class PrecheckMode(enum.IntEnum):
    """``ferry_precheck_mode_t``: the pre-flight check of local writes (SPEC F-PRECHECK). At
    every commit each written object is judged as the server will judge it, against the
    file's latest subscriptions and the write rules the server last published to the file
    (kept in the file: the check works offline). The server stays the authority."""

    OFF = 0
    """No check (the default)."""
    WARN = 1
    """The commit succeeds; ``on_precheck`` gets the would-be compensating writes at once."""
    STRICT = 2
    """The commit raises :class:`~ferry.WriteRejectedError` and is rolled back;
    ``on_precheck`` gets the same list."""


class ClientResetMode(enum.IntEnum):
    """``ferry_client_reset_mode_t``: what a session does when the server can no longer sync
    with the device's file (it sends a client-reset error: sync terminated and re-enabled, the
    device offline longer than the server's maximum offline days, ...). The automatic modes
    turn the file into the server's state while the host keeps its handles open."""

    RECOVER_UNSYNCED_CHANGES = 0
    """The default: the server's state, then the device's unsynced changes replayed on it;
    when the server disables recovery, or recovery fails, the reset is handed to the host as
    in ``MANUAL``."""
    RECOVER_OR_DISCARD_UNSYNCED_CHANGES = 1
    """Recovers; discards the unsynced changes when recovery is disabled or fails."""
    DISCARD_UNSYNCED_CHANGES = 2
    """The server's state; the unsynced changes are dropped (and listed in the report)."""
    MANUAL = 3
    """Nothing changes: the error handler gets a fatal error with a backup path and a token
    for :meth:`App.handle_client_reset`."""


class ClientResetOutcome(enum.IntEnum):
    """``ferry_client_reset_outcome_t``: what became of one object's unsynced changes."""

    RECOVERED = 0
    """The device's change is in the database and will sync."""
    DISCARDED = 1
    """The device's change is gone; the entry's reason says why."""


@dataclass(frozen=True)
class Progress:
    """One progress report (``ferry_progress_t``). Within a unit of work
    ``progress_estimate`` never goes down, stays in [0.0, 1.0] and is exactly 1.0 when the work
    is done. Bytes are changeset bytes (uploads: acknowledged out of committed; downloads:
    received out of announced by the server)."""

    progress_estimate: float
    transferred_bytes: int
    transferable_bytes: int

    @property
    def is_complete(self) -> bool:
        return self.progress_estimate >= 1.0


def _enum(kind: Any, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return value


def _action(value: int) -> Union[SyncAction, int]:
    try:
        return SyncAction(value)
    except ValueError:
        return value


def _text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw is not None else ""


# --- Credentials ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credentials:
    """How to log in. Build with :meth:`anonymous`, :meth:`email_password`, :meth:`jwt` or
    :meth:`api_key`."""

    kind: int
    email: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    token: Optional[str] = field(default=None, repr=False)

    @classmethod
    def anonymous(cls) -> "Credentials":
        """A new anonymous user at every login."""
        return cls(0)

    @classmethod
    def email_password(cls, email: str, password: str) -> "Credentials":
        """A registered email/password user (see :meth:`App.register_email`)."""
        return cls(1, email=email, password=password)

    @classmethod
    def jwt(cls, token: str) -> "Credentials":
        """A JWT of the host's own authentication system."""
        return cls(2, token=token)

    @classmethod
    def api_key(cls, key: str) -> "Credentials":
        """A server API key."""
        return cls(3, token=key)

    def _native(self, keep: list[Any]) -> _native.Credentials:
        c = _native.Credentials()
        c.kind = self.kind
        for name in ("email", "password", "token"):
            value = getattr(self, name)
            if value is not None:
                encoded = value.encode("utf-8")
                keep.append(encoded)
                setattr(c, name, encoded)
        return c


# --- Errors -----------------------------------------------------------------------------------


class RevertKind(enum.IntEnum):
    """What the revert of a compensating write did to the device's object
    (``ferry_revert_kind_t``)."""

    REMOVED = 0
    """The device had the object and the revert erased it (a refused create, or an update
    that took it out of the user's view); ``values`` holds every property."""
    CHANGED = 1
    """The revert set properties back to the server's values; ``values`` holds the device's."""
    RESTORED = 2
    """The device had deleted the object and the revert brought it back; ``values`` is empty."""


class WriteKind(enum.IntEnum):
    """The kind of a :class:`LocalWrite` (``ferry_write_kind_t``)."""

    CREATE = 0
    DELETE = 1
    SET = 2
    ADD_INT = 3
    LIST_INSERT = 4
    LIST_SET = 5
    LIST_ERASE = 6
    LIST_CLEAR = 7


@dataclass(frozen=True)
class LocalWrite:
    """One local write a revert undid or discarded (``ferry_local_write_t``, copied)."""

    local_version: int
    """The write transaction that made it (the device's commits count 1, 2, 3...)."""
    kind: Union[WriteKind, int]
    property: Optional[str]
    """None for ``CREATE`` and ``DELETE``."""
    value: Any = None
    """``SET``, ``LIST_INSERT``, ``LIST_SET``: the value; ``ADD_INT``: the delta."""
    index: int = 0
    """The list position of ``LIST_INSERT``, ``LIST_SET``, ``LIST_ERASE``."""


class RevertedObject:
    """What the revert of a compensating write took from one object (SPEC F-NOLOSS): the
    device's values before the revert of the properties it removed or changed back, and the
    local writes it undid or discarded. Put it back with :meth:`Database.reapply_reverted`.
    Holds a copy of the library's record (``ferry_reverted_object_copy``), freed with it."""

    __slots__ = ("object_type", "primary_key", "revert", "values", "writes", "_ptr", "_finalizer", "__weakref__")

    def __init__(self, ptr: Any) -> None:
        raw = ptr.contents
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _native.lib().ferry_reverted_object_free, ptr)
        self.object_type: str = _text(raw.object_type)
        self.primary_key: Any = from_native(raw.primary_key)
        self.revert: Union[RevertKind, int] = _enum(RevertKind, raw.revert)
        self.values: dict[str, Any] = {}
        for i in range(raw.values_count):
            v = raw.values[i]
            self.values[_text(v.name)] = ([from_native(v.list[j]) for j in range(v.list_count)]
                                          if v.is_list else from_native(v.value))
        self.writes: list[LocalWrite] = []
        for i in range(raw.writes_count):
            w = raw.writes[i]
            self.writes.append(LocalWrite(int(w.local_version), _enum(WriteKind, w.kind),
                                          _text(w.property) if w.property else None,
                                          from_native(w.value), int(w.index)))

    @classmethod
    def _copy(cls, lent: Any) -> "RevertedObject":
        ptr = ctypes.POINTER(_native.RevertedObject)()
        check(_native.lib().ferry_reverted_object_copy(ctypes.byref(ptr), lent))
        return cls(ptr)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RevertedObject):
            return NotImplemented
        return (self.object_type, self.primary_key, self.revert, self.values, self.writes) == \
            (other.object_type, other.primary_key, other.revert, other.values, other.writes)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RevertedObject({self.object_type!r}, {self.primary_key!r}, {self.revert!r}, "
                f"values={self.values!r}, writes={self.writes!r})")


@dataclass(frozen=True)
class CompensatingWrite:
    """One object of a write the server rejected and reverted."""

    object_type: str
    primary_key: Any
    reason: str
    reverted: Optional[RevertedObject] = field(default=None, compare=False)
    """What the revert took from the device (SPEC F-NOLOSS), or None when it took nothing.
    Entries naming the same object share one record."""


@dataclass(frozen=True)
class ClientResetEntry:
    """One object touched by the device's unsynced changes, in a :class:`ClientResetReport`."""

    object_type: str
    primary_key: Any
    outcome: Union[ClientResetOutcome, int]
    reason: str
    """E.g. ``"created on this device and not yet synced"``."""


@dataclass(frozen=True)
class ClientResetReport:
    """What an automatic client reset kept and dropped (``ferry_client_reset_report_t``,
    copied): one entry per object the unsynced changes touched."""

    recovered: bool
    """True: the changes were replayed (the entries say per object what survived); False:
    they were discarded."""
    unsynced_changesets: int
    """Local transactions the server had not acknowledged."""
    entries: list[ClientResetEntry] = field(default_factory=list)

    @classmethod
    def _from_native(cls, raw: _native.ClientResetReport) -> "ClientResetReport":
        entries = []
        for i in range(raw.entries_count):
            e = raw.entries[i]
            entries.append(ClientResetEntry(_text(e.object_type), from_native(e.primary_key),
                                            _enum(ClientResetOutcome, e.outcome), _text(e.reason)))
        return cls(bool(raw.recovered), int(raw.unsynced_changesets), entries)


def _path_text(raw: Optional[bytes]) -> Optional[str]:
    return os.fsdecode(raw) if raw is not None else None


@dataclass(frozen=True)
class SyncError:
    """A sync error reported to :attr:`App.on_sync_error`. Code 231 is a compensating write
    (``is_fatal`` false, action ``WARNING``); 226 a rejected subscription set.

    Client reset: a finished automatic reset is reported as a non-fatal error with action
    ``CLIENT_RESET`` (or ``CLIENT_RESET_NO_RECOVERY``) whose ``client_reset_report`` says what
    was recovered and discarded (tell it by the report, not by the code: the code is the
    server's reset error's, e.g. 208). A reset handed to the host (mode ``MANUAL``, or the
    fallback of ``RECOVER_UNSYNCED_CHANGES`` when the server disables recovery) is a fatal
    error with ``client_reset_backup_path`` (where the file goes) and ``client_reset_token``
    (for :meth:`App.handle_client_reset`)."""

    code: int
    message: str
    is_fatal: bool
    action: Union[SyncAction, int]
    compensating_writes: list[CompensatingWrite] = field(default_factory=list)
    client_reset_report: Optional[ClientResetReport] = None
    client_reset_backup_path: Optional[str] = None
    client_reset_token: Optional[str] = None

    @classmethod
    def _from_native(cls, pointer: Any) -> "SyncError":
        raw = pointer.contents
        writes = []
        copies: dict[int, RevertedObject] = {}
        lib = _native.lib()
        for i in range(raw.compensating_writes_count):
            w = raw.compensating_writes[i]
            lent = ctypes.POINTER(_native.RevertedObject)()
            reverted = None
            if lib.ferry_sync_error_reverted_object(ctypes.byref(lent), pointer, i) == _native.FERRY_OK and lent:
                address = ctypes.addressof(lent.contents)
                reverted = copies.get(address)
                if reverted is None:
                    reverted = copies[address] = RevertedObject._copy(lent)
            writes.append(
                CompensatingWrite(_text(w.object_type), from_native(w.primary_key), _text(w.reason), reverted)
            )
        report = ClientResetReport._from_native(raw.client_reset_report.contents) if raw.client_reset_report else None
        return cls(raw.code, _text(raw.message), bool(raw.is_fatal), _action(raw.action), writes,
                   report, _path_text(raw.client_reset_backup_path), _path_text(raw.client_reset_token))


# --- Completions --------------------------------------------------------------------------------


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class _Pending:
    """One asynchronous call of the library: its completion arrives on the loop thread.

    The completion stores its result under ``lock`` and marks the call finished; a waiter that
    gives up (timeout, asyncio cancellation) marks it abandoned under the same lock, so exactly
    one side owns a handle the completion delivers: the waiter, or ``discard`` (which frees a
    late login's user, or a late open's session and database)."""

    __slots__ = ("event", "error", "value", "finished", "abandoned", "on_done", "lock", "discard",
                 "hooks_key")

    def __init__(self, discard: Optional[Callable[[Any], None]] = None) -> None:
        self.event = threading.Event()
        self.error: Optional[BaseException] = None
        self.value: Any = None
        self.finished = False
        self.abandoned = False
        self.on_done: Optional[Callable[[], None]] = None
        self.lock = threading.Lock()
        self.discard = discard
        self.hooks_key = 0  # an open's client-reset callbacks (dropped if no session opens)

    def complete(self, error: Optional[BaseException], value: Any = None) -> None:
        """Loop thread: stores the outcome and wakes the waiter (or discards the value)."""
        with self.lock:
            self.error = error
            self.value = value
            self.finished = True
            abandoned = self.abandoned
            on_done = self.on_done
        if abandoned and value is not None and self.discard is not None:
            self.discard(value)  # nobody will take it
        self.event.set()
        if on_done is not None:
            on_done()

    def _abandon(self) -> bool:
        """The waiter gives up: True when the completion has not arrived (it will discard its
        value), False when it already did (the waiter owns the value)."""
        with self.lock:
            if self.finished:
                return False
            self.abandoned = True
            return True

    def _outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def wait(self, timeout: Optional[float], what: str) -> Any:
        """Waits for the completion; raises its error or FerryTimeoutError. Returns its value
        (the user handle of a login, the handles of an open)."""
        if not self.event.wait(timeout) and self._abandon():
            raise FerryTimeoutError(f"{what} did not complete within {timeout} s")
        return self._outcome()

    async def wait_async(self, what: str, timeout: Optional[float]) -> Any:
        """The asyncio twin of :meth:`wait`. The completion (on Ferry's loop thread) wakes the
        asyncio loop with ``call_soon_threadsafe``; nothing blocks the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # the event loop was closed: nobody is waiting any more
                pass

        with self.lock:
            already = self.finished
            if not already:
                self.on_done = wake
        if not already:
            try:
                await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                if self._abandon():
                    raise FerryTimeoutError(f"{what} did not complete within {timeout} s") from None
            except asyncio.CancelledError:
                if not self._abandon() and self.value is not None and self.discard is not None:
                    self.discard(self.value)  # it arrived, but the awaiting task is gone
                raise
        return self._outcome()


# userdata (an int id) -> pending call. The trampolines below are module-level, so they stay
# referenced for as long as C may call them; every call tells itself apart by its userdata.
_pending: dict[int, _Pending] = {}
_pending_ids = itertools.count(1)


def _error_from(error: Any) -> Optional[Exception]:
    if not error:
        return None
    e = error.contents
    return error_for_code(e.code, _text(e.message))


def _on_status(userdata: Optional[int], error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            p.complete(_error_from(error))
    except BaseException:  # noqa: BLE001 - nothing may unwind into C
        _log_exception("exception in a Ferry completion")


def _free_user(user: int) -> None:
    _native.lib().ferry_user_free(user)


def _on_user(userdata: Optional[int], user: Optional[int], error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            p.complete(_error_from(error), user or None)
        elif user:
            _free_user(user)
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry login completion")


def _free_session_off_loop(session: int) -> None:
    """``ferry_sync_session_free`` must not run on Ferry's loop thread, where completions run:
    a helper thread frees a session nobody will take."""
    threading.Thread(target=_native.lib().ferry_sync_session_free, args=(session,),
                     name="ferry-free-session", daemon=True).start()


def _discard_opened(value: tuple[int, int], hooks_key: int = 0) -> None:
    session, db = value
    _native.lib().ferry_db_free(db)
    _free_session_off_loop(session)
    if hooks_key:
        _reset_hooks.pop(hooks_key, None)  # a reset callback that still runs finds nothing


def _on_open(userdata: Optional[int], session: Optional[int], db: Optional[int], error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        failure = _error_from(error)
        value = (session, db) if session and db and failure is None else None
        if failure is None and value is None:
            failure = error_for_code(_native.FERRY_ERR_INTERNAL, "an open completed with neither handles nor an error")
        if value is None and (session or db):  # half a result: nobody may take it
            _discard_opened((session or 0, db or 0))
        if value is None and p is not None:  # no session: its reset callbacks never run
            _reset_hooks.pop(p.hooks_key, None)
        if p is not None:
            p.complete(failure, value)
        elif value is not None:
            _discard_opened(value)
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry open completion")


def _log_exception(what: str) -> None:
    try:
        _log.exception(what)
    except BaseException:  # noqa: BLE001 - the interpreter may be shutting down
        pass


def _on_receipt(userdata: Optional[int], receipt: Any, error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            failure = _error_from(error)
            p.complete(failure, Receipt._from_native(receipt.contents) if receipt and failure is None else None)
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry receipt completion")


def _free_remote_results(results: int) -> None:
    _native.lib().ferry_remote_results_free(results)


def _on_remote_find(userdata: Optional[int], results: Optional[int], error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            p.complete(_error_from(error), results or None)
        elif results:
            _free_remote_results(results)
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry remote find completion")


def _on_remote_count(userdata: Optional[int], count: int, error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            failure = _error_from(error)
            p.complete(failure, None if failure else int(count))
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry remote count completion")


_STATUS_TRAMPOLINE = _native.STATUS_CB(_on_status)
_REMOTE_FIND_TRAMPOLINE = _native.REMOTE_FIND_CB(_on_remote_find)
_REMOTE_COUNT_TRAMPOLINE = _native.REMOTE_COUNT_CB(_on_remote_count)
_RECEIPT_TRAMPOLINE = _native.RECEIPT_CB(_on_receipt)
_USER_TRAMPOLINE = _native.USER_CB(_on_user)
_OPEN_TRAMPOLINE = _native.SYNC_OPEN_CB(_on_open)


def _start(call: Callable[[int], int], discard: Optional[Callable[[Any], None]] = None,
           hooks_key: int = 0) -> _Pending:
    """Registers a pending completion and makes the call; a failing call never calls back."""
    pending = _Pending(discard)
    pending.hooks_key = hooks_key  # before the call: the completion may come at once
    key = next(_pending_ids)
    _pending[key] = pending
    try:
        rc = call(key)
    except BaseException:
        _pending.pop(key, None)
        raise
    if rc != _native.FERRY_OK:
        _pending.pop(key, None)
        check(rc)
    return pending


# --- Initial subscriptions ----------------------------------------------------------------------

# userdata -> [callable, the exception it raised]. ferry_sync_open and ferry_sync_open_async call
# the callback on the opening thread before they return; the entry lives for that call only.
_initial_subscriptions: dict[int, list[Any]] = {}


def _on_initial_subscriptions(userdata: Optional[int], handle: Optional[int]) -> int:
    entry = _initial_subscriptions.get(userdata or 0)
    if entry is None or not handle:
        return _native.FERRY_ERR_INTERNAL
    try:
        entry[0](MutableSubscriptionSet(handle))
        return _native.FERRY_OK
    except BaseException as exc:  # noqa: BLE001 - re-raised by the open
        entry[1] = exc
        return _native.FERRY_ERR_INVALID_ARGUMENT


_INITIAL_SUBSCRIPTIONS_TRAMPOLINE = _native.INITIAL_SUBSCRIPTIONS_CB(_on_initial_subscriptions)


# --- Client reset callbacks ---------------------------------------------------------------------


class _ResetHooks:
    """An open's ``before_reset`` and ``after_reset`` callables, and its ``on_precheck``. The
    library may call them until the session is freed; the entry goes when the session is freed
    (or the open fails)."""

    __slots__ = ("before", "after", "precheck")

    def __init__(self, before: Optional[Callable[..., Any]], after: Optional[Callable[..., Any]],
                 precheck: Optional[Callable[..., Any]] = None) -> None:
        self.before = before
        self.after = after
        self.precheck = precheck


# userdata -> hooks. An unknown userdata (a session freed meanwhile) is ignored.
_reset_hooks: dict[int, _ResetHooks] = {}


def _on_before_reset(userdata: Optional[int], before: Optional[int]) -> None:
    # Ferry's loop thread. The handle is lent for this call only: the wrapper's loan ends in
    # the finally, so Python never keeps the pointer past the call.
    try:
        hooks = _reset_hooks.get(userdata or 0)
        if hooks is None or hooks.before is None or not before:
            return
        db = Database._lend(before, "the database before a client reset")
        try:
            hooks.before(db)
        finally:
            db._end_loan()
    except BaseException:  # noqa: BLE001 - nothing may unwind into C
        _log_exception("exception in a Ferry before_reset callback")


def _on_after_reset(userdata: Optional[int], before: Optional[int], after: Optional[int], report: Any) -> None:
    try:
        hooks = _reset_hooks.get(userdata or 0)
        if hooks is None or hooks.after is None or not before or not after:
            return
        copied = ClientResetReport._from_native(report.contents) if report else ClientResetReport(False, 0, [])
        old = Database._lend(before, "the database before a client reset")
        new = Database._lend(after, "the database after a client reset")
        try:
            hooks.after(old, new, copied)
        finally:
            try:
                new._end_loan()
            finally:
                old._end_loan()
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry after_reset callback")


def _on_precheck(userdata: Optional[int], writes: Any, count: int, committed: bool) -> None:
    # The committing thread, inside ferry_db_commit (the writes are lent for this call: copied).
    try:
        hooks = _reset_hooks.get(userdata or 0)
        if hooks is None or hooks.precheck is None:
            return
        copied = [CompensatingWrite(_text(writes[i].object_type), from_native(writes[i].primary_key), _text(writes[i].reason))
                  for i in range(count)] if writes else []
        hooks.precheck(copied, bool(committed))
    except BaseException:  # noqa: BLE001 - nothing may unwind into C
        _log_exception("exception in a Ferry on_precheck callback")


_PRECHECK_TRAMPOLINE = _native.PRECHECK_CB(_on_precheck)
_BEFORE_RESET_TRAMPOLINE = _native.CLIENT_RESET_BEFORE_CB(_on_before_reset)
_AFTER_RESET_TRAMPOLINE = _native.CLIENT_RESET_AFTER_CB(_on_after_reset)


def _free_session(state: "_AppState", session: int, hooks_key: int) -> None:
    """A SyncSession's finalizer: frees the session, then drops its reset callbacks (which the
    library no longer calls)."""
    state.free_session(session)
    _reset_hooks.pop(hooks_key, None)


# --- Session observers --------------------------------------------------------------------------


class _Observer:
    """What a connection-state or progress registration's userdata stands for."""

    __slots__ = ("callback", "active")

    def __init__(self, callback: Callable[..., Any]) -> None:
        self.callback = callback
        self.active = True


# userdata -> observer; removed by userdata_free (which the library runs on its loop thread
# after any delivery in progress, or at once when a registration fails).
_observers: dict[int, _Observer] = {}


def _on_connection_state(userdata: Optional[int], old: int, new: int) -> None:
    try:
        o = _observers.get(userdata or 0)
        if o is not None and o.active:
            o.callback(_enum(ConnectionState, old), _enum(ConnectionState, new))
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry connection state callback")


def _on_progress(userdata: Optional[int], progress: Any) -> None:
    try:
        o = _observers.get(userdata or 0)
        if o is not None and o.active and progress:
            p = progress.contents
            o.callback(Progress(float(p.progress_estimate), int(p.transferred_bytes), int(p.transferable_bytes)))
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry progress callback")


def _on_observer_free(userdata: Optional[int]) -> None:
    try:
        _observers.pop(userdata or 0, None)
    except BaseException:  # noqa: BLE001
        pass


_CONNECTION_STATE_TRAMPOLINE = _native.CONNECTION_STATE_CB(_on_connection_state)
_PROGRESS_TRAMPOLINE = _native.PROGRESS_CB(_on_progress)
_OBSERVER_FREE_TRAMPOLINE = _native.FREE_FN(_on_observer_free)


# --- Sync error handlers ------------------------------------------------------------------------

_handlers: dict[int, tuple["weakref.ReferenceType[App]", Callable[..., Any]]] = {}
_handler_ids = itertools.count(1)
# ferry_sync_session_t * -> SyncSession, for handing the session to the error handler.
_sessions: "weakref.WeakValueDictionary[int, SyncSession]" = weakref.WeakValueDictionary()


def _on_sync_error(userdata: Optional[int], session: Optional[int], error: Any) -> None:
    try:
        entry = _handlers.get(userdata or 0)
        if entry is None:
            return
        handler = entry[1]
        handler(_sessions.get(session or 0), SyncError._from_native(error))
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry sync error handler")


def _on_handler_free(userdata: Optional[int]) -> None:
    try:
        _handlers.pop(userdata or 0, None)
    except BaseException:  # noqa: BLE001
        pass


_SYNC_ERROR_TRAMPOLINE = _native.SYNC_ERROR_CB(_on_sync_error)
_HANDLER_FREE_TRAMPOLINE = _native.FREE_FN(_on_handler_free)


def _on_log(userdata: Optional[int], level: int, message: Optional[bytes]) -> None:
    try:
        entry = _loggers.get(userdata or 0)
        if entry is not None:
            entry(LogLevel(level) if 0 <= level <= 8 else level, _text(message))
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry log callback")


_loggers: dict[int, Callable[[Any, str], Any]] = {}
_LOG_TRAMPOLINE = _native.LOG_CB(_on_log)


# --- Users --------------------------------------------------------------------------------------


class User:
    """A user of an :class:`App` (a ``ferry_user_t``). Compare users with ``==`` (by id)."""

    def __init__(self, app: "App", handle: int) -> None:
        self._app = app
        self._handle: Optional[int] = handle
        self._finalizer = weakref.finalize(self, _native.lib().ferry_user_free, handle)
        raw = ctypes.c_char_p()
        check(_native.lib().ferry_user_id(ctypes.byref(raw), handle))
        self._id = _text(raw.value)

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise ValueError("the user handle was closed")
        return self._handle

    @property
    def id(self) -> str:
        """The server's id of the user."""
        return self._id

    @property
    def app(self) -> "App":
        return self._app

    @property
    def state(self) -> UserState:
        """Logged in, logged out (still cached) or removed."""
        out = ctypes.c_int32()
        check(_native.lib().ferry_user_state(ctypes.byref(out), self.handle))
        return UserState(out.value)

    @property
    def logged_in(self) -> bool:
        return self.state == UserState.LOGGED_IN

    def close(self) -> None:
        """Frees this handle (the user stays cached in the App)."""
        self._handle = None
        self._finalizer()

    # --- querying the server online (issue 24) ---

    def _remote(self, find: bool, class_name: str, query: str, args: tuple[Any, ...], limit: int) -> _Pending:
        lib = _native.lib()
        keep = KeepAlive()
        array, count = make_native_array(args, keep)
        name, text = class_name.encode("utf-8"), query.encode("utf-8")
        if find:
            return _start(lambda key: lib.ferry_remote_find(self.handle, name, text, array, count, limit,
                                                            _REMOTE_FIND_TRAMPOLINE, key),
                          discard=_free_remote_results)
        return _start(lambda key: lib.ferry_remote_count(self.handle, name, text, array, count,
                                                         _REMOTE_COUNT_TRAMPOLINE, key))

    def remote_find(self, class_name: str, query: str = "TRUEPREDICATE", *args: Any, limit: int = 100,
                    timeout: Optional[float] = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        """The objects of ``class_name`` the server holds now that match ``query`` (Ferry's query
        language, ``$0``, ``$1``... taken from ``args``) and that this user's rules let it read, in
        primary-key order, at most ``limit`` (1 to 100,000): each a dict of property name to value
        (ObjectId, uuid.UUID, datetime or Timestamp, bytes, lists...). Online only; nothing is
        subscribed or stored on the device (the seeds' MongoClient path).

        Raises:
            NoSuchClassError: the server has no such class. QueryError: the server refused the
            query or its arguments. AuthError: the user is logged out, or its token refused.
            SyncServerError: the server's Data API is off (404) or sync is paused (503).
            NetworkError, FerryTimeoutError.
        """
        return _remote_documents(self._remote(True, class_name, query, args, limit).wait(timeout, "remote find"))

    async def async_remote_find(self, class_name: str, query: str = "TRUEPREDICATE", *args: Any, limit: int = 100,
                                timeout: Optional[float] = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        pending = self._remote(True, class_name, query, args, limit)
        return _remote_documents(await pending.wait_async("remote find", timeout))

    def remote_count(self, class_name: str, query: str = "TRUEPREDICATE", *args: Any,
                     timeout: Optional[float] = DEFAULT_TIMEOUT) -> int:
        """How many objects of ``class_name`` the server holds that match ``query`` (with
        ``args``) and that this user's rules let it read. Raises as :meth:`remote_find`."""
        return int(self._remote(False, class_name, query, args, 0).wait(timeout, "remote count"))

    async def async_remote_count(self, class_name: str, query: str = "TRUEPREDICATE", *args: Any,
                                 timeout: Optional[float] = DEFAULT_TIMEOUT) -> int:
        return int(await self._remote(False, class_name, query, args, 0).wait_async("remote count", timeout))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, User) and other._id == self._id

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"<ferry.User {self._id}>"


def _remote_documents(handle: int) -> list[dict[str, Any]]:
    """Every document of a ``ferry_remote_results_t`` as dicts (values copied out); frees it."""
    lib = _native.lib()
    try:
        n = ctypes.c_size_t()
        check(lib.ferry_remote_results_count(ctypes.byref(n), handle))
        out: list[dict[str, Any]] = []
        fields = ctypes.c_size_t()
        name = ctypes.c_char_p()
        is_list = ctypes.c_bool()
        value = _native.Value()
        items = ctypes.POINTER(_native.Value)()
        count = ctypes.c_size_t()
        for i in range(n.value):
            check(lib.ferry_remote_results_field_count(ctypes.byref(fields), handle, i))
            doc: dict[str, Any] = {}
            for f in range(fields.value):
                check(lib.ferry_remote_results_field(ctypes.byref(name), ctypes.byref(is_list), handle, i, f))
                key = name.value or b""
                if is_list.value:
                    check(lib.ferry_remote_results_get_list(ctypes.byref(items), ctypes.byref(count), handle, i, key))
                    doc[_text(key)] = [from_native(items[k]) for k in range(count.value)]
                else:
                    check(lib.ferry_remote_results_get_value(ctypes.byref(value), handle, i, key))
                    doc[_text(key)] = from_native(value)
            out.append(doc)
        return out
    finally:
        lib.ferry_remote_results_free(handle)


# --- Subscriptions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """A named query on an object type."""

    name: str
    object_type: str
    query: str


@dataclass(frozen=True)
class SubscriptionSet:
    """A snapshot of a session's subscription set."""

    version: int
    state: SubscriptionState
    error: str
    subscriptions: list[Subscription]

    def __iter__(self) -> Iterator[Subscription]:
        return iter(self.subscriptions)

    def __len__(self) -> int:
        return len(self.subscriptions)

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.subscriptions)

    def find(self, name: str) -> Optional[Subscription]:
        return next((s for s in self.subscriptions if s.name == name), None)


def _read_set(handle: int) -> SubscriptionSet:
    lib = _native.lib()
    version = ctypes.c_uint64()
    state = ctypes.c_int32()
    error = ctypes.c_char_p()
    count = ctypes.c_size_t()
    check(lib.ferry_subscription_set_version(ctypes.byref(version), handle))
    check(lib.ferry_subscription_set_state(ctypes.byref(state), handle))
    check(lib.ferry_subscription_set_error(ctypes.byref(error), handle))
    check(lib.ferry_subscription_set_count(ctypes.byref(count), handle))
    subs = []
    name, type_, query = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
    for i in range(count.value):
        check(lib.ferry_subscription_set_get(
            ctypes.byref(name), ctypes.byref(type_), ctypes.byref(query), handle, i))
        subs.append(Subscription(_text(name.value), _text(type_.value), _text(query.value)))
    return SubscriptionSet(version.value, SubscriptionState(state.value), _text(error.value), subs)


class MutableSubscriptionSet:
    """The editable copy handed to :meth:`SyncSession.update_subscriptions`'s callable."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def add(self, name: str, object_type: str, query: str) -> None:
        """Adds a named query, replacing a subscription of the same name."""
        check(_native.lib().ferry_subscription_set_add(
            self._handle, name.encode("utf-8"), object_type.encode("utf-8"), query.encode("utf-8")))

    def remove(self, name: str) -> bool:
        """Removes by name; whether it existed."""
        out = ctypes.c_bool()
        check(_native.lib().ferry_subscription_set_remove(
            ctypes.byref(out), self._handle, name.encode("utf-8")))
        return bool(out.value)

    def remove_type(self, object_type: str) -> int:
        """Removes every subscription on an object type; how many."""
        out = ctypes.c_size_t()
        check(_native.lib().ferry_subscription_set_remove_type(
            ctypes.byref(out), self._handle, object_type.encode("utf-8")))
        return out.value

    def remove_all(self) -> None:
        check(_native.lib().ferry_subscription_set_remove_all(self._handle))

    @property
    def subscriptions(self) -> list[Subscription]:
        return _read_set(self._handle).subscriptions

    def __len__(self) -> int:
        return len(self.subscriptions)


# --- Session tokens ---------------------------------------------------------------------------


class _SessionToken:
    """A registration on a session (connection state or progress). :meth:`close` unregisters
    it: no callback starts afterwards (one already running on the loop thread finishes), and
    the library drops the callback on its loop thread once no delivery uses it. The
    :class:`SyncSession` keeps its tokens alive (dropping the last reference does not
    unregister) and closes them when it is closed. A context manager."""

    _FREE: str = ""

    def __init__(self, session: "SyncSession", handle: int, key: int) -> None:
        self._session: Optional[SyncSession] = session
        self._handle: Optional[int] = handle
        self._key = key
        self._on_close: Optional[Callable[[], None]] = None
        self._finalizer = weakref.finalize(self, getattr(_native.lib(), self._FREE), handle)

    @property
    def active(self) -> bool:
        """Whether :meth:`close` has not been called yet."""
        return self._handle is not None

    def close(self) -> None:
        """Unregisters (idempotent; allowed from inside the callback itself)."""
        observer = _observers.get(self._key)
        if observer is not None:
            observer.active = False
        self._handle = None
        self._finalizer()  # the token's free function, at most once
        session, self._session = self._session, None
        if session is not None:
            session._tokens.discard(self)
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.{type(self).__name__} {'active' if self.active else 'closed'}>"


class ConnectionStateToken(_SessionToken):
    """From :meth:`SyncSession.observe_connection_state`."""

    _FREE = "ferry_connection_state_token_free"


class ProgressToken(_SessionToken):
    """From :meth:`SyncSession.observe_progress`. A ``FOR_CURRENT_WORK`` notifier stops by
    itself after reporting 1.0; close its token all the same."""

    _FREE = "ferry_progress_token_free"


class ProgressStream:
    """Progress reports as an asyncio iterator (from :meth:`SyncSession.progress`)::

        async for p in session.progress(ferry.ProgressDirection.UPLOAD,
                                        ferry.ProgressMode.FOR_CURRENT_WORK):
            print(f"{p.progress_estimate:.0%}")

    The notifier is registered when the stream is made (so ``FOR_CURRENT_WORK`` covers the
    work outstanding then). Reports arrive on Ferry's loop thread and are queued; the
    iteration ends after the report of 1.0 in ``FOR_CURRENT_WORK`` mode, and never by itself in
    ``REPORT_INDEFINITELY`` mode: leave the loop and :meth:`close` (or ``aclose``, or use
    ``async with``). Garbage collection closes it too."""

    def __init__(self, session: "SyncSession", direction: ProgressDirection, mode: ProgressMode) -> None:
        self._mode = ProgressMode(mode)
        self._lock = threading.Lock()
        self._items: "collections.deque[Progress]" = collections.deque()
        self._waiter: Optional[tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]] = None
        self._finished = False
        ref = weakref.ref(self)

        def push(progress: Progress) -> None:  # weak: an abandoned stream can be collected
            stream = ref()
            if stream is not None:
                stream._push(progress)

        def ended() -> None:  # the token was closed, also by SyncSession.close()
            stream = ref()
            if stream is not None:
                stream._end()

        self._token = session.observe_progress(direction, mode, push)
        self._token._on_close = ended
        self._finalizer = weakref.finalize(self, self._token.close)

    def _push(self, progress: Progress) -> None:
        # Ferry's loop thread.
        with self._lock:
            self._items.append(progress)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, future = waiter
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # the event loop was closed
                pass

    def __aiter__(self) -> "ProgressStream":
        return self

    async def __anext__(self) -> Progress:
        while True:
            with self._lock:
                if self._items:
                    item = self._items.popleft()
                elif self._finished:
                    raise StopAsyncIteration
                else:
                    item = None
                    loop = asyncio.get_running_loop()
                    future: asyncio.Future[None] = loop.create_future()
                    self._waiter = (loop, future)
            if item is not None:
                if self._mode == ProgressMode.FOR_CURRENT_WORK and item.is_complete:
                    self.close()
                return item
            await future

    def _end(self) -> None:
        with self._lock:
            self._finished = True
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            try:
                waiter[0].call_soon_threadsafe(_resolve, waiter[1])
            except RuntimeError:  # the event loop was closed
                pass

    def close(self) -> None:
        """Unregisters; the iteration ends once the queued reports are consumed. Closing the
        session closes its streams too."""
        self._end()
        self._finalizer()  # closes the token

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "ProgressStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


# --- Sessions -----------------------------------------------------------------------------------


class SyncSession:
    """The sync session of one synced database, with the database itself
    (:attr:`database`, an ordinary :class:`~ferry.Database`). A context manager: leaving the
    block closes both. ``session, db = app.open_synced(...)`` also works."""

    def __init__(self, app: "App", user: User, handle: int, database: Database,
                 hooks_key: int = 0) -> None:
        self._app = app
        self._user = user
        self._handle: Optional[int] = handle
        self.database = database
        self._tokens: set[_SessionToken] = set()
        self._hooks_key = hooks_key  # the client-reset callbacks (0: none)
        app._state.add(handle)
        self._finalizer = weakref.finalize(self, _free_session, app._state, handle, hooks_key)
        _sessions[handle] = self

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise ValueError("the sync session was closed")
        return self._handle

    @property
    def user(self) -> User:
        return self._user

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __iter__(self) -> Iterator[Any]:
        return iter((self, self.database))

    # --- subscriptions ---

    @property
    def subscriptions(self) -> SubscriptionSet:
        """A snapshot of the current subscription set (version, state, error, subscriptions)."""
        out = ctypes.c_void_p()
        check(_native.lib().ferry_sync_subscriptions(ctypes.byref(out), self.handle))
        try:
            return _read_set(out.value)
        finally:
            _native.lib().ferry_subscription_set_free(out.value)

    def update_subscriptions(self, edit: Callable[[MutableSubscriptionSet], Any]) -> int:
        """Edits a copy of the subscription set with ``edit(subs)`` (``subs.add(name, type,
        query)``, ``subs.remove(name)``...) and commits it atomically as the next version, which
        is returned (state pending). If ``edit`` raises, nothing changes."""
        lib = _native.lib()
        out = ctypes.c_void_p()
        check(lib.ferry_sync_subscriptions(ctypes.byref(out), self.handle))
        try:
            edit(MutableSubscriptionSet(out.value))
            version = ctypes.c_uint64()
            check(lib.ferry_sync_update_subscriptions(ctypes.byref(version), self.handle, out.value))
            return version.value
        finally:
            lib.ferry_subscription_set_free(out.value)

    def _wait_subscriptions(self, version: int) -> _Pending:
        lib = _native.lib()
        return _start(lambda key: lib.ferry_sync_wait_for_subscriptions(
            self.handle, version, _STATUS_TRAMPOLINE, key))

    def wait_for_subscriptions(self, version: int, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """Waits until the set of ``version`` (or a later one) is complete on the server.

        Raises:
            SyncServerError: the set was rejected (the message is the server's).
            FerryTimeoutError.
        """
        self._wait_subscriptions(version).wait(timeout, "waiting for subscriptions")

    async def async_wait_for_subscriptions(self, version: int, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        await self._wait_subscriptions(version).wait_async("waiting for subscriptions", timeout)

    def _wait(self, fn: str) -> _Pending:
        f = getattr(_native.lib(), fn)
        return _start(lambda key: f(self.handle, _STATUS_TRAMPOLINE, key))

    def wait_for_upload(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """Waits until every local change committed before the call is durable on the server
        (or raises the error that stopped the session)."""
        self._wait("ferry_sync_wait_for_upload").wait(timeout, "waiting for upload")

    def wait_for_download(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """Waits until everything the server had when the request reached it is integrated."""
        self._wait("ferry_sync_wait_for_download").wait(timeout, "waiting for download")

    async def async_wait_for_upload(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        await self._wait("ferry_sync_wait_for_upload").wait_async("waiting for upload", timeout)

    async def async_wait_for_download(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        await self._wait("ferry_sync_wait_for_download").wait_async("waiting for download", timeout)

    def _wait_receipt(self, receipt: int, state: Union[ReceiptState, int]) -> _Pending:
        lib = _native.lib()
        r = _receipt_id(receipt)
        return _start(lambda key: lib.ferry_sync_wait_for_receipt(self.handle, r, int(state), _RECEIPT_TRAMPOLINE, key))

    def wait_for_receipt(self, receipt: int, state: Union[ReceiptState, int] = ReceiptState.ACKNOWLEDGED,
                         timeout: Optional[float] = DEFAULT_TIMEOUT) -> Receipt:
        """Waits until the write receipt (from :meth:`ferry.Database.commit`) reaches ``state``
        or a later one, or a final state (a wait for ``REJECTED`` ends ``ACKNOWLEDGED`` when
        the server accepted the transaction); returns the receipt as it then is, with its
        compensating writes when ``REJECTED``.

        Raises:
            NotFoundError: a receipt the file never gave (or one that expired).
            ClosedError: the session was closed first; or the error that stopped it.
            FerryTimeoutError.
        """
        return self._wait_receipt(receipt, state).wait(timeout, f"waiting for receipt {receipt}")

    async def async_wait_for_receipt(self, receipt: int, state: Union[ReceiptState, int] = ReceiptState.ACKNOWLEDGED,
                                     timeout: Optional[float] = DEFAULT_TIMEOUT) -> Receipt:
        """The asyncio twin of :meth:`wait_for_receipt`."""
        return await self._wait_receipt(receipt, state).wait_async(f"waiting for receipt {receipt}", timeout)

    def sync(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """``wait_for_upload`` then ``wait_for_download``."""
        self.wait_for_upload(timeout)
        self.wait_for_download(timeout)

    async def async_sync(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        await self.async_wait_for_upload(timeout)
        await self.async_wait_for_download(timeout)

    # --- state, pause and resume ---

    @property
    def connection_state(self) -> ConnectionState:
        """The state of the connection the session syncs over (``DISCONNECTED`` while paused
        or ended)."""
        out = ctypes.c_int32()
        check(_native.lib().ferry_sync_connection_state(ctypes.byref(out), self.handle))
        return _enum(ConnectionState, out.value)

    @property
    def state(self) -> SessionState:
        """``ACTIVE``, ``PAUSED`` (after :meth:`suspend`) or ``INACTIVE`` (ended)."""
        out = ctypes.c_int32()
        check(_native.lib().ferry_sync_session_state(ctypes.byref(out), self.handle))
        return _enum(SessionState, out.value)

    def suspend(self) -> None:
        """Pauses syncing both ways: the session leaves its connection (closed when no other
        session uses it); local writes are kept and uploaded after :meth:`resume`; pending
        waits stay pending. Other sessions keep syncing. No-op when paused or ended. Returns at
        once (the state changes on the loop thread right after)."""
        check(_native.lib().ferry_sync_suspend(self.handle))

    def resume(self) -> None:
        """Resumes a paused session (no-op unless paused)."""
        check(_native.lib().ferry_sync_resume(self.handle))

    def write_copy(self, path: "str | os.PathLike[str]") -> None:
        """Writes a copy of this database, with its data and subscriptions, to a new file that
        another user's synced open can use (``ferry_sync_write_copy``). The copy has no sync
        identity and no history. Local changes must be uploaded first (``wait_for_upload``);
        an existing path or unacknowledged changes raise ``FerryError``."""
        check(_native.lib().ferry_sync_write_copy(self.handle, os.fsencode(path)))

    def _register(self, token_type: type, callback: Callable[..., Any],
                  call: Callable[[Any, int], int]) -> Any:
        if not callable(callback):
            raise TypeError("callback must be callable")
        key = next(_handler_ids)
        _observers[key] = _Observer(callback)
        out = ctypes.c_void_p()
        try:
            rc = call(ctypes.byref(out), key)
        except BaseException:
            _observers.pop(key, None)  # the call never reached C
            raise
        check(rc)  # on failure the library already ran userdata_free, which removed the entry
        token = token_type(self, out.value, key)
        self._tokens.add(token)
        return token

    def observe_connection_state(
        self, callback: Callable[[ConnectionState, ConnectionState], Any]
    ) -> ConnectionStateToken:
        """Calls ``callback(old, new)`` (:class:`ConnectionState` values) on Ferry's loop thread
        at every change of :attr:`connection_state` until the token is closed. Exceptions it
        raises are logged (logger ``"ferry"``)."""
        lib = _native.lib()
        return self._register(ConnectionStateToken, callback, lambda out, key: lib.ferry_sync_observe_connection_state(
            out, self.handle, _CONNECTION_STATE_TRAMPOLINE, key, _OBSERVER_FREE_TRAMPOLINE))

    def observe_progress(self, direction: ProgressDirection, mode: ProgressMode,
                         callback: Callable[[Progress], Any]) -> ProgressToken:
        """Calls ``callback(progress)`` (a :class:`Progress`) on Ferry's loop thread: first
        shortly after registration, then as bytes move in ``direction``. ``FOR_CURRENT_WORK``
        covers the work outstanding now and ends with a report of exactly 1.0;
        ``REPORT_INDEFINITELY`` reports every unit of work until the token is closed."""
        lib = _native.lib()
        d, m = int(ProgressDirection(direction)), int(ProgressMode(mode))
        return self._register(ProgressToken, callback, lambda out, key: lib.ferry_sync_observe_progress(
            out, self.handle, d, m, _PROGRESS_TRAMPOLINE, key, _OBSERVER_FREE_TRAMPOLINE))

    def progress(self, direction: ProgressDirection = ProgressDirection.UPLOAD,
                 mode: ProgressMode = ProgressMode.FOR_CURRENT_WORK) -> ProgressStream:
        """Progress reports as an asyncio iterator (see :class:`ProgressStream`)."""
        return ProgressStream(self, direction, mode)

    def close(self, *, close_database: bool = True) -> None:
        """Stops syncing (pending waits fail with ClosedError), closes its connection state and
        progress tokens, and, unless told otherwise, closes the database handle too.
        Idempotent. Not from the loop thread."""
        for token in list(self._tokens):
            token.close()
        if self._handle is not None:
            _sessions.pop(self._handle, None)
        self._handle = None
        self._finalizer()
        if close_database:
            self.database.close()

    def __enter__(self) -> "SyncSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.SyncSession {self.database!r} user={self._user.id}>"


# --- Apps ---------------------------------------------------------------------------------------


class App:
    """A Ferry App on this device: one server and one app on it (a ``ferry_app_t``).

    Args:
        app_id: the server's app id.
        base_url: ``https://host:port``, or ``http://host:port`` for a loopback host
            (``localhost``, 127.0.0.0/8, ``::1``); plain http to any other host raises
            :class:`~ferry.InvalidArgumentError` unless ``allow_insecure_http`` is true.
        base_directory: where users are cached (must exist); users who logged in earlier are
            loaded from it, so :attr:`current_user` works offline after a restart.
        ca_file: a PEM CA bundle for https, trusted besides the system's CAs.
        insecure_skip_verify: ``True`` skips certificate and host name checks, so anyone on
            the path can read and change the traffic (tests only). Default ``False``.
        allow_insecure_http: ``True`` allows an ``http://`` base URL to a host that is not
            loopback (logins, tokens and data cross the network unencrypted). Default
            ``False``.
        request_timeout: seconds for HTTP requests.
        log_level, logger: a :class:`LogLevel` and a ``callable(level, message)`` run on the
            loop thread.
        multiplex_sessions: ``True`` (the default): a user's sessions share one connection;
            ``False``: one connection per session.
        read_timeout_ms: a connection that receives nothing for this long is dropped and
            retried (default 120000).
        ping_interval_ms: a quiet connection pings the server this often (default 60000).
        reconnect_delay_min_ms, reconnect_delay_max_ms: the reconnection backoff's first delay
            and cap (defaults 1000 and 16000). ``None`` keeps the library's default.
        encryption_key: 64 bytes to encrypt the user cache in ``base_directory`` (user ids
            and tokens) like a database file; an unencrypted cache is encrypted at once, an
            encrypted one without its key raises :class:`~ferry.DecryptError`.

    A context manager; :meth:`close` (or leaving the block) closes its sessions first, then
    the App.
    """

    def __init__(
        self,
        app_id: str,
        base_url: str,
        base_directory: Union[str, "os.PathLike[str]"],
        *,
        ca_file: Optional[str] = None,
        insecure_skip_verify: bool = False,
        allow_insecure_http: bool = False,
        request_timeout: float = 60.0,
        log_level: Union[LogLevel, int] = LogLevel.INFO,
        logger: Optional[Callable[[Any, str], Any]] = None,
        multiplex_sessions: bool = True,
        read_timeout_ms: Optional[int] = None,
        ping_interval_ms: Optional[int] = None,
        reconnect_delay_min_ms: Optional[int] = None,
        reconnect_delay_max_ms: Optional[int] = None,
        encryption_key: Optional[bytes] = None,
    ) -> None:
        lib = _native.lib()
        opts = _native.AppOptions()
        check(lib.ferry_app_options_init(ctypes.byref(opts), _native.FERRY_APP_OPTIONS_VERSION))
        opts.multiplex_sessions = bool(multiplex_sessions)
        for name, value in (("read_timeout_ms", read_timeout_ms), ("ping_interval_ms", ping_interval_ms),
                            ("reconnect_delay_min_ms", reconnect_delay_min_ms),
                            ("reconnect_delay_max_ms", reconnect_delay_max_ms)):
            if value is not None:
                if isinstance(value, bool) or int(value) < 0:
                    raise ValueError(f"{name} must be a non-negative number of milliseconds")
                setattr(opts, name, int(value))
        opts.app_id = app_id.encode("utf-8")
        opts.base_url = base_url.encode("utf-8")
        opts.base_directory = os.fsencode(base_directory)
        if ca_file is not None:
            opts.ca_file = os.fsencode(ca_file)
        opts.insecure_skip_verify = bool(insecure_skip_verify)
        opts.allow_insecure_http = bool(allow_insecure_http)
        opts.request_timeout_ms = max(1, int(request_timeout * 1000))
        opts.log_level = int(log_level)
        self._log_key = 0
        if logger is not None:
            self._log_key = next(_handler_ids)
            _loggers[self._log_key] = logger
            opts.log_callback = _LOG_TRAMPOLINE
            opts.log_userdata = self._log_key
        key_buffer = _key_buffer(encryption_key)
        if key_buffer is not None:
            opts.encryption_key = ctypes.addressof(key_buffer)
        handle = ctypes.c_void_p()
        try:
            check(lib.ferry_app_new(ctypes.byref(handle), ctypes.byref(opts)))
        except BaseException:
            _loggers.pop(self._log_key, None)
            raise
        finally:
            _wipe(key_buffer)  # the library copied the key during the call
        self._handle: Optional[int] = handle.value
        self._state = _AppState(handle.value, self._log_key)
        self._finalizer = weakref.finalize(self, self._state.free)
        self._sessions: "weakref.WeakSet[SyncSession]" = weakref.WeakSet()
        self._on_sync_error: Optional[Callable[..., Any]] = None
        self.app_id = app_id
        self.base_url = base_url

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise ValueError("the App was closed")
        return self._handle

    def reconnect(self) -> None:
        """Makes every connection of the App that waits to retry try at once, with its backoff
        reset (e.g. when the host learns the network is back). Does nothing for connections
        that are connected or connecting, or whose sessions stopped on a fatal error. Returns
        at once."""
        check(_native.lib().ferry_app_reconnect(self.handle))

    # --- users ---

    def _login(self, credentials: Credentials) -> _Pending:
        if not isinstance(credentials, Credentials):
            raise TypeError("credentials must be ferry.Credentials")
        keep: list[Any] = []
        c = credentials._native(keep)
        lib = _native.lib()
        return _start(lambda key: lib.ferry_app_log_in(
            self.handle, ctypes.byref(c), _USER_TRAMPOLINE, key), discard=_free_user)

    def log_in(self, credentials: Credentials, timeout: Optional[float] = DEFAULT_TIMEOUT) -> User:
        """Logs in and returns the :class:`User`.

        Raises:
            AuthError: refused credentials. NetworkError: the server cannot be reached.
            FerryTimeoutError.
        """
        handle = self._login(credentials).wait(timeout, "log in")
        assert handle is not None
        return User(self, handle)

    async def async_log_in(self, credentials: Credentials, timeout: Optional[float] = DEFAULT_TIMEOUT) -> User:
        handle = await self._login(credentials).wait_async("log in", timeout)
        assert handle is not None
        return User(self, handle)

    def _register(self, email: str, password: str) -> _Pending:
        lib = _native.lib()
        e, p = email.encode("utf-8"), password.encode("utf-8")
        return _start(lambda key: lib.ferry_app_register_email(self.handle, e, p, _STATUS_TRAMPOLINE, key))

    def register_email(self, email: str, password: str, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """Registers an email/password user (then log in with
        :meth:`Credentials.email_password`)."""
        self._register(email, password).wait(timeout, "register")

    async def async_register_email(self, email: str, password: str, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        await self._register(email, password).wait_async("register", timeout)

    def log_out(self, user: User, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """Logs a user out: its sessions stop with a fatal error, the server revokes its
        refresh token (best effort: works offline), and it stays cached as logged out."""
        lib = _native.lib()
        _start(lambda key: lib.ferry_app_log_out(self.handle, user.handle, _STATUS_TRAMPOLINE, key)).wait(
            timeout, "log out")

    @property
    def current_user(self) -> Optional[User]:
        """The most recently logged-in user still logged in, or ``None``."""
        out = ctypes.c_void_p()
        check(_native.lib().ferry_app_current_user(ctypes.byref(out), self.handle))
        return User(self, out.value) if out.value else None

    @property
    def users(self) -> list[User]:
        """Every cached user, most recent first."""
        lib = _native.lib()
        count = ctypes.c_size_t()
        check(lib.ferry_app_user_count(ctypes.byref(count), self.handle))
        users = []
        for i in range(count.value):
            out = ctypes.c_void_p()
            check(lib.ferry_app_get_user(ctypes.byref(out), self.handle, i))
            users.append(User(self, out.value))
        return users

    # --- sync errors ---

    @property
    def on_sync_error(self) -> Optional[Callable[..., Any]]:
        """``callable(session, error)``: called on the loop thread with the
        :class:`SyncSession` (or ``None`` if it was closed) and a :class:`SyncError`, after the
        server's revert was integrated. Exceptions it raises are logged (logger ``"ferry"``).
        Set ``None`` to remove it."""
        return self._on_sync_error

    @on_sync_error.setter
    def on_sync_error(self, handler: Optional[Callable[..., Any]]) -> None:
        lib = _native.lib()
        if handler is None:
            check(lib.ferry_app_set_sync_error_handler(
                self.handle, _native.SYNC_ERROR_CB(), None, _native.FREE_FN()))
            self._on_sync_error = None
            return
        if not callable(handler):
            raise TypeError("on_sync_error must be callable or None")
        key = next(_handler_ids)
        _handlers[key] = (weakref.ref(self), handler)
        rc = lib.ferry_app_set_sync_error_handler(
            self.handle, _SYNC_ERROR_TRAMPOLINE, key, _HANDLER_FREE_TRAMPOLINE)
        if rc != _native.FERRY_OK:
            _handlers.pop(key, None)  # the library may not run userdata_free on failure
            check(rc)
        self._on_sync_error = handler

    # --- synced databases ---

    def _options(self, path: Union[str, "os.PathLike[str]"], schema: Schema,
                 download_before_open: DownloadBeforeOpen, open_timeout_ms: Optional[int],
                 in_memory: bool, initial_subscriptions: Optional[Callable[[MutableSubscriptionSet], Any]],
                 rerun_initial_subscriptions: bool, client_reset_mode: ClientResetMode,
                 hooks: Optional[_ResetHooks], key: int,
                 precheck_mode: "PrecheckMode" = PrecheckMode.OFF, encryption_key: Any = None) -> _native.SyncOptions:
        opts = _native.SyncOptions()
        check(_native.lib().ferry_sync_options_init(ctypes.byref(opts), _native.FERRY_SYNC_OPTIONS_VERSION))
        opts.path = os.fsencode(path)
        opts.schema = schema.handle
        opts.download_before_open = int(DownloadBeforeOpen(download_before_open))
        if open_timeout_ms is not None:
            if isinstance(open_timeout_ms, bool) or int(open_timeout_ms) < 0:
                raise ValueError("open_timeout_ms must be a positive number of milliseconds")
            opts.open_timeout_ms = int(open_timeout_ms)
        opts.in_memory = bool(in_memory)
        if initial_subscriptions is not None:
            if not callable(initial_subscriptions):
                raise TypeError("initial_subscriptions must be callable")
            opts.initial_subscriptions = _INITIAL_SUBSCRIPTIONS_TRAMPOLINE
            opts.initial_subscriptions_userdata = key
        opts.rerun_initial_subscriptions = bool(rerun_initial_subscriptions)
        opts.client_reset_mode = int(client_reset_mode)
        if hooks is not None and hooks.before is not None:
            opts.before_reset = _BEFORE_RESET_TRAMPOLINE
            opts.before_reset_userdata = key
        if hooks is not None and hooks.after is not None:
            opts.after_reset = _AFTER_RESET_TRAMPOLINE
            opts.after_reset_userdata = key
        opts.precheck_mode = int(precheck_mode)
        if hooks is not None and hooks.precheck is not None:
            opts.precheck_callback = _PRECHECK_TRAMPOLINE
            opts.precheck_userdata = key
        if encryption_key is not None:
            opts.encryption_key = ctypes.addressof(encryption_key)
        return opts

    def _open(self, user: User, path: Union[str, "os.PathLike[str]"], schema: SchemaLike, *,
              download_before_open: DownloadBeforeOpen, open_timeout_ms: Optional[int], in_memory: bool,
              initial_subscriptions: Optional[Callable[[MutableSubscriptionSet], Any]],
              rerun_initial_subscriptions: bool, client_reset_mode: ClientResetMode,
              before_reset: Optional[Callable[[Database], Any]],
              after_reset: Optional[Callable[[Database, Database, ClientResetReport], Any]],
              asynchronous: bool, precheck_mode: "PrecheckMode" = PrecheckMode.OFF,
              on_precheck: Optional[Callable[[list[CompensatingWrite], bool], Any]] = None,
              encryption_key: Optional[bytes] = None,
              ) -> tuple[Optional[_Pending], Any, list[Any], int]:
        """Starts an open. Returns (pending, None, entry, hooks_key) for ferry_sync_open_async,
        or (None, (session, db), entry, hooks_key) for ferry_sync_open; entry[1] is an
        exception raised by ``initial_subscriptions``; hooks_key (0: none) names the reset
        callbacks, which live until the session is freed."""
        if isinstance(client_reset_mode, bool):
            raise TypeError("client_reset_mode must be a ferry.ClientResetMode")
        mode = ClientResetMode(client_reset_mode)  # ValueError for an unknown mode
        if isinstance(precheck_mode, bool):
            raise TypeError("precheck_mode must be a ferry.PrecheckMode")
        precheck = PrecheckMode(precheck_mode)  # ValueError for an unknown mode
        for name, fn in (("before_reset", before_reset), ("after_reset", after_reset), ("on_precheck", on_precheck)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None")
        lib = _native.lib()
        owned: Optional[Schema] = None
        if not isinstance(schema, Schema):
            owned = schema = Schema(schema or [])
        key = next(_handler_ids)
        entry: list[Any] = [initial_subscriptions, None]
        if initial_subscriptions is not None:
            _initial_subscriptions[key] = entry
        hooks: Optional[_ResetHooks] = None
        if before_reset is not None or after_reset is not None or on_precheck is not None:
            hooks = _reset_hooks[key] = _ResetHooks(before_reset, after_reset, on_precheck)
        opened = False
        key_buffer = _key_buffer(encryption_key)
        try:
            opts = self._options(path, schema, download_before_open, open_timeout_ms, in_memory,
                                 initial_subscriptions, rerun_initial_subscriptions, mode, hooks, key, precheck,
                                 key_buffer)
            if asynchronous:
                hooks_key = key if hooks is not None else 0
                pending = _start(lambda k: lib.ferry_sync_open_async(
                    user.handle, ctypes.byref(opts), _OPEN_TRAMPOLINE, k),
                    discard=functools.partial(_discard_opened, hooks_key=hooks_key), hooks_key=hooks_key)
                opened = True  # the completion (or its discard) owns the hooks now
                return pending, None, entry, hooks_key
            session = ctypes.c_void_p()
            db = ctypes.c_void_p()
            rc = lib.ferry_sync_open(ctypes.byref(session), ctypes.byref(db), user.handle, ctypes.byref(opts))
            if rc != _native.FERRY_OK and entry[1] is not None:
                raise entry[1]
            check(rc)
            opened = True
            return None, (session.value, db.value), entry, key if hooks is not None else 0
        except BaseException as exc:
            if entry[1] is not None and exc is not entry[1]:
                raise entry[1] from exc
            raise
        finally:
            _wipe(key_buffer)  # the library copied the key during the call
            if not opened:
                _reset_hooks.pop(key, None)  # no session: the library never calls them
            # The library calls initial_subscriptions before either open function returns.
            _initial_subscriptions.pop(key, None)
            if owned is not None:
                owned.close()

    def _adopt(self, user: User, path: Union[str, "os.PathLike[str]"], in_memory: bool,
               handles: tuple[int, int], hooks_key: int) -> SyncSession:
        session, db = handles
        where = f"in-memory:{os.fsdecode(path)}" if in_memory else os.fsdecode(path)
        database = Database(db, description=where, delivery=Delivery.LOOP)
        s = SyncSession(self, user, session, database, hooks_key)
        self._sessions.add(s)
        return s

    def open_synced(
        self,
        user: User,
        path: Union[str, "os.PathLike[str]"],
        schema: SchemaLike,
        *,
        download_before_open: DownloadBeforeOpen = DownloadBeforeOpen.NEVER,
        open_timeout_ms: Optional[int] = None,
        in_memory: bool = False,
        initial_subscriptions: Optional[Callable[[MutableSubscriptionSet], Any]] = None,
        rerun_initial_subscriptions: bool = False,
        client_reset_mode: ClientResetMode = ClientResetMode.RECOVER_UNSYNCED_CHANGES,
        before_reset: Optional[Callable[[Database], Any]] = None,
        after_reset: Optional[Callable[[Database, Database, ClientResetReport], Any]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        precheck_mode: PrecheckMode = PrecheckMode.OFF,
        on_precheck: Optional[Callable[[list[CompensatingWrite], bool], Any]] = None,
        encryption_key: Optional[bytes] = None,
    ) -> SyncSession:
        """Opens a flexible-sync database of a logged-in user and starts its session. Nothing
        syncs down until the subscription set has a subscription.

        Args:
            path: the database file (created if missing), or with ``in_memory`` the identifier
                of an in-memory database (nothing on disk; dropped when the session and every
                handle are closed).
            download_before_open: ``NEVER`` (the default) opens at once, offline too
                (``ferry_sync_open``). ``ALWAYS``, and ``ONCE`` at the file's first open, first
                wait until the subscriptions are complete and everything the server has is
                downloaded (``ferry_sync_open_async``, waited for here up to ``timeout``).
            open_timeout_ms: how long that download may take (library default 30000); then
                :class:`~ferry.FerryTimeoutError`.
            initial_subscriptions: ``callable(subs)`` that fills a new database's subscription
                set (a :class:`MutableSubscriptionSet`), called on this thread before the open
                returns; the open fails with what it raises.
            rerun_initial_subscriptions: call it at every open, not only when the set was
                never written.
            client_reset_mode: what the session does on a client-reset error (a
                :class:`ClientResetMode`; default ``RECOVER_UNSYNCED_CHANGES``). An unknown
                value raises ``ValueError``.
            before_reset: ``callable(before)`` called on Ferry's loop thread before an
                automatic reset changes the file; ``before`` is a read-only
                :class:`~ferry.Database` on a snapshot of the file as it was (read it, or keep
                a copy with ``before.write_copy(path)``).
            after_reset: ``callable(before, after, report)`` called on the loop thread after an
                automatic reset: ``after`` is the reset database (a write transaction on it is
                allowed), ``report`` a :class:`ClientResetReport`. The error handler then gets
                the same report. Both databases are lent for the call: usable on the loop
                thread until the callback returns, then they raise
                :class:`~ferry.ClosedError`; do not close them. Exceptions the callbacks raise
                are logged (logger ``"ferry"``). Both callbacks are kept until the session is
                closed.
            precheck_mode: the pre-flight check of local writes (a :class:`PrecheckMode`,
                default ``OFF``): ``WARN`` commits and reports, ``STRICT`` makes a commit the
                server would reject raise :class:`~ferry.WriteRejectedError` (rolled back).
            on_precheck: ``callable(writes, committed)`` called on the committing thread,
                before the commit returns, for every commit that fails the check: ``writes``
                is a list of :class:`CompensatingWrite` with the server's exact reasons,
                ``committed`` True in ``WARN`` mode, False in ``STRICT`` mode. Exceptions it
                raises are logged. Kept until the session is closed.
            encryption_key: 64 bytes: the file is encrypted as with
                :meth:`ferry.Database.open`'s ``encryption_key``, and so are a client reset's
                snapshots and backups (not with ``in_memory``).

        Raises:
            AuthError: the user is logged out. MultipleSyncAgentsError. FerryTimeoutError.
            SyncServerError: the server rejected the subscriptions (download before open).
            The errors of :meth:`ferry.Database.open`.
        """
        asynchronous = DownloadBeforeOpen(download_before_open) != DownloadBeforeOpen.NEVER
        pending, handles, entry, hooks_key = self._open(
            user, path, schema, download_before_open=download_before_open, open_timeout_ms=open_timeout_ms,
            in_memory=in_memory, initial_subscriptions=initial_subscriptions,
            rerun_initial_subscriptions=rerun_initial_subscriptions, client_reset_mode=client_reset_mode,
            before_reset=before_reset, after_reset=after_reset, asynchronous=asynchronous,
            precheck_mode=precheck_mode, on_precheck=on_precheck,
            encryption_key=encryption_key)
        if pending is not None:
            try:
                handles = pending.wait(timeout, "opening a synced database")
            except FerryError as exc:
                if entry[1] is not None:
                    raise entry[1] from exc  # what initial_subscriptions raised
                raise
        return self._adopt(user, path, in_memory, handles, hooks_key)

    async def async_open_synced(
        self,
        user: User,
        path: Union[str, "os.PathLike[str]"],
        schema: SchemaLike,
        *,
        download_before_open: DownloadBeforeOpen = DownloadBeforeOpen.NEVER,
        open_timeout_ms: Optional[int] = None,
        in_memory: bool = False,
        initial_subscriptions: Optional[Callable[[MutableSubscriptionSet], Any]] = None,
        rerun_initial_subscriptions: bool = False,
        client_reset_mode: ClientResetMode = ClientResetMode.RECOVER_UNSYNCED_CHANGES,
        before_reset: Optional[Callable[[Database], Any]] = None,
        after_reset: Optional[Callable[[Database, Database, ClientResetReport], Any]] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        precheck_mode: PrecheckMode = PrecheckMode.OFF,
        on_precheck: Optional[Callable[[list[CompensatingWrite], bool], Any]] = None,
        encryption_key: Optional[bytes] = None,
    ) -> SyncSession:
        """The asyncio twin of :meth:`open_synced`, for every ``download_before_open`` mode
        (``ferry_sync_open_async``): the completion arrives on Ferry's loop thread and wakes
        the event loop. ``initial_subscriptions`` runs before the first ``await``. If the
        awaiting task is cancelled or ``timeout`` runs out, a session that opens later is
        closed. ``client_reset_mode``, ``before_reset`` and ``after_reset`` as in
        :meth:`open_synced` (the callbacks run on Ferry's loop thread, not in the event
        loop)."""
        pending, _, entry, hooks_key = self._open(
            user, path, schema, download_before_open=download_before_open, open_timeout_ms=open_timeout_ms,
            in_memory=in_memory, initial_subscriptions=initial_subscriptions,
            rerun_initial_subscriptions=rerun_initial_subscriptions, client_reset_mode=client_reset_mode,
            before_reset=before_reset, after_reset=after_reset, asynchronous=True,
            precheck_mode=precheck_mode, on_precheck=on_precheck,
            encryption_key=encryption_key)
        assert pending is not None
        try:
            handles = await pending.wait_async("opening a synced database", timeout)
        except FerryError as exc:
            if entry[1] is not None:
                raise entry[1] from exc
            raise
        return self._adopt(user, path, in_memory, handles, hooks_key)

    # --- client reset ---

    def handle_client_reset(self, token: Union[str, "os.PathLike[str]"]) -> None:
        """Performs at once a client reset the error handler was handed (the
        :attr:`SyncError.client_reset_token` of a fatal ``CLIENT_RESET`` error:
        ``ferry_app_handle_client_reset``). The database file moves to the error's
        ``client_reset_backup_path`` (an ordinary Ferry database, with the device's unsynced
        changes, that :meth:`ferry.Database.open` opens with the file's own schema) and the
        next :meth:`open_synced` of the path downloads a fresh copy. Close the session and
        every database handle on the file first (``session.close()``). A reset never handled
        this way happens at the file's next open. Not from inside ``on_sync_error``.

        Raises:
            InvalidArgumentError: the file is still open. NotFoundError: no reset is pending
            for that token. FerryIOError.
        """
        if not isinstance(token, (str, bytes, os.PathLike)):
            raise TypeError("token must be the SyncError's client_reset_token (a str)")
        check(_native.lib().ferry_app_handle_client_reset(self.handle, os.fsencode(token)))

    # --- closing ---

    def close(self) -> None:
        """Closes the App's sessions (their databases stay open locally unless closed), then
        the App. Idempotent. Not from the loop thread."""
        # Sessions first: the App's sessions stop cleanly before the App goes.
        for s in list(self._sessions):
            s.close(close_database=False)
        self._handle = None  # the finalizer frees any session left, then the App
        self._finalizer()

    def __enter__(self) -> "App":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.App {self.app_id} at {self.base_url}>"


class _AppState:
    """What the finalizers of an App and its sessions share, so that sessions are always
    freed before their App, whatever order garbage collection picks (the library allows
    either order; this one stops sessions before their App's connections go)."""

    def __init__(self, handle: int, log_key: int) -> None:
        self.handle = handle
        self.log_key = log_key
        self.sessions: set[int] = set()
        self.lock = threading.Lock()

    def add(self, session: int) -> None:
        with self.lock:
            self.sessions.add(session)

    def free_session(self, session: int) -> None:
        with self.lock:
            live = session in self.sessions
            self.sessions.discard(session)
        if live:
            _native.lib().ferry_sync_session_free(session)

    def free(self) -> None:
        with self.lock:
            sessions = list(self.sessions)
            self.sessions.clear()
        lib = _native.lib()
        for session in sessions:
            lib.ferry_sync_session_free(session)
        lib.ferry_app_free(self.handle)
        _loggers.pop(self.log_key, None)
