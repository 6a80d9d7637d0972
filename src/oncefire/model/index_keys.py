"""The value keys of a field index: text that sorts as the values do (Firestore's order).

A key is the type's rank (null, booleans, numbers, times, strings, GeoPoints, lists and
maps), a colon, then text that sorts within the type: numbers and times as 16 hex digits of
an order-preserving transform of their float64, strings as themselves. Every key of rank r
lies in [f"{r}:", f"{r};"), so a range filter is a range walk. Integers past 2**53 and, on
PostgreSQL, strings past 256 characters key inexactly: queries check filters again in Python.
"""

from __future__ import annotations

import json
import math
import struct
from datetime import UTC, datetime
from typing import Any

from oncefire.model.codec import GeoPoint

NULL, BOOL, NUMBER, TIME, TEXT, OTHER = range(6)


def rank(value: Any) -> tuple[int, Any]:
    """A sort key that orders values of different types as Firestore does."""
    if value is None:
        return (NULL, 0)
    if isinstance(value, bool):
        return (BOOL, value)
    if isinstance(value, int | float):
        # An integer past 2**53 ranks as its nearest float, as it is keyed (and as PostgreSQL's
        # jsonb gives back a float like 1e300: as an integer of 301 digits).
        exact = isinstance(value, float) or abs(value) <= 2**53
        return (NUMBER, value if exact else _as_float(value))
    if isinstance(value, datetime):
        return (TIME, value.timestamp())
    if isinstance(value, str):
        return (TEXT, value)
    if isinstance(value, GeoPoint):  # "!" sorts before the "[" and "{" of lists and maps
        return (OTHER, f"!{float_key(value.latitude)}{float_key(value.longitude)}")
    return (OTHER, json.dumps(value, sort_keys=True, default=str))


def float_key(number: float) -> str:
    """16 hex digits that sort as the number does (NaN first, -0.0 the same as 0.0)."""
    if math.isnan(number):
        return "0" * 16
    bits = struct.unpack(">Q", struct.pack(">d", number + 0.0))[0]  # + 0.0: -0.0 is 0.0
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}"


def _as_float(number: int | float) -> float:
    try:
        return float(number)
    except OverflowError:  # an integer past float64's range
        return math.inf if number > 0 else -math.inf


def index_key(value: Any) -> str:
    """The key of a value in a field index (1 and 1.0 are the same key)."""
    type_rank, inner = rank(value)
    if type_rank == NULL:
        return f"{NULL}:"
    if type_rank == BOOL:
        return f"{BOOL}:{int(inner)}"
    if type_rank == NUMBER:
        return f"{NUMBER}:{float_key(_as_float(inner))}"
    if type_rank == TIME:
        return f"{TIME}:{float_key(value.astimezone(UTC).timestamp())}"
    return f"{type_rank}:{inner}"


def first_of(type_rank: int) -> str:
    """A bound at or below every key of a type."""
    return f"{type_rank}:"


def past(type_rank: int) -> str:
    """A bound above every key of a type."""
    return f"{type_rank};"


def expired_ranges(now: float) -> tuple[tuple[str, str], tuple[str, str]]:
    """The key ranges of expiry values at or before now: epoch seconds, then times."""
    lowest = float_key(-math.inf)
    until = float_key(now)
    return ((f"{NUMBER}:{lowest}", f"{NUMBER}:{until}"), (f"{TIME}:{lowest}", f"{TIME}:{until}"))
