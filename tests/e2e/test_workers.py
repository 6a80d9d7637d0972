"""Real `oncefire worker` processes on a real store (a SQLite file or PostgreSQL), sent real
signals.

Short leases keep these tests quick: a delivery whose worker died is rescued within
lease + sweep (2.5 s here). Every wait polls the store or the processes with a deadline.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oncefire import App
from oncefire.engine import worker as worker_module
from oncefire.events import Event
from oncefire.stores.sqlite import connections as sqlite_store
from oncefire.testing import TestClock
from tests.stopping import stop_outside_a_write

pytestmark = pytest.mark.e2e

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")
APP = Path(__file__).parent / "apps" / "crashy.py"
LEASE = 2.0
SWEEP = 0.5
FAST = {
    "ONCEFIRE_LEASE": str(LEASE),
    "ONCEFIRE_RENEW_EVERY": "0.5",
    "ONCEFIRE_SWEEP_EVERY": str(SWEEP),
    "ONCEFIRE_SHUTDOWN_GRACE": "5",
}
DEADLINE = 30.0  # longest any single wait below may take


def wait_for(what: str, check: Callable[[], object], timeout: float = DEADLINE) -> object:
    """Poll check() until it returns something truthy; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def is_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return False


class Workers:
    """One `oncefire worker` supervisor, its log, and the test's view of its store."""

    def __init__(
        self, tmp: Path, store_url: str, processes: int, env: dict[str, str], *args: str
    ) -> None:
        self.tmp = tmp
        self.marks = tmp / "marks"
        (self.marks / "running").mkdir(parents=True, exist_ok=True)
        self.store_url = store_url
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        environment.update(env, ONCEFIRE_STORE=self.store_url, E2E_DIR=str(self.marks))
        self.log_path = tmp / "worker.log"
        self.processes = processes
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [ONCEFIRE, "worker", str(APP), "--processes", str(processes), *args],
                env=environment,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.app = App(self.store_url)
        wait_for(
            f"{processes} worker(s) serving", lambda: self.log().count(" serving ") >= processes
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def children(self) -> list[int]:
        """The pids of the worker processes alive now."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except (FileNotFoundError, ProcessLookupError):
                    continue
                if int(fields[1]) == self.proc.pid and fields[0] != "Z":
                    pids.append(int(entry.name))
        return pids

    def started(self, event_id: str, attempt: int, what: str = "start") -> int:
        """Wait until that attempt reached `what`; the pid of the process that ran it."""
        path = self.marks / f"{what}-{event_id}-{attempt}"
        wait_for(f"{what} of attempt {attempt}", lambda: path.exists() and path.read_text())
        return int(path.read_text())

    def state(self, event_id: str) -> tuple[str, int]:
        """(state, attempt) of the event's only delivery."""
        ((_, state, attempt),) = self.app.store.delivery_states(event_id)
        return state, attempt

    def settled(self, event_id: str, state: str = "succeeded") -> list[dict[str, object]]:
        """Wait until the delivery reaches `state`; its attempts, oldest first."""
        wait_for(f"event {event_id} to be {state}", lambda: self.state(event_id)[0] == state)
        return self.app.store.attempts(event_id)

    def running(self) -> int:
        """Deliveries in the running state now, whatever their lease, as `stats` counts them."""
        return sum(c.states.get("running", 0) for c in self.app.store.counts(0.0).values())

    def stop(self, signum: int = signal.SIGTERM, timeout: float = DEADLINE) -> int:
        """Signal the supervisor and wait for it to exit; its exit status."""
        self.proc.send_signal(signum)
        return self.proc.wait(timeout)

    def close(self) -> None:
        for pid in self.children():
            os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.app.close()


SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


class Leases:
    """One read of the workers that hold a function's running deliveries with a live lease."""

    def __init__(self, store_url: str) -> None:
        self.is_sqlite = store_url.startswith("sqlite")
        if self.is_sqlite:
            self.db: Any = sqlite3.connect(store_url.removeprefix("sqlite:///"), timeout=30)
        else:
            import psycopg

            self.db = psycopg.connect(store_url, autocommit=True)

    def holders(self, function: str) -> list[str]:
        """The worker recorded on each such delivery (PostgreSQL leases are on its clock)."""
        if self.is_sqlite:
            sql = "SELECT worker FROM oncefire_deliveries WHERE function = ?"
            sql += " AND state = 'running' AND lease_until > ?"
            rows = self.db.execute(sql, (function, time.time())).fetchall()
        else:
            sql = "SELECT worker FROM oncefire_deliveries WHERE function = %s"
            sql += " AND state = 'running' AND lease_until > extract(epoch FROM clock_timestamp())"
            rows = self.db.execute(sql, (function,)).fetchall()
        return [str(worker) for (worker,) in rows]

    def close(self) -> None:
        self.db.close()


def pid_of(worker: str) -> int:
    """The pid in a worker's name (host:pid:suffix)."""
    return int(worker.rsplit(":", 2)[1])


@pytest.fixture
def start(tmp_path: Path, store_url: str) -> Iterator[Callable[..., Workers]]:
    """Start `oncefire worker` on a fresh store of each kind; everything is killed at the end."""
    started: list[Workers] = []

    def run(processes: int, env: dict[str, str] = FAST, *args: str) -> Workers:
        workers = Workers(tmp_path, store_url, processes, env, *args)
        started.append(workers)
        return workers

    yield run
    for workers in started:
        workers.close()


@pytest.mark.slow
def test_sigkill_mid_attempt_completes_elsewhere_with_a_crashed_attempt(
    start: Callable[..., Workers],
) -> None:
    workers = start(2)
    event_id = workers.app.publish("slow", {"sleep": 60})
    victim = workers.started(event_id, 1)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()

    rescuer = workers.started(event_id, 2)
    recovery = time.monotonic() - killed_at
    attempts = workers.settled(event_id)

    assert [a["outcome"] for a in attempts] == ["crashed", "succeeded"]
    assert f":{victim}:" in str(attempts[0]["worker"])
    assert "lease ran out during attempt 1" in str(attempts[0]["error"])
    assert rescuer != victim and f":{victim}:" not in str(attempts[1]["worker"])
    assert recovery < LEASE + SWEEP + 3.0, f"recovered after {recovery:.1f} s"
    # The supervisor replaced the killed process.
    wait_for("a replacement process", lambda: len(workers.children()) == 2)
    assert "was killed by SIGKILL" in workers.log()
    assert workers.stop() == 0


@pytest.mark.slow
@SQLITE_ONLY  # the timeouts are the worker's own: no store decides them
def test_timeouts_cancel_async_and_replace_the_process_of_a_stuck_sync_function(
    start: Callable[..., Workers],
) -> None:
    workers = start(1)
    (first,) = workers.children()

    async_id = workers.app.publish("hang-async", {})
    attempts = workers.settled(async_id)
    assert [a["outcome"] for a in attempts] == ["timeout", "succeeded"]
    assert workers.started(async_id, 1) == workers.started(async_id, 2) == first
    assert workers.children() == [first], "a cancelled coroutine needs no new process"

    sync_id = workers.app.publish("hang", {})
    attempts = workers.settled(sync_id)
    assert [a["outcome"] for a in attempts] == ["timeout", "succeeded"]
    assert attempts[0]["error"] == "timed out after 1 s"
    started_at, finished_at = attempts[0]["started_at"], attempts[0]["finished_at"]
    assert isinstance(started_at, float) and isinstance(finished_at, float)
    assert 1.0 <= finished_at - started_at < 3.0
    assert workers.started(sync_id, 1) == first
    replacement = workers.started(sync_id, 2)
    assert replacement != first and not is_alive(first)
    assert "ended itself after an attempt it could not stop" in workers.log()
    assert workers.stop() == 0


@pytest.mark.slow
def test_a_function_that_kills_its_process_is_a_dead_letter_after_exactly_six_attempts(
    start: Callable[..., Workers],
) -> None:
    workers = start(
        2,
        {
            **FAST,
            "ONCEFIRE_LEASE": "1",
            "ONCEFIRE_RENEW_EVERY": "0.3",
            "ONCEFIRE_SWEEP_EVERY": "0.3",
        },
    )
    event_id = workers.app.publish("poison", {"n": 1})
    attempts = workers.settled(event_id, "dead")

    assert [a["outcome"] for a in attempts] == ["crashed"] * 6
    (letter,) = workers.app.dead_letters.list(function="poison")
    assert letter.event_id == event_id and letter.attempts == 6
    assert "lease ran out during attempt 6" in (letter.error or "")
    pids = {workers.started(event_id, n) for n in range(1, 7)}
    assert len(pids) == 6, "each attempt ran in a fresh process"
    assert workers.log().count("exited with status 1") >= 6
    wait_for("both processes back", lambda: len(workers.children()) == 2)
    assert workers.stop() == 0


@pytest.mark.slow
def test_max_instances_holds_across_six_processes_and_a_sigkill_leaks_no_slot(
    start: Callable[..., Workers],
) -> None:
    workers = start(6)
    running_dir = workers.marks / "running"
    samples: list[tuple[float, int, int]] = []  # (time, leased in the store, running in fact)
    done = threading.Event()

    def sample() -> None:
        leases = Leases(workers.store_url)
        try:
            while not done.is_set():
                # A rescuer re-leases a dead worker's deliveries to itself for a moment, to
                # charge or hand them back; they keep the dead worker's name and never run
                # under that lease, so they are not counted. A lease counts them (its check is
                # stricter).
                holders = leases.holders("capped")
                in_store = sum(is_alive(pid_of(worker)) for worker in holders)
                in_fact = sum(is_alive(int(p.name.split("-")[0])) for p in running_dir.iterdir())
                samples.append((time.monotonic(), in_store, in_fact))
                time.sleep(0.01)
        finally:
            leases.close()

    sampler = threading.Thread(target=sample)
    ids = [workers.app.publish("capped", {"n": n}) for n in range(16)]
    sampler.start()
    try:
        wait_for("two running at once", lambda: samples and samples[-1][2] >= 2)
        victim_file = next(iter(running_dir.iterdir()))
        victim, victim_event = victim_file.name.split("-", 1)
        os.kill(int(victim), signal.SIGKILL)
        killed_at = time.monotonic()
        for event_id in ids:
            workers.settled(event_id)
    finally:
        done.set()
        sampler.join()

    assert max(s[1] for s in samples) == 2, "the store never had more than 2 running"
    assert max(s[2] for s in samples) == 2, "never more than 2 executions at once"
    # Once the dead process's lease ran out its slot was used again: no slot leaked.
    after = [s for s in samples if s[0] > killed_at + LEASE + SWEEP]
    assert any(s[1] == 2 for s in after), "two ran at once again after the crash"
    outcomes = [a["outcome"] for a in workers.app.store.attempts(victim_event)]
    # Charged if its start was alone or confirmed before the kill; if it started beside
    # another and the kill came first, it was handed back uncharged and ran again alone.
    assert outcomes in (["crashed", "succeeded"], ["succeeded"]), outcomes
    assert workers.stop() == 0


@pytest.mark.slow
def test_a_stopped_process_that_resumes_past_its_lease_changes_nothing(
    start: Callable[..., Workers],
) -> None:
    workers = start(2)
    event_id = workers.app.publish("zombie", {"sleep": 1.0})
    zombie = workers.started(event_id, 1)
    stop_outside_a_write(workers.store_url, zombie)
    try:
        attempts = workers.settled(event_id)
    finally:
        os.kill(zombie, signal.SIGCONT)
    assert [a["outcome"] for a in attempts] == ["crashed", "succeeded"]
    assert workers.started(event_id, 2) != zombie

    # The zombie wakes and its attempt fails late: either its lease renewal is refused first
    # (it learns it lost the delivery) or its write is refused; either way nothing changes.
    assert workers.started(event_id, 1, "end") == zombie
    wait_for(
        "the zombie to learn that its lease is gone",
        lambda: (
            f"attempt 1 of event {event_id}: lease lost, result discarded" in workers.log()
            or "lost the lease of delivery" in workers.log()
        ),
    )
    assert workers.state(event_id) == ("succeeded", 2)
    assert workers.app.store.attempts(event_id) == attempts
    assert is_alive(zombie), "a zombie's refused write is not a reason to die"
    assert workers.stop() == 0


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_lets_attempts_finish_within_the_grace_and_keeps_the_rest_leased(
    start: Callable[..., Workers], signum: int
) -> None:
    workers = start(1, {**FAST, "ONCEFIRE_SHUTDOWN_GRACE": "3"}, "--concurrency", "2")
    short = workers.app.publish("slow", {"sleep": 1.5})
    long = workers.app.publish("slow", {"sleep": 60})
    workers.started(short, 1)
    workers.started(long, 1)
    queued = workers.app.publish("slow", {"sleep": 0})
    children = workers.children()

    # The grace period bounds the shutdown: the command exits while the 60 s attempt still
    # runs (its state below), having let the 1.5 s one finish.
    assert workers.stop(signum) == 0

    assert workers.state(short) == ("succeeded", 1)
    assert [a["outcome"] for a in workers.app.store.attempts(short)] == ["succeeded"]
    # Still running when its process stopped: it keeps its lease (nothing else may run it
    # while its thread might), to be counted as crashed when the lease runs out.
    assert workers.state(long) == ("running", 1)
    assert workers.app.store.attempts(long)[0]["outcome"] is None
    assert workers.state(queued) == ("pending", 0)
    assert "stops with 1 attempt(s) still running" in workers.log()
    assert children and not any(is_alive(pid) for pid in children)


@pytest.mark.slow
def test_an_idle_worker_is_woken_by_a_new_event_not_by_its_poll(
    start: Callable[..., Workers],
) -> None:
    # Its poll interval is longer than the wait for each start (DEADLINE), so an event that
    # starts was noticed by the wake-up (inotify on the WAL, or LISTEN), not by a poll.
    workers = start(1, {**FAST, "ONCEFIRE_POLL_INTERVAL": str(DEADLINE * 4)})
    for _ in range(3):
        time.sleep(0.3)  # idle between events, so each one has to wake the worker
        workers.started(workers.app.publish("slow", {"sleep": 0}), 1)


def test_the_worker_loop_outlives_a_store_that_fails_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # In this process: another connection holds the write lock past a short busy timeout, so
    # the worker's leases fail with StoreError as they would while PostgreSQL restarts.
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 200)
    monkeypatch.setattr(worker_module, "STORE_BACKOFF", 0.1)
    app = App(f"sqlite:///{tmp_path}/outage.db")
    ran: list[str] = []

    @app.on_message("t")
    def record(event: Event) -> None:
        ran.append(event.id)

    event_id = app.publish("t", {})
    locker = sqlite3.connect(tmp_path / "outage.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    worker = worker_module.Worker(app.runtime)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for("a store error", lambda: "trying again" in caplog.text)
        wait_for("a second store error", lambda: caplog.text.count("trying again") >= 2)
        assert thread.is_alive() and ran == []
        locker.execute("ROLLBACK")
        wait_for("the event to run once the store is back", lambda: ran == [event_id])
    finally:
        locker.close()
        worker.stop_requested.set()
        thread.join(DEADLINE)
    assert not thread.is_alive()
    assert app.store.delivery_states(event_id) == [("record", "succeeded", 1)]
    app.close()


def test_a_queued_delivery_whose_renewal_failed_is_not_started(tmp_path: Path) -> None:
    clock = TestClock()
    app = App(f"sqlite:///{tmp_path}/renew.db", clock=clock)
    runs: list[str] = []
    release = threading.Event()

    @app.on_message("t")
    def work(event: Event) -> None:
        runs.append(event.data.data["name"])
        if event.data.data["name"] == "blocker" and event.attempt == 1:
            release.wait(30)

    first, second = (
        worker_module.Worker(app.runtime, concurrency=1),
        worker_module.Worker(app.runtime),
    )
    try:
        app.publish("t", {"name": "warm-up"})  # teaches the worker a short mean duration,
        first.drain()  # so that it leases ahead of its one slot
        app.publish("t", {"name": "blocker"})
        app.publish("t", {"name": "queued"})
        assert first.lease_and_start() == 2  # the blocker runs, "queued" waits for the thread
        assert first.attempts.has_waiting()
        wait_for("the blocker to start", lambda: "blocker" in runs)
        clock.advance(app.settings.lease + 1)  # both leases run out; another worker takes them
        second.rescue()
        second.drain()
        assert runs.count("queued") == 1
        first.renew()  # fails for both: "queued" must never start here
        release.set()
        wait_for(
            "the blocker to end", lambda: all(f.is_done for f in first.attempts.running.values())
        )
        first.collect(1.0)
        first.lease_and_start()
        wait_for(
            "the first worker to settle",
            lambda: all(f.is_done for f in first.attempts.running.values()),
        )
        assert runs.count("queued") == 1, runs
    finally:
        release.set()
        first.shutdown()
        second.shutdown()
        app.close()
