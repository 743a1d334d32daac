"""The query language: every operator, [c], IN, nil, arguments, SORT/LIMIT, errors."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

UTC = dt.timezone.utc


def oid(i: int) -> ferry.ObjectId:
    return ferry.ObjectId(bytes(11) + bytes([i]))


def uid(i: int) -> uuid.UUID:
    return uuid.UUID(int=i)


def day(y: int, m: int = 1, d: int = 1) -> dt.datetime:
    return dt.datetime(y, m, d, tzinfo=UTC)


Q = ObjectSchema(
    "Q",
    {
        "_id": Property(Type.INT, primary_key=True),
        "name": Property(Type.STRING),
        "n": Property(Type.INT, indexed=True),
        "n2": Property(Type.INT),  # same values as n, without an index
        "x": Property(Type.DOUBLE),
        "flag": Property(Type.BOOL),
        "when": Property(Type.TIMESTAMP),
        "oid": Property(Type.OBJECT_ID),
        "u": Property(Type.UUID),
        "blob": Property(Type.BINARY),
        "opt": Property(Type.STRING, optional=True),
        "optn": Property(Type.INT, optional=True),
        "status": Property(Type.STRING, indexed=True),
        "tags": Property(Type.STRING, list=True),
        "nums": Property(Type.INT, list=True),
    },
)

ROWS = [
    dict(_id=1, name="Apple", n=1, x=1.5, flag=True, when=day(2020), blob=b"\x01\x02",
         opt="x", optn=10, status="open", tags=["red", "fruit"], nums=[1, 2, 3]),
    dict(_id=2, name="banana", n=2, x=2.5, flag=False, when=day(2021), blob=b"\x02",
         opt=None, optn=None, status="done", tags=["yellow", "fruit"], nums=[]),
    dict(_id=3, name="Cherry pie", n=3, x=-1.0, flag=True, when=day(2019, 6), blob=b"",
         opt="y", optn=0, status="open", tags=[], nums=[5]),
    dict(_id=4, name="date", n=4, x=100.0, flag=False, when=day(1960), blob=b"\x01",
         opt=None, optn=5, status="blocked", tags=["brown", "Fruit", "sweet"], nums=[1, 1]),
    dict(_id=5, name="Elderberry", n=5, x=0.0, flag=True, when=day(2030), blob=b"\x01\x02\x03",
         opt="", optn=None, status="done", tags=["X"], nums=[9]),
    dict(_id=6, name="fig", n=6, x=3.0, flag=False, when=day(2020, 6), blob=b"\xff",
         opt="fig", optn=-3, status="open", tags=["fruit"], nums=[2]),
]
for row in ROWS:
    row["n2"] = row["n"]
    row["oid"] = oid(row["_id"])
    row["u"] = uid(row["_id"])


@pytest.fixture(scope="module")
def qdb(tmp_path_factory):
    path = tmp_path_factory.mktemp("q") / "q.ferry"
    with ferry.Database.open(path, schema=[Q]) as db:
        with db.write():
            for row in ROWS:
                db.create("Q", row)
        yield db


def pks(db, query, *args):
    return sorted(o["_id"] for o in db.query("Q", query, *args))


def ordered(db, query, *args):
    return [o["_id"] for o in db.query("Q", query, *args)]


CASES = [
    # == != < <= > >= on ints (indexed and not)
    ("n == 3", (), [3]),
    ("n != 3", (), [1, 2, 4, 5, 6]),
    ("n < 3", (), [1, 2]),
    ("n <= 3", (), [1, 2, 3]),
    ("n > 4", (), [5, 6]),
    ("n >= 4", (), [4, 5, 6]),
    ("n2 <= 3", (), [1, 2, 3]),
    ("n2 > 4", (), [5, 6]),
    ("3 >= n", (), [1, 2, 3]),  # the property may be on the right
    ("n = 3", (), [3]),
    ("n <> 3", (), [1, 2, 4, 5, 6]),
    ("n == -1", (), []),
    # doubles, mixed with ints
    ("x == 2.5", (), [2]),
    ("x < 0", (), [3]),
    ("x >= 3", (), [4, 6]),
    ("x > 1.5e1", (), [4]),
    ("x != 0.0", (), [1, 2, 3, 4, 6]),
    ("n < 2.5", (), [1, 2]),
    # strings
    ('name == "fig"', (), [6]),
    ("name == 'fig'", (), [6]),
    ('name != "fig"', (), [1, 2, 3, 4, 5]),
    ('name < "b"', (), [1, 3, 5]),  # byte order: upper case first
    ('name >= "c"', (), [4, 6]),
    ('name ==[c] "APPLE"', (), [1]),
    ('name !=[c] "APPLE"', (), [2, 3, 4, 5, 6]),
    ('name BEGINSWITH "Ch"', (), [3]),
    ('name BEGINSWITH "ch"', (), []),
    ('name BEGINSWITH[c] "ch"', (), [3]),
    ('name ENDSWITH "y"', (), [5]),
    ('name ENDSWITH[c] "E"', (), [1, 3, 4]),
    ('name CONTAINS "an"', (), [2]),
    ('name CONTAINS[c] "E"', (), [1, 3, 4, 5]),
    ('name CONTAINS ""', (), [1, 2, 3, 4, 5, 6]),
    ('name LIKE "?ig"', (), [6]),
    ('name LIKE "*an*"', (), [2]),
    ('name LIKE "*e"', (), [1, 3, 4]),
    ('name LIKE[c] "c*PIE"', (), [3]),
    ('name like "fig"', (), [6]),  # keywords are case-insensitive
    # bools
    ("flag == true", (), [1, 3, 5]),
    ("flag == FALSE", (), [2, 4, 6]),
    ("flag != true", (), [2, 4, 6]),
    # timestamps (arguments and literals)
    ("when < $0", (day(2000),), [4]),
    ("when >= $0", (day(2020, 6),), [2, 5, 6]),
    ("when == $0", (day(2019, 6),), [3]),
    ("when > T0:0", (), [1, 2, 3, 5, 6]),
    ("when < T-1:500", (), [4]),
    # ObjectId and UUID
    ("oid == $0", (oid(2),), [2]),
    ("oid > $0", (oid(4),), [5, 6]),
    ("u == $0", (uid(5),), [5]),
    ("u <= $0", (uid(2),), [1, 2]),
    (f"oid == oid({oid(3)})", (), [3]),
    (f"u != uuid({uid(3)})", (), [1, 2, 4, 5, 6]),
    # binary
    ("blob == $0", (b"\x01",), [4]),
    ("blob BEGINSWITH $0", (b"\x01",), [1, 4, 5]),
    ("blob CONTAINS $0", (b"\x02",), [1, 2, 5]),
    ("blob ENDSWITH $0", (b"\x02",), [1, 2]),
    ("blob == $0", (b"",), [3]),
    # nil / null
    ("opt == nil", (), [2, 4]),
    ("opt != nil", (), [1, 3, 5, 6]),
    ("opt == NULL", (), [2, 4]),
    ("optn == null", (), [2, 5]),
    ("optn > 0", (), [1, 4]),  # null is never ordered
    ("optn <= 0", (), [3, 6]),
    ('opt == ""', (), [5]),
    ("opt == $0", (None,), [2, 4]),
    # IN
    ('status IN {"open", "blocked"}', (), [1, 3, 4, 6]),
    ("status IN {}", (), []),
    ("n IN {1, 3, 99}", (), [1, 3]),
    ("n2 IN {$0, $1}", (2, 4), [2, 4]),
    ('name IN[c] {"APPLE", "FIG"}', (), [1, 6]),
    ("opt IN {nil, 'x'}", (), [1, 2, 4]),
    ('"fruit" IN tags', (), [1, 2, 6]),
    # lists: ANY (implicit), ALL, NONE, @count, @size
    ('tags == "fruit"', (), [1, 2, 6]),
    ('ANY tags == "fruit"', (), [1, 2, 6]),
    ('ANY tags ==[c] "fruit"', (), [1, 2, 4, 6]),
    ('SOME tags BEGINSWITH "y"', (), [2]),
    ("ALL nums > 1", (), [2, 3, 5, 6]),  # ALL of an empty list holds
    ("NONE nums == 1", (), [2, 3, 5, 6]),
    ('tags IN {"red", "X"}', (), [1, 5]),
    ("tags.@count > 2", (), [4]),
    ("tags.@count == 0", (), [3]),
    ("nums.@size >= 2", (), [1, 4]),
    ("NOT (tags.@count > 2)", (), [1, 2, 3, 5, 6]),
    # AND OR NOT, parentheses, TRUEPREDICATE FALSEPREDICATE
    ('n <= 4 AND status == "open"', (), [1, 3]),
    ('n <= 4 && status == "open"', (), [1, 3]),
    ('n == 1 OR name == "fig"', (), [1, 6]),
    ('n == 1 || n == 2', (), [1, 2]),
    ("NOT n == 1", (), [2, 3, 4, 5, 6]),
    ("!(n == 1)", (), [2, 3, 4, 5, 6]),
    ('(n == 1 OR n == 2) AND flag == true', (), [1]),
    ('n == 1 OR n == 2 AND flag == true', (), [1]),  # AND binds tighter
    ("NOT NOT n == 1", (), [1]),
    ("TRUEPREDICATE", (), [1, 2, 3, 4, 5, 6]),
    ("FALSEPREDICATE", (), []),
    ("truepredicate AND n < 3", (), [1, 2]),
    ("FALSEPREDICATE OR n == 6", (), [6]),
    # comparing two properties
    ("n == n2", (), [1, 2, 3, 4, 5, 6]),
    ("x > n", (), [1, 2, 4]),
    # arguments
    ("n >= $0 AND n <= $1", (2, 4), [2, 3, 4]),
    ("name == $0", ("date",), [4]),
    ("x < $0", (1,), [3, 5]),
    ("flag == $0 AND n > $1", (True, 1), [3, 5]),
    ("$0 == n", (6,), [6]),
]


@pytest.mark.parametrize("query,args,expected", CASES, ids=[c[0] for c in CASES])
def test_operator(qdb, query, args, expected):
    assert pks(qdb, query, *args) == expected


def test_indexed_and_unindexed_agree(qdb):
    for op in ("==", "!=", "<", "<=", ">", ">="):
        for v in range(0, 8):
            assert pks(qdb, f"n {op} $0", v) == pks(qdb, f"n2 {op} $0", v), (op, v)
    for status in ("open", "done", "blocked", "nope"):
        assert pks(qdb, "status == $0", status) == [
            r["_id"] for r in ROWS if r["status"] == status
        ]


def test_sort_and_limit(qdb):
    assert ordered(qdb, "TRUEPREDICATE SORT(n DESC)") == [6, 5, 4, 3, 2, 1]
    assert ordered(qdb, "TRUEPREDICATE SORT(x ASC)") == [3, 5, 1, 2, 6, 4]
    assert ordered(qdb, "n <= 4 SORT(x DESC) LIMIT(2)") == [4, 2]
    assert ordered(qdb, "TRUEPREDICATE SORT(status ASC, n DESC)") == [4, 5, 2, 6, 3, 1]
    assert ordered(qdb, "TRUEPREDICATE SORT(status, n)") == [4, 2, 5, 1, 3, 6]
    assert ordered(qdb, "TRUEPREDICATE SORT(status DESCENDING, n ASCENDING)") == [1, 3, 6, 2, 5, 4]
    assert ordered(qdb, "TRUEPREDICATE SORT(when ASC)") == [4, 3, 1, 6, 2, 5]
    assert len(qdb.query("Q", "TRUEPREDICATE LIMIT(3)")) == 3
    assert len(qdb.query("Q", "TRUEPREDICATE LIMIT(0)")) == 0
    assert len(qdb.query("Q", "TRUEPREDICATE LIMIT(100)")) == 6


def test_sort_puts_nulls_consistently(qdb):
    asc = ordered(qdb, "TRUEPREDICATE SORT(optn ASC)")
    desc = ordered(qdb, "TRUEPREDICATE SORT(optn DESC)")
    non_null_asc = [pk for pk in asc if pk not in (2, 5)]
    assert non_null_asc == [6, 3, 4, 1]
    assert [pk for pk in desc if pk not in (2, 5)] == [1, 4, 3, 6]
    assert set(asc) == set(desc) == {1, 2, 3, 4, 5, 6}


def test_results_are_a_sequence(qdb):
    results = qdb.query("Q", "n <= $0 SORT(n ASC)", 4)
    assert isinstance(results, ferry.Results)
    assert len(results) == 4
    assert results[0]["_id"] == 1
    assert results[-1]["_id"] == 4
    assert [o["_id"] for o in results[1:3]] == [2, 3]
    assert [o["_id"] for o in results[::-1]] == [4, 3, 2, 1]
    assert [o["_id"] for o in results] == [1, 2, 3, 4]
    assert [o["_id"] for o in reversed(results)] == [4, 3, 2, 1]
    assert results.index(results[2]) == 2
    assert results[0] in results
    with pytest.raises(IndexError):
        results[4]
    with pytest.raises(IndexError):
        results[-5]
    assert dict(results[0]) == ROWS[0]
    assert results.class_name == "Q"
    assert "count=4" in repr(results)
    results.close()
    results.close()
    with pytest.raises(ValueError):
        results[0]
    with qdb.objects("Q") as everything:
        assert len(everything) == 6


def test_results_are_a_snapshot(tmp_path):
    with ferry.Database.open(tmp_path / "s.ferry", schema=[Q]) as db:
        with db.write():
            db.create("Q", {"_id": 1, "n": 1})
        results = db.query("Q", "n < 10")
        with db.write():
            db.create("Q", {"_id": 2, "n": 2})
            db.set("Q", 1, "n", 7)
        assert len(results) == 1
        assert results[0]["n"] == 1
        assert len(db.query("Q", "n < 10")) == 2


def test_query_inside_a_transaction_sees_its_writes(tmp_path):
    with ferry.Database.open(tmp_path / "s.ferry", schema=[Q]) as db:
        with db.write():
            db.create("Q", {"_id": 1, "n": 1})
            assert pks(db, "n == 1") == [1]
            db.set("Q", 1, "n", 2)
            assert pks(db, "n == 1") == []
            assert pks(db, "n == 2") == [1]


BAD = [
    # (query, args, offset of the problem)
    ("n <=", (), 4),
    ("n <= ", (), 5),
    ("n === 3", (), 4),
    ("n == 3 AND", (), 10),
    ("(n == 3", (), 7),
    ("n == 3)", (), 6),
    ("n == 3 n == 4", (), 7),
    ('name == "unterminated', (), 8),
    ("n == 3 SORT(", (), 12),
    ("n == 3 SORT(n UP)", (), 14),
    ("n == 3 LIMIT(-1)", (), 13),
    ("n == 3 LIMIT(x)", (), 13),
    ("n # 3", (), 2),
    ("n == $", (), 5),
    ("n == $1", (3,), 5),  # only $0 given
    ("nope == 3", (), 0),
    ("n == 'three'", (), 0),
    ('name < 3', (), 0),
    ("flag < true", (), 0),
    ("blob LIKE $0", (b"x",), 0),
    ("n BEGINSWITH 'x'", (), 0),
    ("n ==[c] 3", (), 0),
    ("tags.@count == 'x'", (), 15),
    ("n.@count > 1", (), 0),
    ("ALL n > 1", (), 0),
    ("n IN 3", (), 5),
    ("n > nil", (), 0),
    ("", (), 0),
    ("AND", (), 0),
    ("n == 99999999999999999999", (), 5),
    ("when == T5", (), 10),
    ("oid == oid(xyz)", (), 7),
    ("u == uuid(1234)", (), 5),
    ("n == 3 SORT(nope ASC)", (), None),
    ("owner.name == 'x'", (), 0),
    ("(" * 500 + "n == 1" + ")" * 500, (), None),
]


@pytest.mark.parametrize("query,args,offset", BAD, ids=[b[0][:40] for b in BAD])
def test_bad_query(qdb, query, args, offset):
    with pytest.raises(ferry.QueryError) as info:
        qdb.query("Q", query, *args)
    error = info.value
    assert error.code == -13
    assert isinstance(error, ValueError)
    match = re.search(r"offset (\d+)", error.message)
    assert match, error.message
    found = int(match.group(1))
    assert 0 <= found <= len(query.encode()), error.message
    if offset is not None:
        assert found == offset, error.message


def test_bad_query_message_says_what_was_expected(qdb):
    with pytest.raises(ferry.QueryError, match=r"offset 4: expected .*found the end"):
        qdb.query("Q", "n <=")
    with pytest.raises(ferry.QueryError, match="nope"):
        qdb.query("Q", "nope == 3")


def test_arguments_of_every_type(qdb):
    assert pks(qdb, "n == $0 AND x == $1 AND name == $2 AND flag == $3 AND when == $4 AND "
                    "oid == $5 AND u == $6 AND blob == $7",
               1, 1.5, "Apple", True, day(2020), oid(1), uid(1), b"\x01\x02") == [1]
    with pytest.raises(TypeError):
        qdb.query("Q", "n == $0", object())


def test_query_on_unknown_class(qdb):
    with pytest.raises(ferry.NoSuchClassError):
        qdb.query("Nope", "TRUEPREDICATE")


def test_non_ascii_query(qdb):
    assert pks(qdb, 'name == "pomme ✓"') == []
    with pytest.raises(ferry.QueryError) as info:
        qdb.query("Q", 'name == "✓" AND ✓✓')
    assert "offset" in info.value.message
