"""How a query reads its collection: which declared index it walks, over which key range,
and whether the rows come in the query's order (so that the read stops at the limit)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oncefire.model.index_keys import first_of, index_key, past, rank

logger = logging.getLogger(__name__)

RANGES = ("<", "<=", ">", ">=")
Filter = tuple[str, str, Any]
Order = tuple[str, bool]


@dataclass(frozen=True, slots=True)
class Plan:
    """A read of a collection: by path (field None) or by a field's index from lo to hi."""

    field: str | None
    lo: str = ""
    hi: str = ""
    is_desc: bool = False
    is_ordered: bool = False  # rows come in the query's order: the limit ends the read
    is_empty: bool = False  # the filters on the field exclude every key


def key_range(field: str, filters: Sequence[Filter]) -> tuple[str, str]:
    """The smallest key range that holds every value of field the filters let through."""
    lo, hi = "", "~"  # below and above every key
    for name, op, value in filters:
        if name != field or op not in ("==", *RANGES):
            continue
        key, type_rank = index_key(value), rank(value)[0]
        # > and < keep their bound in the range: every filter is checked again in Python.
        lo = max(lo, key if op in ("==", ">", ">=") else first_of(type_rank))
        hi = min(hi, key if op in ("==", "<", "<=") else past(type_rank))
    return lo, hi


def choose(filters: Sequence[Filter], orders: Sequence[Order], indexed: set[str]) -> Plan:
    """The plan of a query, given the fields its collection has an index of."""

    def on(field: str, *, is_desc: bool = False, is_ordered: bool) -> Plan:
        lo, hi = key_range(field, filters)
        return Plan(field, lo, hi, is_desc, is_ordered, is_empty=lo > hi)

    if orders and orders[0][0] in indexed:
        return on(orders[0][0], is_desc=orders[0][1], is_ordered=len(orders) == 1)
    for ops in (("==",), RANGES):
        for field, op, _ in filters:
            if op in ops and field in indexed:
                return on(field, is_ordered=not orders and ops == ("==",))
    return Plan(None, is_ordered=not orders)


Shape = tuple[str, tuple[str, ...], tuple[str, ...]]
_warned_lock = threading.Lock()


def warn_full_read(
    warned: set[Shape], collection: str, filters: Sequence[Filter], orders: Sequence[Order]
) -> None:
    """Log, once per query shape (of those in `warned`), that a query reads its whole
    collection, and the field whose index would spare it."""
    if not filters and not orders:
        return  # a plain listing of a collection reads it all by design
    shape = (collection, tuple(f"{f} {op}" for f, op, _ in filters), tuple(f for f, _ in orders))
    with _warned_lock:
        if shape in warned:
            return
        warned.add(shape)
    field = orders[0][0] if orders else filters[0][0]
    logger.warning(
        "A query on %r (%s) reads the whole collection: declare an index with "
        "db.collection(%r).index(%r).",
        collection,
        ", ".join([*shape[1], *(f"order_by {f}" for f in shape[2])]),
        collection,
        field,
    )
