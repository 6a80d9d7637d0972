"""The transactional outbox: an event and its deliveries commit with the write that caused it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from oncefire import codec
from oncefire.events import EventType, StoredEvent
from oncefire.lineage import CURRENT_LINEAGE
from oncefire.paths import Pattern
from oncefire.stores.base import DocumentTx, FunctionEntry
from oncefire.tables import row_matches

log = logging.getLogger(__name__)


@lru_cache(maxsize=1024)
def _pattern(text: str) -> Pattern:
    return Pattern.parse(text)


def _matching(
    functions: Sequence[FunctionEntry], event_type: str, source: str, data: Any = None
) -> list[FunctionEntry]:
    found = []
    for record in functions:
        if event_type not in record.event_types:
            continue
        if record.kind == "row":  # data, when given, lets a column filter see what changed
            if not row_matches(record.source, event_type, source, data):
                continue
        elif record.kind == "document":
            if _pattern(record.source).match(source) is None:
                continue
        elif record.source != source:
            continue
        found.append(record)
    return found


def subscribers(
    functions: Sequence[FunctionEntry],
    event_type: str,
    source: str,
    data: Any = None,
) -> list[str]:
    """Names of the registered functions an event of this type and source starts; an update
    (with its data, {'before', 'after'}) starts a function with a field filter only when one
    of its fields changed."""
    return [
        record.name
        for record in _matching(functions, event_type, source, data)
        if not record.fields
        or event_type != EventType.DOCUMENT_UPDATED
        or data is None
        or has_changed(record.fields, data)
    ]


def is_filtered(functions: Sequence[FunctionEntry], event_type: str, source: str) -> bool:
    """Whether a function an event of this type and source starts has a field filter, so
    its subscribers depend on the document before the write."""
    return event_type == EventType.DOCUMENT_UPDATED and any(
        record.fields for record in _matching(functions, event_type, source)
    )


def has_changed(fields: Sequence[str], data: dict[str, Any]) -> bool:
    """Whether a document event's data ({'before', 'after'}) changes one of these dotted
    field paths (a field added, removed or given another value)."""
    before = (data.get("before") or {}).get("data") or {}
    after = (data.get("after") or {}).get("data") or {}
    return any(_value_at(before, path) != _value_at(after, path) for path in fields)


def _value_at(document: dict[str, Any], path: str) -> str | None:
    """The canonical JSON of a field by dotted path, or None when it is missing."""
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return codec.canonical(value)


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
    data_json, if given, is codec.dumps(data), made by a caller that had its parts.

    Written while a function runs, the event inherits that function's lineage; one that
    reaches the depth limit is stored with its deliveries dead (a loop stopped)."""
    if data_json is None:
        data_json = codec.dumps(data)  # encoded once: for its size and for the store
    size = len(data_json.encode())
    lineage = CURRENT_LINEAGE.get()
    root_id, depth = (None, 0) if lineage is None else (lineage.root_id, lineage.depth)
    event = StoredEvent(
        event_id or codec.new_id(now), event_type, source, now, data, size, root_id, depth
    )
    functions = tx.functions()
    names = subscribers(functions, event_type, source, data)
    is_new = event_id is None
    if not tx.append(event, names, now, is_new=is_new, data_json=data_json):
        return None
    if not names and is_filtered(functions, event_type, source):
        # Functions take this event's source, and their field filters declined it: it is
        # not unrouted (not counted as such, not offered to functions registered later).
        tx.mark_routed(event.id, "unrouted", None)
    error = None if lineage is None else lineage.loop_error
    if error is not None and names:
        tx.bury_event(event.id, error, now)
        log.warning("event %s on %s: %s; dead letter", event.id, source, error)
    return event
