"""The read model: what the dashboard, the metrics, the alerts, history, audit, cost and the
unrouted warning read from a store, and the rows it gives back.

Every read runs in one snapshot of the store, through the store's named statements (so the
fault hooks see it too); no caller runs SQL of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from oncefire.events import StoredEvent

Row = dict[str, Any]


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


@dataclass(frozen=True, slots=True)
class OutcomeSums:
    """A function's attempts of one outcome over a window, and what they spent."""

    function: str
    outcome: str
    attempts: int
    seconds: float
    cpu_seconds: float
    reads: int
    writes: int


@dataclass(frozen=True, slots=True)
class Awaited:
    """A source whose unrouted events are warned about."""

    kind: str  # 'document', 'message' or 'row'
    source: str  # the document pattern without wildcard names, the topic, or the table
    reason: str  # 'function' (a function took it) or 'kept' (an operator named it)
    name: str | None = None  # the function, for reason 'function'


class ReadModel(Protocol):
    """Read-only views of a store's history, by what the readers ask."""

    # -- audit: grouped reads over a window of history -----------------------------------

    def looping_events(
        self, since: float, most_attempts: int, most_deliveries: int, limit: int = 50
    ) -> list[LoopingEvent]:
        """Events with more attempts or deliveries than allowed, by attempts, most first."""

    def deep_lineages(self, since: float, least_depth: int, limit: int = 50) -> list[DeepLineage]:
        """Chains of function writes that reached least_depth, deepest first."""

    def failure_groups(
        self, since: float, least_events: int, limit: int = 50
    ) -> list[FailureGroup]:
        """Errors shared by at least least_events failed events of one function."""

    def attempt_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's attempts and failures before and after middle."""

    def dead_letter_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's dead letters made before and after middle."""

    # -- cost and metrics ----------------------------------------------------------------

    def cost_sums(self, since: float) -> list[OutcomeSums]:
        """Sums per function and outcome from the hour that holds `since` on."""

    def metric_totals(self) -> list[tuple[str, str, int, int, float]]:
        """(function, kind, bin, count, duration sum) of the totals that only grow."""

    def states_by_function(self) -> list[tuple[str, str, int]]:
        """(function, state, deliveries) of the pending, running and dead deliveries now."""

    def outcomes_since(self, since: float) -> list[tuple[str, str, int]]:
        """(function, outcome, attempts) of the attempts that ended since a time."""

    # -- events, attempts and functions --------------------------------------------------

    def event(self, event_id: str) -> StoredEvent | None:
        """One event by id, or None."""

    def event_deliveries(self, event_id: str) -> list[Row]:
        """The deliveries of an event (id, function, state, attempt, run_at, error, dead_at,
        created_at), oldest first."""

    def recent_attempts(self, function: str, limit: int, outcome: str | None = None) -> list[Row]:
        """A function's most recently ended attempts (of one outcome), newest first."""

    def attempts_per_hour(self, function: str, since: float) -> list[tuple[int, int, int]]:
        """(hour slot from since, attempts, failed) from the hour buckets."""

    def pending_backlog(self, now: float) -> list[tuple[str, int, float | None]]:
        """(function, pending deliveries, run_at of the oldest due one) of each function."""

    def function_states(self) -> list[Row]:
        """name, last_seen, paused_at and paused_reason of every stored function."""

    # -- dead letters, the audit log and unrouted events ---------------------------------

    def dead_groups(self, function: str, limit: int) -> list[tuple[str, int, float]]:
        """(error's first line, dead letters, newest dead_at) of a function's newest dead
        letters, largest group first."""

    def dead_since(self, since: float, limit: int) -> list[tuple[int, float]]:
        """(id, dead_at) of the dead letters made since a time, oldest first."""

    def audit_log(self, limit: int, before: int | None = None) -> list[Row]:
        """Recorded operator actions, newest first, older than the id `before` if given."""

    def unrouted_origins(self) -> list[tuple[str, str, int]]:
        """(kind, origin, events) of the unrouted events, most first: kind is the type's
        first part ('document', 'message', 'row'), origin a collection, topic or table."""

    def awaited_sources(self) -> list[Awaited]:
        """Every awaited source."""


class StoreReads(Protocol):
    """A store's read model, as `store.reads` (part of the Store protocol)."""

    @property
    def reads(self) -> ReadModel:
        """What the dashboard, history, audit, cost and stats read."""
