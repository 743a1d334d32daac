"""Shared fixtures: schemas, databases, and a change collector that waits with timeouts."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

import ferry
from ferry import ObjectSchema, Property, Type

TIMEOUT = 10.0  # seconds to wait for anything asynchronous; never a sleep


def pytest_report_header(config: Any) -> str:
    try:
        version = ferry.library_version()
    except OSError as exc:
        version = f"NOT LOADED ({exc})"
    return f"ferry binding {ferry.__version__}, library {version} from {ferry._native.library_path()}"


@pytest.fixture(scope="session", autouse=True)
def _library_loads() -> None:
    try:
        ferry._native.lib()
    except OSError as exc:
        pytest.exit(f"libferry cannot be loaded: {exc}", returncode=3)


PERSON = ObjectSchema(
    "Person",
    {
        "_id": Property(Type.STRING, primary_key=True),
        "name": Property(Type.STRING),
        "age": Property(Type.INT, optional=True),
    },
)

ITEM = ObjectSchema(
    "Item",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING, indexed=True),
        "itemName": Property(Type.STRING),
        "complexity": Property(Type.INT, indexed=True),
        "price": Property(Type.DOUBLE),
        "done": Property(Type.BOOL),
        "data": Property(Type.BINARY),
        "due": Property(Type.TIMESTAMP, optional=True),
        "ref": Property(Type.UUID, optional=True),
        "counter": Property(Type.INT, optional=True),
        "tags": Property(Type.STRING, list=True),
        "owner": Property(Type.LINK, link_target="Person", optional=True),
        "watchers": Property(Type.LINK, link_target="Person", list=True),
    },
)

SCHEMA = [PERSON, ITEM]


@pytest.fixture
def schema() -> list[ObjectSchema]:
    return list(SCHEMA)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "test.ferry"


@pytest.fixture
def db(db_path: Path) -> Iterator[ferry.Database]:
    with ferry.Database.open(db_path, schema=SCHEMA) as database:
        yield database


@pytest.fixture
def mem_id(request: pytest.FixtureRequest) -> str:
    return f"mem-{request.node.nodeid}-{os.getpid()}"


@pytest.fixture
def mem_db(mem_id: str) -> Iterator[ferry.Database]:
    with ferry.Database.open(in_memory=mem_id, schema=SCHEMA) as database:
        yield database


class Collector:
    """A change callback that records every ChangeSet and the thread it ran on."""

    def __init__(self) -> None:
        self.changes: list[ferry.ChangeSet] = []
        self.threads: list[int] = []
        self._cond = threading.Condition()

    def __call__(self, changes: ferry.ChangeSet) -> None:
        with self._cond:
            self.changes.append(changes)
            self.threads.append(threading.get_ident())
            self._cond.notify_all()

    def wait_for(
        self,
        predicate: Callable[[list[ferry.ChangeSet]], bool] = lambda c: len(c) > 0,
        timeout: float = TIMEOUT,
    ) -> list[ferry.ChangeSet]:
        """Waits until predicate(changes so far) holds; fails the test after timeout."""
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate(self.changes), timeout)
            if not ok:
                pytest.fail(f"timed out after {timeout}s waiting for changes; got {self.changes}")
            return list(self.changes)

    def wait_count(self, n: int, timeout: float = TIMEOUT) -> list[ferry.ChangeSet]:
        return self.wait_for(lambda c: len(c) >= n, timeout)

    def merged(self) -> ferry.ChangeSet:
        """Every change reported so far, merged (several commits may come in one call)."""
        with self._cond:
            out = ferry.ChangeSet()
            for c in self.changes:
                out.inserted += c.inserted
                out.deleted += c.deleted
                out.modified += c.modified
                out.modified_properties += [
                    p for p in c.modified_properties if p not in out.modified_properties
                ]
            return out

    def wait_merged(
        self, predicate: Callable[[ferry.ChangeSet], bool], timeout: float = TIMEOUT
    ) -> ferry.ChangeSet:
        self.wait_for(lambda _c: predicate(self._merged_unlocked()), timeout)
        return self.merged()

    def _merged_unlocked(self) -> ferry.ChangeSet:
        out = ferry.ChangeSet()
        for c in self.changes:
            out.inserted += c.inserted
            out.deleted += c.deleted
            out.modified += c.modified
            out.modified_properties += [
                p for p in c.modified_properties if p not in out.modified_properties
            ]
        return out


@pytest.fixture
def collector() -> Collector:
    return Collector()


def child_env() -> dict[str, str]:
    """The environment for child Python processes: same library, same ferry package."""
    env = dict(os.environ)
    package_root = str(Path(ferry.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [package_root, env.get("PYTHONPATH", "")] if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("SWIFT_BACKTRACE", "enable=no")
    return env


HELPERS = Path(__file__).resolve().parent / "helpers"
PYTHON = sys.executable


def new_item(**values: Any) -> dict[str, Any]:
    """An Item with a fresh ObjectId and the given values."""
    return {"_id": ferry.ObjectId.generate(), **values}


def ids(results: ferry.Results) -> list[Any]:
    return [o["_id"] for o in results]


def names(results: ferry.Results) -> list[str]:
    return [o["itemName"] for o in results]


def optional_pk(obj: Optional[ferry.Object]) -> Any:
    return None if obj is None else obj.primary_key
