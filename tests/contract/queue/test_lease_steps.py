"""A worker's lease in two steps: take_due inside its turn's transaction, with_events after
the commit. On SQLite the events are read without the write lock; a read that fails hands
the leases back uncounted, so nothing waits for a lease to run out."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from oncefire import App
from oncefire.engine.worker import Worker
from oncefire.errors import StoreError
from oncefire.events import Event
from oncefire.testing import TestClock


def orders(app: App, n: int) -> list[str]:
    seen: list[str] = []

    @app.on_document_created("orders/{o}")
    def note(event: Event) -> None:
        seen.append(event.source)

    with app.store.batch():
        for i in range(n):
            app.db.document(f"orders/o{i}").set({"n": i})
    return seen


def take(app: App) -> list[Any]:
    now = app.clock.now()
    return app.store.take_due(
        worker="w", now=now, lease_until=now + 30, limit=10, functions=["note"], caps={}
    )


def test_with_events_gives_each_taken_delivery_its_event(app: App) -> None:
    orders(app, 3)
    with app.store.batch():
        taken = take(app)
    leased = app.store.with_events(taken)
    assert [c.lease for c in leased] == [t.lease for t in taken]
    assert sorted(c.event.source for c in leased) == ["orders/o0", "orders/o1", "orders/o2"]
    assert all(c.event.id == t.event_id for c, t in zip(leased, taken, strict=True))
    assert [c.attempt for c in leased] == [1, 1, 1]


def test_sqlite_reads_the_taken_events_while_another_connection_holds_the_write_lock(
    sqlite_url: str, clock: TestClock
) -> None:
    app = App(sqlite_url, clock=clock, lease=2.0, renew_every=1.0)  # a busy wait of 0.5 s
    try:
        orders(app, 2)
        taken = take(app)
        other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the lock, held by another writer
        try:
            leased = app.store.with_events(taken)
        finally:
            other.execute("ROLLBACK")
            other.close()
    finally:
        app.close()
    assert sorted(c.event.source for c in leased) == ["orders/o0", "orders/o1"]


def test_a_turn_whose_event_read_fails_hands_its_leases_back_uncounted(
    app: App, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = orders(app, 3)
    worker = Worker(app.runtime)

    def fails(taken: Any) -> Any:
        raise StoreError("The store failed: reading events.")

    monkeypatch.setattr(app.store, "with_events", fails)
    with pytest.raises(StoreError, match="reading events"):
        worker.lease_and_start()
    assert not worker.is_busy
    monkeypatch.undo()
    # Handed back, not left running until their leases run out: leased again at once, and
    # the failed turn's attempt was not counted.
    assert sorted(t.attempt for t in take(app)) == [1, 1, 1]
    clock.advance(31)  # those leases run out in turn; the rescue hands them back
    assert Worker(app.runtime).drain()["succeeded"] == 3
    assert sorted(seen) == ["orders/o0", "orders/o1", "orders/o2"]


def test_sqlite_a_worker_reads_its_turns_events_after_the_turns_commit(
    sqlite_url: str, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(sqlite_url, clock=clock)
    try:
        orders(app, 3)
        store: Any = app.store
        in_batch: list[bool] = []
        real = store.with_events

        def noting(taken: Any) -> Any:
            in_batch.append(store.connections.in_batch)
            return real(taken)

        monkeypatch.setattr(store, "with_events", noting)
        assert Worker(app.runtime).drain()["succeeded"] == 3
    finally:
        app.close()
    assert in_batch and not any(in_batch)
