"""Queries as `google.cloud.firestore.Query` builds them, run on oncefire's queries.

The store's query does what it can (the FieldFilters, the order_by fields, and the limit when
nothing comes between it and the results); this module adds the rest in Python: Or filters,
the implicit orders (ordering.py), cursors, offset, limit_to_last, select, and collection
groups (the same query on every collection of that id, merged in order).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from oncefire import query as native
from oncefire.errors import InvalidDocumentError
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.firebase.firestore import ordering
from oncefire.firebase.firestore.aggregation import AggregationQuery
from oncefire.firebase.firestore.document import (
    DocumentSnapshot,
    Refs,
    listening_is_not_offered,
    project,
)
from oncefire.firebase.firestore.filters import (
    FieldFilter,
    Filter,
    checked,
    flattened,
    normalised,
    passes,
)
from oncefire.retry import is_count
from oncefire.transforms import field_names


class ReadGuard(Protocol):
    """A transaction, as a query asks it whether it may read now."""

    def before_read(self) -> None:
        """Raise ReadAfterWriteError once the transaction has writes."""
        ...


@dataclass(frozen=True, slots=True)
class Shape:
    """What a query asks for; every builder method returns a copy with one thing changed."""

    collection: str | None  # the collection's path; None for a collection group
    group_id: str | None = None  # the collection id of a collection group
    filters: tuple[Filter, ...] = ()
    orders: tuple[ordering.Order, ...] = ()
    limit: int | None = None
    limit_to_last: bool = False
    offset: int = 0
    start: ordering.Cursor | None = None
    end: ordering.Cursor | None = None
    projection: tuple[str, ...] | None = None


class Query:
    """A query, as `google.cloud.firestore.Query`."""

    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"

    def __init__(self, client: Refs, shape: Shape) -> None:
        self._client = client
        self._shape = shape

    def _with(self, **changes: Any) -> Query:
        return Query(self._client, replace(self._shape, **changes))

    def select(self, field_paths: Iterable[str]) -> Query:
        """Keep only these fields of each result (an empty list: none, only references)."""
        paths = tuple(field_paths)
        for path in paths:
            field_names(path, "select field")
        return self._with(projection=paths)

    def where(
        self,
        field_path: str | None = None,
        op_string: str | None = None,
        value: Any = None,
        *,
        filter: Filter | None = None,  # the client's keyword, though it shadows a builtin
    ) -> Query:
        """Keep documents matching a condition: where(field, op, value) or
        where(filter=FieldFilter(...) | And([...]) | Or([...]))."""
        if isinstance(field_path, FieldFilter | tuple):
            raise InvalidDocumentError(
                "FieldFilter object must be passed using keyword argument 'filter'."
            )
        if filter is not None and (field_path is not None or op_string is not None):
            raise InvalidDocumentError(
                "Can't pass in both the positional arguments and 'filter' at the same time."
            )
        added = normalised(filter) if filter is not None else checked(field_path, op_string, value)
        return self._with(filters=(*self._shape.filters, added))

    def order_by(self, field_path: str, direction: str = ASCENDING) -> Query:
        """Sort by a field (documents without it are left out), after earlier orders."""
        if field_path != ordering.NAME:
            field_names(field_path, "order_by field")
        if direction not in (self.ASCENDING, self.DESCENDING):
            raise InvalidDocumentError(
                f"Invalid direction {direction!r}. Must be one of 'ASCENDING' or 'DESCENDING'."
            )
        order = (field_path, direction == self.DESCENDING)
        return self._with(orders=(*self._shape.orders, order))

    def limit(self, count: int) -> Query:
        """At most count results (replaces limit_to_last)."""
        return self._with(limit=_count(count, "limit"), limit_to_last=False)

    def limit_to_last(self, count: int) -> Query:
        """The last count results, in the query's order (get() only)."""
        return self._with(limit=_count(count, "limit_to_last"), limit_to_last=True)

    def offset(self, num_to_skip: int) -> Query:
        """Skip this many results first."""
        return self._with(offset=_count(num_to_skip, "offset"))

    def start_at(self, document_fields_or_snapshot: Any) -> Query:
        """Start at this position (included): values of the orders, or a snapshot."""
        return self._with(start=(_cursor(document_fields_or_snapshot), True))

    def start_after(self, document_fields_or_snapshot: Any) -> Query:
        """Start just after this position."""
        return self._with(start=(_cursor(document_fields_or_snapshot), False))

    def end_before(self, document_fields_or_snapshot: Any) -> Query:
        """End just before this position."""
        return self._with(end=(_cursor(document_fields_or_snapshot), True))

    def end_at(self, document_fields_or_snapshot: Any) -> Query:
        """End at this position (included)."""
        return self._with(end=(_cursor(document_fields_or_snapshot), False))

    def count(self, alias: str | None = None) -> AggregationQuery:
        """An aggregation query counting the results."""
        return AggregationQuery(self).count(alias)

    def sum(self, field_ref: str, alias: str | None = None) -> AggregationQuery:
        """An aggregation query summing a numeric field over the results."""
        return AggregationQuery(self).sum(field_ref, alias)

    def avg(self, field_ref: str, alias: str | None = None) -> AggregationQuery:
        """An aggregation query averaging a numeric field over the results."""
        return AggregationQuery(self).avg(field_ref, alias)

    def get(self, transaction: ReadGuard | None = None, **_: Any) -> list[DocumentSnapshot]:
        """The results as a list."""
        return list(self._results(transaction))

    def stream(self, transaction: ReadGuard | None = None, **_: Any) -> Iterator[DocumentSnapshot]:
        """The results, one at a time."""
        if self._shape.limit_to_last:
            raise InvalidDocumentError(
                "Query results for queries that include limit_to_last() constraints cannot be "
                "streamed. Use Query.get() instead."
            )
        return self._results(transaction)

    def on_snapshot(self, callback: Any) -> Any:
        """Listeners are not offered (document.listening_is_not_offered)."""
        listening_is_not_offered()

    def _results(self, transaction: ReadGuard | None) -> Iterator[DocumentSnapshot]:
        if transaction is not None:
            transaction.before_read()
        shape = self._shape
        for snapshot in _cut(shape, self._matching()):
            reference = self._client.document(snapshot.path)
            found = DocumentSnapshot.of(reference, snapshot)
            yield found if shape.projection is None else project(found, shape.projection)

    def _matching(self) -> Iterator[Snapshot]:
        """The documents that pass the filters, in the full order, before cursors cut."""
        shape = self._shape
        orders = ordering.effective_orders(shape.orders, shape.filters)
        simple, rest = flattened(shape.filters)
        db = self._client.database
        if shape.collection is not None:
            names = [shape.collection]
        else:
            with db.reading() as tx:
                names = [n for n in tx.collection_names("") if _is_group(n, shape.group_id)]
        queries = []
        for name in names:
            found: native.Query = db.collection(name)
            for item in simple:
                found = found.where(item.field_path, item.op_string, item.value)
            for path, is_desc in orders:
                if path != ordering.NAME:
                    found = found.order_by(path, "DESCENDING" if is_desc else "ASCENDING")
            if _is_plain(shape, rest, orders) and shape.limit is not None:
                found = found.limit(shape.offset + shape.limit)  # nothing cuts before it
            queries.append(found)
        if len(queries) == 1 and _is_stores_order(orders):
            yield from (s for s in queries[0].stream() if all(passes(f, s) for f in rest))
            return
        merged = [s for q in queries for s in q.stream() if all(passes(f, s) for f in rest)]
        compare = functools.partial(ordering.compare, orders=orders)
        yield from sorted(merged, key=functools.cmp_to_key(compare))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Query) and other._shape == self._shape

    def __hash__(self) -> int:
        return hash((self._shape.collection, self._shape.group_id))


