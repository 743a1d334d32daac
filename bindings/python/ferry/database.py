"""Databases, objects, query results and change notifications.

Example::

    import ferry

    item = ferry.ObjectSchema("Item", {
        "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
        "complexity": ferry.Property(ferry.Type.INT, indexed=True),
    })
    with ferry.Database.open("items.ferry", schema=[item]) as db:
        with db.write():
            db.create("Item", {"_id": ferry.ObjectId.generate(), "complexity": 3})
        for obj in db.query("Item", "complexity <= $0", 4):
            print(dict(obj))

Threads: every method may be called from any thread. A write transaction belongs to the
database handle, not to a thread; a thread that wants to write while another writes should use
its own :class:`Database` (opened on the same path or in-memory identifier: handles of one
process share one store).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import itertools
import logging
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Iterator,
    Mapping,
    Optional,
    Sequence,
    Union,
    overload,
)

from . import _native
from .errors import (
    ClosedError,
    FerryError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    check,
)
from .receipts import Receipt, ReceiptState
from .receipts import _READ_TRAMPOLINE as _RECEIPT_READ_TRAMPOLINE
from .receipts import _read_ids as _receipt_read_ids
from .receipts import _reads as _receipt_reads
from .receipts import _state as _receipt_state
from .schema import ObjectSchema, Property, Schema, SchemaLike
from .values import KeepAlive, Type, from_native, make_native, make_native_array, to_native



def _receipt_id(receipt: int) -> int:
    """A receipt as the C API takes it: an int in [0, 2**64)."""
    if isinstance(receipt, bool) or not isinstance(receipt, int) or not 0 <= receipt < 1 << 64:
        raise InvalidArgumentError(f"a write receipt is an int in [0, 2**64), got {receipt!r}")
    return receipt


__all__ = [
    "Database",
    "Delivery",
    "Object",
    "Results",
    "ChangeSet",
    "NotificationToken",
]

_log = logging.getLogger("ferry")

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_SIZE_MAX = 2**64 - 1


class Delivery(enum.IntEnum):
    """Where change callbacks run (``ferry_delivery_t``)."""

    #: On Ferry's event-loop thread, asynchronously after each commit.
    LOOP = _native.FERRY_DELIVERY_LOOP
    #: Only inside :meth:`Database.deliver_notifications`, on the thread that calls it;
    #: :meth:`Database.notification_fd` becomes readable when something waits.
    POLL = _native.FERRY_DELIVERY_POLL


# --- Schema metadata cached per handle ------------------------------------------------------


@dataclass
class _PropertyMeta:
    name: str
    key: int
    type: Type
    flags: int
    link_target: Optional[str]

    @property
    def is_list(self) -> bool:
        return bool(self.flags & _native.FERRY_PROPERTY_LIST)

    def to_property(self) -> Property:
        return Property.from_flags(self.type, self.flags, self.link_target)


@dataclass
class _ClassMeta:
    name: str
    key: int
    flags: int
    properties: list[_PropertyMeta]
    by_name: dict[str, _PropertyMeta] = field(default_factory=dict)
    primary_key: Optional[_PropertyMeta] = None

    def __post_init__(self) -> None:
        self.by_name = {p.name: p for p in self.properties}
        for p in self.properties:
            if p.flags & _native.FERRY_PROPERTY_PRIMARY_KEY:
                self.primary_key = p

    def property_name(self, key: int) -> str:
        if 0 <= key < len(self.properties):
            return self.properties[key].name
        return f"<property {key}>"


def _decode(raw: Optional[bytes]) -> Optional[str]:
    return raw.decode("utf-8") if raw is not None else None


def _check_index(index: int) -> int:
    index = int(index)
    if index < 0 or index > _SIZE_MAX:
        raise OutOfRangeError(f"list index {index} is out of range", _native.FERRY_ERR_OUT_OF_RANGE)
    return index


# --- Objects and results --------------------------------------------------------------------


class Object(Mapping[str, Any]):
    """A snapshot of one object's values, taken when it was read; a read-only mapping from
    property name to value (lists are Python lists, links the target's primary key).

    Changing it does not change the database: write through :class:`Database`.
    """

    __slots__ = ("_class_name", "_values")

    def __init__(self, class_name: str, values: dict[str, Any]) -> None:
        self._class_name = class_name
        self._values = values

    @property
    def class_name(self) -> str:
        """The name of the object's class."""
        return self._class_name

    @property
    def primary_key(self) -> Any:
        """The value of ``_id``."""
        return self._values.get("_id")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Object({self._class_name!r}, {self._values!r})"


class Results(Sequence[Object]):
    """The objects that matched a query, as of the moment it ran (a ``ferry_results_t``).

    A sequence: ``len(results)``, ``results[0]``, ``results[-1]``, ``results[2:5]`` and
    iteration. Each access reads a fresh :class:`Object` snapshot. Call :meth:`close` (or use
    ``with``) to free it early; otherwise it is freed when garbage collected.
    """

    def __init__(self, db: "Database", meta: _ClassMeta, handle: int) -> None:
        self._db = db
        self._meta = meta
        self._handle: Optional[int] = handle
        self._finalizer = weakref.finalize(self, _native.lib().ferry_results_free, handle)
        count = ctypes.c_size_t()
        check(_native.lib().ferry_results_count(ctypes.byref(count), handle))
        self._count = count.value

    @property
    def class_name(self) -> str:
        """The class that was queried."""
        return self._meta.name

    def _get(self, index: int) -> Object:
        if self._handle is None:
            raise ValueError("the results were closed")
        obj = ctypes.c_void_p()
        check(_native.lib().ferry_results_get(ctypes.byref(obj), self._handle, index))
        try:
            return self._db._read_object(obj.value, self._meta)
        finally:
            _native.lib().ferry_object_free(obj.value)

    @overload
    def __getitem__(self, index: int) -> Object: ...

    @overload
    def __getitem__(self, index: slice) -> list[Object]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Object, list[Object]]:
        if isinstance(index, slice):
            return [self._get(i) for i in range(*index.indices(self._count))]
        index = int(index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"results index out of range ({index} of {self._count})")
        return self._get(index)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Object]:
        for i in range(self._count):
            yield self._get(i)

    def close(self) -> None:
        """Frees the results (idempotent)."""
        self._handle = None
        self._finalizer()

    def __enter__(self) -> "Results":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.Results {self._meta.name} count={self._count}>"


