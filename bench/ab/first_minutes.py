"""Write -> start latency over the first minutes of a new store: the worker processes start on an
empty store, one producer writes --rate documents a second (one transaction each) for
--seconds, and the latency (from a write's commit to its function's first line) is reported
for each --every seconds, with when autovacuum last analysed the deliveries table.

    python bench/ab/first_minutes.py --store postgres --seconds 180
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import flowing
import psycopg
import workload
from benchlib import percentile, wait_until
from harness import DOC, Backlog, prefill, reset, target, workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--every", type=float, default=15.0)
    args = parser.parse_args()
    t = target(args.store)
    reset(t)
    app = workload.build(t.url, flowing.FUNCTION)
    app.store  # noqa: B018 - the schema, before the workers start
    starts = flowing.Starts()
    backlog = Backlog(t, flowing.FUNCTION)
    col = app.db.collection("bench")
    commits: list[float] = []
    try:
        with workers(t, flowing.FUNCTION, extra_env=starts.env):
            prefill(app, 200, prefix="w")
            wait_until(lambda: backlog() == 0, 120, "the warm-up events to run")
            start = time.monotonic()
            while (due := start + len(commits) / args.rate) < start + args.seconds:
                time.sleep(max(0.0, due - time.monotonic()))
                col.document(f"k{len(commits)}").set(DOC)
                commits.append(time.monotonic())
            wait_until(lambda: backlog() == 0, 120, "the events to run")
            time.sleep(0.3)  # the last start reports in flight
    finally:
        backlog.close()
        starts.close()
        app.close()
    if t.kind == "postgres":
        with psycopg.connect(t.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT last_autoanalyze, last_autovacuum FROM pg_stat_user_tables"
                " WHERE relname = 'oncefire_deliveries'"
            ).fetchone() or (None, None)
        print(f"deliveries last autoanalysed {row[0]}, last vacuumed by autovacuum {row[1]}")
    spans: dict[int, list[float]] = {}
    for n, commit in enumerate(commits):
        started = starts.stamps.get(f"k{n}")
        if started is not None:
            spans.setdefault(int((commit - start) // args.every), []).append(
                (started - commit) * 1000
            )
    for span, ms in sorted(spans.items()):
        low = span * args.every
        print(
            f"{low:5.0f}-{low + args.every:5.0f} s: p50 {percentile(ms, 50):.2f} ms,"
            f" p99 {percentile(ms, 99):.2f} ms ({len(ms)} writes)"
        )


if __name__ == "__main__":
    main()
