"""The pre-flight check (SPEC F-PRECHECK) from Python, against a real ferry-server process:
the server publishes the user's write rules after each BIND; the device checks every commit
before upload, offline too. WARN commits and reports at once; STRICT raises
``WriteRejectedError`` and writes nothing; the rules survive a restart in the file."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import ferry

from test_sync import APP_ID, ITEM, T, server  # noqa: F401 - the module-scoped server fixture

WRONG_OWNER = "This string does not match the user.id"


def outside(pk: ferry.ObjectId) -> str:
    return f'write to "{pk}" in table "Item" not allowed; object is outside of the current query view'


def denied(pk: ferry.ObjectId) -> str:
    return f'write to "{pk}" in table "Item" was denied by write filter in role "owner-read-write"'


class Findings:
    """``on_precheck``: called on the committing thread before the commit returns."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[ferry.CompensatingWrite], bool, int]] = []

    def __call__(self, writes: list[ferry.CompensatingWrite], committed: bool) -> None:
        self.calls.append((writes, committed, threading.get_ident()))


def create(db: ferry.Database, pk: ferry.ObjectId, owner: str, complexity: int) -> None:
    with db.write():
        db.create("Item", {"_id": pk, "ownerId": owner, "itemName": "item", "complexity": complexity})


def open_checked(server_url: str, base: Path, mode: ferry.PrecheckMode, findings: Findings) -> tuple[ferry.App, Any, ferry.SyncSession]:
    """Logs in, opens with a check, subscribes online (the rules arrive after BIND, before the
    subscription completes), then suspends the session: offline from here."""
    app = ferry.App(app_id=APP_ID, base_url=server_url, base_directory=base, log_level=ferry.LogLevel.WARN)
    user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
    session = app.open_synced(user, base / "items.ferry", [ITEM], precheck_mode=mode, on_precheck=findings)
    session.wait_for_download(T)
    version = session.update_subscriptions(lambda s: s.add("items", "Item", "complexity <= 4"))
    session.wait_for_subscriptions(version, T)
    session.suspend()
    return app, user, session


def test_warn_commits_and_reports_the_seeds_writes_at_once_offline(server: str, tmp_path: Path) -> None:  # noqa: F811
    findings = Findings()
    app, user, session = open_checked(server, tmp_path, ferry.PrecheckMode.WARN, findings)
    try:
        db = session.database
        complex_, foreign, fine = (ferry.ObjectId.generate() for _ in range(3))
        create(db, complex_, user.id, 7)
        assert [(w, c) for w, c, _ in findings.calls] == [([ferry.CompensatingWrite("Item", complex_, outside(complex_))], True)]
        create(db, foreign, WRONG_OWNER, 1)
        assert findings.calls[1][0] == [ferry.CompensatingWrite("Item", foreign, denied(foreign))]
        create(db, fine, user.id, 2)
        assert len(findings.calls) == 2
        assert all(t == threading.get_ident() for _, _, t in findings.calls)
        assert db.get("Item", complex_) is not None and db.get("Item", foreign) is not None
    finally:
        app.close()


def test_strict_refuses_the_seeds_writes_and_the_rules_survive_a_restart(server: str, tmp_path: Path) -> None:  # noqa: F811
    findings = Findings()
    app, user, session = open_checked(server, tmp_path, ferry.PrecheckMode.STRICT, findings)
    db = session.database
    complex_, foreign, fine = (ferry.ObjectId.generate() for _ in range(3))
    with pytest.raises(ferry.WriteRejectedError) as e1:
        create(db, complex_, user.id, 7)
    assert outside(complex_) in e1.value.message
    assert e1.value.code == ferry.errors.WriteRejectedError.CODE == -24
    with pytest.raises(ferry.WriteRejectedError) as e2:
        create(db, foreign, WRONG_OWNER, 1)
    assert denied(foreign) in e2.value.message
    assert [(w, c) for w, c, _ in findings.calls] == [
        ([ferry.CompensatingWrite("Item", complex_, outside(complex_))], False),
        ([ferry.CompensatingWrite("Item", foreign, denied(foreign))], False),
    ]
    assert db.get("Item", complex_) is None and db.get("Item", foreign) is None
    assert not db.in_transaction
    create(db, fine, user.id, 2)
    assert len(db.objects("Item")) == 1
    app.close()
    db.close()

    # No server: a new App on the same directory (the cached user), the rules from the file.
    again = ferry.App(app_id=APP_ID, base_url="http://127.0.0.1:9", base_directory=tmp_path, log_level=ferry.LogLevel.OFF)
    try:
        cached = again.current_user
        assert cached is not None and cached.id == user.id
        later = Findings()
        s = again.open_synced(cached, tmp_path / "items.ferry", [ITEM], precheck_mode=ferry.PrecheckMode.STRICT, on_precheck=later)
        other = ferry.ObjectId.generate()
        with pytest.raises(ferry.WriteRejectedError):
            create(s.database, other, WRONG_OWNER, 1)
        assert later.calls[0][0] == [ferry.CompensatingWrite("Item", other, denied(other))]
    finally:
        again.close()


def test_bad_precheck_arguments(server: str, tmp_path: Path) -> None:  # noqa: F811
    app = ferry.App(app_id=APP_ID, base_url=server, base_directory=tmp_path, log_level=ferry.LogLevel.WARN)
    try:
        user = app.log_in(ferry.Credentials.anonymous(), timeout=T)
        with pytest.raises(ValueError):
            app.open_synced(user, tmp_path / "a.ferry", [ITEM], precheck_mode=7)
        with pytest.raises(TypeError):
            app.open_synced(user, tmp_path / "b.ferry", [ITEM], precheck_mode=True)
        with pytest.raises(TypeError):
            app.open_synced(user, tmp_path / "c.ferry", [ITEM], on_precheck=42)
    finally:
        app.close()
