"""Schemas: the classes of a database and their properties.

Example::

    item = ferry.ObjectSchema("Item", {
        "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
        "ownerId": ferry.Property(ferry.Type.STRING, indexed=True),
        "tags": ferry.Property(ferry.Type.STRING, list=True),
        "owner": ferry.Property(ferry.Type.LINK, link_target="Person", optional=True),
    })

The library validates schemas (:class:`Schema` or :meth:`ferry.Database.open` raise
:class:`~ferry.InvalidSchemaError` naming the class and property): one primary key per class,
named ``_id``, of type ObjectId, string, int or UUID; unique names of 1 to 63 bytes not
starting with ``__``; link targets that exist; no optional lists.
"""

from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence, Union

from . import _native
from .errors import check
from .values import Type

__all__ = ["Property", "ObjectSchema", "Schema"]


@dataclass(frozen=True)
class Property:
    """One property of a class.

    Args:
        type: the property's :class:`~ferry.Type` (not ``NULL``); ``LINK`` needs ``link_target``.
        optional: may hold ``None``.
        primary_key: the class's primary key (must be named ``_id``).
        indexed: equality and range queries use an index.
        list: a list of values of ``type``.
        link_target: the name of the linked class, for ``Type.LINK``.
    """

    type: Type
    optional: bool = False
    primary_key: bool = False
    indexed: bool = False
    list: bool = False
    link_target: Optional[str] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", Type(self.type))

    @property
    def flags(self) -> int:
        """The or-ed ``ferry_property_flags_t``."""
        flags = _native.FERRY_PROPERTY_NORMAL
        if self.optional:
            flags |= _native.FERRY_PROPERTY_OPTIONAL
        if self.primary_key:
            flags |= _native.FERRY_PROPERTY_PRIMARY_KEY
        if self.indexed:
            flags |= _native.FERRY_PROPERTY_INDEXED
        if self.list:
            flags |= _native.FERRY_PROPERTY_LIST
        return flags

    @classmethod
    def from_flags(cls, type_: int, flags: int, link_target: Optional[str] = None) -> "Property":
        """The property described by a type, ``ferry_property_flags_t`` and link target."""
        return cls(
            Type(type_),
            optional=bool(flags & _native.FERRY_PROPERTY_OPTIONAL),
            primary_key=bool(flags & _native.FERRY_PROPERTY_PRIMARY_KEY),
            indexed=bool(flags & _native.FERRY_PROPERTY_INDEXED),
            list=bool(flags & _native.FERRY_PROPERTY_LIST),
            link_target=link_target,
        )


@dataclass(frozen=True)
class ObjectSchema:
    """One class: a name, its properties in order, and whether it is asymmetric
    (ingest-only under sync: uploaded, never downloaded)."""

    name: str
    properties: Mapping[str, Property] = field(default_factory=dict)
    asymmetric: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))
        for name, prop in self.properties.items():
            if not isinstance(prop, Property):
                raise TypeError(f"{self.name}.{name}: expected a ferry.Property, got {prop!r}")

    @property
    def primary_key(self) -> Optional[str]:
        """The name of the primary-key property, if one is marked."""
        for name, prop in self.properties.items():
            if prop.primary_key:
                return name
        return None


def _encode(name: str, what: str) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    return name.encode("utf-8")


class Schema:
    """A schema validated by the library (a ``ferry_schema_t``).

    :meth:`ferry.Database.open` accepts either a :class:`Schema` or a sequence of
    :class:`ObjectSchema`; build a :class:`Schema` to validate early or to reuse it. Databases
    keep their own copy, so it may be closed once they are open.

    Raises:
        InvalidSchemaError: the library rejected the schema.
    """

    def __init__(self, classes: Iterable[ObjectSchema]) -> None:
        self.classes: tuple[ObjectSchema, ...] = tuple(classes)
        for cls in self.classes:
            if not isinstance(cls, ObjectSchema):
                raise TypeError(f"expected ferry.ObjectSchema, got {cls!r}")
        keep: list[object] = []
        infos = (_native.ClassInfo * max(len(self.classes), 1))()
        for i, cls in enumerate(self.classes):
            props = (_native.PropertyInfo * max(len(cls.properties), 1))()
            keep.append(props)
            for j, (pname, prop) in enumerate(cls.properties.items()):
                props[j].name = _encode(pname, "a property name")
                props[j].type = int(prop.type)
                props[j].flags = prop.flags
                props[j].link_target = (
                    _encode(prop.link_target, "a link target")
                    if prop.link_target is not None
                    else None
                )
            infos[i].name = _encode(cls.name, "a class name")
            infos[i].properties = props  # never NULL, even for a class without properties
            infos[i].property_count = len(cls.properties)
            infos[i].flags = (
                _native.FERRY_CLASS_ASYMMETRIC if cls.asymmetric else _native.FERRY_CLASS_NORMAL
            )
        handle = ctypes.c_void_p()
        check(
            _native.lib().ferry_schema_new(
                ctypes.byref(handle), infos, len(self.classes)
            )
        )
        self._handle: Optional[int] = handle.value
        self._finalizer = weakref.finalize(self, _native.lib().ferry_schema_free, handle.value)

    @property
    def handle(self) -> int:
        """The ``ferry_schema_t *`` (for the binding's own use)."""
        if self._handle is None:
            raise ValueError("the schema was closed")
        return self._handle

    def close(self) -> None:
        """Frees the library's schema (databases opened with it keep their copy)."""
        self._handle = None
        self._finalizer()

    def __enter__(self) -> "Schema":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Schema({[c.name for c in self.classes]!r})"


SchemaLike = Union[Schema, Sequence[ObjectSchema], None]
