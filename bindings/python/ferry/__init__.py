"""Ferry: the Python binding of libferry, an offline-first device-sync engine.

Pure ctypes; the library is loaded from ``$FERRY_LIBRARY`` (an absolute path) when set, else
``libferry.so`` from the dynamic loader's path. Quick tour::

    import ferry

    item = ferry.ObjectSchema("Item", {
        "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
        "ownerId": ferry.Property(ferry.Type.STRING, indexed=True),
        "complexity": ferry.Property(ferry.Type.INT, indexed=True),
    })
    with ferry.Database.open(in_memory="demo", schema=[item]) as db:
        token = db.observe_query("Item", "complexity <= 4", callback=print)
        with db.write():
            db.create("Item", {"_id": ferry.ObjectId.generate(), "complexity": 2})
        print(len(db.query("Item", "complexity <= $0", 4)))
"""

from __future__ import annotations

from . import _native
from .database import ChangeSet, Database, Delivery, NotificationToken, Object, Results
from .errors import (
    AlreadyInTransactionError,
    AuthError,
    FerryTimeoutError,
    DecryptError,
    NetworkError,
    SyncServerError,
    BusyError,
    ClosedError,
    CorruptError,
    DuplicatePrimaryKeyError,
    FerryError,
    FerryIOError,
    InternalError,
    InvalidArgumentError,
    InvalidHandleError,
    InvalidSchemaError,
    MultipleSyncAgentsError,
    NoMemoryError,
    NoSuchClassError,
    NoSuchPropertyError,
    NotFoundError,
    NotInTransactionError,
    OutOfRangeError,
    QueryError,
    SchemaMismatchError,
    WriteRejectedError,
    WrongTypeError,
    strerror,
)
from .receipts import Receipt, ReceiptState
from .schema import ObjectSchema, Property, Schema
from .sync import (
    App,
    ClientResetEntry,
    ClientResetMode,
    ClientResetOutcome,
    ClientResetReport,
    CompensatingWrite,
    LocalWrite,
    RevertedObject,
    RevertKind,
    WriteKind,
    ConnectionState,
    ConnectionStateToken,
    Credentials,
    DownloadBeforeOpen,
    LogLevel,
    MutableSubscriptionSet,
    PrecheckMode,
    Progress,
    ProgressDirection,
    ProgressMode,
    ProgressStream,
    ProgressToken,
    SessionState,
    Subscription,
    SubscriptionSet,
    SubscriptionState,
    SyncAction,
    SyncError,
    SyncSession,
    User,
    UserState,
)
from .values import ObjectId, Timestamp, Type

__version__ = "0.1.0"
"""The version of this binding (it follows the library's version)."""

__all__ = [
    "__version__",
    "library_version",
    "library_version_number",
    "strerror",
    # values
    "Type",
    "ObjectId",
    "Timestamp",
    # schema
    "Property",
    "ObjectSchema",
    "Schema",
    # database
    "Database",
    "Delivery",
    "Object",
    "Results",
    "ChangeSet",
    "NotificationToken",
    # write receipts
    "Receipt",
    "ReceiptState",
    # sync
    "App",
    "User",
    "UserState",
    "Credentials",
    "LogLevel",
    "SyncSession",
    "SyncError",
    "SyncAction",
    "CompensatingWrite",
    "LocalWrite",
    "RevertedObject",
    "RevertKind",
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
    "ClientResetOutcome",
    "ClientResetReport",
    "ClientResetEntry",
    "PrecheckMode",
    # errors
    "FerryError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "NoMemoryError",
    "FerryIOError",
    "ClosedError",
    "NotInTransactionError",
    "AlreadyInTransactionError",
    "NoSuchClassError",
    "NoSuchPropertyError",
    "WrongTypeError",
    "NotFoundError",
    "DuplicatePrimaryKeyError",
    "QueryError",
    "InvalidSchemaError",
    "SchemaMismatchError",
    "MultipleSyncAgentsError",
    "OutOfRangeError",
    "CorruptError",
    "BusyError",
    "NetworkError",
    "AuthError",
    "SyncServerError",
    "FerryTimeoutError",
    "WriteRejectedError",
    "DecryptError",
    "InternalError",
]


def library_version() -> str:
    """The loaded library's version, ``"MAJOR.MINOR.PATCH"`` (``ferry_version``)."""
    return _native.lib().ferry_version().decode("ascii")


def library_version_number() -> int:
    """The loaded library's version as MAJOR * 10000 + MINOR * 100 + PATCH."""
    return int(_native.lib().ferry_version_number())
