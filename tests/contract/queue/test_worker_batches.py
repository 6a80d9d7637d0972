"""A worker leases in batches sized by its attempts' durations, and records a batch's attempts
in the transaction that leases the next one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from oncefire import App
from oncefire.engine.worker import Worker
from oncefire.events import Event


def test_a_second_worker_gets_work_while_the_first_runs_slow_attempts(app: App) -> None:
    release = threading.Event()

    @app.on_message("slow")
    def slow(event: Event) -> None:
        release.wait(30)

    for n in range(6):
        app.publish("slow", {"n": n})
    first, second = Worker(app.runtime, concurrency=2), Worker(app.runtime, concurrency=2)
    for _ in range(50):
        first.attempts.learn(2.0)  # it has seen slow attempts: it must not hoard the backlog
    try:
        assert first.lease_and_start() == 2
        assert second.lease_and_start() == 2
    finally:
        release.set()
        first.shutdown()
        second.shutdown()


def test_a_worker_of_short_attempts_leases_ahead_of_its_slots(app: App) -> None:
    @app.on_message("quick")
    def quick(event: Event) -> None:
        pass

    with app.store.batch():
        for n in range(100):
            app.publish("quick", {"n": n})
    worker = Worker(app.runtime, concurrency=2)
    for _ in range(50):
        worker.attempts.learn(0.0001)
    try:
        assert worker.lease_and_start() == 100  # one transaction for the backlog, not 50
    finally:
        worker.shutdown()


def test_a_worker_whose_attempts_turned_slow_leaves_the_backlog_to_another(app: App) -> None:
    release = threading.Event()

    @app.on_message("slow")
    def slow(event: Event) -> None:
        release.wait(30)

    for n in range(6):
        app.publish("slow", {"n": n})
    first, second = Worker(app.runtime, concurrency=2), Worker(app.runtime, concurrency=2)
    for _ in range(1000):
        first.attempts.learn(0.0001)  # its attempts were short: it would lease ahead ...
    for _ in range(30):
        first.attempts.learn(2.0)  # ... but the last 30 were slow (the mean of all is 58 ms)
    try:
        assert first.lease_and_start() == 2
        assert second.lease_and_start() == 2
    finally:
        release.set()
        first.shutdown()
        second.shutdown()


def test_a_drain_commits_a_transaction_per_batch_not_per_event(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.on_message("t")
    def noop(event: Event) -> None:
        pass

    with app.store.batch():  # one commit for the backlog
        for n in range(300):
            app.publish("t", {"n": n})

    store: Any = app.store
    batches: list[list[str]] = []  # the store calls each outermost batch made
    depth = 0
    real_batch, real_lease, real_complete_many = store.batch, store.take_due, store.complete_many

    @contextmanager
    def counting_batch() -> Iterator[None]:
        nonlocal depth
        if depth == 0:
            batches.append([])
        depth += 1
        try:
            with real_batch():
                yield
        finally:
            depth -= 1

    def noting(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if depth:
                batches[-1].append(name)
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(store, "batch", counting_batch)
    monkeypatch.setattr(store, "take_due", noting("take_due", real_lease))
    monkeypatch.setattr(store, "complete_many", noting("complete_many", real_complete_many))

    summary = Worker(app.runtime, concurrency=4).drain()

    assert summary["succeeded"] == 300
    # 4 first (no duration known yet), then batches of up to 512: a handful of transactions,
    # each recording the last batch and leasing the next (and a few marking a wave of queued
    # deliveries started).
    assert len(batches) <= 8, batches
    assert ["complete_many", "take_due"] in batches


class HalfSeconds:
    """A clock that steps half a second a reading and tells whole seconds as ints (a Clock
    may give ints): a batch's times are then ints and floats mixed."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        self.t += 0.5
        return int(self.t) if self.t.is_integer() else self.t


def test_a_batch_whose_times_mix_ints_and_floats_is_written_in_one(
    make_app: Callable[..., App], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(clock=HalfSeconds())

    @app.on_message("quick")
    def quick(event: Event) -> None:
        pass

    with app.store.batch():
        ids = [app.publish("quick", {"n": n}) for n in range(10)]
    worker = Worker(app.runtime, concurrency=4)
    try:
        summary = worker.drain()
    finally:
        worker.shutdown()
    assert summary.outcomes == {"succeeded": 10}
    finished = [a["finished_at"] for i in ids for a in app.store.attempts(i)]
    assert len(finished) == 10 and all(t >= 1_800_000_000 for t in finished)
    # Not one at a time after the batch's write failed.
    assert "one attempt at a time" not in caplog.text
