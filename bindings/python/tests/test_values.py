"""Every value type round-trips between Python and Ferry."""

from __future__ import annotations

import datetime as dt
import math
import pickle
import uuid

import pytest

import ferry
from ferry import ObjectSchema, Property, Timestamp, Type

SCALARS = {
    "b": Type.BOOL,
    "i": Type.INT,
    "d": Type.DOUBLE,
    "s": Type.STRING,
    "bin": Type.BINARY,
    "ts": Type.TIMESTAMP,
    "oid": Type.OBJECT_ID,
    "u": Type.UUID,
}

ALL = ObjectSchema(
    "All",
    {
        "_id": Property(Type.INT, primary_key=True),
        **{name: Property(t) for name, t in SCALARS.items()},
        **{"o" + name: Property(t, optional=True) for name, t in SCALARS.items()},
        **{"l" + name: Property(t, list=True) for name, t in SCALARS.items()},
    },
)

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def vdb(tmp_path):
    with ferry.Database.open(tmp_path / "values.ferry", schema=[ALL]) as db:
        yield db


def roundtrip(db, prop, value):
    with db.write():
        db.upsert("All", {"_id": 1, prop: value})
    return db.get("All", 1)[prop]


def test_defaults_for_omitted_properties(vdb):
    with vdb.write():
        vdb.create("All", {"_id": 1})
    obj = vdb.get("All", 1)
    assert obj["b"] is False
    assert obj["i"] == 0 and type(obj["i"]) is int
    assert obj["d"] == 0.0 and type(obj["d"]) is float
    assert obj["s"] == ""
    assert obj["bin"] == b""
    assert obj["ts"] == EPOCH
    assert obj["oid"] == ferry.ObjectId(b"\0" * 12)
    assert obj["u"] == uuid.UUID(int=0)
    for name in SCALARS:
        assert obj["o" + name] is None
        assert obj["l" + name] == []
    assert obj.primary_key == 1
    assert obj.class_name == "All"
    assert set(obj) == set(ALL.properties)


@pytest.mark.parametrize(
    "prop,value",
    [
        ("b", True),
        ("b", False),
        ("i", 42),
        ("i", -(2**63)),
        ("i", 2**63 - 1),
        ("d", 3.25),
        ("d", -0.5),
        ("d", float("inf")),
        ("d", float("-inf")),
        ("d", 1e308),
        ("s", "hello"),
        ("s", "héllo wörld ✓ 日本語 🚢"),
        ("s", "x" * 100_000),
        ("bin", b"\x00\x01\x02\xff\x00"),
        ("bin", bytes(range(256)) * 4096),
        ("ts", dt.datetime(2024, 5, 17, 12, 30, 45, 123456, tzinfo=UTC)),
        ("ts", dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)),
        ("ts", dt.datetime(1, 1, 1, tzinfo=UTC)),
        ("ts", dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
        ("oid", ferry.ObjectId("65f1a2b3c4d5e6f708192a3b")),
        ("u", uuid.UUID("12345678-1234-5678-1234-567812345678")),
        ("ob", True),
        ("oi", 7),
        ("os", ""),
        ("obin", b""),
        ("ots", EPOCH),
        ("ou", uuid.uuid4()),
    ],
)
def test_scalar_roundtrip(vdb, prop, value):
    got = roundtrip(vdb, prop, value)
    assert got == value
    assert type(got) is type(value)


def test_nan_roundtrip(vdb):
    assert math.isnan(roundtrip(vdb, "d", float("nan")))


def test_string_with_embedded_nul(vdb):
    # Strings carry their size: a NUL inside is data, not the end.
    assert roundtrip(vdb, "s", "a\x00b") == "a\x00b"


def test_optional_back_to_null(vdb):
    for name in SCALARS:
        with vdb.write():
            vdb.upsert("All", {"_id": 1})
        assert roundtrip(vdb, "o" + name, None) is None


def test_int_for_double_property_is_widened(vdb):
    got = roundtrip(vdb, "d", 3)
    assert got == 3.0 and type(got) is float


def test_int_out_of_range_is_overflow_error(vdb):
    with vdb.write():
        with pytest.raises(OverflowError):
            vdb.create("All", {"_id": 1, "i": 2**63})
        with pytest.raises(OverflowError):
            vdb.create("All", {"_id": 1, "i": -(2**63) - 1})


def test_unsupported_python_type_is_type_error(vdb):
    with vdb.write():
        with pytest.raises(TypeError):
            vdb.create("All", {"_id": 1, "s": object()})
        with pytest.raises(TypeError):
            vdb.create("All", {"_id": 1, "d": 1 + 2j})


def test_naive_datetime_is_utc(vdb):
    naive = dt.datetime(2020, 2, 29, 10, 0, 0)
    assert roundtrip(vdb, "ts", naive) == naive.replace(tzinfo=UTC)


def test_aware_datetime_is_converted_to_utc(vdb):
    paris = dt.timezone(dt.timedelta(hours=2))
    value = dt.datetime(2021, 6, 1, 14, 0, tzinfo=paris)
    got = roundtrip(vdb, "ts", value)
    assert got == value
    assert got.tzinfo == UTC
    assert got.hour == 12


