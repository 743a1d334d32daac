"""Sync: Apps, users, synced databases, subscriptions and sync errors.

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

Threads: the library runs network work, completions and the sync error handler on Ferry's
loop thread. The blocking methods here (``log_in``, ``wait_for_upload``, ...) wait on a
``threading.Event`` with a timeout and raise :class:`~ferry.FerryTimeoutError` when it runs out;
each has an ``async_`` twin for asyncio. Do not call the blocking methods, :meth:`App.close`
or :meth:`SyncSession.close` from inside ``on_sync_error`` (it runs on the loop thread that
would have to complete them).
"""

from __future__ import annotations

import asyncio
import ctypes
import enum
import itertools
import logging
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Union

from . import _native
from .database import Database, Delivery
from .errors import FerryTimeoutError, check, error_for_code
from .schema import Schema, SchemaLike
from .values import from_native

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
    "Subscription",
    "SubscriptionSet",
    "MutableSubscriptionSet",
    "SubscriptionState",
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


@dataclass(frozen=True)
class CompensatingWrite:
    """One object of a write the server rejected and reverted."""

    object_type: str
    primary_key: Any
    reason: str


@dataclass(frozen=True)
class SyncError:
    """A sync error reported to :attr:`App.on_sync_error`. Code 231 is a compensating write
    (``is_fatal`` false, action ``WARNING``); 226 a rejected subscription set."""

    code: int
    message: str
    is_fatal: bool
    action: Union[SyncAction, int]
    compensating_writes: list[CompensatingWrite] = field(default_factory=list)

    @classmethod
    def _from_native(cls, raw: _native.SyncErrorInfo) -> "SyncError":
        writes = []
        for i in range(raw.compensating_writes_count):
            w = raw.compensating_writes[i]
            writes.append(
                CompensatingWrite(_text(w.object_type), from_native(w.primary_key), _text(w.reason))
            )
        return cls(raw.code, _text(raw.message), bool(raw.is_fatal), _action(raw.action), writes)


# --- Completions --------------------------------------------------------------------------------


class _Pending:
    """One asynchronous call of the library: its completion arrives on the loop thread."""

    __slots__ = ("event", "error", "user", "abandoned", "on_done", "lock")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.error: Optional[Exception] = None
        self.user: Optional[int] = None
        self.abandoned = False
        self.on_done: Optional[Callable[[], None]] = None
        self.lock = threading.Lock()

    def complete(self, error: Optional[Exception], user: Optional[int] = None) -> None:
        with self.lock:
            self.error = error
            self.user = user
            abandoned = self.abandoned
            on_done = self.on_done
        if abandoned and user:
            _native.lib().ferry_user_free(user)  # nobody will take it
        self.event.set()
        if on_done is not None:
            on_done()

    def wait(self, timeout: Optional[float], what: str) -> Optional[int]:
        """Waits for the completion; raises its error or FerryTimeoutError. Returns the user
        handle of a login."""
        if not self.event.wait(timeout):
            with self.lock:
                if not self.event.is_set():
                    self.abandoned = True
                    raise FerryTimeoutError(f"{what} did not complete within {timeout} s")
        if self.error is not None:
            raise self.error
        return self.user

    async def wait_async(self, what: str, timeout: Optional[float]) -> Optional[int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(None))

        with self.lock:
            already = self.event.is_set()
            if not already:
                self.on_done = wake
        if not already:
            try:
                await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                with self.lock:
                    if not self.event.is_set():
                        self.abandoned = True
                        raise FerryTimeoutError(
                            f"{what} did not complete within {timeout} s"
                        ) from None
        if self.error is not None:
            raise self.error
        return self.user


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


def _on_user(userdata: Optional[int], user: Optional[int], error: Any) -> None:
    try:
        p = _pending.pop(userdata or 0, None)
        if p is not None:
            p.complete(_error_from(error), user)
        elif user:
            _native.lib().ferry_user_free(user)
    except BaseException:  # noqa: BLE001
        _log_exception("exception in a Ferry login completion")


def _log_exception(what: str) -> None:
    try:
        _log.exception(what)
    except BaseException:  # noqa: BLE001 - the interpreter may be shutting down
        pass


_STATUS_TRAMPOLINE = _native.STATUS_CB(_on_status)
_USER_TRAMPOLINE = _native.USER_CB(_on_user)


def _start(call: Callable[[int], int]) -> _Pending:
    """Registers a pending completion and makes the call; a failing call never calls back."""
    pending = _Pending()
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
        handler(_sessions.get(session or 0), SyncError._from_native(error.contents))
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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, User) and other._id == self._id

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"<ferry.User {self._id}>"


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


