"""Scenario 6, idempotency overhead: the per-event cost of `tx.claim` and `@idempotent`.

Four functions, each drained from a backlog of N events by 2 worker processes (as in the
throughput scenario): `noop` and `@idempotent noop`; a transaction writing one document,
and the same write under `if tx.claim(event.id)`. Cost per event = drain seconds / events;
a helper's overhead is the difference to its base line. The statements per event are also
counted in in-process drains of 200 events, one at a time, the median of 5 drains (SQLite: a
trace callback on every connection, which also counts commits, a write outside BEGIN ...
COMMIT being one; PostgreSQL: every statement psycopg sends, one round trip each), which is
what "one extra statement round trip" is about.

    python bench/idempotency_overhead.py --store sqlite --n 3000 --runs 3
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from collections import Counter
from typing import Any

import workload
from benchlib import LoadSampler, common_args, facts, log, summarize, write_json
from drain import drain_only
from oncefire_harness import prefill, reset, target

from oncefire.engine.worker import Worker

VARIANTS = ("noop", "idempotent", "write", "write_claim")
PAIRS = {"idempotent": "noop", "write_claim": "write"}
COUNTED_EVENTS = 200
COUNT_DRAINS = 5
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def is_in_attempt() -> bool:
    """Whether a statement runs in an attempt's thread (the function's own), not in the
    worker's loop (the main thread of the counted drain)."""
    return threading.current_thread() is not threading.main_thread()


class StatementCounter:
    """Counts the SQL statements every SQLite connection opened from now on runs."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._connect = sqlite3.connect

    def _trace(self, conn: sqlite3.Connection, sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
        # A write outside BEGIN ... COMMIT commits on its own: a commit too.
        is_autocommit_write = word in WRITES and not conn.in_transaction
        with self._lock:
            self.counts["statements"] += 1
            self.counts["in_attempts"] += is_in_attempt()
            if word in ("COMMIT", "END") or is_autocommit_write:
                self.counts["commits"] += 1

    def install(self) -> None:
        original = self._connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = original(*args, **kwargs)
            conn.set_trace_callback(lambda sql: self._trace(conn, sql))
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]

    def uninstall(self) -> None:
        sqlite3.connect = self._connect


class RoundTripCounter:
    """Counts the statements psycopg sends (each execute is one round trip; BEGIN and
    COMMIT are statements too), by wrapping Cursor.execute and executemany."""

    def __init__(self) -> None:
        import psycopg

        self.cursor = psycopg.Cursor
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._saved = (self.cursor.execute, self.cursor.executemany)

    def install(self) -> None:
        execute, executemany = self._saved
        counts, lock = self.counts, self._lock

        def counted(method: Any) -> Any:
            def call(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
                text = query.decode() if isinstance(query, bytes) else str(query)
                word = text.lstrip().split(None, 1)[0].upper() if text.strip() else "?"
                with lock:
                    counts["statements"] += 1
                    counts["in_attempts"] += is_in_attempt()
                    if word in ("COMMIT", "END"):
                        counts["commits"] += 1
                return method(cursor, query, *args, **kwargs)

            return call

        self.cursor.execute = counted(execute)  # type: ignore[method-assign]
        self.cursor.executemany = counted(executemany)  # type: ignore[method-assign]

    def uninstall(self) -> None:
        self.cursor.execute, self.cursor.executemany = self._saved  # type: ignore[method-assign]


def count_statements(store: str, function: str, events: int) -> dict[str, float]:
    """Statements (and, on SQLite, commits) per event for one function, on a fresh store
    drained in this process."""
    t = target(store, "count") if store == "sqlite" else target(store)
    reset(t)
    counter: StatementCounter | RoundTripCounter = (
        StatementCounter() if store == "sqlite" else RoundTripCounter()
    )
    counter.install()
    try:
        app = workload.build(t.url, function)
        prefill(app, events)
        counter.counts.clear()
        # One attempt at a time: threads racing for SQLite's write lock would add the BEGINs
        # they retry to the count, a figure of contention rather than of the helper.
        worker = Worker(app.runtime, concurrency=1)
        try:
            summary = worker.drain()
        finally:
            worker.shutdown()
        app.close()
    finally:
        counter.uninstall()
    assert summary.attempts == events, summary
    out = {
        "statements_per_event": counter.counts["statements"] / events,
        "in_attempts_per_event": counter.counts["in_attempts"] / events,
    }
    if store == "sqlite":
        out["commits_per_event"] = counter.counts["commits"] / events
    return out


def median_count(store: str, function: str, events: int, times: int) -> dict[str, float]:
    """count_statements over a few drains, the median of each figure: how many turns a drain
    takes varies with timing (a turn writes what ended within 50 ms), and with it the
    worker's statements an event."""
    drains = [count_statements(store, function, events) for _ in range(times)]
    return {name: statistics.median(d[name] for d in drains) for name in drains[0]}


def measure(t: Any, args: Any, per_event: dict[str, list[float]]) -> bool:
    """Drain each variant's backlog args.runs times, its cost per event into per_event;
    whether a run was capped."""
    capped = False
    for run in range(args.runs):
        log(f"idempotency overhead on {t.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        for variant in VARIANTS:
            result = drain_only(t, variant, args.n, args.max_seconds)
            capped = capped or result["capped"]
            per_event[variant].append(1e6 / result["rate"] if result["rate"] else float("nan"))
            log(f"  {variant}: {per_event[variant][-1]:,.0f} us/event")
    return capped


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument(
        "--count-drains",
        type=int,
        default=COUNT_DRAINS,
        help=f"in-process drains whose statements are counted (default {COUNT_DRAINS})",
    )
    args = parser.parse_args()
    t = target(args.store)
    per_event: dict[str, list[float]] = {v: [] for v in VARIANTS}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with LoadSampler() as sampler:
        capped = measure(t, args, per_event)
        events = min(COUNTED_EVENTS, args.n)
        sql_per_event = {
            v: median_count(args.store, v, events, args.count_drains) for v in VARIANTS
        }
    out: dict[str, Any] = {
        "scenario": "idempotency_overhead",
        "store": args.store,
        "n": args.n,
        "us_per_event": {v: summarize(per_event[v]) for v in VARIANTS},
        "overhead_us": {
            helper: summarize(
                [a - b for a, b in zip(per_event[helper], per_event[base], strict=True)]
            )
            for helper, base in PAIRS.items()
        },
        "capped": capped,
        "sql_per_event": sql_per_event,
        "facts": facts(sampler, started),  # when, at which commit, and the load beside it
    }
    write_json(args.json, out)


if __name__ == "__main__":
    main()
