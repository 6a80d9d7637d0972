"""Schedules across a downtime: the Apps play worker processes, one stopped (closed) and
others started later on the same store, the clock moved by hand. What they fire of the ticks
missed meanwhile is the schedule's policy (catch_up, misfire_grace), once across workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.features import ticks
from oncefire.testing import TestClock

MINUTE = 60.0
Fired = list[tuple[float, float]]  # (scheduled time, event time) of each tick run


def worker(
    make_app: Callable[..., App], fired: Fired, poll_interval: float = 0.1, **policy: Any
) -> App:
    """An App serving the schedule `report`, every minute, with this missed-tick policy."""
    app = make_app(poll_interval=poll_interval)

    @app.on_schedule("every 1 minute", name="report", **policy)
    def report(event: Event) -> None:
        fired.append((event.data["scheduled_time"], event.time.timestamp()))

    return app


def down_for_five_ticks(make_app: Callable[..., App], clock: TestClock, **policy: Any) -> Fired:
    """A worker fires the tick at start + 60, then every worker is down until start + 380:
    the ticks at 120 ... 360 are missed. What ran, the first tick included."""
    fired: Fired = []
    first = worker(make_app, fired, **policy)
    first.drain()
    clock.advance(MINUTE)
    first.drain()
    first.close()
    clock.advance(5 * MINUTE + 20)
    return fired


def test_the_latest_missed_tick_fires_once_when_a_worker_starts(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired = down_for_five_ticks(make_app, clock)
    restarted = [worker(make_app, fired), worker(make_app, fired)]  # two processes start
    for app in restarted:
        app.drain()
    # The newest missed tick, once, stamped with the time it fired (20 s late).
    assert fired == [(start + 60, start + 60), (start + 360, start + 380)]
    clock.advance(40)
    for app in restarted:
        app.drain()
    assert fired[-1] == (start + 420, start + 420)
    assert len(fired) == 3


def test_catch_up_all_fires_each_missed_tick_once_oldest_first(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired = down_for_five_ticks(make_app, clock, catch_up="all")
    restarted = [worker(make_app, fired, catch_up="all") for _ in range(2)]
    for app in restarted:
        app.drain()
    assert sorted(due for due, _ in fired) == [start + 60 * n for n in range(1, 7)]
    assert {at for _, at in fired[1:]} == {start + 380}


def test_catch_up_none_skips_the_missed_ticks_and_keeps_time_after(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired = down_for_five_ticks(make_app, clock, catch_up="none")
    restarted = worker(make_app, fired, catch_up="none")
    restarted.drain()
    assert fired == [(start + 60, start + 60)]
    clock.advance(40)
    restarted.drain()
    assert fired == [(start + 60, start + 60), (start + 420, start + 420)]


def test_a_tick_later_than_the_grace_is_skipped_for_good(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired = down_for_five_ticks(make_app, clock, catch_up="all", misfire_grace=90)
    worker(make_app, fired, catch_up="all", misfire_grace=90).drain()
    # 380 - 90 = 290: the ticks at 300 and 360 are within the grace, the older ones are not.
    assert sorted(due for due, _ in fired) == [start + 60, start + 300, start + 360]
    # Handled (fired or skipped) is recorded: a worker started later fires none of them.
    latest: Fired = []
    worker(make_app, latest, misfire_grace=90).drain()
    assert latest == []


def test_the_latest_missed_tick_past_its_grace_does_not_fire(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired = down_for_five_ticks(make_app, clock, misfire_grace=10)
    restarted = worker(make_app, fired, misfire_grace=10)
    restarted.drain()
    assert fired == [(start + 60, start + 60)]  # the newest missed tick is 20 s late
    clock.advance(40)
    restarted.drain()
    assert fired[-1] == (start + 420, start + 420)


def test_ticks_missed_before_the_first_one_fired_are_caught_up(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    start = clock.now()
    fired: Fired = []
    first = worker(make_app, fired)
    clock.advance(30)
    first.drain()  # a worker looked at the schedule: no tick was due yet
    first.close()
    clock.advance(3 * MINUTE)
    worker(make_app, fired).drain()
    assert fired == [(start + 180, start + 210)]


def test_an_idle_worker_sleeps_no_longer_than_the_next_tick(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = worker(make_app, [], poll_interval=30.0)
    app.drain()
    clock.advance(50)
    assert ticks.poll_interval(app.runtime) == pytest.approx(10.0)
    clock.advance(5)
    assert ticks.poll_interval(app.runtime) == pytest.approx(5.0)
