"""app.stats(window): per-function figures from the recorded attempts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncefire import App, FunctionStats
from oncefire.events import Event
from oncefire.testing import TestClock


@pytest.fixture
def serial_app(make_app: Callable[..., App]) -> App:
    """One attempt at a time, so each function's clock.advance() is its own duration."""
    return make_app(concurrency=1)


def test_stats_count_outcomes_dead_letters_pending_and_durations(
    serial_app: App, clock: TestClock
) -> None:
    app = serial_app
    durations = iter(range(1, 21))

    @app.on_document_created("fast/{d}")
    def fast(event: Event) -> None:
        clock.advance(next(durations))

    @app.on_document_created("flaky/{d}")
    def flaky(event: Event) -> None:
        if event.attempt < 3:
            raise ValueError("not yet")

    @app.on_document_created("broken/{d}", retry=False)
    def broken(event: Event) -> None:
        raise ValueError("never")

    @app.on_document_created("idle/{d}")
    def idle(event: Event) -> None: ...

    for n in range(20):
        app.db.document(f"fast/f{n}").set({"n": n})
    app.db.document("flaky/a").set({"n": 1})
    app.db.document("flaky/b").set({"n": 1})
    app.db.document("broken/a").set({"n": 1})
    app.drain()
    clock.advance(60)
    app.drain()  # flaky: attempt 2 fails too; both wait for attempt 3
    stats = app.stats()
    assert set(stats) == {"fast", "flaky", "broken", "idle"}

    f = stats["fast"]
    assert isinstance(f, FunctionStats)
    assert (f.succeeded, f.failed, f.dead_letters, f.pending) == (20, 0, 0, 0)
    assert f.success_rate == 1.0
    # From the duration histogram: a percentile is the upper bound of its bin (10 s and
    # 19 s both fall in [10, 30)).
    assert f.p50_duration == 30
    assert f.p95_duration == 30
    assert f.attempts_per_event_max == 1

    fl = stats["flaky"]
    assert (fl.succeeded, fl.failed, fl.dead_letters, fl.pending) == (0, 4, 0, 2)
    assert fl.success_rate == 0.0
    assert fl.attempts_per_event_max == 2
    assert fl.outcomes == {"failed": 4}

    b = stats["broken"]
    assert (b.succeeded, b.failed, b.dead_letters, b.pending) == (0, 1, 1, 0)

    i = stats["idle"]
    assert (i.succeeded, i.failed, i.success_rate, i.p50_duration) == (0, 0, None, None)

    clock.advance(120)
    app.drain()
    fl = app.stats()["flaky"]
    assert (fl.succeeded, fl.failed, fl.pending) == (2, 4, 0)
    assert fl.success_rate == pytest.approx(2 / 6)
    assert fl.attempts_per_event_max == 3
    assert fl.to_dict()["succeeded"] == 2


def test_stats_read_only_attempts_inside_the_window(app: App, clock: TestClock) -> None:
    # Statistics come from hour buckets: a window counts whole hours, the hour holding its
    # start included.
    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None: ...

    assert clock.now() % 3600 == 0  # the start of an hour
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    clock.advance(2 * 3600)
    app.db.document("orders/o2").set({"n": 1})
    app.drain()
    assert app.stats()["charge"].succeeded == 2
    assert app.stats(window=3600)["charge"].succeeded == 1
    clock.advance(86400)  # the window's first hour is the second attempt's
    assert app.stats()["charge"].succeeded == 1
    clock.advance(3600)
    assert app.stats()["charge"].succeeded == 0


def test_stats_count_every_failure_outcome_as_failed(app: App, clock: TestClock) -> None:
    @app.on_document_created("orders/{o}", max_event_age=5)
    def charge(event: Event) -> None: ...

    app.db.document("orders/o1").set({"n": 1})
    clock.advance(10)
    app.drain()  # expired before its first attempt
    s = app.stats()["charge"]
    assert (s.succeeded, s.failed, s.dead_letters) == (0, 1, 1)
    assert s.outcomes == {"expired": 1}
