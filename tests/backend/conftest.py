"""Fixtures of the backend test (issue 24): a ferry-server process on a PostgreSQL database
of its own (made for the test and dropped after it), with the Data API on, and devices (the
Python binding over libferry).

Environment:
    FERRY_SERVER_BIN        the ferry-server binary (required)
    FERRY_LIBRARY           libferry.so for the devices (required)
    FERRY_POSTGRES_URL      a PostgreSQL database whose role may create databases (required:
                            scripts/test-all.sh sets it to its own cluster)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
KEY = "a-backend-data-api-key-of-32-bytes-or-more"
JWT_KEY = "backend-test-jwt-signing-key-with-enough-bytes"
ADMIN_TOKEN = "backend-test-admin-token-of-32-bytes-or-more"
APP = REPO / "Tests" / "Fixtures" / "data-api-app"

try:
    import ferry
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import ferry

import psycopg
from selenium.webdriver.support.ui import WebDriverWait


def wait_until(condition: Callable[[], Any], timeout: float = TIMEOUT, message: str = "") -> Any:
    """Polls `condition` until it gives a truthy value, at most `timeout` seconds."""
    return WebDriverWait(None, timeout, poll_frequency=0.05).until(lambda _: condition(), message)


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set (see tests/backend/conftest.py)", returncode=4)
    return value


def _psql(url: str, sql: str) -> None:
    done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"psql {sql!r}: {done.stderr}"


class Server:
    """ferry-server on a database of its own; `sql` is a psycopg connection to it, as the
    backend has."""

    def __init__(self, work: Path, database_url: Optional[str] = None) -> None:
        """A server on a new database, or another node on `database_url`'s."""
        base = _required("FERRY_POSTGRES_URL")
        self.base = base
        self.owns_database = database_url is None
        if database_url is None:
            self.database = "ferry_backend_" + secrets.token_hex(4)
            _psql(base, f"CREATE DATABASE {self.database}")
            database_url = base.rsplit("/", 1)[0] + "/" + self.database
        self.database_url = database_url
        work.mkdir(parents=True, exist_ok=True)
        # The fixture app (Item, and Reading with every value type) with a server key.
        app = work / "app"
        shutil.copytree(APP, app)
        (app / "http_endpoints" / "data_api_config.json").write_text(json.dumps(
            {"disabled": False, "server_keys": [{"name": "backend", "secret_name": "FERRY_DATA_API_KEY_BACKEND"}]}))
        port_file = work / "port"
        env = dict(os.environ, jwtSigningKey=JWT_KEY, FERRY_DATA_API_KEY_BACKEND=KEY, FERRY_ADMIN_TOKEN=ADMIN_TOKEN, SWIFT_BACKTRACE="enable=no")
        self.log_path = work / "server.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [_required("FERRY_SERVER_BIN"), "--app-dir", str(app), "--data", str(work / "data"), "--database", self.database_url,
             "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file), "--log-level", "info",
             "--weak-password-hashing-for-tests"],
            env=env, stdout=self._log, stderr=subprocess.STDOUT)
        port = wait_until(lambda: self._port(port_file), TIMEOUT, "ferry-server wrote no port file")
        self.url = f"http://127.0.0.1:{port}"
        self.sql = psycopg.connect(self.database_url, autocommit=True)

    def _port(self, port_file: Path) -> Optional[int]:
        if self.process.poll() is not None:
            raise AssertionError(f"ferry-server exited with {self.process.returncode}:\n{self.log_path.read_text(errors='replace')}")
        try:
            text = port_file.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text else None

    def call(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """A Data API call with the server key, as a backend makes it (urllib)."""
        request = urllib.request.Request(f"{self.url}/api/data/v1/app/item-app-seeds/action/{action}", data=json.dumps(body).encode(),
                                         method="POST", headers={"apiKey": KEY, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return json.loads(r.read())

    def admin(self, path: str) -> Any:
        """An admin API call (GET)."""
        request = urllib.request.Request(f"{self.url}/api/admin/v1/{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return json.loads(r.read())

    def metrics(self) -> str:
        request = urllib.request.Request(f"{self.url}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return r.read().decode()

    def changes(self, after: int) -> list[dict[str, Any]]:
        request = urllib.request.Request(f"{self.url}/api/data/v1/app/item-app-seeds/changes?after={after}", headers={"apiKey": KEY})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return [json.loads(line) for line in r.read().splitlines() if line]

    def stop(self) -> None:
        self.sql.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        if self.owns_database:
            _psql(self.base, f"DROP DATABASE {self.database} WITH (FORCE)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("ferry-backend-server"))
    yield s
    s.stop()


ITEM = ferry.ObjectSchema("Item", {
    "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
    "ownerId": ferry.Property(ferry.Type.STRING),
    "itemName": ferry.Property(ferry.Type.STRING),
    "complexity": ferry.Property(ferry.Type.INT, indexed=True),
})


class Device:
    """A device of a new anonymous user, subscribed to its own items."""

    def __init__(self, server_url: str, directory: Path) -> None:
        _required("FERRY_LIBRARY")
        self.app = ferry.App(app_id="item-app-seeds", base_url=server_url, base_directory=str(directory))
        self.user = self.app.log_in(ferry.Credentials.anonymous(), timeout=TIMEOUT)
        self.session = self.app.open_synced(self.user, str(directory / "items.ferry"), schema=[ITEM])
        self.db = self.session.database
        version = self.session.update_subscriptions(lambda s: s.add("mine", "Item", f'ownerId == "{self.user.id}"'))
        self.session.wait_for_subscriptions(version, timeout=TIMEOUT)

    def items(self) -> dict[str, dict[str, Any]]:
        """Its items by id, as the device has them."""
        out = {}
        for o in self.db.objects("Item"):
            out[str(o["_id"])] = {"itemName": o["itemName"], "complexity": o["complexity"], "ownerId": o["ownerId"]}
        return out

    def close(self) -> None:
        self.session.close()
        self.app.close()


@pytest.fixture
def devices(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Device]]:
    made: list[Device] = []

    def make() -> Device:
        d = Device(server.url, tmp_path_factory.mktemp("ferry-backend-device"))
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()
