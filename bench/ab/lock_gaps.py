"""What a SQLite worker does while it holds the write lock, per event: an in-process drain of N
events by one worker, one slot, batches of one (a commit an event, as with per-event
acknowledgement); every statement SQLite runs is timed, and so is the time between two
statements of one write transaction (BEGIN IMMEDIATE to COMMIT): the Python the worker runs
with the lock held, which every other process waiting for the lock waits for too.

    PYTHONPATH=<tree>/src python bench/ab/lock_gaps.py --n 3000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class Clock:
    """The write transactions' time, split into BEGIN, statements, COMMIT and the gaps
    between them (named by the statements on either side)."""

    def __init__(self) -> None:
        self.is_open = False
        self.last = 0.0
        self.previous = ""
        self.spent = {"begin": 0.0, "statements": 0.0, "commit": 0.0}
        self.gaps: dict[str, float] = {}

    def reset(self) -> None:
        self.spent = dict.fromkeys(self.spent, 0.0)
        self.gaps.clear()

    def run(self, sql: str, call: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        text = " ".join(sql.split())
        if self.is_open:
            gap = f"{self.previous} -> {text[:40]}"
            self.gaps[gap] = self.gaps.get(gap, 0.0) + started - self.last
        try:
            return call()
        finally:
            ended = time.perf_counter()
            word = text[:15].upper()
            if word.startswith("BEGIN IMMEDIATE"):
                self.is_open = True
                self.spent["begin"] += ended - started
            elif word.startswith(("COMMIT", "ROLLBACK")):
                if self.is_open:
                    self.spent["commit"] += ended - started
                self.is_open = False
            elif self.is_open:
                self.spent["statements"] += ended - started
            self.last, self.previous = ended, text[:40]


CLOCK = Clock()


class TimedConnection(sqlite3.Connection):
    """A connection whose statements CLOCK times."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return cast(
            sqlite3.Cursor, CLOCK.run(sql, lambda: super(TimedConnection, self).execute(sql, *args))
        )

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return cast(
            sqlite3.Cursor,
            CLOCK.run(sql, lambda: super(TimedConnection, self).executemany(sql, *args)),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    os.environ["ONCEFIRE_CONCURRENCY"] = "1"
    os.environ["ONCEFIRE_BATCH_SIZE"] = "1"
    connect = sqlite3.connect

    def timed(*a: Any, **kw: Any) -> sqlite3.Connection:
        return cast(sqlite3.Connection, connect(*a, **{**kw, "factory": TimedConnection}))

    sqlite3.connect = timed  # type: ignore[assignment]
    import workload
    from harness import prefill, reset, target

    from oncefire.worker import Worker

    t = target("sqlite")
    reset(t)
    app = workload.build(t.url, "noop")
    prefill(app, args.n)
    worker = Worker(cast(Any, getattr(app, "runtime", app)))  # App before the Runtime
    CLOCK.reset()
    summary = worker.drain()
    worker.shutdown()
    app.close()
    assert summary.attempts == args.n, summary
    per = 1e6 / args.n
    gaps = sum(CLOCK.gaps.values())
    held = sum(CLOCK.spent.values()) + gaps
    print(
        f"write lock held {held * per:.0f} µs an event: BEGIN {CLOCK.spent['begin'] * per:.0f}, "
        f"statements {CLOCK.spent['statements'] * per:.0f}, COMMIT "
        f"{CLOCK.spent['commit'] * per:.0f}, Python between them {gaps * per:.0f}"
    )
    for gap, spent in sorted(CLOCK.gaps.items(), key=lambda item: -item[1])[:8]:
        print(f"{spent * per:8.1f} µs  {gap}")


if __name__ == "__main__":
    main()
