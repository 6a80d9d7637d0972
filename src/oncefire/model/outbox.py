"""The transactional outbox: an event and its deliveries commit with the write that caused it."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from oncefire.events import DOCUMENT_TYPES, EventType, StoredEvent
from oncefire.model import codec
from oncefire.model.lineage import CURRENT_LINEAGE, write_auth
from oncefire.model.messages import carries
from oncefire.model.paths import Pattern
from oncefire.model.trigger_kind import TriggerKind
from oncefire.stores.base import DocumentTx, FunctionEntry
from oncefire.tables import row_matches

log = logging.getLogger(__name__)
# Bound once: an enum member looked up on its class costs more than the compare, once per
# function per write.
_ROW, _DOCUMENT, _DATABASE = TriggerKind.ROW, TriggerKind.DOCUMENT, TriggerKind.DATABASE


@lru_cache(maxsize=1024)
def _pattern(text: str, depth: str = "document") -> re.Pattern[str]:
    """The regular expression of a path pattern (Pattern.regex)."""
    return Pattern.parse(text, depth=depth).regex()


def _matching(
    functions: Sequence[FunctionEntry], event_type: str, source: str, data: Any = None
) -> list[FunctionEntry]:
    return [
        record
        for record in functions
        if event_type in record.event_types and _takes(record, event_type, source, data)
    ]


def _takes(record: FunctionEntry, event_type: str, source: str, data: Any = None) -> bool:
    """Whether a function of one of this event's types takes an event of this source."""
    if record.kind == _ROW:  # data, when given, lets a column filter see what changed
        return row_matches(record.source, event_type, source, data)
    if record.kind == _DOCUMENT:
        return _pattern(record.source).fullmatch(source) is not None
    if record.kind == _DATABASE:  # a reference pattern of any depth
        return _pattern(record.source, "any").fullmatch(source) is not None
    # MESSAGE, SCHEDULE, HTTP: the source is a name
    return record.source == source and carries(record.attributes, data)


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


def document_subscribers(
    functions: Sequence[FunctionEntry], path: str
) -> tuple[list[str], list[str]] | None:
    """(what a creation of the document at path starts, what an update starts), as
    subscribers() answers them, the functions walked once; None when a function an update
    starts has a field filter (is_filtered: then it depends on the document before)."""
    on_create, on_update = [], []
    for record in functions:
        creates = EventType.DOCUMENT_CREATED in record.event_types
        updates = EventType.DOCUMENT_UPDATED in record.event_types
        # Whether a function takes a source does not depend on which of the two it is (only
        # a row update's column filter looks at the type).
        if not (creates or updates) or not _takes(record, EventType.DOCUMENT_CREATED, path):
            continue
        if updates and record.fields:
            return None
        if creates:
            on_create.append(record.name)
        if updates:
            on_update.append(record.name)
    return on_create, on_update


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
    at: float = 0,
) -> StoredEvent | None:
    """Append an event with one delivery per subscribed function, due now (or at `at` if
    later); None if its id existed. data_json, if given, is codec.dumps(data), made by a
    caller that had its parts.

    Written while a function runs, the event inherits that function's lineage; one that
    reaches the depth limit is stored with its deliveries dead (a loop stopped). A document
    event also names who wrote it, when that is known (lineage.write_auth), under "auth"."""
    auth = write_auth() if event_type in DOCUMENT_TYPES else None
    if auth is not None:
        data = {**data, "auth": auth}
        if data_json is not None:  # an object's JSON: the key goes before its closing brace
            data_json = f'{data_json[:-1]},"auth":{codec.dumps(auth)}}}'
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
    if not tx.append(event, names, max(now, at), is_new=is_new, data_json=data_json):
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
