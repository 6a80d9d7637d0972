"""Where a PostgreSQL document write spends its time, from the writer's side: oncefire's
`doc.set` (one trigger) against the same rows by one plain statement (bench/plain_sql.py),
alternated, each timed on the wall and on the thread's CPU, with the time spent inside
psycopg's execute (parameters, round trip, the server's work and commit); then oncefire's
own Python alone, psycopg's execute answered at once without the server. The server's side
alone: bench/pg_server_write.sh.

    python bench/ab/pg_write_split.py --n 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
import workload
from harness import DOC, reset, target
from plain_sql import PlainSqlWriter

IN_EXECUTE = [0.0]


def timed_execute(real: Any) -> Any:
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(self, *args, **kwargs)
        finally:
            IN_EXECUTE[0] += time.perf_counter() - started

    return execute


class Answered:
    """What psycopg's execute returns, without asking the server: a created document."""

    description = (("oncefire_set_document",),)
    rowcount = 1

    def fetchall(self) -> list[tuple[str]]:
        return [("created",)]


def timed(write: Callable[[str], Any], n: int, tag: str) -> tuple[float, float, float]:
    """Wall, thread CPU and time inside execute, in µs a write (keys tag0, tag1, ...)."""
    IN_EXECUTE[0] = 0.0
    cpu, wall = time.thread_time(), time.perf_counter()
    for i in range(n):
        write(f"{tag}{i}")
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return wall / n * 1e6, cpu / n * 1e6, IN_EXECUTE[0] / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    t = target("postgres")
    reset(t)
    app = workload.build(t.url, "noop")
    col = app.db.collection("bench")
    plain = PlainSqlWriter(t)
    real = psycopg.Connection.execute
    psycopg.Connection.execute = timed_execute(real)  # type: ignore[method-assign]
    got: dict[str, list[tuple[float, float, float]]] = {"oncefire": [], "plain SQL": []}

    def once(key: str) -> None:
        col.document(key).set(DOC)

    for r in range(args.rounds):
        got["oncefire"].append(timed(once, args.n, f"o{r}-"))
        got["plain SQL"].append(timed(plain.write_one, args.n, f"p{r}-"))
    psycopg.Connection.execute = lambda *a, **k: Answered()  # type: ignore[method-assign, assignment]
    alone = [timed(once, args.n * 5, f"s{r}-") for r in range(3)]
    psycopg.Connection.execute = real  # type: ignore[method-assign]
    for name, runs in got.items():
        wall, cpu, inside = (statistics.median(x[k] for x in runs) for k in range(3))
        print(
            f"{name:9s}: wall {wall:4.0f} µs a write, thread CPU {cpu:4.0f}, inside execute"
            f" {inside:4.0f}, outside {wall - inside:4.0f} (medians of {args.rounds})"
        )
    print(f"oncefire's Python alone: {statistics.median(x[1] for x in alone):.0f} µs CPU a write")
    plain.close()
    app.close()


if __name__ == "__main__":
    main()
