"""An attempt's row is written once, when it ends; while it runs, its delivery tells of it.
Stores from before (schema 3, where a lease opened a row that the record then updated) are
upgraded in place, their running attempts kept."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.stores import migrations
from oncefire.stores.base import Ending, Leased
from oncefire.testing import TestClock


def attempt_rows(app: App, event_id: str) -> int:
    with app.store.read() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        mark = "?" if app.store.dialect == "sqlite" else "%s"
        query = f"SELECT count(*) FROM oncefire_attempts WHERE event_id = {mark}"
        return int(conn.execute(query, (event_id,)).fetchone()[0])


def publish_and_lease(app: App) -> tuple[str, Leased]:
    """One message to function f, leased by worker w1."""

    @app.on_message("t")
    def f(event: Event) -> None:
        pass

    event_id = app.publish("t", {})
    now = app.clock.now()
    [leased] = app.store.lease_due(
        worker="w1", now=now, lease_until=now + 30, limit=5, functions=["f"], caps={}
    )
    return event_id, leased


def test_a_running_attempt_is_shown_and_written_once_when_it_ends(app: App) -> None:
    event_id, leased = publish_and_lease(app)
    now = leased.started_at
    assert attempt_rows(app, event_id) == 0
    [running] = app.store.attempts(event_id)
    assert (running["number"], running["worker"], running["outcome"]) == (1, "w1", None)
    assert running["started_at"] is None, "leased, not started yet"
    assert app.store.start([leased.lease], now + 0.5) == {leased.lease.delivery_id}
    [running] = app.store.attempts(event_id)
    assert running["started_at"] == now + 0.5
    ending = Ending("succeeded", finished_at=now + 1)
    assert app.store.complete_many([(leased.lease, ending)]).ids == {leased.lease.delivery_id}
    assert attempt_rows(app, event_id) == 1
    [ended] = app.store.attempts(event_id)
    assert (ended["number"], ended["worker"], ended["outcome"]) == (1, "w1", "succeeded")


def test_a_released_delivery_leaves_no_attempt_behind(app: App) -> None:
    event_id, leased = publish_and_lease(app)
    assert app.store.release([leased.lease]) == 1
    assert app.store.attempts(event_id) == []
    assert app.store.delivery_states(event_id) == [("f", "pending", 0)]


def old_rows(t0: float) -> list[str]:
    """An event whose delivery is running under a lease that ran out at t0 + 30."""
    return [
        "INSERT INTO oncefire_events (id, type, source, time, data, size)"
        f" VALUES ('e1', 'message.published', 't', {t0}, '{{}}', 2)",
        "INSERT INTO oncefire_deliveries (id, event_id, function, state, run_at, attempt,"
        " lease_token, lease_until, worker, created_at)"
        f" VALUES (1, 'e1', 'f', 'running', {t0}, 1, 'tok', {t0 + 30}, 'old-worker', {t0})",
        "INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,"
        f" started_at) VALUES (1, 'e1', 'f', 1, 'old-worker', {t0 + 5})",
    ]


def build_schema_3(store_url: str, t0: float) -> None:
    """A store as oncefire's schema 3 left it, with one attempt running (its row open)."""
    dialect = "sqlite" if store_url.startswith("sqlite") else "postgres"
    steps = [(v, sql) for v, sql in migrations.load(dialect) if v <= 3]
    script = ["CREATE TABLE oncefire_schema (version integer NOT NULL)"]
    for version, sql in steps:
        script += migrations.statements(sql)
        script.append(f"INSERT INTO oncefire_schema (version) VALUES ({version})")
    script += old_rows(t0)
    if dialect == "sqlite":
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            for statement in script:
                conn.execute(statement)
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as conn:
            for statement in script:
                conn.execute(statement.encode())


@pytest.mark.empty_store
def test_an_upgrade_keeps_a_running_attempt_and_its_start(
    store_url: str, make_app: Callable[..., App], clock: TestClock
) -> None:
    t0 = clock.now() - 60  # the old lease ran out 30 s ago: its worker is gone
    build_schema_3(store_url, t0)
    app = make_app()

    @app.on_message("t")
    def f(event: Event) -> None:
        pass

    assert app.store.migrate() == migrations.latest(app.store.dialect)
    [running] = app.store.attempts("e1")
    assert (running["started_at"], running["outcome"]) == (t0 + 5, None)
    assert running["worker"] == "old-worker"
    assert app.drain()["succeeded"] == 1  # rescued as crashed, then run again
    attempts = app.store.attempts("e1")
    assert [(a["number"], a["outcome"]) for a in attempts] == [(1, "crashed"), (2, "succeeded")]
    assert attempts[0]["started_at"] == t0 + 5  # the open row's start, carried by the upgrade
    assert attempt_rows(app, "e1") == 2


def test_only_a_started_delivery_whose_lease_ran_out_is_charged(app: App, clock: TestClock) -> None:
    # Issue 11, point 24: a lease marks nothing started; start() does, and only while the
    # lease holds.
    event_id, leased = publish_and_lease(app)
    clock.advance(31)
    [expired] = app.store.expired_leases(clock.now(), ["f"], 10)
    assert not expired.is_started
    assert app.store.start([leased.lease], clock.now()) == set(), "its lease ran out"
    assert app.store.release([expired.lease]) == 1
    assert app.store.delivery_states(event_id) == [("f", "pending", 0)]
    [again] = app.store.lease_due(
        worker="w2",
        now=clock.now(),
        lease_until=clock.now() + 30,
        limit=5,
        functions=["f"],
        caps={},
    )
    assert app.store.start([again.lease], clock.now()) == {again.lease.delivery_id}
    clock.advance(31)
    [expired] = app.store.expired_leases(clock.now(), ["f"], 10)
    assert expired.is_started and expired.attempt == 1
