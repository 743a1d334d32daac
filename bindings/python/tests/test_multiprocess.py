"""One sync agent per file, across processes; plain files are shared by processes."""

from __future__ import annotations

import signal
import subprocess
import threading

import pytest

import ferry

from conftest import HELPERS, PYTHON, SCHEMA, TIMEOUT, child_env


class Agent:
    """A child process that opens and closes databases on command."""

    def __init__(self, name: str):
        self.name = name
        self.proc = subprocess.Popen(
            [PYTHON, str(HELPERS / "process_agent.py"), name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_env(), text=True,
        )

    def ask(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(TIMEOUT * 3)
        if not answer or not answer[0]:
            self.proc.kill()
            pytest.fail(
                f"{self.name} did not answer {command!r} (exit code {self.proc.wait()}):\n"
                f"{self.proc.stderr.read()}"
            )
        return answer[0].strip()

    def finish(self) -> int:
        if self.proc.poll() is None:
            self.proc.stdin.write("exit\n")
            self.proc.stdin.flush()
        code = self.proc.wait(TIMEOUT * 3)
        return code

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(TIMEOUT)


@pytest.fixture
def agents():
    made: list[Agent] = []

    def make(name: str) -> Agent:
        agent = Agent(name)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        if agent.proc.poll() is None:
            agent.kill()


def test_second_sync_agent_is_refused_until_the_first_closes(tmp_path, agents):
    path = tmp_path / "synced.ferry"
    a, b = agents("A"), agents("B")
    assert a.ask(f"open {path} 1") == "ok"
    assert a.ask("write from-a") == "ok"

    answer = b.ask(f"open {path} 1")
    assert answer.startswith("error MultipleSyncAgentsError -16"), answer
    assert b.proc.poll() is None  # not a crash
    # Opening without asking to sync is allowed (SPEC F-MULTIPROC): b reads and writes the
    # file, and the agent uploads its commits.
    assert b.ask(f"open {path} 0") == "ok"
    assert b.ask("read from-a") == "found"

    assert a.ask("close") == "ok"
    assert b.ask(f"open {path} 1") == "ok"
    assert b.ask("read from-a") == "found"
    assert b.ask("write from-b") == "ok"
    # Now a is the second process.
    answer = a.ask(f"open {path} 1")
    assert answer.startswith("error MultipleSyncAgentsError"), answer
    assert b.ask("close") == "ok"
    assert a.finish() == 0
    assert b.finish() == 0

    with ferry.Database.open(path) as db:
        # A synced file's history does not hold its downloads: the library refuses to verify it.
        with pytest.raises(ferry.InvalidArgumentError, match="synced"):
            db.verify_history()
        assert db.history_count() == 2
        assert {o["_id"] for o in db.query("Note")} == {"from-a", "from-b"}


def test_this_process_is_refused_while_a_child_is_the_agent(tmp_path, agents):
    path = tmp_path / "synced.ferry"
    a = agents("A")
    assert a.ask(f"open {path} 1") == "ok"
    with pytest.raises(ferry.MultipleSyncAgentsError) as info:
        ferry.Database.open(path, synced=True)
    assert info.value.code == -16 and info.value.message
    # Without asking to sync, this process opens it to read and write.
    with ferry.Database.open(path) as db:
        assert db.class_names == ["Note"]
    assert a.ask("close") == "ok"
    with ferry.Database.open(path, synced=True) as db:
        assert db.class_names == ["Note"]
        answer = a.ask(f"open {path} 1")
        assert answer.startswith("error MultipleSyncAgentsError"), answer
    assert a.finish() == 0


def test_a_killed_agent_releases_the_file(tmp_path, agents):
    path = tmp_path / "synced.ferry"
    a, b = agents("A"), agents("B")
    assert a.ask(f"open {path} 1") == "ok"
    assert a.ask("write before-kill") == "ok"
    a.kill()
    assert b.ask(f"open {path} 1") == "ok"
    assert b.ask("read before-kill") == "found"
    assert b.finish() == 0


def test_handles_in_one_process_share_the_agent_role(tmp_path, agents):
    path = tmp_path / "synced.ferry"
    a, b = agents("A"), agents("B")
    assert a.ask(f"open {path} 1") == "ok"
    assert a.ask(f"open {path} 1") == "ok"
    assert a.ask(f"open {path} 0") == "ok"
    assert a.ask("write x") == "ok"
    assert b.ask(f"open {path} 1").startswith("error MultipleSyncAgentsError")
    assert a.ask("close") == "ok"  # closes all three
    assert b.ask(f"open {path} 0") == "ok"
    assert a.finish() == 0 and b.finish() == 0


def test_the_sync_agent_role_is_held_until_the_last_handle_closes(tmp_path):
    path = tmp_path / "synced.ferry"
    first = ferry.Database.open(path, schema=SCHEMA, synced=True)
    second = ferry.Database.open(path, synced=True)
    first.close()
    probe = Agent("probe")
    try:
        assert probe.ask(f"open {path} 1").startswith("error MultipleSyncAgentsError")
        second.close()
        assert probe.ask(f"open {path} 1") == "ok"
    finally:
        assert probe.finish() == 0


def test_unsynced_file_is_shared_by_processes(tmp_path, agents):
    path = tmp_path / "plain.ferry"
    a, b = agents("A"), agents("B")
    assert a.ask(f"open {path} 0") == "ok"
    assert b.ask(f"open {path} 0") == "ok"
    for i in range(5):
        assert a.ask(f"write a{i}") == "ok"
        assert b.ask(f"write b{i}") == "ok"
    assert b.ask("read a4") == "found"
    assert a.ask("read b4") == "found"
    with ferry.Database.open(path) as db:
        assert len(db.query("Note")) == 10
        assert db.history_count() == 10
        assert db.verify_history()
    assert a.finish() == 0 and b.finish() == 0


def test_a_writer_waits_for_another_process_s_transaction(tmp_path, agents):
    path = tmp_path / "plain.ferry"
    a = agents("A")
    assert a.ask(f"open {path} 0") == "ok"
    db = ferry.Database.open(path)
    assert a.ask("begin held") == "ok"
    began = threading.Event()
    errors: list[BaseException] = []

    def write():
        try:
            with db.write():
                began.set()
                db.create("Note", {"_id": "mine", "by": "parent"})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            began.set()

    t = threading.Thread(target=write)
    t.start()
    assert not began.wait(1.0), f"got the write lock while another process held it: {errors}"
    assert a.ask("commit") == "ok"
    assert began.wait(TIMEOUT)
    t.join(TIMEOUT)
    assert errors == []
    assert db.get("Note", "held") is not None and db.get("Note", "mine") is not None
    db.close()
    assert a.finish() == 0


def test_busy_after_ten_seconds(tmp_path, agents):
    import time

    path = tmp_path / "plain.ferry"
    a = agents("A")
    assert a.ask(f"open {path} 0") == "ok"
    with ferry.Database.open(path) as db:
        assert a.ask("begin held") == "ok"
        start = time.monotonic()
        with pytest.raises(ferry.BusyError):
            db.begin_write()
        waited = time.monotonic() - start
        assert 9.0 <= waited <= 30.0, waited
        assert not db.in_transaction
    assert a.ask("commit") == "ok"
    assert a.finish() == 0


def test_open_while_another_process_writes(tmp_path, agents):
    path = tmp_path / "plain.ferry"
    a = agents("A")
    assert a.ask(f"open {path} 0") == "ok"
    assert a.ask("write committed") == "ok"
    assert a.ask("begin uncommitted") == "ok"
    with ferry.Database.open(path) as db:
        assert db.get("Note", "committed") is not None
        assert db.get("Note", "uncommitted") is None
    assert a.ask("commit") == "ok"
    assert a.finish() == 0
