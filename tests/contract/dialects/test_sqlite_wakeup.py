"""An idle SQLite worker wakes when another connection commits (inotify, or polling), at
once when oncefire's writer tells it the commit returned (the wake file)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from oncefire import App
from oncefire.stores.sqlite import filewatch
from oncefire.stores.sqlite.filewatch import FileWatch, WakeFile

BOUND = 5.0  # far above the expected wake-up; only a missed wake-up reaches it


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "w.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    return path


def commit_now(path: str) -> None:
    """A commit by another program: it writes the WAL, and no wake file."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()


def commit_soon(path: str) -> threading.Timer:
    timer = threading.Timer(0.1, commit_now, args=(path,))
    timer.start()
    return timer


@pytest.mark.parametrize("use_inotify", [True, False])
@pytest.mark.parametrize("wake", [None, "wake file"])
def test_a_commit_by_another_connection_ends_the_wait(
    db: str, use_inotify: bool, wake: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another program's commit writes no wake file: with one watched, the WAL's write ends the
    # wait after the grace.
    monkeypatch.setattr(filewatch, "GRACE", 0.05)
    keep_open = sqlite3.connect(db)  # keeps the WAL file in place, as a worker's connection does
    keep_open.execute("SELECT count(*) FROM t").fetchall()
    watch = FileWatch(db + "-wal", wake=None if wake is None else WakeFile(db))
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


def test_a_write_to_the_wal_waits_for_the_wake_file_of_its_commit(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A commit writes the WAL before its flush: a worker woken then would meet the lock. With
    # a wake file, a write to the WAL ends the wait only after the grace, unless the writer's
    # wake (written once its commit returned) comes first.
    monkeypatch.setattr(filewatch, "GRACE", 60.0)
    keep_open = sqlite3.connect(db)
    keep_open.execute("SELECT count(*) FROM t").fetchall()
    watch = FileWatch(db + "-wal", wake=WakeFile(db))
    waiter = threading.Thread(target=watch.wait, args=(60.0,))
    waiter.start()
    wait_until_marked(db)
    commit_now(db)
    waiter.join(0.5)
    assert waiter.is_alive()  # the WAL was written; its wake has not come
    WakeFile(db).committed()  # another process's writer, its commit returned
    waiter.join(BOUND)
    assert not waiter.is_alive()
    watch.close()
    keep_open.close()


def test_a_wake_as_soon_as_the_wait_began_waits_the_grace(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writes flowing: a worker woken as soon as it went to sleep lets the writer's next write
    # take the lock first (the grace), rather than make it nap in SQLite's busy handler.
    monkeypatch.setattr(filewatch, "FLOWING", 60.0)  # every wake comes "as soon as"
    monkeypatch.setattr(filewatch, "GRACE", 0.5)
    watch = FileWatch(db + "-wal", wake=WakeFile(db))
    waiter = threading.Thread(target=watch.wait, args=(60.0,))
    waiter.start()
    wait_until_marked(db)
    WakeFile(db).committed()
    waiter.join(0.1)
    assert waiter.is_alive()  # woken, and waiting the grace
    waiter.join(BOUND)
    assert not waiter.is_alive()  # the grace has passed (the timeout is 60 s)
    watch.close()


def test_a_wake_written_as_the_waiter_goes_to_sleep_is_not_lost(db: str) -> None:
    # The waiter forgets earlier writes before it marks the file, not after: a writer that
    # commits the moment the mark is made wakes it.
    sleeper, writer = WakeFile(db), WakeFile(db)
    writer.committed()  # makes the file
    mark = sleeper.sleeping

    def mark_then_commit() -> None:
        mark()
        writer.committed()  # another process's commit, at that very moment

    sleeper.sleeping = mark_then_commit  # type: ignore[method-assign]
    watch = FileWatch(db + "-wal", wake=sleeper)
    waiter = threading.Thread(target=watch.wait, args=(60.0,))
    waiter.start()
    waiter.join(BOUND)
    assert not waiter.is_alive()
    watch.close()
    for wake in (sleeper, writer):
        wake.close()


def test_a_commit_writes_the_wake_file_only_while_a_worker_sleeps(db: str) -> None:
    sleeper, writer = WakeFile(db), WakeFile(db)
    writer.committed()  # makes the file
    watch = FileWatch(db + "-wal", wake=sleeper)
    writer.committed()
    assert watch._changed() == (False, False)  # no one sleeps: nothing written
    sleeper.sleeping()
    assert marked(db)
    writer.committed()
    assert not marked(db)
    assert watch._changed() == (False, True)
    writer.committed()  # the first commit woke the sleepers: the next writes nothing
    assert watch._changed() == (False, False)
    watch.close()
    for wake in (sleeper, writer):
        wake.close()


def marked(db: str) -> bool:
    with open(db + "-wake", "rb") as f:
        return f.read(1) == b"\1"


def wait_until_marked(db: str) -> None:
    deadline = time.monotonic() + BOUND
    while not (os.path.exists(db + "-wake") and marked(db)):
        assert time.monotonic() < deadline, "the waiter never marked the wake file"
        time.sleep(0.005)


def test_a_stores_write_wakes_a_sleeping_store_once_committed_and_an_empty_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two apps on one file, as a producer and a worker process: the worker's wait ends at the
    # producer's write (its wake), not at a transaction that changed no row.
    monkeypatch.setattr(filewatch, "GRACE", 60.0)
    url = f"sqlite:///{tmp_path / 'apps.db'}"
    worker, producer = App(url), App(url)
    try:
        _ = producer.store  # opened (and the schema made) before the worker sleeps
        waiter = threading.Thread(target=worker.store.wait, args=(60.0,))
        waiter.start()
        wait_until_marked(str(tmp_path / "apps.db"))
        with producer.store.transaction():
            pass  # changed no row: wakes no one
        waiter.join(0.5)
        assert waiter.is_alive()
        producer.db.document("docs/a").set({"n": 1})
        waiter.join(BOUND)
        assert not waiter.is_alive()
    finally:
        worker.close()
        producer.close()
