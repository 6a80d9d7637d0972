"""The helper that stops a worker for the zombie tests (tests/stopping.py) stops a process
that was inside a SQLite write only once it has ended that write, however long the write takes
to run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.stopping import holds_no_write_lock, stop_outside_a_write

pytestmark = pytest.mark.e2e

# A writer that tells when it holds the lock, then needs to run 30 times (a millisecond's sleep
# each) before it commits: stopped and resumed at once, it cannot get there.
WRITER = """
import pathlib, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
marker = pathlib.Path(sys.argv[2])
while True:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (1)")
    marker.touch()
    for _ in range(30):
        time.sleep(0.001)
    conn.execute("COMMIT")
    marker.unlink()
    time.sleep(0.5)
"""


def is_stopped(pid: int) -> bool:
    """Whether the process has stopped (a SIGSTOP takes effect a moment after it is sent)."""
    for _ in range(1000):
        text = Path(f"/proc/{pid}/stat").read_text()
        if text[text.rindex(")") + 2] == "T":
            return True
        time.sleep(0.001)
    return False


def test_a_writer_stopped_inside_a_write_is_stopped_again_once_it_ended_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with sqlite3.connect(db, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
    marker = tmp_path / "holding"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():  # the writer holds the lock from now for 30 turns
            assert writer.poll() is None and time.monotonic() < deadline, "no write began"
            time.sleep(0.0002)
        stop_outside_a_write(f"sqlite:///{db}", writer.pid)
        assert is_stopped(writer.pid)
        assert holds_no_write_lock(f"sqlite:///{db}")  # stopped once its write ended
    finally:
        os.kill(writer.pid, signal.SIGCONT)
        writer.kill()
        writer.wait()
