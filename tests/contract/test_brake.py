"""The brake: a paused function runs nothing and resumes where it stopped; a spent budget
pauses its function and fires the budget alert once (at least once: a callback or webhook
that fails is tried again at the next check of the alerts)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.features.alerts import check_alerts
from oncefire.testing import TestClock


def publish_many(app: App, topic: str, count: int) -> None:
    with app.db.transaction() as tx:
        for i in range(count):
            tx.publish(topic, {"n": i})


def attempts_of(app: App) -> int:
    return sum(s.succeeded + s.failed for s in app.stats().values())


def test_budget_stops_a_storm_of_poison_events(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    fired: list[dict[str, Any]] = []
    app.alerts.on_budget(fired.append)

    @app.on_message("payments", budget="100/day")
    def poison(event: Event) -> None:
        raise ValueError("poison")

    publish_many(app, "payments", 1000)
    assert app.drain().attempts == 100
    clock.advance(3600)  # retries are due, the budget is spent
    assert app.drain().attempts == 0
    row = app.functions.get("poison")
    assert row.paused_at is not None and row.paused_reason == "budget"
    assert row.pending == 1000  # kept, visible, none lost
    assert [a["function"] for a in fired] == ["poison"]
    assert fired[0]["budget"] == "100/day"

    clock.advance(86400)  # the next day: resumed by a person, it continues
    assert app.drain().attempts == 0  # still paused until resumed
    assert app.functions.resume("poison")
    assert app.drain().attempts == 100
    assert len(fired) == 2  # one alert per trip
    assert attempts_of(app) <= 200


def spend(app: App, fired: list[dict[str, Any]] | None = None) -> None:
    """Register `poison` with budget 10/day (and a budget callback), and trip it."""
    if fired is not None:
        app.alerts.on_budget(fired.append)

    @app.on_message("payments", budget="10/day")
    def poison(event: Event) -> None:
        raise ValueError("poison")

    publish_many(app, "payments", 30)
    assert app.drain().attempts == 10
    assert app.functions.get("poison").paused_reason == "budget"


def test_a_budget_trip_calls_the_callback_once(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    fired: list[dict[str, Any]] = []
    spend(app, fired)
    assert [(a["alert"], a["reason"], a["function"], a["used"]) for a in fired] == [
        ("budget", "budget", "poison", 10)
    ]
    for _ in range(3):  # later checks, here or in another worker, do not call it again
        clock.advance(60)
        assert check_alerts(app.runtime, clock.now()) == 0
        app.drain()
    assert len(fired) == 1


def test_a_budget_callback_that_raises_is_called_again_at_the_next_check(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    calls: list[dict[str, Any]] = []

    def pager(alert: dict[str, Any]) -> None:
        calls.append(alert)
        if len(calls) == 1:
            raise RuntimeError("pager down")

    app.alerts.on_budget(pager)
    spend(app)
    assert len(calls) == 1  # it raised: the trip is not marked as alerted
    clock.advance(5)
    assert check_alerts(app.runtime, clock.now()) == 1
    assert len(calls) == 2
    assert calls[1]["function"] == "poison" and calls[1]["used"] == 10
    assert calls[1]["at"] == app.functions.get("poison").paused_at  # the same trip
    assert check_alerts(app.runtime, clock.now()) == 0
    app.drain()  # the worker's own check
    assert len(calls) == 2


@contextmanager
def webhook(statuses: list[int]) -> Iterator[tuple[str, list[Any]]]:
    """A local HTTP server: (its URL, the JSON bodies posted), answering each POST with the
    next of `statuses` (then 204)."""
    bodies: list[Any] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(statuses.pop(0) if statuses else 204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/alerts", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_the_budget_alert_is_posted_to_the_webhook(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    with webhook([500]) as (url, bodies):  # the first post fails
        app.alerts.on_budget(webhook=url)
        spend(app)
        assert len(bodies) == 1
        assert check_alerts(app.runtime, clock.now()) == 1  # posted again
        assert check_alerts(app.runtime, clock.now()) == 0
    assert [(b["alert"], b["reason"], b["function"], b["budget"]) for b in bodies] == [
        ("budget", "budget", "poison", "10/day")
    ] * 2
    assert bodies[0] == bodies[1]


def test_on_budget_takes_a_callback_or_a_webhook(app: App) -> None:
    with pytest.raises(ConfigError, match="on_budget"):
        app.alerts.on_budget()  # type: ignore[call-overload]


def test_a_raised_budget_continues_after_resume(
    make_app: Callable[..., App],
) -> None:
    def build(budget: str) -> App:
        app = make_app()

        @app.on_message("payments", budget=budget, name="charge")
        def charge(event: Event) -> None:
            pass

        return app

    first = build("10/hour")
    publish_many(first, "payments", 30)
    assert first.drain().attempts == 10
    assert first.functions.get("charge").paused_at is not None
    second = build("25/hour")
    second.functions.resume("charge")
    assert second.drain().attempts == 15
    assert second.functions.get("charge").pending == 5


def test_a_paused_function_keeps_its_deliveries_and_resumes_where_it_stopped(
    app: App,
) -> None:
    seen: list[int] = []

    @app.on_message("emails")
    def send(event: Event) -> None:
        seen.append(event.data.data["n"])

    publish_many(app, "emails", 3)
    assert app.functions.pause("send")
    assert not app.functions.pause("send")  # already paused
    assert app.drain().attempts == 0
    assert app.functions.get("send").pending == 3
    assert app.functions.resume("send")
    app.drain()
    assert sorted(seen) == [0, 1, 2]
    assert not app.functions.resume("send")


@pytest.mark.parametrize("budget", ["5000", "5/week", "0/day", "-1/day", 5000, "x/day"])
def test_a_bad_budget_is_a_config_error(app: App, budget: object) -> None:
    with pytest.raises(ConfigError, match="budget"):

        @app.on_message("emails", budget=budget)
        def send(event: Event) -> None:
            pass
