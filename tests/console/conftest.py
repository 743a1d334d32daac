"""Fixtures of the admin console's browser test: a ferry-server process, a real device (the
Python binding over libferry), and headless Chromium driven through chromedriver.

Environment:
    FERRY_SERVER_BIN        the ferry-server binary (required)
    FERRY_LIBRARY           libferry.so for the device (required)
    FERRY_TEST_ARTIFACTS    where screenshots go (default: build/console-screenshots)
    FERRY_POSTGRES_URL      a PostgreSQL database whose role may create databases: the main
                            test runs again on a server over a database of its own there
                            (skipped when unset; scripts/test-all.sh sets it)
    CHROMIUM_BIN            default /usr/bin/chromium
    CHROMEDRIVER_BIN        default /usr/bin/chromedriver

Nothing sleeps: every wait is a WebDriverWait (or a condition variable) on the condition, with
a timeout.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0  # seconds for anything asynchronous (a debug server on a busy 2-core machine)
ADMIN_TOKEN = "console-test-admin-token-5f1c-of-32-bytes-or-more"
JWT_KEY = "console-test-jwt-signing-key-with-enough-bytes"

# The binding: from the environment's installed package, else from the checkout.
try:
    import ferry
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import ferry

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait


def wait_until(condition: Callable[[], Any], timeout: float = TIMEOUT, message: str = "") -> Any:
    """Polls `condition` (WebDriverWait without a browser) until it gives a truthy value."""
    return WebDriverWait(None, timeout, poll_frequency=0.05).until(lambda _: condition(), message)


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set (see tests/console/README.md)", returncode=4)
    if not Path(value).exists():
        pytest.exit(f"{name}={value} does not exist (build it first: see tests/console/README.md)", returncode=4)
    return value


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = Path(os.environ.get("FERRY_TEST_ARTIFACTS") or REPO / "build" / "console-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Server:
    """One ferry-server process on a loopback port the OS picked."""

    def __init__(self, work: Path, admin_token: Optional[str], database_url: Optional[str] = None,
                 app_dir: Optional[Path] = None, extra_env: Optional[dict[str, str]] = None) -> None:
        binary = _required("FERRY_SERVER_BIN")
        self.work = work
        self.store = "postgres" if database_url else "sqlite"
        work.mkdir(parents=True, exist_ok=True)
        port_file = work / "port"
        env = dict(os.environ, jwtSigningKey=JWT_KEY, SWIFT_BACKTRACE="enable=no")
        env.pop("FERRY_ADMIN_TOKEN", None)
        if admin_token is not None:
            env["FERRY_ADMIN_TOKEN"] = admin_token
        env.update(extra_env or {})
        self.log_path = work / "server.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [binary, "--app-dir", str(app_dir or REPO / "examples" / "item-app"), "--data", str(work / "data"),
             "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file), "--log-level", "info",
             "--weak-password-hashing-for-tests"]
            + (["--database", database_url] if database_url else []),
            env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            port = wait_until(lambda: self._port(port_file), 60, "ferry-server wrote no port file")
        except Exception:
            self.stop()
            raise AssertionError(f"ferry-server did not start; its log:\n{self.log()}")
        self.url = f"http://127.0.0.1:{port}"

    def _port(self, port_file: Path) -> Optional[int]:
        if self.process.poll() is not None:
            raise AssertionError(f"ferry-server exited with {self.process.returncode}:\n{self.log()}")
        try:
            text = port_file.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("ferry-console-server"), ADMIN_TOKEN)
    yield s
    s.stop()


def _psql(url: str, sql: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.fail("FERRY_POSTGRES_URL is set but there is no psql to make a database with")
    done = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"psql {sql!r}: {done.stderr}"


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server over a PostgreSQL database made for this module and dropped after it."""
    base = os.environ.get("FERRY_POSTGRES_URL")
    if not base:
        pytest.skip("FERRY_POSTGRES_URL is not set")
    name = "ferry_console_" + secrets.token_hex(4)
    _psql(base, f"CREATE DATABASE {name}")
    s = Server(tmp_path_factory.mktemp("ferry-console-pg-server"), ADMIN_TOKEN, database_url=base.rsplit("/", 1)[0] + "/" + name)
    yield s
    s.stop()
    _psql(base, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_server(request: pytest.FixtureRequest) -> Server:
    """The main test's server: the embedded store, then PostgreSQL."""
    return request.getfixturevalue("server" if request.param == "sqlite" else "postgres_server")


ITEM = ferry.ObjectSchema(
    "Item",
    {
        "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
        "ownerId": ferry.Property(ferry.Type.STRING),
        "itemName": ferry.Property(ferry.Type.STRING),
        "complexity": ferry.Property(ferry.Type.INT, indexed=True),
    },
)


class Device:
    """A real device: the Python binding, an anonymous user, a synced database subscribed to
    `complexity <= 4`, and every sync error its handler received."""

    def __init__(self, server_url: str, directory: Path) -> None:
        _required("FERRY_LIBRARY")
        self.errors: list[Any] = []
        self._cond = threading.Condition()
        self.app = ferry.App(app_id="item-app-seeds", base_url=server_url, base_directory=str(directory))
        self.app.on_sync_error = self._on_error
        self.user = self.app.log_in(ferry.Credentials.anonymous(), timeout=TIMEOUT)
        self.session = self.app.open_synced(self.user, str(directory / "items.ferry"), schema=[ITEM])
        self.db = self.session.database
        version = self.session.update_subscriptions(lambda s: s.add("simple-items", "Item", "complexity <= 4"))
        self.session.wait_for_subscriptions(version, timeout=TIMEOUT)

    def _on_error(self, session: Any, error: Any) -> None:
        # Ferry's loop thread.
        with self._cond:
            self.errors.append(error)
            self._cond.notify_all()

    def wait_error(self, code: int, timeout: float = TIMEOUT) -> Any:
        with self._cond:
            found = self._cond.wait_for(lambda: next((e for e in self.errors if e.code == code), None), timeout)
        if not found:
            pytest.fail(f"the device's sync error handler got no error {code} within {timeout}s; it got {self.errors}")
        return found

    def write_item(self, owner: str, name: str, complexity: int) -> Any:
        key = ferry.ObjectId.generate()
        with self.db.write():
            self.db.create("Item", {"_id": key, "ownerId": owner, "itemName": name, "complexity": complexity})
        return key

    def close(self) -> None:
        self.session.close()
        self.app.close()


def _devices_of(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Device]]:
    made: list[Device] = []

    def make() -> Device:
        d = Device(server.url, tmp_path_factory.mktemp("ferry-console-device"))
        made.append(d)
        return d

    yield make
    for d in made:
        try:
            d.close()
        except Exception:  # already closed by the test
            pass


@pytest.fixture(scope="module")
def device_factory(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Device]]:
    yield from _devices_of(server, tmp_path_factory)


@pytest.fixture(scope="module")
def store_device_factory(store_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Device]]:
    """Devices of `store_server`."""
    yield from _devices_of(store_server, tmp_path_factory)


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--disable-component-update"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is given, so Selenium Manager never looks for (or downloads) one.
    service = Service(executable_path=os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(TIMEOUT)
    yield driver
    driver.quit()
