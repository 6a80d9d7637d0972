"""The store read `oncefire demo` makes before it writes (oncefire/demo/guard.py decides), a
named query of sql/<dialect>/demo.sql run through the store's statements."""

from __future__ import annotations

from collections.abc import Sequence

from oncefire.stores.base import Store
from oncefire.stores.documents.sql_tx import statements_of


def other_document(store: Store, own: Sequence[str]) -> str | None:
    """The path of a document outside these collections, if the store holds one."""
    with store.read() as tx:
        rows = statements_of(tx).fetch("demo_other_document", {"own": list(own)})
    return str(rows[0][0]) if rows else None
