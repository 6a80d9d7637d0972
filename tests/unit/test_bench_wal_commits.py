"""The benchmark's commit counter on SQLite leaves this process's SQLite locks alone.

Closing a file releases every POSIX lock its process holds on it. A counter that opened and
closed the -shm file in the benchmark's own process dropped the lock that marks the WAL
index as in use; the next worker to open the database took itself for the first, truncated
the -shm file, and the benchmark's mapping of it ended in SIGBUS (now and then, mid-drain).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.bench_modules import load_bench

# SQLite's "dead man switch" byte of the -shm file: held shared while any connection is open.
PROBE = """
import fcntl, sys
with open(sys.argv[1], "r+b") as f:
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
    except OSError:
        print("held")
    else:
        print("free")
"""


def bench_commits() -> Any:
    return load_bench("commits")


def dms_lock(database: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, f"{database}-shm"], capture_output=True, text=True
    )
    return out.stdout.strip()


def test_reading_the_counter_keeps_the_wal_index_marked_in_use(tmp_path: Path) -> None:
    database = tmp_path / "store.db"
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        counter = bench_commits().WalCommits(database)
        before = counter.read()
        conn.execute("INSERT INTO t VALUES (1)")
        assert counter.read() == before + 1
        assert dms_lock(database) == "held"
        open(f"{database}-shm", "rb").close()  # what the counter once did, here
        assert dms_lock(database) == "free"
    finally:
        conn.close()
