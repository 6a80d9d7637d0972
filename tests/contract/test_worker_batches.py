"""A worker claims in batches sized by its attempts' durations, and records a batch's attempts
in the transaction that claims the next one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.worker import PREFETCH, Worker


def test_a_claim_is_the_free_slots_until_durations_are_known(app: App) -> None:
    worker = Worker(app, concurrency=4)
    assert worker.claim_limit() == 4


def test_short_attempts_are_claimed_in_large_batches_up_to_batch_size(app: App) -> None:
    worker = Worker(app, concurrency=4)
    for _ in range(50):
        worker._learn(0.0001)  # 4 slots x 50 ms / 0.1 ms = 2,000 ahead
    assert worker.claim_limit() == worker.batch_size == app.settings.batch_size


def test_a_batch_holds_about_prefetch_seconds_of_work(app: App) -> None:
    worker = Worker(app, concurrency=4)
    for _ in range(200):
        worker._learn(0.01)
    assert worker.claim_limit() == 4 + round(4 * PREFETCH / 0.01)


def test_slow_attempts_are_claimed_one_a_free_slot(app: App) -> None:
    worker = Worker(app, concurrency=4)
    for _ in range(50):
        worker._learn(0.0001)
    for _ in range(200):
        worker._learn(2.0)  # the mean follows a change of workload
    assert worker.claim_limit() == 4


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
    real_batch, real_claim, real_complete_many = store.batch, store.claim, store.complete_many

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
    monkeypatch.setattr(store, "claim", noting("claim", real_claim))
    monkeypatch.setattr(store, "complete_many", noting("complete_many", real_complete_many))

    summary = Worker(app, concurrency=4).drain()

    assert summary["succeeded"] == 300
    # 4 first (no duration known yet), then batches of up to 512: a handful of transactions,
    # each recording the last batch and claiming the next.
    assert len(batches) <= 6, batches
    assert ["complete_many", "claim"] in batches
