"""Which value events a Realtime Database write makes: one per path that a registered
reference pattern matches and whose value the write changed, with its value before and after.
A write at W changes W, its ancestors, and the descendants whose value differs (found by
walking the old and new values together); the writer reads the tree from the shortest
ancestor of W that a pattern watches (`top_of`). A write that changes nothing makes no event.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from oncefire.events import EventType
from oncefire.firebase.db.values import Path, value_at
from oncefire.model.paths import Pattern


@dataclass(frozen=True, slots=True)
class ValueChange:
    """A path whose value a write changed, with the value before and after (None: none)."""

    path: Path
    before: Any
    after: Any

    @property
    def event_type(self) -> str:
        """value.created, value.updated or value.deleted."""
        if self.before is None:
            return EventType.VALUE_CREATED
        return EventType.VALUE_DELETED if self.after is None else EventType.VALUE_UPDATED


@lru_cache(maxsize=1024)
def pattern(text: str) -> Pattern:
    """A reference pattern of any depth ('messages/{pushId}/original')."""
    return Pattern.parse(text, depth="any")


def is_watched(path: Path, patterns: Sequence[Pattern]) -> bool:
    """Whether a pattern matches the path (never the root)."""
    joined = "/".join(path)
    return bool(path) and any(p.match(joined) is not None for p in patterns)


def top_of(written: Path, patterns: Sequence[Pattern]) -> Path:
    """The shortest ancestor of written (or written itself) that a pattern watches; written
    when none does."""
    for depth in range(1, len(written)):
        if is_watched(written[:depth], patterns):
            return written[:depth]
    return written


def changes(
    top: Path, before: Any, after: Any, written: Path, patterns: Sequence[Pattern]
) -> list[ValueChange]:
    """The watched paths a write at written changed, given the values at top before and
    after it (written lies at or under top)."""
    found = []
    for depth in range(len(top), len(written)):
        path = written[:depth]
        if is_watched(path, patterns):
            found.append(_change(path, top, before, after))
    inner = written[len(top) :]
    found += _walk(written, value_at(before, inner), value_at(after, inner), patterns)
    return found


def same(one: Any, other: Any) -> bool:
    """Whether two stored values are the same value (True is not 1; 1 is 1.0)."""
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(same(one[k], other[k]) for k in one)
    if isinstance(one, dict) or isinstance(other, dict):
        return False
    return bool(one == other) and (isinstance(one, str) == isinstance(other, str))


def _change(path: Path, top: Path, before: Any, after: Any) -> ValueChange:
    inner = path[len(top) :]
    return ValueChange(path, value_at(before, inner), value_at(after, inner))


def _walk(
    path: Path, before: Any, after: Any, patterns: Sequence[Pattern]
) -> Iterator[ValueChange]:
    if same(before, after):
        return
    if is_watched(path, patterns):
        yield ValueChange(path, before, after)
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    for key in sorted(old.keys() | new.keys()):
        yield from _walk((*path, key), old.get(key), new.get(key), patterns)
