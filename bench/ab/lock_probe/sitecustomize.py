"""Loaded by every Python process that has this folder on its PYTHONPATH (bench/ab/lock_share.py
puts it there): when LOCK_PROBE_DIR is set, every SQLite connection the process opens writes,
for each write transaction it commits, when it first asked for the lock (BEGIN IMMEDIATE,
busy retries included), when it got it, and when its COMMIT returned: one line a transaction,
CLOCK_MONOTONIC seconds, in LOCK_PROBE_DIR/<pid>.txt."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

DIR = os.environ.get("LOCK_PROBE_DIR")


class ProbedConnection(sqlite3.Connection):
    """A connection that notes its write transactions' times."""

    asked: float | None = None
    got = 0.0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        word = sql.lstrip()[:15].upper()
        if word.startswith("BEGIN IMMEDIATE"):
            if self.asked is None:
                self.asked = time.monotonic()
            cursor = super().execute(sql, *args)  # busy: raises, asked kept for the retry
            self.got = time.monotonic()
            return cursor
        cursor = super().execute(sql, *args)
        if word.startswith(("COMMIT", "ROLLBACK")) and self.asked is not None:
            if word.startswith("COMMIT"):
                PROBE.write(f"{self.asked:.6f} {self.got:.6f} {time.monotonic():.6f}\n")
            self.asked = None
        return cursor


if DIR:
    PROBE = open(os.path.join(DIR, f"{os.getpid()}.txt"), "a", buffering=1)  # noqa: SIM115
    _connect = sqlite3.connect

    def _probed(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = _connect(*args, **{**kwargs, "factory": ProbedConnection})
        return conn

    sqlite3.connect = _probed  # type: ignore[assignment]
