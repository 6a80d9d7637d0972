"""Counts the SQLite commits of a benchmark process (on PYTHONPATH only when counting).

With BENCH_SQLITE_COMMITS set to a folder, every sqlite3 connection this process opens gets
a trace callback that counts its commits: a COMMIT (or END), or a write outside a
transaction, which commits on its own. The count lives in an 8-byte file of the folder, one
per process, mapped into memory: it is current at every moment, even after a process ends
without running its exit hooks, and bench/commits.py sums the files.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import struct
import threading
from typing import Any

FOLDER = os.environ.get("BENCH_SQLITE_COMMITS")
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class _Count:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.pid = -1
        self.value = 0
        self.map: mmap.mmap | None = None

    def add(self) -> None:
        with self.lock:
            if self.pid != os.getpid():  # a forked child counts in a file of its own
                self.pid, self.value = os.getpid(), 0
                path = os.path.join(self.folder, str(self.pid))
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                os.ftruncate(fd, 8)
                self.map = mmap.mmap(fd, 8)
                os.close(fd)
            self.value += 1
            assert self.map is not None
            struct.pack_into("<q", self.map, 0, self.value)


def _install(folder: str) -> None:
    count = _Count(folder)
    connect = sqlite3.connect

    def trace(conn: sqlite3.Connection, sql: str) -> None:
        word = sql.lstrip()[:8].split(None, 1)[0].upper() if sql.strip() else ""
        if word in ("COMMIT", "END") or (word in WRITES and not conn.in_transaction):
            count.add()

    def counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: trace(conn, sql))
        return conn

    sqlite3.connect = counting_connect  # type: ignore[assignment]


if FOLDER:
    _install(FOLDER)
