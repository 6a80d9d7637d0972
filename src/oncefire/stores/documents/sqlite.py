"""Documents on SQLite: transactions under BEGIN IMMEDIATE (reads DEFERRED), each a SqliteTx,
and the whole-document write of its own statements (sqlite_write.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from oncefire.stores import queries
from oncefire.stores.catalogue.cache import Catalog, CatalogCache, Fanout
from oncefire.stores.connection import SqliteStatements
from oncefire.stores.documents import sqlite_write
from oncefire.stores.documents.sqlite_tx import SqliteTx
from oncefire.stores.sqlite.connections import SqliteConnections

SQL = queries.load("sqlite")


class SqliteDocuments:
    """Mixed into SqliteStore: the Documents contract over its connections."""

    connections: SqliteConnections
    _catalogs: CatalogCache

    @contextmanager
    def transaction(self) -> Iterator[SqliteTx]:
        """A write transaction (BEGIN IMMEDIATE) for documents and events."""
        with self.connections.transaction() as conn:
            yield SqliteTx(conn, self._catalogs)

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        """A read transaction for document reads and queries."""
        with self.connections.transaction("DEFERRED") as conn:
            yield SqliteTx(conn, self._catalogs)

    def set_document(
        self,
        path: str,
        data_json: str,
        now: float,
        event_id: str,
        fanout_of: Callable[[Catalog], Fanout | None],
    ) -> bool:
        """A whole document and its event in one transaction of the write's own statements
        (documents/sqlite_write.py); False, writing nothing, when a transaction must write it."""
        return sqlite_write.set_document(
            self.connections, self._catalogs, path, data_json, now, event_id, fanout_of
        )

    @contextmanager
    def _index_transaction(self) -> Iterator[tuple[SqliteStatements, SqliteTx]]:
        """BEGIN IMMEDIATE: no write can come between a chunk's read and its entries."""
        with self.connections.transaction() as conn:
            yield SqliteStatements(conn, SQL), SqliteTx(conn)
