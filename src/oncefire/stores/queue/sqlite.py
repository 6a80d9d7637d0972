"""SQLite: the rows of attempts that just ended, and their hour buckets, written in the
transaction that ends their deliveries; the deliveries whose lease ran out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from oncefire.events import StoredEvent
from oncefire.model import buckets
from oncefire.stores.connection import Row, SqliteStatements
from oncefire.stores.queue.types import Ending, Lease, Leased


def write_attempts(
    st: SqliteStatements, ended: Sequence[Row], results: Mapping[int, Ending]
) -> None:
    """The attempt rows of deliveries that just ended: an attempt is written once, when
    it ends; until then its delivery tells of it."""
    rows: list[Row] = []  # in insert_attempt's column order: bound by position
    figures: list[buckets.Figures] = []
    for delivery_id, event_id, function, number, worker, marked_at in ended:
        result = results[delivery_id]
        started = next(
            t for t in (result.started_at, marked_at, result.finished_at) if t is not None
        )
        finished, outcome, error = result.end, result.outcome, result.error
        cpu, reads, writes = result.cpu_seconds, result.reads, result.writes
        row = (delivery_id, event_id, function, number, worker, started, finished, outcome, error)
        rows.append((*row, cpu, reads, writes))
        figures.append((function, number, started, finished, outcome, cpu, reads, writes))
    st.execute_many("insert_attempt", rows)
    # In the same transaction: the buckets never disagree with the attempt rows. Their
    # triggers add the same to the totals that only grow (schema 27).
    st.execute_many("add_to_bucket", buckets.rows_for(figures))


def expired_claims(
    st: SqliteStatements, event_of: Callable[[Row], StoredEvent], rows: list[Row], now: float
) -> list[Leased]:
    """Leased deliveries of rows (id, token, function, attempt, event id, started_at, ahead)."""
    ids = list({r[4] for r in rows})
    events = {e[0]: e for e in st.fetch("events_by_id", {"ids": ids})} if rows else {}
    return [
        Leased.run_out(Lease(r[0], r[1]), (r[2], r[3], r[5]), event_of(events[r[4]]), r[6], now)
        for r in rows
    ]
