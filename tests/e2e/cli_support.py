"""Running the `oncefire` command in tests: its path, what a user mistake looks like, and a
poll with a deadline for what its processes do."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# The command beside this interpreter first: a PATH lookup may find another installation.
_BESIDE = Path(sys.executable).parent / "oncefire"
ONCEFIRE = str(_BESIDE) if _BESIDE.is_file() else (shutil.which("oncefire") or str(_BESIDE))

Run = Callable[..., subprocess.CompletedProcess[str]]


def assert_user_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """One line on stderr (besides the line naming the store), a non-zero exit, no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("store: ")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def poll_until(what: str, check: Callable[[], object], timeout: float) -> None:
    """Poll check() until it returns something truthy; fail the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
