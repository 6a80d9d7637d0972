"""Where a SQLite write or a per-event drain spends its time, statement by statement: every
statement SQLite runs for N document writes (--what writes: one document with one trigger,
a transaction each) or for a drain of N events acknowledged one at a time (--what per-event:
one slot, batches of one) is timed, with the time outside SQLite beside it. For an A/B of two
trees of src (PYTHONPATH picks the one measured; trees before the Runtime take the App):

    PYTHONPATH=<tree>/src python bench/ab/statement_times.py --what writes --n 3000
    PYTHONPATH=<tree>/src python bench/ab/statement_times.py --what per-event --n 3000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPENT: dict[str, float] = {}
RUNS: Counter[str] = Counter()


def _key(sql: str) -> str:
    return " ".join(sql.split())[:90]


def _add(sql: str, spent: float) -> None:
    SPENT[sql] = SPENT.get(sql, 0.0) + spent
    RUNS[sql] += 1


class TimedConnection(sqlite3.Connection):
    """A connection that adds each statement's time to SPENT, by its text."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return super().execute(sql, *args)
        finally:
            _add(_key(sql), time.perf_counter() - started)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return super().executemany(sql, *args)
        finally:
            _add("(many) " + _key(sql), time.perf_counter() - started)


def _install() -> None:
    connect = sqlite3.connect

    def timed(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs["factory"] = TimedConnection
        return cast(sqlite3.Connection, connect(*args, **kwargs))

    sqlite3.connect = timed  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--what", choices=["writes", "per-event"], default="writes")
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    if args.what == "per-event":
        os.environ["ONCEFIRE_CONCURRENCY"] = "1"
        os.environ["ONCEFIRE_BATCH_SIZE"] = "1"
    _install()
    import workload
    from harness import DOC, prefill, reset, target

    from oncefire.worker import Worker

    t = target("sqlite")
    reset(t)
    app = workload.build(t.url, "noop")
    col = app.db.collection("bench")
    if args.what == "writes":
        for i in range(200):  # untimed: the catalogue read, the statements prepared
            col.document(f"warm{i}").set(DOC)
    else:
        prefill(app, args.n)
        worker = Worker(cast(Any, getattr(app, "runtime", app)))  # App before the Runtime
    SPENT.clear()
    RUNS.clear()
    started = time.perf_counter()
    if args.what == "writes":
        for i in range(args.n):
            col.document(f"d{i}").set(DOC)
    else:
        summary = worker.drain()
        assert summary.attempts == args.n, summary
    wall = time.perf_counter() - started
    if args.what == "per-event":
        worker.shutdown()
    app.close()
    per = 1e6 / args.n
    inside = sum(SPENT.values())
    print(
        f"{args.what}: wall {wall * per:.0f} µs an event, in SQLite {inside * per:.0f}, "
        f"outside {(wall - inside) * per:.0f}"
    )
    for sql, spent in sorted(SPENT.items(), key=lambda item: -item[1])[:10]:
        print(f"{spent * per:8.1f} µs {RUNS[sql] / args.n:5.2f} a time  {sql}")


if __name__ == "__main__":
    main()
