"""The store read `oncefire demo` makes before it writes (oncefire/demo/guard.py decides), a
named query of sql/<dialect>/demo.sql run on the store's own connection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oncefire.stores import queries
from oncefire.stores.base import Store
from oncefire.stores.connection import expand_lists


def other_document(store: Store, own: Sequence[str]) -> str | None:
    """The path of a document outside these collections, if the store holds one."""
    sql = queries.load(store.dialect)["demo_other_document"]
    args: dict[str, Any] = {"own": list(own)}
    with store.read() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        cursor = conn.execute(*expand_lists(sql, args)) if store.dialect == "sqlite" else None
        rows = (cursor or conn.execute(sql, args)).fetchall()
    return str(rows[0][0]) if rows else None
