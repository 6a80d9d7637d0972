"""Four worker processes drain 20,000 events on PostgreSQL while one of them is SIGKILLed and
the database restarts: no event is lost, no effect happens twice, and the workers resume
by themselves, without any of them exiting.

The server is a private cluster the test starts itself (tests/pg_cluster.py: initdb in a
temporary folder, on a free port), never the machine's shared server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from oncefire import App
from oncefire.errors import StoreError
from oncefire.loader import load_app

EVENTS = 20_000
WORKERS = 4
BATCH = 200  # documents written per transaction
APP = Path(__file__).with_name("pg_scale_app.py")
ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
RESUME_LIMIT = 60.0  # seconds from the server accepting connections to the next effect
DRAIN_LIMIT = 600.0  # seconds for the whole run before the test gives up
WORKER_ENV = {
    "ONCEFIRE_LEASE": "3",
    "ONCEFIRE_RENEW_EVERY": "1",
    "ONCEFIRE_SWEEP_EVERY": "1",
    "ONCEFIRE_SHUTDOWN_GRACE": "5",
}


def query(url: str, sql: str) -> list[tuple[Any, ...]] | None:
    """The rows of one statement on a fresh connection, or None while the server is away."""
    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            return conn.execute(sql.encode()).fetchall()
    except psycopg.Error:
        return None


def effects(url: str) -> int | None:
    rows = query(url, "SELECT count(*) FROM oncefire_documents WHERE collection = 'effects'")
    return None if rows is None else int(rows[0][0])


def group_pids(leader: int) -> set[int]:
    """The processes of a process group (the worker command and any child it started)."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == leader:  # the fifth field of stat, after pid and (comm)
            pids.add(int(stat.parent.name))
    return pids


def busy_worker(
    url: str, workers: list[subprocess.Popen[bytes]]
) -> Callable[[], subprocess.Popen[bytes] | None]:
    """A look-up of a worker command whose process holds running deliveries right now."""

    def find() -> subprocess.Popen[bytes] | None:
        rows = query(url, "SELECT DISTINCT worker FROM oncefire_deliveries WHERE state = 'running'")
        holders = {int(name.split(":")[1]) for (name,) in rows or []}
        for worker in workers:
            if holders & group_pids(worker.pid):
                return worker
        return None

    return find


