"""Issue 48 point 2: a function's own transaction is fenced by its lease. `tx.claim` and the
writes with it commit only while the store still holds the delivery for this attempt: not
after a stall let another worker take the lease over, nor after a failover lost the delivery
(its row gone). Both stores."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App, LeaseLostError, RetryPolicy
from oncefire.events import Event
from oncefire.testing import TestClock

WAIT = 10.0
LEASE = 30.0


def run_sql(url: str, sql: str, *args: Any) -> None:
    """One statement on a connection of its own, committed (a hand outside oncefire)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=10)
        try:
            conn.execute(sql, args)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(sql.replace("?", "%s").encode(), args)


def effects(app: App) -> list[dict[str, Any] | None]:
    """The effect documents committed, as dicts."""
    return [snap.to_dict() for snap in app.db.collection("effects").get()]


def commit_effect(app: App, event: Event) -> None:
    """The chaos suite's exactly-once effect: tx.claim and a write in one transaction."""
    with app.db.transaction() as tx:
        if tx.claim(f"effect-{event.id}"):
            tx.set(app.db.document(f"effects/{event.attempt}"), {"attempt": event.attempt})


def test_a_stalled_attempt_whose_lease_was_taken_over_commits_nothing(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    first, second = make_app(concurrency=1), make_app()
    stalled, resumed = threading.Event(), threading.Event()
    rescuer_runs, rescuer_goes = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def register(app: App) -> None:
        @app.on_message("t", name="charge", retry_policy=RetryPolicy(first_delay=0.0))
        def charge(event: Event) -> None:
            if event.attempt == 1:  # stalls past its lease; another worker takes it over
                stalled.set()
                assert resumed.wait(WAIT)
            else:  # the rescuer's attempt holds the lease, its effect not yet committed
                rescuer_runs.set()
                assert rescuer_goes.wait(WAIT)
            try:
                commit_effect(app, event)
            except LeaseLostError as exc:
                raised.append(exc)
                raise

    register(first)
    register(second)
    first.publish("t", {})
    stalled_drain = threading.Thread(target=first.drain)
    stalled_drain.start()
    assert stalled.wait(WAIT)
    clock.advance(LEASE + 1)
    rescuer = threading.Thread(target=second.drain)
    rescuer.start()
    assert rescuer_runs.wait(WAIT)
    resumed.set()  # the stalled attempt's transaction, now that another attempt holds it
    stalled_drain.join(WAIT)
    rescuer_goes.set()
    rescuer.join(WAIT)
    assert not stalled_drain.is_alive() and not rescuer.is_alive()
    assert len(raised) == 1 and "no longer leased to this attempt" in str(raised[0])
    # The one effect is the rescuer's: the stalled attempt's claim and write were refused.
    assert effects(second) == [{"attempt": 2}]
    assert second.stats()["charge"].succeeded == 1


@pytest.mark.parametrize("is_async", [False, True])
def test_an_attempt_whose_delivery_a_failover_lost_commits_nothing(
    app: App, store_url: str, is_async: bool
) -> None:
    raised: list[BaseException] = []

    def charge(event: Event) -> None:
        # A failover to a standby that had not received the lease: the row is not there.
        run_sql(store_url, "DELETE FROM oncefire_deliveries WHERE event_id = ?", event.id)
        try:
            commit_effect(app, event)
        except LeaseLostError as exc:
            raised.append(exc)
            raise

    async def charge_async(event: Event) -> None:
        charge(event)

    app.on_message("t", name="charge", retry=False)(charge_async if is_async else charge)
    message = app.publish("t", {})
    app.drain()
    assert len(raised) == 1
    assert effects(app) == []
    with app.db.transaction() as tx:  # the claim went with the refused transaction
        assert tx.claim(f"effect-{message}")


def test_a_plain_write_of_a_function_is_fenced_too(app: App, store_url: str) -> None:
    """A ref.set() inside a function is a transaction of its own, fenced like any other."""
    raised: list[BaseException] = []

    @app.on_message("t", retry=False)
    def mark(event: Event) -> None:
        run_sql(store_url, "DELETE FROM oncefire_deliveries WHERE event_id = ?", event.id)
        try:
            app.db.document("marks/m1").set({"by": event.id})
        except LeaseLostError as exc:
            raised.append(exc)

    app.publish("t", {})
    app.drain()
    assert len(raised) == 1
    assert not app.db.document("marks/m1").get().exists


def test_writes_outside_an_attempt_are_not_fenced(app: App) -> None:
    with app.db.transaction() as tx:
        assert tx.claim("k")
        tx.set(app.db.document("effects/outside"), {"attempt": 0})
    assert effects(app) == [{"attempt": 0}]


def test_an_attempt_that_holds_its_lease_commits(app: App) -> None:
    @app.on_message("t")
    def charge(event: Event) -> None:
        commit_effect(app, event)

    app.publish("t", {})
    assert app.drain().outcomes == {"succeeded": 1}
    assert effects(app) == [{"attempt": 1}]
