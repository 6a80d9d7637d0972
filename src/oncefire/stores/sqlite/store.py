"""The embedded store: one SQLite file in WAL mode, BEGIN IMMEDIATE for every write.

SqliteStore joins the queue and documents on SQLite (queue/sqlite.py, documents/sqlite.py) and
what is the same on PostgreSQL (SqlStore); here: opening, reopening and closing the file, its
connections and transactions, migrations and the wake-up watch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from oncefire.model import codec
from oncefire.settings import MEMORY_URLS, check_store_url
from oncefire.stores import migrations, queries
from oncefire.stores.base import FunctionEntry
from oncefire.stores.catalogue.cache import CatalogCache
from oncefire.stores.catalogue.tables import SqliteTableTriggers, TableTriggers
from oncefire.stores.connection import SqliteStatements
from oncefire.stores.documents.sqlite import SqliteDocuments
from oncefire.stores.queue.sqlite import SqliteQueue
from oncefire.stores.sql_store import SqlStore
from oncefire.stores.sqlite.connections import (
    BUSY_TIMEOUT_MS,
    OneStatement,
    SqliteConnections,
)
from oncefire.stores.sqlite.files import file_identity
from oncefire.stores.sqlite.filewatch import FileWatch

__all__ = ["BUSY_TIMEOUT_MS", "FunctionEntry", "SqliteStore"]

SQL = queries.load("sqlite")


class SqliteStore(SqliteQueue, SqliteDocuments, SqlStore):
    """oncefire's state in one SQLite file (or in memory, for scripts)."""

    dialect = "sqlite"

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "FULL",
        busy_wait: float | None = None,
        beside_tables: bool = False,
    ) -> None:
        """busy_wait: the most seconds a writer waits for the lock (at most 15 s in any case);
        beside_tables: create the schema even in a database holding tables of its own."""
        self.url = url
        self.beside_tables = beside_tables
        # sqlite:///relative.db, sqlite:////absolute.db, sqlite://:memory:
        check_store_url(url)
        self.is_memory = url in MEMORY_URLS
        self.path = "" if self.is_memory else url.removeprefix("sqlite:///")
        self.synchronous = synchronous.upper()
        self.connections = SqliteConnections(
            self.path, is_memory=self.is_memory, synchronous=self.synchronous
        )
        self.connections.wait_limit = busy_wait
        self._one_statement = OneStatement(self.connections)
        self._unflushed_statement = OneStatement(self.connections, flushed=False)
        self._watch: FileWatch | None = None
        self._catalogs = CatalogCache()  # functions and index fields, between transactions
        self.tables: TableTriggers = SqliteTableTriggers(self._write, SQL)
        try:
            self.migrate(beside_tables=beside_tables)
        except BaseException:
            self.close()  # a store that cannot be used keeps no file open
            raise
        self._opened = self._identity()

    # -- connections -------------------------------------------------------------------

    def _one(self) -> OneStatement:
        return self._one_statement

    def _unflushed(self) -> OneStatement:
        return self._unflushed_statement

    @contextmanager
    def _write(self, mode: str = "IMMEDIATE") -> Iterator[SqliteStatements]:
        with self.connections.transaction(mode) as conn:
            yield SqliteStatements(conn, SQL)

    def _snapshot(self) -> Any:
        return self._write("DEFERRED")

    def _decode(self, value: Any) -> Any:
        return codec.loads(value)

    def batch(self) -> Any:
        """Store calls this thread makes inside the block share one transaction."""
        return self.connections.batch()

    def _identity(self) -> tuple[int, int] | None:
        """(device, inode) of the store's file, None if there is none (or in memory)."""
        return None if self.is_memory else file_identity(self.path)

    def reopen_if_moved(self) -> bool:
        """Reopen the store when its file was deleted or replaced since it was opened (the
        old file's writes would reach nobody); whether it did."""
        if self.is_memory or self._identity() == self._opened:
            return False
        self.close()  # every thread opens a connection to the file at the path anew
        self._catalogs = CatalogCache()
        self.migrate(beside_tables=self.beside_tables)
        self._opened = self._identity()
        return True

    def close(self) -> None:
        """Close the store's connections and its file watch."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.connections.close()

    # -- schema ------------------------------------------------------------------------

    def _run_script(self, st: Any, sql: str) -> None:
        for statement in migrations.statements(sql):
            st.conn.execute(statement)
