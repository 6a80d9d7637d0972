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
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from oncefire import codec
from oncefire.events import EventType, StoredEvent
from oncefire.stores.base import FunctionRecord
from oncefire.stores.catalog import (
    VERSION_SQL,
    Catalog,
    CatalogCache,
    Fanout,
    fields_by_collection,
    function_record,
)

Connection = psycopg.Connection[tuple[Any, ...]]

CHANNEL = "oncefire"  # the NOTIFY channel; payloads carry delivery ids only, never data
MAX_NOTIFY_IDS = 50  # more deliveries than this in one statement notify with an empty payload


def lock_key(kind: str, key: str) -> int:
    """The advisory lock id of a key: a signed 64-bit hash, namespaced by kind."""
    digest = hashlib.blake2b(f"oncefire:{kind}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def notifying(source: str) -> str:
    """A SELECT of the ids in `source` (a CTE of delivery ids) that also wakes listening
    workers when the transaction commits; it returns no row, and wakes none, for no ids."""
    return (
        "SELECT array_agg(id ORDER BY id), pg_notify(%(channel)s, CASE WHEN count(*) <="
        f" {MAX_NOTIFY_IDS} THEN string_agg(id::text, ',' ORDER BY id) ELSE '' END)"
        f" FROM {source} HAVING count(*) > 0"
    )


class PostgresTx:
    """Document and outbox operations inside one PostgreSQL transaction."""

    def __init__(
        self, conn: Connection, *, is_write: bool, catalogs: CatalogCache | None = None
    ) -> None:
        self.conn = conn
        self.is_write = is_write
        self._catalogs = catalogs or CatalogCache()
        # Checked once a transaction: a batch of writes asks for it again and again, and a
        # registration committed meanwhile counts as later than this transaction.
        self._catalog: Catalog | None = None
        # Whether the version was read after this transaction locked a document: from then
        # on no index declaration (it locks the table against row locks) can come between.
        self._is_catalog_locked = False

    def _lock(self, kind: str, key: str) -> None:
        # Serializes writers of one key, including a key whose row does not exist yet.
        if self.is_write:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(kind, key),))

    def get_document(self, path: str) -> dict[str, Any] | None:
        self._lock("document", path)
        cursor = self.conn.execute(
            "SELECT data, create_time, update_time FROM oncefire_documents WHERE path = %s"
            + (" FOR UPDATE" if self.is_write else ""),
            (path,),
        )
        # Pipelined with the lock and the read: no round trip of its own.
        version = None
        if self.is_write and not self._is_catalog_locked:
            version = self.conn.execute(VERSION_SQL)
        row = cursor.fetchone()
        if version is not None:
            self._use_catalog(version.fetchone())
            self._is_catalog_locked = True
        if row is None:
            return None
        return {"data": row[0], "create_time": row[1], "update_time": row[2]}

    def _use_catalog(self, row: tuple[Any, ...] | None) -> Catalog:
        assert row is not None  # the migration inserts the one row
        self._catalog = self._catalogs.at(int(row[0]), self._load_catalog)
        return self._catalog

    def _catalog_now(self) -> Catalog:
        if self._catalog is not None:
            return self._catalog
        return self._use_catalog(self.conn.execute(VERSION_SQL).fetchone())

    def _load_catalog(self, version: int) -> Catalog:
        # One statement, so the version and what it labels come from one snapshot.
        row = self.conn.execute(
            "SELECT c.version, f.rows, i.rows FROM oncefire_catalog c,"
            " (SELECT coalesce(json_agg(json_build_array(name, kind, source, event_types,"
            " registered_at) ORDER BY position), '[]') FROM oncefire_functions) AS f (rows),"
            " (SELECT coalesce(json_agg(json_build_array(collection, field)), '[]')"
            " FROM oncefire_index_fields) AS i (rows)"
        ).fetchone()
        assert row is not None
        return Catalog(
            int(row[0]),
            tuple(function_record(r) for r in row[1]),
            fields_by_collection(row[2]),
        )

    def put_document(
        self, path: str, collection: str, data_json: str, create_time: float, update_time: float
    ) -> None:
        self.conn.execute(
            "INSERT INTO oncefire_documents (path, collection, data, create_time, update_time,"
            " data_size) VALUES (%s, %s, %s::jsonb, %s, %s, %s) ON CONFLICT (path) DO UPDATE"
            " SET data = excluded.data, update_time = excluded.update_time,"
            " data_size = excluded.data_size",
            (path, collection, data_json, create_time, update_time, len(data_json.encode())),
        )

    def delete_document(self, path: str) -> None:
        self.conn.execute("DELETE FROM oncefire_documents WHERE path = %s", (path,))
        self.conn.execute("DELETE FROM oncefire_index_entries WHERE path = %s", (path,))

    def list_documents(
        self, collection: str, equals: tuple[str, str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        if equals is None:
            cursor = self.conn.execute(
                "SELECT path, data, create_time, update_time FROM oncefire_documents"
                " WHERE collection = %s ORDER BY path",
                (collection,),
            )
        else:
            field, value = equals
            cursor = self.conn.execute(
                "SELECT d.path, d.data, d.create_time, d.update_time FROM oncefire_index_entries i"
                " JOIN oncefire_documents d ON d.path = i.path WHERE i.collection = %s"
                " AND i.field = %s AND md5(i.value) = md5(%s) AND i.value = %s ORDER BY d.path",
                (collection, field, value, value),
            )
        for path, data, created, updated in cursor.fetchall():
            yield path, {"data": data, "create_time": created, "update_time": updated}

    def index_fields(self, collection: str) -> list[str]:
        return self._catalog_now().fields_of(collection)

    def set_index_entries(self, path: str, collection: str, entries: dict[str, str]) -> None:
        self.conn.execute("DELETE FROM oncefire_index_entries WHERE path = %s", (path,))
        if entries:
            self.conn.execute(
                "INSERT INTO oncefire_index_entries (collection, field, value, path)"
                " SELECT %s, f, v, %s FROM unnest(%s::text[], %s::text[]) AS x (f, v)",
                (collection, path, list(entries), list(entries.values())),
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
        # The event and its deliveries in one statement; an id known to be new needs no
        # answer, so the statement waits in the pipeline for the COMMIT.
        cursor = self.conn.execute(
            "WITH e AS (INSERT INTO oncefire_events (id, type, source, time, data, size)"
            " VALUES (%(id)s, %(type)s, %(source)s, %(time)s, %(data)s::jsonb, %(size)s)"
            " ON CONFLICT (id) DO NOTHING RETURNING id),"
            " added AS (INSERT INTO oncefire_deliveries (event_id, function, state, run_at,"
            " created_at) SELECT e.id, f.name, 'pending', %(run_at)s, %(time)s FROM e"
            " CROSS JOIN unnest(%(names)s::text[]) WITH ORDINALITY AS f (name, n) ORDER BY f.n"
            " RETURNING id) SELECT (SELECT count(*) FROM e), n.notified FROM (SELECT 1) AS one"
            " LEFT JOIN (" + notifying("added") + ") AS n (ids, notified) ON true",
            {
                "id": event.id,
                "type": event.type,
                "source": event.source,
                "time": event.time,
                "data": codec.dumps(event.data) if data_json is None else data_json,
                "size": event.size,
                "run_at": run_at,
                "names": list(functions),
                "channel": CHANNEL,
            },
        )
        if is_new:
            return True
        row = cursor.fetchone()
        return row is not None and int(row[0]) == 1

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        """New pending deliveries of an existing event (a redelivery); their ids."""
        return self._insert_deliveries(event_id, functions, run_at, run_at)

    def _insert_deliveries(
        self, event_id: str, functions: Sequence[str], run_at: float, created_at: float
    ) -> list[int]:
        if not functions:
            return []
        row = self.conn.execute(
            "WITH added AS (INSERT INTO oncefire_deliveries (event_id, function, state, run_at,"
            " created_at) SELECT %(event)s, f.name, 'pending', %(run_at)s, %(created_at)s"
            " FROM unnest(%(names)s::text[]) WITH ORDINALITY AS f (name, n) ORDER BY f.n"
            " RETURNING id) " + notifying("added"),
            {
                "event": event_id,
                "run_at": run_at,
                "created_at": created_at,
                "names": list(functions),
                "channel": CHANNEL,
            },
        ).fetchone()
        return [] if row is None else [int(i) for i in row[0]]

    def claim_key(self, key: str, now: float, expires_at: float) -> bool:
        # No advisory lock needed: a second INSERT of the key waits on the first one's index
        # entry, then sees its commit (conflict: False) or its rollback (insert: True).
        row = self.conn.execute(
            "INSERT INTO oncefire_claims (key, created_at, expires_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET created_at = excluded.created_at,"
            " expires_at = excluded.expires_at WHERE oncefire_claims.expires_at <= %s"
            " RETURNING true",  # a row, not a row count: counts wait for the pipeline's sync
            (key, now, expires_at, now),
        ).fetchone()
        return row is not None

    def record_dedupe(self, function: str, now: float) -> None:
        self.conn.execute(
            "INSERT INTO oncefire_dedupe_hits (function, at) VALUES (%s, %s)", (function, now)
        )


SET_DOCUMENT_SQL = (
    "SELECT oncefire_set_document(%(lock)s, %(path)s, %(collection)s, %(data)s, %(now)s,"
    " %(catalog)s, %(event_id)s, %(created_type)s, %(updated_type)s, %(on_create)s,"
    " %(on_update)s, %(fields)s, %(values)s, %(channel)s, %(notify_most)s)"
)


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
    """The arguments of SET_DOCUMENT_SQL: a whole-document write and its event, in one
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
        "channel": CHANNEL,
        "notify_most": MAX_NOTIFY_IDS,
    }
