"""ordering="document": one document's deliveries run one at a time, in event order, and a
failing one holds back its document only. Time moves only by TestClock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.testing import TestClock


def lease(app: App, worker: str, limit: int = 50) -> list[tuple[str, int]]:
    """Lease what is due, as a worker would; (document, count) of each delivery leased."""
    now = app.clock.now()
    taken = app.store.lease_due(
        worker=worker,
        now=now,
        lease_until=now + 30,
        limit=limit,
        functions=["log"],
        caps={},
    )
    return [(c.event.source, c.event.data["after"]["data"]["n"]) for c in taken]


def register(app: App, body: Callable[[Event], None] | None = None, **options: object) -> None:
    def log(event: Event) -> None:
        if body is not None:
            body(event)

    app.on_document_written("orders/{o}", ordering="document", **options)(log)


def test_a_lease_takes_only_the_oldest_unfinished_delivery_of_each_document(app: App) -> None:
    register(app)
    for n in range(3):
        app.db.document("orders/a").set({"n": n})
        app.db.document("orders/b").set({"n": n})
    first = lease(app, "w1")
    assert sorted(first) == [("orders/a", 0), ("orders/b", 0)]
    # Another worker finds nothing: the heads are running, the rest wait behind them.
    assert lease(app, "w2") == []


def test_unordered_function_leases_every_due_delivery(app: App) -> None:
    app.on_document_written("orders/{o}")(lambda event: None)
    for n in range(3):
        app.db.document("orders/a").set({"n": n})
    now = app.clock.now()
    taken = app.store.lease_due(
        worker="w", now=now, lease_until=now + 30, limit=10, functions=["<lambda>"], caps={}
    )
    assert len(taken) == 3


def test_deliveries_of_one_document_run_in_event_order(app: App) -> None:
    seen: list[tuple[str, int]] = []
    register(app, lambda e: seen.append((e.source, e.data.after.to_dict()["n"])))
    for n in range(5):
        for doc in ("a", "b", "c"):
            app.db.document(f"orders/{doc}").set({"n": n})
    assert app.drain().attempts == 15
    for doc in ("a", "b", "c"):
        assert [n for source, n in seen if source == f"orders/{doc}"] == [0, 1, 2, 3, 4]


def test_a_failing_delivery_holds_back_its_document_only(app: App, clock: TestClock) -> None:
    seen: list[tuple[str, int]] = []
    failed: set[str] = set()

    def body(event: Event) -> None:
        n = event.data.after.to_dict()["n"]
        if event.source == "orders/a" and n == 1 and event.id not in failed:
            failed.add(event.id)
            raise ValueError("declined once")
        seen.append((event.source, n))

    register(app, body)
    for n in range(3):
        app.db.document("orders/a").set({"n": n})
        app.db.document("orders/b").set({"n": n})
    app.drain()
    assert [n for s, n in seen if s == "orders/b"] == [0, 1, 2]
    assert [n for s, n in seen if s == "orders/a"] == [0]  # 1 waits for its retry, 2 behind it
    clock.advance(60)
    app.drain()
    assert [n for s, n in seen if s == "orders/a"] == [0, 1, 2]


def test_a_dead_letter_lets_its_key_go_on_and_names_the_events_that_ran_past_it(
    app: App,
) -> None:
    seen: list[int] = []
    later: list[str] = []

    def body(event: Event) -> None:
        n = event.data.after.to_dict()["n"]
        if n == 0:
            raise ValueError("never")
        seen.append(n)
        later.append(event.id)

    register(app, body, retry=False)
    for n in range(3):
        app.db.document("orders/a").set({"n": n})
    app.drain()
    assert seen == [1, 2]
    (dead,) = app.dead_letters.list()
    assert "ordering key orders/a: later events run past this dead letter" in (dead.error or "")
    for event_id in later:
        assert event_id in (dead.error or "")


def test_a_writer_that_does_not_register_the_function_still_orders_its_events(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    worker = make_app()
    register(worker)
    assert worker.store  # registered in the store before the writer writes
    writer = make_app()  # the CLI, or another service: no functions of its own
    for n in range(3):
        writer.db.document("orders/a").set({"n": n})
    assert lease(worker, "w1") == [("orders/a", 0)]


def test_replay_of_a_dead_letter_runs_it_before_later_events_not_yet_run(app: App) -> None:
    seen: list[int] = []
    fail = {0}

    def body(event: Event) -> None:
        n = event.data.after.to_dict()["n"]
        if n in fail:
            raise ValueError("no")
        seen.append(n)

    register(app, body, retry=False)
    app.db.document("orders/a").set({"n": 0})
    app.drain()
    (dead,) = app.dead_letters.list()
    fail.clear()
    app.db.document("orders/a").set({"n": 1})
    app.dead_letters.replay(dead.id)
    app.drain()
    assert seen == [0, 1]


def test_ordering_takes_only_document() -> None:
    with pytest.raises(ConfigError, match='ordering="document"'):
        App("sqlite://:memory:").on_document_written("orders/{o}", ordering="customer")
