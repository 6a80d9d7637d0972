"""Real worker commands, a producer process, kills, and the store's end state, for the scenarios."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import oncefire
from tests.chaos import ledger
from tests.chaos.checker import Delivery, Report, StoreFacts, check

HERE = Path(__file__).parent
ROOT = HERE.parents[1]  # the checkout: chaos_app and producer import tests.chaos.ledger
APP = HERE / "chaos_app.py"
# The source this test imported (a worktree's, or a broken copy's under tools/broken_build.py),
# so worker processes run it rather than whatever the editable install points at.
SOURCE = Path(oncefire.__file__).resolve().parents[1]
ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
LEASE = 2.0
FAST = {
    "ONCEFIRE_LEASE": str(LEASE),
    "ONCEFIRE_RENEW_EVERY": "0.5",
    "ONCEFIRE_SWEEP_EVERY": "0.5",
    "ONCEFIRE_SHUTDOWN_GRACE": "3",
    "ONCEFIRE_BATCH_SIZE": "16",
}


@dataclass(frozen=True)
class Profile:
    """How hard a scenario pushes: quick by default, `--full` on demand."""

    name: str
    kills: int
    events: int
    group_kills: int
    restarts: int
    poisons: int  # of each kind, in the poison mix under kills


QUICK = Profile("quick", kills=3, events=1000, group_kills=10, restarts=3, poisons=2)
FULL = Profile("full", kills=20, events=20_000, group_kills=100, restarts=6, poisons=4)


def wait_for(
    what: str,
    check: Callable[[], object],
    timeout: float,
    log: Path | None = None,
    store: str | None = None,
) -> Any:
    """Poll check() until truthy; fail after timeout with the end of the workers' log (and,
    given the store, its unsettled deliveries and open sessions)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
            state = diagnosis(store) if store else ""
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{tail}{state}")
        time.sleep(0.05)


def diagnosis(store: str) -> str:
    """What a stuck scenario's store holds: its unsettled deliveries, and on PostgreSQL the
    sessions in a transaction and the locks waited for."""
    lines = ["deliveries (id, function, state, attempt, worker, lease_until, run_at):"]
    lines += [
        f"  {row}"
        for row in rows(
            store,
            "SELECT id, function, state, attempt, worker, lease_until, run_at"
            " FROM oncefire_deliveries WHERE state IN ('pending', 'running') ORDER BY id",
        )
    ]
    if not store.startswith("sqlite"):
        lines.append("sessions (pid, state, since, waits on, query):")
        lines += [
            f"  {row}"
            for row in rows(
                store,
                "SELECT pid, state, now() - xact_start, wait_event_type || ':' || wait_event,"
                " left(query, 120) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
        ]
        lines.append("locks not granted (pid, type, relation):")
        lines += [
            f"  {row}"
            for row in rows(
                store, "SELECT pid, locktype, relation::regclass FROM pg_locks WHERE NOT granted"
            )
        ]
    return "\n" + "\n".join(lines)


def environment(store: str, folder: Path, **extra: str) -> dict[str, str]:
    """The environment of worker and producer processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env.update(FAST, ONCEFIRE_STORE=store, CHAOS_LEDGER=str(folder), **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SOURCE)])
    return env


class Workers:
    """One `oncefire worker APP --processes N` command in its own process group."""

    def __init__(
        self, store: str, folder: Path, processes: int = 2, concurrency: int = 4, **env: str
    ) -> None:
        self.store, self.folder, self.env = store, folder, env
        self.argv = [ONCEFIRE, "worker", str(APP), "--processes", str(processes)]
        self.argv += ["--concurrency", str(concurrency)]
        self.log = folder.parent / "workers.log"
        self.book = ledger.Ledger(folder, "test")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start the command (again)."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                env=environment(self.store, self.folder, **self.env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def children(self) -> list[int]:
        """The worker processes the supervisor runs now."""
        return sorted(p for p in group_pids(self.pid) if p != self.pid)

    def kill(self, victim: int) -> None:
        """SIGKILL one process, witnessed in the ledger; a dead supervisor is started again."""
        # The line is written once the victim is gone, so that it follows all the victim did.
        if victim == self.pid:
            pids = group_pids(self.pid)
            os.killpg(self.pid, signal.SIGKILL)
            assert self.proc is not None
            self.proc.wait(10)
            wait_for("the group to die", lambda: not group_pids(self.pid), 10)
            for pid in pids:
                self.book.write("kill", "", victim=pid, sync=True)
            self.start()
        else:
            os.kill(victim, signal.SIGKILL)
            wait_for("the victim to die", lambda: not is_alive(victim), 10)
            self.book.write("kill", "", victim=victim, sync=True)

    def kill_at_random(self, rng: random.Random) -> str:
        """Kill a child, or now and then the supervisor with its children; which one."""
        children = self.children()
        if not children or rng.random() < 0.25:
            self.kill(self.pid)
            return "supervisor"
        self.kill(rng.choice(children))
        return "child"

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit; its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.killpg(self.pid, signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            return self.proc.wait(5)


def is_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def group_pids(leader: int) -> set[int]:
    """The live processes of a process group."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == leader and fields[0] != "Z":
            pids.add(int(stat.parent.name))
    return pids


def produce(
    store: str,
    folder: Path,
    collection: str,
    function: str,
    count: int,
    first: int = 0,
    batch: int = 50,
    prefix: str = "k",
    pause: float = 0.0,
) -> subprocess.Popen[bytes]:
    """Start the producer process (keys PREFIX000000, PREFIX000001, ...), `pause` seconds
    between two batches."""
    argv = [sys.executable, str(HERE / "producer.py"), store, str(folder), collection, function]
    argv += [str(first), str(count), str(batch), prefix]
    env = environment(store, folder, CHAOS_PAUSE=str(pause))
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)


def rows(store: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows of one statement (no parameters), committed, on a fresh connection."""
    if store.startswith("sqlite"):
        conn = sqlite3.connect(store.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
        try:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(store, connect_timeout=5, autocommit=True) as pg:
        result = pg.execute(sql.encode())
        return result.fetchall() if result.description else []


def unsettled(store: str) -> int:
    """Deliveries still pending or running."""
    sql = "SELECT count(*) FROM oncefire_deliveries WHERE state IN ('pending', 'running')"
    return int(rows(store, sql)[0][0])


def facts(store: str) -> StoreFacts:
    """The store's end state for the checker."""
    deliveries = {
        (function, source.split("/", 1)[1]): Delivery(state, attempts, error)
        for function, source, state, attempts, error in rows(
            store,
            "SELECT d.function, e.source, d.state, d.attempt, d.error FROM oncefire_deliveries d"
            " JOIN oncefire_events e ON e.id = d.event_id",
        )
    }
    committed = Counter(
        json.loads(data)["key"] if isinstance(data, str) else data["key"]
        for (data,) in rows(
            store, "SELECT data FROM oncefire_documents WHERE collection = 'effects'"
        )
    )
    return StoreFacts(deliveries, dict(committed))


def outcomes(store: str, function: str) -> Counter[str]:
    """Attempt outcomes of one function."""
    sql = f"SELECT outcome FROM oncefire_attempts WHERE function = '{function}'"
    return Counter(str(o) for (o,) in rows(store, sql))


def verdict(store: str, folder: Path) -> Report:
    """Check the ledger against the store."""
    return check(ledger.read(folder), facts(store))
