"""How a Realtime Database query orders and cuts the children of a node, as the server does.

Children are ordered by their index (a child's value at a path, their key, or their value):
null, false, true, numbers, strings, then objects, ties by key; keys that are whole numbers
come before other keys, in number order. start_at, end_at and equal_to keep the children
whose index lies in the range, in that order; limit_to_first / limit_to_last keep the first
or last n of those. The result is then sorted as the Admin SDK sorts it before handing it
over (its _Sorter: by index, ties by key as text) into an OrderedDict.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from oncefire.firebase.db.values import shown

KEY, VALUE, PRIORITY = "$key", "$value", "$priority"
_NULL, _FALSE, _TRUE, _NUMBER, _TEXT, _OBJECT = range(6)


@dataclass(frozen=True, slots=True)
class Window:
    """What a query keeps: its order, range and limit."""

    order_by: str  # a child path ('a/b'), KEY, VALUE or PRIORITY
    start: Any = None
    end: Any = None
    first: int | None = None
    last: int | None = None


def _kind(value: Any) -> int:
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, int | float):
        return _NUMBER
    if isinstance(value, str):
        return _TEXT
    return _OBJECT


def _key_rank(key: str) -> tuple[int, Any]:
    """Whole-number keys first, by number; then the others, as text."""
    is_whole = key.lstrip("-").isdigit() and len(key) < 11
    return (0, int(key)) if is_whole else (1, key)


def _index_rank(index: Any) -> tuple[int, Any]:
    kind = _kind(index)
    return (kind, index if kind in (_NUMBER, _TEXT) else 0)


def index_of(key: str, child: Any, order_by: str) -> Any:
    """What a child is ordered by."""
    if order_by in (KEY, PRIORITY):
        return key
    if order_by == VALUE:
        return child
    for name in order_by.split("/"):
        child = child.get(name) if isinstance(child, dict) else None
    return child


def _server_rank(key: str, child: Any, order_by: str) -> tuple[Any, ...]:
    if order_by in (KEY, PRIORITY):
        return (_key_rank(key),)
    return (_index_rank(index_of(key, child, order_by)), _key_rank(key))


def _bound(value: Any, order_by: str) -> tuple[Any, ...]:
    return (_key_rank(str(value)),) if order_by in (KEY, PRIORITY) else (_index_rank(value),)


def apply(node: Any, window: Window) -> Any:
    """The result of a query on a node's stored value."""
    if not isinstance(node, dict):
        return shown(node)
    ranked = sorted(
        (_server_rank(key, child, window.order_by), key, child) for key, child in node.items()
    )
    kept = [
        (key, child)
        for rank, key, child in ranked
        if (window.start is None or rank[:1] >= _bound(window.start, window.order_by))
        and (window.end is None or rank[:1] <= _bound(window.end, window.order_by))
    ]
    if window.first is not None:
        kept = kept[: window.first]
    if window.last is not None:
        kept = kept[max(0, len(kept) - window.last) :]
    return _sorted(kept, window.order_by)


def _sorted(kept: list[tuple[str, Any]], order_by: str) -> OrderedDict[str, Any]:
    """The Admin SDK's client-side sort: by index (numbers and strings by value, other
    kinds by kind), ties by key as text."""

    def rank(item: tuple[str, Any]) -> tuple[Any, ...]:
        key, child = item
        index = index_of(key, child, order_by)
        kind = _kind(index)
        return (kind, index if kind in (_NUMBER, _TEXT) else 0, key)

    return OrderedDict((key, shown(child)) for key, child in sorted(kept, key=rank))
