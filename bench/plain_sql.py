"""The write-path baseline of oncefire's own overhead: the rows a document write with one
trigger stores (the document, its event and its delivery), written by hand-written SQL on
the store's own schema, one durable transaction per write.

SQLite: BEGIN IMMEDIATE, three INSERTs, COMMIT on a connection set up as oncefire sets its
own (WAL, synchronous=FULL). PostgreSQL: one statement of three INSERTs (two in WITH
clauses) in autocommit, so one round trip a write as oncefire's own write takes; the
store's triggers on these tables fire as they do for oncefire. What oncefire does besides
these rows (its lookups, locks, the catalogue check and the NOTIFY) is its overhead.

With `with_delivery=False` it writes the document and its event only: the least a write on
this schema can store that commits its event with its document (an event is never dropped),
so the ceiling of such a write path against raw one-row commits (`bench/write_path.py`,
`bench/many_writers.py --floor`).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from oncefire_harness import DOC, Target

from oncefire.model import codec

SQLITE_ROWS = (
    "INSERT INTO oncefire_documents (path, collection, data, create_time, update_time)"
    " VALUES (?, ?, ?, ?, ?)",
    "INSERT INTO oncefire_events (id, type, source, time, data, size) VALUES (?, ?, ?, ?, ?, ?)",
    "INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)"
    " VALUES (?, ?, 'pending', ?, ?)",
)
POSTGRES_ROWS = (
    "WITH d AS (INSERT INTO oncefire_documents"
    " (path, collection, data, create_time, update_time, data_size)"
    " VALUES (%(path)s, 'bench', %(data)s, %(now)s, %(now)s, %(data_size)s)),"
    " e AS (INSERT INTO oncefire_events (id, type, source, time, data, size)"
    " VALUES (%(id)s, 'document.created', %(path)s, %(now)s, %(event)s, %(size)s))"
    " INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)"
    " VALUES (%(id)s, %(function)s, 'pending', %(now)s, %(now)s)"
)
POSTGRES_LEAST = (
    "WITH d AS (INSERT INTO oncefire_documents"
    " (path, collection, data, create_time, update_time, data_size)"
    " VALUES (%(path)s, 'bench', %(data)s, %(now)s, %(now)s, %(data_size)s))"
    " INSERT INTO oncefire_events (id, type, source, time, data, size)"
    " VALUES (%(id)s, 'document.created', %(path)s, %(now)s, %(event)s, %(size)s)"
)


class PlainSqlWriter:
    """Writes a document, its event and its delivery in one transaction, by plain SQL (the
    delivery left out with with_delivery=False)."""

    def __init__(self, t: Target, function: str = "noop", *, with_delivery: bool = True) -> None:
        self.kind = t.kind
        self.function = function
        self.with_delivery = with_delivery
        self.data = codec.dumps(DOC)
        self.conn: Any
        if t.kind == "sqlite":
            self.conn = sqlite3.connect(str(t.path), isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = FULL")
        else:
            import psycopg

            self.conn = psycopg.connect(t.url, autocommit=True)

    def event_json(self, now: float) -> str:
        """The event's data as oncefire's codec writes it for a new document."""
        after = {"data": DOC, "create_time": now, "update_time": now}
        return codec.dumps({"before": None, "after": after})

    def write_one(self, key: str) -> None:
        """One document with its event (and delivery), in one durable transaction."""
        now = time.time()
        path = f"bench/{key}"
        event = self.event_json(now)
        event_id = str(uuid.uuid4())
        if self.kind == "sqlite":
            doc_sql, event_sql, delivery_sql = SQLITE_ROWS
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(doc_sql, (path, "bench", self.data, now, now))
                conn.execute(
                    event_sql, (event_id, "document.created", path, now, event, len(event))
                )
                if self.with_delivery:
                    conn.execute(delivery_sql, (event_id, self.function, now, now))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
        self.conn.execute(
            POSTGRES_ROWS if self.with_delivery else POSTGRES_LEAST,
            {
                "path": path,
                "data": self.data,
                "data_size": len(self.data),
                "now": now,
                "id": event_id,
                "event": event,
                "size": len(event),
                "function": self.function,
            },
        )

    def write(self, count: int, prefix: str) -> float:
        """Write count documents, one transaction each; return writes per second."""
        t0 = time.perf_counter()
        for i in range(count):
            self.write_one(f"sql-{prefix}{i}")
        return count / (time.perf_counter() - t0)

    def close(self) -> None:
        self.conn.close()
