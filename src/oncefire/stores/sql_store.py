"""The store operations that are the same on SQLite and PostgreSQL, over named queries.

A dialect class (SqliteStore, PostgresStore) derives from SqlStore and supplies what truly
differs: its connections (`_one`, `_write`, `_snapshot`), leasing, ending and renewing
deliveries, wake-up, migrations, and how a JSON column comes back (`_decode`). Everything
here runs the query of the same name in `sql/<dialect>/*.sql`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from oncefire.clock import Clock
from oncefire.events import StoredEvent
from oncefire.model.buckets import DEDUPE, hour_of
from oncefire.model.rates import RateLimit
from oncefire.stores.base import (
    DeadLetterFilter,
    DeadLetterRow,
    DeadSearchRows,
    FunctionCounts,
    FunctionEntry,
)
from oncefire.stores.catalogue.sql import FunctionOps
from oncefire.stores.connection import Row, Statements
from oncefire.stores.queue.rates import Buckets
from oncefire.stores.queue.sql import Leasing
from oncefire.stores.records.sql import RecordOps
from oncefire.stores.schema import Schema
from oncefire.stores.sql_retention import SqlRetention

if TYPE_CHECKING:
    from oncefire.stores.documents.sql_tx import SqlTx

# Documents indexed per transaction when a field is declared: the write lock is held for one
# chunk at a time, not for the whole collection.
INDEX_CHUNK = 500


def before_solo(candidates: Sequence[Row], is_alone: bool) -> list[int]:
    """The ids a lease takes of due (run_at, id, solo) rows in lease order: those before the
    first solo one, or that one alone when it comes first and the worker is alone."""
    for n, (_, delivery_id, solo) in enumerate(candidates):
        if solo:
            return [delivery_id] if n == 0 and is_alone else [r[1] for r in candidates[:n]]
    return [r[1] for r in candidates]


def is_head_started(free: int, leased: int) -> bool:
    """Whether a lease marks its first delivery started, not ahead: it starts alone, now (one
    slot is free, or it is the only one leased and a slot is free; with no slot free it waits
    for a thread, so whether it ran would not be known)."""
    return free == 1 or (leased == 1 and free >= 1)


def _by_index(where: DeadLetterFilter, *names: str) -> str | None:
    """Which of (all, of a function, of a function's error group) queries serves where by an
    index alone; None when another filter needs the general query."""
    if where.error_contains is not None or where.since is not None or where.until is not None:
        return None
    if where.function is None:
        return names[0] if where.error_group is None else None
    return names[1] if where.error_group is None else names[2]


class SqlStore(Schema, Leasing, SqlRetention, FunctionOps, RecordOps):
    """Catalogue, dead-letter, statistics and @idempotent operations, for both databases."""

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

    # -- rate limits ---------------------------------------------------------------------

    def rate_tokens(self, rates: Mapping[str, RateLimit], now: float) -> dict[str, float]:
        """The tokens each rate-limited function's bucket holds at `now` (read only)."""
        if not rates:
            return {}
        with self._snapshot() as st:
            return Buckets(st, rates, now, lock=False).tokens

    def later_of_key(self, delivery_id: int, limit: int) -> tuple[str | None, list[str]]:
        """A delivery's ordering key (None: it has none) and the ids of up to `limit` events
        of its key that wait behind it."""
        rows = self._one().fetch("later_of_key", {"id": delivery_id, "limit": limit})
        if not rows:
            return None, []
        return rows[0][0], [r[1] for r in rows if r[1] is not None]

    def unkeyed_deliveries(
        self, functions: Sequence[str], limit: int
    ) -> list[tuple[int, str, int, StoredEvent]]:
        """(delivery id, function, attempt, event) of up to limit pending deliveries whose
        ordering key is not computed yet, oldest first."""
        rows = self._one().fetch(
            "unkeyed_deliveries", {"functions": list(functions), "limit": limit}
        )
        return [
            (r[0], r[1], r[2], StoredEvent(r[3], r[4], r[5], r[6], self._decode(r[7]), r[8]))
            for r in rows
        ]

    def key_deliveries(
        self, keys: Sequence[tuple[int, str]], errors: Sequence[tuple[int, str]], now: float
    ) -> None:
        """Set the computed ordering key of each (delivery id, key), and make each (delivery id,
        error) whose key could not be computed a dead letter, in one transaction."""
        with self._write() as st:
            if keys:
                st.execute_many("set_ordering_key", [{"id": i, "key": k} for i, k in keys])
            if errors:
                bury = [{"id": i, "error": e, "now": now} for i, e in errors]
                st.execute_many("bury_unkeyed", bury)

    def next_due(self, functions: Sequence[str]) -> float | None:
        """The earliest run_at of a pending delivery, or None."""
        if not functions:
            return None
        rows = self._one().fetch("next_due", {"functions": list(functions)})
        return None if rows[0][0] is None else float(rows[0][0])

    # -- catalogue -----------------------------------------------------------------------

    def register_functions(self, records: Sequence[FunctionEntry]) -> None:
        """Record functions (a name registered again takes its new trigger)."""
        rows = [
            {
                "name": r.name,
                "kind": r.kind,
                "source": r.source,
                "event_types": ",".join(r.event_types),
                "registered_at": r.registered_at,
                "fields": json.dumps(list(r.fields)) if r.fields else None,
                "attributes": json.dumps(dict(r.attributes)) if r.attributes else None,
            }
            for r in records
        ]
        with self._write() as st:
            st.execute_many("upsert_function", rows)
            for r in records:
                if r.ordering:
                    st.execute("order_function", {"function": r.name, "keyed_by": r.ordering})
                else:
                    st.execute("unorder_function", {"function": r.name})
                if r.ordering != "key":  # deliveries left waiting for a key take one
                    st.execute("unkey_function", {"function": r.name, "keyed_by": r.ordering})
            st.execute("bump_catalog")

    def _index_transaction(self) -> AbstractContextManager[tuple[Statements, SqlTx]]:
        """A write transaction no document write can interleave with."""
        raise NotImplementedError

    def declare_index(
        self,
        collection: str,
        field: str,
        entries_of: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        """Declare an indexed field, then index the documents already there, INDEX_CHUNK a
        transaction, so no write waits long for the lock. From the declaration on, every
        write keeps the field's entries, and a chunk indexes its documents as they are, with
        no write between its read and its entries; queries use the field once all chunks are
        done. A declaration cut off (or running in another process) is taken up again."""
        args = {"collection": collection, "field": field}
        state = self._one().fetch("index_field_declared", args)
        if state and not state[0][0]:
            return  # the common case at every start: built, and no write lock taken
        with self._index_transaction() as (st, _):
            if not st.fetch("index_field_declared", args):
                st.execute("declare_index_field", args)
                st.execute("clear_index_field", args)
                st.execute("bump_catalog")  # writes keep its entries from now on
        after = ""
        while True:
            with self._index_transaction() as (st, tx):
                page = tx.documents_page(collection, after, INDEX_CHUNK)
                if page:
                    entries = entries_of(iter(page))
                    st.execute("clear_index_entries_of", {**args, "paths": [p for p, _ in page]})
                    rows = [{**args, "value": v, "path": p} for p, v in entries.items()]
                    st.execute_many("insert_index_entry", rows)
            if len(page) < INDEX_CHUNK:
                break
            after = page[-1][0]
        with self._index_transaction() as (st, _):
            st.execute("complete_index_field", args)
            st.execute("bump_catalog")  # queries use it from now on

    def expired_paths(
        self, collection: str, field: str, ranges: Sequence[tuple[str, str]], limit: int
    ) -> list[str]:
        """Paths of at most limit documents of a collection whose key of an indexed field
        lies in one of two key ranges, each walked from its lowest key (one index probe)."""
        (numbers_from, numbers_until), (times_from, times_until) = ranges
        args = {
            "collection": collection,
            "field": field,
            "numbers_from": numbers_from,
            "numbers_until": numbers_until,
            "times_from": times_from,
            "times_until": times_until,
            "limit": limit,
        }
        return [row[0] for row in self._one().fetch("expired_paths", args)][:limit]

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

    def count_dedupe_hit(self, function: str, now: float) -> None:
        """Count one duplicate skipped by an idempotency helper."""
        args = {"function": function, "now": now, "hour": hour_of(now)}
        self._one().execute("count_dedupe_hit", args)

    def purge_expired_claims(self, now: float, limit: int) -> int:
        """Delete tx.claim keys and @idempotent records whose expiry has passed; return how many."""
        args = {"now": now, "limit": limit}
        with self._write() as st:
            return st.count("purge_claims", args) + st.count("purge_records", args)
