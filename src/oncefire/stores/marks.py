"""The small writes of the alerts, the budgets and the operators' actions: alert marks (an
alert fires once under its key) and audit entries, as named statements of
`sql/<dialect>/dashboard.sql` run in a store transaction. Reads go through `store.reads`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from oncefire.stores.base import DocumentTx, Store
from oncefire.stores.connection import Statements
from oncefire.stores.documents.sql_tx import statements_of


class Writes:
    """Named statements inside one store transaction, beside the transaction's own calls."""

    def __init__(self, tx: DocumentTx) -> None:
        self.tx = tx
        self._st: Statements = statements_of(tx)

    def changed(self, name: str, **params: Any) -> int:
        """Run a statement that ends in RETURNING; the rows it changed (a pipelined PostgreSQL
        transaction knows that only from the rows it gives back)."""
        return len(self._st.fetch(name, params))

    def run(self, name: str, **params: Any) -> None:
        """Run a statement whose answer is not needed."""
        self._st.execute(name, params)


@contextmanager
def writing(store: Store) -> Iterator[Writes]:
    """A store transaction for named statements (and the DocumentTx calls, as `.tx`)."""
    with store.transaction() as tx:
        yield Writes(tx)


def mark_at(store: Store, key: str) -> float | None:
    """When an alert's mark was recorded, or None."""
    with store.read() as tx:
        rows = statements_of(tx).fetch("is_marked", {"key": key})
    return float(rows[0][1]) if rows else None


def is_marked(store: Store, key: str) -> bool:
    """Whether an alert's mark is recorded."""
    return mark_at(store, key) is not None


def mark(store: Store, key: str, at: float) -> bool:
    """Record that an alert fired; False if it was already recorded."""
    with writing(store) as writes:
        return writes.changed("mark", key=key, at=at) == 1


def set_mark(store: Store, key: str, at: float) -> None:
    """Record a mark at `at`, or move it there."""
    with writing(store) as writes:
        writes.run("set_mark", key=key, at=at)


def unmark(store: Store, key: str) -> bool:
    """Forget an alert's mark; False if there was none."""
    with writing(store) as writes:
        return writes.changed("unmark", key=key) == 1


def forget_marks(store: Store, before: float) -> None:
    """Forget the dead-letter alerts' marks made before a time."""
    with writing(store) as writes:
        writes.run("forget_marks", before=before)


def add_audit(writes: Writes, **entry: Any) -> None:
    """Record an operator's action (at, actor, action, function, target, count, detail)."""
    writes.run("add_audit", **entry)
