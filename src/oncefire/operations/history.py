"""History: one event with every delivery's attempts, a function's recent attempts, its
failures per hour, the pending backlog, dead letters grouped by error, and the totals."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from oncefire.errors import ConfigError, EventNotFoundError
from oncefire.model.buckets import HOUR, hour_of
from oncefire.model.totals import FunctionTotals, fold
from oncefire.operations.redaction import redact

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

OUTCOMES = ("succeeded", "failed", "timeout", "crashed", "expired", "permanent")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution of a delivery; finished_at and outcome are None while it runs."""

    delivery_id: int
    function: str
    number: int
    worker: str
    started_at: float
    finished_at: float | None
    outcome: str | None
    error: str | None
    event_id: str = ""

    @property
    def duration(self) -> float | None:
        """Seconds it ran, once it ended."""
        return None if self.finished_at is None else self.finished_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "duration": self.duration}


@dataclass(frozen=True, slots=True)
class EventHistory:
    """An event (payload redacted) and the attempts of each of its deliveries."""

    id: str
    type: str
    source: str
    time: float
    data: Any
    deliveries: list[dict[str, Any]]
    root_id: str | None = None  # the first event of its chain of function writes; None: a root
    depth: int = 0  # how many function writes led to it (loop protection, see lineage.py)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Backlog:
    """A function's pending deliveries and how long the oldest due one has waited."""

    pending: int
    oldest_age: float | None


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Dead letters of a function whose error's first line (120 characters) is the same."""

    error: str
    count: int
    last_at: float


class History:
    """`app.history`: read-only views of events, attempts, backlog and dead-letter groups."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def event(self, event_id: str) -> EventHistory:
        """One event and every delivery's attempt history, or EventNotFoundError."""
        store = self._rt.read_store
        found = store.reads.event(event_id)
        if found is None:
            raise EventNotFoundError(f"No event {event_id!r} is stored (or it was purged).")
        attempts = [Attempt(**a).to_dict() for a in store.attempts(event_id)]
        deliveries = []
        for row in store.reads.event_deliveries(event_id):
            mine = [a for a in attempts if a["delivery_id"] == row["id"]]
            deliveries.append({**row, "attempts": mine})
        return EventHistory(
            found.id,
            found.type,
            found.source,
            found.time,
            redact(found.data),
            deliveries,
            found.root_id,
            found.depth,
        )

    def executions(
        self, function: str, *, outcome: str | None = None, limit: int = 50
    ) -> list[Attempt]:
        """A function's most recently ended attempts, newest first (of one outcome)."""
        if not 1 <= limit <= 500:
            raise ConfigError(f"limit={limit}: list between 1 and 500 attempts at a time.")
        if outcome is not None and outcome not in OUTCOMES:
            raise ConfigError(f"Unknown outcome {outcome!r}: use one of {', '.join(OUTCOMES)}.")
        found = self._rt.read_store.reads.recent_attempts(function, limit, outcome)
        return [
            Attempt(
                r["delivery_id"],
                function,
                r["number"],
                r["worker"],
                r["started_at"],
                r["finished_at"],
                r["outcome"],
                r["error"],
                r["event_id"],
            )
            for r in found
        ]

    def attempts_per_hour(self, function: str, hours: int = 24) -> list[tuple[int, int]]:
        """(attempts, failed) in each of the last `hours` clock hours (the current one last),
        oldest first, from the hour buckets."""
        since = hour_of(self._rt.clock.now()) - (hours - 1) * HOUR
        out = [(0, 0)] * hours
        for hour, attempts, failed in self._rt.read_store.reads.attempts_per_hour(function, since):
            if 0 <= hour < hours:
                out[hour] = (attempts, failed)
        return out

    def backlog(self) -> dict[str, Backlog]:
        """Each function's pending deliveries and the age of its oldest due one."""
        now = self._rt.clock.now()
        out = {}
        for function, pending, oldest_due in self._rt.read_store.reads.pending_backlog(now):
            age = None if oldest_due is None else now - oldest_due
            out[function] = Backlog(pending, age)
        return out

    def totals(self, functions: Iterable[str] = ()) -> dict[str, FunctionTotals]:
        """What each function has counted since the store began, never purged (the counters
        of /metrics); each of `functions` is there, at zero if it counted nothing yet."""
        return fold(self._rt.read_store.reads.metric_totals(), functions)

    def dead_letter_groups(self, function: str, limit: int = 20) -> list[ErrorGroup]:
        """A function's dead letters grouped by their error's first line, largest first."""
        found = self._rt.read_store.reads.dead_groups(function, limit)
        return [ErrorGroup(error, count, last_at) for error, count, last_at in found]

    def delivery_attempts(self, event_id: str, delivery_id: int) -> list[Attempt]:
        """The attempts of one delivery of an event, oldest first."""
        found = self._rt.read_store.attempts(event_id)
        return [Attempt(**a) for a in found if a["delivery_id"] == delivery_id]
