"""SQLite on a store that turns read-only, and on a full disk: a write fails with a clear error,
nothing acknowledged is lost, and the workers resume by themselves when access returns.

Both need root to mount (a read-only bind mount; a small tmpfs); they are skipped with the
reason where mounting is not allowed. PostgreSQL's are in test_postgres_storage.py.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncefire import App
from oncefire.errors import OncefireError
from tests.chaos.harness import Workers, produce, rows, unsettled, verdict, wait_for


def mount(*argv: str) -> None:
    subprocess.run(["mount", *argv], check=True, capture_output=True, timeout=30)


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on its own small tmpfs (so it can be filled, and remounted read-only)."""
    folder = tmp_path / "store"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a read-only bind needs root here")
    try:
        mount("-t", "tmpfs", "-o", "size=32m", "tmpfs", str(folder))
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, timeout=30)


def failed_write(store: str) -> str:
    """The error of a write made now (the test fails if the write succeeds)."""
    app = App(store)
    try:
        with pytest.raises(OncefireError) as caught:
            app.db.document("refused/r1").set({"blob": "x" * 900_000})  # more than free pages
    finally:
        app.close()
    return str(caught.value)


def test_a_read_only_store_refuses_writes_clearly_and_work_resumes(
    store_dir: Path, folder: Path
) -> None:
    store = f"sqlite:///{store_dir}/chaos.db"
    workers = Workers(store, folder, processes=1)  # its only worker is restarted read-only
    try:
        assert produce(store, folder, "items", "record", 100).wait(60) == 0
        wait_for("the first items", lambda: unsettled(store) == 0, 60, workers.log)
        # A read-only bind over the folder: every file opened from now on is read-only.
        mount("--bind", str(store_dir), str(store_dir))
        mount("-o", "remount,bind,ro", str(store_dir))
        try:
            error = failed_write(store)
            assert "read" in error.lower() and "\n" not in error, error
            # The supervisor replaces a dead worker while the store is read-only.
            before = workers.children()
            workers.kill(before[0])
            wait_for("a new worker", lambda: set(workers.children()) - set(before), 30)
            wait_for("it to open the store", lambda: "read-only" in workers.log.read_text(), 30)
        finally:
            subprocess.run(["umount", "-l", str(store_dir)], check=True, timeout=30)
        assert produce(store, folder, "items", "record", 100, first=100).wait(60) == 0
        wait_for("the worker to resume", lambda: unsettled(store) == 0, 30, workers.log)
    finally:
        workers.stop()
    report = verdict(store, folder)
    assert report.acknowledged == 200 and report.ok, report.summary()


def test_a_full_disk_refuses_writes_clearly_and_work_resumes(store_dir: Path, folder: Path) -> None:
    store = f"sqlite:///{store_dir}/chaos.db"
    workers = Workers(store, folder, processes=2)
    filler = store_dir / "filler"
    try:
        assert produce(store, folder, "items", "record", 100).wait(60) == 0
        wait_for("the first items", lambda: unsettled(store) == 0, 60, workers.log)
        rows(store, "PRAGMA wal_checkpoint(TRUNCATE)")  # no room left in the write-ahead log
        # Fill the disk to the last byte, unbuffered: a buffered file would fail again on close,
        # flushing what the full disk refused.
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        error = failed_write(store)
        assert "full" in error.lower() and "\n" not in error, error
        filler.unlink()
        assert produce(store, folder, "items", "record", 100, first=100).wait(60) == 0
        wait_for("the workers to resume", lambda: unsettled(store) == 0, 60, workers.log)
    finally:
        filler.unlink(missing_ok=True)
        workers.stop()
    report = verdict(store, folder)
    assert report.acknowledged == 200 and report.ok, report.summary()
