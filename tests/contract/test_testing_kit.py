"""oncefire.testing: TestClock, make_event, deliver and the oncefire_app fixture."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oncefire import App, Change, ConfigError, DocumentSnapshot, Message, testing
from oncefire.events import Event
from oncefire.model import codec
from oncefire.testing import TestClock, deliver, make_event

oncefire_app = testing.oncefire_app  # the fixture, as a user's conftest would import it


def test_test_clock_moves_only_when_told() -> None:
    clock = TestClock(datetime(2030, 1, 1, tzinfo=UTC))
    start = clock.now()
    assert start == datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    assert clock.now() == start
    assert clock.advance(1.5) == start + 1.5
    clock.set(start + 60)
    assert clock.now() == start + 60
    clock.set(datetime(2030, 1, 2, tzinfo=UTC))
    assert clock.now() == start + 86400
    with pytest.raises(ConfigError, match="forward"):
        clock.advance(-1)
    with pytest.raises(ConfigError, match="forward"):
        clock.set(start)


def test_the_fixture_is_an_app_on_a_fresh_sqlite_file_with_a_test_clock(
    oncefire_app: App,
) -> None:
    assert isinstance(oncefire_app.clock, TestClock)
    assert oncefire_app.settings.store.startswith("sqlite:///")
    assert oncefire_app.db.collection("orders").get() == []


def test_make_event_builds_what_a_real_write_builds(app: App, clock: TestClock) -> None:
    seen: list[Event] = []

    @app.on_document_written("orders/{o}")
    def on_write(event: Event) -> None:
        seen.append(event)

    ref = app.db.document("orders/o1")
    ref.set({"v": 1})
    ref.set({"v": 2})
    ref.delete()
    app.drain()
    built = [
        make_event("document.created", "orders/o1", {"v": 1}, time=clock.now()),
        make_event("document.updated", "orders/o1", {"v": 2}, before={"v": 1}, time=clock.now()),
        make_event("document.deleted", "orders/o1", {"v": 2}, time=clock.now()),
    ]
    # The three run concurrently (no ordering asked): compare them by type.
    by_type = {e.type: e.raw for e in seen}
    assert len(seen) == 3
    assert by_type == {b.type: b.data for b in built}


def test_make_event_for_messages_and_ticks() -> None:
    message = make_event("message.published", "payments", {"amount": 5}, attributes={"k": "v"})
    assert message.data == {"data": {"amount": 5}, "attributes": {"k": "v"}}
    tick = make_event("schedule.tick", "report", time=1_800_000_300.0)
    assert tick.data == {"scheduled_time": 1_800_000_300.0, "schedule": "report"}
    fixed = make_event(id="evt-1")
    assert fixed.id == "evt-1"
    assert fixed.time == 1_800_000_000.0
    assert fixed.size == len(codec.dumps(fixed.data).encode())
    with pytest.raises(ConfigError, match="Unknown event type"):
        make_event("document.renamed")


def test_deliver_runs_a_function_on_the_same_event_n_times(app: App) -> None:
    seen: list[Event] = []

    @app.on_document_created("orders/{orderId}")
    def charge(event: Event) -> None:
        seen.append(event)

    event = make_event("document.created", "orders/o7", {"amount": 500})
    summary = deliver(app, "charge", event, times=3)
    assert summary.attempts == 3
    assert summary["succeeded"] == 3
    assert [e.id for e in seen] == [event.id] * 3
    assert [e.attempt for e in seen] == [1, 1, 1]
    assert all(e.params == {"orderId": "o7"} for e in seen)
    assert all(isinstance(e.data, DocumentSnapshot) for e in seen)
    assert seen[0].data.to_dict() == {"amount": 500}


def test_deliver_goes_through_the_full_attempt_path(app: App) -> None:
    @app.on_document_updated("orders/{o}")
    def on_update(event: Event) -> None:
        assert isinstance(event.data, Change)
        raise ValueError(event.data.after.get("status"))

    event = make_event("document.updated", "orders/o1", {"status": "paid"}, before={})
    summary = deliver(app, "on_update", event, times=2)
    assert summary["failed"] == 2
    attempts = app.store.attempts(event.id)
    assert [(a["function"], a["number"], a["outcome"]) for a in attempts] == [
        ("on_update", 1, "failed"),
        ("on_update", 1, "failed"),
    ]
    assert all(a["error"].startswith("ValueError: paid") for a in attempts)
    assert app.store.delivery_states(event.id) == [("on_update", "pending", 1)] * 2


def test_deliver_works_for_messages(app: App) -> None:
    seen: list[Message] = []

    @app.on_message("payments")
    def on_payment(event: Event) -> None:
        seen.append(event.data)

    deliver(app, "on_payment", make_event("message.published", "payments", 5), times=2)
    assert [m.data for m in seen] == [5, 5]


def test_deliver_refuses_an_unknown_function(app: App) -> None:
    with pytest.raises(ConfigError, match="No function named"):
        deliver(app, "nobody", make_event())
