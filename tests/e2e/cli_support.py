"""Running the `oncefire` command in tests: its path, and what a user mistake looks like."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
