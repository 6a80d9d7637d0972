"""How long a SQLite drain holds the write lock per event: every write transaction (BEGIN
IMMEDIATE to COMMIT) of an in-process drain of --n documents' events by one worker is timed.
With one process nothing waits for the lock, so the figure is the lock's hold time alone,
what two worker processes take turns on; beside it, the drain's wall and CPU time per event.

    python bench/lock_time.py --n 50000
    PYTHONPATH=<another tree>/src python bench/lock_time.py   # the same, on other code
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from oncefire import App
from oncefire.stores import sqlite_connections


def measure(n: int) -> dict[str, float]:
    """Drain n events in-process; the write lock's hold time, wall and CPU per event (µs)."""
    held = [0.0, 0.0]
    real = sqlite_connections.SqliteConnections.transaction

    @contextlib.contextmanager
    def timed(self: Any, mode: str = "IMMEDIATE") -> Iterator[Any]:
        if self.in_batch or mode != "IMMEDIATE":  # joins a transaction, or only reads
            with real(self, mode) as conn:
                yield conn
            return
        started = time.perf_counter()
        with real(self, mode) as conn:
            yield conn
        held[0] += time.perf_counter() - started
        held[1] += 1

    with tempfile.TemporaryDirectory() as folder:
        app = App(f"sqlite:///{folder}/lock.db")
        app.on_document_created("bench/{id}", retry=False)(lambda event: None)
        with app.store.batch():
            for i in range(n):
                app.db.document(f"bench/{i}").set({"n": i, "text": "x" * 100})
        setattr(sqlite_connections.SqliteConnections, "transaction", timed)  # noqa: B010
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            summary = app.drain()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            setattr(sqlite_connections.SqliteConnections, "transaction", real)  # noqa: B010
            app.close()
    assert summary["succeeded"] == n, summary
    per = 1e6 / n
    return {
        "lock_us": held[0] * per,
        "transactions": held[1],
        "wall_us": wall * per,
        "cpu_us": cpu * per,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.runs):
        m = measure(args.n)
        print(
            f"write lock {m['lock_us']:.1f} µs/event ({m['transactions']:.0f} transactions), "
            f"wall {m['wall_us']:.1f} µs/event, CPU {m['cpu_us']:.1f} µs/event"
        )


if __name__ == "__main__":
    main()
