"""An in-process drain of N no-op events by one worker: wall and CPU time per event, and the
voluntary context switches an event (a thread that slept and was woken: a hand-over), for a
quick A/B of two trees of src (PYTHONPATH picks the one measured; trees before the Runtime
take the App). --store sqlite or postgres; --per-event runs it with one slot and batches of
one (ONCEFIRE_CONCURRENCY=1, ONCEFIRE_BATCH_SIZE=1: a commit per event).

    PYTHONPATH=<tree>/src python bench/ab/pg_drain.py --n 20000 --runs 1
    PYTHONPATH=<tree>/src python bench/ab/pg_drain.py --n 5000 --per-event --store sqlite
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import workload
from harness import prefill, reset, target

import oncefire
from oncefire.worker import Worker


def commits(url: str) -> int | None:
    """The transactions committed in a PostgreSQL store's database so far (None on SQLite)."""
    if not url.startswith("postgres"):
        return None
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--per-event", action="store_true")
    args = parser.parse_args()
    if args.per_event:
        os.environ["ONCEFIRE_CONCURRENCY"] = "1"
        os.environ["ONCEFIRE_BATCH_SIZE"] = "1"
    t = target(args.store)
    tree = str(Path(oncefire.__file__).parent.parent.parent)
    for _ in range(args.runs):
        reset(t)
        app = workload.build(t.url, "noop")
        prefill(app, args.n)
        before = commits(t.url)
        worker = Worker(cast(Any, getattr(app, "runtime", app)))  # App before the Runtime
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        cpu0, wall0 = time.process_time(), time.perf_counter()
        summary = worker.drain()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches
        worker.shutdown()
        app.close()
        assert summary.attempts == args.n, summary
        per = 1e6 / args.n
        mode = "per-event" if args.per_event else "defaults"
        made = ""
        if before is not None:
            time.sleep(1.5)  # the closed sessions' counts reach pg_stat_database
            made = f", {(commits(t.url) or 0) - before - 1:,} commits"
        print(
            f"{tree} {args.store} {mode}: wall {wall * per:.1f} µs/event,"
            f" CPU {cpu * per:.1f} µs/event, {switches / args.n:.2f} voluntary context switches"
            f" an event{made}"
        )


if __name__ == "__main__":
    main()
