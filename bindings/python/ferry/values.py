"""Conversions between Python values and ``ferry_value_t``.

==================  ============================================================
Ferry type          Python type
==================  ============================================================
null                ``None``
bool                ``bool``
int                 ``int`` (64-bit signed)
double              ``float`` (an ``int`` is accepted for a double property)
string              ``str``
binary              ``bytes`` (``bytearray`` and ``memoryview`` accepted)
timestamp           ``datetime.datetime`` aware, in UTC (a naive one is taken as UTC);
                    :class:`Timestamp` for nanosecond precision or dates outside
                    years 1-9999
ObjectId            :class:`ObjectId`
UUID                ``uuid.UUID``
link                the target object's primary key
==================  ============================================================

Timestamps read back are ``datetime`` objects (microsecond precision: Python's limit) unless
they fall outside ``datetime``'s range, in which case a :class:`Timestamp` is returned.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import enum
import functools
import uuid
from typing import Any, NamedTuple, Optional, Union

from . import _native
from .errors import check

__all__ = ["Type", "ObjectId", "Timestamp", "Value"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


class Type(enum.IntEnum):
    """``ferry_type_t``: the type of a value or a property."""

    NULL = _native.FERRY_TYPE_NULL
    BOOL = _native.FERRY_TYPE_BOOL
    INT = _native.FERRY_TYPE_INT
    DOUBLE = _native.FERRY_TYPE_DOUBLE
    STRING = _native.FERRY_TYPE_STRING
    BINARY = _native.FERRY_TYPE_BINARY
    TIMESTAMP = _native.FERRY_TYPE_TIMESTAMP
    OBJECT_ID = _native.FERRY_TYPE_OBJECT_ID
    UUID = _native.FERRY_TYPE_UUID
    #: Only as a property type: a link holds the primary key of an object of its target class.
    LINK = _native.FERRY_TYPE_LINK


@functools.total_ordering
class ObjectId:
    """A 12-byte ObjectId (4 bytes of seconds since the epoch, then 8 bytes from the system's
    CSPRNG, fresh for each id), compared and ordered by its bytes.

    ``ObjectId("65f1...")`` parses 24 hex digits; ``ObjectId(b"...12 bytes...")`` takes raw
    bytes; :meth:`generate` makes a new one through the library.
    """

    __slots__ = ("_bytes",)

    def __init__(self, value: Union[str, bytes, bytearray, "ObjectId"]) -> None:
        if isinstance(value, ObjectId):
            raw = value._bytes
        elif isinstance(value, str):
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raise ValueError(f"not an ObjectId: {value!r} (24 hex digits expected)") from None
            if len(raw) != 12:
                raise ValueError(f"not an ObjectId: {value!r} (24 hex digits expected)")
        elif isinstance(value, (bytes, bytearray)):
            raw = bytes(value)
            if len(raw) != 12:
                raise ValueError(f"an ObjectId is 12 bytes, not {len(raw)}")
        else:
            raise TypeError(f"cannot make an ObjectId from {type(value).__name__}")
        self._bytes: bytes = raw

    @classmethod
    def generate(cls) -> "ObjectId":
        """A new ObjectId from ``ferry_object_id_generate``."""
        value = _native.Value()
        check(_native.lib().ferry_object_id_generate(ctypes.byref(value)))
        if value.type != Type.OBJECT_ID:
            raise TypeError(f"ferry_object_id_generate gave a value of type {value.type}")
        return cls(bytes(value.u.object_id))

    @property
    def binary(self) -> bytes:
        """The 12 raw bytes."""
        return self._bytes

    @property
    def generation_time(self) -> _dt.datetime:
        """The creation time stored in the first 4 bytes (whole seconds, UTC)."""
        return _EPOCH + _dt.timedelta(seconds=int.from_bytes(self._bytes[:4], "big"))

    def __str__(self) -> str:
        return self._bytes.hex()

    def __repr__(self) -> str:
        return f"ObjectId('{self._bytes.hex()}')"

    def __bytes__(self) -> bytes:
        return self._bytes

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectId):
            return self._bytes == other._bytes
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, ObjectId):
            return self._bytes < other._bytes
        return NotImplemented

    def __hash__(self) -> int:
        return hash((ObjectId, self._bytes))

    def __reduce__(self):
        return (ObjectId, (self._bytes,))


class Timestamp(NamedTuple):
    """An instant with Ferry's full precision: seconds since the Unix epoch plus nanoseconds
    in [0, 999999999] (before the epoch, seconds is negative and nanoseconds counts forward)."""

    seconds: int
    nanoseconds: int = 0

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> "Timestamp":
        """The instant of a datetime (a naive one is taken as UTC)."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _EPOCH  # timedelta normalises: days may be negative, the rest is not
        return cls(delta.days * 86400 + delta.seconds, delta.microseconds * 1000)

    def to_datetime(self) -> _dt.datetime:
        """An aware UTC datetime (truncated to microseconds).

        Raises:
            OverflowError: the instant is outside ``datetime``'s range.
        """
        return _EPOCH + _dt.timedelta(seconds=self.seconds, microseconds=self.nanoseconds // 1000)


#: What a Ferry value can be in Python.
Value = Union[None, bool, int, float, str, bytes, _dt.datetime, Timestamp, ObjectId, uuid.UUID]


class KeepAlive(list):
    """Python objects whose memory a ``ferry_value_t`` points into; keep it until the call returns."""


def to_native(
    value: Any,
    out: _native.Value,
    keep: KeepAlive,
    hint: Optional[int] = None,
) -> None:
    """Fills ``out`` with ``value``.

    ``hint`` is the Ferry type expected (the property's type, or for a link the target's
    primary-key type); it only enables lossless widening (an ``int`` for a double). A value of
    the wrong type is passed as its natural Ferry type so that the library reports
    :class:`~ferry.WrongTypeError`.

    Raises:
        TypeError: a Python type with no Ferry equivalent.
        OverflowError: an int outside the 64-bit range.
    """
    if value is None:
        out.type = Type.NULL
    elif isinstance(value, bool):
        out.type = Type.BOOL
        out.u.b = value
    elif isinstance(value, int):
        if hint == Type.DOUBLE:
            out.type = Type.DOUBLE
            out.u.d = float(value)
        else:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise OverflowError(f"{value} does not fit in a 64-bit Ferry int")
            out.type = Type.INT
            out.u.i = value
    elif isinstance(value, float):
        out.type = Type.DOUBLE
        out.u.d = value
    elif isinstance(value, str):
        _set_bytes(out, Type.STRING, value.encode("utf-8"), keep)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _set_bytes(out, Type.BINARY, bytes(value), keep)
    elif isinstance(value, ObjectId):
        out.type = Type.OBJECT_ID
        ctypes.memmove(out.u.object_id, value.binary, 12)
    elif isinstance(value, uuid.UUID):
        out.type = Type.UUID
        ctypes.memmove(out.u.uuid, value.bytes, 16)
    elif isinstance(value, _dt.datetime):
        _set_timestamp(out, Timestamp.from_datetime(value))
    elif isinstance(value, Timestamp):
        _set_timestamp(out, value)
    else:
        raise TypeError(f"a {type(value).__name__} cannot be stored in Ferry")


def _set_bytes(out: _native.Value, type_: int, data: bytes, keep: KeepAlive) -> None:
    pointer = ctypes.c_char_p(data)  # points into `data`'s own buffer: no copy
    keep.append(data)
    keep.append(pointer)
    out.type = type_
    out.u.string.data = ctypes.cast(pointer, ctypes.c_void_p).value
    out.u.string.size = len(data)


def _set_timestamp(out: _native.Value, ts: Timestamp) -> None:
    if not 0 <= ts.nanoseconds <= 999_999_999:
        raise ValueError(f"nanoseconds must be in [0, 999999999], not {ts.nanoseconds}")
    if not _INT64_MIN <= ts.seconds <= _INT64_MAX:
        raise OverflowError(f"{ts.seconds} seconds does not fit in a Ferry timestamp")
    out.type = Type.TIMESTAMP
    out.u.timestamp.seconds = ts.seconds
    out.u.timestamp.nanoseconds = ts.nanoseconds


def make_native(value: Any, keep: KeepAlive, hint: Optional[int] = None) -> _native.Value:
    """A new ``ferry_value_t`` holding ``value`` (see :func:`to_native`)."""
    out = _native.Value()
    to_native(value, out, keep, hint)
    return out


def make_native_array(values: Any, keep: KeepAlive) -> tuple[Any, int]:
    """A ``ferry_value_t[]`` for query arguments, and its length (``(None, 0)`` when empty)."""
    values = list(values)
    if not values:
        return None, 0
    array = (_native.Value * len(values))()
    for i, value in enumerate(values):
        to_native(value, array[i], keep)
    keep.append(array)
    return array, len(values)


def from_native(value: _native.Value) -> Any:
    """The Python value of a ``ferry_value_t``; lent strings and binaries are copied out."""
    t = value.type
    if t == Type.NULL:
        return None
    if t == Type.BOOL:
        return bool(value.u.b)
    if t == Type.INT:
        return int(value.u.i)
    if t == Type.DOUBLE:
        return float(value.u.d)
    if t == Type.STRING:
        s = value.u.string
        return ctypes.string_at(s.data, s.size).decode("utf-8") if s.size else ""
    if t == Type.BINARY:
        b = value.u.binary
        return ctypes.string_at(b.data, b.size) if b.size else b""
    if t == Type.TIMESTAMP:
        ts = Timestamp(int(value.u.timestamp.seconds), int(value.u.timestamp.nanoseconds))
        try:
            return ts.to_datetime()
        except OverflowError:
            return ts
    if t == Type.OBJECT_ID:
        return ObjectId(bytes(value.u.object_id))
    if t == Type.UUID:
        return uuid.UUID(bytes=bytes(value.u.uuid))
    raise TypeError(f"the library handed out a value of unknown type {t}")