# --- Sessions -----------------------------------------------------------------------------------


class SyncSession:
    """The sync session of one synced database, with the database itself
    (:attr:`database`, an ordinary :class:`~ferry.Database`). A context manager: leaving the
    block closes both. ``session, db = app.open_synced(...)`` also works."""

    def __init__(self, app: "App", user: User, handle: int, database: Database) -> None:
        self._app = app
        self._user = user
        self._handle: Optional[int] = handle
        self.database = database
        app._state.add(handle)
        self._finalizer = weakref.finalize(self, app._state.free_session, handle)
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

    def sync(self, timeout: Optional[float] = DEFAULT_TIMEOUT) -> None:
        """``wait_for_upload`` then ``wait_for_download``."""
        self.wait_for_upload(timeout)
        self.wait_for_download(timeout)

    def close(self, *, close_database: bool = True) -> None:
        """Stops syncing (pending waits fail with ClosedError) and, unless told otherwise,
        closes the database handle too. Idempotent. Not from the loop thread."""
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
        base_url: ``http://host:port`` or ``https://host:port``.
        base_directory: where users are cached (must exist); users who logged in earlier are
            loaded from it, so :attr:`current_user` works offline after a restart.
        ca_file: a PEM CA bundle for https (default: the system's CAs).
        verify_peer: ``False`` disables certificate checks (tests only).
        request_timeout: seconds for HTTP requests.
        log_level, logger: a :class:`LogLevel` and a ``callable(level, message)`` run on the
            loop thread.

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
        verify_peer: bool = True,
        request_timeout: float = 60.0,
        log_level: Union[LogLevel, int] = LogLevel.INFO,
        logger: Optional[Callable[[Any, str], Any]] = None,
    ) -> None:
        lib = _native.lib()
        opts = _native.AppOptions()
        check(lib.ferry_app_options_init(ctypes.byref(opts), _native.FERRY_APP_OPTIONS_VERSION))
        opts.app_id = app_id.encode("utf-8")
        opts.base_url = base_url.encode("utf-8")
        opts.base_directory = os.fsencode(base_directory)
        if ca_file is not None:
            opts.ca_file = os.fsencode(ca_file)
        opts.verify_peer = bool(verify_peer)
        opts.request_timeout_ms = max(1, int(request_timeout * 1000))
        opts.log_level = int(log_level)
        self._log_key = 0
        if logger is not None:
            self._log_key = next(_handler_ids)
            _loggers[self._log_key] = logger
            opts.log_callback = _LOG_TRAMPOLINE
            opts.log_userdata = self._log_key
        handle = ctypes.c_void_p()
        try:
            check(lib.ferry_app_new(ctypes.byref(handle), ctypes.byref(opts)))
        except BaseException:
            _loggers.pop(self._log_key, None)
            raise
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

    # --- users ---

    def _login(self, credentials: Credentials) -> _Pending:
        if not isinstance(credentials, Credentials):
            raise TypeError("credentials must be ferry.Credentials")
        keep: list[Any] = []
        c = credentials._native(keep)
        lib = _native.lib()
        return _start(lambda key: lib.ferry_app_log_in(
            self.handle, ctypes.byref(c), _USER_TRAMPOLINE, key))

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

    def open_synced(self, user: User, path: Union[str, "os.PathLike[str]"], schema: SchemaLike) -> SyncSession:
        """Opens a flexible-sync database of a logged-in user (at once, offline too) and starts
        its session. Nothing syncs down until the subscription set has a subscription.

        Raises:
            AuthError: the user is logged out. MultipleSyncAgentsError. The errors of
            :meth:`ferry.Database.open`.
        """
        lib = _native.lib()
        owned: Optional[Schema] = None
        if not isinstance(schema, Schema):
            owned = schema = Schema(schema or [])
        opts = _native.SyncOptions()
        check(lib.ferry_sync_options_init(ctypes.byref(opts), _native.FERRY_SYNC_OPTIONS_VERSION))
        opts.path = os.fsencode(path)
        opts.schema = schema.handle
        session = ctypes.c_void_p()
        db = ctypes.c_void_p()
        try:
            check(lib.ferry_sync_open(ctypes.byref(session), ctypes.byref(db), user.handle, ctypes.byref(opts)))
        finally:
            if owned is not None:
                owned.close()
        database = Database(db.value, description=os.fsdecode(path), delivery=Delivery.LOOP)
        s = SyncSession(self, user, session.value, database)
        self._sessions.add(s)
        return s

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