def wait_for(what: str, check: Callable[[], bool], limit: float, logs: Path) -> float:
    """Seconds until check() holds; fail with the workers' last log lines after limit."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit:
            tails = [p.read_text()[-3000:] for p in sorted(logs.glob("worker-*.log"))]
            pytest.fail(f"gave up waiting for {what} after {limit:.0f} s\n" + "\n".join(tails))
        time.sleep(0.1)
    return time.monotonic() - started


class Writer(threading.Thread):
    """Writes the items in batches, writing a batch again after a store error (a write that
    committed unseen is then a no-op: the same data emits no second event)."""

    def __init__(self, app: App) -> None:
        super().__init__(name="items-writer", daemon=True)
        self.app = app
        self.written = 0
        self.retries = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.written < EVENTS:
                end = min(self.written + BATCH, EVENTS)
                try:
                    with self.app.db.transaction() as tx:
                        for n in range(self.written, end):
                            tx.set(self.app.db.document(f"items/i{n:05d}"), {"n": n})
                except StoreError:
                    self.retries += 1
                    time.sleep(0.2)
                    continue
                self.written = end
        except BaseException as exc:
            self.error = exc


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.postgres
def test_four_workers_drain_20000_events_through_a_kill_and_a_database_restart(
    pg_cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg_cluster.create_database("scale")
    cli = ONCEFIRE
    monkeypatch.setenv("ONCEFIRE_STORE", url)
    app = load_app(str(APP))
    app.store  # noqa: B018 - registers record_effect before the first item is written
    env = {**os.environ, **WORKER_ENV, "ONCEFIRE_STORE": url}
    workers: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []
    try:
        for n in range(WORKERS):
            log = (tmp_path / f"worker-{n}.log").open("wb")
            logs.append(log)
            workers.append(
                subprocess.Popen(
                    [cli, "worker", str(APP), "--store", url, "--concurrency", "4"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: a kill takes its children too
                )
            )
        started = time.monotonic()
        writer = Writer(app)
        writer.start()

        wait_for("the first effects", lambda: (effects(url) or 0) >= EVENTS // 10, 300, tmp_path)
        victim = busy_worker(url, workers)
        found: list[subprocess.Popen[bytes]] = []  # the holder seen, not one looked up again

        def holder_seen() -> bool:
            worker = victim()
            if worker is not None:
                found.append(worker)
            return worker is not None

        wait_for("a worker holding deliveries", holder_seen, 60, tmp_path)
        killed = found[-1]
        victims = group_pids(killed.pid)
        os.killpg(killed.pid, signal.SIGKILL)  # the worker and any process it started
        killed.wait(10)
        # The attempts the dead process may have been running: each must end `crashed`.
        held = sum(
            1
            for (name,) in query(url, "SELECT worker FROM oncefire_attempts WHERE outcome IS NULL")
            or []
            if int(name.split(":")[1]) in victims
        )
        survivors = [w for w in workers if w is not killed]

        # Restart with a backlog left, so that resuming shows in new effects.
        wait_for(
            "a third of the effects", lambda: (effects(url) or 0) >= EVENTS // 3, 300, tmp_path
        )
        pg_cluster.restart("fast")
        wait_for("the server", lambda: effects(url) is not None, 60, tmp_path)
        up_at, before = time.time(), effects(url) or 0
        resumed = wait_for(
            "the workers to resume", lambda: (effects(url) or 0) > before, RESUME_LIMIT, tmp_path
        )
        pending_at_restart = EVENTS - before

        writer.join(DRAIN_LIMIT)
        assert writer.error is None, writer.error
        assert writer.written == EVENTS
        unsettled = "SELECT 1 FROM oncefire_deliveries WHERE state IN ('pending', 'running')"
        wait_for("every effect", lambda: query(url, unsettled) == [], DRAIN_LIMIT, tmp_path)
        elapsed = time.monotonic() - started
        alive = [w.poll() is None for w in survivors]
        after_restart = query(
            url, f"SELECT count(DISTINCT worker) FROM oncefire_attempts WHERE started_at > {up_at}"
        )
        facts = query(
            url,
            "SELECT (SELECT count(*) FROM oncefire_documents WHERE collection = 'items'),"
            " (SELECT count(*) FROM oncefire_events WHERE source LIKE 'items/%'),"
            " (SELECT count(*) FROM oncefire_documents WHERE collection = 'effects'),"
            " (SELECT count(DISTINCT data->>'event') FROM oncefire_documents"
            "  WHERE collection = 'effects'),"
            " (SELECT count(*) FROM oncefire_events e WHERE e.source LIKE 'items/%' AND NOT"
            "  EXISTS (SELECT 1 FROM oncefire_documents d WHERE d.collection = 'effects'"
            "  AND d.data->>'event' = e.id)),"
            " (SELECT count(*) FROM oncefire_deliveries WHERE state = 'succeeded'),"
            " (SELECT count(*) FROM oncefire_attempts WHERE outcome = 'crashed'),"
            " (SELECT count(*) FROM oncefire_attempts)",
        )
        assert facts is not None
        [(items, item_events, effect_docs, effect_events, missing, succeeded, crashed, tries)] = (
            facts
        )
        print(
            f"\n{EVENTS} events, {WORKERS} workers: drained in {elapsed:.0f} s; resumed "
            f"{resumed:.1f} s after the restart with {pending_at_restart} left; {tries} "
            f"attempts, {crashed} crashed ({held} open in the killed worker); the writer "
            f"retried {writer.retries} batch(es)"
        )
        assert items == EVENTS and item_events == EVENTS  # every acknowledged write, once
        assert missing == 0 and succeeded == EVENTS  # no event lost
        assert effect_docs == effect_events == EVENTS  # no effect twice
        assert crashed >= held  # every attempt the killed worker had open ended as crashed
        assert all(alive), "a worker exited"
        assert after_restart is not None and after_restart[0][0] == WORKERS - 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(5)
        for log in logs:
            log.close()
        app.close()
