"""A worker's attempt threads (attempts.AttemptThreads): as many as its attempts in flight need,
never more than its concurrency, and none left behind once it shuts down or is dropped; short
attempts may wait for a thread, their timeout started when one takes them."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

from oncefire import App
from oncefire.engine.attempts import RunningAttempts
from oncefire.engine.worker import Worker
from oncefire.events import Event

WAIT = 10.0


def attempt_threads() -> list[threading.Thread]:
    """The attempt threads alive in this process."""
    return [t for t in threading.enumerate() if t.name.startswith("oncefire-attempt_")]


def until_gone(before: set[threading.Thread]) -> list[threading.Thread]:
    """Attempt threads not in `before` still alive after waiting up to WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while (left := [t for t in attempt_threads() if t not in before]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.01)
    return left


def test_attempts_run_on_at_most_concurrency_threads_which_end_with_the_worker(
    app: App,
) -> None:
    names: set[str] = set()

    @app.on_message("t")
    def work(event: Event) -> None:
        names.add(threading.current_thread().name)

    before = set(attempt_threads())
    for n in range(40):
        app.publish("t", {"n": n})
    worker = Worker(app.runtime, concurrency=3)
    assert worker.drain()["succeeded"] == 40
    assert names and len(names) <= 3, names
    assert len([t for t in attempt_threads() if t not in before]) <= 3
    worker.shutdown()
    assert until_gone(before) == []


def test_attempt_threads_of_a_worker_dropped_without_shutdown_end(app: App) -> None:
    app.on_message("t")(lambda event: None)
    before = set(attempt_threads())
    app.publish("t", {})
    worker = Worker(app.runtime, concurrency=2)
    assert worker.drain()["succeeded"] == 1
    assert [t for t in attempt_threads() if t not in before]
    del worker
    gc.collect()
    assert until_gone(before) == []


def test_a_thread_runs_one_attempt_at_a_time_and_slow_ones_do_not_hold_up_others(
    app: App,
) -> None:
    release = threading.Event()
    ran: list[str] = []

    @app.on_message("t")
    def work(event: Event) -> None:
        if event.data.data["slow"]:
            release.wait(WAIT)
        ran.append(event.data.data["name"])

    app.publish("t", {"slow": True, "name": "slow"})
    for n in range(5):
        app.publish("t", {"slow": False, "name": f"quick{n}"})
    worker = Worker(app.runtime, concurrency=2)
    try:
        deadline = time.monotonic() + WAIT
        while len(ran) < 5 and time.monotonic() < deadline:
            worker.lease_and_start()
            worker.collect(0.02)
        assert sorted(ran) == [f"quick{n}" for n in range(5)], "one slot stays free"
        release.set()
        assert worker.drain()["succeeded"] == 6
    finally:
        release.set()
        worker.shutdown()


def test_more_attempts_than_threads_wait_for_a_free_one(app: App) -> None:
    # A worker of one slot given two attempts at once: one thread runs them one after the
    # other.
    release = threading.Event()
    ran: list[tuple[int, str]] = []

    @app.on_message("t")
    def work(event: Event) -> None:
        ran.append((event.data.data["n"], threading.current_thread().name))
        if event.data.data["n"] == 0:
            release.wait(WAIT)

    for n in range(2):
        app.publish("t", {"n": n})
    now = app.clock.now()
    taken = app.store.take_due(
        worker="w", now=now, lease_until=now + 30, limit=2, functions=["work"], caps={}
    )
    attempts = RunningAttempts(app.runtime, 1)
    try:
        for item in sorted(app.store.with_events(taken), key=lambda i: i.lease.delivery_id):
            attempts.start(item)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            attempts.collect(0.05)
        assert [n for n, _ in ran] == [0], "the second waits for the only thread"
        release.set()
        deadline = time.monotonic() + WAIT
        while attempts.running and time.monotonic() < deadline:
            attempts.collect(0.05)
        assert [n for n, _ in ran] == [0, 1]
        assert len({name for _, name in ran}) == 1
    finally:
        release.set()
        attempts.stop()


def short_attempts(worker: Worker) -> Worker:
    """A worker that has learned its attempts are short, so they may wait for a thread."""
    for _ in range(20):
        worker.attempts.learn(0.0001)
    return worker


class AtOnce:
    """Counts the attempts running at once, sync and async: the most, and who ran."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.ran: list[str] = []
        self._lock = threading.Lock()

    def enter(self, name: str) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.ran.append(name)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


def test_short_attempts_wait_for_a_thread_their_timeout_started_when_it_takes_them(
    app: App,
) -> None:
    at_once = AtOnce()

    @app.on_message("t", timeout=0.5, retry=False)
    def work(event: Event) -> None:
        at_once.enter("work")
        time.sleep(0.3)
        at_once.leave()

    for n in range(3):
        app.publish("t", {"n": n})
    worker = short_attempts(Worker(app.runtime, concurrency=1))
    try:
        assert worker.lease_and_start() == 3
        # One runs, two wait for the thread: the loop hands none of them over later.
        assert len(worker.attempts.running) == 3 and worker.attempts.has_waiting()
        # The third waits 0.6 s, longer than its timeout, then runs 0.3 s: not a timeout.
        assert worker.drain()["succeeded"] == 3
        assert at_once.most == 1, "never more at once than the worker's concurrency"
    finally:
        worker.shutdown()


def test_no_attempt_waits_for_a_thread_while_an_async_one_runs(app: App) -> None:
    at_once = AtOnce()

    @app.on_message("a")
    async def slow(event: Event) -> None:
        at_once.enter("slow")
        await asyncio.sleep(0.2)
        at_once.leave()

    @app.on_message("s")
    def quick(event: Event) -> None:
        at_once.enter("quick")
        at_once.leave()

    app.publish("a", {})
    for _ in range(3):
        app.publish("s", {})
    worker = short_attempts(Worker(app.runtime, concurrency=1))
    try:
        assert worker.lease_and_start() == 4
        assert len(worker.attempts.running) == 1, "the sync ones wait in the queue"
        assert worker.drain()["succeeded"] == 4
        assert at_once.most == 1 and at_once.ran == ["slow", "quick", "quick", "quick"]
    finally:
        worker.shutdown()


def test_a_flight_says_it_ended_sync_or_async(app: App) -> None:
    @app.on_message("sync")
    def plain(event: Event) -> None: ...

    @app.on_message("async")
    async def awaited(event: Event) -> None: ...

    app.publish("sync", {})
    app.publish("async", {})
    worker = Worker(app.runtime, concurrency=2)
    try:
        assert worker.lease_and_start() == 2
        running = list(worker.attempts.running.values())
        deadline = time.monotonic() + WAIT
        while not all(f.is_done for f in running) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(f.trigger.name for f in running if f.is_done) == ["awaited", "plain"]
    finally:
        worker.shutdown()
