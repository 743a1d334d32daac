"""Schemas: every property type and flag, validation, and reading the schema back."""

from __future__ import annotations

import ctypes

import pytest

import ferry
from ferry import ObjectSchema, Property, Type, _native
from ferry.errors import check

from conftest import ITEM, PERSON, SCHEMA


def pk(t: Type = Type.OBJECT_ID) -> Property:
    return Property(t, primary_key=True)


def test_every_property_type_and_flag(tmp_path):
    props = {"_id": pk(Type.UUID)}
    for t in (Type.BOOL, Type.INT, Type.DOUBLE, Type.STRING, Type.BINARY, Type.TIMESTAMP,
              Type.OBJECT_ID, Type.UUID):
        n = t.name.lower()
        props[n] = Property(t)
        props["opt_" + n] = Property(t, optional=True)
        props["list_" + n] = Property(t, list=True)
        props["idx_" + n] = Property(t, indexed=True)
    props["link"] = Property(Type.LINK, link_target="Target", optional=True)
    props["links"] = Property(Type.LINK, link_target="Target", list=True)
    classes = [
        ObjectSchema("Everything", props),
        ObjectSchema("Target", {"_id": pk(Type.INT)}),
        ObjectSchema("Log", {"_id": pk(Type.STRING), "line": Property(Type.STRING)}, asymmetric=True),
    ]
    with ferry.Database.open(tmp_path / "s.ferry", schema=classes) as db:
        assert db.class_names == ["Everything", "Target", "Log"]
        assert db.schema == classes


@pytest.mark.parametrize("pk_type", [Type.OBJECT_ID, Type.STRING, Type.INT, Type.UUID])
def test_primary_key_types(pk_type):
    with ferry.Schema([ObjectSchema("C", {"_id": pk(pk_type)})]) as s:
        assert s.handle


def test_schema_object():
    s = ferry.Schema(SCHEMA)
    assert s.classes == tuple(SCHEMA)
    assert "Item" in repr(s)
    s.close()
    s.close()  # idempotent
    with pytest.raises(ValueError):
        s.handle


def test_a_schema_can_be_reused_and_freed_while_databases_are_open(tmp_path):
    s = ferry.Schema(SCHEMA)
    a = ferry.Database.open(tmp_path / "a.ferry", schema=s)
    b = ferry.Database.open(in_memory=str(tmp_path), schema=s)
    s.close()
    for db in (a, b):
        with db.write():
            db.create("Person", {"_id": "p", "name": "P"})
        assert db.get("Person", "p")["name"] == "P"
        db.close()


