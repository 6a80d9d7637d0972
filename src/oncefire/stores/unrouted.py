"""The store side of the unrouted events' warning (operations/unrouted.py decides): their count
by origin, and the awaited sources, as named queries of sql/<dialect>/unrouted.sql run on
the store's own connections."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oncefire.stores import queries
from oncefire.stores.base import Store


@dataclass(frozen=True, slots=True)
class Awaited:
    """A source whose unrouted events are warned about."""

    kind: str  # 'document', 'message' or 'row'
    source: str  # the document pattern without wildcard names, the topic, or the table
    reason: str  # 'function' (a function took it) or 'kept' (an operator named it)
    name: str | None = None  # the function, for reason 'function'


def _sql(store: Store, name: str) -> str:
    return queries.load(store.dialect)[name]


def origins(store: Store) -> list[tuple[str, str, int]]:
    """(kind, origin, events) of the unrouted events, most first: kind is the type's first
    part ('document', 'message', 'row'), origin a collection, a topic or a table."""
    with store.read() as tx:
        rows = tx.conn.execute(_sql(store, "unrouted_origins")).fetchall()  # type: ignore[attr-defined]
    return [(str(kind), str(origin), int(n)) for kind, origin, n in rows]


def awaited(store: Store) -> list[Awaited]:
    """Every awaited source."""
    with store.read() as tx:
        rows = tx.conn.execute(_sql(store, "awaited_sources")).fetchall()  # type: ignore[attr-defined]
    return [Awaited(*row) for row in rows]


def await_sources(store: Store, sources: Sequence[Awaited], now: float) -> None:
    """Record awaited sources (one already recorded keeps its reason)."""
    if not sources:
        return
    sql = _sql(store, "await_source")
    with store.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        for s in sources:
            row = {"kind": s.kind, "source": s.source, "reason": s.reason, "name": s.name}
            conn.execute(sql, {**row, "since": now})


def ignore_sources(store: Store, sources: Sequence[tuple[str, str]]) -> int:
    """Forget these (kind, source) awaited sources; how many were recorded."""
    sql = _sql(store, "ignore_source")
    found = 0
    with store.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        for kind, source in sources:
            found += len(conn.execute(sql, {"kind": kind, "source": source}).fetchall())
    return found
