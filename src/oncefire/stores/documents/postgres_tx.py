"""Document and outbox operations inside one PostgreSQL transaction.

A write transaction locks what it reads: the row (FOR UPDATE) and, through a transaction-scoped
advisory lock, the key itself, so that two writers of a key that has no row yet still run one
after the other, as SQLite's BEGIN IMMEDIATE makes them.

A write transaction runs in pipeline mode: statements whose answer is not needed (the writes)
are queued and go with the next read or the COMMIT, so a document write costs two round
trips: the lock and the read (with the catalogue version), then the writes and the COMMIT.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from oncefire.events import EventType, StoredEvent
from oncefire.model import codec
from oncefire.stores import queries
from oncefire.stores.catalogue.cache import (
    Catalog,
    CatalogCache,
    Fanout,
    building_fields,
    fields_by_collection,
    function_entry,
)
from oncefire.stores.documents.sql_tx import SqlTx
from oncefire.stores.postgres.statements import Connection, PostgresStatements
from oncefire.stores.queue.types import Lease

__all__ = ["CHANNEL", "Connection", "PostgresTx", "lock_key", "set_document_args"]

# The NOTIFY channel; payloads carry delivery ids only, never data. The .sql files name it
# as a constant ('oncefire'), and notify with an empty payload past MAX_NOTIFY_IDS ids.
CHANNEL = "oncefire"
MAX_NOTIFY_IDS = 50


def lock_key(kind: str, key: str) -> int:
    """The advisory lock id of a key: a signed 64-bit hash, namespaced by kind."""
    digest = hashlib.blake2b(f"oncefire:{kind}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresTx(SqlTx):
    """Document and outbox operations inside one PostgreSQL transaction."""

    def __init__(
        self, conn: Connection, *, is_write: bool, catalogs: CatalogCache | None = None
    ) -> None:
        self.postgres = PostgresStatements(conn, queries.load("postgres"))
        super().__init__(self.postgres, catalogs)
        self.conn = conn
        self.is_write = is_write
        # Whether the version was read after this transaction locked a document: from then
        # on no index declaration (it locks the table against row locks) can come between.
        self._is_catalog_locked = False

    def _decode(self, data: Any) -> Any:
        return codec.decoded(data)  # jsonb comes back decoded, through oncefire's codec

    def get_document(self, path: str) -> dict[str, Any] | None:
        if self.is_write:
            # Serializes writers of one key, including a key whose row does not exist yet.
            self.postgres.execute("lock_key", {"key": lock_key("document", path)})
        cursor = self.postgres.cursor(
            "get_document_for_update" if self.is_write else "get_document", {"path": path}
        )
        # Pipelined with the lock and the read: no round trip of its own.
        version = None
        if self.is_write and not self._is_catalog_locked:
            version = self.postgres.cursor("catalog_version")
        row = cursor.fetchone()
        if version is not None:
            found = version.fetchone()
            assert found is not None  # the migration inserts the one row
            self._catalog = self._catalogs.at(int(found[0]), self._load_catalog)
            self._is_catalog_locked = True
        if row is None:
            return None
        return {"data": codec.decoded(row[0]), "create_time": row[1], "update_time": row[2]}

    def hold_lease(self, lease: Lease) -> Callable[[], bool]:
        """Check that the delivery is still running under lease, its row locked FOR SHARE
        until the transaction ends (a takeover waits for the commit). The check waits in the
        pipeline for the transaction's next read or its COMMIT: no round trip of its own."""
        cursor = self.postgres.cursor("hold_lease", {"id": lease.delivery_id, "token": lease.token})
        return lambda: cursor.fetchone() is not None

    def _load_catalog(self, version: int) -> Catalog:
        ((found, functions, fields),) = self.postgres.fetch("catalog")
        return Catalog(
            int(found),
            tuple(function_entry(r) for r in functions),
            fields_by_collection(fields),
            building_fields(fields),
        )

    def append(
        self,
        event: StoredEvent,
        functions: Sequence[str],
        run_at: float,
        *,
        is_new: bool = False,
        data_json: str | None = None,
    ) -> bool:
        # An id known to be new needs no answer: the statement waits in the pipeline.
        cursor = self.postgres.cursor(
            "append_event",
            {
                "id": event.id,
                "type": event.type,
                "source": event.source,
                "time": event.time,
                "data": codec.dumps(event.data) if data_json is None else data_json,
                "size": event.size,
                "root_id": event.root_id,
                "depth": event.depth,
                "run_at": run_at,
                "names": list(functions),
            },
        )
        if is_new:
            return True
        row = cursor.fetchone()
        return row is not None and int(row[0]) == 1

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        if not functions:
            return []
        rows = self.postgres.fetch(
            "add_deliveries", {"event_id": event_id, "run_at": run_at, "names": list(functions)}
        )
        return [int(i) for i in rows[0][0]] if rows else []


def set_document_args(
    catalog: Catalog,
    fanout: Fanout,
    *,
    path: str,
    collection: str,
    data_json: str,
    now: float,
    event_id: str,
) -> dict[str, Any]:
    """The arguments of the set_document query: a whole-document write and its event, in one
    statement (see migration 006)."""
    entries = fanout.index_entries
    return {
        "lock": lock_key("document", path),
        "path": path,
        "collection": collection,
        "data": data_json,
        "now": now,
        "catalog": catalog.version,
        "event_id": event_id,
        "created_type": EventType.DOCUMENT_CREATED.value,
        "updated_type": EventType.DOCUMENT_UPDATED.value,
        "on_create": fanout.on_create,
        "on_update": fanout.on_update,
        "fields": None if entries is None else list(entries),
        "values": None if entries is None else list(entries.values()),
    }
