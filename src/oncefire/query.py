"""Queries on a collection: where / order_by / limit, evaluated the same on every store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oncefire.errors import InvalidDocumentError
from oncefire.events import DocumentSnapshot

if TYPE_CHECKING:
    from oncefire.documents import Database

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


def index_key(value: Any) -> str:
    """The canonical text of a value in a field index (1 and 1.0 are the same key)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, datetime):
        return "t:" + value.astimezone(UTC).isoformat()  # as stored: in UTC
    return "j:" + json.dumps(value, sort_keys=True, separators=(",", ":"))


def _rank(value: Any) -> tuple[int, Any]:
    """A sort key that orders values of different types as Firestore does."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, datetime):
        return (3, value.timestamp())
    if isinstance(value, str):
        return (4, value)
    return (5, json.dumps(value, sort_keys=True, default=str))


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


def _sort_key(field: str) -> Callable[[DocumentSnapshot], tuple[int, Any]]:
    return lambda snap: _rank(snap.get(field))


class Query:
    """An immutable query; each method returns a narrower copy."""

    def __init__(
        self,
        db: Database,
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
        if op not in OPERATORS:
            raise InvalidDocumentError(f"Unknown query operator {op!r}; use one of {OPERATORS}.")
        if op in ("in", "not-in", "array-contains-any") and not isinstance(value, list | tuple):
            raise InvalidDocumentError(f"Operator {op!r} takes a list of values.")
        return self._copy(filters=(*self._filters, (field, op, value)))

    def order_by(self, field: str, direction: str = "ASCENDING") -> Query:
        """Sort by a field (documents without it are left out, as in Firestore)."""
        if direction.upper() not in ("ASCENDING", "DESCENDING", "ASC", "DESC"):
            raise InvalidDocumentError("direction is 'ASCENDING' or 'DESCENDING'.")
        is_desc = direction.upper().startswith("DESC")
        return self._copy(orders=(*self._orders, (field, is_desc)))

    def limit(self, count: int) -> Query:
        """Return at most `count` documents."""
        if count < 0:
            raise InvalidDocumentError("limit() takes a count of zero or more.")
        return self._copy(count=count)

    def stream(self) -> Iterator[DocumentSnapshot]:
        """The matching documents, in order."""
        yield from self.get()

    def get(self) -> list[DocumentSnapshot]:
        """The matching documents as a list, in order."""
        with self._db.reading() as tx:
            equals = None
            indexed = set(tx.index_fields(self.path))
            for field, op, value in self._filters:
                if op == "==" and field in indexed:
                    equals = (field, index_key(value))
                    break
            snaps = [
                DocumentSnapshot.from_record(path, record)
                for path, record in tx.list_documents(self.path, equals)
            ]
        snaps = [
            s
            for s in snaps
            if all(_compare(op, s.get(f, _MISSING), v) for f, op, v in self._filters)
        ]
        for field, is_desc in reversed(self._orders):
            snaps = [s for s in snaps if s.get(field, _MISSING) is not _MISSING]
            snaps.sort(key=_sort_key(field), reverse=is_desc)
        return snaps if self._count is None else snaps[: self._count]
