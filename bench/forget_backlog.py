"""How long forgetting a function with a backlog takes: n pending deliveries of the benchmark
function (written by prefill, no worker running) become dead letters in one transaction
(`app.functions.forget`), timed, on each store, for each size.

On PostgreSQL the dead-letter counter was kept by a row trigger whose upserts of one row in
one transaction each walk the versions the earlier ones left (quadratic); since schema 21 the
bury keeps the counter with one upsert. Linear shows as a time per dead letter that stays put
as n grows.

    python bench/forget_backlog.py --store postgres --sizes 10000,40000
    BENCH_PG_PORT=55432 python bench/forget_backlog.py --store both --json out.json
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import workload
from benchlib import log, write_json
from harness import postgres_unavailable, prefill, reset, target

FUNCTION = "noop"


def forget_time(kind: str, n: int) -> dict[str, Any]:
    t = target(kind, "forget")
    reset(t)
    app = workload.build(t.url, FUNCTION)
    try:
        prefill(app, n)
        started = time.perf_counter()
        buried = app.functions.forget(FUNCTION)
        seconds = time.perf_counter() - started
        counted = app.dead_letters.count(FUNCTION)
    finally:
        app.close()
    if buried != n or counted != n:
        raise SystemExit(f"{kind}: {n:,} pending, {buried:,} buried, {counted:,} counted")
    log(f"{kind}: forget with {n:,} pending: {seconds:.2f} s ({seconds / n * 1e6:.1f} µs each)")
    return {"store": kind, "n": n, "seconds": seconds, "us_per_dead_letter": seconds / n * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", default="10000,40000")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    if "postgres" in kinds and (why := postgres_unavailable()):
        raise SystemExit(f"PostgreSQL: {why}")
    sizes = [int(s) for s in args.sizes.split(",")]
    results = [forget_time(kind, n) for kind in kinds for n in sizes]
    if args.json:
        write_json(args.json, {"runs": results})


if __name__ == "__main__":
    main()
