"""The catalogue a write consults (registered functions, declared index fields), kept by a
store between transactions while the store's catalogue version stays the same."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from oncefire.stores.base import FunctionRecord

BUMP_SQL = "UPDATE oncefire_catalog SET version = version + 1"
VERSION_SQL = "SELECT version FROM oncefire_catalog"


@dataclass(frozen=True, slots=True)
class Catalog:
    """The functions and index fields of a store as of one catalogue version."""

    version: int
    functions: tuple[FunctionRecord, ...]
    index_fields: dict[str, tuple[str, ...]]  # collection -> fields, sorted

    def fields_of(self, collection: str) -> list[str]:
        """The declared index fields of a collection."""
        return list(self.index_fields.get(collection, ()))


def function_record(row: tuple[str, str, str, str, float]) -> FunctionRecord:
    """A FunctionRecord from a (name, kind, source, event_types, registered_at) row."""
    return FunctionRecord(row[0], row[1], row[2], tuple(row[3].split(",")), row[4])


def fields_by_collection(rows: list[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """(collection, field) rows grouped by collection, each collection's fields sorted."""
    grouped: dict[str, list[str]] = {}
    for collection, field in rows:
        grouped.setdefault(collection, []).append(field)
    return {c: tuple(sorted(f)) for c, f in grouped.items()}


class Fanout(NamedTuple):
    """What a document write makes besides the document, by the catalogue: the functions a
    creation and an update start, and the new data's index entries (None: no declared field)."""

    on_create: list[str]
    on_update: list[str]
    index_entries: dict[str, str] | None


class CatalogCache:
    """The last catalogue a store read, reused while the version in the store is the same.

    Every registration and index declaration bumps the version in its own transaction, so a
    transaction that reads the version (after the locks that order it against those writes)
    knows whether what is kept here is still the catalogue. Threads share one cache: a race
    only costs an extra read, since a catalogue is never kept under a newer version than the
    one it was read at.
    """

    def __init__(self) -> None:
        self._last: Catalog | None = None

    def last(self) -> Catalog | None:
        """The catalogue read last, if any (check its version before relying on it)."""
        return self._last

    def at(self, version: int, load: Callable[[int], Catalog]) -> Catalog:
        """The catalogue at `version`: the kept one, or load(version) read in the caller's
        transaction at or after the moment it read `version`."""
        last = self._last
        if last is not None and last.version == version:
            return last
        self._last = loaded = load(version)
        return loaded
