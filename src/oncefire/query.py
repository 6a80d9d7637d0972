"""Queries on a collection: where / order_by / limit, evaluated the same on every store.

A query reads its collection in pages (keyset pagination), through the index of a declared
field when one serves it (query_plan), and checks every filter in Python on what it reads.
When the rows come in the query's order the read stops at the limit; a query that no index
serves reads the whole collection, page by page, and says so once in the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from oncefire.errors import InvalidDocumentError
from oncefire.events import DocumentSnapshot
from oncefire.features import usage
from oncefire.model import query_plan
from oncefire.model.index_keys import index_key
from oncefire.model.index_keys import rank as _rank
from oncefire.retry import is_count
from oncefire.transforms import field_names

if TYPE_CHECKING:
    from oncefire.stores.base import DocumentTx


class Reader(Protocol):
    """What a query reads through (documents.Database)."""

    warned_shapes: set[query_plan.Shape]

    def reading(self) -> AbstractContextManager[DocumentTx]:
        """The open transaction of this thread if any, else a read snapshot."""
        ...


OPERATORS = (
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not-in",
    "array-contains",
    "array-contains-any",
)
_MISSING = object()
PAGE = 500  # documents read a round trip

__all__ = ["OPERATORS", "PAGE", "Query", "index_key", "matches"]


def _compare(op: str, field: Any, value: Any) -> bool:
    if op == "==":
        return field is not _MISSING and _rank(field) == _rank(value)
    if op == "!=":
        return field is not _MISSING and field is not None and _rank(field) != _rank(value)
    if op == "in":
        return field is not _MISSING and any(_rank(field) == _rank(v) for v in value)
    if op == "not-in":
        return (
            field is not _MISSING
            and field is not None
            and all(_rank(field) != _rank(v) for v in value)
        )
    if op == "array-contains":
        return isinstance(field, list) and any(_rank(x) == _rank(value) for x in field)
    if op == "array-contains-any":
        return isinstance(field, list) and any(_rank(x) == _rank(v) for x in field for v in value)
    if field is _MISSING:
        return False
    left, right = _rank(field), _rank(value)
    if left[0] != right[0]:
        return False  # ranges compare values of one type only
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def matches(snapshot: DocumentSnapshot, field: str, op: str, value: Any) -> bool:
    """Whether a document's field satisfies `op value`, by the rules where() applies."""
    return _compare(op, snapshot.get(field, _MISSING), value)


def _sort_key(field: str) -> Callable[[DocumentSnapshot], tuple[int, Any]]:
    return lambda snap: _rank(snap.get(field))


class Query:
    """An immutable query; each method returns a narrower copy."""

    def __init__(
        self,
        db: Reader,
        path: str,
        filters: tuple[tuple[str, str, Any], ...] = (),
        orders: tuple[tuple[str, bool], ...] = (),
        count: int | None = None,
    ) -> None:
        self._db = db
        self.path = path
        self._filters = filters
        self._orders = orders
        self._count = count

    def _copy(self, **changes: Any) -> Query:
        values: dict[str, Any] = {
            "filters": self._filters,
            "orders": self._orders,
            "count": self._count,
        }
        values.update(changes)
        return Query(self._db, self.path, **values)

    def where(self, field: str, op: str, value: Any) -> Query:
        """Keep documents whose field satisfies `op value` (==, <, in, array-contains, ...)."""
        field_names(field, "query field")
        if op not in OPERATORS:
            raise InvalidDocumentError(f"Unknown query operator {op!r}; use one of {OPERATORS}.")
        if op in ("in", "not-in", "array-contains-any") and not isinstance(value, list | tuple):
            raise InvalidDocumentError(f"Operator {op!r} takes a list of values.")
        return self._copy(filters=(*self._filters, (field, op, value)))

    def order_by(self, field: str, direction: str = "ASCENDING") -> Query:
        """Sort by a field (documents without it are left out, as in Firestore)."""
        field_names(field, "order_by field")
        if not isinstance(direction, str) or direction.upper() not in (
            "ASCENDING",
            "DESCENDING",
            "ASC",
            "DESC",
        ):
            raise InvalidDocumentError("direction is 'ASCENDING' or 'DESCENDING'.")
        is_desc = direction.upper().startswith("DESC")
        return self._copy(orders=(*self._orders, (field, is_desc)))

    def limit(self, count: int) -> Query:
        """Return at most `count` documents."""
        if not is_count(count) or count < 0:
            raise InvalidDocumentError(f"limit({count!r}) takes a whole number, zero or more.")
        return self._copy(count=count)

    def stream(self) -> Iterator[DocumentSnapshot]:
        """The matching documents, in order, read page by page (memory bounded by a page
        when an index gives the query's order, or when there is no order_by)."""
        returned = 0
        try:
            for snap in self._matching():
                returned += 1
                yield snap
        finally:  # a function's store reads, for `oncefire cost`
            usage.count_reads(returned)

    def _matching(self) -> Iterator[DocumentSnapshot]:
        with self._db.reading() as tx:
            indexed = set(tx.complete_index_fields(self.path))
        plan = query_plan.choose(self._filters, self._orders, indexed)
        if plan.field is None:
            query_plan.warn_full_read(
                self._db.warned_shapes, self.path, self._filters, self._orders
            )
        if plan.is_empty or self._count == 0:
            return
        matching = (
            snap
            for snap in self._read(plan)
            if all(_compare(op, snap.get(f, _MISSING), v) for f, op, v in self._filters)
        )
        if plan.is_ordered:
            yield from islice(matching, self._count)
            return
        snaps = list(matching)
        last_is_desc = self._orders[-1][1] if self._orders else False
        # Ties follow the last order's direction by path, as Firestore orders them.
        snaps.sort(key=lambda snap: snap.path, reverse=last_is_desc)
        for field, is_desc in reversed(self._orders):
            snaps = [s for s in snaps if s.get(field, _MISSING) is not _MISSING]
            snaps.sort(key=_sort_key(field), reverse=is_desc)
        yield from snaps[: self._count]

    def get(self) -> list[DocumentSnapshot]:
        """The matching documents as a list, in order."""
        return list(self.stream())

    def _read(self, plan: query_plan.Plan) -> Iterator[DocumentSnapshot]:
        """The documents a plan reads, in its order, one page (one read) at a time."""
        field, has_more = plan.field, True
        after = (plan.hi, "\U0010ffff") if plan.is_desc else (plan.lo, "")
        size = PAGE
        if plan.is_ordered and self._count is not None:
            size = min(PAGE, self._count)  # a limit reads no more than it returns
        while has_more:
            with self._db.reading() as tx:
                if field is None:
                    rows = [(p, r, p) for p, r in tx.documents_page(self.path, after[1], size)]
                else:
                    rows = tx.index_page(
                        self.path, field, (plan.lo, plan.hi), after, plan.is_desc, size
                    )
            has_more = len(rows) == size
            for path, record, key in rows:
                after = (key, path)
                yield DocumentSnapshot.from_stored(path, record)
