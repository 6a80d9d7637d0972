"""The failure-rate trip of a budget: a function failing past its rate (once it has enough
attempts) is paused with the reason "failure rate" and the budget alert fires once; resume
continues; a healthy function is never tripped. Time moves only by TestClock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.features.alerts import check_alerts
from oncefire.testing import TestClock

TRIP = {"failure_rate": 0.5, "min_attempts": 20}


def publish_many(app: App, topic: str, count: int) -> None:
    with app.db.transaction() as tx:
        for i in range(count):
            tx.publish(topic, {"n": i})


def build(
    make_app: Callable[..., App],
    body: Callable[[Event], None],
    budget: Any = TRIP,
    fired: list[dict[str, Any]] | None = None,
) -> App:
    app = make_app()
    if fired is not None:
        app.alerts.on_budget(fired.append)
    # max_instances keeps each lease small, so the trip is seen within a few attempts.
    app.on_message("payments", budget=budget, max_instances=4, name="charge")(body)
    return app


def poison(event: Event) -> None:
    raise ValueError("card processor down")


def test_a_failing_function_is_paused_by_its_failure_rate_and_alerts_once(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    fired: list[dict[str, Any]] = []
    app = build(make_app, poison, fired=fired)
    publish_many(app, "payments", 1000)
    attempts = app.drain().attempts
    assert 20 <= attempts <= 20 + 4  # min_attempts, plus at most one lease's worth
    row = app.functions.get("charge")
    assert row.paused_at is not None and row.paused_reason == "failure rate"
    assert row.pending == 1000  # kept and visible, none lost
    clock.advance(3600)  # retries are due: a paused function runs nothing
    assert app.drain().attempts == 0
    assert len(fired) == 1
    alert = fired[0]
    assert alert["reason"] == "failure rate" and alert["function"] == "charge"
    # What the trip saw: attempts still running then end after it.
    assert 20 <= alert["failed"] == alert["attempts"] <= attempts
    assert alert["failure_rate"] == 1.0


def test_a_failure_rate_alert_whose_callback_raises_is_fired_again_at_the_next_check(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    calls: list[dict[str, Any]] = []

    def pager(alert: dict[str, Any]) -> None:
        calls.append(alert)
        if len(calls) == 1:
            raise RuntimeError("pager down")

    app = build(make_app, poison)
    app.alerts.on_budget(pager)
    publish_many(app, "payments", 100)
    attempts = app.drain().attempts
    assert app.functions.get("charge").paused_reason == "failure rate"
    assert len(calls) == 1
    clock.advance(5)
    assert check_alerts(app.runtime, clock.now()) == 1
    assert check_alerts(app.runtime, clock.now()) == 0
    app.drain()
    assert [a["reason"] for a in calls] == ["failure rate"] * 2
    retried = calls[1]  # the trip's figures, read again from the store
    assert retried["at"] == app.functions.get("charge").paused_at == calls[0]["at"]
    assert 20 <= retried["failed"] == retried["attempts"] == attempts
    assert retried["failure_rate"] == 1.0


def test_resume_continues_and_a_function_still_failing_trips_again(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    fired: list[dict[str, Any]] = []
    app = build(make_app, poison, fired=fired)
    publish_many(app, "payments", 200)
    first = app.drain().attempts
    assert app.functions.get("charge").paused_reason == "failure rate"
    # Resumed (a minute later) while still failing: the failures before the trip do not count
    # again, so it runs until min_attempts new attempts show the rate, then trips (and alerts)
    # a second time.
    clock.advance(60)
    assert app.functions.resume("charge")
    second = app.drain().attempts
    assert 20 <= second <= 20 + 4
    assert app.functions.get("charge").paused_reason == "failure rate"
    assert len(fired) == 2

    fixed: list[int] = []
    healed = build(make_app, lambda e: fixed.append(e.data.data["n"]))  # the fix deployed
    assert healed.functions.resume("charge")
    clock.advance(7200)  # the retries of the failed deliveries are due too
    healed.drain()
    assert sorted(fixed) == list(range(200))
    assert healed.functions.get("charge").paused_at is None
    assert len(fired) == 2
    assert first + second + 200 == sum(s.succeeded + s.failed for s in healed.stats().values())


def test_a_healthy_function_is_not_tripped(make_app: Callable[..., App], clock: TestClock) -> None:
    fired: list[dict[str, Any]] = []

    def flaky(event: Event) -> None:
        if event.data.data["n"] % 10 == 0 and event.attempt == 1:
            raise ValueError("timeout talking to the bank")  # 10 % of first attempts

    app = build(make_app, flaky, fired=fired)
    publish_many(app, "payments", 300)
    assert app.drain().attempts == 300
    clock.advance(60)
    assert app.drain().attempts == 30  # the retries succeed
    assert app.functions.get("charge").paused_at is None
    assert fired == []


def test_fewer_attempts_than_min_attempts_never_trip(
    make_app: Callable[..., App],
) -> None:
    app = build(make_app, poison, budget={"failure_rate": 0.5, "min_attempts": 50})
    publish_many(app, "payments", 40)
    assert app.drain().attempts == 40  # every one failed, but 40 < 50
    assert app.functions.get("charge").paused_at is None


def test_the_window_forgets_old_failures(make_app: Callable[..., App], clock: TestClock) -> None:
    budget = {"failure_rate": 0.5, "min_attempts": 20, "window": 600}
    failing = {"on": True}

    def body(event: Event) -> None:
        if failing["on"] and event.data.data["n"] < 15:
            raise ValueError("down")

    app = build(make_app, body, budget=budget)
    publish_many(app, "payments", 15)
    assert app.drain().attempts == 15  # 15 failures, under min_attempts
    clock.advance(601)  # they leave the window; their retries are due and succeed
    failing["on"] = False
    publish_many(app, "payments", 10)
    app.drain()
    assert app.functions.get("charge").paused_at is None


def test_a_dict_budget_keeps_its_invocation_count(make_app: Callable[..., App]) -> None:
    budget = {"invocations": "10/hour", "failure_rate": 0.5}
    app = build(make_app, lambda e: None, budget=budget)
    publish_many(app, "payments", 30)
    assert app.drain().attempts == 10
    assert app.functions.get("charge").paused_reason == "budget"


@pytest.mark.parametrize(
    "budget",
    [
        {},
        {"min_attempts": 10},
        {"failure_rate": 0},
        {"failure_rate": 1},
        {"failure_rate": "half"},
        {"failure_rate": 0.5, "min_attempts": 0},
        {"failure_rate": 0.5, "window": -1},
        {"failure_rate": 0.5, "per": "day"},
        {"invocations": "5/week"},
    ],
)
def test_a_bad_budget_dict_is_a_config_error(budget: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="budget"):
        App("sqlite://:memory:").on_message("payments", budget=budget)(poison)
