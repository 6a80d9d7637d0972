"""The application's own writes in the tests of watched tables: through SQLAlchemy Core or
through the raw driver (sqlite3, psycopg), on the store's own database. Statements are
written with :name parameters and the names of the table tests use (t_*)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

Run = Callable[..., None]


class Writer:
    """An application connection: run statements, each committed, or in one transaction."""

    dialect: str

    def run(self, sql: str, args: dict[str, Any] | None = None) -> None:
        with self.transaction() as run:
            run(sql, args)

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        raise NotImplementedError

    def scalar(self, sql: str) -> Any:
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[Run]:
        raise NotImplementedError
        yield

    def close(self) -> None:
        raise NotImplementedError

    def create_orders(self, table: str) -> None:
        """A fresh table (id, status, amount, note) with an integer primary key."""
        self.run(f"DROP TABLE IF EXISTS {table}")
        self.run(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, status TEXT, amount INTEGER, note TEXT)"
        )


class SqlAlchemyWriter(Writer):
    """SQLAlchemy Core on its own engine."""

    def __init__(self, store_url: str) -> None:
        import sqlalchemy

        self.sa = sqlalchemy
        if store_url.startswith("sqlite"):
            self.dialect = "sqlite"
            url = store_url
        else:
            self.dialect = "postgres"
            url = store_url.replace("postgresql://", "postgresql+psycopg://", 1)
        self.engine = sqlalchemy.create_engine(url)

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            conn.execute(self.sa.text(sql), list(rows))

    def scalar(self, sql: str) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(self.sa.text(sql)).scalar()

    @contextmanager
    def transaction(self) -> Iterator[Run]:
        with self.engine.begin() as conn:

            def run(sql: str, args: dict[str, Any] | None = None) -> None:
                conn.execute(self.sa.text(sql), args or {})

            yield run

    def close(self) -> None:
        self.engine.dispose()


class DriverWriter(Writer):
    """sqlite3 or psycopg, as an application without an ORM writes."""

    def __init__(self, store_url: str) -> None:
        if store_url.startswith("sqlite"):
            self.dialect = "sqlite"
            self.conn: Any = sqlite3.connect(
                store_url.removeprefix("sqlite:///"), isolation_level=None, timeout=30
            )
        else:
            import psycopg

            self.dialect = "postgres"
            self.conn = psycopg.connect(store_url, autocommit=True)

    def _sql(self, sql: str) -> str:
        if self.dialect == "sqlite":
            return sql
        return re.sub(r"(?<!:):([a-z_]+)", r"%(\1)s", sql)

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        with self.transaction():
            if self.dialect == "sqlite":
                self.conn.executemany(sql, rows)
            else:
                self.conn.cursor().executemany(self._sql(sql), rows)

    def scalar(self, sql: str) -> Any:
        return self.conn.execute(sql).fetchone()[0]

    @contextmanager
    def transaction(self) -> Iterator[Run]:
        def run(sql: str, args: dict[str, Any] | None = None) -> None:
            self.conn.execute(self._sql(sql), args or {})

        self.conn.execute("BEGIN")
        try:
            yield run
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def make_writer(kind: str, store_url: str, *, with_store: bool = True) -> Writer:
    """A writer of this kind ("sqlalchemy" or "driver") on the store's database; with_store:
    oncefire's schema is made there first, as `oncefire migrate` makes it (a database that
    holds an application's tables gets it from nothing else)."""
    if with_store:
        from oncefire import App

        app = App(store_url)
        app.migrate()
        app.close()
    return SqlAlchemyWriter(store_url) if kind == "sqlalchemy" else DriverWriter(store_url)
