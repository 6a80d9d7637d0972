"""The records the function catalogue passes: a function as registered, as listed, and the
catalogue a document write consults (functions and index fields) with what a write starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class FunctionEntry:
    """A registered function as the store knows it, so any writer can fan out to it."""

    name: str
    kind: str  # "document", "message" or "schedule"
    source: str  # path pattern, topic or schedule name
    event_types: tuple[str, ...]
    registered_at: float
    ordering: str | None = None  # "document" or "key" (ordering_key): run one at a time
    fields: tuple[str, ...] = ()  # an update starts it only if one of these changed; () any
    attributes: tuple[tuple[str, str], ...] = ()  # a message starts it only if it carries these


@dataclass(frozen=True, slots=True)
class Catalog:
    """The functions and index fields of a store as of one catalogue version."""

    version: int
    functions: tuple[FunctionEntry, ...]
    index_fields: dict[str, tuple[str, ...]]  # collection -> fields, sorted
    building: frozenset[tuple[str, str]] = frozenset()  # (collection, field) still indexing

    def fields_of(self, collection: str) -> list[str]:
        """The declared index fields of a collection (a write keeps each one's entries)."""
        return list(self.index_fields.get(collection, ()))

    def complete_fields_of(self, collection: str) -> list[str]:
        """The index fields of a collection a query can use: declared and fully built."""
        return [f for f in self.fields_of(collection) if (collection, f) not in self.building]


class Fanout(NamedTuple):
    """What a document write makes besides the document, by the catalogue: the functions a
    creation and an update start, and the new data's index entries (None: no declared field)."""

    on_create: list[str]
    on_update: list[str]
    index_entries: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class FunctionRow:
    """A stored function with what an operator needs to judge it."""

    name: str
    kind: str
    source: str
    event_types: tuple[str, ...]
    registered_at: float
    last_seen: float | None
    paused_at: float | None
    paused_reason: str | None
    pending: int
