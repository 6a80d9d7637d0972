"""The CPU an `@idempotent` function costs a worker, in process: one Worker (concurrency 8)
drains N messages of a no-op, then of the same no-op under `@idempotent`, on a fresh SQLite
store each, alternated; this process's CPU time (time.process_time) and wall time an event.
No second process shares the write lock, so the figure is the worker's own work: the record
acquired with the lease, its key and payload hash, its completion with the attempt's ending.

    python bench/ab/idempotent_cpu.py --n 5000 --rounds 2
    BENCH_SRC=/tmp/wt/src PYTHONPATH=/tmp/wt/src python bench/ab/idempotent_cpu.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from oncefire import App, idempotent
from oncefire.events import Event
from oncefire.worker import Worker


def drain(folder: Path, kind: str, n: int) -> tuple[float, float]:
    """(CPU µs, wall µs) an event of one drain of n messages of a no-op, plain or guarded."""
    app = App(f"sqlite:///{folder / kind}.db")

    def noop(event: Event) -> None:
        pass

    app.on_message("t", name="f")(idempotent(lease=60)(noop) if kind == "idempotent" else noop)
    for i in range(n):
        app.publish("t", {"i": i})
    worker = Worker(app.runtime, concurrency=8)
    cpu, wall = time.process_time(), time.perf_counter()
    summary = worker.drain()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    worker.shutdown()
    app.close()
    assert summary.attempts == n, summary
    return cpu / n * 1e6, wall / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for r in range(args.rounds):
        for kind in ("noop", "idempotent"):
            with tempfile.TemporaryDirectory() as folder:
                cpu, wall = drain(Path(folder), kind, args.n)
            print(f"round {r + 1} {kind:>10}: CPU {cpu:6.1f} µs an event, wall {wall:6.1f} µs")


if __name__ == "__main__":
    main()
