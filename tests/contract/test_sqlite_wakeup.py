"""An idle SQLite worker wakes when another connection commits (inotify, or polling)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from oncefire.stores.filewatch import FileWatch

BOUND = 5.0  # far above the expected wake-up; only a missed wake-up reaches it


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "w.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    return path


def commit_soon(path: str) -> threading.Timer:
    def write() -> None:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        with conn:
            conn.execute("INSERT INTO t VALUES (1)")
        conn.close()

    timer = threading.Timer(0.1, write)
    timer.start()
    return timer


@pytest.mark.parametrize("use_inotify", [True, False])
def test_a_commit_by_another_connection_ends_the_wait(db: str, use_inotify: bool) -> None:
    keep_open = sqlite3.connect(db)  # keeps the WAL file in place, as a worker's connection does
    keep_open.execute("SELECT count(*) FROM t").fetchall()
    watch = FileWatch(db + "-wal")
    if not use_inotify:
        watch.close()  # falls back to polling the file's size and mtime
    waiter = threading.Thread(target=watch.wait, args=(60.0,))
    waiter.start()
    timer = commit_soon(db)
    waiter.join(BOUND)
    timer.join()
    assert not waiter.is_alive()
    watch.close()
    keep_open.close()


def test_writes_to_other_files_in_the_folder_do_not_end_the_wait(db: str, tmp_path: Path) -> None:
    watch = FileWatch(db + "-wal")
    waiter = threading.Thread(target=watch.wait, args=(1.0,))
    waiter.start()
    (tmp_path / "other.log").write_text("noise")
    waiter.join(0.5)
    assert waiter.is_alive()  # still waiting: the noise was not our file
    waiter.join(BOUND)
    watch.close()
