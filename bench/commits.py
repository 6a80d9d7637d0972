"""Commits per event: how many durable commits a system made for each event it ran.

SQLite in WAL mode (oncefire): the WAL index's change counter, which SQLite increments once
a committed transaction, read from the -shm file beside the database, so the measured
processes run as they are. SQLite otherwise (Huey): the processes run with
bench/commit_hook on their path, which counts every connection's commits (a trace callback,
which costs a GIL hand-over a statement) into one small file per process; PostgreSQL:
pg_stat_database.xact_commit of the system's database, every transaction counted, read-only
ones too. Both are read before the workers start and after they have stopped, so the count
covers the whole drain, start-up and shutdown included (a few commits against thousands of
events), and is divided by the events done by then.

Standard library only (psycopg is imported where used): the peers' scripts use it too.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

from benchlib import BENCH, PG_ADMIN_URL, WORK

HOOK = BENCH / "commit_hook"


class SqliteCommits:
    """The commits of every process started with `env`, summed from their count files."""

    def __init__(self, name: str) -> None:
        self.folder = WORK / "commits" / name
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self.env = {"BENCH_SQLITE_COMMITS": str(self.folder)}
        self.path = str(HOOK)  # goes first on the processes' PYTHONPATH

    def read(self) -> int:
        """Commits counted so far."""
        total = 0
        for file in self.folder.iterdir():
            data = file.read_bytes()
            if len(data) == 8:
                total += struct.unpack("<q", data)[0]
        return total

    def settled(self) -> int:
        """The count once the workers have stopped (it is current at every moment)."""
        return self.read()


class WalCommits:
    """The commits made to one SQLite database in WAL mode: iChange of its WAL-index header
    (the -shm file), which every committed write transaction increments (32 bits: a run is
    far from wrapping it). The file lives while a connection is open: read it while one is.

    It is read by a child process, never by this one: closing a file releases every POSIX
    lock its process holds on it, so a read here would drop the locks of this process's own
    SQLite connections on the -shm file; the next process to open the database would then
    take itself for the first, truncate the file, and this process's mapping of it would
    end in SIGBUS."""

    READ = (
        "import struct, sys; f = open(sys.argv[1], 'rb');"
        " print(struct.unpack('=I', f.read(12)[8:12])[0])"
    )

    def __init__(self, database: Path) -> None:
        self.shm = Path(f"{database}-shm")
        self.env: dict[str, str] = {}
        self.path = ""

    def read(self) -> int:
        """The counter now."""
        out = subprocess.run(
            [sys.executable, "-c", self.READ, str(self.shm)],
            check=True,
            capture_output=True,
            text=True,
        )
        return int(out.stdout)

    def settled(self) -> int:
        """The counter now (current at every moment)."""
        return self.read()


class PostgresCommits:
    """Transactions committed in one PostgreSQL database (pg_stat_database.xact_commit)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.env: dict[str, str] = {}
        self.path = ""

    def read(self) -> int:
        """xact_commit now, as far as the backends have reported it."""
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self.database,)
            ).fetchone()
        return int(row[0]) if row else 0

    def settled(self, timeout: float = 5.0) -> int:
        """xact_commit once the backends of stopped clients have reported theirs (a backend
        reports at most once a second while it runs, and when it exits)."""
        deadline = time.monotonic() + timeout
        last = self.read()
        while time.monotonic() < deadline:
            time.sleep(0.3)
            now = self.read()
            if now == last:
                break
            last = now
        return last


def per_event(before: int, after: int, own: int, events: int) -> float | None:
    """Commits per event, less `own` transactions of the benchmark's own connection."""
    if events <= 0:
        return None
    return max(0, after - before - own) / events