def _cut(shape: Shape, matching: Iterator[Snapshot]) -> Iterator[Snapshot]:
    """The results the cursors, offset and limits keep, in order."""
    orders = ordering.effective_orders(shape.orders, shape.filters)
    explicit = len(shape.orders)
    start = end = None
    if shape.start is not None:
        start = ordering.position(shape.start, orders, explicit, shape.collection), shape.start[1]
    if shape.end is not None:
        end = ordering.position(shape.end, orders, explicit, shape.collection), shape.end[1]
    wanted = None
    if shape.limit is not None and not shape.limit_to_last:
        wanted = shape.offset + shape.limit
    kept: list[Snapshot] = []
    for snapshot in matching:
        if wanted is not None and len(kept) >= wanted:
            break
        if end is not None and not ordering.is_within(snapshot, end[0], orders, end[1], False):
            break  # the results come in order: none after the end cursor is kept
        if start is None or ordering.is_within(snapshot, start[0], orders, start[1], True):
            kept.append(snapshot)
    kept = kept[shape.offset :]
    if shape.limit is not None:
        first = max(0, len(kept) - shape.limit) if shape.limit_to_last else 0
        kept = kept[first : first + shape.limit]
    yield from kept


def _is_plain(shape: Shape, rest: list[Filter], orders: list[ordering.Order]) -> bool:
    """Whether the store's query may stop at offset + limit: nothing is cut after it, and
    its order is the full one."""
    return (
        shape.collection is not None
        and not rest
        and shape.start is None
        and shape.end is None
        and not shape.limit_to_last
        and _is_stores_order(orders)
    )


def _is_stores_order(orders: list[ordering.Order]) -> bool:
    """Whether the store's query of one collection gives the full order: it orders by the
    fields, then by path in the last field's direction (ascending with none)."""
    fields = [is_desc for field, is_desc in orders if field != ordering.NAME]
    name, is_desc = orders[-1]
    return name == ordering.NAME and is_desc == (fields[-1] if fields else False)


def _is_group(collection: str, group_id: str | None) -> bool:
    return collection.rsplit("/", 1)[-1] == group_id


def _count(value: Any, what: str) -> int:
    if not is_count(value) or value < 0:
        raise InvalidDocumentError(f"{what}({value!r}) takes a whole number, zero or more.")
    return int(value)


def _cursor(given: Any) -> Any:
    return list(given) if isinstance(given, tuple) else given
