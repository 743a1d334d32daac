"""The Python demo (demo/demo.py) runs and exits 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, child_env

DEMO = Path(__file__).resolve().parents[3] / "demo" / "demo.py"


@pytest.mark.skipif(not DEMO.exists(), reason="demo/demo.py is not in this checkout")
def test_demo_runs():
    done = subprocess.run([PYTHON, str(DEMO)], env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Done." in done.stdout
    assert "notification: 3 inserted" in done.stdout
