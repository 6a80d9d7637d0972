"""Document and outbox operations inside one SQLite transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from oncefire import codec
from oncefire.events import StoredEvent
from oncefire.paths import parent_of
from oncefire.stores.base import FunctionRecord
from oncefire.stores.catalog import (
    VERSION_SQL,
    Catalog,
    CatalogCache,
    fields_by_collection,
    function_record,
)


def marks(values: Sequence[Any]) -> str:
    """As many ? placeholders as values, comma-separated."""
    return ",".join("?" * len(values))


class SqliteTx:
    """Document and outbox operations inside one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, catalogs: CatalogCache | None = None) -> None:
        self.conn = conn
        self._catalogs = catalogs or CatalogCache()
        # Checked once a transaction: a transaction sees one snapshot of the catalogue.
        self._catalog: Catalog | None = None

    def get_document(self, path: str) -> dict[str, Any] | None:
        if self._catalog is None:
            # The catalogue version rides along with the first read: no statement of its own.
            row = self.conn.execute(
                "SELECT d.data, d.create_time, d.update_time, c.version FROM oncefire_catalog c"
                " LEFT JOIN oncefire_documents d ON d.collection = ? AND d.path = ?",
                (parent_of(path), path),
            ).fetchone()
            self._catalog = self._catalogs.at(row[3], self._load_catalog)
        else:
            row = self.conn.execute(
                "SELECT data, create_time, update_time FROM oncefire_documents"
                " WHERE collection = ? AND path = ?",
                (parent_of(path), path),
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return {"data": codec.loads(row[0]), "create_time": row[1], "update_time": row[2]}

    def _catalog_now(self) -> Catalog:
        if self._catalog is None:
            (version,) = self.conn.execute(VERSION_SQL).fetchone()
            self._catalog = self._catalogs.at(version, self._load_catalog)
        return self._catalog

    def _load_catalog(self, version: int) -> Catalog:
        # Read in the caller's transaction, one snapshot with the version it was given.
        functions = self.conn.execute(
            "SELECT name, kind, source, event_types, registered_at FROM oncefire_functions"
            " ORDER BY rowid"
        )
        fields = list(self.conn.execute("SELECT collection, field FROM oncefire_index_fields"))
        return Catalog(
            version, tuple(function_record(r) for r in functions), fields_by_collection(fields)
        )

    def put_document(
        self, path: str, collection: str, data_json: str, create_time: float, update_time: float
    ) -> None:
        self.conn.execute(
            "INSERT INTO oncefire_documents (path, collection, data, create_time, update_time)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (collection, path) DO UPDATE"
            " SET data = excluded.data, update_time = excluded.update_time",
            (path, collection, data_json, create_time, update_time),
        )

    def delete_document(self, path: str) -> None:
        self.conn.execute(
            "DELETE FROM oncefire_documents WHERE collection = ? AND path = ?",
            (parent_of(path), path),
        )
        self.conn.execute("DELETE FROM oncefire_index_entries WHERE path = ?", (path,))

    def list_documents(
        self, collection: str, equals: tuple[str, str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        if equals is None:
            cursor = self.conn.execute(
                "SELECT path, data, create_time, update_time FROM oncefire_documents"
                " WHERE collection = ? ORDER BY path",
                (collection,),
            )
        else:
            cursor = self.conn.execute(
                # CROSS JOIN keeps the index entries outside: SQLite would otherwise walk
                # the whole collection and probe the entries of each document.
                "SELECT d.path, d.data, d.create_time, d.update_time"
                " FROM oncefire_index_entries i CROSS JOIN oncefire_documents d"
                " ON d.collection = i.collection AND d.path = i.path"
                " WHERE i.collection = ? AND i.field = ? AND i.value = ? ORDER BY d.path",
                (collection, *equals),
            )
        for path, data, created, updated in cursor:
            yield path, {"data": codec.loads(data), "create_time": created, "update_time": updated}

    def index_fields(self, collection: str) -> list[str]:
        return self._catalog_now().fields_of(collection)

    def set_index_entries(self, path: str, collection: str, entries: dict[str, str]) -> None:
        self.conn.execute("DELETE FROM oncefire_index_entries WHERE path = ?", (path,))
        self.conn.executemany(
            "INSERT INTO oncefire_index_entries (collection, field, value, path)"
            " VALUES (?, ?, ?, ?)",
            [(collection, f, v, path) for f, v in entries.items()],
        )

    def functions(self) -> list[FunctionRecord]:
        return list(self._catalog_now().functions)

    def append(
        self,
        event: StoredEvent,
        functions: Sequence[str],
        run_at: float,
        *,
        is_new: bool = False,
        data_json: str | None = None,
    ) -> bool:
        cursor = self.conn.execute(
            "INSERT INTO oncefire_events (id, type, source, time, data, size)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (
                event.id,
                event.type,
                event.source,
                event.time,
                codec.dumps(event.data) if data_json is None else data_json,
                event.size,
            ),
        )
        if cursor.rowcount == 0:
            return False
        self.conn.executemany(
            "INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)"
            " VALUES (?, ?, 'pending', ?, ?)",
            [(event.id, name, run_at, event.time) for name in functions],
        )
        return True

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        """New pending deliveries of an existing event (a redelivery); their ids."""
        ids = []
        for name in functions:
            cursor = self.conn.execute(
                "INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)"
                " VALUES (?, ?, 'pending', ?, ?)",
                (event_id, name, run_at, run_at),
            )
            ids.append(int(cursor.lastrowid or 0))
        return ids

    def claim_key(self, key: str, now: float, expires_at: float) -> bool:
        cursor = self.conn.execute(
            "INSERT INTO oncefire_claims (key, created_at, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET created_at = excluded.created_at,"
            " expires_at = excluded.expires_at WHERE oncefire_claims.expires_at <= ?",
            (key, now, expires_at, now),
        )
        return cursor.rowcount == 1

    def record_dedupe(self, function: str, now: float) -> None:
        self.conn.execute(
            "INSERT INTO oncefire_dedupe_hits (function, at) VALUES (?, ?)", (function, now)
        )
