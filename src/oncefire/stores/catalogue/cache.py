"""The catalogue a write consults (registered functions, declared index fields), kept by a
store between transactions while the store's catalogue version stays the same."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from oncefire.stores.catalogue.types import Catalog, Fanout, FunctionEntry

__all__ = [
    "Catalog",
    "CatalogCache",
    "Fanout",
    "building_fields",
    "fields_by_collection",
    "function_entry",
]


def function_entry(
    row: tuple[str, str, str, str, float, str | None, str | None],
) -> FunctionEntry:
    """A FunctionEntry from a (name, kind, source, event_types, registered_at, fields,
    attributes) row; fields is a JSON list or NULL, attributes a JSON object or NULL."""
    name, kind, source, event_types, registered_at, fields, attributes = row
    return FunctionEntry(
        name,
        kind,
        source,
        tuple(event_types.split(",")),
        registered_at,
        fields=tuple(json.loads(fields)) if fields else (),
        attributes=tuple(sorted(json.loads(attributes).items())) if attributes else (),
    )


def fields_by_collection(rows: Sequence[Sequence[Any]]) -> dict[str, tuple[str, ...]]:
    """(collection, field, building) rows grouped by collection, each collection's fields
    sorted."""
    grouped: dict[str, list[str]] = {}
    for collection, field, *_ in rows:
        grouped.setdefault(collection, []).append(field)
    return {c: tuple(sorted(f)) for c, f in grouped.items()}


def building_fields(rows: Sequence[Sequence[Any]]) -> frozenset[tuple[str, str]]:
    """The (collection, field) of the rows whose index is still being built."""
    return frozenset((row[0], row[1]) for row in rows if row[2])


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
