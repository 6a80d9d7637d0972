"""`app.functions`: stored functions with their trigger, last seen time and pending count;
forgetting one stops routing to it and makes its pending deliveries dead letters."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.engine.worker import Worker
from oncefire.errors import FunctionNotFoundError
from oncefire.events import Event
from oncefire.operations.functions import FORGOTTEN
from oncefire.testing import TestClock


def register_send(app: App, seen: list[str] | None = None) -> None:
    @app.on_message("emails", name="send")
    def send(event: Event) -> None:
        if seen is not None:
            seen.append(event.id)


def test_functions_list_trigger_last_seen_and_pending(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    register_send(app)
    app.publish("emails", {})
    [row] = app.functions.list()
    assert (row.name, row.kind, row.source, row.pending) == ("send", "message", "emails", 1)
    assert row.last_seen is None and row.paused_at is None
    app.drain()
    [row] = app.functions.list()
    assert row.pending == 0 and row.last_seen == clock.now()


def test_forget_stops_routing_and_turns_pending_into_dead_letters(
    make_app: Callable[..., App],
) -> None:
    old = make_app()
    register_send(old)
    for _ in range(3):
        old.publish("emails", {})
    assert old.functions.forget("send") == 3
    assert old.functions.list() == []
    letters = old.dead_letters.list()
    assert len(letters) == 3 and all(d.error == FORGOTTEN for d in letters)
    writer = make_app()
    writer.publish("emails", {})  # routed to nobody: kept unrouted, no pending delivery
    assert writer.unrouted_count() == 1

    seen: list[str] = []
    back = make_app()
    register_send(back, seen)  # a function of that name returns
    back.drain()
    assert len(seen) == 1  # the unrouted message
    assert back.dead_letters.replay_all(function="send") == 3
    back.drain()
    assert len(seen) == 4


def test_forget_of_an_unknown_function_is_an_error(app: App) -> None:
    with pytest.raises(FunctionNotFoundError, match="oncefire functions list"):
        app.functions.forget("nobody")
    with pytest.raises(FunctionNotFoundError):
        app.functions.pause("nobody")


def test_a_worker_warns_about_stored_functions_it_does_not_serve(
    make_app: Callable[..., App], caplog: pytest.LogCaptureFixture
) -> None:
    first = make_app()
    register_send(first)
    first.publish("emails", {})  # a pending delivery of send
    other = make_app()

    @other.on_message("orders")
    def record(event: Event) -> None:
        pass

    with caplog.at_level(logging.WARNING):
        Worker(other.runtime).housekeeping.warn_unserved()
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "does not serve, with pending deliveries: send (1);" in line
