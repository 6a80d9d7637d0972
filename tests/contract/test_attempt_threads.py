"""A worker's attempt threads (flights.AttemptThreads): as many as its attempts in flight need,
never more than its concurrency, and none left behind once it shuts down or is dropped."""

from __future__ import annotations

import gc
import threading
import time

from oncefire import App
from oncefire.events import Event
from oncefire.flights import Flights
from oncefire.worker import Worker

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
    # Flights of one slot given two attempts at once (a worker never does: its free slots
    # bound what it starts): one thread runs them one after the other.
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
    flights = Flights(app.runtime, 1)
    try:
        for item in sorted(app.store.with_events(taken), key=lambda i: i.lease.delivery_id):
            flights.start(item)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            flights.collect(0.05)
        assert [n for n, _ in ran] == [0], "the second waits for the only thread"
        release.set()
        deadline = time.monotonic() + WAIT
        while flights.running and time.monotonic() < deadline:
            flights.collect(0.05)
        assert [n for n, _ in ran] == [0, 1]
        assert len({name for _, name in ran}) == 1
    finally:
        release.set()
        flights.stop()


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
        flights = list(worker.flights.running.values())
        deadline = time.monotonic() + WAIT
        while not all(f.is_done for f in flights) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(f.trigger.name for f in flights if f.is_done) == ["awaited", "plain"]
    finally:
        worker.shutdown()
