"""Scenario 3, latency: write commit -> function start, one write at a time, on idle workers
in other processes (`oncefire worker --processes 2`).

The clock starts when the document write returns (its transaction committed) and stops when
the function's first line runs; the function tells the time (CLOCK_MONOTONIC, one clock for
every process) over a loopback UDP socket. 20 untimed writes come first, and a random 5-25 ms
pause after each start lets the worker go idle before the next write.

    python bench/latency.py --store sqlite --writes 500 --runs 3
"""

from __future__ import annotations

from typing import Any

import workload
from benchlib import LatencyProbe, common_args, log, measure_latency, summarize, write_json
from oncefire_harness import DOC, reset, target, workers

from oncefire.documents import CollectionReference


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--writes", type=int, default=500)
    args = parser.parse_args()
    t = target(args.store)
    runs: list[dict[str, Any]] = []
    for run in range(args.runs):
        reset(t)
        app = workload.build(t.url, "latency")
        app.store  # noqa: B018 - create the schema before the workers start
        col = app.db.collection("bench")
        probe = LatencyProbe()
        try:
            with workers(t, "latency", extra_env=probe.env):
                col.document("ready").set(DOC)
                if probe.wait_for("ready", timeout=60) is None:
                    raise TimeoutError("the oncefire workers did not start within 60 s")

                def submit(key: str, col: CollectionReference = col) -> None:
                    col.document(key).set(DOC)

                result = measure_latency(
                    submit,
                    probe,
                    count=args.writes,
                    warmup=20,
                    prefix=f"r{run}",
                )
        finally:
            probe.close()
            app.close()
        runs.append(result)
        log(
            f"latency on {t.label}, run {run + 1}/{args.runs}: p50 {result['p50_ms']:.2f} ms,"
            f" p99 {result['p99_ms']:.2f} ms ({result['missing']} missing)"
        )
    write_json(
        args.json,
        {
            "scenario": "latency",
            "store": args.store,
            "writes": args.writes,
            "p50_ms": summarize([r["p50_ms"] for r in runs]),
            "p99_ms": summarize([r["p99_ms"] for r in runs]),
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
