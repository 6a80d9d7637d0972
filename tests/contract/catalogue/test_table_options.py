"""Row functions take the options document functions take and honour them alike: ordering,
rate_limit, retry=False and max_instances (docs/tables.md, "The decorators"); and a dropped
column keeps events correct on both databases (docs/tables.md, "Schema changes"). Time moves
only by TestClock."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncefire import App
from oncefire.engine import routing as keeper
from oncefire.engine.ordering import key_deliveries
from oncefire.engine.routing import route_new
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.testing import TestClock
from tests.table_writers import Writer, make_writer


@pytest.fixture
def writer(store_url: str) -> Iterator[Writer]:
    """The application's own connection, with a fresh table t_orders (id, status, amount)."""
    w = make_writer("driver", store_url)
    w.create_orders("t_orders")
    yield w
    w.run("DROP TABLE IF EXISTS t_orders")
    w.close()


def insert_orders(writer: Writer, count: int) -> None:
    writer.run_many(
        "INSERT INTO t_orders (id, status, amount) VALUES (:id, 'new', :id)",
        [{"id": i} for i in range(1, count + 1)],
    )


def leased(app: App, worker: str) -> list[str]:
    """Lease what is due for every function, as a worker would; the source of each lease."""
    route_new(app.runtime)
    keyed = {n: t for n, t in app.triggers.items() if t.options.ordering_key is not None}
    key_deliveries(app.store, keyed, app.clock.now())  # as a worker's sweep does
    now = app.clock.now()
    taken = app.store.lease_due(
        worker=worker,
        now=now,
        lease_until=now + 30,
        limit=50,
        functions=list(app.triggers),
        caps={},
    )
    return sorted(c.event.source for c in taken)


def test_ordering_document_runs_one_rows_updates_one_at_a_time_in_order(
    app: App, writer: Writer
) -> None:
    seen: list[tuple[str, int]] = []

    @app.on_row_updated("t_orders", columns=["amount"], ordering="document")
    def recount(event: Event) -> None:
        seen.append((event.source, event.data.after["amount"]))

    app.watch_tables()
    insert_orders(writer, 2)
    for amount in (10, 20, 30):
        writer.run("UPDATE t_orders SET amount = :a WHERE id IN (1, 2)", {"a": amount})
    # Only the oldest update of each row is leased; the others wait behind it.
    assert leased(app, "w1") == ["t_orders/1", "t_orders/2"]
    assert leased(app, "w2") == []


