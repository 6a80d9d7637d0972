"""PostgreSQL on a server that turns read-only, and on a full disk, on a private cluster: a
write fails with a clear one-line error, nothing acknowledged is lost, and the workers resume
by themselves when write access or space returns.

Read-only is the whole server's default (`default_transaction_read_only`, reloaded), as a
standby's sessions are until it is promoted: existing sessions and new ones alike. The full
disk is the test database's own tablespace, on a small tmpfs (mounting needs root; skipped
with the reason otherwise), so the server's write-ahead log keeps its room and the server
stays up, as when a data volume fills.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from oncefire import App
from oncefire.errors import OncefireError
from tests.chaos.harness import Workers, produce, unsettled, verdict, wait_for

pytestmark = pytest.mark.postgres


def admin(cluster: Any, sql: str) -> list[tuple[Any, ...]]:
    """The rows of one statement on the cluster's `postgres` database (autocommit)."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        cursor = conn.execute(sql.encode())
        return cursor.fetchall() if cursor.description else []


def set_read_only(cluster: Any, on: bool) -> None:
    """Make every session's transactions read-only (or writable again), and wait for it."""
    value = "on" if on else "off"
    admin(cluster, f"ALTER SYSTEM SET default_transaction_read_only = {value}")
    admin(cluster, "SELECT pg_reload_conf()")
    wait_for(
        "the reload",
        lambda: admin(cluster, "SHOW default_transaction_read_only") == [(value,)],
        30,
    )


def failed_write(store: str) -> str:
    """The error of a write made now, too large for the pages left (fails if it succeeds)."""
    app = App(store)
    try:
        with pytest.raises(OncefireError) as caught:
            # Random hex: TOAST cannot compress it into the free space of existing pages.
            app.db.document("refused/r1").set({"blob": os.urandom(450_000).hex()})
    finally:
        app.close()
    return str(caught.value)


def test_a_read_only_server_refuses_writes_clearly_and_work_resumes(
    pg_cluster: Any, folder: Path
) -> None:
    store = pg_cluster.create_database("storage_read_only")
    workers = Workers(store, folder, processes=1)  # its only worker is restarted read-only
    try:
        assert produce(store, folder, "items", "record", 100).wait(60) == 0
        wait_for("the first items", lambda: unsettled(store) == 0, 60, workers.log, store)
        # Attempts still running when the server turns read-only end while it is: their
        # endings wait to be recorded (their leases may run out meanwhile), none is lost.
        assert produce(store, folder, "capped", "capped", 40).wait(60) == 0
        set_read_only(pg_cluster, True)
        try:
            error = failed_write(store)
            assert "is read-only" in error and "\n" not in error, error
            # The supervisor replaces a dead worker while the server is read-only.
            before = workers.children()
            workers.kill(before[0])
            wait_for("a new worker", lambda: set(workers.children()) - set(before), 30)
            wait_for("it to meet the read-only server", lambda: _said_read_only(workers), 30)
        finally:
            set_read_only(pg_cluster, False)
        assert produce(store, folder, "items", "record", 100, first=100).wait(60) == 0
        wait_for("the worker to resume", lambda: unsettled(store) == 0, 60, workers.log, store)
    finally:
        workers.stop()
    report = verdict(store, folder)
    assert report.acknowledged == 240 and report.ok, report.summary()


def _said_read_only(workers: Workers) -> bool:
    return "store is read-only" in workers.log.read_text(errors="replace")


@pytest.fixture
def small_tablespace(pg_cluster: Any) -> Iterator[tuple[str, Path]]:
    """A database whose tablespace is a 48 MB tmpfs: (its URL, the mount point). Outside
    pytest's folders, which the server's user may not enter."""
    space = Path(tempfile.mkdtemp(prefix="oncefire-space-"))
    space.chmod(0o755)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root here")
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(space)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        (space / "pg").mkdir()
        shutil.chown(space / "pg", "postgres")
        admin(pg_cluster, f"CREATE TABLESPACE small LOCATION '{space / 'pg'}'")
        admin(pg_cluster, "CREATE DATABASE storage_full TABLESPACE small")
        yield pg_cluster.database_url("storage_full"), space
    finally:
        admin(pg_cluster, "DROP DATABASE IF EXISTS storage_full WITH (FORCE)")
        admin(pg_cluster, "DROP TABLESPACE IF EXISTS small")
        subprocess.run(["umount", "-l", str(space)], check=False, timeout=30)
        shutil.rmtree(space, ignore_errors=True)


def test_a_full_disk_refuses_writes_clearly_and_work_resumes(
    small_tablespace: tuple[str, Path], folder: Path
) -> None:
    store, space = small_tablespace
    workers = Workers(store, folder, processes=2)
    filler = space / "filler"
    try:
        assert produce(store, folder, "items", "record", 100).wait(60) == 0
        wait_for("the first items", lambda: unsettled(store) == 0, 60, workers.log, store)
        with open(filler, "wb") as f:  # fill the disk to the last byte
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        error = failed_write(store)
        assert "out of disk space" in error and "\n" not in error, error
        filler.unlink()
        assert produce(store, folder, "items", "record", 100, first=100).wait(60) == 0
        wait_for("the workers to resume", lambda: unsettled(store) == 0, 60, workers.log, store)
    finally:
        filler.unlink(missing_ok=True)
        workers.stop()
    report = verdict(store, folder)
    assert report.acknowledged == 200 and report.ok, report.summary()
