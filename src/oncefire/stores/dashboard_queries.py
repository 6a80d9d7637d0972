"""The store reads and writes of the dashboard, the metrics and the alerts.

Their SQL lives in `sql/{dialect}/dashboard.sql` as named queries (`-- name: xyz`); this
module runs them on the store's own connections, through `store.read()` (a snapshot) and
`store.transaction()` (a write), so it works on any store that gives its connection as
`tx.conn`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model import codec
from oncefire.stores import queries
from oncefire.stores.base import Store


def _fetch(conn: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    if cursor.description is None:
        return []
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def rows(store: Store, name: str, **params: Any) -> list[dict[str, Any]]:
    """Run a named read query on a snapshot; its rows as dicts."""
    sql = queries.load(store.dialect)[name]
    with store.read() as tx:
        return _fetch(tx.conn, sql, params)  # type: ignore[attr-defined]


def write(store: Store, name: str, **params: Any) -> int:
    """Run a named write statement in its own transaction; the rows it changed."""
    with writing(store) as writes:
        return writes.run(name, **params)


class Writes:
    """Named statements inside one store transaction, beside the transaction's own calls."""

    def __init__(self, store: Store, tx: Any) -> None:
        self.tx = tx
        self._sql = queries.load(store.dialect)

    def run(self, name: str, **params: Any) -> int:
        """Run a named statement; the rows it changed (a pipelined PostgreSQL transaction
        knows that only from the rows a RETURNING statement gives back)."""
        sql = self._sql[name]
        cursor = self.tx.conn.execute(sql, params)
        return len(cursor.fetchall()) if " RETURNING " in sql else int(cursor.rowcount)


@contextmanager
def writing(store: Store) -> Iterator[Writes]:
    """A store transaction for named statements (and the DocumentTx calls, as `.tx`)."""
    with store.transaction() as tx:
        yield Writes(store, tx)


def event(store: Store, event_id: str) -> StoredEvent | None:
    """One event by id, or None."""
    found = rows(store, "event", id=event_id)
    if not found:
        return None
    row = found[0]
    data = row["data"]
    if isinstance(data, str | bytes):
        data = codec.loads(data)
    return StoredEvent(
        row["id"],
        row["type"],
        row["source"],
        row["time"],
        data,
        row["size"],
        row["root_id"],
        row["depth"],
    )


def mark(store: Store, key: str, at: float) -> bool:
    """Record that an alert fired; False if it was already recorded."""
    return write(store, "mark", key=key, at=at) == 1


def is_marked(store: Store, key: str) -> bool:
    """Whether an alert's mark is recorded."""
    return bool(rows(store, "is_marked", key=key))


def unmark(store: Store, key: str) -> bool:
    """Forget an alert's mark; False if there was none."""
    return write(store, "unmark", key=key) == 1