def test_ordering_document_delivers_each_rows_updates_in_event_order(
    app: App, writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Moves of 3 changes at a time: the changes reach routing in the order they were captured.
    monkeypatch.setattr(keeper, "MOVE_BATCH", 3)
    seen: list[tuple[str, int]] = []

    @app.on_row_updated("t_orders", columns=["amount"], ordering="document")
    def recount(event: Event) -> None:
        seen.append((event.source, event.data.after["amount"]))

    app.watch_tables()
    insert_orders(writer, 2)
    for amount in (10, 20, 30, 40):
        writer.run("UPDATE t_orders SET amount = :a WHERE id IN (1, 2)", {"a": amount})
    assert app.drain().attempts == 8
    for row in ("t_orders/1", "t_orders/2"):
        assert [a for source, a in seen if source == row] == [10, 20, 30, 40]


@pytest.mark.parametrize("connections", [1, 2])
def test_updates_of_one_row_are_delivered_in_the_order_they_were_made(
    app: App, writer: Writer, store_url: str, monkeypatch: pytest.MonkeyPatch, connections: int
) -> None:
    # Many updates a millisecond, from one application connection or two taking turns, with
    # moves of a few changes at a time that empty the outbox between them: the events' ids
    # must keep the order of capture, which the time alone does not (schema 18 made the bits
    # after it at random on PostgreSQL, and of each connection's total_changes() on SQLite).
    monkeypatch.setattr(keeper, "MOVE_BATCH", 3)
    seen: list[int] = []

    @app.on_row_updated("t_orders", columns=["amount"], ordering="document")
    def recount(event: Event) -> None:
        seen.append(event.data.after["amount"])

    app.watch_tables()
    insert_orders(writer, 1)
    other = make_writer("driver", store_url) if connections == 2 else writer
    # Rows no function takes: they put the other connection's count of changes 50 ahead.
    other.run_many(
        "INSERT INTO t_orders (id, status, amount) VALUES (:id, 'new', 0)",
        [{"id": i} for i in range(1000, 1050)],
    )
    try:
        for amount in range(100, 160):
            (writer if amount % 2 else other).run(
                "UPDATE t_orders SET amount = :a WHERE id = 1", {"a": amount}
            )
            if amount % 7 == 0:
                route_new(app.runtime)
    finally:
        if other is not writer:
            other.close()
    assert app.drain().attempts == 60
    assert seen == list(range(100, 160))


def test_an_ordering_key_from_the_row_groups_rows_by_that_value(app: App, writer: Writer) -> None:
    @app.on_row_inserted("t_orders", ordering_key=lambda event: event.data.after["status"])
    def placed(event: Event) -> None: ...

    app.watch_tables()
    insert_orders(writer, 3)  # all three 'new': one key, so one at a time
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (4, 'paid', 4)")
    assert leased(app, "w1") == ["t_orders/1", "t_orders/4"]
    assert leased(app, "w2") == []


def test_a_rate_limit_spreads_row_deliveries_over_time(
    app: App, writer: Writer, clock: TestClock
) -> None:
    started: list[float] = []

    @app.on_row_inserted("t_orders", rate_limit="10/s")
    def send(event: Event) -> None:
        started.append(clock.now())

    app.watch_tables()
    insert_orders(writer, 30)
    app.drain()
    first = len(started)
    assert 0 < first < 30  # the burst only: the rest wait for tokens
    for _ in range(40):  # 4 s in steps of 100 ms
        clock.advance(0.1)
        app.drain()
    assert len(started) == 30
    start = started[0]
    assert sum(1 for t in started if t <= start + 1) <= first + 11  # at most 10 a second more


def test_retry_false_makes_a_failing_row_delivery_a_dead_letter_after_one_attempt(
    app: App, writer: Writer, clock: TestClock
) -> None:
    attempts: list[int] = []

    @app.on_row_inserted("t_orders", retry=False)
    def charge(event: Event) -> None:
        attempts.append(event.attempt)
        raise ValueError("card declined")

    app.watch_tables()
    insert_orders(writer, 2)
    app.drain()
    clock.advance(3600)
    app.drain()
    assert attempts == [1, 1]
    dead = app.dead_letters.list("charge")
    assert sorted((d.source, d.attempts) for d in dead) == [("t_orders/1", 1), ("t_orders/2", 1)]


def test_max_instances_caps_the_leases_of_a_row_function(app: App, writer: Writer) -> None:
    @app.on_row_inserted("t_orders", max_instances=2)
    def bulk(event: Event) -> None: ...

    @app.on_row_deleted("t_orders")
    def archive(event: Event) -> None: ...

    app.watch_tables()
    insert_orders(writer, 10)
    writer.run("DELETE FROM t_orders WHERE id <= 3")
    route_new(app.runtime)
    worker = Worker(app.runtime)
    try:
        leased = worker._take_due(None)  # the lease a worker takes, with its caps
        assert sorted(c.function for c in leased) == ["archive"] * 3 + ["bulk"] * 2
    finally:
        worker.shutdown()


def test_sqlite_a_dropped_column_after_unwatch_and_migrate(
    tmp_path: Path, clock: TestClock
) -> None:
    url = f"sqlite:///{tmp_path}/oncefire.db"
    app = App(url, clock=clock)
    seen: list[dict[str, Any]] = []

    @app.on_row_inserted("t_orders")
    def placed(event: Event) -> None:
        seen.append(event.data.after)

    writer = make_writer("driver", url)
    writer.create_orders("t_orders")
    try:
        app.watch_tables()
        # SQLite refuses to drop a column a trigger reads: hence unwatch first.
        with pytest.raises(sqlite3.OperationalError):
            writer.run("ALTER TABLE t_orders DROP COLUMN note")
        assert app.unwatch_table("t_orders")
        writer.run("ALTER TABLE t_orders DROP COLUMN note")
        assert app.watch_tables() == ["watching table t_orders: inserted"]  # oncefire migrate
        writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
        app.drain()
        assert seen == [{"id": 1, "status": "new", "amount": 5}]
        assert "watched-table-changed" not in [f.rule for f in app.audit().findings]
    finally:
        writer.close()
        app.close()


def test_postgres_a_column_dropped_under_a_live_app_leaves_it_out_of_later_events(
    postgres_store_url: str, clock: TestClock
) -> None:
    app = App(postgres_store_url, clock=clock)
    seen: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []

    @app.on_row_written("t_orders")
    def changed(event: Event) -> None:
        seen.append((event.data.before, event.data.after))

    writer = make_writer("driver", postgres_store_url)
    writer.create_orders("t_orders")
    try:
        app.watch_tables()
        writer.run("INSERT INTO t_orders (id, status, amount, note) VALUES (1, 'new', 5, 'x')")
        writer.run("ALTER TABLE t_orders DROP COLUMN note")  # no unwatch, no migrate
        writer.run("UPDATE t_orders SET status = 'paid' WHERE id = 1")
        writer.run("INSERT INTO t_orders (id, status, amount) VALUES (2, 'new', 6)")
        writer.run("DELETE FROM t_orders WHERE id = 2")
        app.drain()
        assert seen == [
            (None, {"id": 1, "status": "new", "amount": 5, "note": "x"}),  # captured before
            ({"id": 1, "status": "new", "amount": 5}, {"id": 1, "status": "paid", "amount": 5}),
            (None, {"id": 2, "status": "new", "amount": 6}),
            ({"id": 2, "status": "new", "amount": 6}, None),
        ]
        assert "watched-table-changed" not in [f.rule for f in app.audit().findings]
    finally:
        writer.run("DROP TABLE IF EXISTS t_orders")
        writer.close()
        app.close()


def test_sqlite_event_ids_keep_the_order_of_capture_when_the_changes_table_empties(
    sqlite_url: str,
) -> None:
    # A rowid starts again at 1 once oncefire_row_changes is empty: the id of a change
    # captured in the same millisecond after a move must still sort after the moved ones.
    app = App(sqlite_url)
    app.store.migrate()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    capture = (
        "INSERT INTO oncefire_row_changes (ms, n, type, source, data) "
        "VALUES (1796400000000, 0, 'row.updated', 't_orders/1', ?)"
    )
    try:
        for batch in ((1, 2), (3,), (4, 5)):
            for amount in batch:
                conn.execute(capture, (f'{{"after": {{"amount": {amount}}}}}',))
            assert app.store.move_row_changes(10) == len(batch)
        rows = conn.execute("SELECT data FROM oncefire_events ORDER BY id").fetchall()
        assert [json.loads(data)["after"]["amount"] for (data,) in rows] == [1, 2, 3, 4, 5]
    finally:
        conn.close()
        app.close()
