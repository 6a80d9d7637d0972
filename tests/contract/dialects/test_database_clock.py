"""On PostgreSQL leases are judged by the database's clock (issue 11, point 15): a worker
whose machine clock runs 60 s ahead neither rescues another worker's live lease nor writes
leases that others take for expired."""

from __future__ import annotations

import time

import pytest

from oncefire import App
from oncefire.clock import SystemClock
from oncefire.engine.worker import Worker
from oncefire.events import Event

SKEW = 60.0
LEASE = 30.0

pytestmark = pytest.mark.postgres


class SkewedClock(SystemClock):
    """The system clock of a machine whose time runs SKEW seconds ahead."""

    def now(self) -> float:
        return time.time() + SKEW


class SkewedTestClock:
    """The same skew from a clock that is not the system clock: taken as it is."""

    def now(self) -> float:
        return time.time() + SKEW


def make(url: str, clock: object) -> App:
    app = App(url, clock=clock, lease=LEASE)  # type: ignore[arg-type]

    @app.on_message("t", name="f")
    def f(event: Event) -> None:
        pass

    return app


def hold_one(app: App) -> int:
    """Publish a message and lease its delivery to app (as a worker that is running it)."""
    app.publish("t", {})
    now = app.clock.now()
    [held] = app.store.lease_due(
        worker="holder", now=now, lease_until=now + LEASE, limit=1, functions=["f"], caps={}
    )
    app.store.start([held.lease], now)
    return held.lease.delivery_id


def test_a_skewed_worker_does_not_rescue_a_live_lease(postgres_store_url: str) -> None:
    holder, skewed = (
        make(postgres_store_url, SystemClock()),
        make(postgres_store_url, SkewedClock()),
    )
    try:
        hold_one(holder)
        assert Worker(skewed.runtime, concurrency=1).rescue() == 0  # the lease has 30 s to run
        assert holder.store.expired_leases(holder.clock.now(), ["f"], 10) == []
    finally:
        holder.close()
        skewed.close()


def test_a_skewed_worker_writes_leases_others_see_live(postgres_store_url: str) -> None:
    skewed, other = make(postgres_store_url, SkewedClock()), make(postgres_store_url, SystemClock())
    try:
        hold_one(skewed)  # its lease_until is by the database's clock, not 60 s ahead...
        assert Worker(other.runtime, concurrency=1).rescue() == 0
        # ...nor 60 s behind: a worker with a true clock 31 s later finds it expired.
        assert other.store.expired_leases(time.time() + LEASE + 1, ["f"], 10) != []
    finally:
        skewed.close()
        other.close()


def test_a_clock_that_is_not_the_system_clock_is_taken_as_it_is(postgres_store_url: str) -> None:
    """The control: the same skew from a test clock rescues the lease, so the two tests above
    fail when leases are judged by the worker's clock."""
    holder, skewed = (
        make(postgres_store_url, SystemClock()),
        make(postgres_store_url, SkewedTestClock()),
    )
    try:
        hold_one(holder)
        assert Worker(skewed.runtime, concurrency=1).rescue() == 1
    finally:
        holder.close()
        skewed.close()
