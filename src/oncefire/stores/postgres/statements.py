"""Named PostgreSQL queries on one psycopg connection (a transaction, maybe pipelined)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from oncefire.stores import faults
from oncefire.stores.connection import NO_ARGS, Args, Row

Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresStatements:
    """Named queries on one psycopg connection; the caller owns its transaction."""

    def __init__(self, conn: Connection, queries: Mapping[str, str]) -> None:
        self.conn = conn
        self.queries = queries

    def cursor(self, name: str, args: Args = NO_ARGS) -> psycopg.Cursor[Row]:
        """Send a query; its cursor, whose rows may be read later (in a pipeline, reading
        them is what sends the queries queued so far)."""
        faults.before(name)
        cursor = self.conn.execute(self.queries[name], args)
        faults.after(name)
        return cursor

    def fetch(self, name: str, args: Args = NO_ARGS) -> list[Row]:
        """The rows a query returns."""
        return self.cursor(name, args).fetchall()

    def execute(self, name: str, args: Args = NO_ARGS) -> None:
        """Send a statement whose answer is not needed: in a pipeline it waits for the next
        read or the COMMIT."""
        self.cursor(name, args)

    def count(self, name: str, args: Args = NO_ARGS) -> int:
        """Run a statement; the number of rows it changed."""
        return self.cursor(name, args).rowcount

    def execute_many(self, name: str, rows: Sequence[Args]) -> None:
        """Run a statement once per set of arguments."""
        if rows:
            faults.before(name)
            self.conn.cursor().executemany(self.queries[name], rows)
            faults.after(name)
