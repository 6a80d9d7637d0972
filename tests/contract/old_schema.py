"""Stores as an older oncefire made them: its migrations up to a version, then rows in it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from oncefire.stores import migrations


def build_old_store(url: str, up_to: int, rows: Sequence[str]) -> None:
    """The store at url with the schema of migrations 1..up_to, its version recorded as that
    oncefire recorded it, and these SQL statements run in it (tables, triggers, rows)."""
    dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    steps = [(v, sql) for v, sql in migrations.load(dialect) if v <= up_to]
    if dialect == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("CREATE TABLE oncefire_schema (version INTEGER NOT NULL)")
        for version, sql in steps:
            for statement in migrations.statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO oncefire_schema (version) VALUES (?)", (version,))
        for statement in rows:
            conn.execute(statement)
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("CREATE TABLE oncefire_schema (version integer NOT NULL)")
        for version, sql in steps:
            pg.execute(sql.encode())
            pg.execute("INSERT INTO oncefire_schema (version) VALUES (%s)", (version,))
        for statement in rows:
            pg.execute(statement.encode())