INVALID = {
    "no primary key": [ObjectSchema("C", {"x": Property(Type.INT)})],
    "no properties": [ObjectSchema("C", {})],
    "two primary keys": [
        ObjectSchema("C", {"_id": pk(), "other": Property(Type.INT, primary_key=True)})
    ],
    "primary key not named _id": [ObjectSchema("C", {"id": pk()})],
    "double primary key": [ObjectSchema("C", {"_id": pk(Type.DOUBLE)})],
    "bool primary key": [ObjectSchema("C", {"_id": pk(Type.BOOL)})],
    "timestamp primary key": [ObjectSchema("C", {"_id": pk(Type.TIMESTAMP)})],
    "optional primary key": [
        ObjectSchema("C", {"_id": Property(Type.INT, primary_key=True, optional=True)})
    ],
    "list primary key": [ObjectSchema("C", {"_id": Property(Type.INT, primary_key=True, list=True)})],
    "link to a missing class": [
        ObjectSchema("C", {"_id": pk(), "l": Property(Type.LINK, link_target="Nope", optional=True)})
    ],
    "link without a target": [
        ObjectSchema("C", {"_id": pk(), "l": Property(Type.LINK, optional=True)})
    ],
    "optional list": [
        ObjectSchema("C", {"_id": pk(), "l": Property(Type.INT, list=True, optional=True)})
    ],
    "null property type": [ObjectSchema("C", {"_id": pk(), "n": Property(Type.NULL)})],
    "duplicate class": [ObjectSchema("C", {"_id": pk()}), ObjectSchema("C", {"_id": pk()})],
    "empty class name": [ObjectSchema("", {"_id": pk()})],
    "empty property name": [ObjectSchema("C", {"_id": pk(), "": Property(Type.INT)})],
    "class name starting with __": [ObjectSchema("__C", {"_id": pk()})],
    "property name starting with __": [ObjectSchema("C", {"_id": pk(), "__x": Property(Type.INT)})],
    "class name of 64 bytes": [ObjectSchema("C" * 64, {"_id": pk()})],
    "property name of 64 bytes": [ObjectSchema("C", {"_id": pk(), "p" * 64: Property(Type.INT)})],
    "property name of 64 UTF-8 bytes": [
        ObjectSchema("C", {"_id": pk(), "é" * 32: Property(Type.INT)})
    ],
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_schema(case):
    with pytest.raises(ferry.InvalidSchemaError) as info:
        ferry.Schema(INVALID[case])
    assert info.value.code == -14
    assert info.value.message


def test_invalid_schema_message_names_class_and_property():
    bad = [
        PERSON,
        ObjectSchema("Order", {"_id": pk(), "buyer": Property(Type.LINK, link_target="Nobody", optional=True)}),
    ]
    with pytest.raises(ferry.InvalidSchemaError, match="Order") as info:
        ferry.Schema(bad)
    assert "buyer" in str(info.value)


def test_names_of_63_bytes_are_allowed():
    ferry.Schema([ObjectSchema("C" * 63, {"_id": pk(), "p" * 63: Property(Type.INT)})]).close()


def test_empty_schema_is_rejected_or_accepted_consistently(tmp_path):
    # A schema with no classes: the header does not forbid it. If accepted, a database opened
    # with it has no classes.
    try:
        s = ferry.Schema([])
    except ferry.InvalidSchemaError:
        return
    with ferry.Database.open(tmp_path / "e.ferry", schema=s) as db:
        assert db.class_names == []
        with pytest.raises(ferry.NoSuchClassError):
            db.query("Item")
    s.close()


def _raw_class(name: bytes, props: list[tuple[bytes, int, int, bytes | None]]):
    arr = (_native.PropertyInfo * len(props))()
    for i, (pname, t, flags, target) in enumerate(props):
        arr[i].name, arr[i].type, arr[i].flags, arr[i].link_target = pname, t, flags, target
    info = _native.ClassInfo(name, arr, len(props), 0)
    return info, arr


def test_duplicate_property_names_through_the_c_api():
    lib = _native.lib()
    info, keep = _raw_class(b"C", [(b"_id", 2, 2, None), (b"x", 2, 0, None), (b"x", 4, 0, None)])
    out = ctypes.c_void_p()
    rc = lib.ferry_schema_new(ctypes.byref(out), ctypes.byref(info), 1)
    assert rc == ferry.InvalidSchemaError.CODE
    assert out.value is None  # out-parameters are untouched on failure
    with pytest.raises(ferry.InvalidSchemaError, match="x"):
        check(rc)


def test_unknown_type_and_flags_through_the_c_api():
    lib = _native.lib()
    for props in (
        [(b"_id", 2, 2, None), (b"x", 42, 0, None)],
        [(b"_id", 2, 2, None), (b"x", -1, 0, None)],
        [(b"_id", 2, 2, None), (b"x", 2, 0x100, None)],
    ):
        info, keep = _raw_class(b"C", props)
        out = ctypes.c_void_p()
        rc = lib.ferry_schema_new(ctypes.byref(out), ctypes.byref(info), 1)
        assert rc in (ferry.InvalidSchemaError.CODE, ferry.InvalidArgumentError.CODE), props


def test_null_arguments_through_the_c_api():
    lib = _native.lib()
    info, keep = _raw_class(b"C", [(b"_id", 2, 2, None)])
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_schema_new(None, ctypes.byref(info), 1))
    out = ctypes.c_void_p()
    with pytest.raises(ferry.InvalidArgumentError):
        check(lib.ferry_schema_new(ctypes.byref(out), None, 1))
    # A class whose name is NULL, or whose properties are NULL with a count.
    bad = _native.ClassInfo(None, keep, 1, 0)
    with pytest.raises((ferry.InvalidArgumentError, ferry.InvalidSchemaError)):
        check(lib.ferry_schema_new(ctypes.byref(out), ctypes.byref(bad), 1))
    bad = _native.ClassInfo(b"C", None, 1, 0)
    with pytest.raises((ferry.InvalidArgumentError, ferry.InvalidSchemaError)):
        check(lib.ferry_schema_new(ctypes.byref(out), ctypes.byref(bad), 1))
    lib.ferry_schema_free(None)  # a no-op


def test_new_database_needs_a_schema(tmp_path):
    with pytest.raises(ferry.InvalidSchemaError):
        ferry.Database.open(tmp_path / "new.ferry")
    with pytest.raises(ferry.InvalidSchemaError):
        ferry.Database.open(in_memory=str(tmp_path))


def test_open_with_the_stored_schema(tmp_path):
    path = tmp_path / "stored.ferry"
    with ferry.Database.open(path, schema=SCHEMA) as db:
        with db.write():
            db.create("Person", {"_id": "a", "name": "Ann"})
    with ferry.Database.open(path) as db:
        assert db.schema == SCHEMA
        assert db.get("Person", "a")["name"] == "Ann"


def test_property_flags():
    p = Property(Type.INT, optional=True, indexed=True)
    assert p.flags == 1 | 4
    assert Property(Type.STRING, list=True).flags == 8
    assert pk().flags == 2
    assert Property.from_flags(2, 1 | 4) == p
    assert Property(2).type is Type.INT
    assert ITEM.primary_key == "_id"
    with pytest.raises(TypeError):
        ObjectSchema("C", {"_id": "int"})  # type: ignore[dict-item]
