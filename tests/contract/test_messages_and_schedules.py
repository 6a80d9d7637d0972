"""Topic messages (publish, on_message, dead-letter topics) and schedules on the app clock."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from oncefire import App, ConfigError, InvalidDocumentError, InvalidPathError, Message
from oncefire.events import Event
from oncefire.testing import TestClock


def test_a_published_message_reaches_its_topics_functions(app: App, clock: TestClock) -> None:
    seen: list[Event] = []

    @app.on_message("payments")
    def on_payment(event: Event) -> None:
        seen.append(event)

    @app.on_message("refunds")
    def on_refund(event: Event) -> None:
        raise AssertionError("wrong topic")

    message_id = app.publish("payments", {"amount": 5}, attributes={"currency": "EUR"})
    assert app.drain()["succeeded"] == 1
    [event] = seen
    assert event.id == message_id
    assert event.type == "message.published"
    assert event.source == "payments"
    message = event.data
    assert isinstance(message, Message)
    assert message.id == message_id
    assert message.topic == "payments"
    assert message.data == message.json == {"amount": 5}
    assert message.attributes == {"currency": "EUR"}
    assert message.publish_time == datetime.fromtimestamp(clock.now(), UTC)


def test_publish_refuses_bad_topics_and_data_and_publishes_nothing(app: App) -> None:
    seen: list[Event] = []

    @app.on_message("payments")
    def on_payment(event: Event) -> None:
        seen.append(event)

    with pytest.raises(InvalidPathError):
        app.publish("a/b", {})
    with pytest.raises(InvalidDocumentError):
        app.publish("payments", {"x": math.nan})
    with pytest.raises(InvalidDocumentError):
        app.publish("payments", {"x": {1, 2}})
    assert app.drain().attempts == 0
    assert seen == []


def test_max_delivery_attempts_bounds_a_topic_function(app: App, clock: TestClock) -> None:
    calls: list[int] = []

    @app.on_message("payments", max_delivery_attempts=2)
    def on_payment(event: Event) -> None:
        calls.append(event.attempt)
        raise ValueError("no")

    app.publish("payments", 1)
    app.drain()
    clock.advance(60)
    app.drain()
    clock.advance(3600)
    app.drain()
    assert calls == [1, 2]
    assert app.dead_letters.count("on_payment") == 1


def test_an_exhausted_message_is_republished_on_its_dead_letter_topic(
    app: App, clock: TestClock
) -> None:
    parked: list[Event] = []

    @app.on_message("payments", retry=False, dead_letter_topic="payments-dlq")
    def on_payment(event: Event) -> None:
        raise ValueError("card declined")

    @app.on_message("payments-dlq")
    def on_parked(event: Event) -> None:
        parked.append(event)

    message_id = app.publish("payments", {"amount": 5}, attributes={"k": "v"})
    app.drain()
    assert app.dead_letters.count() == 0
    [event] = parked
    assert event.id != message_id
    assert event.data.data == {"amount": 5}
    assert event.data.attributes == {
        "k": "v",
        "oncefire.source_topic": "payments",
        "oncefire.source_function": "on_payment",
        "oncefire.source_event": message_id,
    }
    assert app.store.delivery_states(message_id) == [("on_payment", "forwarded", 1)]


def test_a_dead_letter_topic_must_differ_from_the_topic(app: App) -> None:
    with pytest.raises(ConfigError, match="differ"):

        @app.on_message("payments", dead_letter_topic="payments")
        def fn(event: Event) -> None: ...


def test_a_schedule_ticks_on_time_once(app: App, clock: TestClock) -> None:
    ticks: list[Event] = []

    @app.on_schedule("every 5 minutes")
    def report(event: Event) -> None:
        ticks.append(event)

    start = clock.now()  # a multiple of 300 s
    clock.advance(299.999)
    assert app.drain().attempts == 0
    clock.set(start + 300)
    assert app.drain()["succeeded"] == 1
    assert app.drain().attempts == 0
    [tick] = ticks
    assert tick.type == "schedule.tick"
    assert tick.source == "report"
    assert tick.data == {"scheduled_time": start + 300, "schedule": "every 5 minutes"}
    assert tick.time == datetime.fromtimestamp(start + 300, UTC)
    clock.advance(300)
    app.drain()
    assert len(ticks) == 2


def test_missed_ticks_fire_once_not_once_each(app: App, clock: TestClock) -> None:
    ticks: list[Event] = []

    @app.on_schedule("every 1 minute")
    def report(event: Event) -> None:
        ticks.append(event)

    clock.advance(3600)
    app.drain()
    app.drain()
    assert len(ticks) == 1


def test_two_apps_on_one_store_emit_each_tick_once(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    ticks: list[str] = []
    apps = [make_app(), make_app()]
    for app in apps:

        @app.on_schedule("every 5 minutes", name="report")
        def report(event: Event) -> None:
            ticks.append(event.id)

    clock.advance(300)
    for app in apps:
        app.drain()
    assert len(ticks) == 1


@pytest.mark.parametrize("spec", ["every 0 minutes", "every fortnight", "61 * * * *", "0 0 31 2 *"])
def test_a_bad_schedule_is_refused_at_registration(app: App, spec: str) -> None:
    with pytest.raises(ConfigError):

        @app.on_schedule(spec)
        def fn(event: Event) -> None: ...

    assert app.triggers == {}
