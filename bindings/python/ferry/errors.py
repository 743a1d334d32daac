"""Exceptions mapped from Ferry's error codes.

Every failing call into ``libferry`` raises a subclass of :class:`FerryError` chosen by the
code the call returned, carrying the message of ``ferry_error_last()``. Several subclasses also
derive from the matching built-in exception so that ordinary Python handlers work:
``NotFoundError`` is a ``KeyError``, ``OutOfRangeError`` an ``IndexError``,
``WrongTypeError`` a ``TypeError``, ``InvalidArgumentError`` a ``ValueError``,
``FerryIOError`` an ``OSError`` and ``NoMemoryError`` a ``MemoryError``.
"""

from __future__ import annotations

from typing import ClassVar, Optional

from . import _native

__all__ = [
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
    "InternalError",
    "NetworkError",
    "AuthError",
    "SyncServerError",
    "FerryTimeoutError",
    "WriteRejectedError",
    "error_for_code",
    "strerror",
]


class FerryError(Exception):
    """An error reported by libferry.

    Attributes:
        code: the negative ``FERRY_ERR_*`` code.
        message: the library's description (from ``ferry_error_last()``).
    """

    CODE: ClassVar[Optional[int]] = None

    code: int
    message: str

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is None:
            code = self.CODE if self.CODE is not None else _native.FERRY_ERR_INTERNAL
        self.code = code

    def __str__(self) -> str:  # KeyError and OSError would otherwise format it their way
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"

    def __reduce__(self):  # picklable despite the keyword argument and mixed bases
        return (type(self), (self.message, self.code))


class InvalidArgumentError(FerryError, ValueError):
    """FERRY_ERR_INVALID_ARGUMENT: a NULL pointer, a bad option, an out-of-range number..."""

    CODE = _native.FERRY_ERR_INVALID_ARGUMENT


class InvalidHandleError(FerryError):
    """FERRY_ERR_INVALID_HANDLE: a NULL, freed or wrong kind of handle."""

    CODE = _native.FERRY_ERR_INVALID_HANDLE


class NoMemoryError(FerryError, MemoryError):
    """FERRY_ERR_NO_MEMORY."""

    CODE = _native.FERRY_ERR_NO_MEMORY


class FerryIOError(FerryError, OSError):
    """FERRY_ERR_IO: the file system or SQLite failed."""

    CODE = _native.FERRY_ERR_IO

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        # OSError's own constructor would read (code, message) as (errno, strerror).
        FerryError.__init__(self, message, code)


class ClosedError(FerryError):
    """FERRY_ERR_CLOSED: the database was closed."""

    CODE = _native.FERRY_ERR_CLOSED


class NotInTransactionError(FerryError):
    """FERRY_ERR_NOT_IN_TRANSACTION: a write outside a write transaction."""

    CODE = _native.FERRY_ERR_NOT_IN_TRANSACTION


class AlreadyInTransactionError(FerryError):
    """FERRY_ERR_ALREADY_IN_TRANSACTION: a nested begin."""

    CODE = _native.FERRY_ERR_ALREADY_IN_TRANSACTION


class NoSuchClassError(FerryError):
    """FERRY_ERR_NO_SUCH_CLASS."""

    CODE = _native.FERRY_ERR_NO_SUCH_CLASS


class NoSuchPropertyError(FerryError):
    """FERRY_ERR_NO_SUCH_PROPERTY."""

    CODE = _native.FERRY_ERR_NO_SUCH_PROPERTY


class WrongTypeError(FerryError, TypeError):
    """FERRY_ERR_WRONG_TYPE: a value of the wrong type for the property."""

    CODE = _native.FERRY_ERR_WRONG_TYPE


class NotFoundError(FerryError, KeyError):
    """FERRY_ERR_NOT_FOUND: no object with that primary key."""

    CODE = _native.FERRY_ERR_NOT_FOUND


class DuplicatePrimaryKeyError(FerryError):
    """FERRY_ERR_DUPLICATE_PRIMARY_KEY."""

    CODE = _native.FERRY_ERR_DUPLICATE_PRIMARY_KEY


class QueryError(FerryError, ValueError):
    """FERRY_ERR_QUERY: a query that does not parse or does not fit the schema.

    The message gives the byte offset of the problem and what was expected.
    """

    CODE = _native.FERRY_ERR_QUERY


class InvalidSchemaError(FerryError, ValueError):
    """FERRY_ERR_INVALID_SCHEMA: the message names the class and property."""

    CODE = _native.FERRY_ERR_INVALID_SCHEMA


class SchemaMismatchError(FerryError):
    """FERRY_ERR_SCHEMA_MISMATCH: a breaking change against the schema in the file.

    The file is left unchanged.
    """

    CODE = _native.FERRY_ERR_SCHEMA_MISMATCH


