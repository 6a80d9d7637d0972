"""app.dead_letters: list (filters, pages), get, count, replay, dismiss and their _all forms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oncefire import App, ConfigError, DeadLetterNotFoundError, RetryPolicy
from oncefire.events import Event
from oncefire.testing import TestClock


class Gateway:
    """Fails while `is_down`; records every call."""

    def __init__(self) -> None:
        self.is_down = True
        self.calls: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.calls.append(event)
        if self.is_down:
            raise ConnectionError(f"gateway down for {event.source}")


def setup(app: App, **options: object) -> tuple[Gateway, Gateway]:
    """`charge` (orders) and `ship` (shipments) that fail straight into the queue."""
    options.setdefault("retry", False)
    charge, ship = Gateway(), Gateway()
    app.on_document_created("orders/{o}", name="charge", **options)(charge)
    app.on_document_created("shipments/{s}", name="ship", **options)(ship)
    return charge, ship


def bury(app: App, clock: TestClock, *paths: str) -> None:
    """Write each path and drain, one second apart."""
    for path in paths:
        app.db.document(path).set({"path": path})
        app.drain()
        clock.advance(1)


def test_a_dead_letter_carries_its_event_and_error(app: App, clock: TestClock) -> None:
    charge, _ = setup(app)
    bury(app, clock, "orders/o1")
    [letter] = app.dead_letters.list()
    event = charge.calls[0]
    assert letter.function == "charge"
    assert letter.event_id == event.id
    assert letter.event_type == "document.created"
    assert letter.source == "orders/o1"
    assert letter.attempts == 1
    assert (letter.error or "").startswith("ConnectionError: gateway down for orders/o1")
    assert letter.failed_at == datetime.fromtimestamp(clock.now() - 1, UTC)
    assert letter.payload["after"]["data"] == {"path": "orders/o1"}
    assert not letter.truncated
    assert app.dead_letters.get(letter.id) == letter
    assert letter.to_dict()["failed_at"] == letter.failed_at.isoformat()


def test_list_is_newest_first_and_filters_by_function_error_and_time(
    app: App, clock: TestClock
) -> None:
    setup(app)
    start = clock.now()
    bury(app, clock, "orders/o1", "shipments/s1", "orders/o2", "orders/o3")
    sources = [d.source for d in app.dead_letters.list()]
    assert sources == ["orders/o3", "orders/o2", "shipments/s1", "orders/o1"]
    assert [d.source for d in app.dead_letters.list("ship")] == ["shipments/s1"]
    by_error = app.dead_letters.list(error_contains="orders/o2")
    assert [d.source for d in by_error] == ["orders/o2"]
    window = app.dead_letters.list(since=start + 1, until=start + 3)
    assert [d.source for d in window] == ["orders/o2", "shipments/s1"]
    since_dt = datetime.fromtimestamp(start + 3, UTC)
    assert [d.source for d in app.dead_letters.list(since=since_dt)] == ["orders/o3"]
    assert app.dead_letters.list("nobody") == []


def test_list_pages_with_before(app: App, clock: TestClock) -> None:
    setup(app)
    bury(app, clock, *(f"orders/o{n}" for n in range(5)))
    first = app.dead_letters.list(limit=2)
    second = app.dead_letters.list(limit=2, before=first[-1].id)
    third = app.dead_letters.list(limit=2, before=second[-1].id)
    pages = [[d.source for d in page] for page in (first, second, third)]
    assert pages == [["orders/o4", "orders/o3"], ["orders/o2", "orders/o1"], ["orders/o0"]]


@pytest.mark.parametrize("limit", [0, 1001])
def test_list_refuses_a_bad_limit(app: App, limit: int) -> None:
    with pytest.raises(ConfigError):
        app.dead_letters.list(limit=limit)


def test_list_refuses_naive_datetimes(app: App) -> None:
    with pytest.raises(ConfigError, match="timezone"):
        app.dead_letters.list(since=datetime(2030, 1, 1))


def test_count_by_function_and_error(app: App, clock: TestClock) -> None:
    setup(app)
    bury(app, clock, "orders/o1", "orders/o2", "shipments/s1")
    assert app.dead_letters.count() == 3
    assert app.dead_letters.count("charge") == 2
    assert app.dead_letters.count(error_contains="shipments") == 1
    assert app.dead_letters.count("ship", error_contains="orders") == 0


def test_get_of_an_unknown_id_raises(app: App) -> None:
    with pytest.raises(DeadLetterNotFoundError, match="never existed"):
        app.dead_letters.get(12345)


def test_replay_runs_the_same_delivery_again_at_attempt_one_with_the_original_payload(
    app: App, clock: TestClock
) -> None:
    charge, _ = setup(app, retry=True, retry_policy=RetryPolicy(max_attempts=2))
    app.db.document("orders/o1").set({"amount": 500})
    app.drain()
    clock.advance(60)
    app.drain()
    [letter] = app.dead_letters.list()
    assert letter.attempts == 2
    app.db.document("orders/o1").set({"amount": 999})  # the document moved on meanwhile
    charge.is_down = False
    app.dead_letters.replay(letter.id)
    assert app.dead_letters.count() == 0
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.get(letter.id)
    app.drain()
    replayed = charge.calls[2]
    assert replayed.id == letter.event_id
    assert replayed.attempt == 1
    assert replayed.data.to_dict() == {"amount": 500}
    states = app.store.delivery_states(letter.event_id)
    assert states == [("charge", "succeeded", 1)]  # the same delivery, not a copy


def test_a_replayed_delivery_that_fails_again_returns_after_its_attempts(
    app: App, clock: TestClock
) -> None:
    charge, _ = setup(app, retry=True, retry_policy=RetryPolicy(max_attempts=2))
    app.db.document("orders/o1").set({"amount": 500})
    app.drain()
    clock.advance(60)
    app.drain()
    [letter] = app.dead_letters.list()
    app.dead_letters.replay(letter.id)
    app.drain()
    assert app.dead_letters.count() == 0  # attempt 1 of the replay failed: pending again
    clock.advance(60)
    app.drain()
    [again] = app.dead_letters.list()
    assert again.id == letter.id
    assert again.attempts == 2
    assert [e.attempt for e in charge.calls] == [1, 2, 1, 2]
    numbers = [a["number"] for a in app.store.attempts(letter.event_id)]
    assert numbers == [1, 2, 1, 2]


def test_dismiss_deletes_the_dead_letter_so_it_never_runs(app: App, clock: TestClock) -> None:
    charge, _ = setup(app)
    bury(app, clock, "orders/o1")
    [letter] = app.dead_letters.list()
    app.dead_letters.dismiss(letter.id)
    assert app.dead_letters.count() == 0
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.get(letter.id)
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.dismiss(letter.id)
    with pytest.raises(DeadLetterNotFoundError):
        app.dead_letters.replay(letter.id)
    charge.is_down = False
    clock.advance(86400)
    assert app.drain().attempts == 0
    assert app.store.delivery_states(letter.event_id) == []
    assert len(charge.calls) == 1


def test_replay_and_dismiss_touch_only_dead_deliveries(app: App, clock: TestClock) -> None:
    charge, _ = setup(app, retry=True)
    app.db.document("orders/o1").set({"n": 1})
    app.drain()  # failed once: pending, not dead
    [event] = charge.calls
    deliveries = app.store.delivery_states(event.id)
    assert deliveries == [("charge", "pending", 1)]
    assert app.dead_letters.replay_all() == 0
    assert app.dead_letters.dismiss_all() == 0
    assert app.store.delivery_states(event.id) == deliveries


def test_replay_all_and_dismiss_all_take_filters(app: App, clock: TestClock) -> None:
    charge, ship = setup(app)
    bury(app, clock, "orders/o1", "orders/o2", "shipments/s1", "shipments/s2")
    charge.is_down = ship.is_down = False
    assert app.dead_letters.replay_all("charge", error_contains="orders/o1") == 1
    assert app.dead_letters.count() == 3
    assert app.dead_letters.dismiss_all("ship") == 2
    assert app.dead_letters.count() == 1
    assert app.dead_letters.replay_all() == 1
    assert app.dead_letters.count() == 0
    app.drain()
    assert sorted(e.source for e in charge.calls[2:]) == ["orders/o1", "orders/o2"]
    assert len(ship.calls) == 2  # dismissed: never ran again


def test_dismiss_all_without_filters_empties_the_queue(app: App, clock: TestClock) -> None:
    setup(app)
    bury(app, clock, "orders/o1", "shipments/s1")
    assert app.dead_letters.dismiss_all() == 2
    assert app.dead_letters.list() == []
