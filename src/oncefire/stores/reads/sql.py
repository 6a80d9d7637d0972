"""The read model of both SQL stores: each read is a named query of `sql/<dialect>/*.sql`
(dashboard.sql, audit.sql, cost.sql, unrouted.sql) run in one snapshot through the store's
statements. The dialects differ only in their SQL, so one class serves both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model.buckets import hour_of
from oncefire.stores.connection import NO_ARGS, Args, Statements
from oncefire.stores.reads.contract import (
    Awaited,
    DeepLineage,
    FailureGroup,
    Halves,
    LoopingEvent,
    OutcomeSums,
    Row,
)

# The columns of the queries whose rows are given by name, in their SELECT order.
DELIVERY = ("id", "function", "state", "attempt", "run_at", "error", "dead_at", "created_at")
ATTEMPT = (
    "id",
    "delivery_id",
    "event_id",
    "number",
    "worker",
    "started_at",
    "finished_at",
    "outcome",
    "error",
)
FUNCTION_STATE = ("name", "last_seen", "paused_at", "paused_reason")
AUDIT = ("id", "at", "actor", "action", "function", "target", "count", "detail")


def named(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Row]:
    """Rows as dicts of their column names."""
    return [dict(zip(columns, row, strict=True)) for row in rows]


class SqlReads:
    """The ReadModel over a SQL store's snapshots."""

    def __init__(
        self,
        snapshot: Callable[[], AbstractContextManager[Statements]],
        decode: Callable[[Any], Any],
    ) -> None:
        self._snapshot = snapshot
        self._decode = decode

    def _fetch(self, name: str, args: Args = NO_ARGS) -> list[tuple[Any, ...]]:
        with self._snapshot() as st:
            return [tuple(row) for row in st.fetch(name, args)]

    # -- audit ---------------------------------------------------------------------------

    def looping_events(
        self, since: float, most_attempts: int, most_deliveries: int, limit: int = 50
    ) -> list[LoopingEvent]:
        """Events with more attempts or deliveries than allowed, by attempts, most first."""
        args = {
            "since": since,
            "most_attempts": most_attempts,
            "most_deliveries": most_deliveries,
            "limit": limit,
        }
        rows = self._fetch("looping_events", args)
        return [LoopingEvent(f, e, int(a), int(d)) for f, e, a, d in rows]

    def deep_lineages(self, since: float, least_depth: int, limit: int = 50) -> list[DeepLineage]:
        """Chains of function writes that reached least_depth, deepest first."""
        args = {"since": since, "least_depth": least_depth, "limit": limit}
        return [
            DeepLineage(r, int(d), f, int(n)) for r, d, f, n in self._fetch("deep_lineages", args)
        ]

    def failure_groups(
        self, since: float, least_events: int, limit: int = 50
    ) -> list[FailureGroup]:
        """Errors shared by at least least_events failed events of one function."""
        args = {"since": since, "least_events": least_events, "limit": limit}
        rows = self._fetch("failure_groups", args)
        return [FailureGroup(f, e or "", int(n), int(a)) for f, e, n, a in rows]

    def attempt_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's attempts and failures before and after middle."""
        rows = self._fetch("attempt_halves", {"since": since, "middle": middle})
        return [Halves(f, int(ea), int(la), int(ef), int(lf)) for f, ea, ef, la, lf in rows]

    def dead_letter_halves(self, since: float, middle: float) -> list[Halves]:
        """Each function's dead letters made before and after middle."""
        rows = self._fetch("dead_letter_halves", {"since": since, "middle": middle})
        return [Halves(f, int(early), int(late)) for f, early, late in rows]

    # -- cost and metrics ----------------------------------------------------------------

    def cost_sums(self, since: float) -> list[OutcomeSums]:
        """Sums per function and outcome from the hour that holds `since` on."""
        rows = self._fetch("cost_sums", {"since_hour": hour_of(since)})
        return [
            OutcomeSums(str(f), str(o), int(n), float(s), float(c), int(r), int(w))
            for f, o, n, s, c, r, w in rows
        ]

    def metric_totals(self) -> list[tuple[str, str, int, int, float]]:
        """(function, kind, bin, count, duration sum) of the totals that only grow."""
        rows = self._fetch("metric_totals")
        return [(str(f), str(k), int(b), int(n), float(d)) for f, k, b, n, d in rows]

    def states_by_function(self) -> list[tuple[str, str, int]]:
        """(function, state, deliveries) of the pending, running and dead deliveries now."""
        return [(str(f), str(s), int(n)) for f, s, n in self._fetch("states_by_function")]

    def outcomes_since(self, since: float) -> list[tuple[str, str, int]]:
        """(function, outcome, attempts) of the attempts that ended since a time."""
        rows = self._fetch("outcomes_since", {"since": since})
        return [(str(f), str(o), int(n)) for f, o, n in rows]

    # -- events, attempts and functions --------------------------------------------------

    def event(self, event_id: str) -> StoredEvent | None:
        """One event by id, or None."""
        rows = self._fetch("event", {"id": event_id})
        if not rows:
            return None
        id_, type_, source, time, data, size, root_id, depth = rows[0]
        return StoredEvent(id_, type_, source, time, self._decode(data), size, root_id, depth)

    def event_deliveries(self, event_id: str) -> list[Row]:
        """The deliveries of an event, oldest first."""
        return named(DELIVERY, self._fetch("event_deliveries", {"event_id": event_id}))

    def recent_attempts(self, function: str, limit: int, outcome: str | None = None) -> list[Row]:
        """A function's most recently ended attempts (of one outcome), newest first."""
        if outcome is None:
            rows = self._fetch("recent_attempts", {"function": function, "limit": limit})
        else:
            args = {"function": function, "outcome": outcome, "limit": limit}
            rows = self._fetch("recent_attempts_by_outcome", args)
        return named(ATTEMPT, rows)

    def attempts_per_hour(self, function: str, since: float) -> list[tuple[int, int, int]]:
        """(hour slot from since, attempts, failed) from the hour buckets."""
        rows = self._fetch("attempts_per_hour", {"function": function, "since": since})
        return [(int(h), int(a), int(f)) for h, a, f in rows]

    def pending_backlog(self, now: float) -> list[tuple[str, int, float | None]]:
        """(function, pending deliveries, run_at of the oldest due one) of each function."""
        rows = self._fetch("pending_backlog", {"now": now})
        return [(str(f), int(n), None if due is None else float(due)) for f, n, due in rows]

    def function_states(self) -> list[Row]:
        """name, last_seen, paused_at and paused_reason of every stored function."""
        return named(FUNCTION_STATE, self._fetch("function_states"))

    # -- dead letters, the audit log and unrouted events ---------------------------------

    def dead_groups(self, function: str, limit: int) -> list[tuple[str, int, float]]:
        """(error's first line, dead letters, newest dead_at) of a function's newest dead
        letters, largest group first."""
        rows = self._fetch("dead_groups", {"function": function, "limit": limit})
        return [(str(e), int(n), float(at)) for e, n, at in rows]

    def dead_since(self, since: float, limit: int) -> list[tuple[int, float]]:
        """(id, dead_at) of the dead letters made since a time, oldest first."""
        rows = self._fetch("dead_since", {"since": since, "limit": limit})
        return [(int(i), at) for i, at in rows]  # dead_at as stored: it is part of a mark's key

    def audit_log(self, limit: int, before: int | None = None) -> list[Row]:
        """Recorded operator actions, newest first, older than the id `before` if given."""
        if before is None:
            return named(AUDIT, self._fetch("audit_log", {"limit": limit}))
        return named(AUDIT, self._fetch("audit_log_before", {"limit": limit, "before": before}))

    def unrouted_origins(self) -> list[tuple[str, str, int]]:
        """(kind, origin, events) of the unrouted events, most first."""
        return [(str(k), str(o), int(n)) for k, o, n in self._fetch("unrouted_origins")]

    def awaited_sources(self) -> list[Awaited]:
        """Every awaited source."""
        return [Awaited(*row) for row in self._fetch("awaited_sources")]
