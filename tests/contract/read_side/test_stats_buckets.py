"""Statistics come from hour buckets kept with the attempt rows: on the same history they
equal what the attempt rows themselves say, on every path that records an attempt, and they
outlive the rows retention purges."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import cycle
from typing import Any

import pytest

from oncefire import App, PermanentError, idempotent
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.model.buckets import bin_of, hour_of, percentile
from oncefire.testing import TestClock, deliver, make_event

HOUR = 3600.0
DURATIONS = [0.0004, 0.002, 0.004, 0.02, 0.07, 0.3, 0.7, 1.5, 3.0, 7.0, 20.0, 45.0, 100.0, 400.0]


def from_attempts(app: App, event_ids: list[str], window: float) -> dict[str, dict[str, Any]]:
    """The figures stats() gives, computed from the attempt rows (whole hours, as buckets)."""
    since = hour_of(app.clock.now() - window)
    rows = [a for e in event_ids for a in app.store.attempts(e)]
    figures: dict[str, dict[str, Any]] = {}
    for a in rows:
        if a["outcome"] is None or a["finished_at"] < since:
            continue
        f = figures.setdefault(a["function"], {"outcomes": Counter(), "bins": Counter(), "max": 0})
        f["outcomes"][a["outcome"]] += 1
        f["bins"][bin_of(a["finished_at"] - a["started_at"])] += 1
        f["max"] = max(f["max"], a["number"])
    return {
        name: {
            "outcomes": dict(f["outcomes"]),
            "succeeded": f["outcomes"]["succeeded"],
            "failed": sum(f["outcomes"].values()) - f["outcomes"]["succeeded"],
            "p50_duration": percentile(f["bins"], 0.5),
            "p95_duration": percentile(f["bins"], 0.95),
            "attempts_per_event_max": f["max"],
        }
        for name, f in figures.items()
    }


def from_buckets(app: App, window: float) -> dict[str, dict[str, Any]]:
    keys = ("outcomes", "succeeded", "failed", "p50_duration", "p95_duration")
    return {
        name: {k: getattr(s, k) for k in (*keys, "attempts_per_event_max")}
        for name, s in app.stats(window).items()
        if s.outcomes
    }


def crash_one(app: App, function: str) -> None:
    """A worker leases and starts one due delivery of `function`, then dies; another worker's
    sweep records the crashed attempt once the lease has run out."""
    now = app.clock.now()
    leased = app.store.lease_due(
        worker="gone",
        now=now,
        lease_until=now + 30,
        limit=1,
        functions=[function],
        caps={},
    )
    app.store.start([c.lease for c in leased], now)
    app.clock.advance(31)  # type: ignore[attr-defined]
    assert Worker(app.runtime).rescue() == 1


@pytest.fixture
def history(make_app: Callable[..., App], clock: TestClock) -> tuple[App, list[str]]:
    """Four hours of attempts on every path: succeeded at many durations, failed and retried,
    permanent, expired, crashed, replayed, and duplicates skipped."""
    app = make_app(concurrency=1)
    seen: list[str] = []
    durations = cycle(DURATIONS)

    @app.on_document_created("fast/{d}")
    def fast(event: Event) -> None:
        seen.append(event.id)
        clock.advance(next(durations))

    @app.on_document_created("flaky/{d}")
    def flaky(event: Event) -> None:
        seen.append(event.id)
        clock.advance(0.05 * event.attempt)
        if event.attempt < 3:
            raise ValueError("not yet")

    @app.on_document_created("doomed/{d}", retry=False)
    def doomed(event: Event) -> None:
        seen.append(event.id)
        raise PermanentError("no")

    @app.on_document_created("stale/{d}", max_event_age=10)
    def stale(event: Event) -> None:
        seen.append(event.id)

    @app.on_message("mails")
    @idempotent()
    def send(event: Event) -> str:
        return "sent"

    for hour in range(4):
        for n in range(len(DURATIONS)):
            app.db.document(f"fast/h{hour}n{n}").set({"n": n})
        app.db.document(f"flaky/h{hour}").set({"n": hour})
        app.db.document(f"doomed/h{hour}").set({"n": hour})
        app.db.document(f"stale/h{hour}").set({"n": hour})
        app.db.document(f"fast/crash{hour}").set({"n": hour})
        crash_one(app, "fast")  # the crash costs the stale events their age limit
        app.drain()
        clock.advance(60)
        app.drain()
        clock.advance(120)
        app.drain()
        mail = make_event(type="message.published", source="mails", data={"n": hour})
        deliver(app, "send", mail, times=3)
        seen.append(mail.id)
        clock.advance(HOUR)
    [dead] = app.dead_letters.list(function="doomed", limit=1)
    app.dead_letters.replay(dead.id)
    app.drain()
    seen += [d.event_id for d in app.dead_letters.list(function="stale")]  # they never ran
    return app, sorted(set(seen))


def test_stats_from_buckets_equal_stats_from_the_attempt_rows(
    history: tuple[App, list[str]],
) -> None:
    app, event_ids = history
    whole = from_attempts(app, event_ids, 30 * 86400)
    assert set(whole) == {"fast", "flaky", "doomed", "stale", "send"}
    assert set(whole["fast"]["outcomes"]) == {"succeeded", "crashed"}
    assert set(whole["stale"]["outcomes"]) == {"expired"}
    assert whole["doomed"]["outcomes"] == {"permanent": 5}  # four, and the replay's
    assert from_buckets(app, 30 * 86400) == whole
    for window in (HOUR, 2 * HOUR, 3 * HOUR):  # windows start on an hour's bucket
        assert from_buckets(app, window) == from_attempts(app, event_ids, window)
    assert app.stats(30 * 86400)["send"].dedupe_hits == 8  # two duplicates an hour


def test_stats_outlive_the_attempt_rows_retention_purges(
    history: tuple[App, list[str]], clock: TestClock
) -> None:
    app, event_ids = history
    before = from_buckets(app, 30 * 86400)
    clock.advance(8 * 86400)
    counts = app.purge()
    assert counts.attempts > 0
    assert from_attempts(app, event_ids, 30 * 86400) != before  # the rows are gone...
    assert from_buckets(app, 30 * 86400) == before  # ...the figures are not