# --- Notifications --------------------------------------------------------------------------


@dataclass
class ChangeSet:
    """What changed since the last call: objects are named by their primary keys.

    For an object notification, a deletion gives ``deleted == [pk]`` (and the registration
    stops); a change gives ``modified == [pk]`` with the changed property names; the creation
    of an object that did not exist when registered gives ``inserted == [pk]``.
    """

    inserted: list[Any] = field(default_factory=list)
    deleted: list[Any] = field(default_factory=list)
    modified: list[Any] = field(default_factory=list)
    #: The union of the properties changed on the modified objects, by name.
    modified_properties: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether nothing is reported."""
        return not (self.inserted or self.deleted or self.modified or self.modified_properties)


ChangeCallback = Callable[[ChangeSet], Any]


class _Registration:
    __slots__ = ("callback", "meta", "__weakref__")

    def __init__(self, callback: ChangeCallback, meta: _ClassMeta) -> None:
        self.callback = callback
        self.meta = meta

    def convert(self, raw: _native.ChangeSet) -> ChangeSet:
        def keys(ptr: Any, count: int) -> list[Any]:
            return [from_native(ptr[i]) for i in range(count)]

        return ChangeSet(
            inserted=keys(raw.inserted, raw.inserted_count),
            deleted=keys(raw.deleted, raw.deleted_count),
            modified=keys(raw.modified, raw.modified_count),
            modified_properties=[
                self.meta.property_name(raw.modified_properties[i])
                for i in range(raw.modified_properties_count)
            ],
        )


# userdata (an int id) -> registration. Python state only: no lock is held across C calls, so a
# callback running on Ferry's loop thread can never deadlock with a thread calling into C.
_registrations: dict[int, _Registration] = {}
_registration_ids = itertools.count(1)


def _on_change(userdata: Optional[int], changes: Any) -> None:
    # Runs on Ferry's loop thread (or inside deliver_notifications). Nothing may escape into C.
    try:
        registration = _registrations.get(userdata or 0)
        if registration is None:
            return
        change_set = registration.convert(changes.contents)
        registration.callback(change_set)
    except BaseException:  # noqa: BLE001 - an exception must not unwind into C
        try:
            _log.exception("exception in a Ferry change callback")
        except BaseException:  # noqa: BLE001 - the interpreter may be shutting down
            pass


def _on_free(userdata: Optional[int]) -> None:
    try:
        _registrations.pop(userdata or 0, None)
    except BaseException:  # noqa: BLE001
        pass


# Module-level, so they stay referenced for as long as C may call them: every registration
# passes these two and tells itself apart by its userdata.
_CHANGE_TRAMPOLINE = _native.CHANGE_CB(_on_change)
_FREE_TRAMPOLINE = _native.FREE_FN(_on_free)


class NotificationToken:
    """A change-notification registration. :meth:`close` unregisters it; when it returns the
    callback is not running on another thread and will not run again.

    The :class:`Database` keeps its tokens alive (dropping the last reference does not
    unregister) and closes them when it is closed.
    """

    def __init__(self, db: "Database", handle: int, registration: _Registration) -> None:
        self._db: Optional[Database] = db
        self._handle: Optional[int] = handle
        self._registration = registration
        self._finalizer = weakref.finalize(
            self, _native.lib().ferry_notification_token_free, handle
        )

    @property
    def active(self) -> bool:
        """Whether :meth:`close` has not been called yet."""
        return self._handle is not None

    def close(self) -> None:
        """Unregisters (idempotent; allowed from inside the callback itself)."""
        self._handle = None
        self._finalizer()  # ferry_notification_token_free, at most once
        db, self._db = self._db, None
        if db is not None:
            db._tokens.discard(self)

    def __enter__(self) -> "NotificationToken":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "active" if self.active else "closed"
        return f"<ferry.NotificationToken {self._registration.meta.name} {state}>"


# --- Database -------------------------------------------------------------------------------


class _Loan:
    """A database handle lent to a client-reset callback: valid on the callback's thread until
    the callback returns (the library closes and frees it then, so Python must never touch it
    again)."""

    __slots__ = ("thread", "valid", "results")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.valid = True
        self.results: "weakref.WeakSet[Results]" = weakref.WeakSet()

    def check(self, description: str) -> None:
        if not self.valid:
            raise ClosedError(
                f"{description} was lent to a client reset callback that has returned; the "
                "handle is gone", _native.FERRY_ERR_CLOSED)
        if threading.get_ident() != self.thread:
            raise InvalidArgumentError(
                f"{description} is lent to a client reset callback: use it only on the thread "
                "running the callback", _native.FERRY_ERR_INVALID_ARGUMENT)


class Database:
    """An open Ferry database (a ``ferry_db_t``). Create it with :meth:`open`.

    A context manager: leaving the ``with`` block closes it. Every method may raise a
    :class:`~ferry.FerryError` subclass: :class:`~ferry.ClosedError` after :meth:`close`,
    :class:`~ferry.NoSuchClassError` / :class:`~ferry.NoSuchPropertyError` for unknown names,
    :class:`~ferry.WrongTypeError` for values of the wrong type, and so on.
    """

    def __init__(self, handle: int, *, description: str, delivery: Delivery,
                 _lent: bool = False) -> None:
        """Use :meth:`open`."""
        self._raw_handle = handle
        self._description = description
        self._delivery = delivery
        self._classes: dict[str, _ClassMeta] = {}
        self._classes_by_key: dict[int, _ClassMeta] = {}
        self._tokens: set[NotificationToken] = set()
        self._loan: Optional[_Loan] = None
        self._finalizer: Optional[weakref.finalize] = None
        if _lent:
            # Not ours: the library closes and frees it once the callback returns.
            self._loan = _Loan()
        else:
            self._finalizer = weakref.finalize(self, _native.lib().ferry_db_free, handle)

    @property
    def _handle(self) -> int:
        """The ``ferry_db_t *``; for a handle lent to a client-reset callback only while the
        loan lasts, and only on the thread running the callback."""
        loan = self._loan
        if loan is not None:
            loan.check(self._description)
        return self._raw_handle

    @classmethod
    def _lend(cls, handle: int, description: str) -> "Database":
        """Wraps a handle the library lends to a callback on this thread (a client reset's
        ``before`` or ``after``). :meth:`_end_loan` must run before the callback returns."""
        return cls(handle, description=description, delivery=Delivery.LOOP, _lent=True)

    def _end_loan(self) -> None:
        """The callback returned: closes what was made from the lent handle (its results and
        notification tokens, an open write transaction is cancelled) and makes every later use
        raise :class:`~ferry.ClosedError`. The handle is never touched again."""
        loan = self._loan
        if loan is None or not loan.valid:
            return
        lib = _native.lib()
        try:
            for results in list(loan.results):
                results.close()
            for token in list(self._tokens):
                token.close()
            in_transaction = ctypes.c_bool()
            if (lib.ferry_db_is_in_transaction(ctypes.byref(in_transaction), self._raw_handle)
                    == _native.FERRY_OK and in_transaction.value):
                _log.warning("a client reset callback returned with a write transaction open on %s; "
                             "it is cancelled", self._description)
                lib.ferry_db_cancel(self._raw_handle)
        finally:
            loan.valid = False

    @property
    def lent(self) -> bool:
        """Whether this handle is lent to a client-reset callback (``before_reset`` /
        ``after_reset``): usable only inside the callback, on its thread; never closed by
        the host."""
        return self._loan is not None

    # --- Opening and closing ----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Union[str, "os.PathLike[str]", None] = None,
        *,
        in_memory: Optional[str] = None,
        schema: SchemaLike = None,
        delivery: Union[str, Delivery] = "loop",
        synced: bool = False,
        encryption_key: Optional[bytes] = None,
    ) -> "Database":
        """Opens (or creates) a database.

        Args:
            path: a file database (created if missing; its directory must exist).
            in_memory: an in-memory identifier instead of a path: nothing touches the disk,
                handles with the same identifier in this process share the data, and it is
                dropped when the last handle closes.
            schema: a :class:`~ferry.Schema` or a sequence of :class:`~ferry.ObjectSchema`;
                ``None`` uses the schema stored in the file. Additive changes migrate the file;
                breaking ones raise :class:`~ferry.SchemaMismatchError` and leave it unchanged.
            delivery: ``"loop"`` (callbacks on Ferry's loop thread) or ``"poll"`` (callbacks
                only inside :meth:`deliver_notifications`).
            synced: marks the file as synced; only one process (the sync agent) may then have
                it open: others get :class:`~ferry.MultipleSyncAgentsError`.
            encryption_key: 64 bytes to encrypt the file with (a new file is created encrypted;
                an existing one must have been encrypted with this key): every page of the file
                and its WAL is encrypted and authenticated with AES-256-GCM. A wrong key, or a
                key for an unencrypted file, raises :class:`~ferry.DecryptError`. Not for
                in-memory databases.

        Exactly one of ``path`` and ``in_memory`` must be given (the library checks).
        """
        if isinstance(delivery, str):
            try:
                delivery = Delivery[delivery.upper()]
            except KeyError:
                raise ValueError(f"delivery must be 'loop' or 'poll', not {delivery!r}") from None
        delivery = Delivery(delivery)
        lib = _native.lib()
        opts = _native.DbOptions()
        check(lib.ferry_db_options_init(ctypes.byref(opts), _native.FERRY_DB_OPTIONS_VERSION))
        if path is not None:
            opts.path = os.fsencode(path)
        if in_memory is not None:
            opts.in_memory_identifier = in_memory.encode("utf-8")
        owned_schema: Optional[Schema] = None
        if schema is not None:
            if not isinstance(schema, Schema):
                owned_schema = schema = Schema(schema)
            opts.schema = schema.handle
        opts.delivery = int(delivery)
        opts.synced = bool(synced)
        key_buffer = _key_buffer(encryption_key)
        if key_buffer is not None:
            opts.encryption_key = ctypes.addressof(key_buffer)
        handle = ctypes.c_void_p()
        try:
            check(lib.ferry_db_open(ctypes.byref(handle), ctypes.byref(opts)))
        finally:
            _wipe(key_buffer)  # the library keeps its own copy
            if owned_schema is not None:
                owned_schema.close()  # the database keeps its own copy
        if path is not None:
            description = os.fsdecode(path)
        else:
            description = f"in-memory:{in_memory}"
        return cls(handle.value, description=description, delivery=delivery)

    @staticmethod
    def change_key(
        path: Union[str, "os.PathLike[str]"],
        old_key: Optional[bytes],
        new_key: Optional[bytes],
    ) -> None:
        """Encrypts (``old_key=None``), decrypts (``new_key=None``) or re-keys the database
        file at ``path``, which no process may have open. Keys are 64 bytes. The file is
        rewritten beside itself and moved over the original once complete. Raises
        :class:`~ferry.DecryptError` when ``old_key`` does not open the file."""
        old_buffer, new_buffer = _key_buffer(old_key), _key_buffer(new_key)
        try:
            check(_native.lib().ferry_db_change_key(
                os.fsencode(path),
                None if old_buffer is None else ctypes.addressof(old_buffer),
                None if new_buffer is None else ctypes.addressof(new_buffer)))
        finally:
            _wipe(old_buffer)
            _wipe(new_buffer)

    def close(self) -> None:
        """Closes the database: an open write transaction is cancelled and notifications stop
        (their tokens are closed). Later calls raise :class:`~ferry.ClosedError`. Closing
        twice is allowed; allowed inside a change callback. A handle lent to a client-reset
        callback is not the host's to close (:class:`~ferry.InvalidArgumentError`)."""
        if self._loan is not None:
            self._loan.check(self._description)  # ClosedError once the loan ended
            raise InvalidArgumentError(
                f"{self._description} is lent to a client reset callback: the library closes it "
                "when the callback returns", _native.FERRY_ERR_INVALID_ARGUMENT)
        check(_native.lib().ferry_db_close(self._handle))
        for token in list(self._tokens):
            token.close()

    @property
    def closed(self) -> bool:
        """Whether the handle is closed."""
        if self._loan is not None and not self._loan.valid:
            return True  # the loan ended: the library closed the handle
        out = ctypes.c_bool()
        check(_native.lib().ferry_db_is_closed(ctypes.byref(out), self._handle))
        return bool(out.value)

    @property
    def delivery(self) -> Delivery:
        """How change callbacks are delivered."""
        return self._delivery

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.Database {self._description}>"

    # --- Schema -----------------------------------------------------------------------------

    def _class(self, name: str) -> _ClassMeta:
        meta = self._classes.get(name)
        if meta is not None:
            return meta
        if not isinstance(name, str):
            raise TypeError(f"a class name must be a str, not {type(name).__name__}")
        key = ctypes.c_uint32()
        check(_native.lib().ferry_db_find_class(ctypes.byref(key), self._handle, name.encode()))
        return self._load_class(key.value)

    def _class_by_key(self, key: int) -> _ClassMeta:
        meta = self._classes_by_key.get(key)
        return meta if meta is not None else self._load_class(key)

    def _load_class(self, key: int) -> _ClassMeta:
        lib = _native.lib()
        info = _native.ClassInfo()
        check(lib.ferry_db_get_class(ctypes.byref(info), self._handle, key))
        name = _decode(info.name) or ""
        props: list[_PropertyMeta] = []
        for pkey in range(info.property_count):
            pinfo = _native.PropertyInfo()
            check(lib.ferry_db_get_property(ctypes.byref(pinfo), self._handle, key, pkey))
            props.append(
                _PropertyMeta(
                    name=_decode(pinfo.name) or "",
                    key=pkey,
                    type=Type(pinfo.type),
                    flags=pinfo.flags,
                    link_target=_decode(pinfo.link_target),
                )
            )
        meta = _ClassMeta(name=name, key=key, flags=info.flags, properties=props)
        # Idempotent: two threads loading the same class store equal metadata.
        meta = self._classes.setdefault(name, meta)
        self._classes_by_key.setdefault(key, meta)
        return meta

    def _property(self, meta: _ClassMeta, name: str) -> _PropertyMeta:
        prop = meta.by_name.get(name)
        if prop is not None:
            return prop
        if not isinstance(name, str):
            raise TypeError(f"a property name must be a str, not {type(name).__name__}")
        # Let the library say what is wrong (NoSuchProperty, Closed...).
        key = ctypes.c_uint32()
        check(
            _native.lib().ferry_db_find_property(
                ctypes.byref(key), self._handle, meta.key, name.encode()
            )
        )
        # The library knows a property the cached class lacks: should not happen.
        self._classes.pop(meta.name, None)
        self._classes_by_key.pop(meta.key, None)
        return self._class(meta.name).by_name[name]

    def _hint(self, prop: Optional[_PropertyMeta]) -> Optional[int]:
        """The Ferry type a Python value for ``prop`` should become (links: the target's key)."""
        if prop is None:
            return None
        if prop.type == Type.LINK and prop.link_target:
            try:
                target = self._class(prop.link_target)
            except FerryError:
                return None
            return target.primary_key.type if target.primary_key else None
        return prop.type

    def _pk(self, meta: _ClassMeta, value: Any, keep: KeepAlive) -> _native.Value:
        return make_native(value, keep, self._hint(meta.primary_key))

    @property
    def class_names(self) -> list[str]:
        """The names of the classes in the database's schema, in key order."""
        count = ctypes.c_size_t()
        check(_native.lib().ferry_db_class_count(ctypes.byref(count), self._handle))
        return [self._class_by_key(k).name for k in range(count.value)]

    @property
    def schema(self) -> list[ObjectSchema]:
        """The database's schema as the library reports it."""
        result = []
        for name in self.class_names:
            meta = self._classes[name]
            result.append(
                ObjectSchema(
                    meta.name,
                    {p.name: p.to_property() for p in meta.properties},
                    asymmetric=bool(meta.flags & _native.FERRY_CLASS_ASYMMETRIC),
                )
            )
        return result

    # --- Transactions -----------------------------------------------------------------------

    def begin_write(self) -> None:
        """Begins a write transaction on this handle, waiting while another handle or process
        writes. Prefer ``with db.write():``.

        Raises:
            AlreadyInTransactionError: this handle, or another one on this thread, has one.
            BusyError: another process held the write lock for more than 10 seconds.
        """
        check(_native.lib().ferry_db_begin_write(self._handle))

    def commit(self) -> int:
        """Commits the write transaction (data and one history changeset, durably) and returns
        its write receipt (0 for a transaction that changed nothing), also kept as
        :attr:`last_receipt`. See :meth:`receipt_state` and
        :meth:`ferry.SyncSession.wait_for_receipt`."""
        out = ctypes.c_uint64()
        check(_native.lib().ferry_db_commit_with_receipt(ctypes.byref(out), self._handle))
        self._last_receipt = int(out.value)
        return self._last_receipt

    @property
    def last_receipt(self) -> int:
        """The write receipt of this handle's last commit through this object (0 before any):
        the way to get the receipt of a ``with db.write():`` block."""
        return getattr(self, "_last_receipt", 0)

    def receipt_state(self, receipt: int) -> Union[ReceiptState, int]:
        """The state of a write receipt of this file (``ferry_db_receipt_state``).

        Raises:
            NotFoundError: a receipt this file never gave, or one that expired (the file keeps
                the last 1024 rejected receipts).
        """
        out = ctypes.c_int32()
        check(_native.lib().ferry_db_receipt_state(ctypes.byref(out), self._handle, _receipt_id(receipt)))
        return _receipt_state(out.value)

    def read_receipt(self, receipt: int) -> Receipt:
        """The receipt's state with, when ``REJECTED``, its compensating writes
        (``ferry_db_read_receipt``). Raises as :meth:`receipt_state`."""
        key = next(_receipt_read_ids)
        _receipt_reads[key] = slot = []
        try:
            check(_native.lib().ferry_db_read_receipt(self._handle, _receipt_id(receipt), _RECEIPT_READ_TRAMPOLINE, key))
        finally:
            _receipt_reads.pop(key, None)
        if not slot:
            raise InternalError("ferry_db_read_receipt succeeded without calling back")
        return slot[0]

    def cancel(self) -> None:
        """Cancels the write transaction, discarding its changes."""
        check(_native.lib().ferry_db_cancel(self._handle))

    @property
    def in_transaction(self) -> bool:
        """Whether this handle has a write transaction open."""
        out = ctypes.c_bool()
        check(_native.lib().ferry_db_is_in_transaction(ctypes.byref(out), self._handle))
        return bool(out.value)

    @contextlib.contextmanager
    def write(self) -> Iterator["Database"]:
        """A write transaction: ``with db.write(): ...`` commits when the block succeeds and
        cancels when it raises (the exception propagates)."""
        self.begin_write()
        try:
            yield self
        except BaseException:
            try:
                self.cancel()
            except FerryError:
                pass  # e.g. the block closed the database: the original error matters more
            raise
        self.commit()

    # --- Writing ----------------------------------------------------------------------------

    def _property_values(
        self, meta: _ClassMeta, values: Mapping[str, Any], keep: KeepAlive
    ) -> tuple[Any, int, dict[str, list[Any]]]:
        scalars = []
        lists: dict[str, list[Any]] = {}
        for name, value in values.items():
            prop = self._property(meta, name)
            if prop.is_list and isinstance(value, (list, tuple)):
                lists[name] = list(value)
            else:
                scalars.append((prop, value))
        array = (_native.PropertyValue * max(len(scalars), 1))()
        for i, (prop, value) in enumerate(scalars):
            array[i].property = prop.key
            to_native(value, array[i].value, keep, self._hint(prop))
        return array, len(scalars), lists

    def _primary_key_of(self, meta: _ClassMeta, values: Mapping[str, Any]) -> Any:
        pk = meta.primary_key.name if meta.primary_key else "_id"
        return values.get(pk)

    def create(self, class_name: str, values: Mapping[str, Any]) -> Any:
        """Creates an object and returns its primary key.

        ``values`` must include ``_id``. Required properties left out get their type's zero
        value, optional ones ``None``. List properties may be given as Python lists (they are
        filled after the object is created, in the same transaction).

        Raises:
            DuplicatePrimaryKeyError, NotInTransactionError, NoSuchPropertyError,
            WrongTypeError, InvalidArgumentError (no primary key).
        """
        meta = self._class(class_name)
        keep = KeepAlive()
        array, count, lists = self._property_values(meta, values, keep)
        check(_native.lib().ferry_object_create(self._handle, meta.key, array, count))
        pk = self._primary_key_of(meta, values)
        for name, items in lists.items():
            self._fill_list(meta, pk, name, items)
        return pk

    def upsert(self, class_name: str, values: Mapping[str, Any]) -> Any:
        """Creates the object, or sets the given properties on the existing one with the same
        primary key, and returns the primary key. Only values that differ are recorded as
        changes. A list given as a Python list replaces the stored list if it differs."""
        meta = self._class(class_name)
        keep = KeepAlive()
        array, count, lists = self._property_values(meta, values, keep)
        check(_native.lib().ferry_object_upsert(self._handle, meta.key, array, count))
        pk = self._primary_key_of(meta, values)
        if lists:
            current = self.get(class_name, pk)
            for name, items in lists.items():
                if current is None or current[name] != items:
                    self._fill_list(meta, pk, name, items)
        return pk

    def _fill_list(self, meta: _ClassMeta, pk: Any, name: str, items: list[Any]) -> None:
        self.list_clear(meta.name, pk, name)
        for i, item in enumerate(items):
            self.list_insert(meta.name, pk, name, i, item)

    def reapply_reverted(self, reverted: Any, overrides: Optional[Mapping[str, Any]] = None) -> None:
        """Puts back what the revert of a compensating write took (a
        :class:`~ferry.RevertedObject`, SPEC F-NOLOSS) as new local writes that sync like any
        other: a removed object is created again with the device's values, changed-back
        properties get them back, a restored object is deleted again. ``overrides`` (property
        name to value, lists as Python lists) replace or add values first: fix what the
        server refused, e.g. ``{"ownerId": user.id}``. Joins the open write transaction,
        else runs in one of its own.

        Raises:
            NotFoundError (changed properties of an object that is gone), InvalidArgumentError
            (the primary key overridden, overrides for a restored object), NoSuchPropertyError,
            WrongTypeError.
        """
        record = getattr(reverted, "_ptr", None)
        if record is None:
            raise TypeError("reapply_reverted takes a ferry.RevertedObject")
        meta = self._class(reverted.object_type)
        keep = KeepAlive()
        array, count, lists = self._property_values(meta, dict(overrides or {}), keep)
        if not lists:
            check(_native.lib().ferry_db_reapply_reverted(self._handle, record, array, count))
            return
        own = not self.in_transaction
        if own:
            self.begin_write()
        try:
            check(_native.lib().ferry_db_reapply_reverted(self._handle, record, array, count))
            for name, items in lists.items():
                self._fill_list(meta, reverted.primary_key, name, items)
            if own:
                self.commit()
        except BaseException:
            if own:
                self.cancel()
            raise

    def set(self, class_name: str, primary_key: Any, prop: str, value: Any) -> None:
        """Sets one property of an existing object (not the primary key).

        For a list property, a Python list replaces the list's contents.

        Raises:
            NotFoundError, WrongTypeError, NotInTransactionError, InvalidArgumentError.
        """
        meta = self._class(class_name)
        p = self._property(meta, prop)
        if p.is_list and isinstance(value, (list, tuple)):
            self._fill_list(meta, primary_key, prop, list(value))
            return
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        v = make_native(value, keep, self._hint(p))
        check(
            _native.lib().ferry_object_set(
                self._handle, meta.key, ctypes.byref(pk), p.key, ctypes.byref(v)
            )
        )

    def update(self, class_name: str, primary_key: Any, values: Mapping[str, Any]) -> None:
        """Sets several properties of an existing object (see :meth:`set`)."""
        for prop, value in values.items():
            self.set(class_name, primary_key, prop, value)

    def add(self, class_name: str, primary_key: Any, prop: str, delta: int = 1) -> None:
        """Adds ``delta`` to an int property (a counter; a null optional counts as 0).

        Raises:
            OutOfRangeError: overflow. WrongTypeError: not an int property.
        """
        meta = self._class(class_name)
        p = self._property(meta, prop)
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"delta must be an int, not {type(delta).__name__}")
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise OverflowError(f"{delta} does not fit in a 64-bit Ferry int")
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        check(
            _native.lib().ferry_object_add_int(
                self._handle, meta.key, ctypes.byref(pk), p.key, delta
            )
        )

    def delete(self, class_name: str, primary_key: Any) -> None:
        """Deletes an object. Raises :class:`~ferry.NotFoundError` if there is none."""
        meta = self._class(class_name)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        check(_native.lib().ferry_object_delete(self._handle, meta.key, ctypes.byref(pk)))

    # --- Lists ------------------------------------------------------------------------------

    def list_insert(
        self, class_name: str, primary_key: Any, prop: str, index: int, value: Any
    ) -> None:
        """Inserts ``value`` at ``index`` (``index == len`` appends).

        Raises:
            OutOfRangeError, WrongTypeError (also for a property that is not a list),
            NotFoundError.
        """
        meta = self._class(class_name)
        p = self._property(meta, prop)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        v = make_native(value, keep, self._hint(p))
        check(
            _native.lib().ferry_list_insert(
                self._handle, meta.key, ctypes.byref(pk), p.key, _check_index(index),
                ctypes.byref(v),
            )
        )

    def list_append(self, class_name: str, primary_key: Any, prop: str, value: Any) -> None:
        """Appends ``value`` to a list property."""
        current = self.get(class_name, primary_key)
        if current is None:
            raise NotFoundError(
                f"no {class_name} with primary key {primary_key!r}", _native.FERRY_ERR_NOT_FOUND
            )
        items = current[prop]
        size = len(items) if isinstance(items, list) else 0
        self.list_insert(class_name, primary_key, prop, size, value)

    def list_set(
        self, class_name: str, primary_key: Any, prop: str, index: int, value: Any
    ) -> None:
        """Replaces the element at ``index``."""
        meta = self._class(class_name)
        p = self._property(meta, prop)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        v = make_native(value, keep, self._hint(p))
        check(
            _native.lib().ferry_list_set(
                self._handle, meta.key, ctypes.byref(pk), p.key, _check_index(index),
                ctypes.byref(v),
            )
        )

    def list_erase(self, class_name: str, primary_key: Any, prop: str, index: int) -> None:
        """Removes the element at ``index``."""
        meta = self._class(class_name)
        p = self._property(meta, prop)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        check(
            _native.lib().ferry_list_erase(
                self._handle, meta.key, ctypes.byref(pk), p.key, _check_index(index)
            )
        )

    def list_clear(self, class_name: str, primary_key: Any, prop: str) -> None:
        """Removes every element of a list property."""
        meta = self._class(class_name)
        p = self._property(meta, prop)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        check(_native.lib().ferry_list_clear(self._handle, meta.key, ctypes.byref(pk), p.key))

    # --- Reading ----------------------------------------------------------------------------

    def _read_object(self, handle: int, meta: Optional[_ClassMeta] = None) -> Object:
        lib = _native.lib()
        key = ctypes.c_uint32()
        check(lib.ferry_object_get_class(ctypes.byref(key), handle))
        if meta is None or meta.key != key.value:
            meta = self._class_by_key(key.value)
        values: dict[str, Any] = {}
        value = _native.Value()
        items = ctypes.POINTER(_native.Value)()
        count = ctypes.c_size_t()
        for p in meta.properties:
            if p.is_list:
                check(lib.ferry_object_get_list(ctypes.byref(items), ctypes.byref(count), handle, p.key))
                values[p.name] = [from_native(items[i]) for i in range(count.value)]
            else:
                check(lib.ferry_object_get_value(ctypes.byref(value), handle, p.key))
                values[p.name] = from_native(value)
        return Object(meta.name, values)

    def get(self, class_name: str, primary_key: Any) -> Optional[Object]:
        """The object with this primary key as an :class:`Object` snapshot, or ``None``.

        Raises:
            WrongTypeError: a key of the wrong type. NoSuchClassError. ClosedError.
        """
        meta = self._class(class_name)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        obj = ctypes.c_void_p()
        try:
            check(_native.lib().ferry_object_get(ctypes.byref(obj), self._handle, meta.key, ctypes.byref(pk)))
        except NotFoundError:
            return None
        try:
            return self._read_object(obj.value, meta)
        finally:
            _native.lib().ferry_object_free(obj.value)

    def query(self, class_name: str, query: str = "TRUEPREDICATE", *args: Any) -> Results:
        """Runs a query (Realm Query Language style) and returns the matching objects.

        ``db.query("Item", "complexity <= $0 AND ownerId == $1", 4, "alice")``;
        ``SORT(complexity DESC) LIMIT(10)`` may follow the predicate.

        Raises:
            QueryError: the query does not parse or does not fit the schema (the message gives
                the byte offset and what was expected).
        """
        meta = self._class(class_name)
        keep = KeepAlive()
        array, count = make_native_array(args, keep)
        out = ctypes.c_void_p()
        check(
            _native.lib().ferry_db_query(
                ctypes.byref(out), self._handle, meta.key, query.encode("utf-8"), array, count
            )
        )
        results = Results(self, meta, out.value)
        if self._loan is not None:
            self._loan.results.add(results)  # closed when the loan ends
        return results

    def objects(self, class_name: str) -> Results:
        """Every object of a class."""
        return self.query(class_name, "TRUEPREDICATE")

    # --- Notifications ----------------------------------------------------------------------

    def _register(
        self, meta: _ClassMeta, callback: ChangeCallback, register: Callable[..., int]
    ) -> NotificationToken:
        if not callable(callback):
            raise TypeError("callback must be callable")
        registration = _Registration(callback, meta)
        reg_id = next(_registration_ids)
        _registrations[reg_id] = registration
        out = ctypes.c_void_p()
        try:
            rc = register(ctypes.byref(out), reg_id)
        except BaseException:
            _registrations.pop(reg_id, None)  # the call never reached C
            raise
        # On failure the library has already run userdata_free, which removed the entry.
        check(rc)
        token = NotificationToken(self, out.value, registration)
        self._tokens.add(token)
        return token

    def observe_query(
        self,
        class_name: str,
        query: str,
        *args: Any,
        callback: ChangeCallback,
    ) -> NotificationToken:
        """Calls ``callback(ChangeSet)`` after commits that change the query's results: objects
        entering or leaving them (inserted/deleted) or objects in them changing (modified).

        The callback runs on Ferry's loop thread (``delivery="loop"``) or inside
        :meth:`deliver_notifications`. It should not block. An exception it raises is logged
        (logger ``"ferry"``) and otherwise ignored.
        """
        meta = self._class(class_name)
        keep = KeepAlive()
        array, count = make_native_array(args, keep)
        encoded = query.encode("utf-8")
        lib = _native.lib()

        def register(out: Any, reg_id: int) -> int:
            return lib.ferry_db_observe_query(
                out, self._handle, meta.key, encoded, array, count,
                _CHANGE_TRAMPOLINE, reg_id, _FREE_TRAMPOLINE,
            )

        return self._register(meta, callback, register)

    def observe_object(
        self, class_name: str, primary_key: Any, *, callback: ChangeCallback
    ) -> NotificationToken:
        """Calls ``callback(ChangeSet)`` when the object changes (``modified``), is deleted
        (``deleted``; the registration then stops) or, if it did not exist yet, is created
        (``inserted``). Runs where :meth:`observe_query`'s callbacks run."""
        meta = self._class(class_name)
        keep = KeepAlive()
        pk = self._pk(meta, primary_key, keep)
        lib = _native.lib()

        def register(out: Any, reg_id: int) -> int:
            return lib.ferry_db_observe_object(
                out, self._handle, meta.key, ctypes.byref(pk),
                _CHANGE_TRAMPOLINE, reg_id, _FREE_TRAMPOLINE,
            )

        return self._register(meta, callback, register)

    def notification_fd(self) -> int:
        """For ``delivery="poll"``: a file descriptor (owned by Ferry) that is readable when
        notifications wait; poll it, then call :meth:`deliver_notifications`. Do not read or
        close it."""
        out = ctypes.c_int()
        check(_native.lib().ferry_db_notification_fd(ctypes.byref(out), self._handle))
        return out.value

    def deliver_notifications(self) -> int:
        """For ``delivery="poll"``: runs the pending callbacks on this thread and returns how
        many ran."""
        out = ctypes.c_size_t()
        check(_native.lib().ferry_db_deliver_notifications(ctypes.byref(out), self._handle))
        return out.value

    # --- Copies -----------------------------------------------------------------------------

    def write_copy(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes a consistent copy of the whole file (data, schema, and for a synced database
        its sync state and unsynced changes) to a new file at ``path``
        (``ferry_db_write_copy``); e.g. inside ``before_reset`` to keep the database as it was
        before a client reset. The copy opens with :meth:`open` (``schema=None``: the file's
        own). To hand a synced database to another user, use
        :meth:`~ferry.SyncSession.write_copy` instead.

        Raises:
            InvalidArgumentError: an empty or existing path. FerryIOError. ClosedError.
        """
        check(_native.lib().ferry_db_write_copy(self._handle, os.fsencode(path)))

    # --- History ----------------------------------------------------------------------------

    def history_count(self) -> int:
        """The number of changesets in the local history (one per committed transaction that
        changed something)."""
        out = ctypes.c_uint64()
        check(_native.lib().ferry_db_history_count(ctypes.byref(out), self._handle))
        return out.value

    def verify_history(self) -> bool:
        """Replays the history into an empty copy and compares it with the data.

        Returns ``True`` when they agree. Reads the whole database: meant for tests and repair.

        Raises:
            CorruptError: naming the first difference.
            InvalidArgumentError: a synced database (its data holds downloads that are not in
                its history).
        """
        check(_native.lib().ferry_db_verify_history(self._handle))
        return True


def _key_buffer(key: Optional[bytes]) -> "Optional[ctypes.Array[ctypes.c_char]]":
    """A C copy of an encryption key (None stays None); the length is checked here because the
    library cannot see it."""
    if key is None:
        return None
    key = bytes(key)
    if len(key) != _native.FERRY_ENCRYPTION_KEY_SIZE:
        raise InvalidArgumentError(
            f"an encryption key is {_native.FERRY_ENCRYPTION_KEY_SIZE} bytes, got {len(key)}",
            _native.FERRY_ERR_INVALID_ARGUMENT)
    return ctypes.create_string_buffer(key, len(key))


def _wipe(buffer: "Optional[ctypes.Array[ctypes.c_char]]") -> None:
    """Zeroes the binding's C copy of a key once the library has taken its own."""
    if buffer is not None:
        ctypes.memset(buffer, 0, len(buffer))
