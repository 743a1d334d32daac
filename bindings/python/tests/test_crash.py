"""kill -9 a writing process at random moments, many times: no committed transaction is lost,
and data and history always agree."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

import ferry

from conftest import HELPERS, PYTHON, TIMEOUT, child_env

ROUNDS = int(os.environ.get("FERRY_CRASH_ROUNDS", "25"))
TIME_BUDGET = float(os.environ.get("FERRY_CRASH_SECONDS", "120"))


def load_writer():
    import importlib.util

    spec = importlib.util.spec_from_file_location("crash_writer", HELPERS / "crash_writer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Child:
    """A writer process whose stdout lines are collected by a thread."""

    def __init__(self, path, seed, stderr):
        self.proc = subprocess.Popen(
            [PYTHON, str(HELPERS / "crash_writer.py"), str(path), str(seed)],
            stdout=subprocess.PIPE, stderr=stderr, env=child_env(), text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("ready"):
                self.ready.set()
        self.ready.set()  # EOF: the child is gone

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(TIMEOUT)
        self.reader.join(TIMEOUT)  # everything it wrote before dying is in the pipe


def test_kill_9_loses_no_committed_transaction(tmp_path):
    seed = int(os.environ.get("FERRY_CRASH_SEED", random.SystemRandom().randrange(2**32)))
    print(f"\nkill -9 test: seed {seed} (rerun with FERRY_CRASH_SEED={seed})")
    rng = random.Random(seed)
    writer = load_writer()
    schema = writer.SCHEMA
    path = tmp_path / "crash.ferry"
    reported: set[int] = set()
    started = time.monotonic()
    rounds = 0
    stderr_path = tmp_path / "child-stderr.txt"

    with open(stderr_path, "w") as stderr:
        for rounds in range(1, ROUNDS + 1):
            if time.monotonic() - started > TIME_BUDGET:
                break
            child = Child(path, rng.randrange(2**32), stderr)
            if rng.random() < 0.2:
                # Sometimes while it is still starting: loading, opening, recovering.
                delay = rng.uniform(0.0, 0.4)
            else:
                assert child.ready.wait(30), "the writer did not start"
                delay = rng.uniform(0.0, 0.5)
            time.sleep(delay)  # the random moment of the kill, not a wait for an event
            assert child.proc.poll() is None, f"the writer died by itself: see {stderr_path}"
            child.kill()
            assert child.proc.returncode == -signal.SIGKILL

            committed = [int(line) for line in child.lines if not line.startswith("ready")]
            reported.update(committed)

            with ferry.Database.open(path, schema=schema) as db:
                assert db.verify_history(), f"round {rounds}"
                entries = {o["_id"] for o in db.query("Entry")}
                missing = reported - entries
                assert not missing, f"round {rounds}: committed entries lost: {sorted(missing)[:10]}"
                assert all(e >= 0 for e in entries)
                # At most the one transaction that committed but was not yet reported is extra.
                assert len(entries - reported) <= rounds
                assert entries == set(range(len(entries))), "entries are not contiguous"
                counter = db.get("Counter", "c")
                assert (counter["total"] if counter else 0) == len(entries), "a torn transaction"
                bulk = len(db.query("Bulk"))
                assert bulk == writer.BULK * len([e for e in entries if e % 7 == 0]), "torn bulk"
                assert db.history_count() == len(entries)
                assert db.history_count() >= len(reported)

    print(f"kill -9 test: {rounds} rounds, {len(reported)} reported commits, "
          f"{time.monotonic() - started:.1f}s")
    assert len(reported) > 0, "the writer never committed anything"
