"""Query filters as `google.cloud.firestore` writes them: FieldFilter, And, Or.

Operators take the Python client's spelling (`array_contains`, `array_contains_any`,
`not-in`), the other SDKs' (`array-contains`, `array-contains-any`) and `not_in`; each is
checked as oncefire's queries check it. A FieldFilter at the top of a query (or inside a top
And) is handed to the store's query, which can use an index; an Or is checked on what that
query returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from oncefire.errors import InvalidDocumentError
from oncefire.events import DocumentSnapshot as Snapshot
from oncefire.query import matches
from oncefire.transforms import ArrayUnion, Increment, Maximum, Minimum, field_names

OPERATORS = {
    "==": "==",
    "!=": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "in": "in",
    "not-in": "not-in",
    "not_in": "not-in",
    "array_contains": "array-contains",
    "array-contains": "array-contains",
    "array_contains_any": "array-contains-any",
    "array-contains-any": "array-contains-any",
}
INEQUALITIES = frozenset({"<", "<=", ">", ">=", "!=", "not-in"})
_TRANSFORMS = (ArrayUnion, Increment, Maximum, Minimum)


@dataclass(frozen=True, slots=True)
class FieldFilter:
    """A where() condition on one field, as `google.cloud.firestore.FieldFilter`."""

    field_path: str
    op_string: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class And:
    """Documents matching every filter, as `google.cloud.firestore.And`."""

    filters: list[Any]


@dataclass(frozen=True, slots=True)
class Or:
    """Documents matching at least one filter, as `google.cloud.firestore.Or`."""

    filters: list[Any]


Filter = FieldFilter | And | Or


def checked(field_path: Any, op_string: Any, value: Any) -> FieldFilter:
    """A FieldFilter with oncefire's operator name, or InvalidDocumentError (a ValueError,
    as the client raises) saying what is wrong."""
    field_names(field_path, "query field")
    op = OPERATORS.get(op_string) if isinstance(op_string, str) else None
    if op is None:
        raise InvalidDocumentError(
            f"Operator string {op_string!r} is invalid. Valid choices are: "
            f"{', '.join(sorted(OPERATORS))}."
        )
    is_nan = isinstance(value, float) and math.isnan(value)
    if (value is None or is_nan) and op not in ("==", "!="):
        raise InvalidDocumentError(
            'Only equality ("==") or not-equal ("!=") filters can be used with None or NaN values.'
        )
    if isinstance(value, _TRANSFORMS):
        raise InvalidDocumentError("Transforms cannot be used as where values.")
    if op in ("in", "not-in", "array-contains-any") and not isinstance(value, list | tuple):
        raise InvalidDocumentError(f"Operator {op_string!r} takes a list of values.")
    return FieldFilter(field_path, op, list(value) if isinstance(value, tuple) else value)


def normalised(item: Any) -> Filter:
    """A filter given to where(filter=...), its FieldFilters checked, as one of the three."""
    if isinstance(item, FieldFilter):
        return checked(item.field_path, item.op_string, item.value)
    if isinstance(item, And | Or):
        if not item.filters:
            raise InvalidDocumentError(f"{type(item).__name__} takes at least one filter.")
        return type(item)([normalised(inner) for inner in item.filters])
    raise InvalidDocumentError(f"where(filter={item!r}): pass a FieldFilter, And or Or.")


def flattened(filters: tuple[Filter, ...]) -> tuple[list[FieldFilter], list[Filter]]:
    """The FieldFilters every result must pass (top-level, or inside top-level Ands), and
    the rest (Ors) to check on the results."""
    simple: list[FieldFilter] = []
    rest: list[Filter] = []
    pending = list(filters)
    while pending:
        item = pending.pop(0)
        if isinstance(item, FieldFilter):
            simple.append(item)
        elif isinstance(item, And):
            pending[:0] = item.filters
        else:
            rest.append(item)
    return simple, rest


def passes(item: Filter, snapshot: Snapshot) -> bool:
    """Whether a document passes a filter, by oncefire's query rules."""
    if isinstance(item, FieldFilter):
        return matches(snapshot, item.field_path, item.op_string, item.value)
    if isinstance(item, And):
        return all(passes(inner, snapshot) for inner in item.filters)
    return any(passes(inner, snapshot) for inner in item.filters)


def inequality_fields(filters: tuple[Filter, ...]) -> list[str]:
    """The fields of the inequality filters, each once, in name order: what Firestore orders
    a query by when order_by does not name them."""
    found: set[str] = set()
    pending = list(filters)
    while pending:
        item = pending.pop()
        if isinstance(item, FieldFilter):
            if item.op_string in INEQUALITIES:
                found.add(item.field_path)
        else:
            pending.extend(item.filters)
    return sorted(found)