def test_timestamp_nanoseconds_and_out_of_datetime_range(vdb):
    # Python's datetime stops at microseconds: reading truncates.
    got = roundtrip(vdb, "ts", Timestamp(1_700_000_000, 123_456_789))
    assert got == dt.datetime.fromtimestamp(1_700_000_000, UTC) + dt.timedelta(microseconds=123456)
    # Far outside datetime's range: read back as a Timestamp with full precision.
    far = Timestamp(10**15, 999_999_999)
    assert roundtrip(vdb, "ts", far) == far
    early = Timestamp(-(10**15), 1)
    assert roundtrip(vdb, "ts", early) == early


def test_timestamp_conversions():
    assert Timestamp.from_datetime(dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)) == (
        -1,
        500_000_000,
    )
    assert Timestamp(-1, 500_000_000).to_datetime() == dt.datetime(
        1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC
    )
    with pytest.raises(ValueError):
        ferry.values.make_native(Timestamp(0, 1_000_000_000), ferry.values.KeepAlive())


@pytest.mark.parametrize(
    "prop,items",
    [
        ("lb", [True, False, True]),
        ("li", [3, -1, 2**40]),
        ("ld", [0.5, -2.0]),
        ("ls", ["a", "", "ünï"]),
        ("lbin", [b"\x00", b"", b"xyz"]),
        ("lts", [EPOCH, dt.datetime(2030, 1, 1, tzinfo=UTC)]),
        ("loid", [ferry.ObjectId("65f1a2b3c4d5e6f708192a3b"), ferry.ObjectId("00" * 12)]),
        ("lu", [uuid.uuid4(), uuid.uuid4()]),
    ],
)
def test_list_roundtrip(vdb, prop, items):
    with vdb.write():
        vdb.create("All", {"_id": 1, prop: items})
    assert vdb.get("All", 1)[prop] == items


def test_object_id_generate():
    a = ferry.ObjectId.generate()
    b = ferry.ObjectId.generate()
    assert a != b
    assert len(a.binary) == 12
    # 8 bytes from a CSPRNG per id: nothing fixed per process, no counter.
    assert a.binary[4:] != b.binary[4:]
    now = dt.datetime.now(UTC)
    assert abs((a.generation_time - now).total_seconds()) < 120
    ids = {ferry.ObjectId.generate() for _ in range(10_000)}
    assert len(ids) == 10_000


def test_object_id_python_api():
    hexa = "65f1a2b3c4d5e6f708192a3b"
    oid = ferry.ObjectId(hexa)
    assert str(oid) == hexa
    assert repr(oid) == f"ObjectId('{hexa}')"
    assert ferry.ObjectId(oid.binary) == oid
    assert ferry.ObjectId(oid) == oid
    assert bytes(oid) == bytes.fromhex(hexa)
    assert hash(ferry.ObjectId(hexa)) == hash(oid)
    assert ferry.ObjectId("00" * 12) < oid
    assert pickle.loads(pickle.dumps(oid)) == oid
    assert oid != hexa
    with pytest.raises(ValueError):
        ferry.ObjectId("xyz")
    with pytest.raises(ValueError):
        ferry.ObjectId("00" * 11)
    with pytest.raises(ValueError):
        ferry.ObjectId(b"short")
    with pytest.raises(TypeError):
        ferry.ObjectId(12)  # type: ignore[arg-type]


def test_type_enum_matches_header():
    assert [t.name for t in Type] == [
        "NULL", "BOOL", "INT", "DOUBLE", "STRING", "BINARY", "TIMESTAMP", "OBJECT_ID", "UUID",
        "LINK",
    ]
    assert [int(t) for t in Type] == list(range(10))


def test_object_id_has_no_counter_and_no_per_process_bytes():
    import subprocess

    from conftest import PYTHON, child_env

    # One id must not predict the next (issue 11): MongoDB's layout would repeat bytes 4..9
    # within a process and step a counter in bytes 9..12.
    ids = [ferry.ObjectId.generate() for _ in range(1000)]
    counter = lambda o: int.from_bytes(o.binary[9:], "big")  # noqa: E731
    steps = sum(counter(b) == (counter(a) + 1) % 2**24 for a, b in zip(ids, ids[1:]))
    assert steps <= 1  # by chance: 2**-24 per pair
    assert all(a.binary[4:9] != b.binary[4:9] for a, b in zip(ids, ids[1:]))
    a = ids[0]
    other = subprocess.run(
        [PYTHON, "-c", "import ferry; print(ferry.ObjectId.generate())"],
        env=child_env(), capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert ferry.ObjectId(other).binary[4:9] != a.binary[4:9]  # nor across processes


def test_strings_need_not_be_nul_terminated(vdb):
    import ctypes

    from ferry import _native
    from ferry.errors import check

    lib = _native.lib()
    buffer = ctypes.create_string_buffer(b"abcXYZ", 6)  # no NUL after "abc"
    meta = vdb._class("All")
    values = (_native.PropertyValue * 2)()
    values[0].property = meta.by_name["_id"].key
    values[0].value.type = Type.INT
    values[0].value.u.i = 1
    values[1].property = meta.by_name["s"].key
    values[1].value.type = Type.STRING
    values[1].value.u.string.data = ctypes.addressof(buffer)
    values[1].value.u.string.size = 3
    with vdb.write():
        check(lib.ferry_object_create(vdb._handle, meta.key, values, 2))
        buffer[0] = b"z"  # copied before the call returned
    assert vdb.get("All", 1)["s"] == "abc"
