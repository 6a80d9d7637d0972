"""Issue 11 point 17: the summary drain() returns counts what the store recorded (a result
whose lease was lost, or a record the store refused, is not a success), and `App.db` is made
once however many threads ask for it first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App, RetryPolicy, documents
from oncefire.errors import StoreError
from oncefire.events import Event
from oncefire.stores.base import Ending, Lease
from oncefire.testing import TestClock

WAIT = 10.0
LEASE = 30.0


def test_a_success_whose_lease_was_lost_is_not_counted_by_drain(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    first, second = make_app(concurrency=1), make_app()  # first takes nothing more meanwhile
    started, gate = threading.Event(), threading.Event()
    runs: list[str] = []

    def slow(event: Event) -> None:
        runs.append(event.id)
        if len(runs) == 1:  # the first run stalls past its lease
            started.set()
            assert gate.wait(WAIT)

    for app in (first, second):
        app.on_message("t", name="slow", retry_policy=RetryPolicy(first_delay=0.0))(slow)
    first.publish("t", {})
    summaries: list[Any] = []
    drained = threading.Thread(target=lambda: summaries.append(first.drain()))
    drained.start()
    assert started.wait(WAIT)
    clock.advance(LEASE + 1)
    # Rescued (crashed) and run again here.
    assert second.drain().outcomes == {"crashed": 1, "succeeded": 1}
    gate.set()
    drained.join(WAIT)
    (summary,) = summaries
    assert summary["succeeded"] == 0  # its success came after the lease was lost
    assert summary.attempts == 0


def test_a_record_the_store_refused_counts_as_permanent_not_as_a_failure(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.on_message("t")
    def mixed(event: Event) -> None:
        if event.data.data.get("fail"):
            raise RuntimeError("unrecordable")

    store: Any = app.store
    real_retry = store.retry

    def refusing_retry(lease: Lease, result: Ending, run_at: float) -> bool:
        if "unrecordable" in (result.error or ""):
            raise StoreError("The store refused this record.")
        return bool(real_retry(lease, result, run_at))

    monkeypatch.setattr(store, "retry", refusing_retry)
    for data in ({}, {"fail": True}, {}):
        app.publish("t", data)
    summary = app.drain()
    assert summary.outcomes == {"succeeded": 2, "permanent": 1}  # it is a dead letter now
    assert app.dead_letters.count() == 1


def test_app_db_is_made_once_when_threads_ask_for_it_first(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    real = documents.Database
    barrier = threading.Barrier(8)

    def slow_database(*args: Any) -> Any:
        made.append(args)
        time.sleep(0.05)  # widens the window in which an unlocked check would let others in
        return real(*args)

    monkeypatch.setattr("oncefire.engine.runtime.Database", slow_database)
    seen: list[object] = []

    def first_use() -> None:
        barrier.wait(WAIT)
        seen.append(app.db)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert len(made) == 1
    assert len(seen) == 8 and all(db is seen[0] for db in seen)
