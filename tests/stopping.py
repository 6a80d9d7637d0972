"""Stopping a worker process (SIGSTOP) for a test of what happens while it is paused."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest


def holds_no_write_lock(store: str) -> bool:
    """Whether another writer can take the store's write lock (always on PostgreSQL)."""
    if not store.startswith("sqlite"):
        return True
    conn = sqlite3.connect(store.removeprefix("sqlite:///"), timeout=0.2, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def stop_outside_a_write(store: str, pid: int) -> None:
    """SIGSTOP a worker at a moment it holds no SQLite write lock: a stopped writer would stall
    every other worker (SQLite has one writer at a time), which no lease can fence. One stopped
    inside a write is let run a moment before the next try: stopped again at once, it could
    never end that write (a commit waiting for the disk takes milliseconds under load)."""
    for _ in range(20):
        os.kill(pid, signal.SIGSTOP)
        if holds_no_write_lock(store):
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    pytest.fail("the worker held the SQLite write lock at every try")
