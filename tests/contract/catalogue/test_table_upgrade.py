"""A store watching a table from before schema 18 keeps its events when it upgrades: on
SQLite its triggers wrote into oncefire_events, which still works, and `oncefire migrate`
(app.watch_tables()) makes them again to write into oncefire_row_changes; on PostgreSQL its
triggers (with the arguments of schema 13) run the new trigger functions at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.tables import changed_tables
from tests.contract.old_schema import build_old_store
from tests.table_writers import make_writer

BEFORE = 15  # a schema whose table triggers wrote into oncefire_events (up to 17)
ROW = "json_object('id', NEW.id, 'status', NEW.status, 'amount', NEW.amount, 'note', NEW.note)"
# The insert trigger a schema-15 oncefire made on SQLite (its id simplified).
OLD_SQLITE_TRIGGER = (
    'CREATE TRIGGER "oncefire_inserted:t_orders" AFTER INSERT ON t_orders BEGIN '
    "INSERT INTO oncefire_events (id, type, source, time, data, size, routing) VALUES "
    "(printf('01890000-0000-7000-8000-%012d', NEW.id), 'row.inserted', 't_orders/' || NEW.id, "
    f"1.0, json_object('table', 't_orders', 'pk', json_object('id', NEW.id), 'before', NULL, "
    f"'after', {ROW}), 100, 'new'); END"
)
# The one a schema-15 oncefire made on PostgreSQL: its arguments end after the naive timestamps.
OLD_POSTGRES_TRIGGER = (
    "CREATE TRIGGER oncefire_row_inserted AFTER INSERT ON t_orders REFERENCING NEW TABLE AS "
    "oncefire_new FOR EACH STATEMENT EXECUTE FUNCTION oncefire_rows_event('t_orders', 'id', '')"
)
# The watched-tables row that schema-15 oncefire wrote (the shape as each catalogue names types).
WATCHED = (
    "INSERT INTO oncefire_watched_tables (name, kinds, columns, shape, watched_at) VALUES "
    "('t_orders', 'inserted', NULL, 'id {i} pk1, status {t}, amount {i}, note {t}', 1)"
)


def make_store_watching_orders(url: str, before: int = BEFORE) -> None:
    """A store at schema `before` (15 unless told) with t_orders watched by schema 15's insert
    trigger."""
    table = "CREATE TABLE t_orders (id INTEGER PRIMARY KEY, status TEXT, amount INTEGER, note TEXT)"
    if url.startswith("sqlite"):
        rows = [table, OLD_SQLITE_TRIGGER, WATCHED.format(i="INTEGER", t="TEXT")]
    else:
        rows = [table, OLD_POSTGRES_TRIGGER, WATCHED.format(i="integer", t="text")]
    build_old_store(url, before, rows)


@pytest.mark.empty_store
def test_a_watched_table_keeps_its_events_across_the_upgrade_and_migrate_remakes_its_triggers(
    store_url: str, make_app: Callable[..., App]
) -> None:
    make_store_watching_orders(store_url)
    app = make_app()
    seen: list[tuple[Any, Any]] = []

    @app.on_row_inserted("t_orders")
    def placed(event: Event) -> None:
        seen.append((event.params, event.data.after))

    app.store.migrate()
    writer = make_writer("driver", store_url)
    try:
        writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")  # old trigger
        app.drain()
        assert seen == [({"id": 1}, {"id": 1, "status": "new", "amount": 5, "note": None})]
        if writer.dialect == "sqlite":
            # The upgrade asks for the triggers to be made again: a worker's start and the
            # audit name the table until then.
            assert [table for table, _ in changed_tables(app.store)] == ["t_orders"]
            assert app.watch_tables() == ["triggers made again for table t_orders: inserted"]
        else:  # the old triggers call the new trigger function: nothing to make again
            assert app.watch_tables() == []
        assert changed_tables(app.store) == []
        writer.run("INSERT INTO t_orders (id, status, amount) VALUES (2, 'new', 6)")
        assert writer.scalar("SELECT count(*) FROM oncefire_row_changes") == 1
        app.drain()
        assert seen[1:] == [({"id": 2}, {"id": 2, "status": "new", "amount": 6, "note": None})]
    finally:
        writer.run("DROP TABLE IF EXISTS t_orders")
        writer.close()


@pytest.mark.empty_store
def test_changes_captured_before_schema_23_and_not_moved_reach_their_function(
    store_url: str, make_app: Callable[..., App]
) -> None:
    # Schema 23 gives PostgreSQL's oncefire_row_changes a new shape: what waits in the old one
    # is moved into the outbox by the migration itself.
    make_store_watching_orders(store_url, before=22)
    writer = make_writer("driver", store_url, with_store=False)  # the old schema, kept
    try:
        writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5), (2, 'new', 6)")
        app = make_app()
        seen: list[tuple[str, Any, Any]] = []

        @app.on_row_inserted("t_orders")
        def placed(event: Event) -> None:
            seen.append((event.source, event.params, event.data.after))

        app.store.migrate()
        assert writer.scalar("SELECT count(*) FROM oncefire_row_changes") == 0
        app.drain()
        assert sorted(seen, key=lambda s: s[0]) == [
            ("t_orders/1", {"id": 1}, {"id": 1, "status": "new", "amount": 5, "note": None}),
            ("t_orders/2", {"id": 2}, {"id": 2, "status": "new", "amount": 6, "note": None}),
        ]
    finally:
        writer.run("DROP TABLE IF EXISTS t_orders")
        writer.close()
