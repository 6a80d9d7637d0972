"""The order of a query's results and where its cursors cut it, as Firestore decides them.

Results are ordered by the order_by fields, then by the fields of inequality filters that
order_by does not name (in name order), then by the document's path (`__name__`), each added
order in the direction of the last given one. A cursor (start_at, start_after, end_at,
end_before) is a position in that order: values for the first orders, or a snapshot, whose
values for every order (its path last) it takes. Values compare as index_keys.rank orders
them: type by type, as Firestore does.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from oncefire.errors import InvalidDocumentError
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.firebase.firestore.document import DocumentReference, DocumentSnapshot
from oncefire.firebase.firestore.filters import Filter, inequality_fields
from oncefire.model.index_keys import rank
from oncefire.transforms import ArrayUnion, Increment, Maximum, Minimum

NAME = "__name__"  # the document's path, as an order or cursor field
Order = tuple[str, bool]  # (field path or NAME, is descending)
Cursor = tuple[Any, bool]  # (values or a snapshot, is before: the position is included)


class FieldPath:
    """A field path from its names, as `google.cloud.firestore.FieldPath`."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    @staticmethod
    def document_id() -> str:
        """The path that names a document itself, for order_by and cursors."""
        return NAME

    def to_api_repr(self) -> str:
        """The dotted path."""
        return ".".join(self.parts)


def effective_orders(orders: Sequence[Order], filters: tuple[Filter, ...]) -> list[Order]:
    """The full order of a query's results: its orders, the inequality fields they lack,
    the path."""
    full = list(orders)
    is_desc = full[-1][1] if full else False
    named = {field for field, _ in full}
    full += [(field, is_desc) for field in inequality_fields(filters) if field not in named]
    if NAME not in named:
        full.append((NAME, is_desc))
    return full


def key(snapshot: Snapshot, field: str) -> Any:
    """What a document is ordered by for one order field (its path's segments for NAME)."""
    if field == NAME:
        return tuple(snapshot.path.split("/"))
    return rank(snapshot.get(field))


def compare(snapshot: Snapshot, other: Snapshot, orders: Sequence[Order]) -> int:
    """-1, 0 or 1: whether snapshot comes before, with or after other in the order."""
    for field, is_desc in orders:
        mine, theirs = key(snapshot, field), key(other, field)
        if mine != theirs:
            return (-1 if mine < theirs else 1) * (-1 if is_desc else 1)
    return 0


def position(
    cursor: Cursor, orders: Sequence[Order], explicit: int, collection: str | None
) -> list[Any]:
    """The keys of a cursor, one for each of the first orders it gives a value for; explicit
    is how many orders the query named (a cursor of values may not go past them), and
    collection the query's own (None for a group), where a bare id for NAME lies."""
    given, _ = cursor
    fields = [field for field, _ in orders]
    if isinstance(given, DocumentSnapshot):
        if collection is not None and given.reference.parent.path != collection:
            raise InvalidDocumentError("Cannot use snapshot from another collection as a cursor.")
        values = [given.reference if field == NAME else _field_of(given, field) for field in fields]
    else:
        if not explicit:
            raise InvalidDocumentError(
                "Attempting to create a cursor with no fields to order on: call order_by() "
                "before start_at() / start_after() / end_before() / end_at()."
            )
        values = _values_of(copy.deepcopy(given), fields[:explicit])
        if len(values) > explicit:
            raise InvalidDocumentError(
                f"The cursor {values!r} does not match the order fields {fields[:explicit]!r}."
            )
    return [
        _key_of_value(field, value, collection)
        for field, value in zip(fields, values, strict=False)
    ]


def is_within(
    snapshot: Snapshot, keys: list[Any], orders: Sequence[Order], is_before: bool, is_start: bool
) -> bool:
    """Whether a document lies on the kept side of a start or end cursor at keys; is_before:
    the cursor was made by start_at or end_before."""
    compared = 0
    for (field, is_desc), wanted in zip(orders, keys, strict=False):
        mine = key(snapshot, field)
        if mine != wanted:
            compared = (-1 if mine < wanted else 1) * (-1 if is_desc else 1)
            break
    if is_start:
        return compared > 0 or (compared == 0 and is_before)
    return compared < 0 or (compared == 0 and not is_before)


def _field_of(snapshot: DocumentSnapshot, field: str) -> Any:
    try:
        return snapshot.get(field)
    except KeyError:
        raise InvalidDocumentError(
            f"The cursor's snapshot {snapshot.reference.path!r} has no field {field!r}, "
            "which the query orders by."
        ) from None


def _values_of(given: Any, fields: list[str]) -> list[Any]:
    if isinstance(given, dict):
        values = []
        for field in fields[: len(given)]:
            value: Any = given
            for name in [field] if field in given else field.split("."):
                if not isinstance(value, dict) or name not in value:
                    raise InvalidDocumentError(
                        f'The "order by" field path {field!r} is not present in the cursor '
                        f"data {given!r}."
                    )
                value = value[name]
            values.append(value)
        return values
    if isinstance(given, list | tuple):
        return list(given)
    raise InvalidDocumentError(
        f"A cursor is a DocumentSnapshot, a dict or a list of values; got {given!r}."
    )


def _key_of_value(field: str, value: Any, collection: str | None) -> Any:
    if isinstance(value, ArrayUnion | Increment | Maximum | Minimum):
        raise InvalidDocumentError("Transforms cannot be used as cursor values.")
    if field != NAME:
        return rank(value)
    if isinstance(value, DocumentReference):
        return tuple(value.path.split("/"))
    if isinstance(value, str) and collection is not None and "/" not in value:
        return (*collection.split("/"), value)
    if isinstance(value, str):
        return tuple(value.strip("/").split("/"))
    raise InvalidDocumentError(
        f"A cursor value for {NAME} is a DocumentReference or a document id; got {value!r}."
    )
