"""The transactional outbox: an event and its deliveries commit with the write that caused it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from oncefire import codec
from oncefire.events import StoredEvent
from oncefire.paths import Pattern
from oncefire.stores.base import DocumentTx, FunctionRecord


@lru_cache(maxsize=1024)
def _pattern(text: str) -> Pattern:
    return Pattern.parse(text)


def subscribers(functions: Sequence[FunctionRecord], event_type: str, source: str) -> list[str]:
    """Names of the registered functions an event of this type and source starts."""
    names = []
    for record in functions:
        if event_type not in record.event_types:
            continue
        if record.kind == "document":
            if _pattern(record.source).match(source) is None:
                continue
        elif record.source != source:
            continue
        names.append(record.name)
    return names


def emit(
    tx: DocumentTx,
    *,
    event_type: str,
    source: str,
    data: dict[str, Any],
    now: float,
    event_id: str | None = None,
    data_json: str | None = None,
) -> StoredEvent | None:
    """Append an event with one delivery per subscribed function; None if its id existed.
    data_json, if given, is codec.dumps(data), made by a caller that had its parts."""
    if data_json is None:
        data_json = codec.dumps(data)  # encoded once: for its size and for the store
    size = len(data_json.encode())
    event = StoredEvent(event_id or codec.new_id(now), event_type, source, now, data, size)
    names = subscribers(tx.functions(), event_type, source)
    is_new = event_id is None
    return event if tx.append(event, names, now, is_new=is_new, data_json=data_json) else None
