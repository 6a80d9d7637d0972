"""A whole document written on SQLite outside a transaction (Store.set_document): the rows
documents.Transaction.set makes, in one write transaction that runs the write's statements
and little else, its JSON, time and event id made by the caller before BEGIN.

A plain set() is the write applications make most; its cost is Python's around five
statements, so this path calls the driver itself (each statement still passes the fault
hooks) instead of the layers a transaction's general operations go through.
tests/contract/test_set_at_once.py holds its events to a transaction's, on generated
documents.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from oncefire import codec
from oncefire.events import EventType
from oncefire.paths import parent_of
from oncefire.stores import faults, queries
from oncefire.stores.catalog import Catalog, CatalogCache, Fanout
from oncefire.stores.sqlite_connections import SqliteConnections
from oncefire.stores.sqlite_tx import SqliteTx

SQL = queries.load("sqlite")


def set_document(
    connections: SqliteConnections,
    catalogs: CatalogCache,
    path: str,
    data_json: str,
    now: float,
    event_id: str,
    fanout_of: Callable[[Catalog], Fanout | None],
) -> bool:
    """Write a whole document and its event; False, having written nothing, when fanout_of
    answers None, or when the document was written after `now` (the transaction the caller
    falls back to reads the clock under the lock, so a document's times follow the order of
    its writes)."""
    collection = parent_of(path)
    with connections.transaction() as conn:
        key = {"collection": collection, "path": path}
        text, created, updated, version = _run(conn, "document_with_catalog", key).fetchone()
        tx = SqliteTx(conn, catalogs)  # the catalogue, index entries and deliveries
        fanout = fanout_of(tx.catalog_at(version))
        if fanout is None or (updated is not None and updated > now):
            return False
        kind, functions, before = EventType.DOCUMENT_CREATED, fanout.on_create, None
        if text is None:
            created = now
        else:
            current = {"data": codec.loads(text), "create_time": created, "update_time": updated}
            if text == data_json or codec.canonical(current["data"]) == codec.canonical(
                codec.loads(data_json)
            ):
                return True  # a no-op write changes nothing and emits no event
            kind, functions = EventType.DOCUMENT_UPDATED, fanout.on_update
            before = codec.dumps(current)
        document = {**key, "data": data_json, "create_time": created, "update_time": now}
        _run(conn, "put_document", document)
        if fanout.index_entries is not None:
            tx.set_index_entries(path, collection, fanout.index_entries)
        event_json = codec.document_event(before, data_json, created, now)
        event = {
            "id": event_id,
            "type": kind,
            "source": path,
            "time": now,
            "data": event_json,
            "size": len(event_json.encode()),
            "root_id": None,
            "depth": 0,
            "routing": None if functions else "unrouted",
        }
        _run(conn, "insert_event", event)
        if functions:
            deliveries = [
                {"event_id": event_id, "function": name, "run_at": now, "created_at": now}
                for name in functions
            ]
            tx.statements.execute_many("insert_delivery", deliveries)
    return True


def _run(conn: sqlite3.Connection, name: str, args: dict[str, Any]) -> sqlite3.Cursor:
    faults.before(name)
    cursor = conn.execute(SQL[name], args)
    faults.after(name)
    return cursor
