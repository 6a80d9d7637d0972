"""What a store URL points at, found without creating anything: so commands that only read
never turn a typo'd path, or another application's database, into an oncefire store."""

from __future__ import annotations

import sqlite3
from enum import StrEnum
from pathlib import Path

from oncefire.stores import queries
from oncefire.stores.schema import own_tables


class StoreState(StrEnum):
    """What is at a store URL."""

    MISSING = "missing"  # no SQLite file there
    EMPTY = "empty"  # a database without any table
    FOREIGN = "foreign"  # a database with tables of its own but none of oncefire's
    ONCEFIRE = "oncefire"  # an oncefire store
    UNKNOWN = "unknown"  # cannot tell (unreachable, not a database): opening it will say why


def _state(names: list[str]) -> StoreState:
    if any(name.startswith("oncefire_") for name in names):
        return StoreState.ONCEFIRE
    return StoreState.FOREIGN if own_tables(names) else StoreState.EMPTY


def probe(url: str) -> StoreState:
    """The state of the store at url; reads only, creates nothing."""
    if url.startswith("sqlite:"):
        if url == "sqlite://:memory:" or not url.startswith("sqlite:///"):
            return StoreState.UNKNOWN
        path = Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            return StoreState.MISSING
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                rows = conn.execute(queries.load("sqlite")["probe_table_names"])
                return _state([row[0] for row in rows])
            finally:
                conn.close()
        except sqlite3.Error:
            return StoreState.UNKNOWN
    if url.startswith(("postgresql:", "postgres:")):
        try:
            import psycopg

            from oncefire.stores.postgres.hosts import connect_options
        except ImportError:
            return StoreState.UNKNOWN
        try:  # the primary, when the URL names several hosts: a standby may lag behind it
            with psycopg.connect(url, **connect_options(url, connect_timeout=10)) as pg:
                tables = pg.execute(queries.load("postgres")["probe_table_names"]).fetchall()
                return _state([str(row[0]) for row in tables])
        except psycopg.Error:
            return StoreState.UNKNOWN
    return StoreState.UNKNOWN
