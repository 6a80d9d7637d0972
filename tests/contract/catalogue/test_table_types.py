"""Values of a watched table's row as JSON, the same on SQLite and PostgreSQL (docs/tables.md,
"Types"): a row of each type, written through SQLAlchemy Core, reaches the function alike."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from oncefire import App
from oncefire.events import Event

METADATA = sa.MetaData()
TYPES = sa.Table(
    "t_types",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("big", sa.BigInteger),
    sa.Column("ratio", sa.Float),
    sa.Column("name", sa.Text),
    sa.Column("is_paid", sa.Boolean),
    sa.Column("price", sa.Numeric(10, 2)),
    sa.Column("whole_price", sa.Numeric(10, 2)),
    sa.Column("rate", sa.Numeric),
    sa.Column("local_at", sa.DateTime),
    sa.Column("at", sa.DateTime(timezone=True)),
    sa.Column("raw", sa.LargeBinary),
    sa.Column("missing", sa.Text),
)
ROW = {
    "id": 1,
    "big": 2**40,
    "ratio": 1.5,
    "name": 'héllo "world"',
    "is_paid": True,
    "price": Decimal("12.50"),
    "whole_price": Decimal("7"),
    "rate": Decimal("0.125"),
    "local_at": datetime(2026, 12, 1, 5, 6, 7, 890000),
    "at": datetime(2026, 12, 1, 5, 6, 7, tzinfo=UTC),
    "raw": b"\x00\x01\xff" * 40,  # past 57 bytes, where base64 breaks lines
    "missing": None,
}
AS_JSON = {
    "id": 1,
    "big": 2**40,
    "ratio": 1.5,
    "name": 'héllo "world"',
    "is_paid": True,
    "price": "12.50",  # numerics: strings of their digits, at the declared scale
    "whole_price": "7.00",
    "rate": "0.125",
    "local_at": "2026-12-01T05:06:07.89+00:00",
    "at": "2026-12-01T05:06:07+00:00",
    "raw": "AAH/" * 40,  # bytes: base64, on one line
    "missing": None,
}


def test_a_row_of_each_type_is_the_same_json_on_both_databases(app: App, store_url: str) -> None:
    url = store_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url)
    app.migrate()  # oncefire's schema first: an application's tables alone would refuse it
    METADATA.drop_all(engine)
    METADATA.create_all(engine)
    seen: list[tuple[str, Any, Any]] = []

    @app.on_row_written("t_types")
    def written(event: Event) -> None:
        seen.append((event.type, event.data.before, event.data.after))

    app.watch_tables()
    with engine.begin() as conn:
        conn.execute(TYPES.insert(), ROW)
        conn.execute(TYPES.insert(), {"id": 2, "is_paid": False})
    with engine.begin() as conn:
        conn.execute(TYPES.update().where(TYPES.c.id == 1).values(name="renamed"))
        conn.execute(TYPES.delete().where(TYPES.c.id == 2))
    app.drain()
    METADATA.drop_all(engine)
    engine.dispose()
    by_kind = {(kind, (after or before)["id"]): (before, after) for kind, before, after in seen}
    inserted = by_kind[("row.inserted", 1)][1]
    assert inserted == AS_JSON
    assert {k: type(v) for k, v in inserted.items()} == {k: type(v) for k, v in AS_JSON.items()}
    # An update (one trigger call per row on PostgreSQL) writes both rows the same way.
    assert by_kind[("row.updated", 1)] == (AS_JSON, AS_JSON | {"name": "renamed"})
    empty = {k: None for k in AS_JSON} | {"id": 2, "is_paid": False}
    assert by_kind[("row.inserted", 2)] == (None, empty)
    assert by_kind[("row.deleted", 2)] == (empty, None)


def test_postgres_columns_added_under_a_live_app_are_written_as_documented(
    postgres_store_url: str,
) -> None:
    app = App(postgres_store_url)
    app.migrate()
    seen: list[dict[str, Any]] = []

    @app.on_row_written("t_prices")
    def written(event: Event) -> None:
        seen.append(event.data.after)

    engine = sa.create_engine(postgres_store_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS t_prices"))
            conn.execute(sa.text("CREATE TABLE t_prices (id integer PRIMARY KEY)"))
        app.watch_tables()
        with engine.begin() as conn:  # no migrate: the trigger reads the types when it runs
            conn.execute(sa.text("ALTER TABLE t_prices ADD COLUMN price numeric(10, 2)"))
            conn.execute(sa.text("ALTER TABLE t_prices ADD COLUMN raw bytea"))
            conn.execute(sa.text("ALTER TABLE t_prices ADD COLUMN at timestamp"))
            conn.execute(
                sa.text("INSERT INTO t_prices VALUES (1, 7, '\\x0001ff', '2026-12-01 05:06:07')")
            )
            conn.execute(sa.text("UPDATE t_prices SET price = 7.5 WHERE id = 1"))
        app.drain()
        assert seen == [
            {"id": 1, "price": "7.00", "raw": "AAH/", "at": "2026-12-01T05:06:07+00:00"},
            {"id": 1, "price": "7.50", "raw": "AAH/", "at": "2026-12-01T05:06:07+00:00"},
        ]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS t_prices"))
        engine.dispose()
        app.close()


def test_postgres_timestamptz_is_written_in_utc_whatever_the_sessions_zone(
    postgres_store_url: str,
) -> None:
    # The trigger functions set no zone of their own (schema 23): they rewrite the value.
    app = App(postgres_store_url)
    app.migrate()
    seen: list[dict[str, Any]] = []

    @app.on_row_written("t_zoned")
    def written(event: Event) -> None:
        seen.append(event.data.after)

    engine = sa.create_engine(postgres_store_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS t_zoned"))
            conn.execute(
                sa.text(
                    "CREATE TABLE t_zoned (id integer PRIMARY KEY, at timestamptz, local timestamp)"
                )
            )
        app.watch_tables()
        with engine.begin() as conn:
            for statement in (
                "SET LOCAL TimeZone TO 'Asia/Kolkata'",  # +05:30
                "INSERT INTO t_zoned VALUES (1, '2026-12-01 10:36:07.5+05:30')",
                "INSERT INTO t_zoned VALUES (2, 'infinity', '-infinity'), (3, NULL, NULL)",
                "UPDATE t_zoned SET at = '2026-12-01 00:00:00-08:00' WHERE id = 3",
            ):
                conn.execute(sa.text(statement))
        app.drain()
        assert sorted(seen, key=lambda row: row["id"]) == [
            {"id": 1, "at": "2026-12-01T05:06:07.5+00:00", "local": None},
            {"id": 2, "at": "infinity", "local": "-infinity"},
            {"id": 3, "at": None, "local": None},
            {"id": 3, "at": "2026-12-01T08:00:00+00:00", "local": None},
        ]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS t_zoned"))
        engine.dispose()
        app.close()
