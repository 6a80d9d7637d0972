"""Events and what a function receives: snapshots, changes, topic messages."""

from __future__ import annotations

import base64
import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from oncefire.clock import to_datetime
from oncefire.errors import InvalidMessageError


class EventType(StrEnum):
    """What happened."""

    DOCUMENT_CREATED = "document.created"
    DOCUMENT_UPDATED = "document.updated"
    DOCUMENT_DELETED = "document.deleted"
    MESSAGE_PUBLISHED = "message.published"
    SCHEDULE_TICK = "schedule.tick"
    HTTP_REQUEST = "http.request"
    ROW_INSERTED = "row.inserted"
    ROW_UPDATED = "row.updated"
    ROW_DELETED = "row.deleted"
    VALUE_CREATED = "value.created"  # a Realtime Database value (oncefire.firebase.db)
    VALUE_UPDATED = "value.updated"
    VALUE_DELETED = "value.deleted"


DOCUMENT_TYPES = frozenset(
    {EventType.DOCUMENT_CREATED, EventType.DOCUMENT_UPDATED, EventType.DOCUMENT_DELETED}
)
ROW_TYPES = frozenset({EventType.ROW_INSERTED, EventType.ROW_UPDATED, EventType.ROW_DELETED})
VALUE_TYPES = frozenset({EventType.VALUE_CREATED, EventType.VALUE_UPDATED, EventType.VALUE_DELETED})


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the store keeps it: immutable, with its JSON payload decoded."""

    id: str
    type: str
    source: str
    time: float
    data: dict[str, Any]
    size: int
    root_id: str | None = None  # the first event of its chain of function writes; None: a root
    depth: int = 0  # how many function writes led to it (see lineage.py)


@dataclass(frozen=True, slots=True)
class DocumentSnapshot:
    """A document as it was at one moment; `exists` is False for a missing document."""

    path: str
    exists: bool
    _data: dict[str, Any] | None = field(default=None, repr=False)
    create_time: datetime | None = None
    update_time: datetime | None = None

    @property
    def id(self) -> str:
        """The document's id (the last path segment)."""
        return self.path.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any] | None:
        """A copy of the fields, or None when the document does not exist."""
        return None if self._data is None else _deep_copy(self._data)

    def get(self, field_path: str, default: Any = None) -> Any:
        """A field by dotted path ('a.b'), or default."""
        value: Any = self._data
        for part in field_path.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return _deep_copy(value)

    @classmethod
    def from_stored(cls, path: str, record: dict[str, Any] | None) -> DocumentSnapshot:
        """A snapshot from the stored form {'data', 'create_time', 'update_time'} or None."""
        if record is None:
            return cls(path, False)
        return cls(
            path,
            True,
            record["data"],
            to_datetime(record["create_time"]),
            to_datetime(record["update_time"]),
        )


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Change:
    """A document before and after a write (either may not exist)."""

    before: DocumentSnapshot
    after: DocumentSnapshot


@dataclass(frozen=True, slots=True)
class RowChange:
    """A row of a watched table before and after a change, as dicts (None where absent)."""

    table: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Message:
    """A message published on a topic: `data` is its JSON value, or the bytes it was published
    as."""

    id: str
    topic: str
    data: Any
    attributes: dict[str, str]
    publish_time: datetime

    @property
    def json(self) -> Any:
        """The message body as JSON: `data` for a JSON message; for one published as bytes,
        those bytes read as JSON text (InvalidMessageError if they are not)."""
        if not isinstance(self.data, bytes):
            return self.data
        try:
            return json.loads(self.data)
        except ValueError:
            raise InvalidMessageError(
                f"The message {self.id} was published as {len(self.data)} bytes that are not "
                "JSON text: read them from message.data."
            ) from None


@dataclass(frozen=True, slots=True)
class Event:
    """What a function receives: the event, its payload view, and this attempt's number."""

    id: str
    type: str
    source: str
    time: datetime
    data: Any
    params: dict[str, str]
    attempt: int
    size: int
    function: str
    raw: dict[str, Any] = field(repr=False)

    @property
    def payload(self) -> dict[str, Any]:
        """The stored JSON payload (what idempotency hashes and dead letters show)."""
        return self.raw


def view_of(event: StoredEvent, *, as_change: bool = False) -> Any:
    """What `event.data` is for a function: snapshot, change, message or tick payload."""
    data = event.data
    if event.type in DOCUMENT_TYPES:
        # Only the snapshots the view shows are made (this runs for every attempt).
        if event.type == EventType.DOCUMENT_CREATED and not as_change:
            return DocumentSnapshot.from_stored(event.source, data.get("after"))
        before = DocumentSnapshot.from_stored(event.source, data.get("before"))
        if event.type == EventType.DOCUMENT_DELETED and not as_change:
            return before
        return Change(before, DocumentSnapshot.from_stored(event.source, data.get("after")))
    if event.type in ROW_TYPES:
        return RowChange(data.get("table", ""), data.get("before"), data.get("after"))
    if event.type == EventType.MESSAGE_PUBLISHED:
        raw = data.get("bytes")  # a message published as bytes: their base64 (messages.py)
        return Message(
            event.id,
            event.source,
            data.get("data") if raw is None else base64.b64decode(raw),
            dict(data.get("attributes") or {}),
            to_datetime(event.time),
        )
    return data


CURRENT_EVENT: ContextVar[Event | None] = ContextVar("oncefire_current_event", default=None)
"""The event of the attempt running in this context (None outside a function)."""

CURRENT_APP: ContextVar[Any] = ContextVar("oncefire_current_app", default=None)
"""The App running the attempt in this context (for helpers such as @idempotent)."""
