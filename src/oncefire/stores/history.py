"""Read-only, grouped queries over recorded history, for `oncefire audit`.

The SQL lives in sql/<dialect>/audit.sql as named queries (`-- name: looping_events`);
each read runs in the store's read-only snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oncefire.stores import queries
from oncefire.stores.base import Store


@dataclass(frozen=True, slots=True)
class LoopingEvent:
    """An event one function ran (or was handed) more often than it should be."""

    function: str
    event_id: str
    attempts: int
    deliveries: int


@dataclass(frozen=True, slots=True)
class DeepLineage:
    """A chain of function writes from one root event, as deep as it went."""

    root_id: str
    depth: int
    function: str
    events: int


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Events of one function that failed with the same error (its first line)."""

    function: str
    error: str
    events: int
    attempts: int


@dataclass(frozen=True, slots=True)
class Halves:
    """A function's attempts and failures (or dead letters) in each half of a window."""

    function: str
    early: int
    late: int
    early_failures: int = 0
    late_failures: int = 0


class History:
    """Grouped reads of attempts and dead letters over a window of time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.queries = queries.load(store.dialect)

    def _rows(self, name: str, **args: Any) -> list[tuple[Any, ...]]:
        with self.store.read() as tx:
            conn = tx.conn  # type: ignore[attr-defined]
            return [tuple(row) for row in conn.execute(self.queries[name], args).fetchall()]

    def looping_events(
        self, since: float, most_attempts: int, most_deliveries: int, limit: int = 50
    ) -> list[LoopingEvent]:
        """Events with more attempts or deliveries than allowed, by attempts, most first."""
        rows = self._rows(
            "looping_events",
            since=since,
            most_attempts=most_attempts,
            most_deliveries=most_deliveries,
            limit=limit,
        )
        return [LoopingEvent(f, e, int(a), int(d)) for f, e, a, d in rows]

    def deep_lineages(self, since: float, least_depth: int, limit: int = 50) -> list[DeepLineage]:
        """Chains of function writes that reached least_depth, deepest first."""
        rows = self._rows("deep_lineages", since=since, least_depth=least_depth, limit=limit)
        return [DeepLineage(r, int(d), f, int(n)) for r, d, f, n in rows]

    def failure_groups(
        self, since: float, least_events: int, limit: int = 50
    ) -> list[FailureGroup]:
        """Errors shared by at least least_events failed events of one function."""
        rows = self._rows("failure_groups", since=since, least_events=least_events, limit=limit)
        return [FailureGroup(f, e or "", int(n), int(a)) for f, e, n, a in rows]

    def attempt_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's attempts and failures before and after middle."""
        rows = self._rows("attempt_halves", since=since, middle=middle)
        return [Halves(f, int(ea), int(la), int(ef), int(lf)) for f, ea, ef, la, lf in rows]

    def dead_letter_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's dead letters made before and after middle."""
        rows = self._rows("dead_letter_halves", since=since, middle=middle)
        return [Halves(f, int(early), int(late)) for f, early, late in rows]
