"""Triggers on the application's own tables (issue 17): the application writes its table
through SQLAlchemy Core or through the raw driver, and each committed change reaches the row
functions once, with the row before and after and its primary key; nothing else does."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from oncefire import App
from oncefire.cli import main
from oncefire.engine.routing import Housekeeping
from oncefire.errors import ConfigError
from oncefire.events import Event, RowChange
from oncefire.testing import TestClock, deliver, make_event
from tests.table_writers import Writer, make_writer

WRITERS = ["sqlalchemy", "driver"]


@pytest.fixture(params=WRITERS)
def writer(request: pytest.FixtureRequest, store_url: str) -> Iterator[Writer]:
    """The application's own connection to the store's database, with a fresh table
    t_orders (id, status, amount)."""
    w = make_writer(request.param, store_url)
    w.create_orders("t_orders")
    yield w
    for table in ("t_orders", "t_log", "t_lines"):  # the database holds only oncefire's again
        w.run(f"DROP TABLE IF EXISTS {table}")
    w.close()


Seen = list[tuple[str, Any, RowChange]]


def captured(writer: Writer) -> int:
    """The row changes the triggers wrote: not yet moved by a worker, and in the outbox."""
    return int(
        writer.scalar(
            "SELECT (SELECT count(*) FROM oncefire_row_changes) "
            "+ (SELECT count(*) FROM oncefire_events)"
        )
    )


def _functions(app: App, seen: Seen, **update_options: Any) -> None:
    @app.on_row_inserted("t_orders")
    def inserted(event: Event) -> None:
        seen.append(("inserted", event.params, event.data))

    @app.on_row_updated("t_orders", **update_options)
    def updated(event: Event) -> None:
        seen.append(("updated", event.params, event.data))

    @app.on_row_deleted("t_orders")
    def deleted(event: Event) -> None:
        seen.append(("deleted", event.params, event.data))

    @app.on_row_written("t_orders")
    def written(event: Event) -> None:
        assert event.source == f"t_orders/{event.params['id']}"
        seen.append(("written:" + event.type, event.params, event.data))


def test_insert_update_delete_each_fire_once_with_rows_and_key(app: App, writer: Writer) -> None:
    seen: Seen = []
    _functions(app, seen)
    assert app.watch_tables() == ["watching table t_orders: inserted, updated, deleted"]
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
    writer.run("UPDATE t_orders SET status = 'paid' WHERE id = 1")
    writer.run("DELETE FROM t_orders WHERE id = 1")
    app.drain()
    app.drain()  # a second drain finds nothing: each event ran once
    row = {"id": 1, "status": "new", "amount": 5, "note": None}
    paid = {**row, "status": "paid"}
    assert sorted((kind, params, change.before, change.after) for kind, params, change in seen) == [
        ("deleted", {"id": 1}, paid, None),
        ("inserted", {"id": 1}, None, row),
        ("updated", {"id": 1}, row, paid),
        ("written:row.deleted", {"id": 1}, paid, None),
        ("written:row.inserted", {"id": 1}, None, row),
        ("written:row.updated", {"id": 1}, row, paid),
    ]
    assert all(change.table == "t_orders" for _, _, change in seen)


def test_a_rolled_back_write_emits_nothing(app: App, writer: Writer) -> None:
    seen: Seen = []
    _functions(app, seen)
    app.watch_tables()
    with pytest.raises(RuntimeError), writer.transaction() as run:
        run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
        raise RuntimeError("the application gives up")
    app.drain()
    assert seen == []
    assert captured(writer) == 0


def test_a_trigger_writes_one_row_change_that_a_worker_moves_into_the_outbox(
    app: App, writer: Writer
) -> None:
    seen: Seen = []
    _functions(app, seen)
    app.watch_tables()
    writer.run_many(
        "INSERT INTO t_orders (id, status, amount) VALUES (:id, 'new', 5)",
        [{"id": 1}, {"id": 2}],
    )
    # The application's transaction wrote no outbox row (nor its key and routing index).
    assert writer.scalar("SELECT count(*) FROM oncefire_row_changes") == 2
    assert writer.scalar("SELECT count(*) FROM oncefire_events") == 0
    app.drain()
    assert writer.scalar("SELECT count(*) FROM oncefire_row_changes") == 0
    assert writer.scalar("SELECT count(DISTINCT id) FROM oncefire_events") == 2
    assert sorted((kind, params["id"]) for kind, params, _ in seen) == [
        ("inserted", 1),
        ("inserted", 2),
        ("written:row.inserted", 1),
        ("written:row.inserted", 2),
    ]


def test_a_column_filter_ignores_other_columns(app: App, writer: Writer) -> None:
    seen: list[tuple[str, Any]] = []

    @app.on_row_updated("t_orders", columns=["status"])
    def on_status(event: Event) -> None:
        seen.append(("status", event.data.after["status"]))

    @app.on_row_updated("t_orders", columns=["amount"])
    def on_amount(event: Event) -> None:
        seen.append(("amount", event.data.after["amount"]))

    assert app.watch_tables() == ["watching table t_orders: updated (updates of amount, status)"]
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
    writer.run("UPDATE t_orders SET note = 'hello' WHERE id = 1")  # no function watches note
    writer.run("UPDATE t_orders SET status = 'new' WHERE id = 1")  # no value changed
    assert captured(writer) == 0  # filtered in the trigger
    writer.run("UPDATE t_orders SET amount = 7 WHERE id = 1")
    app.drain()
    assert seen == [("amount", 7)]  # routing filters between the two functions
    writer.run("UPDATE t_orders SET status = 'paid', amount = 8 WHERE id = 1")
    app.drain()
    assert sorted(seen) == [("amount", 7), ("amount", 8), ("status", "paid")]


def test_a_bulk_update_of_1000_rows_fires_1000_events_exactly_once(
    app: App, writer: Writer
) -> None:
    seen: list[int] = []

    @app.on_row_updated("t_orders", columns=["status"])
    def paid(event: Event) -> None:
        seen.append(int(event.params["id"]))

    app.watch_tables()
    writer.run_many(
        "INSERT INTO t_orders (id, status, amount) VALUES (:id, 'new', :id)",
        [{"id": i} for i in range(1, 1001)],
    )
    writer.run("UPDATE t_orders SET status = 'paid'")
    app.drain()
    app.drain()
    assert sorted(seen) == list(range(1, 1001))
    assert writer.scalar("SELECT count(DISTINCT id) FROM oncefire_events") == 1000


def test_a_table_without_primary_key_is_refused(app: App, writer: Writer) -> None:
    writer.run("DROP TABLE IF EXISTS t_log")
    writer.run("CREATE TABLE t_log (at INTEGER, line TEXT)")

    @app.on_row_inserted("t_log")
    def logged(event: Event) -> None:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match="has no primary key, so its rows cannot be told apart"):
        app.watch_tables()
    writer.run("INSERT INTO t_log VALUES (1, 'x')")  # the application's write still works
    assert captured(writer) == 0


def test_a_missing_table_or_column_is_refused(app: App, writer: Writer) -> None:
    @app.on_row_updated("t_orders", columns=["colour"])
    def recoloured(event: Event) -> None:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match="has no column colour"):
        app.watch_tables()
    with pytest.raises(ConfigError, match=r"columns=.* must be a non-empty list"):
        app.on_row_updated("t_orders", columns="status")
    with pytest.raises(ConfigError, match="cannot watch"):
        app.on_row_inserted("t/orders")


def test_watching_is_idempotent_and_unwatch_stops_capture(
    app: App, writer: Writer, store_url: str
) -> None:
    seen: Seen = []
    _functions(app, seen)
    assert len(app.watch_tables()) == 1
    assert app.watch_tables() == []  # nothing changed: the triggers are left alone
    result = CliRunner().invoke(main, ["migrate", "--store", store_url])
    assert result.exit_code == 0, result.output
    assert "watching table" not in result.output
    result = CliRunner().invoke(main, ["unwatch", "t_orders", "--store", store_url])
    assert result.exit_code == 0, result.output
    assert "triggers of table t_orders dropped" in result.output
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
    assert captured(writer) == 0
    result = CliRunner().invoke(main, ["migrate", "--store", store_url])
    assert "watching table t_orders" in result.output  # the store's functions name it
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (2, 'new', 5)")
    app.drain()
    assert [(kind, params) for kind, params, _ in seen] == [
        ("inserted", {"id": 2}),
        ("written:row.inserted", {"id": 2}),
    ]


def test_a_column_added_under_a_live_app(
    app: App, writer: Writer, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict[str, Any]] = []

    @app.on_row_inserted("t_orders")
    def inserted(event: Event) -> None:
        seen.append(event.data.after)

    app.watch_tables()
    writer.run("ALTER TABLE t_orders ADD COLUMN channel TEXT")
    writer.run("INSERT INTO t_orders (id, status, amount, channel) VALUES (1, 'new', 5, 'web')")
    app.drain()
    if writer.dialect == "postgres":  # whole rows: nothing to do
        assert seen[0]["channel"] == "web"
        assert "watched-table-changed" not in [f.rule for f in app.audit().findings]
        return
    assert "channel" not in seen[0]  # made before the column: SQLite triggers name columns
    with caplog.at_level(logging.WARNING, logger="oncefire.tables"):
        Housekeeping(
            app.runtime, list(app.triggers)
        ).warn_unserved()  # what a worker says at its start
    changed = [r.getMessage() for r in caplog.records if "changed since" in r.getMessage()]
    assert len(changed) == 1 and "oncefire migrate" in changed[0]
    rules = [f.rule for f in app.audit().findings]
    assert "watched-table-changed" in rules
    assert app.watch_tables() == [
        "triggers made again for table t_orders: inserted"
    ]  # what `oncefire migrate` does
    writer.run("INSERT INTO t_orders (id, status, amount, channel) VALUES (2, 'new', 5, 'app')")
    app.drain()
    assert seen[1]["channel"] == "app"
    assert "watched-table-changed" not in [f.rule for f in app.audit().findings]


def test_a_schema_qualified_table_on_postgres(postgres_store_url: str) -> None:
    w = make_writer("driver", postgres_store_url)
    w.run("DROP SCHEMA IF EXISTS t_sales CASCADE")
    w.run("CREATE SCHEMA t_sales")
    w.run('CREATE TABLE t_sales."Orders" (id integer PRIMARY KEY, region text)')
    app = App(postgres_store_url, clock=TestClock())
    seen: list[Any] = []

    @app.on_row_inserted("t_sales.Orders")
    def inserted(event: Event) -> None:
        seen.append((event.source, event.params, event.data.after))

    app.watch_tables()
    w.run("INSERT INTO t_sales.\"Orders\" VALUES (4, 'north')")
    app.drain()
    app.close()
    w.run("DROP SCHEMA t_sales CASCADE")
    w.close()
    assert seen == [("t_sales.Orders/4", {"id": 4}, {"id": 4, "region": "north"})]


def test_a_composite_primary_key_gives_params_and_source(app: App, writer: Writer) -> None:
    writer.run("DROP TABLE IF EXISTS t_lines")
    writer.run(
        "CREATE TABLE t_lines (order_id INTEGER, line INTEGER, qty INTEGER, "
        "PRIMARY KEY (order_id, line))"
    )
    seen: list[Any] = []

    @app.on_row_written("t_lines")
    def changed(event: Event) -> None:
        seen.append((event.type, event.source, event.params))

    app.watch_tables()
    writer.run_many("INSERT INTO t_lines VALUES (:o, :l, 1)", [{"o": 7, "l": 1}, {"o": 7, "l": 2}])
    writer.run("UPDATE t_lines SET qty = 3 WHERE line = 2")
    writer.run("DELETE FROM t_lines WHERE line = 1")
    app.drain()
    key = {"order_id": 7, "line": 1}
    assert sorted(seen, key=str) == sorted(
        [
            ("row.inserted", "t_lines/7/1", key),
            ("row.inserted", "t_lines/7/2", {**key, "line": 2}),
            ("row.updated", "t_lines/7/2", {**key, "line": 2}),
            ("row.deleted", "t_lines/7/1", key),
        ],
        key=str,
    )


def test_make_event_builds_a_row_event_as_the_trigger_does(app: App) -> None:
    seen: list[Any] = []

    @app.on_row_updated("t_orders")
    def updated(event: Event) -> None:
        seen.append((event.params, event.source, event.data.before, event.data.after))

    event = make_event(
        "row.updated", "t_orders/1", {"id": 1, "status": "paid"}, before={"id": 1}, key={"id": 1}
    )
    assert deliver(app, "updated", event, times=1)["succeeded"] == 1
    assert seen == [({"id": 1}, "t_orders/1", {"id": 1}, {"id": 1, "status": "paid"})]


def test_a_stale_function_of_another_app_does_not_stop_watching(
    make_app: Callable[..., App], writer: Writer
) -> None:
    other = make_app()

    @other.on_row_inserted("t_gone")
    def gone(event: Event) -> None:
        raise AssertionError("never called")

    assert other.store.dialect  # opening the store registers its function
    app = make_app()
    seen: list[Any] = []

    @app.on_row_inserted("t_orders")
    def placed(event: Event) -> None:
        seen.append(event.params)

    assert app.watch_tables() == [
        "skipped table t_gone: There is no table 't_gone' in the store's database: create it "
        "first (a watched table lives in the same database as oncefire's tables).",
        "watching table t_orders: inserted",
    ]
    with pytest.raises(ConfigError, match="There is no table 't_gone'"):
        other.watch_tables()  # its own function: an error
    writer.run("INSERT INTO t_orders (id, status, amount) VALUES (1, 'new', 5)")
    app.drain()
    assert seen == [{"id": 1}]
