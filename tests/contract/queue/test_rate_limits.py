"""rate_limit: a function's deliveries start at most at its rate across every worker, with the
tokens taken when they are leased. Time moves only by TestClock."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.model.rates import RateLimit
from oncefire.testing import TestClock


def workers_sharing_a_limit(
    make_app: Callable[..., App], clock: TestClock, rate: str, count: int
) -> tuple[list[App], list[float]]:
    """Four Apps (as four workers) on one store running `send` at `rate`, and `count`
    documents written; the Apps, and the list each start's time is appended to."""
    started: list[float] = []
    apps = []
    for _ in range(4):
        app = make_app()
        app.on_document_created("mail/{m}", name="send", rate_limit=rate)(
            lambda event: started.append(clock.now())
        )
        assert app.store  # registered before the writes
        apps.append(app)
    writer = make_app()
    for n in range(count):
        writer.db.document(f"mail/m{n}").set({"n": n})
    return apps, started


@pytest.mark.slow
def test_four_workers_together_start_at_most_the_rate(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    apps, started = workers_sharing_a_limit(make_app, clock, "100/s", 300)
    start = clock.now()
    for _ in range(40):  # 2 s in steps of 50 ms, each worker draining in turn
        clock.advance(0.05)
        for app in apps:
            app.drain()
    # At most 100 a second plus the burst (a tenth of the limit) in every 1 s window.
    for tenth in range(10):
        lo = start + tenth / 10
        assert sum(1 for t in started if lo < t <= lo + 1) <= 110
    assert 190 <= len(started) <= 210


@pytest.mark.slow
def test_a_slow_rate_spreads_starts_over_its_window(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    apps, started = workers_sharing_a_limit(make_app, clock, "6/m", 20)
    start = clock.now()
    for _ in range(60):  # 60 s in steps of 1 s
        clock.advance(1)
        for app in apps:
            app.drain()
    # One token every 10 s (a burst of one): never two starts within 10 s.
    assert len(started) == 6
    gaps = [b - a for a, b in itertools.pairwise(started)]
    assert all(gap >= 10 - 1e-6 for gap in gaps)
    assert started[0] == start + 1


def test_an_hourly_rate_starts_one_a_second_once_its_burst_is_spent(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    started: list[float] = []
    app.on_document_created("mail/{m}", name="send", rate_limit="3600/h")(
        lambda event: started.append(clock.now())
    )
    assert app.store  # registered before the writes
    with app.db.transaction() as tx:
        for n in range(370):
            tx.set(app.db.document(f"mail/m{n}"), {"n": n})
    app.drain()
    assert len(started) == 360  # the burst: a tenth of 3600
    per_second = []
    for _ in range(8):  # then one token each second, "3600/h" being 1/s
        clock.advance(1)
        before = len(started)
        app.drain()
        per_second.append(len(started) - before)
    assert per_second == [1] * 8
    assert app.stats()["send"].pending == 2


def test_deliveries_past_the_rate_stay_pending(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    apps, started = workers_sharing_a_limit(make_app, clock, "10/s", 5)
    clock.advance(0.01)
    apps[0].drain()
    assert len(started) == 1  # a burst of one token
    assert apps[0].stats()["send"].pending == 4
    for n in range(4):  # one token each 100 ms, whichever worker asks
        clock.advance(0.1)
        apps[n].drain()
    assert len(started) == 5


def test_tokens_are_spent_only_on_deliveries_leased(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    apps, _started = workers_sharing_a_limit(make_app, clock, "100/s", 0)
    for _ in range(10):
        clock.advance(1)
        apps[0].drain()
    rate = RateLimit.parse("100/s")
    assert apps[0].store.rate_tokens({"send": rate}, clock.now()) == {"send": 10.0}


@pytest.mark.parametrize("bad", ["fast", "0/s", "10/d", "-1/s", 10, "10 per second"])
def test_a_rate_limit_that_is_not_a_rate_is_refused(bad: object) -> None:
    app = App("sqlite://:memory:")
    with pytest.raises(ConfigError, match=r'such as "100/s", "30/m" or "500/h"'):
        app.on_message("mail", rate_limit=bad)