class MultipleSyncAgentsError(FerryError):
    """FERRY_ERR_MULTIPLE_SYNC_AGENTS: another process is the sync agent of this file."""

    CODE = _native.FERRY_ERR_MULTIPLE_SYNC_AGENTS


class OutOfRangeError(FerryError, IndexError):
    """FERRY_ERR_OUT_OF_RANGE: an index past the end, or an integer overflow."""

    CODE = _native.FERRY_ERR_OUT_OF_RANGE


class CorruptError(FerryError):
    """FERRY_ERR_CORRUPT: not a Ferry database, damaged, or data and history disagree."""

    CODE = _native.FERRY_ERR_CORRUPT


class BusyError(FerryError):
    """FERRY_ERR_BUSY: another process held the file's write lock too long."""

    CODE = _native.FERRY_ERR_BUSY


class NetworkError(FerryError, ConnectionError):
    """FERRY_ERR_NETWORK: the server could not be reached, or the connection broke."""

    CODE = _native.FERRY_ERR_NETWORK

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        FerryError.__init__(self, message, code)


class AuthError(FerryError):
    """FERRY_ERR_AUTH: the server refused the credentials or the token (or the user is
    logged out)."""

    CODE = _native.FERRY_ERR_AUTH


class SyncServerError(FerryError):
    """FERRY_ERR_SYNC: the sync server reported an error (e.g. a rejected subscription set;
    the message is the server's)."""

    CODE = _native.FERRY_ERR_SYNC


class FerryTimeoutError(FerryError, TimeoutError):
    """FERRY_ERR_TIMEOUT, or a blocking wait of the binding that ran out of time."""

    CODE = _native.FERRY_ERR_TIMEOUT

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        FerryError.__init__(self, message, code)


class DecryptError(FerryError):
    """FERRY_ERR_DECRYPT: an encrypted file cannot be decrypted: a wrong or missing key, a key
    for an unencrypted file, or a page that fails authentication (changed or damaged)."""

    CODE = _native.FERRY_ERR_DECRYPT


class InternalError(FerryError):
    """FERRY_ERR_INTERNAL: a bug in Ferry; please report it with the message."""

    CODE = _native.FERRY_ERR_INTERNAL


class WriteRejectedError(FerryError):
    """FERRY_ERR_WRITE_REJECTED: a strict pre-flight check (SPEC F-PRECHECK) refused a write
    transaction; it was rolled back. The message lists the reasons; the session's
    ``on_precheck`` callable got the same list."""

    CODE = _native.FERRY_ERR_WRITE_REJECTED


_BY_CODE: dict[int, type[FerryError]] = {
    cls.CODE: cls
    for cls in (
        InvalidArgumentError,
        InvalidHandleError,
        NoMemoryError,
        FerryIOError,
        ClosedError,
        NotInTransactionError,
        AlreadyInTransactionError,
        NoSuchClassError,
        NoSuchPropertyError,
        WrongTypeError,
        NotFoundError,
        DuplicatePrimaryKeyError,
        QueryError,
        InvalidSchemaError,
        SchemaMismatchError,
        MultipleSyncAgentsError,
        OutOfRangeError,
        CorruptError,
        DecryptError,
        BusyError,
        NetworkError,
        AuthError,
        SyncServerError,
        FerryTimeoutError,
        WriteRejectedError,
        InternalError,
    )
    if cls.CODE is not None
}


def error_for_code(code: int, message: str) -> FerryError:
    """The exception for a ``FERRY_ERR_*`` code (a plain :class:`FerryError` for unknown ones)."""
    cls = _BY_CODE.get(code, FerryError)
    return cls(message, code)


def strerror(code: int) -> str:
    """The library's short static description of an error code (``ferry_strerror``)."""
    raw = _native.lib().ferry_strerror(code)
    return raw.decode("utf-8", "replace") if raw else ""


def check(rc: int) -> None:
    """Raises the exception for a failing return code, with the thread's last error message.

    Must run on the thread that made the failing call (the last error is per thread).
    """
    if rc == _native.FERRY_OK:
        return
    raise _last_error(rc)


def _last_error(rc: int) -> FerryError:
    last = _native.lib().ferry_error_last()
    message = ""
    if last:
        raw = last.contents.message
        if raw:
            message = raw.decode("utf-8", "replace")
        if last.contents.code != rc:
            # The library broke its contract: the last error is not the one just returned.
            message = (
                f"{strerror(rc)} (ferry_error_last() reports code {last.contents.code}: "
                f"{message!r})"
            )
    if not message:
        message = strerror(rc)
    return error_for_code(rc, message)
