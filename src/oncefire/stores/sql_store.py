"""The store over named queries: the contracts' shared implementations put together.

SqlStore joins the SQL implementations of each contract (queue/sql.py, documents/sql.py,
records/sql.py, catalogue/sql.py), the schema and retention, and holds the read side (dead
letters, counts, attempts). A dialect class (sqlite/store.py, postgres/store.py) derives from
it and supplies its connections (`_one`, `_write`, `_snapshot`) and what truly differs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from oncefire.clock import Clock
from oncefire.model.buckets import DEDUPE, hour_of
from oncefire.stores.base import (
    DeadLetterFilter,
    DeadLetterRow,
    DeadSearchRows,
    FunctionCounts,
)
from oncefire.stores.catalogue.sql import SqlCatalogue
from oncefire.stores.connection import Row, Statements
from oncefire.stores.documents.sql import SqlDocuments
from oncefire.stores.queue.sql import SqlQueue
from oncefire.stores.queue.sql import is_head_started as is_head_started  # engine/turn.py
from oncefire.stores.reads.contract import ReadModel
from oncefire.stores.reads.sql import SqlReads
from oncefire.stores.records.sql import SqlRecords
from oncefire.stores.schema import Schema
from oncefire.stores.sql_retention import SqlRetention

if TYPE_CHECKING:
    pass


def _by_index(where: DeadLetterFilter, *names: str) -> str | None:
    """Which of (all, of a function, of a function's error group) queries serves where by an
    index alone; None when another filter needs the general query."""
    if where.error_contains is not None or where.since is not None or where.until is not None:
        return None
    if where.function is None:
        return names[0] if where.error_group is None else None
    return names[1] if where.error_group is None else names[2]


class SqlStore(Schema, SqlRetention, SqlQueue, SqlDocuments, SqlCatalogue, SqlRecords):
    """The contracts over named queries for both databases, and the read side."""

    dialect: str
    url: str
    # -- what each dialect supplies ------------------------------------------------------

    def _one(self) -> Statements:
        """Statements each committed on its own (or in this thread's batch)."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Statements]:
        """A write transaction (or this thread's batch)."""
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[Statements]:
        """A read transaction that sees one moment of the store."""
        raise NotImplementedError

    def _decode(self, value: Any) -> Any:
        """A JSON column's value as the driver returns it, decoded."""
        raise NotImplementedError

    def use_clock(self, clock: Clock) -> None:
        """The app's clock, for a dialect that judges leases by the database's clock."""

    @functools.cached_property
    def reads(self) -> ReadModel:
        """What the dashboard, history, audit, cost and stats read, in snapshots."""
        return SqlReads(self._snapshot, self._decode)

    # -- the read side (the read model takes these over) --------------------------------

    # -- dead letters --------------------------------------------------------------------

    @staticmethod
    def _filter(where: DeadLetterFilter, ids: Sequence[int] | None = None) -> dict[str, Any]:
        return {
            "function": where.function,
            "error_contains": where.error_contains,
            "since": where.since,
            "until": where.until,
            "error_group": where.error_group,
            "has_ids": ids is not None,
            "ids": list(ids or ()),
        }

    def _dead_row(self, r: Row) -> DeadLetterRow:
        return DeadLetterRow(
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], self._decode(r[8]), bool(r[9])
        )

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]:
        """Dead letters matching where, newest first, older than before_id if given."""
        args = {**self._filter(where), "before_id": before_id, "limit": limit}
        name = _by_index(where, "list_dead_newest", "list_dead_of_function", "list_dead_of_group")
        return [self._dead_row(r) for r in self._one().fetch(name or "list_dead", args)]

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None:
        """One dead letter by id, or None."""
        rows = self._one().fetch("get_dead", {"id": delivery_id})
        return self._dead_row(rows[0]) if rows else None

    def count_dead(self, where: DeadLetterFilter) -> int:
        """How many dead letters match where."""
        name = _by_index(where, "count_dead_all", "count_dead_of_function", "count_dead_of_group")
        return int(self._one().fetch(name or "count_dead", self._filter(where))[0][0])

    def count_dead_up_to(self, function: str, error_group: str, cap: int) -> int:
        """How many dead letters a function's error group holds, read through its index up
        to cap + 1 of them (cap + 1: more than cap)."""
        args = {"function": function, "error_group": error_group, "cap": cap}
        return int(self._one().fetch("count_dead_of_group_up_to", args)[0][0])

    def search_dead(
        self, function: str, text: str, before_id: int | None, window: int, limit: int
    ) -> DeadSearchRows:
        """Search the window newest dead letters of a function (older than before_id) for
        errors containing text: the window's size and matches, and the newest matches."""
        args = {"function": function, "error_contains": text, "before_id": before_id}
        with self._snapshot() as st:
            searched, matched, oldest = st.fetch("search_dead_window", {**args, "window": window})[
                0
            ]
            if oldest is None:
                return DeadSearchRows(0, 0, None, False, [])
            found = st.fetch("search_dead_matches", {**args, "oldest_id": oldest, "limit": limit})
            older = st.fetch(
                "list_dead_of_function", {"function": function, "before_id": oldest, "limit": 1}
            )
        rows = [self._dead_row(r) for r in found]
        return DeadSearchRows(int(searched), int(matched), int(oldest), bool(older), rows)

    def replay(self, where: DeadLetterFilter, now: float, ids: Sequence[int] | None) -> int:
        """Move dead deliveries back to pending at attempt 0 with their original payload."""
        args = {**self._filter(where, ids), "now": now}
        return len(self._one().fetch("replay_dead", args))

    def dismiss(self, where: DeadLetterFilter, ids: Sequence[int] | None) -> int:
        """Delete dead deliveries, their attempts and their events left without one; how many."""
        with self._write() as st:
            rows = st.fetch("dismiss_dead", self._filter(where, ids))
            self._forget_dismissed(st, rows)
        return len(rows)

    # -- history -------------------------------------------------------------------------

    def counts(self, since: float) -> dict[str, FunctionCounts]:
        """Raw figures per function since a time (whole hours), from the hour buckets."""
        args = {"since_hour": hour_of(since)}
        out: dict[str, FunctionCounts] = {}

        def entry(name: str) -> FunctionCounts:
            return out.setdefault(name, FunctionCounts({}, {}, {}, 0, 0))

        most: dict[str, int] = {}
        dedupe: dict[str, int] = {}
        with self._snapshot() as st:
            for (name,) in st.fetch("function_names"):
                entry(name)
            for name, outcome, bin_index, n, number in st.fetch("bucket_figures", args):
                if outcome == DEDUPE:
                    dedupe[name] = dedupe.get(name, 0) + int(n)
                    continue
                counts = entry(name)
                counts.outcomes[outcome] = counts.outcomes.get(outcome, 0) + int(n)
                counts.histogram[int(bin_index)] = counts.histogram.get(int(bin_index), 0) + int(n)
                most[name] = max(most.get(name, 0), int(number))
            for name, state, n in st.fetch("state_counts"):
                entry(name).states[state] = int(n)
        for name in {*most, *dedupe}:
            base = entry(name)
            out[name] = FunctionCounts(
                base.outcomes, base.histogram, base.states, most.get(name, 0), dedupe.get(name, 0)
            )
        return out

    def bucket_sums(self, since: float) -> list[tuple[str, str, int, float, float]]:
        """(function, outcome, attempts, seconds, CPU seconds) since a time (whole hours)."""
        rows = self._one().fetch("bucket_sums", {"since_hour": hour_of(since)})
        return [(r[0], r[1], int(r[2]), float(r[3]), float(r[4])) for r in rows]

    def delivery_states(self, event_id: str) -> list[tuple[str, str, int]]:
        """(function, state, attempt) of each delivery of an event."""
        rows = self._one().fetch("delivery_states", {"event_id": event_id})
        return [(r[0], r[1], r[2]) for r in rows]

    def attempts(self, event_id: str) -> list[dict[str, Any]]:
        """The attempts of an event's deliveries, oldest first."""
        names = (
            "delivery_id",
            "function",
            "number",
            "worker",
            "started_at",
            "finished_at",
            "outcome",
            "error",
        )
        rows = self._one().fetch("attempts_of_event", {"event_id": event_id})
        return [dict(zip(names, row, strict=True)) for row in rows]
