"""A whole document written on SQLite outside a transaction (Documents.set_document): the rows
documents.Transaction.set makes, in one write transaction that runs the write's statements
and little else, its JSON, time and event id made by the caller before BEGIN.

A plain set() is the write applications make most; its cost is Python's around five
statements, so this path calls the driver itself (each statement still passes the fault
hooks), binding tuples to `?` parameters (a named one costs a dict lookup a parameter),
instead of the layers a transaction's general operations go through.
tests/contract/documents/test_set_at_once.py holds its events to a transaction's, on generated
documents.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from oncefire.events import EventType
from oncefire.model import codec
from oncefire.model.paths import parent_of
from oncefire.stores import faults, queries
from oncefire.stores.catalogue.cache import Catalog, CatalogCache, Fanout
from oncefire.stores.documents.sqlite_tx import SqliteTx
from oncefire.stores.sqlite.connections import SqliteConnections

SQL = queries.load("sqlite")
# The write's statements with `?` for their parameters, bound from tuples in this order.
POSITIONAL = {
    name: queries.positional(SQL[name], names)
    for name, names in {
        "document_with_catalog": ("collection", "path"),
        "put_document": ("path", "collection", "data", "create_time", "update_time"),
        "insert_event": (
            "id",
            "type",
            "source",
            "time",
            "data",
            "size",
            "routing",
            "root_id",
            "depth",
        ),
        "insert_delivery": ("event_id", "function", "run_at", "created_at"),
    }.items()
}


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
        found = _run(conn, "document_with_catalog", (collection, path)).fetchone()
        text, created, updated, version = found
        tx = SqliteTx(conn, catalogs)  # the catalogue and the index entries
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
        _run(conn, "put_document", (path, collection, data_json, created, now))
        if fanout.index_entries is not None:
            tx.set_index_entries(path, collection, fanout.index_entries)
        event_json = codec.document_event(before, data_json, created, now)
        size = len(event_json.encode())
        routing = None if functions else "unrouted"
        _run(conn, "insert_event", (event_id, kind, path, now, event_json, size, routing, None, 0))
        for name in functions:
            _run(conn, "insert_delivery", (event_id, name, now, now))
    return True


def _run(conn: sqlite3.Connection, name: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
    faults.before(name)
    cursor = conn.execute(POSITIONAL[name], args)
    faults.after(name)
    return cursor
