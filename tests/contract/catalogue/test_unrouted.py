"""No event is ever dropped: an event no function takes is kept as unrouted, counted, and
delivered to the first function registered later whose trigger matches it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from oncefire import App
from oncefire.engine import routing as keeper
from oncefire.engine.routing import route_new
from oncefire.engine.worker import Worker
from oncefire.events import Event, StoredEvent
from oncefire.testing import TestClock


def test_message_published_before_its_function_is_delivered_later(
    make_app: Callable[..., App],
) -> None:
    writer = make_app()
    message_id = writer.publish("emails", {"to": "a@b"})
    assert writer.unrouted_count() == 1
    seen: list[str] = []
    app = make_app()

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.id)

    app.drain()
    assert seen == [message_id]
    assert app.unrouted_count() == 0


def test_document_written_before_its_function_is_delivered_later(
    make_app: Callable[..., App],
) -> None:
    writer = make_app()
    writer.db.document("orders/o1").set({"amount": 5})
    writer.db.document("invoices/i1").set({"amount": 7})
    assert writer.unrouted_count() == 2
    seen: list[str] = []
    app = make_app()

    @app.on_document_created("orders/{orderId}")
    def charge(event: Event) -> None:
        seen.append(event.params["orderId"])

    app.drain()
    app.drain()  # routed once: a second worker finds nothing more
    assert seen == ["o1"]
    assert app.unrouted_count() == 1  # invoices/i1: still waiting for its function


def test_two_registrations_route_an_unrouted_event_once(
    make_app: Callable[..., App],
) -> None:
    make_app().publish("emails", {"to": "a@b"})
    seen: list[str] = []
    apps = [make_app(), make_app()]
    for app in apps:

        @app.on_message("emails", name="send")
        def send(event: Event) -> None:
            seen.append(event.id)

        app.store  # noqa: B018 registers the function

    for app in apps:
        app.drain()
    assert len(seen) == 1


def test_unrouted_events_past_the_retention_are_purged_not_delivered(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    writer = make_app(unrouted_retention=3600.0)
    writer.publish("emails", {"to": "old"})
    clock.advance(7200)
    recent = writer.publish("emails", {"to": "new"})
    seen: list[str] = []
    app = make_app(unrouted_retention=3600.0)

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.id)

    app.drain()
    assert seen == [recent]
    assert app.unrouted_count() == 0


def test_new_events_are_routed_by_the_workers(make_app: Callable[..., App]) -> None:
    """What a table trigger inserts (an event marked 'new', no delivery) the workers route:
    to its functions, or to the unrouted events when none takes it."""
    seen: list[str] = []
    app = make_app()

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.source)

    now = app.clock.now()
    events = [
        StoredEvent(f"0000000000000000000000000{i}", "message.published", topic, now, {}, 2)
        for i, topic in enumerate(("emails", "other"))
    ]
    with app.store.transaction() as tx:
        for event in events:
            assert tx.append(event, [], now)
            assert tx.mark_routed(event.id, "unrouted", "new")  # as a table trigger writes it
    assert app.unrouted_count() == 0
    app.drain()
    assert seen == ["emails"]
    assert app.unrouted_count() == 1
    assert route_new(app.runtime) == 0  # nothing left to route


def test_worker_reopens_a_deleted_sqlite_file(sqlite_url: str, clock: TestClock) -> None:
    seen: list[str] = []
    app = App(sqlite_url, clock=clock)

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.id)

    worker = Worker(app.runtime)
    worker.drain()
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.remove(f"{path}{suffix}")
    writer = App(sqlite_url, clock=clock)  # a CLI write after the file was deleted
    message_id = writer.publish("emails", {"to": "a@b"})
    writer.close()
    worker.drain()
    assert seen == [message_id]
    app.close()


def test_a_long_backlog_of_unrouted_events_is_offered_over_several_sweeps(
    make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper, "BATCH", 2)
    monkeypatch.setattr(keeper, "MOST_BATCHES", 1)
    writer = make_app()
    with writer.db.transaction() as tx:
        for i in range(5):
            tx.publish("emails", {"n": i})
    seen: list[int] = []
    app = make_app()

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.data.data["n"])

    worker = Worker(app.runtime)
    worker.drain()
    assert len(seen) == 2  # one batch a sweep: a sweep stays short
    for _ in range(3):
        worker.maintain(force=True)
        worker.drain()
    assert sorted(seen) == [0, 1, 2, 3, 4]
